"""Stage 1 without an LLM: each criterion labelled with the kind of check it reads like.

One Ward tree over the criterion vectors (features.py: tokens weighted by how evenly they
spread across tasks, predicate positions, task means partly removed) is cut twice: into
COARSE_KINDS broad kinds and, lower, into FINE_KINDS fine kinds nested in them. A criterion's
label names its fine kind by the check-language words most over-represented in it (spread over
many tasks, not piled up in a few, not so common that every criterion has them, never a
function word); kinds whose words agree up to order take their next word, so no two labels are
paraphrases. Scripts without Latin letters get a stable letter code of their characters
(labels are [a-z_] by rule). A criterion that opens with a word of an opening family (families.py:
"Advises / Recommends / Suggests") carries the family's label instead of its fine kind's, so the
merge never splits one check by the verb it was written with.

Nothing here reads the corpus's `category` or any gold field. The rationale quotes the
criterion, so it passes the same grounding validator an LLM's does.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np
import polars as pl
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.cluster import MiniBatchKMeans
from threadpoolctl import threadpool_limits

from taxonomy.config import LabelRules
from taxonomy.offline.families import Families, first_word, opening_families
from taxonomy.offline.features import CriterionSpace, is_spaceless
from taxonomy.offline.languages import function_words
from taxonomy.validate import label_gist, label_problems

__all__ = ["discover_offline", "broad_kinds", "fine_kinds", "label_vectors"]

HEAD = "check"
PREDICATE_WORDS = 2      # words of the predicate in a label
SPARE_WORDS = 3          # further ranked words of a kind, to tell apart kinds whose first words agree
COMMON_DF = 0.2          # a word in more than this share of criteria is grammar, not a predicate
MIN_SPREAD = 0.5         # below this spread a word is a task's topic
MIN_COVERAGE = 0.02      # ... or when it is used by fewer than this share of tasks
MIN_TASKS = 3            # ... and never by fewer than this many (or all of them, in tiny corpora)
SEED = 0                 # Stage 1 and the Stage 2a embedder must cut the same kinds
COARSE_KINDS = 9         # broad kinds first (the middle of the 8-10 capabilities)
WARD_MAX = 12_000        # exact Ward tree up to this many criteria
PRE_CLUSTERS = 2_000     # above it, the tree is built over this many k-means centroids
FINE_KINDS = 80          # fine kinds of check: the Ward tree over the criterion vectors cut this low
_QUOTES = "\"'“”‘’`「」『』"
_MAX_QUOTE = 110
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _ascii(word: str) -> str:
    return unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode().lower()


def _code(chars: str) -> str:
    """Two letters standing for a run of non-Latin predicate characters (stable across runs)."""
    h = int(hashlib.sha1(chars.encode("utf-8")).hexdigest(), 16)
    return "".join(_LETTERS[(h >> (5 * i)) % 26] for i in range(3))


def _fit_label(words: list[str], rules: LabelRules) -> str | None:
    suffix_words = [w for w in rules.suffix.split("_") if w]
    room = rules.max_words - len(suffix_words) - 1
    content = words[:room]
    for pad in ([], ["for"], ["for", "the"]):  # grammar, never a word the criteria don't use ("statement")
        words = pad + content
        if 1 + len(words) + len(suffix_words) >= rules.min_words:
            break
    label = "_".join([HEAD, *words]) + rules.suffix
    return None if label_problems(label, rules) else label


def _rationale(text: str, rules: LabelRules) -> str:
    plain = " ".join(re.sub(f"[{_QUOTES}]", "", text).split())
    quote = plain
    if len(plain) > _MAX_QUOTE:
        cut = plain[:_MAX_QUOTE]
        space = cut.rfind(" ")
        quote = cut[:space] if space > _MAX_QUOTE // 2 else cut
    quote = quote.rstrip(" ,;:.")
    return f'{rules.rationale_prefix} establish from the evidence that "{quote}" holds.'


def broad_kinds(space: CriterionSpace, n_coarse: int = COARSE_KINDS, seed: int = SEED) -> np.ndarray:
    """Each criterion's broad kind of check: the Ward tree over the criterion vectors cut into n_coarse."""
    return _cut(space, n_coarse, seed)


