"""Stage 1 through the CLI and the real google-genai SDK against a local Gemini-shaped server."""

from __future__ import annotations

import json

import polars as pl
import pytest

from taxonomy.config import LabelRules
from taxonomy.stages.discover import item_problems
from tests import responders
from tests.conftest import API_KEY, files_text, invoke, write_pipeline

N = 30  # criteria: DevAI's first tasks, several batches of up to 20 within each task


def run_discover(tmp_path, *extra):
    toml = write_pipeline(tmp_path, limit=N)
    result = invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", *extra)
    return result, pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")


def batches(server) -> int:
    return len({r.texts[0] for r in server.requests if r.kind == "generate"})


def first_label_becomes(label: str):
    """A model whose answer gives criterion 0 one particular (bad) label."""

    def respond(req):
        answer = responders.discovery(req.texts[0])
        answer["items"][0]["capabilities"] = [label]
        return answer

    return respond


def test_valid_answers_give_labels_for_every_criterion(gemini_env, tmp_path):
    result, labels = run_discover(tmp_path)
    assert labels.height == N and labels["status"].to_list() == ["ok"] * N
    for row in labels.iter_rows(named=True):
        assert 1 <= len(row["labels"]) <= 3 and row["rationale"].startswith("the verifier needs to")
    req = gemini_env.requests[0]
    assert req.mode == "gemini" and req.path.startswith("/v1/models/") and req.headers["x-goog-api-key"] == API_KEY
    assert req.schema is not None and "Criteria to annotate" in req.texts[0]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    stage = manifest["stages"]["discover"]
    assert stage["calls"] == gemini_env.count(kind="generate") and stage["prompt_tokens"] > 0 and stage["cost_usd"] > 0
    assert "Backend: gemini" in result.stderr if hasattr(result, "stderr") else True


def test_batches_criteria_of_one_task_per_call(gemini_env, tmp_path):
    run_discover(tmp_path)
    prompts = [r.texts[0] for r in gemini_env.requests]
    sizes = [len(responders.criteria(p)) for p in prompts]
    assert sum(sizes) == N and max(sizes) <= 20 and len(prompts) < N


@pytest.mark.parametrize("status", [429, 500])
def test_transient_error_then_success(gemini_env, tmp_path, status):
    gemini_env.fail_next(status, retry_after=0 if status == 429 else None)
    _, labels = run_discover(tmp_path)
    assert labels["status"].to_list() == ["ok"] * N
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["stages"]["discover"]["retries"] == 1


def test_retries_running_out_is_one_line_and_keeps_what_was_answered(gemini_env, tmp_path):
    from tests.fake_gemini import Reply

    answered = []

    def fail_after_two(req):
        if len(answered) >= 2:
            return Reply.error(503, "overloaded")
        answered.append(req)
        return responders.model(req)

    gemini_env.responder = fail_after_two
    toml = write_pipeline(tmp_path, limit=N)
    toml.write_text(toml.read_text().replace("concurrency = 8", "concurrency = 1\nmax_retries = 2"))
    result = invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q", ok=False)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "gave up after 2 retries" in result.output and "run the same command again" in result.output
    gemini_env.responder = responders.model
    gemini_env.reset()
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    assert not {r.texts[0] for r in gemini_env.requests} & {r.texts[0] for r in answered}  # nothing paid twice


def test_malformed_json_then_valid_reask(gemini_env, tmp_path):
    gemini_env.malformed_next()
    _, labels = run_discover(tmp_path)
    assert labels["status"].to_list() == ["ok"] * N
    reasks = [r for r in gemini_env.requests if len(r.texts) == 3]
    assert len(reasks) == 1 and reasks[0].roles == ["user", "model", "user"]
    assert "does not match the JSON schema" in reasks[0].texts[2]


def test_missing_criterion_is_reasked(gemini_env, tmp_path):
    def drop_first(req):
        answer = responders.discovery(req.texts[0])
        answer["items"] = answer["items"][1:]
        return answer

    gemini_env.push(drop_first)
    _, labels = run_discover(tmp_path)
    assert labels["status"].to_list() == ["ok"] * N
    (reask,) = [r for r in gemini_env.requests if len(r.texts) == 3]
    assert "criterion 0: missing from the answer" in reask.texts[2]


def test_forbidden_token_is_reasked_and_never_kept(gemini_env, tmp_path):
    gemini_env.push(first_label_becomes("excel_workbook_check_capability"))
    _, labels = run_discover(tmp_path)
    assert "excel_workbook_check_capability" not in labels["labels"].explode().to_list()
    (reask,) = [r for r in gemini_env.requests if len(r.texts) == 3]
    assert "`excel`" in reask.texts[2]


