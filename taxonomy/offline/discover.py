"""Stage 1 without a model: each criterion labelled with the fine kind of check it reads like.

One Ward tree over the criterion vectors (features.py) is cut twice: into `fine_kinds` fine kinds,
whose names are the Stage 1 labels (the micro-clusters of Stage 2), and into `broad_kinds` broad
kinds, which the label embedding carries so that the merge recovers them (cluster.py). A fine kind is
named by the check-language words most over-represented in it (spread over many tasks, not piled up
in a few, never a function word); kinds whose words agree up to order take their next word, so no
two labels are paraphrases. Scripts without Latin letters get a stable letter code (labels are
[a-z_] by rule). The rationale quotes the criterion, so it is grounded by construction.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import polars as pl
from anyascii import anyascii
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.cluster import MiniBatchKMeans
from threadpoolctl import threadpool_limits

from taxonomy.config import LabelRules, OfflineConfig
from taxonomy.offline.features import CriterionSpace
from taxonomy.text import function_words, is_spaceless, normalized, words
from taxonomy.validate import label_gist, label_problems

__all__ = ["discover_offline", "cut", "label_vectors"]

HEAD = "check"
NAME_WORDS = 2  # words of a label
SPARE_WORDS = 3  # further ranked words, to tell apart kinds whose first words agree
COMMON_DF = 0.2  # a word in more than this share of criteria is grammar, not a check word
MIN_SPREAD = 0.5  # below this spread over tasks a word is a task's topic
MIN_COVERAGE = 0.02  # a label word is used by at least this share of tasks...
MIN_TASKS = 3  # ...and at least this many (all of them in tiny corpora)
_QUOTES = "\"'“”‘’`「」『』"
_MAX_QUOTE = 110
_NOT_LETTER = re.compile("[^a-z]+")
LOOSE_WORDS = 8  # words a kind may be named from when too few check words qualify
NAMED_KINDS = 20  # kinds named by check words that a corpus needs before a kind without one joins its nearest
# Kinds whose words collide share a label, and so merge. Below the paper's fewest capabilities (a small rubric of a
# few distinct criteria), each kind keeps a label of its own, told apart by a word of its own criteria.
FEWEST_LABELS = 8


def ascii_word(word: str) -> str:
    """A word as a label may spell it ([a-z] by the label rules): any script transliterated by anyascii
    ("возврат" -> "vozvrat", "退款" -> "tuikuan"), anything else dropped."""
    return _NOT_LETTER.sub("", (word if word.isascii() else anyascii(word)).lower())


def cut(space: CriterionSpace, k: int, opts: OfflineConfig) -> np.ndarray:
    """Each criterion's kind when the Ward tree is cut into k; cuts of one tree nest."""
    n = len(space.vectors)
    k = max(1, min(k, n))
    if k == 1 or n < 2:
        return np.zeros(n, dtype=np.int64)
    tree, leaf_of = _ward_tree(space, opts)
    if len(tree) + 1 <= k:  # fewer leaves (pre-clusters) than kinds asked for
        return leaf_of
    groups = fcluster(tree, k, criterion="maxclust")
    return np.unique(groups, return_inverse=True)[1].astype(np.int64)[leaf_of]


def _ward_tree(space: CriterionSpace, opts: OfflineConfig) -> tuple[np.ndarray, np.ndarray]:
    """(scipy linkage, leaf of each criterion), built once per space. Ward needs no seed, so a
    rerun cuts the same kinds; its memory grows with n squared, so a large corpus is first reduced
    to k-means centroids."""
    key = ("ward", opts.ward_exact_max, opts.ward_centroids)
    if key not in space.memo:
        x = space.vectors.astype(np.float64)
        leaf_of = np.arange(len(x))
        if len(x) > opts.ward_exact_max:
            with threadpool_limits(1):
                km = MiniBatchKMeans(n_clusters=opts.ward_centroids, random_state=0, n_init=1, batch_size=4096).fit(x)
            x, leaf_of = km.cluster_centers_, km.labels_.astype(np.int64)
        space.memo[key] = (linkage(x, method="ward"), leaf_of)
    return space.memo[key]


