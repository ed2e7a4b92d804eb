import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from taxonomy.analysis.report import render_report
from taxonomy.schemas import Taxonomy
from tests import run_fixture
from tests.chromium import Browser, find_chromium
from tests.conftest import invoke, offline_devai_run

SECTIONS = (
    "taxonomy",
    "capabilities",
    "criteria",
    "shares",
    "label-map",
    "hierarchy",
    "confidence",
    "constraints",
    "heatmap",
    "breakdown",
    "cost",
)
FIGURES = ("fig-shares", "fig-label-map", "fig-heatmap", "fig-breakdown")


class Page(HTMLParser):
    """Collects ids, the <svg> count inside each <figure id>, tables, links and text."""

    def __init__(self, html: str):
        super().__init__()
        self.ids: set[str] = set()
        self.svgs_in: dict[str, int] = {}
        self.tables = 0
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.scripts = 0
        self.text: list[str] = []
        self._figure: str | None = None
        self._section: str | None = None
        self.section_text: dict[str, list[str]] = {}
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "section":
            self._section = a.get("id")
        if tag == "figure":
            self._figure = a.get("id")
        if tag == "svg" and self._figure:
            self.svgs_in[self._figure] = self.svgs_in.get(self._figure, 0) + 1
        self.tables += tag == "table"
        self.scripts += tag == "script"
        for key in ("src", "href", "xlink:href", "data", "action", "poster"):
            if a.get(key):
                self.links.append((tag, key, a[key]))

    def handle_endtag(self, tag):
        if tag == "figure":
            self._figure = None
        if tag == "section":
            self._section = None

    def handle_data(self, data):
        self.text.append(data)
        if self._section:
            self.section_text.setdefault(self._section, []).append(data)

    def section(self, name: str) -> str:
        return " ".join(" ".join(self.section_text.get(name, [])).split())


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> Path:
    run = run_fixture.write_run(tmp_path_factory.mktemp("full") / "run")
    render_report(run)
    return run


@pytest.fixture(scope="module")
def page(full_run) -> Page:
    return Page((full_run / "report.html").read_text(encoding="utf-8"))


def test_every_section_and_chart(page):
    for sid in SECTIONS:
        assert sid in page.ids, sid
    for fid in FIGURES:
        assert page.svgs_in.get(fid) == 1, fid
    # taxonomy, breakdown, two gap tables, cost, failures
    assert page.tables >= 6


def test_self_contained(full_run, page):
    html = (full_run / "report.html").read_text(encoding="utf-8")
    external = [link for link in page.links if link[2].lower().startswith(("http://", "https://", "//"))]
    assert external == []
    assert "<link" not in html and "@import" not in html and "url(http" not in html
    # Only in-page anchors and data: URIs may be referenced at all.
    assert all(v.startswith(("#", "data:")) for _, _, v in page.links), page.links


