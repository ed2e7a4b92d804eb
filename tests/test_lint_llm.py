"""`taxonomy lint` with a model: the real google-genai SDK against the local Gemini-shaped server, with faults."""

from __future__ import annotations

import json
import re
from pathlib import Path

from taxonomy.run import RunDir
from tests.conftest import API_KEY, files_text
from tests.fake_gemini import Reply
from tests.test_lint import base_rows, lint, write

CRITERION = re.compile(r'<criterion idx="(\d+)" weight="([^"]+)">\n(.*?)\n</criterion>', re.S)
TASK = re.compile(r"^Task ID: (\S+)$", re.M)


def pipeline(tmp_path: Path, rows: list[dict]) -> Path:
    write(tmp_path, rows)
    toml = tmp_path / "p.toml"
    toml.write_text(
        f'name = "p"\n[corpus]\npath = "rubric.jsonl"\n[corpus.columns]\ntext = "criterion"\n'
        "[llm]\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.05\nconcurrency = 8\n[output]\ndir = "
        f'"{tmp_path / "out"}"\n'
    )
    return toml


def sound(prompt: str) -> list[dict]:
    """A careful reviewer: a "Fails ..." criterion that carries points, and a criterion with "(1)" and "(2)"."""
    out = []
    for idx, weight, text in CRITERION.findall(prompt):
        if text.startswith("Fails") and not weight.startswith("-"):
            out.append(
                {
                    "rule": "sign-mismatch",
                    "criterion_idx": [int(idx)],
                    "quote": " ".join(text.split()[:4]),
                    "message": "A failure is rewarded.",
                    "fix": "Make the weight negative.",
                }
            )
        if "(1)" in text:
            out.append(
                {
                    "rule": "compound",
                    "criterion_idx": [int(idx)],
                    "quote": text,
                    "message": "Two checks in one.",
                    "fix": "Split it.",
                }
            )
    return out


def respond(req) -> dict:
    return {"findings": sound(req.texts[0])}


def data(result) -> dict:
    assert API_KEY not in result.output
    return json.loads(result.stdout)


def corpus_rows() -> list[dict]:
    rows = base_rows()
    rows[6]["weight"] = 6  # t01: "Fails to mention ..." rewarded; the offline rules find it too
    rows.append({"task_id": "t02", "criterion": "Covers (1) rest and (2) fluids.", "weight": 2, "brief": ""})
    return rows


def test_model_findings_merge_with_offline_ones_and_are_cached(tmp_path, gemini_env):
    server = gemini_env
    server.responder = respond
    toml = pipeline(tmp_path, corpus_rows())
    first = data(lint(toml, "--format", "json", "--provider", "gemini", "-q", code=0))
    sign = [f for f in first["findings"] if f["rule"] == "sign-mismatch"]
    assert [(f["criterion_ids"], f["source"], f["severity"]) for f in sign] == [(["t01/7"], "offline+llm", "warning")]
    # The model's compound findings are a preview (judged precision 0.45): the offline one stands alone...
    compound = [f for f in first["findings"] if f["rule"] == "compound"]
    assert [(f["task_id"], f["source"]) for f in compound] == [("t02", "offline")]
    assert any(s["rule"] == "compound" and "preview" in s["reason"] for s in first["summary"]["skipped"])
    assert first["summary"]["llm"] == {"asked": 30, "kept": 2, "dropped": 0, "dropped_findings": [], "unanswered": 0}
    calls = server.count("generate")
    assert calls == 30
    run = next((tmp_path / "out" / "p").glob("*/usage.jsonl")).parent
    assert RunDir(run).usage_totals()["lint"]["calls"] == 30
    again = data(lint(toml, "--format", "json", "--provider", "gemini", "-q", code=0))
    assert (
        server.count("generate") == calls and again["findings"] == first["findings"]
    )  # the cache answers; nothing is paid twice
    # ...and --select compound turns it on: it matches the offline one (a numbered list), merged, not doubled.
    selected = data(lint(toml, "--format", "json", "--provider", "gemini", "-q", "--select", "compound", code=0))
    assert [(f["task_id"], f["source"]) for f in selected["findings"]] == [("t02", "offline+llm")]
    assert API_KEY not in files_text(tmp_path)


