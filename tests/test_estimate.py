"""`taxonomy estimate` and `run --dry-run`: per-stage calls, tokens and cost before anything is paid, and a
range that holds what the same run then accounts for when the test server answers at a real model's length."""

from __future__ import annotations

import json
import re

import pytest

from tests import responders
from tests.conftest import invoke, write_pipeline

EXTRA = "[cluster]\nk = 12\n"


def total_cost(output: str) -> float:
    row = next(line for line in output.splitlines() if line.startswith("| total |"))
    return float(row.split("|")[6])


@pytest.mark.parametrize("extra", [EXTRA, ""])
def test_the_printed_range_holds_what_a_run_with_realistic_answers_pays(gemini_env, tmp_path, extra):
    """The model answers every field at the length a real model writes it (responders.realistic_model): the
    accounted cost lies in the printed range, and the range's midpoint is within 15% of it. With the default
    cluster.k too, so the estimate plans the k the run scales to."""
    gemini_env.responder = responders.realistic_model
    toml = write_pipeline(tmp_path, limit=120, extra=extra)
    estimated = invoke("estimate", toml, "--provider", "gemini")
    assert gemini_env.count() == 0 and not (tmp_path / "outputs").exists()  # nothing sent, nothing written
    stages = {line.split("|")[1].strip(): line for line in estimated.output.splitlines() if line.startswith("| ")}
    assert {"discover", "cluster", "canonicalize", "merge", "tag", "total"} <= set(stages)
    assert "estimated from the config" in estimated.output
    printed = re.search(r"Expected cost: ([\d.]+) USD online, between ([\d.]+) and ([\d.]+);", estimated.output)
    central, low, high = map(float, printed.groups())
    assert low < central < high and central == total_cost(estimated.output)

    run = tmp_path / "run"
    invoke("run", toml, "--provider", "gemini", "--run-dir", run, "-q", "--no-report")
    usage = json.loads((run / "manifest.json").read_text())["usage"]
    sent = [r for r in gemini_env.requests if r.kind == "generate"]
    assert usage["calls"] == len(sent)
    discover_calls = int(stages["discover"].split("|")[2])
    assert discover_calls == len({r.texts[0] for r in sent if "Criteria to annotate" in r.texts[0]})  # Stage 1 is exact
    paid = usage["cost_usd"]
    print(
        f"paid {paid:.5f}; estimated {central:.5f} ({low:.5f}-{high:.5f}); midpoint / paid = "
        f"{(low + high) / 2 / paid:.3f}"
    )
    assert low <= paid <= high
    assert abs((low + high) / 2 - paid) <= 0.15 * paid


def test_dry_run_prints_the_estimate_and_writes_nothing(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=40, extra=EXTRA)
    result = invoke("run", toml, "--provider", "gemini", "--dry-run")
    assert "| total |" in result.output and gemini_env.count() == 0 and not (tmp_path / "outputs").exists()
    assert re.search(r"\| discover \| \d+ \| \d+ \|", result.output)


def test_estimate_shows_the_batch_price_beside_the_online_one(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=40, extra=EXTRA + "[llm.prices]\nbatch_input = 0.1\nbatch_output = 0.6\n")
    result = invoke("estimate", toml, "--provider", "gemini")
    header = next(line for line in result.output.splitlines() if line.startswith("| stage |"))
    assert "batch cost USD" in header and "cached prompt tokens" in header
    figures = json.loads(invoke("estimate", toml, "--provider", "gemini", "--json").output)
    for name, f in [*figures["stages"].items(), ("total", figures["total"])]:
        # Uncached prompt tokens at the input price, cached ones at a tenth of it (half of that in batch mode),
        # explicit cache writes (online only) at the input price; embeddings the same in both modes.
        p, c, o, e, w = (
            f["prompt_tokens"],
            f["cached_prompt_tokens"],
            f["output_tokens"],
            f["embed_tokens"],
            f["cache_tokens"],
        )
        assert abs(f["cost_usd"] - ((p - c) * 0.5 + c * 0.05 + o * 3.0 + w * 0.5 + e * 0.15) / 1e6) < 1e-9, name
        assert abs(f["batch_cost_usd"] - ((p - c) * 0.1 + c * 0.025 + o * 0.6 + e * 0.15) / 1e6) < 1e-9, name
    assert (
        figures["total"]["cached_prompt_tokens"] > 0
        and figures["total"]["batch_cost_usd"] < figures["total"]["cost_usd"]
    )