def fine_kinds(space: CriterionSpace, n_kinds: int, seed: int = SEED) -> np.ndarray:
    """Each criterion's fine kind of check: the same Ward tree cut lower, so every fine kind lies
    inside one broad kind and Stage 2, merging the fine ones, can recover the broad kinds (the
    label embedding carries them, embed.py)."""
    return _cut(space, n_kinds, seed)


def _cut(space: CriterionSpace, k: int, seed: int) -> np.ndarray:
    n = len(space.vectors)
    k = max(1, min(k, n))
    if k == 1 or n < 2:
        return np.zeros(n, dtype=np.int64)
    tree, leaf_of = _ward_tree(space, seed)
    if len(tree) + 1 <= k:  # fewer tree leaves (pre-clusters) than kinds asked for
        return leaf_of
    cut = fcluster(tree, k, criterion="maxclust")
    return np.unique(cut, return_inverse=True)[1].astype(np.int64)[leaf_of]


def _ward_tree(space: CriterionSpace, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(scipy linkage, leaf of each criterion), built once per criterion space.

    Ward, not k-means: measured on three corpora with gold check kinds (benchmarks/quality.py),
    Ward's tree over the same vectors kept more of the kinds (PaperBench fine 0.167 -> 0.241 NMI,
    DevAI 0.542 -> 0.609, HealthBench 0.141 -> 0.151) and does not depend on a seed. Its memory
    grows with n squared (0.9 GB at 9,000 criteria), so above WARD_MAX criteria the tree is built
    over mini-batch k-means centroids instead."""
    # Kept on the space itself: Stage 1 and the Stage 2a embedder get the same cached space for
    # the same corpus (CriterionSpace.fit), so they cut one tree, and another corpus never sees it.
    key = ("ward_tree", seed)
    if key not in space.memo:
        x = space.vectors.astype(np.float64)
        leaf_of = np.arange(len(x))
        if len(x) > WARD_MAX:
            with threadpool_limits(1):
                km = MiniBatchKMeans(n_clusters=PRE_CLUSTERS, random_state=seed, n_init=1, batch_size=4096).fit(x)
            x, leaf_of = km.cluster_centers_, km.labels_.astype(np.int64)
        space.memo[key] = (linkage(x, method="ward"), leaf_of)
    return space.memo[key]


def kind_names(space: CriterionSpace, kinds: np.ndarray, rules: LabelRules, function: frozenset[str]) -> dict[int, list[str]]:
    """Words naming each fine kind: the check-language words (predicate positions count) most
    over-represented in its criteria against the corpus."""
    # Function words name no check ("check_both_have"); the corpus decides every other word.
    banned = set(rules.forbidden_tokens) | set(rules.agent_verbs) | {HEAD, "capability"} | function
    x = space.counts
    n = x.shape[0]
    base = np.asarray(x.sum(axis=0)).ravel() / max(n, 1)
    words = [v[1:] if v.startswith("^") else v for v in space.vocabulary]
    index = {v: i for i, v in enumerate(space.vocabulary)}
    quality = np.zeros(len(words))
    floor = min_coverage(space)
    for i, (v, w) in enumerate(zip(space.vocabulary, words)):
        j = index.get(w, i)  # statistics of the plain token behind a positional one
        if space.doc_freq[j] <= COMMON_DF and space.spread[j] >= MIN_SPREAD and space.coverage[j] >= floor:
            quality[i] = space.spread[j]
    out = {}
    for k in np.unique(kinds):
        rows = np.flatnonzero(kinds == k)
        p = np.asarray(x[rows].sum(axis=0)).ravel() / len(rows)
        score = p * np.log(np.maximum(p, 1e-12) / np.maximum(base, 1e-12)) * quality
        chosen: list[str] = []
        spaceless: list[str] = []
        for i in np.argsort(-score, kind="stable")[:40]:
            if score[i] <= 0:
                break
            w = words[i]
            if is_spaceless(w):
                spaceless.append(w)
                continue
            a = _ascii(w)
            if len(a) >= 3 and a.isalpha() and a not in banned and a not in chosen:
                chosen.append(a)
            if len(chosen) == PREDICATE_WORDS + SPARE_WORDS:
                break
        if len(chosen) < PREDICATE_WORDS and spaceless:
            chosen.append(_code("".join(spaceless[:2])))
        out[int(k)] = chosen or ["unmarked"]
    return out


def _distinct_labels(names: dict[int, list[str]], rules: LabelRules, taken: set | None = None) -> dict[int, str]:
    """One label per kind from its first PREDICATE_WORDS words. Two kinds whose labels would agree
    up to word order and inflection (a paraphrase to the Stage 1 validator, and one label to
    Stage 2) take their next ranked word instead; only when none is left do they share a label.
    `taken`: gists already used (the opening families' labels)."""
    out: dict[int, str] = {}
    taken = set(taken or ())
    for k in sorted(names):
        words = names[k]
        head = words[:PREDICATE_WORDS]
        candidates = [head] + [head[:-1] + [w] for w in words[PREDICATE_WORDS:]] + [head + [w] for w in words[PREDICATE_WORDS:]]
        labels = [label for label in (_fit_label(c, rules) for c in candidates) if label]
        label = next((lab for lab in labels if label_gist(lab, rules) not in taken), None)
        label = label or (labels[0] if labels else None) or _fit_label(["unmarked"], rules)
        taken.add(label_gist(label, rules))
        out[k] = label
    return out


def _family_labels(families: Families, rules: LabelRules) -> dict[str, str]:
    """A label for each opening family, from its two commonest words ("check_advises_recommends_capability"):
    criteria that open with any of its words check one thing in several wordings, so they share a label
    whatever else their words say, and Stage 2 cannot split the family into capabilities by its verbs."""
    out: dict[str, str] = {}
    gists: set = set()
    for head, words in families.members.items():
        label = next((lab for lab in (_fit_label([_ascii(w) for w in words[:n]], rules) for n in (2, 1)) if lab), None)
        if label and label_gist(label, rules) not in gists:
            out[head] = label
            gists.add(label_gist(label, rules))
    return out


def min_coverage(space: CriterionSpace) -> float:
    return max(MIN_COVERAGE, min(MIN_TASKS, space.n_tasks) / max(space.n_tasks, 1) - 1e-9)


def discover_offline(frame: pl.DataFrame, rules: LabelRules, space: CriterionSpace | None = None,
                     n_kinds: int = FINE_KINDS) -> pl.DataFrame:
    """Stage-1 table (criterion_id, labels, rationale) for every row of a criterion frame."""
    texts = [t or "" for t in frame["text"].to_list()]
    tasks = frame["task_id"].cast(pl.Utf8).to_list()
    if space is None:
        space = CriterionSpace.fit(texts, tasks)
    kinds = fine_kinds(space, n_kinds, seed=SEED)
    names = kind_names(space, kinds, rules, function_words(texts))
    families = opening_families(texts, tasks)
    family_label = _family_labels(families, rules)
    kind_label = _distinct_labels(names, rules, {label_gist(label, rules) for label in family_label.values()})
    rows = []
    for text, k in zip(texts, kinds.tolist()):
        first = first_word(text)
        family = families.of(first[0]) if first else None
        rows.append(([family_label.get(family) or kind_label[k]], _rationale(text, rules)))
    return pl.DataFrame(
        {
            "criterion_id": frame["criterion_id"].cast(pl.Utf8),
            "labels": [labels for labels, _ in rows],
            "rationale": [rationale for _, rationale in rows],
        },
        schema={"criterion_id": pl.Utf8, "labels": pl.List(pl.Utf8), "rationale": pl.Utf8},
    )


def label_vectors(labels_per_criterion: list[list[str]], vectors: np.ndarray, wanted: list[str]) -> np.ndarray:
    """Each wanted label's vector: the mean of the vectors of the criteria that carry it
    (a criterion's first label counts fully, later ones half), unit norm."""
    index = {label: i for i, label in enumerate(wanted)}
    sums = np.zeros((len(wanted), vectors.shape[1]), dtype=np.float64)
    for row, labels in enumerate(labels_per_criterion):
        for rank, label in enumerate(labels or []):
            i = index.get(label)
            if i is not None:
                sums[i] += vectors[row] * (1.0 if rank == 0 else 0.5)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return (sums / np.where(norms > 0, norms, 1.0)).astype(np.float32)
