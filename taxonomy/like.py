"""`taxonomy run FILE --like RUN`: where the corpus agrees, the new run keeps the earlier run's capability names.

Capabilities are matched as `taxonomy diff` matches them (diff.py): one-to-one, Hungarian on the Jaccard of the
criteria they hold as primary tag, here with criteria matched by their text (a benchmark's v2 may number them
anew). A pair that overlaps at least diff.SAME is the same capability, and the new one takes the earlier name;
every other capability keeps its own. Each rename is an `edit rename` (edit.py): the label rules and unique names
hold, the card's prose and the siblings' boundaries follow the name, and the tags are mapped, not asked again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from taxonomy.diff import SAME, Side, diff_sides, load_side
from taxonomy.edit import map_tags, rename_capability
from taxonomy.provenance import fingerprint
from taxonomy.run import CRITERIA, TAGS, TAGS_SUMMARY, TAXONOMY, TAXONOMY_MD, now
from taxonomy.shares import primary_shares, summary_markdown
from taxonomy.taxonomy_io import load_taxonomy, taxonomy_markdown
from taxonomy.validate import label_problems


@dataclass
class Kept:
    like: Path
    matched: int  # capabilities of the new run matched to one of the earlier run at Jaccard >= SAME
    kept: int  # of those, how many now carry the earlier name
    total: int
    renames: dict[str, str] = field(default_factory=dict)  # new run's name -> earlier name
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        own = self.total - self.kept
        return (
            f"Names: kept {self.kept} of {self.total} capability names from {self.like} (matched by the criteria "
            f"they hold, Jaccard >= {SAME}); {own} keep{'s' if own == 1 else ''} this run's own"
        )


def by_text(side: Side) -> Side:
    """The side with each criterion keyed by its text (the n-th criterion of a text is its n-th occurrence)."""
    text = pl.col("text").fill_null("").str.strip_chars().str.to_lowercase()
    keyed = side.tags.with_columns(criterion_id=text + "#" + pl.int_range(pl.len()).over(text).cast(pl.Utf8))
    return Side(side.path, side.names, side.content_hash, keyed)


def check_like(like: Path) -> Side:
    """The earlier run, checked before anything runs: a run directory whose tags belong to its taxonomy."""
    return by_text(load_side(Path(like)))


def _planned(matches, names: list[str], rules) -> tuple[list[tuple[str, str]], list[str]]:
    """The renames, as steps each of which leaves the names unique and within the label rules: a name another
    capability holds waits until that one is renamed; names swapped around a cycle go through a temporary name;
    an earlier name held by a capability that keeps its own is not taken (said in the notes)."""
    want = {m.b: m.a for m in matches if m.jaccard >= SAME and m.a != m.b}
    notes = []
    for new, old in list(want.items()):
        if label_problems(old, rules):
            notes.append(f"`{new}` keeps its name: `{old}` breaks a label rule ({label_problems(old, rules)[0]})")
            del want[new]
    steps, current = [], list(names)
    while want:
        ready = [new for new, old in want.items() if old not in current]
        blocked = [new for new, old in want.items() if old not in want]
        if ready or blocked:
            for new in ready:
                steps.append((new, want.pop(new)))
                current[current.index(new)] = steps[-1][1]
            for new in [] if ready else blocked:
                notes.append(f"`{new}` keeps its name: `{want.pop(new)}` is held by a capability that keeps its own")
            continue
        new, old = next(iter(want.items()))  # only cycles are left: free one name through a temporary one
        temp = _temporary(old, current, rules)
        if temp is None:
            notes.append(f"`{new}` keeps its name: no temporary name to swap `{old}` through")
            del want[new]
            continue
        steps.append((new, temp))
        current[current.index(new)] = temp
        del want[new]
        want[temp] = old
    return steps, notes


def _temporary(name: str, taken: list[str], rules) -> str | None:
    """A name within the label rules that no capability holds, to pass a name around a cycle."""
    rest = name.split("_", 1)[-1]
    for word in ("interim", "pending", "provisional", "transitional"):
        candidate = f"{word}_{rest}"
        if candidate not in taken and not label_problems(candidate, rules):
            return candidate
    return None


def final_names(steps: list[tuple[str, str]]) -> dict[str, str]:
    """Each renamed capability's name before the steps -> its name after them."""
    origin: dict[str, str] = {}
    for a, b in steps:
        origin[b] = origin.pop(a, a)
    return {first: last for last, first in origin.items() if first != last}


def keep_names(s, like: Side) -> Kept:
    """Rename the session's capabilities after their partners in `like` (see the module docstring) and write
    the run's taxonomy, tags and their provenance once. `s` is a pipeline Session whose run is tagged."""
    run = s.run
    here = by_text(load_side(run.path))
    matches = diff_sides(like, here).matches
    taxonomy = load_taxonomy(run.path / TAXONOMY, s.cfg.labels)
    steps, notes = _planned(matches, taxonomy.names(), s.cfg.labels)
    renames = final_names(steps)
    if renames:
        taxonomy = _renamed(taxonomy, steps, renames, like.path, s.cfg.labels)
        _write(s, taxonomy, map_tags(run.read_parquet(TAGS, "tag"), renames))
    agreed = [m for m in matches if m.jaccard >= SAME]
    kept = sum(renames.get(m.b, m.b) == m.a for m in agreed)
    result = Kept(like.path, len(agreed), kept, len(taxonomy.names()), renames, notes)
    run.manifest["like"] = {
        "run": str(like.path),
        "taxonomy_hash": like.content_hash,
        "kept": result.kept,
        "renames": renames,
        "finished": now(),
    }
    run.save_manifest()
    return result


def _renamed(taxonomy, steps: list[tuple[str, str]], renames: dict[str, str], like: Path, rules):
    for old_name, new_name in steps:
        taxonomy = rename_capability(taxonomy, old_name, new_name, rules)
    kept = ", ".join(f"`{a}` -> `{b}`" for a, b in renames.items())
    taxonomy.repairs = taxonomy.repairs + [f"names kept from {like} (`taxonomy run --like`): {kept}"]
    taxonomy.content_hash = taxonomy.compute_hash()
    return taxonomy


def _write(s, taxonomy, tags: pl.DataFrame) -> None:
    """The renamed taxonomy and its mapped tags replace the run's; the key-less tagger follows the names, and the
    tags' provenance names the renamed taxonomy (so nothing is tagged again)."""
    run = s.run
    shares = primary_shares(tags, run.read_parquet(CRITERIA))
    run.write_json(TAXONOMY, taxonomy.model_dump())
    tagger = s.backend.fitted_tagger(run.path)
    if tagger is not None:
        labels_of = {member: cap.labels for cap in taxonomy.capabilities for member in cap.members}
        tagger.bind(taxonomy, labels_of).save(run.path)
    run.write_parquet(TAGS, tags)
    run.write_text(TAXONOMY_MD, taxonomy_markdown(taxonomy, shares))
    run.write_text(TAGS_SUMMARY, summary_markdown(shares))
    tag_info = (run.manifest.get("stages") or {}).get("tag")
    if isinstance(tag_info, dict):
        digest, parts = fingerprint(s, "tag", taxonomy.content_hash)
        tag_info.update(taxonomy_hash=taxonomy.content_hash, fingerprint=digest, fingerprint_parts=parts)