def test_a_finding_only_the_model_makes_is_a_note(tmp_path, gemini_env):
    def extra(req):
        found = sound(req.texts[0])
        idx, _, text = CRITERION.findall(req.texts[0])[0]
        return {
            "findings": found
            + [{"rule": "vague", "criterion_idx": [int(idx)], "quote": text, "message": "Unclear.", "fix": "Name it."}]
        }

    gemini_env.responder = extra
    out = lint(pipeline(tmp_path, corpus_rows()), "--provider", "gemini", "-q", "--select", "vague", code=0).stdout
    assert "info vague [llm]: Unclear." in out and "30 findings (0 errors, 0 warnings, 30 notes)" in out


def test_invalid_quote_unknown_id_and_malformed_json_are_asked_again(tmp_path, gemini_env):
    server = gemini_env
    faults = {"t00": "malformed", "t01": "quote", "t03": "index"}

    def faulty(req):
        task = TASK.search(req.texts[0])[1]
        if len(req.texts) > 1 or task not in faults:  # a re-ask (or a task without a fault) is answered well
            return respond(req)
        if faults[task] == "malformed":
            return Reply.text('{"findings": [{"rule": "sign-mis')
        bad = sound(req.texts[0]) + [
            {
                "rule": "duplicate",
                "criterion_idx": [99 if faults[task] == "index" else 0],
                "quote": "words nobody wrote here",
                "message": "m",
                "fix": "f",
            }
        ]
        return {"findings": bad}

    server.responder = faulty
    result = data(lint(pipeline(tmp_path, corpus_rows()), "--format", "json", "--provider", "gemini", "-q", code=0))
    assert server.count("generate") == 30 + 3
    reasks = [r.texts[-1] for r in server.requests if len(r.texts) > 1]
    assert any("does not match the JSON schema" in t for t in reasks)
    assert any("is not copied verbatim" in t for t in reasks) and any("[99] does not exist" in t for t in reasks)
    assert result["summary"]["llm"]["dropped"] == 0 and result["summary"]["llm"]["kept"] == 2
    assert [f["source"] for f in result["findings"] if f["task_id"] == "t01" and f["rule"] == "sign-mismatch"] == [
        "offline+llm"
    ]


def test_findings_still_invalid_after_the_reasks_are_dropped_and_reported(tmp_path, gemini_env):
    server = gemini_env

    def stubborn(req):
        found = sound(req.texts[0])
        if TASK.search(req.texts[0])[1] == "t01":  # every attempt keeps one finding with a made-up rule and quote
            found.append({"rule": "sloppy", "criterion_idx": [0], "quote": "never written", "message": "m", "fix": "f"})
        return {"findings": found}

    server.responder = stubborn
    toml = pipeline(tmp_path, corpus_rows())
    result = data(lint(toml, "--format", "json", "--provider", "gemini", "-q", code=0))
    assert server.count("generate") == 30 + 2  # llm.reask_attempts = 2
    llm = result["summary"]["llm"]
    assert llm["dropped"] == 1 and "task t01: sloppy [0]: rule 'sloppy' is unknown" in llm["dropped_findings"][0]
    offline = json.loads(lint(toml, "--format", "json", "--provider", "offline", code=0).stdout)
    assert {f["rule"] for f in result["findings"]} <= set(offline["summary"]["by_rule"])
    assert [f["source"] for f in result["findings"] if f["task_id"] == "t01" and f["rule"] == "sign-mismatch"] == [
        "offline+llm"
    ]
    text = lint(toml, "--provider", "gemini", "-q", code=0).stdout
    assert "LLM review: 30 tasks asked, 2 findings kept, 1 dropped as invalid after re-asks" in text


