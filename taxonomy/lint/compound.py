"""compound: one criterion that bundles checks a response can half-meet.

A warning for what typography or grammar states: a list of checks (numbered items, bullets), "N of
the following", or a second check announced as one ("; and, separately, ...", "; it also
...", ". Additionally, ..."). A note for a clause after ";", a full stop or "and" that opens with a verb
the corpus's criteria state their check with ("Recommends", "The report covers").

Left alone: a list of examples of one idea ("such as A, B and C"), a bullet list of definitions ("- A
safe response is ..."), nouns joined by "and" ("depth and breadth"), a count ("(3 of 14 days used)"),
a sentence giving the reason ("This matters because ..."), a parenthesis ("(Justification: ...)"). A
list inside a grading instruction of over 1,000 characters ("Judge whether ... Step 1 ... Step 2 ...")
is one procedure graded all or nothing by design, and so is a template repeated word for word in three
tasks or more: a note at most (its joined clauses are not reported). Every cue is English grammar or
typography; the verbs are learned from the corpus.
"""

from __future__ import annotations

import re

from taxonomy.lint.findings import Finding, clip
from taxonomy.lint.reading import SUBORDINATORS, Corpus
from taxonomy.text import NEGATIONS, words

CLAUSE_WORDS = 3  # each side of a joint this long, to be a check of its own
# a criterion written word for word in this many tasks is the benchmark's template: its bundling is a design
TEMPLATE_TASKS = 3
PROCEDURE_CHARS = 1000  # a criterion this long is a grading instruction: its list is one procedure
DETERMINERS = frozenset("the a an this its their".split())  # "The report covers ...": the verb is the third word
ADVERBS = frozenset("also never always only still then further".split())  # stand before the verb
QUANTIFIERS = frozenset("all each every both".split())  # open a subject as a determiner does
BEING = frozenset("is are was were been be has have can will should must".split())
_PAREN_ITEM = re.compile(r"(?:^|[\s:;,])\(([1-9]|[a-hA-H]|i{1,3}|iv)\)\s+\S")
_LEAD_ITEM = re.compile(r"(?:^|[:;]\s*|\n\s*)([1-9]|[a-hA-H]|i{1,3}|iv)[.)]\s+\S")
_SERIES = ({"1", "2"}, {"a", "b"}, {"i", "ii"})  # a list numbers its first two items
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(\S.*)$", re.M)
# "- Resource context: ...", "- A safe response is one that ...": a definition, not a check.
_DEFINITION = re.compile(
    r"^(?:\*\*)?[^:\n]{1,50}?(?:\*\*)?:\s|^(?:an?|the)\s+(?:[\w'-]+\s+){0,5}?(?:is|are|refers?\s+to|means)\b", re.I
)
_EXAMPLES = re.compile(r"\b(?:such as|e\.g\.|for example|for instance|like|including|examples?)\b[^;.]*$", re.I)
_N_OF = re.compile(
    r"\b(?:\d+|two|three|four|five|six)\s+(?:out\s+)?of\s+(?:the\s+following|these|the\s+\d+)\b"
    r"|\b(?:at\s+least|at\s+most|any|exactly)\s+(?:\d+|two|three|four|five|six)\s+(?:out\s+)?of\s+(?:the\s+)?\d+\b",
    re.I,
)
_ANNOUNCED = re.compile(
    r"(?:;|,|[.!?](?=\s))\s*(?:and\s*,?\s*)?(?:(?:it|they|the\s+[^\W\d_]+)\s+)?(?:separately|additionally|in\s+addition|also)\b"
    r"(?!\s+(?:known|called|named|referred))[,:]?\s*",
    re.I,
)
# An opening quote or backtick is passed over: '; "TF-IDF" features are used ...' opens a clause as well.
_JOINT = re.compile(
    r"(?:;|[.!?](?=\s+[\"“`]?[A-Z])|,\s+(?:and|but|while|as\s+well\s+as)\b|\s+and\b)\s*[\"“`]?([^\W\d_]+)", re.U
)
_WH = frozenset("how what why which who".split())  # ", as well as how to escalate": a second object clause
_PARENTHESIS = re.compile(r"\([^()]*(?:\([^()]*\)[^()]*)*\)")
_REASON = frozenset("this it these that those because such otherwise so which".split())
_CAUSAL = re.compile(r"\b(?:because|since|so that|in order to|which is why)\b", re.I)
# Verbs of being: two sides that each state a predicate ("X is saved; Y are plotted") are two checks.
_PREDICATE = re.compile(r"\b(?:is|are|was|were|has been|have been|should be|must be|can be|will be)\b", re.I)


def compound(c: Corpus) -> list[Finding]:
    verbs = _verbs(c)
    tasks_of: dict[str, set[str]] = {}
    for r in c.rows:
        tasks_of.setdefault(r.text, set()).add(r.task_id)
    out = []
    for r in c.rows:
        severity, why = bundled(r.text, verbs)
        # a template's list stays a note; its joined clauses, nothing
        if why and len(tasks_of[r.text]) >= TEMPLATE_TASKS:
            severity, why = (
                ("info", f"{why} (a template of {len(tasks_of[r.text])} tasks: bundled on purpose, perhaps)")
                if severity == "warning"
                else ("", "")
            )
        if why:
            out.append(
                Finding(
                    "compound",
                    severity,
                    r.task_id,
                    [r.criterion_id],
                    f'"{clip(r.text, 100)}" {why}',
                    r.text,
                    "split it into one criterion per check, each with its own "
                    "weight, so a response meeting half of it gets half the points",
                )
            )
    return out


