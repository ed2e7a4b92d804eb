"""The offline merge's capabilities, named and described in their criteria's own phrases.

After the merge settles which micro-clusters form each capability, its criteria are re-read
through their distinctive phrases (assign.py), and every text a reader sees is drawn from them:

- the name: `check_<the words of its top phrases>_capability`, from phrases that occur (or are
  inflected) in most of its criteria; the title beside it lists them in the corpus's own words
  and script, chosen to cover as many of its criteria as possible;
- the description: how its criteria typically open, when that sets them apart ("Fails to …",
  openings.py), the phrases they use, each with the share of its criteria, the form most of them are
  written in (forms.py), how many criteria and tasks it spans, and three representative criteria
  quoted (sure of it, short, different tasks);
- the diagnostic signal: the openings or phrases that set it apart from its nearest sibling;
- the boundaries: against each nearest sibling, "if the criterion opens with <the sibling's
  openings> rather than <its own>, prefer `sibling`", or by phrases when either has no telling
  opening;
- two capabilities drawn mostly from one and the same task are one task's topic cut in two, and two
  whose criteria mostly open with a negation ("Fails to …", "Does not …") check one absence in two
  wordings; each pair becomes one while the count allows.

No sentence is written for one corpus; each is a frame around the corpus's phrases and counts,
and `Taxonomy.written_by = "offline"` says that no model wrote them.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import replace
from functools import partial

import numpy as np
import polars as pl

from taxonomy.config import PipelineConfig
from taxonomy.offline.assign import PHRASE_WEIGHT, SIGNATURE_TERMS, phrase_scores, refine, signature
from taxonomy.offline.families import opening_families
from taxonomy.offline.features import WORD, stem
from taxonomy.offline.forms import Form, Forms
from taxonomy.offline.languages import corpus_languages, language_name
from taxonomy.offline.openings import NEGATIONS, Opening, Openings, opened, overlaps
from taxonomy.offline.phrases import PhraseSpace, Term, distinctive_terms
from taxonomy.offline.placement import follow, placement_rules
from taxonomy.schemas import PlacementRule, Taxonomy
from taxonomy.validate import FUNCTION_WORDS, label_problems

__all__ = ["describe_offline", "criterion_votes"]

NAME_COVERAGE = 0.5   # a name's phrase occurs in at least this share of the capability's criteria
NAME_FLOOR = 0.15     # ... and the lead phrase, when none reaches NAME_COVERAGE, in at least this share
TITLE_TERMS = 3
SAME_TASK = 0.8       # a capability with at least this share of its criteria from one task holds its topic (two split it)
QUOTE_CHARS = 180
HEAD_CHARS = 60       # of a long criterion, the start kept before its own sentence
EXAMPLES = 3          # criteria quoted in a description
ALIKE = 0.6           # examples sharing this share of their words show one template twice
SHORT = 150           # examples this short are preferred: a reader takes in a short criterion at a glance
PENALTIES = 0.8       # a capability with this share of negative-weight criteria is said to be penalties
NUMBERS = 0.5         # a capability with at least this share of criteria holding a digit says so ...
NUMBERS_LIFT = 1.5    # ... when that is this many times the corpus's share
TIE_MIN = 5           # criteria with both sides' phrases a boundary needs before it says where they go ...
TIE_CLEAR = 0.6       # ... and the share of them one side must take
CATCH_ALL = 0.5       # a capability with this share of its criteria caught by no placement line is said to be the catch-all
# Openings that say something is absent: the negations and the English verbs of omission.
OMISSIONS = NEGATIONS | {"fails", "lacks", "omits", "neglects"}
_DIGIT = re.compile(r"\d")
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
             "eleventh", "twelfth")


def _ascii_words(text: str) -> list[str]:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return [w for w in "".join(ch if ch.isalpha() else " " for ch in plain).split() if len(w) >= 2]


def _word_set(text: str) -> set[str]:
    """A phrase's words, as written and folded to ASCII, whatever stands between them ("src/model.py")."""
    return set(_ascii_words(text)) | set(WORD.findall(text.lower()))


def _stems(text: str) -> set[str]:
    """What two phrases are compared by: their Latin words' stems, or the phrase itself in a script
    without them (an empty set would be part of every other phrase)."""
    return {stem(w) for w in _ascii_words(text)} or {text}


def _quote(text: str, focus: tuple[str, ...] = ()) -> str:
    """The criterion as written, up to QUOTE_CHARS. A longer one keeps its start and, when a later
    sentence holds one of the `focus` phrases (the capability's own), that sentence: long rubric items
    put a shared preamble first and the check last."""
    text = " ".join((text or "").split())
    if len(text) <= QUOTE_CHARS:
        return text
    head = _words_within(text, HEAD_CHARS + 1)
    sentences = [x for x in re.split(r"(?<=[.!?。！？])\s+", text)[1:] if text.find(x) > len(head)]
    own = [x for x in sentences if any(f.lower() in x.lower() for f in focus if f)]
    # no sentence of its own: after a preamble of several sentences, the last one says what is checked
    pick = own[:1] or (sentences[-1:] if len(sentences) >= 2 else [])
    if not pick:
        return _words_within(text, QUOTE_CHARS) + "…"
    room = QUOTE_CHARS - len(head) - 3
    tail = pick[0] if len(pick[0]) <= room else _words_within(pick[0], room) + "…"
    return f"{head} … {tail}"