def test_persistent_violation_is_kept_as_failed_with_reasons(gemini_env, tmp_path):
    gemini_env.responder = first_label_becomes("build_dcf_model_capability")
    result, labels = run_discover(tmp_path)
    failed = labels.filter(pl.col("status") == "failed")
    assert failed.height >= 1 and all(r == [] for r in failed["labels"].to_list())
    assert any("agent-side verb `build`" in p for p in failed["problems"].explode().to_list())
    assert labels.filter(pl.col("status") == "ok").height == N - failed.height
    assert "failed validation" in result.output


def test_invalid_item_stays_failed_when_reasks_come_back_malformed(gemini_env, tmp_path):
    target = []

    def excel_then_malformed(req):
        """One conversation: its first answer breaks criterion 0, its re-asks come back truncated."""
        if not target:
            target.append(req.texts[0])
        if req.texts[0] != target[0]:
            return responders.model(req)
        if len(req.texts) > 1:
            return '{"items": ['
        return first_label_becomes("excel_workbook_check_capability")(req)

    gemini_env.responder = excel_then_malformed
    _, labels = run_discover(tmp_path)
    failed = labels.filter(pl.col("status") == "failed")
    assert failed.height == 1 and "`excel`" in failed["problems"][0][0]
    assert labels.filter(pl.col("status") == "ok").height == N - 1


def test_second_run_is_answered_from_cache(gemini_env, tmp_path):
    run_discover(tmp_path)
    first = gemini_env.count(kind="generate")
    gemini_env.reset()
    (tmp_path / "run" / "stage1_labels.parquet").unlink()
    _, labels = run_discover(tmp_path)
    assert first > 0 and gemini_env.count() == 0 and labels.height == N
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    record = manifest["stages"]["discover"]
    # `calls` sums every process that worked on the run; this one paid nothing.
    assert record["new_calls"] == 0 and record["calls"] == first and record["cache_hits"] == first


def test_api_key_never_reaches_cache_logs_or_outputs(gemini_env, tmp_path):
    gemini_env.fail_next(429, retry_after=0)
    result, _ = run_discover(tmp_path)
    assert API_KEY not in result.output
    assert API_KEY not in files_text(tmp_path)