def _word_quality(space: CriterionSpace) -> np.ndarray:
    """Per vocabulary entry: its spread when it may name a kind (check language), else 0."""
    index = {v: i for i, v in enumerate(space.vocabulary)}
    floor = max(MIN_COVERAGE, min(MIN_TASKS, space.n_tasks) / max(space.n_tasks, 1) - 1e-9)
    quality = np.zeros(len(space.vocabulary))
    for i, v in enumerate(space.vocabulary):
        j = index.get(v.lstrip("^"), i)  # a predicate position is judged by its plain word
        if space.doc_freq[j] <= COMMON_DF and space.spread[j] >= MIN_SPREAD and space.coverage[j] >= floor:
            quality[i] = space.spread[j]
    return quality


def kind_words(space: CriterionSpace, kinds: np.ndarray, banned: set[str], loose: bool = True) -> dict[int, list[str]]:
    """Each kind's naming words: the check-language words most over-represented in its criteria, then (a
    small corpus, where few words spread over enough tasks) any of its over-represented words, so every
    kind is named by words of its own criteria. Every script is spelt in [a-z] (`ascii_word`)."""
    x = space.counts
    base = np.asarray(x.sum(axis=0)).ravel() / max(x.shape[0], 1)
    quality = _word_quality(space)
    # A piece of a spaceless script is not a word: the two leading pieces of a kind are spelt as one.
    spelt = ["" if is_spaceless(v) else ascii_word(v.lstrip("^")) for v in space.vocabulary]
    pieces = [v.lstrip("^") if is_spaceless(v) else "" for v in space.vocabulary]
    usable = np.array(
        [
            len(a) >= 3 and a not in banned and v.lstrip("^").lower() not in banned
            for a, v in zip(spelt, space.vocabulary)
        ],
        dtype=bool,
    ) | np.array([bool(p) for p in pieces], dtype=bool)
    index = {v: i for i, v in enumerate(space.vocabulary)}
    tasks = space.coverage[[index.get(v.lstrip("^"), i) for i, v in enumerate(space.vocabulary)]] * space.n_tasks
    shared = tasks >= min(MIN_TASKS, space.n_tasks) - 1e-9
    out = {}
    for k in np.unique(kinds):
        rows = np.flatnonzero(kinds == k)
        p = np.asarray(x[rows].sum(axis=0)).ravel() / len(rows)
        lift = p * np.log(np.maximum(p, 1e-12) / np.maximum(base, 1e-12)) * usable
        chosen: list[str] = []
        # too few check words: then words of several tasks, of any, and its commonest
        tiers = (
            (lift * quality, NAME_WORDS + SPARE_WORDS),
            (lift * shared, LOOSE_WORDS),
            (lift, LOOSE_WORDS),
            (p * usable, LOOSE_WORDS),
        )
        for score, limit in tiers if loose else tiers[:1]:
            chosen = _ranked_words(score, spelt, limit, chosen)
            spaceless: list[str] = []
            for i in np.argsort(-score, kind="stable")[:40]:
                if (
                    pieces[i]
                    and score[i] > 0
                    and len(spaceless) < 2
                    and not any(pieces[i] in q or q in pieces[i] for q in spaceless)
                ):
                    spaceless.append(pieces[i])
            if len(chosen) < NAME_WORDS and spaceless:
                chosen.append(ascii_word("".join(spaceless)))
            if len(chosen) >= NAME_WORDS or spaceless:
                break
        out[int(k)] = chosen
    return out


def _ranked_words(score: np.ndarray, spelt: list[str], limit: int, chosen: list[str]) -> list[str]:
    chosen = list(chosen)
    for i in np.argsort(-score, kind="stable")[:200]:
        if score[i] <= 0 or len(chosen) >= limit:
            break
        if spelt[i] and spelt[i] not in chosen:
            chosen.append(spelt[i])
    return chosen


def _fit_label(words: list[str], rules: LabelRules) -> str | None:
    suffix = [w for w in rules.suffix.split("_") if w]
    content = words[: rules.max_words - len(suffix) - 1]
    for pad in ([], ["for"], ["for", "the"]):  # grammar, never a word the criteria do not use
        padded = pad + content
        if 1 + len(padded) + len(suffix) >= rules.min_words:
            break
    label = "_".join([HEAD, *padded]) + rules.suffix
    return None if label_problems(label, rules) else label


