"""A small hand-made run directory for the audit and report tests.

`build_run(path)` writes every artifact a finished run holds (see ARCHITECTURE.md);
the keyword switches drop pieces so tests can check graceful degradation.
`python -m tests.run_fixture [DIR]` writes it to tests/fixtures/run/ to look at.

Some text is hostile on purpose (<script>, &, quotes) to check that the report escapes it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

from taxonomy.schemas import MicroCapability, Taxonomy, TaxonomyCapability

HOSTILE = '<script>alert("x")</script> & <b>bold</b>'

# capability → its micro-capabilities → labels
CAPS = {
    "file_artifact_inspection_capability": {
        "file_existence_check_capability": [
            "check_file_saved_at_path_capability",
            "confirm_output_file_exists_capability",
        ],
        "file_content_parsing_capability": ["read_saved_report_contents_capability"],
    },
    "code_implementation_review_capability": {
        "code_structure_reading_capability": [
            "inspect_model_class_definition_capability",
            "read_training_loop_code_capability",
        ],
        "library_usage_check_capability": ["confirm_library_is_imported_capability"],
    },
    "numeric_result_verification_capability": {
        "metric_value_comparison_capability": [
            "compare_reported_accuracy_value_capability",
            "check_metric_within_tolerance_capability",
        ],
    },
    "execution_log_analysis_capability": {
        "run_log_reading_capability": [
            "read_execution_log_output_capability",
            "confirm_training_ran_to_completion_capability",
        ],
    },
}

# task → [(criterion text, primary capability index, score)]
TASKS = {
    "t1_image_classifier": [
        ("The trained model is saved as `model.pt` in `models/`.", 0, 0.91),
        ("The ResNet-18 model is imported from PyTorch in `src/model.py`.", 1, 0.88),
        ("Test accuracy above 90% is reported in `results/metrics.txt`.", 2, 0.84),
        ("Training ran to completion according to the log.", 3, 0.80),
    ],
    "t2_text_classifier": [
        ("The classifier is saved as `clf.pkl` in `models/`.", 0, 0.90),
        ("A Naive Bayes model is implemented in `src/model.py`.", 1, 0.86),
        ("The F1 score is computed and saved as `results/f1.txt`; the confusion matrix is plotted.", 2, 0.55),
        ("Training ran to completion according to the log output.", 3, 0.77),
    ],
    "t3_forecaster & <co>": [
        ("The forecast plot is saved as `results/forecast.png`.", 0, 0.93),
        ("An LSTM model is implemented in `src/model.py`.", 1, 0.89),
        ("The LSTM model is implemented in `src/model.py`.", 1, 0.87),
        ("RMSE on the test split is reported.", 2, 0.81),
        ("The code is easy to read and maintain.", 1, 0.21),
    ],
    "t4_recommender": [
        ("The recommendations are saved to `results/recs.csv`.", 0, 0.92),
        ("Matrix factorisation is implemented in `src/mf.py`.", 1, 0.90),
        ("Hit rate at 10 is reported, along with NDCG, MRR, and recall.", 2, 0.79),
        (HOSTILE, 1, 0.30),
    ],
    "t5_agent": [
        ("The agent's policy network is defined in `src/policy.py`.", 1, 0.85),
        ("Mean episode return is reported over 10 seeds.", 2, 0.83),
        ("The training log shows 1000 episodes.", 3, 0.78),
    ],
}


def taxonomy() -> Taxonomy:
    n = sum(len(v) for v in TASKS.values())
    counts = [0] * len(CAPS)
    for rows in TASKS.values():
        for _, cap, _ in rows:
            counts[cap] += 1
    caps = [
        TaxonomyCapability(
            name=name,
            description=("Verifies saved files " + HOSTILE) if i == 0 else f"Verifies {name.replace('_', ' ')}.",
            diagnostic_signal=f"the check needs {name.split('_')[0]} evidence",
            example_pattern="X is saved as Y",
            non_examples=["the code is readable"],
            members=list(micro),
            share=counts[i] / n,
        )
        for i, (name, micro) in enumerate(CAPS.items())
    ]
    tax = Taxonomy(corpus="fixture", n_criteria=n, capabilities=caps)
    tax.content_hash = tax.compute_hash()
    return tax


def criteria() -> pl.DataFrame:
    rows = []
    for task, items in TASKS.items():
        for j, (text, _, _) in enumerate(items):
            rows.append(
                {
                    "task_id": task,
                    "criterion_id": f"{task.split('_')[0]}-c{j}",
                    "text": text,
                    "weight": 1.0,
                    "category": None,
                    "direction": "positive",
                    "brief": f"Brief of {task}",
                    "context": "",
                    "source": "fixture",
                }
            )
    return pl.DataFrame(rows, schema_overrides={"category": pl.Utf8})


def tags(*, with_score: bool = True) -> pl.DataFrame:
    names = list(CAPS)
    rows = []
    for task, items in TASKS.items():
        for j, (_, cap, score) in enumerate(items):
            cid = f"{task.split('_')[0]}-c{j}"
            failed = cid == "t5-c2"  # one Stage-3 failure: no tags at all
            second = names[(cap + 1) % len(names)]
            rows.append(
                {
                    "criterion_id": cid,
                    "tags": [] if failed else [names[cap], second],
                    "primary": None if failed else names[cap],
                    "score": None if failed else score,
                    "attempts": 3 if failed else 1,
                    "status": "failed" if failed else "ok",
                    "problems": ["no valid answer after 3 attempts"] if failed else [],
                }
            )
    df = pl.DataFrame(rows, schema_overrides={"primary": pl.Utf8, "score": pl.Float64, "tags": pl.List(pl.Utf8)})
    return df if with_score else df.drop("score")


def write_run(
    path: Path, *, breakdown: bool = True, stage3: bool = True, embeddings: bool = True, manifest: bool = True
) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    crit = criteria()
    crit.write_parquet(path / "criteria.parquet")
    tax = taxonomy()
    (path / "taxonomy.json").write_text(tax.model_dump_json(indent=2), encoding="utf-8")

    labels, micro, cluster_ids = [], [], []
    for micro_name, member_labels in ((m, ls) for caps in CAPS.values() for m, ls in caps.items()):
        cid = len(micro)
        micro.append(
            MicroCapability(
                name=micro_name,
                description=f"{micro_name} description",
                diagnostic_signal="signal",
                example_pattern="pattern",
                non_examples=[],
                cluster_id=cid,
                n_criteria=len(member_labels),
                member_labels=member_labels,
            ).model_dump()
        )
        labels += member_labels
        cluster_ids += [cid] * len(member_labels)
    # One orphan cluster that no capability lists, to exercise the "(unmapped)" colour.
    labels.append("judge_subjective_code_quality_capability")
    cluster_ids.append(len(micro))
    (path / "micro_capabilities.json").write_text(json.dumps(micro, indent=2), encoding="utf-8")
    pl.DataFrame(
        {"label": labels, "frequency": [1 + i % 4 for i in range(len(labels))], "cluster_id": cluster_ids}
    ).write_parquet(path / "clusters.parquet")
    if embeddings:
        rng = np.random.default_rng(0)
        centres = rng.normal(size=(max(cluster_ids) + 1, 16)) * 3
        np.save(path / "label_embeddings.npy", centres[cluster_ids] + rng.normal(size=(len(labels), 16)))

    pl.DataFrame(
        {
            "criterion_id": crit["criterion_id"],
            "labels": [[labels[i % len(labels)]] for i in range(crit.height)],
            "rationale": ["the verifier needs to read the file"] * crit.height,
            "attempts": [2 if i == 0 else 1 for i in range(crit.height)],
            "status": ["failed" if i == 1 else "ok" for i in range(crit.height)],
            "problems": [[] for _ in range(crit.height)],
        }
    ).write_parquet(path / "stage1_labels.parquet")
    pl.DataFrame(
        {"criterion_id": crit["criterion_id"], "dominant_cluster": [i % len(micro) for i in range(crit.height)]}
    ).write_parquet(path / "criterion_clusters.parquet")

    if stage3:
        tags().write_parquet(path / "stage3_tags.parquet")
    if manifest:

        def stage(s, c, h, p, o, usd):
            return {
                "seconds": s,
                "calls": c,
                "cache_hits": h,
                "prompt_tokens": p,
                "output_tokens": o,
                "cost_usd": usd,
            }

        (path / "manifest.json").write_text(
            json.dumps(
                {
                    "pipeline": "fixture <pipeline>",
                    "backend": "offline",
                    "model": "fake-model-1",
                    "created": "2025-01-02T03:04:05+00:00",
                    "stages": {
                        "discover": stage(12.5, 3, 1, 4200, 800, 0.0045),
                        "cluster": stage(0.4, 0, 0, 0, 0, 0.0),
                        "canonicalize": stage(3.1, 7, 0, 2100, 600, 0.0029),
                        "merge": stage(2.2, 1, 0, 1500, 700, 0.0029),
                        "tag": stage(9.8, 3, 3, 3900, 500, 0.0035),
                    },
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    if breakdown:
        _write_breakdown(path / "breakdown")
    return path


def _write_breakdown(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    rows = []
    for v, verifier in enumerate(["judge_a", "judge_b"]):
        for i, cap in enumerate(CAPS):
            fp, fn = 0.05 + 0.04 * i + 0.02 * v, 0.20 - 0.03 * i + 0.01 * v
            rows.append(
                {
                    "verifier": verifier,
                    "capability": cap,
                    "n": 40 + i,
                    "error_rate": (fp + fn) / 2,
                    "fp_rate": fp,
                    "fn_rate": fn,
                    "accuracy": 1 - (fp + fn) / 2,
                    "f1_unmet": 0.7 + 0.02 * i,
                    "ci_lo": (fp + fn) / 2 - 0.05,
                    "ci_hi": (fp + fn) / 2 + 0.05,
                }
            )
    pl.DataFrame(rows).write_csv(folder / "breakdown.csv")
    for verifier in ("judge_a", "judge_b"):
        pl.DataFrame(
            {
                "capability": list(CAPS),
                "error_rate": [0.1, 0.2, 0.15, 0.3],
                "overall_error_rate": [0.18] * 4,
                "gap": [-0.08, 0.02, -0.03, 0.12],
            }
        ).write_csv(folder / f"gap_{verifier}.csv")


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "fixtures" / "run"
    print(write_run(out))
