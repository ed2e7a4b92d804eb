"""Compare two taxonomies through the criteria they tag: `taxonomy diff RUN_A RUN_B`.

Capabilities are matched by the criteria they hold as primary tag, not by name: two seeds
or two models may name one capability differently, and one name may come to mean something
else. The one-to-one matching maximises the summed Jaccard overlap (Hungarian algorithm);
what it cannot pair is named as a split (one capability of A spread over several of B), a
merge (several of A gathered into one of B), or as new / gone. Agreement of the primary tags
over the shared criteria is ARI and NMI, which ignore names altogether.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from taxonomy.run import CRITERIA, TAGS, TAXONOMY, RunDir, RunError, taxonomy_in_use
from taxonomy.taxonomy_io import load_taxonomy

PART = 0.2  # a capability sends (split) or receives (merge) at least this share to count as a part
SAME = 0.5  # a matched pair overlapping at least this (Jaccard) is the same capability, maybe renamed
MAX_MOVED_LISTED = 50


class DiffError(RunError):
    """Two runs that cannot be compared, on one line with the fix (a RunError, so the CLI exits 2)."""


@dataclass
class Side:
    path: Path
    names: list[str]
    content_hash: str
    tags: pl.DataFrame  # criterion_id, task_id, text, primary (tagged criteria only)


@dataclass
class Match:
    a: str
    b: str
    n_a: int
    n_b: int
    overlap: int
    jaccard: float

    @property
    def kind(self) -> str:
        if self.jaccard >= SAME:
            return "same" if self.a == self.b else "renamed"
        return "same name, other criteria" if self.a == self.b else "weak match"


@dataclass
class TaxonomyDiff:
    a: Side
    b: Side
    n_shared: int
    ari: float
    nmi: float
    matches: list[Match]
    splits: dict[str, list[tuple[str, float]]]  # capability of A -> [(capability of B, share of A's criteria)]
    merges: dict[str, list[tuple[str, float]]]  # capability of B -> [(capability of A, share of B's criteria)]
    only_a: list[str]
    only_b: list[str]
    moved: pl.DataFrame  # criterion_id, task_id, text, from, to, expected
    notes: list[str] = field(default_factory=list)

    def verdict(self, m: Match) -> str:
        """A pair's verdict: a capability of A that was split, or one of B that gathered several, is that first
        (its partner is only its largest piece), else what the overlap and the names say."""
        if m.a in self.splits:
            return "split"
        if m.b in self.merges:
            return "merge"
        return m.kind

    @property
    def renamed(self) -> list[Match]:
        return [m for m in self.matches if self.verdict(m) == "renamed"]

    @property
    def moved_share(self) -> float:
        return self.moved.height / self.n_shared if self.n_shared else 0.0

    def summary(self) -> dict[str, float]:
        return {
            "shared": self.n_shared,
            "ari": self.ari,
            "nmi": self.nmi,
            "moved_share": self.moved_share,
            "matched_same": sum(m.kind != "weak match" for m in self.matches),
            "renamed": len(self.renamed),
            "splits": len(self.splits),
            "merges": len(self.merges),
        }

    def to_markdown(self, max_moved: int = MAX_MOVED_LISTED) -> str:
        a, b = self.a, self.b
        lines = [
            "# Taxonomy diff",
            "",
            f"- A: `{a.path}` (taxonomy `{a.content_hash}`, {len(a.names)} "
            f"capabilities, {a.tags.height:,} tagged criteria)",
            f"- B: `{b.path}` (taxonomy `{b.content_hash}`, {len(b.names)} "
            f"capabilities, {b.tags.height:,} tagged criteria)",
            f"- Shared criteria with a primary tag in both: {self.n_shared:,}",
            "",
            "| agreement of primary tags | value |",
            "|---|---:|",
            f"| ARI | {self.ari:.3f} |",
            f"| NMI | {self.nmi:.3f} |",
            f"| criteria that moved | {self.moved.height:,} ({100 * self.moved_share:.1f}%) |",
            "",
            "ARI and NMI compare the partitions of the shared criteria by primary tag; they do not depend on names.",
            "A criterion moved when its primary tag in B is not the capability matched to its primary tag in A.",
            "",
            "## Capabilities matched one-to-one",
            "",
            "| capability in A | capability in B | criteria in A | criteria in B | shared | Jaccard | verdict |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        lines += [
            f"| `{m.a}` | `{m.b}` | {m.n_a:,} | {m.n_b:,} | {m.overlap:,} | {m.jaccard:.2f} | {self.verdict(m)} |"
            for m in self.matches
        ]
        lines += ["", "## Renamed", ""]
        lines += [f"- `{m.a}` → `{m.b}` (Jaccard {m.jaccard:.2f})" for m in self.renamed] or ["_none_"]
        lines += ["", "## Splits (one capability of A spread over several of B)", ""]
        lines += [
            f"- `{src}` → " + ", ".join(f"`{dst}` ({100 * share:.0f}%)" for dst, share in parts)
            for src, parts in self.splits.items()
        ] or ["_none_"]
        lines += ["", "## Merges (several capabilities of A gathered into one of B)", ""]
        lines += [
            "- " + ", ".join(f"`{src}` ({100 * share:.0f}%)" for src, share in parts) + f" → `{dst}`"
            for dst, parts in self.merges.items()
        ] or ["_none_"]
        lines += ["", "## Only in one run (no one-to-one partner)", ""]
        other = " (the capability of that name in {} shares too few of its criteria to be its partner)"
        lines += (
            [f"- only in A: `{n}`" + (other.format("B") if n in b.names else "") for n in self.only_a]
            + [f"- only in B: `{n}`" + (other.format("A") if n in a.names else "") for n in self.only_b]
        ) or ["_none_"]
        lines += self._moved_markdown(max_moved)
        if self.notes:
            lines += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def _moved_markdown(self, max_moved: int) -> list[str]:
        """The section listing the criteria that moved, the first MAX_MOVED of them."""
        lines = ["", f"## Criteria that moved ({self.moved.height:,})", ""]
        if self.moved.height:
            lines += ["| criterion | task | from (A) | to (B) | text |", "|---|---|---|---|---|"]
            for r in self.moved.head(max_moved).iter_rows(named=True):
                text = " ".join(str(r["text"]).split()).replace("|", "\\|")
                lines.append(
                    f"| {r['criterion_id']} | {r['task_id']} | "
                    f"`{r['from']}`{_partner_note(r)} | `{r['to']}` | {text[:160]} |"
                )
            if self.moved.height > max_moved:
                lines += ["", f"_{self.moved.height - max_moved:,} more not shown._"]
        else:
            lines.append("_none_")
        return lines


def load_side(run_dir: Path) -> Side:
    run = RunDir(Path(run_dir)) if Path(run_dir).is_dir() else None
    if run is None:
        raise DiffError(f"{run_dir}: not a run directory; fix: pass two run directories made by `taxonomy run`")
    taxonomy_in_use(run, "diff")  # tags made with another taxonomy would be compared under the wrong names
    taxonomy = load_taxonomy(run.need(TAXONOMY, "merge"))
    tags = run.read_parquet(TAGS, "tag")
    criteria = run.read_parquet(CRITERIA)
    ok = tags.filter(pl.col("primary").is_not_null())
    if "status" in ok.columns:
        ok = ok.filter(pl.col("status") == "ok")
    frame = criteria.select("criterion_id", "task_id", "text").join(
        ok.select("criterion_id", "primary"), on="criterion_id"
    )
    return Side(Path(run_dir), taxonomy.names(), taxonomy.content_hash, frame)


def diff_runs(run_a: Path, run_b: Path) -> TaxonomyDiff:
    return diff_sides(load_side(run_a), load_side(run_b))


def diff_sides(a: Side, b: Side) -> TaxonomyDiff:
    shared = a.tags.join(b.tags.select("criterion_id", pl.col("primary").alias("primary_b")), on="criterion_id")
    notes = []
    if shared.height == 0:
        raise DiffError(
            f"{b.path}: no criterion id in common with {a.path}; fix: compare runs over the same corpus "
            "(criterion ids come from the corpus, so a re-exported corpus must keep them)"
        )
    if shared.height < min(a.tags.height, b.tags.height):
        notes.append(
            f"{min(a.tags.height, b.tags.height) - shared.height:,} "
            "tagged criteria of the smaller run are not in the other"
        )
    names_a = [n for n in a.names if n in set(shared["primary"])]
    names_b = [n for n in b.names if n in set(shared["primary_b"])]
    counts = _crosstab(shared, names_a, names_b)
    size_a, size_b = counts.sum(axis=1), counts.sum(axis=0)
    jaccard = counts / np.maximum(size_a[:, None] + size_b[None, :] - counts, 1)
    matches = [
        Match(names_a[i], names_b[j], int(size_a[i]), int(size_b[j]), int(counts[i, j]), float(jaccard[i, j]))
        for i, j in _pairs(counts, jaccard, names_a, names_b)
        if counts[i, j] > 0
    ]
    matches.sort(key=lambda m: -m.n_a)
    partner = {m.a: m.b for m in matches}
    labels_a, labels_b = shared["primary"].to_list(), shared["primary_b"].to_list()
    return TaxonomyDiff(
        a=a,
        b=b,
        n_shared=shared.height,
        ari=float(adjusted_rand_score(labels_a, labels_b)),
        nmi=float(normalized_mutual_info_score(labels_a, labels_b)),
        matches=matches,
        splits=_spread(counts, names_a, names_b),
        merges=_spread(counts.T, names_b, names_a),
        only_a=[n for n in a.names if n not in partner],
        only_b=[n for n in b.names if n not in set(partner.values())],
        moved=_moved(shared, partner),
        notes=notes,
    )


def _crosstab(shared: pl.DataFrame, names_a: list[str], names_b: list[str]) -> np.ndarray:
    """Shared criteria per (primary tag in A, primary tag in B)."""
    ia = {n: i for i, n in enumerate(names_a)}
    ib = {n: j for j, n in enumerate(names_b)}
    counts = np.zeros((len(names_a), len(names_b)), dtype=np.int64)
    for pa, pb in shared.select("primary", "primary_b").iter_rows():
        counts[ia[pa], ib[pb]] += 1
    return counts


def _spread(counts: np.ndarray, rows: list[str], columns: list[str]) -> dict[str, list[tuple[str, float]]]:
    """The rows whose criteria spread over two or more columns, most first: the splits of A (rows A, columns B)
    or, transposed, the merges into B. A column is a part when it holds at least PART of the row's criteria, or
    when the row gave it most of its own (SAME): a small piece cut off a capability is still a split of it."""
    size, whole = counts.sum(axis=1), counts.sum(axis=0)
    spread = {}
    for i, name in enumerate(rows):
        parts = [
            (columns[j], counts[i, j] / size[i])
            for j in np.argsort(-counts[i], kind="stable")
            if counts[i, j] and (counts[i, j] / size[i] >= PART or counts[i, j] / whole[j] >= SAME)
        ]
        if len(parts) >= 2:
            spread[name] = [(n, float(s)) for n, s in parts]
    return spread


def _moved(shared: pl.DataFrame, partner: dict[str, str]) -> pl.DataFrame:
    """The shared criteria whose primary tag in B is not the partner of their primary tag in A."""
    expected = shared["primary"].replace_strict(partner, default=None, return_dtype=pl.Utf8)
    return (
        shared.with_columns(expected=expected)
        .filter(pl.col("expected").is_null() | (pl.col("expected") != pl.col("primary_b")))
        .select(
            "criterion_id",
            "task_id",
            "text",
            pl.col("primary").alias("from"),
            pl.col("primary_b").alias("to"),
            "expected",
        )
    )


def _pairs(counts: np.ndarray, jaccard: np.ndarray, names_a: list[str], names_b: list[str]) -> list[tuple[int, int]]:
    """The one-to-one pairs (row of A, column of B). A name both runs hold pairs with itself when the two share at
    least PART of the smaller: after `edit merge SMALL BIG` the merged capability keeps SMALL's name and holds more of
    BIG's criteria, and pairing it with BIG would list SMALL as gone although B has it. The rest: Hungarian on
    Jaccard."""
    col = {n: j for j, n in enumerate(names_b)}
    size_a, size_b = counts.sum(axis=1), counts.sum(axis=0)
    kept = [
        (i, col[n])
        for i, n in enumerate(names_a)
        if n in col and counts[i, col[n]] > 0 and counts[i, col[n]] >= PART * min(size_a[i], size_b[col[n]])
    ]
    rest_a = [i for i in range(len(names_a)) if i not in {i for i, _ in kept}]
    rest_b = [j for j in range(len(names_b)) if j not in {j for _, j in kept}]
    rows, cols = linear_sum_assignment(-jaccard[np.ix_(rest_a, rest_b)]) if rest_a and rest_b else ([], [])
    return kept + [(rest_a[r], rest_b[c]) for r, c in zip(rows, cols)]


def _partner_note(row: dict) -> str:
    """A criterion whose capability has one name in both runs moved only because that name's A capability was
    paired with another of B: the row says with which, or it would read as moving from X to X."""
    if row["from"] != row["to"]:
        return ""
    return f" (paired with `{row['expected']}` in B)" if row["expected"] else " (no partner in B)"


def write_diff(d: TaxonomyDiff, out: Path | None = None) -> Path:
    """Markdown beside run B by default, named by both taxonomy hashes."""
    out = Path(out) if out is not None else d.b.path / "diff" / f"{d.a.content_hash[:8]}-vs-{d.b.content_hash[:8]}.md"
    RunDir(out.parent).write_text(out.name, d.to_markdown())
    return out
