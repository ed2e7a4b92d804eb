"""sign-mismatch and contradiction: signs read against the wording.

Grammar shows some inversions in any corpus, however small: a rewarded criterion whose main verb states
a failure ("fails to", "incorrectly", "neglects to"), a penalised one that states a success ("correctly",
"accurately"). Beyond those, an opening word that the corpus's other criteria use almost only with one
sign is a cue learned from the corpus. A negated opening ("Does not ...", "No ...") never warns:
rewarding an absence is a legitimate wording.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.grounding import items
from taxonomy.lint.reading import Corpus, Row, core, main_clause, negated_opening, negations, opening, pairs
from taxonomy.text import NEGATIONS

# other criteria with the opening: so many that, none the other way, the other sign's rate is under 6% (rule of three),
STRONG_SUPPORT = 50
STRONG_SHARE = 0.97  # a near-unanimous sign, and an opening that is not a negation
# English words that state the criterion's behaviour failed or succeeded, whatever the field: implicative
# verbs of failing (with "to": "fails to mention") and adverbs of manner ("incorrectly states").
FAILING_VERBS = frozenset("fail fails failed neglect neglects neglected forget forgets forgot".split())
FAILURE_ADVERBS = frozenset("incorrectly wrongly inaccurately falsely erroneously mistakenly".split())
SUCCESS_ADVERBS = frozenset("correctly accurately successfully".split())
BEING = frozenset("is are was were be been being has have had".split())
# a subject of at most this many words minus one, besides function words ("The training loop has been correctly ...")
SUBJECT_WORDS = 3
SAME_CHECK = 0.8  # content-word overlap (Jaccard) at which two criteria state one thing...
MAX_APART = 3  # ...when at most this many content words tell them apart
NEGATION_APART = 1  # a statement and its negation: at most one other word apart


def _penalty(r: Row) -> bool:
    return r.weight < 0


def stated(ws: list[str], function: frozenset[str]) -> str | None:
    """ "failure" or "success" when the main clause's verb says so ("Fails to ...", "The agent incorrectly
    ...", "Correctly ..."), None otherwise or when a negation comes first ("Does not incorrectly ...")."""
    nouns = 0
    for k, w in enumerate(ws[: SUBJECT_WORDS + 4]):
        if w in NEGATIONS or nouns > SUBJECT_WORDS - 1:
            return None  # a negated verb ("Does not incorrectly ..."), or a subject too long to be one
        cue = w in FAILURE_ADVERBS or w in FAILING_VERBS or w in SUCCESS_ADVERBS
        # The cue is the verb's when the criterion opens with it, after a determiner's subject ("The agent fails
        # to"), or after a verb of being ("Model inference is correctly performed"); not in "Explains the fee
        # correctly".
        if cue and k and ws[0] not in function and ws[k - 1] not in BEING:
            return None
        if w in FAILURE_ADVERBS or (
            w in FAILING_VERBS and (w.startswith(("neglect", "forg")) or ws[k + 1 : k + 2] == ["to"])
        ):
            return "failure"
        if w in SUCCESS_ADVERBS:
            return "success"
        nouns += w not in function  # "The training loop has been correctly ...": two words name the subject
    return None


def sign_mismatch(c: Corpus) -> list[Finding]:
    cues = [opening(r.ws, c.function) for r in c.rows]
    counts: dict[str, Counter] = defaultdict(Counter)
    for r, cue in zip(c.rows, cues):
        if cue and r.weight != 0:
            counts[cue][_penalty(r)] += 1
    out = []
    for r, cue in zip(c.rows, cues):
        if r.weight == 0:
            continue
        found = _grammar(r, c.function) or (_learned(r, cue, counts[cue]) if cue else None)
        if found:
            out.append(found)
    return out + _opposite_elsewhere(c)


def _grammar(r: Row, function: frozenset[str]) -> Finding | None:
    what = stated(main_clause(r.text), function)
    if (what == "failure" and r.weight > 0) or (what == "success" and r.weight < 0):
        scored = "a reward" if r.weight > 0 else "a penalty"
        return _finding(r, f'"{clip(r.text, 90)}" carries {r.sign}, {scored}, but its wording states a {what}')
    return None