def _words_within(text: str, limit: int) -> str:
    """The whole words of `text` that fit in fewer than `limit` characters."""
    return text[: limit - 1].rsplit(" ", 1)[0]


def _cover_terms(space: PhraseSpace, rows: np.ndarray, terms: list[Term], k: int, used: set[str],
                 keep: list[Term] = ()) -> list[Term]:
    """Up to k of the distinctive terms (k + 1 while k speak for under half of the criteria), the most
    telling first, each next one the term that adds the most criteria not yet covered (so the title
    speaks for as many of the criteria as it can); after the terms to `keep`, when given. A term already in a
    larger capability's title is in this one only when no other term covers NAME_COVERAGE * 0.6 of its
    criteria: readers took a phrase in two titles (“correo”) for a check of both."""
    fresh = [t for t in terms if t.text not in used]
    if fresh and max(t.coverage for t in fresh) >= NAME_COVERAGE * 0.6:
        terms = fresh
    if not terms and not keep:
        return []
    cols = {t.text: space.column(t.text) for t in [*terms, *keep]}
    present = {text: (space.x[rows][:, [col]].toarray().ravel() > 0) if col is not None else np.zeros(len(rows), bool)
               for text, col in cols.items()}
    # a kept term's share counted on these criteria, as the terms' are
    keep = [replace(t, coverage=float(present[t.text].mean()) if len(rows) else 0.0) for t in keep]
    chosen = list(keep) or [next((t for t in terms if t.coverage >= NAME_COVERAGE), max(terms, key=lambda t: (t.coverage, t.score)))]
    covered = np.logical_or.reduce([present[t.text] for t in chosen])
    words = {w for t in chosen for w in _word_set(t.text)}
    # One term more when k of them still speak for less than half of the criteria.
    while len(chosen) < k or (len(chosen) == k and len(rows) and covered.mean() < NAME_COVERAGE):
        best, gain = None, 0.0
        for t in terms:
            if t.text in {c.text for c in chosen} or _word_set(t.text) & words:
                continue
            g = float((present[t.text] & ~covered).mean()) if len(rows) else 0.0
            if g > gain + 1e-9 and g >= 0.05:
                best, gain = t, g
        if best is None:
            break
        chosen.append(best)
        covered |= present[best.text]
        words |= _word_set(best.text)
    return chosen


def _opening_words(opening: Opening, function: frozenset[str] = FUNCTION_WORDS) -> list[str]:
    """What of an opening a name keeps: its content words and its negation ("Does not mention" -> not mention);
    `function`: the corpus's function words (`Openings.function`)."""
    return [w for w in _ascii_words(opening.text) if w in NEGATIONS or w not in function]


def _telling(share: float, lift: float) -> float:
    """How much a cue sets a group apart: the share of its criteria that have the cue for being in the
    group, beyond those that would have it anyway (share x (1 - 1/lift)); "user" in 41% of a group and
    25% of the corpus tells less than "Asks …" in 21% of it and 3% of the corpus."""
    return share * (1.0 - 1.0 / max(lift, 1.0))


def _named_by_opening(opening: Opening | None, title_terms: list[Term], elsewhere: set[str] = frozenset(),
                      function: frozenset[str] = FUNCTION_WORDS) -> bool:
    """The capability is named by its top opening, when no other capability opens that way (`elsewhere`),
    if no phrase covers most of its criteria and the opening tells more (`_telling`), or if the opening is
    negated and starts most of its criteria or its best phrase is the opening's word without the negation
    ("mentions" for "Does not mention …"): a name without the negation would name the opposite check."""
    if opening is None or not _opening_words(opening, function) or overlaps(opening.key, elsewhere):
        return False
    best = title_terms[0].coverage if title_terms else 0.0
    if best < NAME_COVERAGE and _telling(opening.share, opening.lift) > (_telling(best, title_terms[0].lift) if title_terms else 0.0):
        return True
    words = _ascii_words(opening.text)
    lead = _stems(title_terms[0].text) if title_terms else set()
    return bool(NEGATIONS & set(words)) and (opening.share >= NAME_COVERAGE or bool(lead & {stem(w) for w in words if w not in NEGATIONS}))


