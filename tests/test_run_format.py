"""Run folders and taxonomy files written by older versions: they still load, with the same content hash and
the same recorded settings."""

from __future__ import annotations

import json

from taxonomy.config import PipelineConfig
from taxonomy.run import RunDir, config_from_run
from taxonomy.taxonomy_io import OLD_KEYS, load_taxonomy
from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "run" / "taxonomy.json"


def test_an_old_taxonomy_json_with_a_placement_list_loads_with_the_same_content_hash(tmp_path):
    raw = json.loads(FIXTURE.read_text(encoding="utf-8"))
    raw["placement"] = [
        {"kind": "opens", "text": "the", "capability": raw["capabilities"][0]["name"], "caught": 3, "right": 2}
    ]
    raw["placement_hash"] = "0123456789abcdef"
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(raw), encoding="utf-8")
    new.write_text(json.dumps({k: v for k, v in raw.items() if k not in OLD_KEYS}), encoding="utf-8")
    loaded = load_taxonomy(old)
    assert not any(hasattr(loaded, key) for key in OLD_KEYS)
    assert loaded.content_hash == load_taxonomy(new).content_hash
    assert "placement" not in loaded.model_dump()  # a rewrite (edit) drops them


def test_merge_confusable_similarity_stays_so_recorded_runs_load_and_keep_their_merge(tmp_path):
    """Unused, but kept: every run's manifest records the whole [merge] section and the merge fingerprint hashes it.
    Dropping the key would make every recorded run's settings fail to load (extra keys are refused) and recompute
    every run's merge and tagging once."""
    cfg = PipelineConfig.model_validate({"name": "old", "corpus": {"path": "rubric.csv"}})
    settings = json.loads(cfg.model_dump_json(exclude={"base_dir"}))
    assert "confusable_similarity" in settings["merge"]
    run = RunDir(tmp_path / "run")
    run.manifest.update(settings=settings, config_dir=str(tmp_path))
    run.save_manifest()
    assert config_from_run(run.path).merge.confusable_similarity == settings["merge"]["confusable_similarity"]