def test_estimate_json_holds_the_same_figures_as_the_table(gemini_env, tmp_path):
    toml = write_pipeline(tmp_path, limit=40, extra=EXTRA + "[llm.prices]\nbatch_input = 0.1\nbatch_output = 0.6\n")
    table = invoke("estimate", toml, "--provider", "gemini").output
    rows = {
        cells[1].strip(): cells
        for cells in (line.split("|") for line in table.splitlines())
        if len(cells) > 8 and cells[1].strip() not in ("stage", "---")
    }
    online = json.loads(invoke("estimate", toml, "--provider", "gemini", "--json").output)
    batch = json.loads(invoke("estimate", toml, "--provider", "gemini", "--json", "--batch").output)
    assert gemini_env.count() == 0 and not (tmp_path / "outputs").exists()
    assert list(online["stages"]) == ["discover", "cluster", "canonicalize", "merge", "tag"]
    assert (online["mode"], batch["mode"], online["n_criteria"]) == ("online", "batch", 40)
    for name, cells in rows.items():
        got = online["total"] if name == "total" else online["stages"][name]
        assert [got["calls"], got["prompt_tokens"], got["output_tokens"], got["embed_calls"]] == [
            int(c) for c in cells[2:6]
        ], name
        assert f"{got['cost_usd']:.4f}" == cells[6].strip() and f"{got['batch_cost_usd']:.4f}" == cells[7].strip(), name
        mode_cost = batch["total"] if name == "total" else batch["stages"][name]
        assert (
            got["cost_usd_in_mode"] == got["cost_usd"] and mode_cost["cost_usd_in_mode"] == mode_cost["batch_cost_usd"]
        )
    assert online["total"]["calls"] == sum(s["calls"] for s in online["stages"].values()) > 0
    assert 0 < online["total"]["batch_cost_usd"] < online["total"]["cost_usd"]
    assert online["prices_per_million_tokens"]["batch_input"] == 0.1


def test_batch_embeddings_are_accounted_like_online_ones(gemini_env, tmp_path):
    # The batch embedding job's tokens reach the ledger, so the cluster stage's accounted cost stands
    # beside its estimate (benchmarks/scale.py) instead of showing nothing.
    import polars as pl

    from taxonomy.stages.cluster_criteria import label_phrase

    toml = write_pipeline(tmp_path, limit=40, extra=EXTRA + "[llm.batch]\npoll_s = 0.02\n")
    run = tmp_path / "run"
    invoke("run", toml, "--provider", "gemini", "--batch", "--run-dir", run, "-q", "--no-report")
    assert gemini_env.count("embed", mode="gemini") == 0  # embedded by a batch job, not online
    cluster = json.loads((run / "manifest.json").read_text())["stages"]["cluster"]
    # Stage 2a embeds each criterion's text and each label's words (cluster.unit = "criteria"), in one call.
    labels = list(dict.fromkeys(label_phrase(lab) for lab in pl.read_parquet(run / "clusters.parquet")["label"]))
    embedded = pl.read_parquet(run / "criteria.parquet")["text"].to_list() + labels
    assert cluster["embed_calls"] == 1
    assert cluster["embed_tokens"] == sum(len(t) for t in embedded) // 4 + len(embedded)
    assert cluster["cost_usd"] == round(cluster["embed_tokens"] * 0.15 / 1e6, 6) > 0