def _name(title_terms: list[Term], rules, taken: set[str], ordinal: int, opening: Opening | None = None,
          elsewhere: set[str] = frozenset(), reserved: set[str] = frozenset(), function: frozenset[str] = FUNCTION_WORDS) -> str:
    """`taken`: the names of larger capabilities; `reserved`: other names it must not take (another's members)."""
    suffix_words = [w for w in rules.suffix.split("_") if w]
    room = rules.max_words - len(suffix_words) - 1
    banned = set(rules.agent_verbs) | {"check", "capability"} | function
    words: list[str] = []
    if _named_by_opening(opening, title_terms, elsewhere, function):
        words = [w for w in _opening_words(opening, function) if w in NEGATIONS or w not in banned][: min(room, 4)]
    if words and set(words) <= NEGATIONS:  # "Does not …": what is not done comes from its phrases
        words += [w for w in (_ascii_words(title_terms[0].text) if title_terms else []) if w not in banned][: min(room, 4) - len(words)]
    for i, t in enumerate([] if words else title_terms):
        # Only the title's lead phrase may name the group below NAME_COVERAGE: a later one that most of its
        # criteria lack would name a few of them ("ios" under a lead of "提到" that a name cannot spell). Nor
        # does a lead under NAME_FLOOR ("english" in 6% of a catch-all was read as its check): an ordinal
        # claims nothing, and the title still lists the group's phrases.
        if t.coverage < (NAME_COVERAGE if words or i else NAME_FLOOR):
            break
        add = [w for w in _ascii_words(t.text) if w not in banned and w not in words]
        if len(words) + len(add) > min(room, 4):
            break
        words += add
    # A word (or an inflection of one) a larger capability's name has tells this one apart from nothing
    # ("src" in three names); nor does a two-letter fragment ("py"). Both go while another word is left.
    said = {stem(w) for name in taken for w in name.removesuffix(rules.suffix).split("_")[1:]}
    words = list(dict.fromkeys(words))
    telling = [w for w in words if w in NEGATIONS or (stem(w) not in said and len(w) > 2)]
    if any(w not in NEGATIONS for w in telling):
        words = telling
    candidates = []
    if words:
        # A one-word name is padded with grammar ("check_for_x"), never with a word its criteria don't use.
        candidates += [words, ["for", *words], ["for", "the", *words]]
    candidates.append([_ORDINALS[ordinal % len(_ORDINALS)], "kind"])
    for cand in candidates:
        if len(cand) + 1 + len(suffix_words) < rules.min_words:
            continue
        name = "_".join(["check", *cand[:room]]) + rules.suffix
        if name not in taken | reserved and not label_problems(name, rules):
            return name
    for o in _ORDINALS:
        name = f"check_{o}_kind_of_check{rules.suffix}" if rules.min_words > 4 else f"check_{o}_kind{rules.suffix}"
        if name not in taken | reserved and not label_problems(name, rules):
            return name
    raise ValueError("no valid offline capability name; fix: widen labels.min_words/max_words")


def _phrase_list(terms: list[Term], with_share: bool) -> str:
    parts = [f"“{t.text}”" + (f" ({t.coverage:.0%})" if with_share else "") for t in terms]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _fold(taxonomy: Taxonomy, votes: np.ndarray, siblings: list[list[int]], min_caps: int, pair
          ) -> tuple[Taxonomy, np.ndarray, list[list[int]], list[tuple[str, str]]]:
    """Fold the capability pairs `pair(primary, k)` finds, as (keep, drop, why) or None, one at a time
    while the count stays above `min_caps`; each fold is noted as (the kept name before renaming, why)."""
    notes: list[tuple[str, str]] = []
    while votes.shape[1] > min_caps:
        found = pair(votes.argmax(axis=1), votes.shape[1])
        if found is None:
            break
        keep, drop, why = found
        caps = [c.model_copy(deep=True) for c in taxonomy.capabilities]
        notes.append((caps[keep].name, f"also holds the merge's `{caps[drop].name}`: {why}"))
        caps[keep].members = caps[keep].members + [m for m in caps[drop].members if m not in caps[keep].members]
        caps[keep].labels = sorted(set(caps[keep].labels) | set(caps[drop].labels))
        del caps[drop]
        votes = votes.copy()
        votes[:, keep] = np.maximum(votes[:, keep], votes[:, drop])
        votes = np.delete(votes, drop, axis=1)

        def renumber(old: int) -> int:
            at = keep if old == drop else old
            return at - (at > drop)

        siblings = [list(dict.fromkeys(renumber(s) for s in (siblings[keep] + siblings[drop] if i == keep else sib)
                                       if renumber(s) != renumber(i)))
                    for i, sib in enumerate(siblings) if i != drop]
        taxonomy = taxonomy.model_copy(deep=True)
        taxonomy.capabilities = caps
    return taxonomy, votes, siblings, notes


def _largest_pair(lead: dict[int, int], match, n: int, max_share: float) -> tuple[int, int] | None:
    """(keep, drop) of the largest pair of `lead` (capability -> size) that `match` pairs and whose
    union stays within the share cap; the larger is kept."""
    pairs = [(a, b) for a in lead for b in lead if a < b and match(a, b) and lead[a] + lead[b] <= max_share * n]
    if not pairs:
        return None
    a, b = max(pairs, key=lambda p: lead[p[0]] + lead[p[1]])
    return (a, b) if lead[a] >= lead[b] else (b, a)


def _one_task(tasks, rows: np.ndarray) -> tuple[str, int] | None:
    """(task, how many) when at least SAME_TASK of the criteria `rows` come from one task: such a group
    holds that task's topic or template more than a kind of check."""
    if not len(rows):
        return None
    task, count = Counter(tasks[i] for i in rows).most_common(1)[0]
    return (task, count) if count >= SAME_TASK * len(rows) else None


