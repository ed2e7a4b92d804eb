"""The offline merge's capabilities, named and described in their criteria's own phrases.

After the merge settles which micro-clusters form each capability, its criteria are re-read
through their distinctive phrases (assign.py), and every text a reader sees is drawn from them:

- the name: `check_<the words of its top phrases>_capability`, from phrases that occur (or are
  inflected) in most of its criteria; the title beside it lists them in the corpus's own words
  and script, chosen to cover as many of its criteria as possible;
- the description: what its criteria ask about, in those phrases with the share of its criteria
  that use each, how many criteria and tasks it spans, and its most central criterion quoted;
- the diagnostic signal: the phrases that set it apart from its nearest sibling;
- the boundaries: against each nearest sibling, "if the criterion is about <the sibling's
  phrases>, prefer `sibling`".

No sentence is written for one corpus; each is a frame around the corpus's phrases and counts,
and `Taxonomy.written_by = "offline"` says that no model wrote them.
"""
from __future__ import annotations

import unicodedata

import numpy as np
import polars as pl

from taxonomy.config import PipelineConfig
from taxonomy.offline.assign import PHRASE_WEIGHT, phrase_scores, refine, signature
from taxonomy.offline.phrases import PhraseSpace, Term
from taxonomy.schemas import Taxonomy
from taxonomy.validate import FUNCTION_WORDS, label_problems

__all__ = ["describe_offline", "criterion_votes"]

NAME_COVERAGE = 0.5   # a name's phrase occurs in at least this share of the capability's criteria
TITLE_TERMS = 3
QUOTE_CHARS = 180
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
             "eleventh", "twelfth")


def _ascii_words(text: str) -> list[str]:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return [w for w in "".join(ch if ch.isalpha() else " " for ch in plain).split() if len(w) >= 2]


def _quote(text: str) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rsplit(" ", 1)[0] + "…"


def _cover_terms(space: PhraseSpace, rows: np.ndarray, terms: list[Term], k: int, used: set[str]) -> list[Term]:
    """Up to k of the distinctive terms, the most telling first, each next one the term that adds the
    most criteria not yet covered (so the title speaks for as many of the criteria as it can). A term
    that already leads a larger capability's title leads this one only when nothing else can."""
    fresh = [t for t in terms if t.text not in used]
    if fresh and max(t.coverage for t in fresh) >= NAME_COVERAGE * 0.6:
        terms = fresh
    if not terms:
        return []
    cols = {t.text: space.column(t.text) for t in terms}
    present = {t.text: (space.x[rows][:, [cols[t.text]]].toarray().ravel() > 0) if cols[t.text] is not None
               else np.zeros(len(rows), bool) for t in terms}
    first = next((t for t in terms if t.coverage >= NAME_COVERAGE), max(terms, key=lambda t: (t.coverage, t.score)))
    chosen, covered = [first], present[first.text].copy()
    words = set(_ascii_words(first.text)) | set(first.text.split())
    for _ in range(k - 1):
        best, gain = None, 0.0
        for t in terms:
            if t in chosen or (set(_ascii_words(t.text)) | set(t.text.split())) & words:
                continue
            g = float((present[t.text] & ~covered).mean()) if len(rows) else 0.0
            if g > gain + 1e-9 and g >= 0.05:
                best, gain = t, g
        if best is None:
            break
        chosen.append(best)
        covered |= present[best.text]
        words |= set(_ascii_words(best.text)) | set(best.text.split())
    return chosen


def _name(title_terms: list[Term], rules, taken: set[str], ordinal: int) -> str:
    suffix_words = [w for w in rules.suffix.split("_") if w]
    room = rules.max_words - len(suffix_words) - 1
    banned = set(rules.agent_verbs) | {"check", "capability"} | FUNCTION_WORDS
    words: list[str] = []
    for t in title_terms:
        if words and t.coverage < NAME_COVERAGE:
            break
        add = [w for w in _ascii_words(t.text) if w not in banned and w not in words]
        if len(words) + len(add) > min(room, 4):
            break
        words += add
    candidates = []
    if words:
        # A one-word name is padded with grammar ("check_for_x"), never with a word its criteria don't use.
        candidates += [words, ["for", *words], ["for", "the", *words]]
    candidates.append([_ORDINALS[ordinal % len(_ORDINALS)], "kind"])
    for cand in candidates:
        if len(cand) + 1 + len(suffix_words) < rules.min_words:
            continue
        name = "_".join(["check", *cand[:room]]) + rules.suffix
        if name not in taken and not label_problems(name, rules):
            return name
    for o in _ORDINALS:
        name = f"check_{o}_kind_of_check{rules.suffix}" if rules.min_words > 4 else f"check_{o}_kind{rules.suffix}"
        if name not in taken and not label_problems(name, rules):
            return name
    raise ValueError("no valid offline capability name; fix: widen labels.min_words/max_words")


def _phrase_list(terms: list[Term], with_share: bool) -> str:
    parts = [f"“{t.text}”" + (f" ({t.coverage:.0%})" if with_share else "") for t in terms]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def criterion_votes(taxonomy: Taxonomy, labels: list[list[str]]) -> np.ndarray:
    """(n, k): each criterion's Stage 1 labels voting for the capabilities whose members hold them,
    the first label fully, later ones less."""
    owner: dict[str, int] = {}
    for c, cap in enumerate(taxonomy.capabilities):
        for label in cap.labels:
            owner.setdefault(label, c)
        for member in cap.members:
            owner.setdefault(member, c)
    votes = np.zeros((len(labels), len(taxonomy.capabilities)))
    for i, own in enumerate(labels):
        for rank, label in enumerate(own or []):
            c = owner.get(label)
            if c is not None:
                votes[i, c] = max(votes[i, c], 1.0 / (1 + rank))
    return votes