def test_an_answer_that_never_parses_leaves_the_offline_findings(tmp_path, gemini_env):
    gemini_env.responder = lambda req: Reply.text("not json at all")
    result = data(lint(pipeline(tmp_path, corpus_rows()), "--format", "json", "--provider", "gemini", "-q", code=0))
    assert result["summary"]["llm"]["unanswered"] == 30 and result["summary"]["llm"]["kept"] == 0
    assert {f["source"] for f in result["findings"]} == {"offline"} and any(
        f["rule"] == "sign-mismatch" for f in result["findings"]
    )


def test_model_only_findings_take_their_rules_severity(tmp_path, gemini_env):
    """sign-mismatch and duplicate (judged 0.95) are warnings; contradiction (0.50) a note; hygiene is not asked."""

    def model(req):
        crit = CRITERION.findall(req.texts[0])
        (i, _, a), (j, _, _) = crit[0], crit[1]
        return {
            "findings": [
                {
                    "rule": "sign-mismatch",
                    "criterion_idx": [int(i)],
                    "quote": a,
                    "message": "Inverted.",
                    "fix": "Flip it.",
                },
                {
                    "rule": "duplicate",
                    "criterion_idx": [int(i), int(j)],
                    "quote": a,
                    "message": "Same fact twice.",
                    "fix": "Merge.",
                },
                {
                    "rule": "contradiction",
                    "criterion_idx": [int(i), int(j)],
                    "quote": a,
                    "message": "Tension.",
                    "fix": "Pick one.",
                },
            ]
        }

    gemini_env.responder = model
    toml = pipeline(tmp_path, base_rows())
    result = data(lint(toml, "--format", "json", "--provider", "gemini", "-q", "--fail-on", "never", code=0))
    severity = {(f["rule"], f["source"]) for f in result["findings"] if f["task_id"] == "t00"}
    assert severity >= {("sign-mismatch", "llm"), ("duplicate", "llm"), ("contradiction", "llm")}
    assert {f["rule"]: f["severity"] for f in result["findings"] if f["source"] == "llm"} == {
        "sign-mismatch": "warning",
        "duplicate": "warning",
        "contradiction": "info",
    }
    prompt = gemini_env.requests[0].texts[0]
    assert "`sign-mismatch`" in prompt and "`hygiene`" not in prompt
    lint(toml, "--provider", "gemini", "-q", code=0)  # --fail-on error: no error here
    lint(toml, "--provider", "gemini", "-q", "--fail-on", "warning", code=1)  # the model's warnings can fail a job


def test_hygiene_from_the_model_is_refused_and_asked_again(tmp_path, gemini_env):
    def model(req):
        (i, _, a) = CRITERION.findall(req.texts[0])[0]
        if len(req.texts) > 1:
            return {"findings": []}
        return {
            "findings": [
                {"rule": "hygiene", "criterion_idx": [int(i)], "quote": a, "message": "Too long.", "fix": "Shorten."}
            ]
        }

    gemini_env.responder = model
    result = data(lint(pipeline(tmp_path, base_rows()), "--format", "json", "--provider", "gemini", "-q", code=0))
    assert not [f for f in result["findings"] if f["source"] != "offline"]
    assert any("rule 'hygiene' is unknown" in r.texts[-1] for r in gemini_env.requests if len(r.texts) > 1)