def _learned(r: Row, cue: str, seen: Counter) -> Finding | None:
    """An opening the corpus uses with the other sign in at least STRONG_SUPPORT other criteria and
    STRONG_SHARE of them. Fewer gave notes judged wrong (0 of 5): they are not reported."""
    others = seen.copy()
    others[_penalty(r)] -= 1
    n, against = sum(others.values()), others[not _penalty(r)]
    if n < STRONG_SUPPORT or against / n < STRONG_SHARE or negated_opening(r.ws):
        return None
    kind = "penalties" if not _penalty(r) else "rewards"
    return _finding(
        r,
        f'"{clip(r.text, 90)}" carries {r.sign}, but {against} of {n} '
        f'other criteria opening with "{r.text.split()[0]}" are {kind}',
    )


def _finding(r: Row, message: str) -> Finding:
    wanted = "negative" if not _penalty(r) else "positive"
    return Finding(
        "sign-mismatch",
        "warning",
        r.task_id,
        [r.criterion_id],
        message,
        r.text,
        f"make the weight {wanted} ({-r.weight:+g}), or reword the criterion as the behaviour its sign scores",
    )


def _opposite_elsewhere(c: Corpus) -> list[Finding]:
    """The same wording with the opposite sign in another task: a hint, since context can differ."""
    by_text: dict[tuple, list[Row]] = defaultdict(list)
    for r in c.rows:
        if len(r.ws) >= 4 and r.weight != 0:
            by_text[tuple(r.ws)].append(r)
    out = []
    for rows in by_text.values():
        signs = {_penalty(r) for r in rows}
        if len(signs) < 2 or len({r.task_id for r in rows}) < 2:
            continue
        for r in rows:
            # A row whose opposite sign sits only in its own task has no partner elsewhere: contradiction reports it.
            other = next((o for o in rows if _penalty(o) != _penalty(r) and o.task_id != r.task_id), None)
            if other is None:
                continue
            out.append(
                Finding(
                    "sign-mismatch",
                    "info",
                    r.task_id,
                    [r.criterion_id],
                    f'"{clip(r.text, 90)}" carries {r.sign} here and {other.sign} in task {other.task_id}',
                    r.text,
                    "give the same wording the same sign, or reword one of them to say what differs",
                )
            )
    return out


def contradiction(c: Corpus) -> list[Finding]:
    read = {r.idx: (core(r.ws), negations(main_clause(r.text)) % 2, sorted(items(r.text))) for r in c.rows}
    spread = Counter(w for r in c.rows for w in r.content)

    def keys(r: Row):
        yield read[r.idx][0]
        # Two sets at most MAX_APART words apart share one of their MAX_APART + 1 rarest words.
        yield from sorted(r.content, key=lambda w: (spread[w], w))[: MAX_APART + 1]

    out = []
    for i, j in sorted(pairs(c.rows, keys)):
        (a, (core_a, neg_a, items_a)), (b, (core_b, neg_b, items_b)) = (c.rows[i], read[i]), (c.rows[j], read[j])
        if a.weight == 0 or b.weight == 0 or items_a != items_b:
            continue
        same_sign = _penalty(a) == _penalty(b)
        # A negation must negate the same words ("using symmetric data" is no negation of "without data").
        if neg_a != neg_b and same_sign and _same_statement(core_a, core_b, a.content, b.content, NEGATION_APART):
            what = "a statement and its negation carry the same sign"
        elif neg_a == neg_b and not same_sign and _same_statement(core_a, core_b, a.content, b.content, MAX_APART):
            what = "the same statement carries opposite signs"
        else:
            continue  # same sign and wording is a duplicate; a statement and its negation with opposite signs agree
        out.append(
            Finding(
                "contradiction",
                "error",
                a.task_id,
                [a.criterion_id, b.criterion_id],
                f'{what}: "{clip(a.text, 80)}" ({a.sign}) and "{clip(b.text, 80)}" ({b.sign})',
                f"{a.text} | {b.text}",
                "keep the one whose sign matches what the task wants and delete the other",
            )
        )
    return out


def _same_statement(core_a: tuple, core_b: tuple, words_a: set, words_b: set, most_apart: int) -> bool:
    if core_a == core_b:
        return len(core_a) >= 3
    if min(len(words_a), len(words_b)) < 3:
        return False
    apart = len(words_a ^ words_b)
    return apart <= most_apart and len(words_a & words_b) / len(words_a | words_b) >= SAME_CHECK