def describe_offline(taxonomy: Taxonomy, criteria: pl.DataFrame, stage1: pl.DataFrame, cfg: PipelineConfig,
                     siblings: list[list[int]]) -> Taxonomy:
    """The taxonomy with its criteria re-read through their phrases, and every capability renamed and
    described from them. Members (the merge's micro-clusters) stay; shares become those of the
    primary tags Stage 3 will give, since it applies the same scoring model. `siblings[c]` are
    capability c's nearest siblings as the merge check ranks them; its boundaries are drawn against them."""
    ids = criteria["criterion_id"].cast(pl.Utf8).to_list()
    texts = [t or "" for t in criteria["text"].to_list()]
    tasks = criteria["task_id"].cast(pl.Utf8).to_list()
    by_id = dict(zip(stage1["criterion_id"].to_list(), stage1["labels"].to_list()))
    votes = criterion_votes(taxonomy, [list(by_id.get(i) or []) for i in ids])
    space = PhraseSpace.fit(texts, tasks)
    result, terms, offsets = refine(space, votes, cfg.tag.max_tags, cfg.merge.min_share, cfg.merge.max_share)
    k, n, n_tasks = len(taxonomy.capabilities), len(ids), len(set(tasks))
    caps = [c.model_copy(deep=True) for c in taxonomy.capabilities]

    taken: set[str] = set()
    order = np.argsort([-(result.primary == c).sum() for c in range(k)], kind="stable")
    titles: dict[int, list[Term]] = {}
    for rank, c in enumerate(order):
        rows = np.flatnonzero(result.primary == c)
        titles[c] = _cover_terms(space, rows, terms[c], TITLE_TERMS, {t[0].text for t in titles.values() if t})
        caps[c].name = _name(titles[c], cfg.labels, taken, rank)
        taken.add(caps[c].name)
    names = [cap.name for cap in caps]

    notes = []
    for c, cap in enumerate(caps):
        rows = np.flatnonzero(result.primary == c)
        shown = titles[c]
        cap.title = " · ".join(t.text for t in shown) if shown else cap.name
        cap.share = round(len(rows) / max(n, 1), 6)
        cap.key_phrases, cap.phrase_weights = signature(terms[c])
        cap.score_offset = round(float(offsets[c]), 6)
        spans = len({tasks[i] for i in rows})
        central = rows[np.argsort(-result.probs[rows, c], kind="stable")][:3] if len(rows) else []
        quote = _quote(texts[central[0]]) if len(central) else ""
        if not shown or shown[0].coverage < NAME_COVERAGE:
            notes.append(f"`{cap.name}`: no phrase occurs in most of its criteria (best: "
                         f"{_phrase_list(shown[:1], True) or 'none'}); its name lists the most telling ones")
        cap.description = (f"{_phrase_list(shown, True)[:1].upper()}{_phrase_list(shown, True)[1:]}; {len(rows)} criteria, {spans}/{n_tasks} tasks. "
                           + (f"Most central: “{quote}”" if quote else ""))
        near = siblings[c][0] if siblings[c] else None
        own_rest = [t for t in terms[c] if t.text not in {s.text for s in titles.get(near, [])}][:3] if near is not None else shown
        cap.diagnostic_signal = (f"The criterion uses {_phrase_list(own_rest[:2] or shown[:2], False)}"
                                 + (f", where `{names[near]}` would use {_phrase_list(titles[near][:2], False)}." if near is not None and titles[near] else "."))
        cap.example_pattern = f"“{_quote(texts[central[1]] if len(central) > 1 else texts[central[0]])}”" if len(central) else ""
        cap.non_examples = [
            f"if the criterion is about {_phrase_list(titles[s][:2], False)} rather than {_phrase_list(shown[:1], False)}, prefer `{names[s]}`."
            for s in siblings[c][:2] if titles.get(s)
        ] or [f"if the criterion fits another capability better, prefer `{names[siblings[c][0]]}`."] if siblings[c] else []
    out = taxonomy.model_copy(deep=True)
    out.capabilities = caps
    out.written_by = "offline"
    out.repairs = list(taxonomy.repairs) + [
        f"offline: re-read the criteria through each capability's phrases (phrase weight {PHRASE_WEIGHT}); "
        f"{int((result.primary != votes.argmax(axis=1)).sum())} of {n} criteria moved from their label's capability"
    ] + notes
    out.content_hash = out.compute_hash()
    return out


def offline_tag_scores(taxonomy: Taxonomy, criteria: pl.DataFrame, votes: np.ndarray) -> np.ndarray:
    """(n, k) scores of the stored scoring model (votes + phrases + offsets) on any corpus."""
    space = PhraseSpace.fit([t or "" for t in criteria["text"].to_list()], criteria["task_id"].cast(pl.Utf8).to_list())
    phr = phrase_scores(space, [c.key_phrases for c in taxonomy.capabilities], [c.phrase_weights for c in taxonomy.capabilities])
    offsets = np.array([c.score_offset for c in taxonomy.capabilities])
    return votes + PHRASE_WEIGHT * phr + offsets[None, :]


def share_violations(taxonomy: Taxonomy, merge_cfg) -> list[str]:
    """The share constraints on the primary shares the phrases settled (the merge checked its own)."""
    out = []
    for cap in taxonomy.capabilities:
        if cap.share > merge_cfg.max_share + 1e-9:
            out.append(f"max share {merge_cfg.max_share:.0%}: `{cap.name}` holds {cap.share:.1%} of criteria")
        elif cap.share < merge_cfg.min_share - 1e-9:
            out.append(f"min share {merge_cfg.min_share:.0%}: `{cap.name}` holds {cap.share:.1%} of criteria")
    return out