def _distinct_labels(
    names: dict[int, list[str]], rules: LabelRules, own: dict[int, list[str]] | None = None
) -> dict[int, str]:
    """One label per kind from its first words; a kind whose label would be a paraphrase of an
    earlier one takes its next ranked word instead, then a word of its own criteria (`own`), so that two
    kinds get one label only when nothing tells their words apart."""
    out: dict[int, str] = {}
    taken: set = set()
    for k in sorted(names):
        words = names[k]
        head = words[:NAME_WORDS]
        spare = words[NAME_WORDS:] + [w for w in (own or {}).get(k, []) if w not in words]
        candidates = [head] + [head[:-1] + [w] for w in spare] + [head + [w] for w in spare]
        labels = [label for label in (_fit_label(c, rules) for c in candidates) if label]
        label = next((lab for lab in labels if label_gist(lab, rules) not in taken), None)
        label = label or (labels[0] if labels else None)
        if label:  # a kind with no nameable word (digits, symbols) joins its nearest named kind
            taken.add(label_gist(label, rules))
            out[k] = label
    return out


def _nearest_named(kinds: np.ndarray, vectors: np.ndarray, named: dict[int, str]) -> np.ndarray:
    """Kinds without a label folded into the named kind whose centroid is nearest."""
    ids = sorted(named)
    lost = [k for k in np.unique(kinds).tolist() if k not in named]
    if not lost or not ids:
        return kinds
    centroid = {k: vectors[kinds == k].mean(axis=0) for k in [*ids, *lost]}
    out = kinds.copy()
    for k in lost:
        out[kinds == k] = max(ids, key=lambda j: (float(centroid[j] @ centroid[k]), -j))
    return out


def _rationale(text: str, rules: LabelRules) -> str:
    quote = " ".join(re.sub(f"[{_QUOTES}]", "", text).split())
    if len(quote) > _MAX_QUOTE:
        cut_at = quote[:_MAX_QUOTE]
        space = cut_at.rfind(" ")
        quote = cut_at[:space] if space > _MAX_QUOTE // 2 else cut_at
    return f'{rules.rationale_prefix} establish from the evidence that "{quote.rstrip(" ,;:.")}" holds.'


def _own_words(kinds: np.ndarray, texts: list[str], banned: set[str]) -> dict[int, list[str]]:
    """Per kind, the words of its criteria as a label spells them, commonest first."""
    counts: dict[int, Counter] = {}
    for k, text in zip(kinds.tolist(), texts):
        spelt = (ascii_word(w) for w in words(text) if w not in banned)
        counts.setdefault(k, Counter()).update(a for a in spelt if len(a) >= 3 and a not in banned)
    return {k: [w for w, _ in c.most_common()] for k, c in counts.items()}


def _one_kind_per_text(kinds: np.ndarray, texts: list[str]) -> np.ndarray:
    """Criteria worded alike are one check, so each takes the kind of the first one so worded (the tree can part
    them: a criterion's vector is taken relative to its task's)."""
    first: dict[str, int] = {}
    return kinds[[first.setdefault(normalized(t), i) for i, t in enumerate(texts)]]


def discover_offline(frame: pl.DataFrame, rules: LabelRules, opts: OfflineConfig | None = None) -> pl.DataFrame:
    """Stage-1 table (criterion_id, labels, rationale) for every row of a criterion frame."""
    opts = opts or OfflineConfig()
    texts = [t or "" for t in frame["text"].to_list()]
    space = CriterionSpace.fit(texts, frame["task_id"].cast(pl.Utf8).to_list(), opts)
    kinds = _one_kind_per_text(cut(space, opts.fine_kinds, opts), texts)
    banned = set(rules.forbidden_tokens) | set(rules.agent_verbs) | {HEAD, "capability"} | function_words(texts)
    label_of = _distinct_labels(kind_words(space, kinds, banned, loose=False), rules)
    if len(set(label_of.values())) < NAMED_KINDS:  # a small corpus: few words spread over enough tasks
        label_of = _distinct_labels(kind_words(space, kinds, banned), rules)
    if len(set(label_of.values())) < min(FEWEST_LABELS, len(label_of)):  # kinds whose words collide would merge
        label_of = _distinct_labels(kind_words(space, kinds, banned), rules, _own_words(kinds, texts, banned))
    kinds = _nearest_named(kinds, space.vectors, label_of)
    label_of = label_of or {int(k): _fit_label(["stated", "figures"], rules) for k in np.unique(kinds)}
    return pl.DataFrame(
        {
            "criterion_id": frame["criterion_id"].cast(pl.Utf8),
            "labels": [[label_of[k]] for k in kinds.tolist()],
            "rationale": [_rationale(t, rules) for t in texts],
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
