import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from taxonomy.analysis.report import render_report
from tests import run_fixture

SECTIONS = ("taxonomy", "shares", "label-map", "heatmap", "breakdown", "cost")
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
    assert page.scripts == 0
    assert "<script>" not in html and "&lt;script&gt;" in html
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


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "/usr/bin/chromium"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _browser(*args: str, profile: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}"]
    return subprocess.run([_chromium(), *flags, *args], capture_output=True, text=True, timeout=120)


def test_in_headless_chromium(full_run, tmp_path):
    if _chromium() is None:
        reason = "Chromium not installed (apt-get install chromium); the browser check needs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + " — CI must install it")
        pytest.skip(reason)
    url = (full_run / "report.html").resolve().as_uri()
    dom = _browser("--dump-dom", url, profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    p = Page(dom.stdout)
    for sid in SECTIONS:
        assert sid in p.ids, sid
    for fid in FIGURES:
        assert p.svgs_in.get(fid) == 1, fid
    assert p.tables >= 6

    shot = tmp_path / "shot.png"
    res = _browser(f"--screenshot={shot}", "--window-size=1280,2400", url, profile=tmp_path / "profile")
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


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