def test_criteria_are_shown_verbatim_and_a_verbatim_quote_is_kept(tmp_path, gemini_env):
    rows = base_rows()
    rows.append(
        {
            "task_id": "t04",
            "criterion": "Flags an index <0.9 as a risk > threshold, not </criterion> text.",
            "weight": 2,
        }
    )
    for r in rows:
        if r["task_id"] == "t04":
            r["brief"] = "Scores <0.9 & >1.1"

    def model(req):
        for idx, _, text in CRITERION.findall(req.texts[0]):
            if "index" in text:
                return {
                    "findings": [
                        {
                            "rule": "duplicate",
                            "criterion_idx": [int(idx), 0],
                            "quote": "Flags an index <0.9 as",
                            "message": "m",
                            "fix": "f",
                        }
                    ]
                }
        return {"findings": []}

    gemini_env.responder = model
    result = data(
        lint(pipeline(tmp_path, rows), "--format", "json", "--provider", "gemini", "-q", "--fail-on", "never", code=0)
    )
    prompt = next(r.texts[0] for r in gemini_env.requests if "Task ID: t04" in r.texts[0])
    assert (
        "Flags an index <0.9 as a risk > threshold, not &lt;/criterion> text." in prompt
        and "Scores <0.9 & >1.1" in prompt
    )
    assert "&lt;0.9" not in prompt and "&gt;" not in prompt
    assert [f["evidence"] for f in result["findings"] if f["source"] == "llm"] == ["Flags an index <0.9 as"]
    assert result["summary"]["llm"]["dropped"] == 0


def test_a_model_duplicate_inside_a_set_of_repeats_is_the_one_offline_finding(tmp_path, gemini_env):
    rows = base_rows() + [dict(base_rows()[0]) for _ in range(3)]  # t00's first criterion four times

    def model(req):
        crit = CRITERION.findall(req.texts[0])
        if "Task ID: t00" not in req.texts[0]:
            return {"findings": []}
        (i, _, a) = crit[0]
        return {
            "findings": [
                {"rule": "duplicate", "criterion_idx": [int(i)], "quote": a, "message": "Repeated.", "fix": "Keep one."}
            ]
        }

    gemini_env.responder = model
    result = data(
        lint(pipeline(tmp_path, rows), "--format", "json", "--provider", "gemini", "-q", "--fail-on", "never", code=0)
    )
    dup = [f for f in result["findings"] if f["rule"] == "duplicate"]
    assert [(len(f["criterion_ids"]), f["source"], f["severity"]) for f in dup] == [(4, "offline+llm", "error")]
    # The model saw the repeated criterion once: repeats are read once.
    prompt = next(r.texts[0] for r in gemini_env.requests if "Task ID: t00" in r.texts[0])
    assert len(CRITERION.findall(prompt)) == 4


def test_a_chat_corpus_sends_the_whole_conversation_as_the_brief(tmp_path, gemini_env):
    example = {
        "prompt_id": "p1",
        "prompt": [
            {"role": "user", "content": "I am 34 weeks pregnant and on labetalol."},
            {"role": "assistant", "content": "Thanks, noted."},
            {"role": "user", "content": "Is a headache something to worry about?"},
        ],
        "rubrics": [
            {"criterion": "Mentions that labetalol is safe in pregnancy.", "points": 3, "tags": []},
            {"criterion": "Advises urgent care for a severe headache at 34 weeks.", "points": 5, "tags": []},
        ],
    }
    (tmp_path / "hb.jsonl").write_text(json.dumps(example) + "\n", encoding="utf-8")
    toml = tmp_path / "p.toml"
    toml.write_text(
        f'name = "p"\n[corpus]\npath = "hb.jsonl"\nformat = "healthbench"\n[llm]\nbackoff_initial_s = 0.01\n'
        f'[output]\ndir = "{tmp_path / "out"}"\n'
    )
    gemini_env.responder = lambda req: {"findings": []}
    lint(toml, "--provider", "gemini", "-q", code=0)
    prompt = gemini_env.requests[0].texts[0]
    brief = prompt[prompt.index("<task_brief>") : prompt.index("</task_brief>")]
    assert (
        "user: I am 34 weeks pregnant and on labetalol." in brief
        and "user: Is a headache something to worry about?" in brief
    )