def _same_task(tasks: list[str], max_share: float):
    """Two capabilities that each draw most of their criteria from one and the same task split that
    task's topic, not two kinds of check (PaperBench: one paper's runs cut by optimizer); a reader
    cannot tell them apart."""
    def find(primary: np.ndarray, k: int):
        top: dict[int, str] = {}
        size: dict[int, int] = {}
        for c in range(k):
            rows = np.flatnonzero(primary == c)
            if one := _one_task(tasks, rows):
                top[c], size[c] = one[0], len(rows)
        found = _largest_pair(size, lambda a, b: top[a] == top[b], len(primary), max_share)
        return found and (*found, f"both drew at least {SAME_TASK:.0%} of their criteria from task `{top[found[0]]}`, "
                                   "so they split one task's topic rather than two kinds of check")
    return find


def _both_negated(openings: Openings, max_share: float):
    """Two capabilities whose criteria mostly open with a negation ("Fails to …", "Does not …") check
    one thing, that something is absent, in two wordings; readers could not tell them apart."""
    def find(primary: np.ndarray, k: int):
        top: dict[int, Opening] = {}
        size: dict[int, int] = {}
        for c in range(k):
            rows = np.flatnonzero(primary == c)
            first = openings.distinctive(rows)[:1]
            if first and first[0].share >= NAME_COVERAGE and OMISSIONS & set(_ascii_words(first[0].text)):
                top[c], size[c] = first[0], len(rows)
        found = _largest_pair(size, lambda a, b: True, len(primary), max_share)
        return found and (*found, f"most of both open with a negation (“{top[found[0]].text} …”, “{top[found[1]].text} …”), "
                                   "so they check one thing, an absence, in two wordings")
    return find