def _verbs(c: Corpus) -> frozenset[str]:
    """The words criteria of this corpus state their check with: the first word ("Recommends ...") or the
    one after a determiner and a noun ("The report covers ..."), adverbs ("correctly", "never") skipped."""
    said = set()
    for r in c.rows:
        subject = len(r.ws) >= 3 and r.ws[0] in DETERMINERS
        verb = _verb(r.ws[2:] if subject else r.ws)
        # After a determiner and a noun the third word is the verb only in its third-person form ("The report
        # covers"); "The final loss is ..." names a noun there.
        if verb and verb not in c.function and (not subject or _third_person(verb)):
            said.add(verb)
    return frozenset(said)


def _verb(ws: list[str]) -> str | None:
    """The first word that is not an adverb ("correctly", "never", "also")."""
    return next((w for w in ws if not (w.endswith("ly") or w in NEGATIONS or w in ADVERBS)), None)


def _third_person(word: str | None) -> bool:
    """ "explains", "grants": how a criterion without a subject states its check (English grammar)."""
    return bool(word) and len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def bundled(text: str, verbs: frozenset[str]) -> tuple[str, str]:
    """(severity, why), or ("", "") for one check."""
    listed = _listed(text)
    if listed:
        return (
            ("info", listed + " (in a grading instruction this long, perhaps one procedure)")
            if len(text) > PROCEDURE_CHARS
            else ("warning", listed)
        )
    text = _PARENTHESIS.sub(" ", text)  # an aside or a justification states no check
    m = _N_OF.search(text)
    if m:
        return "warning", f'scores "{m.group(0)}" items as one check'
    for m in _ANNOUNCED.finditer(text):
        left = text[: m.start()].split()
        # "If recommending a journal, also give its impact factor": the comma closes a condition, not a check.
        conditional = m.group(0).startswith(",") and left and left[0].lower() in SUBORDINATORS
        if len(left) >= CLAUSE_WORDS and len(text[m.end() :].split()) >= CLAUSE_WORDS and not conditional:
            return "warning", f'adds a check of its own with "{" ".join(m.group(0).split())}"'
    for joint in _JOINT.finditer(text):
        if _joins(text, joint, verbs):
            return "info", f'joins checks: its part from "{joint.group(1)}" on is written like a criterion of its own'
    return "", ""


def _listed(text: str) -> str:
    """Why a list in the text is several checks, or "" (no list, a list of examples, of definitions)."""
    first = min((m.start() for m in (_PAREN_ITEM.search(text), _LEAD_ITEM.search(text)) if m), default=None)
    marks = {m.lower() for m in _PAREN_ITEM.findall(text) + _LEAD_ITEM.findall(text)}
    if (
        first is not None
        and any(series <= marks for series in _SERIES)
        and not _EXAMPLES.search(text[: first + 1][-80:])
    ):
        return "lists several items, each a check of its own"
    checks = [item for item in _BULLET.findall(text) if not _DEFINITION.search(item)]
    if len(checks) >= 2:
        return "lists several items, each a check of its own"
    return ""


def _joins(text: str, joint: re.Match, verbs: frozenset[str]) -> bool:
    word = joint.group(1).lower()
    left, right = text[: joint.start()], text[joint.start(1) :]
    if len(left.split()) < CLAUSE_WORDS or len(right.split()) < CLAUSE_WORDS or word in SUBORDINATORS:
        return False
    said, own = words(right), words(left)
    verb = _verb(said)
    mark = joint.group(0).lstrip()[:1]
    # "..., and the review also states ...": the criterion's own subject again, then a verb.
    if mark in ";.!?," and len(own) >= 2 and own[0] in DETERMINERS and said[:2] == own[:2]:
        return True
    if _EXAMPLES.search(left[-100:]):
        return False  # "such as A, B and C": examples of one idea
    if mark not in ";.!?,":  # "X and recommends Y": a verb criteria of this corpus state their check with
        return verb == word and verb in verbs and _third_person(verb)
    if "well" in joint.group(0).split() and word in _WH:
        return True
    if word in _REASON or _CAUSAL.search(" ".join(right.split()[:8])):
        return False  # "This matters because ...": the reason for the check, not another one
    if verb in verbs and (verb == word or word in NEGATIONS or word.endswith("ly") or word in ADVERBS):
        return True
    # "...; all models trained on NetHack use ...": a subject of its own, then a verb (one of the corpus's,
    # a verb of being, or one that says "that").
    head = said[1:8]
    # (Not after a full stop: a specification's next sentence, "The number of clusters is set to ...", details one
    # check.)
    # (After a comma, "..., and the model trained with ..." as often names one check's second object.)
    verbal = any(w in verbs or w in BEING for w in head) or "that" in head[1:]
    if mark == ";" and (word in DETERMINERS or word in QUANTIFIERS) and verbal:
        return True
    # "... . The recorded metrics show that ...", "..., and the report states that ...": a subject of its own, then
    # a verb that reports a finding ("The fact that ...", "The reason is that ..." state none).
    if word in DETERMINERS and any(head[i] == "that" and head[i - 1] not in BEING for i in range(2, min(4, len(head)))):
        return True
    # A clause stated as the criterion itself is ("Explains ..., and blames ...", "... . Grants ...").
    if (mark != "," or verb == word) and _third_person(verb) and _third_person(_verb(own)):
        return True
    return all(_PREDICATE.search(" ".join(side.split()[:12])) for side in (left[-120:], right))