def test_vertex_mode(server, monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", server.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    monkeypatch.setenv("GOOGLE_VERTEX_ACCESS_TOKEN", "ya29.test-token-value")
    toml = write_pipeline(tmp_path, limit=N)
    invoke("discover", toml, "--provider", "vertex", "--run-dir", tmp_path / "run", "-q")
    req = server.requests[0]
    assert req.mode == "vertex" and "/projects/test-project/locations/europe-west4/" in req.path
    assert req.headers["authorization"] == "Bearer ya29.test-token-value"
    assert "ya29.test-token-value" not in files_text(tmp_path)


def test_offline_labels_pass_the_same_validators(offline_env, tmp_path):
    toml = write_pipeline(tmp_path)
    result = invoke("discover", toml, "--run-dir", tmp_path / "run", "-q")
    assert "Backend: offline" in result.output
    labels = pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")
    crit = pl.read_parquet(tmp_path / "run" / "criteria.parquet").select("criterion_id", "text")
    rules = LabelRules()
    for row in labels.join(crit, on="criterion_id").iter_rows(named=True):
        assert row["status"] == "ok" and item_problems(row["labels"], row["rationale"], row["text"], rules) == []


def test_missing_key_is_one_clear_line(offline_env, tmp_path):
    result = invoke("discover", write_pipeline(tmp_path), "--provider", "gemini", ok=False)
    assert result.exit_code == 2 and "GEMINI_API_KEY" in result.output and "Traceback" not in result.output


# ---- the paper's template: one task and one rubric category per call -----------------------------
def test_batches_hold_one_task_and_one_category_under_a_header(gemini_env, tmp_path):
    _, labels = run_discover(tmp_path)
    criteria = pl.read_parquet(tmp_path / "run" / "criteria.parquet")
    category_of = dict(zip(criteria["text"], criteria["category"]))
    for req in gemini_env.requests:
        prompt = req.texts[0]
        texts = [t for _, t in responders.criteria(prompt)]
        cats = {category_of[t] for t in texts}
        assert len(cats) == 1, cats
        (cat,) = cats
        assert f"Rubric category: {cat} (every criterion below belongs to it)" in prompt
        assert "Distinct from sibling capabilities within the batch's rubric category" in prompt
    assert labels["status"].to_list() == ["ok"] * N


def test_criteria_without_a_category_are_batched_by_task(gemini_env, tmp_path):
    rows = [
        {
            "task_id": f"t{i % 2}",
            "text": f"The report lists the quarterly revenue figure number {i}",
            "brief": "Write it.",
        }
        for i in range(6)
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    toml = tmp_path / "c.toml"
    toml.write_text(f'name = "c"\n[corpus]\npath = "{path}"\nformat = "table"\n[output]\ndir = "{tmp_path / "o"}"\n')
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    prompts = [r.texts[0] for r in gemini_env.requests]
    assert len(prompts) == 2 and not any("Rubric category:" in p for p in prompts)
    assert all(len(responders.criteria(p)) == 3 for p in prompts)


@pytest.mark.parametrize("n,sizes", [(24, [12, 12]), (41, [14, 14, 13]), (20, [20]), (7, [7])])
def test_a_task_is_split_into_even_batches(gemini_env, tmp_path, n, sizes):
    """24 criteria at 20 a call go as 12 + 12, not 20 + 4: a small call pays the shared instructions for little."""
    rows = [
        {"task_id": "t", "text": f"The report lists the quarterly revenue figure number {i}", "brief": "Write it."}
        for i in range(n)
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    toml = tmp_path / "c.toml"
    toml.write_text(f'name = "c"\n[corpus]\npath = "{path}"\nformat = "table"\n[output]\ndir = "{tmp_path / "o"}"\n')
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    assert sorted((len(responders.criteria(r.texts[0])) for r in gemini_env.requests), reverse=True) == sizes
    assert pl.read_parquet(tmp_path / "run" / "stage1_labels.parquet")["status"].to_list() == ["ok"] * n


def test_paraphrase_within_a_category_is_reasked(gemini_env, tmp_path):
    target: list[str] = []

    def paraphrase_second(req):
        """The first batch of two or more gets a paraphrase once; its re-ask is answered well."""
        answer = responders.discovery(req.texts[0])
        if len(req.texts) == 1 and len(answer["items"]) > 1 and not target:
            target.append(req.texts[0])
            answer["items"][0]["capabilities"] = ["numeric_value_recomputation_capability"]
            answer["items"][1]["capabilities"] = ["recomputing_numeric_values_capability"]
        return answer

    gemini_env.responder = paraphrase_second
    _, labels = run_discover(tmp_path)
    reask = next(r for r in gemini_env.requests if len(r.texts) == 3)
    assert (
        "criterion 1: `recomputing_numeric_values_capability` paraphrases criterion 0's "
        "`numeric_value_recomputation_capability` within rubric category" in reask.texts[2]
    )
    assert "recomputing_numeric_values_capability" not in labels["labels"].explode().to_list()


def test_a_long_brief_is_cut_with_a_marker_and_reported(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=N, extra="[discover]\nbrief_max_chars = 200\n")
    result = invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    assert "longer than discover.brief_max_chars = 200 characters and were cut" in result.output
    assert all("[... brief cut here: 200 of " in r.texts[0] for r in gemini_env.requests)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert any("brief_max_chars" in n for n in manifest["stages"]["discover"]["notes"])


def test_offline_path_applies_the_category_check(offline_env, tmp_path):
    from taxonomy.config import PipelineConfig
    from taxonomy.offline.backend import OfflineBackend

    frame = pl.DataFrame(
        {
            "task_id": ["t"] * 2,
            "criterion_id": ["t/0", "t/1"],
            "text": ["Total revenue equals the sum of 4 quarters"] * 2,
            "category": ["math"] * 2,
            "direction": ["reward"] * 2,
            "context": [""] * 2,
            "brief": [""] * 2,
        }
    )
    from taxonomy.offline import discover as offline

    original = offline.discover_offline

    def paraphrasing(criteria, rules, opts=None):
        out = original(criteria, rules, opts)
        return out.with_columns(
            labels=pl.Series([["numeric_value_recomputation_capability"], ["recomputing_numeric_values_capability"]])
        )

    offline.discover_offline = paraphrasing
    try:
        rows = OfflineBackend().discover(frame, PipelineConfig.model_validate({"name": "x", "corpus": {"path": "."}}))
    finally:
        offline.discover_offline = original
    assert rows["status"].to_list() == ["ok", "failed"] and "paraphrases" in rows["problems"][1][0]


def test_cohort_column_goes_in_the_header_and_splits_batches(gemini_env, tmp_path):
    rows = [
        {
            "task_id": "t",
            "cohort": c,
            "category": "Format",
            "text": f"The table header row names the column number {i}",
            "brief": "Make it.",
        }
        for i, c in enumerate(["junior", "junior", "senior"])
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    toml = tmp_path / "c.toml"
    toml.write_text(f'name = "c"\n[corpus]\npath = "{path}"\nformat = "table"\n[output]\ndir = "{tmp_path / "o"}"\n')
    invoke("discover", toml, "--provider", "gemini", "--run-dir", tmp_path / "run", "-q")
    headers = sorted(
        (p.count("Cohort: junior"), p.count("Cohort: senior"), len(responders.criteria(p)))
        for p in (r.texts[0] for r in gemini_env.requests)
    )
    assert headers == [(0, 1, 1), (1, 0, 2)]