def _examples(rows: np.ndarray, prob: np.ndarray, hits: np.ndarray, opens: list[Opening], keys: list,
              texts: list[str], tasks: list[str], k: int) -> list[int]:
    """Up to k representative criteria: sure of this capability (`prob`), opening as its criteria
    typically do (each of its openings shown once before any twice), short, holding its strongest
    phrases (`hits`), and from different tasks and templates, so the examples show its range rather
    than one task or one wording."""
    if len(rows) == 0:
        return []
    short = np.array([len(texts[i]) <= SHORT for i in rows])
    which = {int(i): next((j for j, o in enumerate(opens) if opened(keys[i], [o])), -1) for i in rows}  # keys: Openings.keys
    typical = np.array([which[int(i)] >= 0 for i in rows]) if opens else np.ones(len(rows), bool)
    order = rows[np.lexsort((np.array([len(texts[i]) for i in rows]), -hits[rows], ~short, ~typical, -np.round(prob[rows], 1)))]
    picked: list[int] = []
    seen_tasks: set[str] = set()
    seen_opens: set[int] = set()
    for mode in (("opening", "task", "any") if len(opens) > 1 else ("task", "any")):
        for i in (order if mode == "opening" else order[: max(50, len(order) // 5)]):
            if i in picked or (mode != "any" and tasks[i] in seen_tasks) or any(_alike(_quote(texts[i]), _quote(texts[j])) for j in picked):
                continue
            if mode == "opening" and (which[int(i)] < 0 or which[int(i)] in seen_opens):
                continue
            picked.append(int(i))
            seen_tasks.add(tasks[i])
            seen_opens.add(which[int(i)])
            if len(picked) == k:
                return picked
    return picked


def _alike(a: str, b: str) -> bool:
    """Two runs of one template ("… feature scaling." / "… feature encoding."): most of their words shared."""
    wa, wb = set(_ascii_words(a) or a.split()), set(_ascii_words(b) or b.split())
    return len(wa & wb) >= ALIKE * max(len(wa | wb), 1)


def _description(openings: list[Opening], shown: list[Term], n_rows: int, spans: int, n_tasks: int,
                 examples: list[str], unlike: list[tuple[Opening, float]] = (), one_task: tuple[str, int] | None = None,
                 penalties: tuple[float, float] | None = None, form: Form | None = None,
                 numbers: tuple[float, float] = (0.0, 0.0)) -> str:
    """What the criteria ask for, in their own openings and phrases, the form they are written in, how far
    they reach, and examples; `one_task` (task, count) when most of them come from one task; `penalties`
    and `numbers` (share here, share in the corpus) of criteria with a negative weight, and of those holding a digit."""
    parts = []
    if openings:
        opened = " or ".join(f"“{o.text} …” ({o.share:.0%})" for o in openings)
        parts.append(f"Criteria that open with {opened}")
    said = {w for o in openings for w in _ascii_words(o.text)} | {o.text.lower() for o in openings}
    rest = [t for t in shown if not (set(_ascii_words(t.text)) or {t.text}) <= said]
    if rest:
        parts.append(("and " if parts else "Criteria that ") + f"use {_phrase_list(rest, True)}")
    lead = (" ".join(parts) + ". ") if parts else ""
    if unlike:  # a group with no opening of its own is known by the common ones it lacks
        lead += "Few open with " + " or ".join(f"“{o.text} …” ({o.share:.0%}, against {corpus:.0%} of all criteria)"
                                                for o, corpus in unlike) + ". "
    if form:
        lead += f"Typically written as “{form.text}” ({form.share:.0%} of them). "
    reach = f"{n_rows} criteria" + (f", {spans} of {n_tasks} tasks" if n_tasks > 1 else "") + ". "
    if one_task:  # readers took such a group's words for a kind of check, and its name misled them
        reach += (f"{one_task[1]} of them come from task `{one_task[0]}`, so its openings and phrases may be that task's own wording "
                  "rather than a kind of check. ")
    reach += _penalty_sentence(*penalties) if penalties else ""
    reach += _number_sentence(*numbers)
    quoted = "; ".join(f"“{_quote(t, tuple(x.text for x in shown))}”" for t in examples)
    return lead + reach + (f"Examples: {quoted}" if quoted else "")


def _new_form(form: Form | None, openings: list[Opening], common: frozenset | set = FUNCTION_WORDS) -> Form | None:
    """The form, unless every word it keeps beyond `common` ones (the words Forms does not count: function
    words and the corpus's commonest) is in the openings already shown ("Code has been written …" under
    “Code has been written to …”), or it elides nothing: one criterion written alike many times, which the
    examples quote."""
    said = {w.lower() for o in openings for w in WORD.findall(o.text)}
    return form if form and "…" in form.text and {w for w in form.words if w not in common} - said else None


def _say_catch_all(caps: list, placement: list, primary: np.ndarray) -> None:
    """Readers called a capability that holds what no opening or phrase claims a grab-bag whose name says
    nothing, and asked for a named home for leftovers: when most of its criteria fit no placement line,
    its description says first that it is that home."""
    rest = next((r for r in placement if r.kind == "rest"), None)
    if rest is None:
        return
    c = next(j for j, cap in enumerate(caps) if cap.name == rest.capability)
    size = int((primary == c).sum())
    if size and rest.right >= CATCH_ALL * size:
        caps[c].description = (f"The catch-all: {rest.right} of its {size} criteria have none of the openings or phrases this "
                               f"taxonomy places criteria by, and a criterion that fits no other description better goes here. "
                               + caps[c].description)


def _number_sentence(here: float, corpus: float) -> str:
    """Readers could not tell where criteria stating a figure, date or amount go when the words around the
    figures differ ("Beziffert …", "Gibt … an"); digits are the one mark of them that no language changes."""
    if here >= NUMBERS and here >= NUMBERS_LIFT * corpus:
        return f"{here:.0%} of them contain a number written in digits, against {corpus:.0%} of all criteria. "
    return ""


def _penalty_sentence(here: float, corpus: float) -> str:
    """The weight's sign, when it sets the capability apart: a reader told that its criteria are penalties
    knows they name what the work must not do (the corpus's own weights say so, not the words)."""
    if here >= PENALTIES:
        return f"{here:.0%} of them are penalties (negative weight, against {corpus:.0%} of all criteria): the work loses points when they hold. "
    if corpus >= PENALTIES / 4 and here <= corpus / 10:
        return f"{here:.0%} of them are penalties (negative weight, against {corpus:.0%} of all criteria). "
    return ""


def _opening_list(openings: list[Opening]) -> str:
    return " or ".join(f"“{o.text} …”" for o in openings)


def _by_openings(a: list[Opening], b: list[Opening]) -> bool:
    """Whether two capabilities are told apart by how their criteria open: both have a telling opening
    and none overlaps ("Code has been …" against itself or against "Code has been executed …" tells nothing)."""
    return bool(a and b) and not any(overlaps(o.key, {p.key for p in b}) for o in a)


def _boundary(own_open: list[Opening], other_open: list[Opening], own: list[Term], other: list[Term], other_name: str,
              border: str | None = None, tie: tuple[str, int, int] | None = None) -> str:
    """Against a sibling: by how their criteria open when both have a telling opening, else by phrases;
    with the sibling's criterion nearest to this capability, to show where the line runs, and, for phrases,
    `tie` (the capability, count, of how many) the tags take a criterion with both sides' phrases to."""
    case = f" Even “{_quote(border, tuple(t.text for t in other))}” goes there." if border else ""
    if _by_openings(own_open, other_open):
        return f"if the criterion opens with {_opening_list(other_open)} rather than {_opening_list(own_open[:1])}, prefer `{other_name}`.{case}"
    # A title that is its opening alone is told by that opening: a phrase it does not show would read as a claim of its own.
    own_side = _phrase_list(own[:1], False) if own else f"opening with {_opening_list(own_open[:1])}"
    if not other:
        return f"if the criterion opens with {_opening_list(other_open)} rather than {'being about ' if own else ''}{own_side}, prefer `{other_name}`.{case}"
    both = f" A criterion with phrases of both goes to `{tie[0]}` ({tie[1]} of {tie[2]} here)." if tie else ""
    return f"if the criterion is about {_phrase_list(other[:2], False)} rather than {own_side}, prefer `{other_name}`.{case}{both}"


def _border(rows: np.ndarray, closeness: np.ndarray, texts: list[str], follows) -> str | None:
    """Of a sibling's criteria (`rows`) that follow the boundary's rule (`follows`), the short one closest
    to this capability (`closeness`): the case a reader would most likely put on the wrong side."""
    short = [i for i in rows if len(texts[i]) <= SHORT and follows(i)]
    return texts[max(short, key=lambda i: (closeness[i], -len(texts[i]), -i))] if short else None


def _final_names(notes: list[str], renamed: dict[str, str], member_of: dict[str, str]) -> list[str]:
    """The merge's notes in the names a reader sees: a working name becomes the capability's final
    name, and a micro-cluster the merge moved says which capability now holds it."""
    out = []
    for note in notes:
        finals = {renamed[n] for n in re.findall(r"`([a-z0-9_]+)`", note) if n in renamed}

        def swap(m: re.Match) -> str:
            name = m.group(1)
            if name in renamed:
                return f"`{renamed[name]}`"
            if name not in member_of:
                return m.group(0)
            holder = "" if member_of[name] in finals else f" (now in `{member_of[name]}`)"
            return f"micro-cluster `{name}`{holder}"

        out.append(re.sub(r"`([a-z0-9_]+)`", swap, note))
    return out


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
    openings = Openings(texts, tasks, opening_families(texts, tasks))
    forms = Forms(texts, tasks)
    digits = np.array([bool(_DIGIT.search(t)) for t in texts], dtype=bool)
    penalty = (criteria["direction"] == "penalty").fill_null(False).to_numpy() if "direction" in criteria.columns \
        else np.zeros(len(texts), bool)
    merged = []
    for pair in (_same_task(tasks, cfg.merge.max_share), _both_negated(openings, cfg.merge.max_share)):
        taxonomy, votes, siblings, notes = _fold(taxonomy, votes, siblings, cfg.merge.min_caps, pair)
        merged += notes
    space = PhraseSpace.fit(texts, tasks)
    result, terms, offsets = refine(space, votes, cfg.tag.max_tags, cfg.merge.min_share, cfg.merge.max_share)
    k, n, n_tasks = len(taxonomy.capabilities), len(ids), len(set(tasks))
    caps = [c.model_copy(deep=True) for c in taxonomy.capabilities]

    opens = {c: openings.distinctive(np.flatnonzero(result.primary == c)) for c in range(k)}

    def elsewhere(c: int) -> set[str]:  # openings other capabilities have: shared, they name neither
        return {o.key for j in range(k) if j != c for o in opens[j]}

    def title_all(primary: np.ndarray, terms_of, kept_of=lambda c: ()) -> dict[int, list[Term]]:
        """Each capability's title phrases from `terms_of(c, rows)`, after `kept_of(c)`, the largest first (a phrase
        in a larger capability's title is in a smaller one's only as _cover_terms allows)."""
        out: dict[int, list[Term]] = {}
        for c in np.argsort([-(primary == c).sum() for c in range(k)], kind="stable"):
            rows = np.flatnonzero(primary == c)
            out[c] = _cover_terms(space, rows, terms_of(c, rows), TITLE_TERMS, {t.text for ts in out.values() for t in ts},
                                  kept_of(c))
        return out

    titles = title_all(result.primary, lambda c, rows: terms[c])
    lead_of: dict[int, Opening | None] = {}
    shown_of: dict[int, list[Term]] = {}  # the phrases each title shows after its lead opening

    def name_all(primary: np.ndarray) -> list[str]:
        """Each capability's name from its title and opening, the largest first (a smaller one yields a word to it)."""
        taken: set[str] = set()
        for rank, c in enumerate(np.argsort([-(primary == c).sum() for c in range(k)], kind="stable")):
            # nor may it be another capability's member: a reader would take that member for this capability
            others = {m for j, cap in enumerate(caps) if j != c for m in cap.members}
            # once the title's lead is settled, only that opening may name it
            opening = lead_of[c] if c in lead_of else opens[c][0] if opens[c] else None
            caps[c].name = _name(titles[c], cfg.labels, taken, rank, opening, elsewhere(c), others, openings.function)
            taken.add(caps[c].name)
        return [cap.name for cap in caps]

    names = name_all(result.primary)

    def lead_and_shown(c: int, lead: Opening | None) -> None:
        # drops the title phrases that repeat its lead opening (or contradict it, without its negation)
        said = {stem(w) for w in _opening_words(lead, openings.function) if w not in NEGATIONS} if lead else set()
        lead_of[c], shown_of[c] = lead, [t for t in titles[c] if not _stems(t.text) & said]

    for c in range(k):
        top = opens[c][0] if opens[c] else None
        # The title leads with an opening of its own that names it or starts most of its criteria, as written
        # ("Fails to …", not "fails").
        lead_and_shown(c, top if top is not None and (_named_by_opening(top, titles[c], elsewhere(c), openings.function)
                                                       or (top.share >= NAME_COVERAGE and not overlaps(top.key, elsewhere(c))))
                       else None)
    learned = placement_rules(result.primary, names, texts, openings, [{t.text for t in shown_of[c]} for c in range(k)],
                              [lead_of[c].key if lead_of[c] else None for c in range(k)])
    placement, primary, unplaced = follow(learned, texts, result.primary, names, (cfg.merge.min_share, cfg.merge.max_share), penalty)
    # The title phrases the list's lines quote stay; the rest of each title, the name, and every share a text
    # states are read again from the criteria the tags that follow the list give each capability.
    quoted = {(r.capability, r.text) for r in placement if r.kind == "uses"}
    titles = title_all(primary, lambda c, rows: distinctive_terms(space, rows, top=SIGNATURE_TERMS),
                       lambda c, before=titles: [t for t in before[c] if (names[c], t.text) in quoted])
    for c in range(k):
        rows = np.flatnonzero(primary == c)
        opens[c] = openings.distinctive(rows)
        lead_and_shown(c, openings.share(lead_of[c], rows) if lead_of[c] else None)
    learned_names, names = names, name_all(primary)
    placement = [r.model_copy(update={"capability": names[learned_names.index(r.capability)]}) for r in placement]
    renamed = {before.name: after.name for before, after in zip(taxonomy.capabilities, caps)}
    member_of = {m: cap.name for cap in caps for m in cap.members}
    # a capability kept by one fold and dropped by a later one is known by its lead micro-cluster
    merged_notes = [f"offline: `{renamed.get(kept) or member_of[kept]}` {what}" for kept, what in merged]

    notes = []
    used: dict[tuple[str, ...], np.ndarray] = {}  # which criteria use any of some phrases, read once per set

    def having(phrases: list[Term]) -> np.ndarray:
        key = tuple(t.text for t in phrases)
        if key not in used:
            cols = [j for j in (space.column(t) for t in key) if j is not None]
            used[key] = np.asarray(space.x[:, cols].sum(axis=1)).ravel() > 0 if cols else np.zeros(n, bool)
        return used[key]

    def has(i: int, phrases: list[Term]) -> bool:
        return bool(having(phrases)[i])

    def follows(c: int, s: int, own: list[Term], i: int) -> bool:
        """Criterion i reads as the boundary against sibling s says: its opening or phrase, not c's."""
        typical = not opens[s] or opened(openings.keys[i], opens[s])  # opens as the sibling's criteria do
        if _by_openings(opens[c], opens[s]):
            return typical and not opened(openings.keys[i], opens[c][:1])
        # the sibling's title phrase, as its boundary quotes it; a title that is its opening alone has only that
        return typical and (has(i, shown_of[s][:1]) if shown_of[s] else True) and \
            not (has(i, own[:1]) if own else opened(openings.keys[i], opens[c][:1]))

    def tie(c: int, s: int) -> tuple[str, int, int] | None:
        """Readers met criteria with both sides' phrases and found each boundary sending them to the other:
        where the tags put those of the two capabilities' criteria, when there are enough to say. The pair's
        title phrases as shown decide "both" either way round, so the two boundaries never disagree."""
        if _by_openings(opens[c], opens[s]) or not shown_of[c] or not shown_of[s]:
            return None
        both = having(shown_of[c][:2]) & having(shown_of[s][:2])
        here, there = int((both & (primary == c)).sum()), int((both & (primary == s)).sum())
        total = here + there
        if total < TIE_MIN:
            return None
        win, k = (names[c], here) if here >= there else (names[s], there)
        return (win, k, total) if k >= TIE_CLEAR * total else None  # a near split sets no rule

    models = [signature(t) for t in terms]
    hits = phrase_scores(space, [m[0] for m in models], [m[1] for m in models])
    unlisted = []
    for c, cap in enumerate(caps):
        rows = np.flatnonzero(primary == c)
        lead, shown = lead_of[c], shown_of[c]
        cap.title = " · ".join(([f"{lead.text} …"] if lead else []) + [t.text for t in shown]) or cap.name
        cap.share = round(len(rows) / max(n, 1), 6)
        cap.key_phrases, cap.phrase_weights = models[c]
        cap.score_offset = round(float(offsets[c]), 6)
        spans = len({tasks[i] for i in rows})
        picks = _examples(rows, result.probs[:, c], hits[:, c], opens[c], openings.keys, texts, tasks, EXAMPLES + 1)
        if lead is None and (not shown or shown[0].coverage < NAME_COVERAGE):
            named = set(cap.name.split("_")) & {w for t in shown for w in _ascii_words(t.text)}
            notes.append(f"`{cap.name}`: no phrase occurs in most of its criteria (best: "
                         f"{_phrase_list(shown[:1], True) or 'none'}); its title lists the most telling ones"
                         + ("" if named else ", and its name, an ordinal, none"))
        loose = rows[unplaced[rows]]
        if len(loose):  # the criteria of its that fit no line, and the one most like the rest of it
            like = _examples(loose, result.probs[:, c], hits[:, c], opens[c], openings.keys, texts, tasks, 1)
            unlisted.append(PlacementRule(kind="unlisted", text=_quote(texts[like[0]], tuple(t.text for t in titles[c])),
                                          capability=cap.name, caught=len(loose), right=len(loose)))
        unlike = openings.seldom(rows) if sum(o.share for o in opens[c]) < NAME_COVERAGE else []
        cap.description = _description(opens[c], shown, len(rows), spans, n_tasks,
                                       [texts[i] for i in picks[:EXAMPLES]], unlike,
                                       _one_task(tasks, rows) if n_tasks > 1 else None,
                                       (float(penalty[rows].mean()), float(penalty.mean())) if penalty.any() and len(rows) else None,
                                       _new_form(forms.of(rows), opens[c], forms.common),
                                       (float(digits[rows].mean()), float(digits.mean())) if len(rows) else (0.0, 0.0))
        near = siblings[c][0] if siblings[c] else None
        # The signal speaks in the title's own phrases, as the boundaries do: readers took a signal in other words
        # ("parameters" under a title "implemented · method") for a second definition, and a word that leads another
        # capability's title ("code") for a claim on that capability's criteria.
        theirs = [_stems(t.text) for j in range(k) if j != c for t in titles[j][:1]] + [_stems(t.text) for t in titles.get(near, [])]
        own_rest = [t for t in shown if not any(_stems(t.text) <= o for o in theirs)][:2] \
            or ([t for t in terms[c] if t.text not in {s.text for s in titles.get(near, [])}][:2] if near is not None else shown)
        # the sibling as its title shows it, as the boundaries name it: by its phrases, or by its opening when that is all
        against = "." if near is None else f", where `{names[near]}` would use {_phrase_list(shown_of[near][:2], False)}." \
            if shown_of[near] else f", where `{names[near]}` criteria open with {_opening_list([lead_of[near]])}." if lead_of[near] else "."
        if near is not None and _by_openings(opens[c], opens[near]):
            cap.diagnostic_signal = f"The criterion opens with {_opening_list(opens[c])}, where `{names[near]}` criteria open with {_opening_list(opens[near])}."
        elif lead is not None and (not shown or lead.share >= max(t.coverage for t in own_rest or shown[:1])):
            # the title's opening is the strongest cue it has: a reader told "uses “change”" (10%) under a title
            # "Notes / States … · change" (52% open so) was sent after the weaker one
            cap.diagnostic_signal = f"The criterion opens with {_opening_list([lead])}{against}"
        else:
            cap.diagnostic_signal = f"The criterion uses {_phrase_list(own_rest[:2] or shown[:2], False)}{against}"
        # one more criterion than the description quotes; a group of one template still shows another run of it
        extra = picks[EXAMPLES:] or sorted((int(i) for i in rows if int(i) not in picks),
                                           key=lambda i: (-round(float(result.probs[i, c]), 1), len(texts[i]), i))[:1] or picks[-1:]
        cap.example_pattern = f"“{_quote(texts[extra[0]], tuple(t.text for t in titles[c]))}”" if extra else ""
        cap.non_examples = [_boundary(opens[c], opens[s], shown, shown_of[s], names[s],
                                      _border(np.flatnonzero(primary == s), result.probs[:, c], texts,
                                              partial(follows, c, s, shown)),
                                      tie(c, s))
                            for s in siblings[c][:2] if titles.get(s) or opens[s]] \
            or ([f"if the criterion fits another capability better, prefer `{names[siblings[c][0]]}`."] if siblings[c] else [])
    out = taxonomy.model_copy(deep=True)
    out.capabilities = caps
    out.written_by = "offline"
    out.function_words_of = ["English"] + [language_name(c) for c in corpus_languages(texts) if c != "en"]
    out.placement = placement + sorted(unlisted, key=lambda r: -r.caught)
    _say_catch_all(caps, out.placement, primary)
    out.repairs = _final_names(list(taxonomy.repairs), renamed, member_of) + merged_notes + [
        f"offline: re-read the criteria through each capability's phrases (phrase weight {PHRASE_WEIGHT}); "
        f"{int((result.primary != votes.argmax(axis=1)).sum())} of {n} criteria moved from their label's capability, "
        f"and the placement list moved {int((primary != result.primary).sum())} more"
    ] + notes
    out.content_hash = out.compute_hash()
    out.placement_hash = out.content_hash
    return out


def offline_tag_scores(taxonomy: Taxonomy, criteria: pl.DataFrame, votes: np.ndarray) -> np.ndarray:
    """(n, k) scores of the stored scoring model (votes + phrases + offsets) on any corpus."""
    space = PhraseSpace.fit([t or "" for t in criteria["text"].to_list()], criteria["task_id"].cast(pl.Utf8).to_list())
    phr = phrase_scores(space, [c.key_phrases for c in taxonomy.capabilities], [c.phrase_weights for c in taxonomy.capabilities])
    offsets = np.array([c.score_offset for c in taxonomy.capabilities])
    return votes + PHRASE_WEIGHT * phr + offsets[None, :]