def test_text_is_escaped(full_run, page):
    html = (full_run / "report.html").read_text(encoding="utf-8")
    # Two inline scripts (the criteria data and the page's code), neither loading anything.
    assert page.scripts == 2 and "<script src" not in html
    assert '<script>alert("x")' not in html and "&lt;script&gt;" in html
    # In the JSON data no `<` is left that could end the <script> element.
    data = html.split('<script type="application/json" id="criteria-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and "\\u003cscript\\u003e" in data
    assert "fixture &lt;pipeline&gt;" in html


def test_header_table_and_cost(page):
    text = " ".join(" ".join(page.text).split())
    for expected in ("fixture <pipeline>", "offline", "fake-model-1", "2025-01-02"):
        assert expected in text
    tax = page.section("taxonomy")
    assert "file_artifact_inspection_capability" in tax.replace(" ", "")
    assert "20.0%" in tax and "10.0%" in tax  # taxonomy share and Stage-3 primary share
    cost = page.section("cost")
    for expected in ("discover", "tag", "total", "4,200", "$0.0138"):
        assert expected in cost, expected
    assert "Stage 3 (tag)" in cost


def test_missing_pieces_say_not_computed(tmp_path):
    run = run_fixture.write_run(tmp_path / "run", breakdown=False, stage3=False, embeddings=False, manifest=False)
    out = render_report(run, tmp_path / "elsewhere" / "r.html")
    assert out == tmp_path / "elsewhere" / "r.html" and not (run / "report.html").exists()
    p = Page(out.read_text(encoding="utf-8"))
    for sid in SECTIONS:
        assert sid in p.ids
    for sid in ("breakdown", "heatmap", "label-map", "cost"):
        assert "not computed" in p.section(sid), sid
    assert "fig-breakdown" not in p.ids and "fig-heatmap" not in p.ids
    assert p.svgs_in.get("fig-shares") == 1  # taxonomy shares need only taxonomy.json


def _criteria_data(html: str) -> dict:
    raw = html.split('<script type="application/json" id="criteria-data">', 1)[1].split("</script>", 1)[0]
    return json.loads(raw)


def test_every_criterion_is_in_the_table_data(full_run):
    data = _criteria_data((full_run / "report.html").read_text(encoding="utf-8"))
    crit = pl.read_parquet(full_run / "criteria.parquet")
    tags = pl.read_parquet(full_run / "stage3_tags.parquet")
    assert [r[0] for r in data["rows"]] == crit["criterion_id"].to_list()
    assert data["caps"] == run_fixture.taxonomy().names() and len(data["colors"]) == len(data["caps"])
    by_id = dict(zip(tags["criterion_id"], tags["tags"]))
    for cid, task, text, weight, caps, score in data["rows"]:
        assert [data["caps"][c] for c in caps] == list(by_id[cid]), cid  # ranked, primary first
        assert data["tasks"][task] == crit.filter(pl.col("criterion_id") == cid)["task_id"][0]
    assert run_fixture.HOSTILE in [r[2] for r in data["rows"]]  # the text itself, unharmed


def test_capabilities_show_central_and_borderline_criteria(page):
    text = page.section("capabilities")
    for name in run_fixture.CAPS:
        assert name in text.replace(" ", ""), name
    # Each capability's central criteria are ones whose primary tag it is (fixture: primary index per text).
    for cap_i, name in enumerate(run_fixture.CAPS):
        own = [t for rows in run_fixture.TASKS.values() for t, c, _ in rows if c == cap_i]
        assert any(" ".join(t.split()) in text for t in own), name
    assert "Most central" in text and "Borderline" in text and "Tag rank" in text


def test_label_map_points_carry_hover_text(full_run):
    html = (full_run / "report.html").read_text(encoding="utf-8")
    svg = html.split('<figure id="fig-label-map">', 1)[1].split("</svg>", 1)[0]
    titles = re.findall(r"<circle [^>]*><title>(.*?)</title></circle>", svg, re.S)
    labels = pl.read_parquet(full_run / "clusters.parquet")["label"].to_list()
    assert len(titles) == len(labels)
    first = next(t for t in titles if t.startswith("check_file_saved_at_path_capability"))
    assert "micro-cluster: file_existence_check_capability" in first
    assert "capability: file_artifact_inspection_capability" in first
    assert any("capability: (unmapped)" in t for t in titles)  # the orphan cluster


def test_hierarchy_lists_every_micro_cluster_under_its_capability(full_run):
    html = (full_run / "report.html").read_text(encoding="utf-8")
    tree = html.split('<section id="hierarchy">', 1)[1].split("</section>", 1)[0]
    for cap, micros in run_fixture.CAPS.items():
        block = tree.split(f"<code>{cap}</code>", 1)[1].split("</details>", 1)[0]
        for micro, labels in micros.items():
            assert f"<code>{micro}</code>" in block and labels[0] in block


def test_low_confidence_none_of_the_above_and_stage1_failures(full_run, page, tmp_path):
    text = page.section("confidence")
    assert "None of the above (1)" in text and "no tag (Stage 3 failed)" in text  # t5-c2
    least = text.split("Least confident tags", 1)[1]
    # Lowest Stage-3 scores first: t3-c4 (0.21), then the hostile t4-c3 (0.30).
    assert least.index("easy to read and maintain") < least.index('alert("x")') and "score 0.21" in least
    assert "Stage 1 failures (1)" in text
    assert "The ResNet-18 model is imported from PyTorch" in text.split("Stage 1 failures", 1)[1]  # t1-c1

    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["settings"] = {"audit": {"none_threshold": 0.5}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    text = Page(render_report(run).read_text(encoding="utf-8")).section("confidence")
    assert "None of the above (3)" in text and "score 0.21 < 0.5" in text


def test_constraint_status_reads_recorded_violations_and_tolerates_their_absence(full_run, tmp_path):
    page = Page((full_run / "report.html").read_text(encoding="utf-8"))
    text = page.section("constraints")
    assert "Some constraints do not hold" in text and "8-10 capabilities 4 no" in text  # the fixture has 4
    assert "Violations recorded" not in text  # none recorded: the section still renders
    run = tmp_path / "run"
    shutil.copytree(full_run, run)
    raw = json.loads((run / "taxonomy.json").read_text())
    raw["violations"] = ["`code_implementation_review_capability` holds 45% of criteria, over the 40% maximum"]
    (run / "taxonomy.json").write_text(json.dumps(raw))
    text = Page(render_report(run).read_text(encoding="utf-8")).section("constraints")
    assert "Violations recorded by the merge stage" in text and "over the 40% maximum" in text


def test_constraint_status_all_holding(tmp_path):
    from taxonomy.analysis.report_criteria import constraint_status

    tax = run_fixture.taxonomy()
    manifest = {"settings": {"merge": {"min_caps": 4, "max_caps": 10, "max_share": 0.5, "min_share": 0.1}}}
    status = constraint_status(tax, {}, manifest, {})
    assert status["ok"], status["checks"]
    manifest["settings"]["merge"]["max_share"] = 0.25  # code_implementation_review holds 7/20
    status = constraint_status(tax, {}, manifest, {})
    assert not status["ok"] and [c["rule"] for c in status["checks"] if not c["ok"]] == [
        "`code_implementation_review_capability` share in 10%-25%"
    ]


def test_in_headless_chromium_search_filters_and_hover_shows_text(full_run, tmp_path):
    """Typing in the search box, choosing a capability and a task, and pointing at the label map,
    the way a user does, in the system's headless Chromium driven over the DevTools pipe."""
    if find_chromium() is None:
        reason = "Chromium not installed (apt-get install chromium); the browser check needs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " — CI must install it")
        pytest.skip(reason)
    n = pl.read_parquet(full_run / "criteria.parquet").height
    rows_js = "Array.from(document.querySelectorAll('#crit-rows tr')).map(tr => tr.textContent)"
    with Browser(tmp_path / "profile", width=1280, height=900) as b:
        b.send("Runtime.enable")
        b.send("Network.enable")
        b.open((full_run / "report.html").resolve().as_uri())
        p = Page(b.eval("document.documentElement.outerHTML"))
        for sid in SECTIONS:
            assert sid in p.ids, sid
        assert len(b.eval(rows_js)) == n
        assert b.eval("document.getElementById('crit-count').textContent").startswith(f"{n} of {n}")

        b.type_into("#crit-search", "saved as")
        shown = b.eval(rows_js)
        expected = [t for rows in run_fixture.TASKS.values() for t, _, _ in rows if "saved as" in t.lower()]
        assert len(shown) == len(expected) == 4 and all("saved as" in r.lower() for r in shown)
        assert b.eval("document.getElementById('crit-count').textContent").startswith(f"4 of {n}")

        b.type_into("#crit-search", " models/")  # every word must match
        assert len(b.eval(rows_js)) == 2

        b.eval("var s = document.getElementById('crit-search'); s.value = ''; s.dispatchEvent(new Event('input'))")
        b.eval("var c = document.getElementById('crit-cap'); c.value = '2'; c.dispatchEvent(new Event('change'))")
        tagged = [
            t
            for t in pl.read_parquet(full_run / "stage3_tags.parquet")["tags"].to_list()
            if "numeric_result_verification_capability" in t
        ]
        assert len(b.eval(rows_js)) == len(tagged)
        b.eval("var t = document.getElementById('crit-task'); t.value = '4'; t.dispatchEvent(new Event('change'))")
        assert len(b.eval(rows_js)) == 2  # t5: one criterion with it as primary, one as second tag
        b.eval("document.getElementById('crit-primary').click()")
        shown = b.eval(rows_js)
        assert len(shown) == 1 and "Mean episode return" in shown[0]

        b.eval("document.getElementById('label-map').scrollIntoView()")
        assert b.eval("getComputedStyle(document.getElementById('map-tip')).display") == "none"
        box = b.eval(
            "(() => { const c = Array.from(document.querySelectorAll('svg.label-map circle.pt'))"
            ".find(c => c.dataset.tip.startsWith('read_saved_report_contents_capability'));"
            " const r = c.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        b.mouse_move(*box)
        tip = b.eval(
            "[getComputedStyle(document.getElementById('map-tip')).display, "
            "document.getElementById('map-tip').textContent]"
        )
        assert tip[0] == "block"
        assert tip[1].splitlines()[:3] == [
            "read_saved_report_contents_capability",
            "micro-cluster: file_content_parsing_capability",
            "capability: file_artifact_inspection_capability",
        ]
        shot = b.screenshot(tmp_path / "label-map.png")
        b.mouse_move(2, 2)
        assert b.eval("getComputedStyle(document.getElementById('map-tip')).display") == "none"

        errors = [e for e in b.events if e.get("method") in ("Runtime.exceptionThrown",)]
        assert errors == []
        requested = [e["params"]["request"]["url"] for e in b.events if e.get("method") == "Network.requestWillBeSent"]
        assert all(u.startswith(("file://", "data:")) for u in requested), requested  # nothing from a network
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_checked_in_fixture_matches_builder_and_renders(tmp_path):
    """tests/fixtures/run is `python -m tests.run_fixture` output; it must not drift from the builder."""
    import polars as pl

    stored = Path(__file__).parent / "fixtures" / "run"
    fresh = run_fixture.write_run(tmp_path / "fresh")
    for name in ("criteria.parquet", "stage3_tags.parquet", "clusters.parquet"):
        assert pl.read_parquet(stored / name).equals(pl.read_parquet(fresh / name)), name
    assert (stored / "taxonomy.json").read_text() == (fresh / "taxonomy.json").read_text()
    run = tmp_path / "copy"
    shutil.copytree(stored, run)
    assert Page(render_report(run).read_text(encoding="utf-8")).svgs_in.get("fig-label-map") == 1


# ---- design principles P2/P3: the LLM path decides them, the offline path leaves them unknown ----
WORDS = {True: "yes", False: "no", None: "unknown"}
P2, P3 = "needs_native_inspection", "needs_domain_conventions"


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> Path:
    return offline_devai_run(tmp_path_factory.mktemp("offline"), ("report",))


def _capabilities(run: Path) -> list[dict]:
    return json.loads((run / "taxonomy.json").read_text(encoding="utf-8"))["capabilities"]


def _flat(fragment: str) -> str:
    return " ".join(" ".join(Page(fragment).text).split())


def assert_principles_on_page(run: Path) -> None:
    html = (run / "report.html").read_text(encoding="utf-8")
    caps = _capabilities(run)
    table = html.split('<section id="taxonomy">', 1)[1].split("</section>", 1)[0]
    rows = {re.sub(r"<[^>]+>", "", row.split("</td>", 1)[0]).strip(): row for row in table.split("<tr>")[2:]}
    assert set(rows) == {c["name"] for c in caps}
    note = _flat(html.split('id="principles-note">', 1)[1].split("</p>", 1)[0])
    # A reason every capability gives alike is said once, in the note above the table; others in each row.
    shared = {f: len({c[f + "_reason"] for c in caps}) == 1 for f in (P2, P3)}
    for f in (P2, P3):
        if shared[f]:
            assert " ".join(caps[0][f + "_reason"].split()) in note, note
    for cap in caps:
        row = rows[cap["name"]]
        assert f'data-p2="{WORDS[cap[P2]]}" data-p3="{WORDS[cap[P3]]}"' in row, cap["name"]
        text = _flat(row)
        assert "P1 reactive verification: yes" in text
        for key, f in (("P2 native inspection", P2), ("P3 domain conventions", P3)):
            reason = "" if shared[f] else " " + " ".join(cap[f + "_reason"].split())
            assert f"{key}: {WORDS[cap[f]]}{reason}" in text, text
            assert not shared[f] or " ".join(cap[f + "_reason"].split()) not in text, text
    # The summary line counts them; every capability card carries both badges.
    for key, field in (("P2 native inspection", P2), ("P3 domain conventions", P3)):
        counts = ", ".join(
            f"{w} for {n}" for w in ("yes", "no", "unknown") if (n := sum(WORDS[c[field]] == w for c in caps))
        )
        assert f"{key}: {counts} of {len(caps)} capabilities" in note, note
    cards = (
        html.split('<section id="capabilities">', 1)[1].split("</section>", 1)[0].split('<div class="cap-block"')[1:]
    )
    assert len(cards) == len(caps)
    for cap in caps:  # the cards come largest first, as the table does
        text = _flat("<div" + next(card for card in cards if f"<h3>{cap['name']}" in card.replace("<wbr>", "")))
        assert f"P2 native inspection: {WORDS[cap[P2]]}P3 domain conventions: {WORDS[cap[P3]]}" in text.replace(
            " P3", "P3"
        ), cap["name"]
    data = _criteria_data(html)
    assert data["p2"] == [c[P2] for c in caps] and data["p3"] == [c[P3] for c in caps]


def test_llm_run_report_shows_decided_principles_with_reasons(llm_exported_run):
    caps = _capabilities(llm_exported_run)
    assert all(isinstance(c[P2], bool) and isinstance(c[P3], bool) for c in caps)  # the LLM path decided them
    assert {c[P2] for c in caps} == {True, False} or {c[P3] for c in caps} == {True, False}  # both values get drawn
    assert_principles_on_page(llm_exported_run)
    assert "Unknown means" not in _flat((llm_exported_run / "report.html").read_text(encoding="utf-8"))


def test_offline_run_report_says_unknown(offline_run):
    caps = _capabilities(offline_run)
    assert any(c[P2] is None for c in caps)
    assert_principles_on_page(offline_run)
    text = _flat((offline_run / "report.html").read_text(encoding="utf-8"))
    # every capability gives the same reason, so it is said once, above the table, not in each of its rows
    assert (
        text.count("Unknown: the offline backend") == 1
        and "of every capability alike: Unknown: the offline backend" in text
    )


def _expected(run: Path, field: str, primary_only: bool) -> dict[str, int]:
    """Criteria per P2/P3 value, computed here from the run's files: a criterion's primary tag, or any of its
    tags (yes when one needs it, no when all are decided no, otherwise unknown)."""
    value = {c["name"]: c[field] for c in _capabilities(run)}
    tags = dict(pl.read_parquet(run / "stage3_tags.parquet").select("criterion_id", "tags").iter_rows())
    counts = {"yes": 0, "no": 0, "unknown": 0}
    for cid in pl.read_parquet(run / "criteria.parquet")["criterion_id"]:
        vals = [value[t] for t in (tags.get(cid) or [])][: 1 if primary_only else None]
        counts["yes" if True in vals else "no" if vals and all(v is False for v in vals) else "unknown"] += 1
    return counts


@pytest.mark.parametrize("which", ["llm", "offline"])
def test_in_headless_chromium_principle_filters_and_markers(which, request, tmp_path):
    """Choosing P2/P3 values in the criteria table's filters, with and without “primary tag only”, and the
    P2/P3 marks on the tag chips, in the system's headless Chromium."""
    if find_chromium() is None:
        reason = "Chromium not installed (apt-get install chromium); the browser check needs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " — CI must install it")
        pytest.skip(reason)
    run = request.getfixturevalue("llm_exported_run" if which == "llm" else "offline_run")
    n = pl.read_parquet(run / "criteria.parquet").height
    caps = _capabilities(run)
    count_js = "parseInt(document.getElementById('crit-count').textContent.replace(/,/g, ''))"
    with Browser(tmp_path / "profile", width=1280, height=900) as b:
        b.send("Runtime.enable")
        b.open((run / "report.html").resolve().as_uri())
        assert b.eval(count_js) == n
        for key, field in (("p2", P2), ("p3", P3)):
            for primary_only in (False, True):
                if b.eval("document.getElementById('crit-primary').checked") != primary_only:
                    b.eval("document.getElementById('crit-primary').click()")
                expected = _expected(run, field, primary_only)
                for value, want in expected.items():
                    b.eval(
                        f"var s = document.getElementById('crit-{key}'); s.value = '{value}'; s.dispatchEvent(new "
                        "Event('change'))"
                    )
                    assert b.eval(count_js) == want, (key, value, primary_only)
                assert sum(expected.values()) == n
            b.eval(f"var s = document.getElementById('crit-{key}'); s.value = ''; s.dispatchEvent(new Event('change'))")
        # Each chip of a capability that needs it carries the mark; no other chip does.
        chips = b.eval(
            "Array.from(document.querySelectorAll('#crit-rows .chip')).map(c => "
            "[c.firstChild.textContent + Array.from(c.childNodes).filter(n => n.nodeType === 3).slice(1).map(n => "
            "n.textContent).join(''),"
            " Array.from(c.querySelectorAll('sup.mark')).map(m => m.textContent)])"
        )
        value = {c["name"]: c for c in caps}
        assert chips
        for name, marks in chips:
            assert marks == [k for k, f in (("P2", P2), ("P3", P3)) if value[name][f] is True], name
        assert [e for e in b.events if e.get("method") == "Runtime.exceptionThrown"] == []


def test_the_taxonomy_table_lists_the_largest_capability_first(full_run):
    """The table kept the taxonomy's own order, while taxonomy.md and the summary list the largest first."""
    html = (full_run / "report.html").read_text(encoding="utf-8")
    table = html.split('id="taxonomy"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    shown = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<tr>\s*<td>(.*?)</td>", table, re.S)]
    primary = pl.read_parquet(full_run / "stage3_tags.parquet")["primary"].drop_nulls().value_counts()
    counts = dict(zip(primary["primary"].to_list(), primary["count"].to_list()))
    assert [counts.get(name, 0) for name in shown] == sorted((counts.get(n, 0) for n in shown), reverse=True)
    assert len(shown) == len(json.loads((full_run / "taxonomy.json").read_text())["capabilities"])


# ---- a report a person can use: long tables folded, shared reasons said once, the breakdown command given


def _section(html: str, sid: str) -> str:
    return html.split(f'<section id="{sid}">', 1)[1].split("</section>", 1)[0]


def _body_rows(table_html: str) -> int:
    return table_html.split("<tbody>", 1)[1].split("</tbody>", 1)[0].count("<tr>")


def test_report_folds_long_tables_says_shared_reasons_once_and_how_to_get_a_breakdown(offline_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(offline_run, run)
    invoke("report", run)
    html = (run / "report.html").read_text(encoding="utf-8")
    # the least confident tags (40) show their first rows; the rest open under <details>, all of them filterable
    low = _section(html, "confidence").split("Least confident tags", 1)[1].split("<h3", 1)[0]
    shown, rest = low.split('<details class="rest">', 1)
    assert _body_rows(shown) == 10 and _body_rows(rest) == 30 and 'class="row-filter"' in shown
    assert "Show the other 30 rows" in rest
    # the reason every capability gives alike for P2/P3 is said once, above the table
    taxonomy = Taxonomy.model_validate_json((run / "taxonomy.json").read_text())
    reason = taxonomy.capabilities[0].needs_native_inspection_reason
    assert all(c.needs_native_inspection_reason == reason for c in taxonomy.capabilities)
    assert re.sub(r"<[^>]+>", " ", _section(html, "taxonomy")).count(reason.split(";")[0]) == 1  # hover titles aside
    # no breakdown yet: the section says which command makes one
    breakdown = " ".join(re.sub(r"<[^>]+>", "", _section(html, "breakdown")).split())
    assert f"taxonomy breakdown {run} --verdicts FILE" in breakdown


def test_report_in_chromium_filters_a_folded_table_and_stays_short(offline_run, tmp_path):
    from tests.chromium import Browser, find_chromium

    if find_chromium() is None:
        pytest.skip("Chromium not installed (apt-get install chromium)")
    run = tmp_path / "run"
    shutil.copytree(offline_run, run)
    invoke("report", run)
    with Browser(tmp_path / "profile", width=1280, height=900) as b:
        b.open((run / "report.html").resolve().as_uri())
        heights = b.eval(
            "JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('section'))"
            ".map(s => [s.id, s.offsetHeight])))"
        )
        heights = json.loads(heights)
        assert heights["confidence"] < 2500 and heights["criteria"] < 2500, heights  # 40 and 365 rows folded
        wrap = "document.querySelector('#confidence .long')"
        word = b.eval(
            f"{wrap}.querySelector('details.rest tbody tr td').textContent.split(/\\s+/).filter(w => w.length > 6)[0]"
        )
        b.type_into("#confidence input.row-filter", word)
        visible = b.eval(
            f"Array.from({wrap}.querySelectorAll('tbody tr')).filter(tr => !tr.hidden).map(tr => tr.textContent)"
        )
        assert visible and all(word.lower() in t.lower() for t in visible)
        assert b.eval(f"{wrap}.querySelector('details.rest').open") is True


def test_report_renders_inline_code_in_the_taxonomy_table(tmp_path):
    from taxonomy.analysis.report import render_report
    from tests import run_fixture

    run = run_fixture.write_run(tmp_path / "run")
    taxonomy = Taxonomy.model_validate_json((run / "taxonomy.json").read_text())
    other = taxonomy.capabilities[1].name
    taxonomy.capabilities[
        0
    ].diagnostic_signal = f"The trace opens the file; where it only reads the text, prefer `{other}`."
    taxonomy.content_hash = taxonomy.compute_hash()
    (run / "taxonomy.json").write_text(taxonomy.model_dump_json())
    html = render_report(run).read_text(encoding="utf-8")
    first = "_<wbr>".join(taxonomy.capabilities[0].name.split("_"))
    rows = _section(html, "taxonomy").split("<tbody>", 1)[1].split("</tr>")
    row = next(r for r in rows if f"<td>{first}</td>" in r)  # the table lists the largest first
    assert "`" not in row and f"<code>{'_<wbr>'.join(other.split('_'))}</code>" in row


def test_report_command(offline_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(offline_run, run)
    result = invoke("report", run)
    html = (run / "report.html").read_text()
    assert "Report:" in result.output and 'id="taxonomy"' in html and "<svg" in html
