"""The one rule registry: each rule's id, what it finds, its offline check, how the model's findings of it
are ranked, and whether it is on by default. `--select`, the model's prompt, SARIF and docs/LINT.md's
table all read it.

Severity follows judged precision on rubrics a rule was not tuned on (docs/LINT.md, "Measured"): a
warning or an error only where at least 0.8 of such findings were real defects, a note below that, and
off by default (a preview, as ruff's preview rules are: `--preview` or `--select` turns it on) below 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from taxonomy.lint.compound import compound
from taxonomy.lint.duplicates import duplicate
from taxonomy.lint.findings import Finding
from taxonomy.lint.grounding import uncovered_brief, ungrounded
from taxonomy.lint.reading import Corpus
from taxonomy.lint.signs import contradiction, sign_mismatch
from taxonomy.lint.weights import weight_outlier
from taxonomy.lint.wording import hygiene, vague


@dataclass(frozen=True)
class Rule:
    id: str
    description: str  # one line: the model's prompt, `--select` errors, SARIF
    check: Callable[[Corpus], list[Finding]]
    offline: tuple[tuple[str, str], ...]  # (severity, what the offline check finds at it), for the docs
    model: str | None  # the severity of a finding only the model makes; None: the model is not asked
    preview: frozenset[str] = frozenset()  # sources off by default: judged precision under 0.5
    english: bool = False  # reads English grammar: criteria in another language or script are skipped

    def default(self, source: str) -> bool:
        return source not in self.preview and (source == "offline" or self.model is not None)


_ALL: tuple[Rule, ...] = (
    Rule(
        "sign-mismatch",
        "the sign contradicts the wording (a failure rewarded, a plainly desirable behaviour penalised)",
        sign_mismatch,
        (
            (
                "warning",
                'a rewarded criterion that states a failure ("Fails to ...", '
                '"Incorrectly ...", "Neglects to ...") or a penalised one '
                'that states a success ("Correctly ...", "Accurately ..."); or '
                "an opening the corpus uses with the other sign in at least "
                '50 other criteria and 97% of them. A negated opening ("Does '
                'not ...") never warns: rewarding an absence is legitimate',
            ),
            ("info", "the same wording with the opposite sign in another task"),
        ),
        "warning",
        english=True,
    ),
    Rule(
        "contradiction",
        "two criteria of a task reward (or penalise) a statement "
        "and its negation, or one statement with opposite signs",
        contradiction,
        (
            (
                "error",
                "in one task (under one parent, in a tree), a statement "
                'and its negation with the same sign ("Recommends X" +4, '
                '"Does not recommend X" +4), or one statement with opposite signs',
            ),
        ),
        "info",
        english=True,
    ),
    Rule(
        "duplicate",
        "the same check twice in a task, so its weight counts twice",
        duplicate,
        (
            (
                "error",
                "the same criterion twice or more in a task, after folding "
                "case, space and punctuation: one finding per set of repeats",
            ),
            ("warning", "one word added, dropped, or a function word swapped, not a number, a negation or a name"),
            ("info", 'the same, but the names differ ("TGAN" / "TGAN+ADA"): perhaps two checks'),
        ),
        "warning",
    ),
    Rule(
        "compound",
        "one criterion bundles independent checks that a response can half-meet",
        compound,
        (
            (
                "warning",
                "a numbered or bulleted list of checks (not of examples, "
                '"such as ...", nor of definitions); "N of the following" / '
                '"at least 5 of the 9"; a second check announced as one ("; '
                'and, separately, ...", "; it also ...", ". Additionally, ...")',
            ),
            (
                "info",
                'a clause after ";", a full stop or "and" that opens with a '
                "verb the corpus's criteria state their check with, or repeats "
                "the criterion's subject (\"..., and the report gives "
                '..."), or has a subject and verb of its own after ";"; '
                '", as well as how ..."; a list inside a grading instruction '
                "over 1,000 characters or a template of 3+ tasks",
            ),
        ),
        "info",
        preview=frozenset({"llm"}),
        english=True,
    ),
    Rule(
        "vague",
        "nothing a grader can check: no object, number, quoted term or named item",
        vague,
        (
            (
                "info",
                'a short criterion of appraisal words ("clear", "appropriate") '
                "and words common to many tasks, with no number, quoted "
                "term or name; needs 20 tasks",
            ),
        ),
        "info",
        english=True,
    ),
    Rule(
        "weight-outlier",
        "a weight far from the weights of similar criteria",
        weight_outlier,
        (
            (
                "warning",
                "a weight more than 10 times above or below both its task's "
                "(its siblings', in a tree) and its similar criteria's "
                "median, or more than twice beyond the corpus's 1st-99th percentile and 3 times off its task",
            ),
        ),
        None,
    ),
    Rule(
        "uncovered-brief",
        "a requirement the brief states that no criterion of the task checks",
        uncovered_brief,
        (
            (
                "info",
                "a requirement of the brief (a list item, or a sentence with "
                '"must", "should", "please", "at most", ...; each demand of '
                "a sentence listing several) whose words no criterion of the "
                "task holds half of; a block of attached material (labelled as "
                "a message, an excerpt, a policy, a reference, ...) is not read",
            ),
        ),
        "info",
        preview=frozenset({"offline"}),
        english=True,
    ),
    Rule(
        "ungrounded",
        "a criterion names items found neither in the brief nor in the task's other criteria",
        ungrounded,
        (
            (
                "info",
                "a quoted or back-ticked name found neither in the brief "
                "nor in the task's other criteria nor in two other tasks",
            ),
        ),
        "info",
        preview=frozenset({"offline", "llm"}),
    ),
    Rule(
        "hygiene",
        "overlong text, white-space or encoding junk",
        hygiene,
        (
            (
                "warning",
                "encoding junk (mojibake, U+FFFD, control or zero-width characters), a criterion with no words",
            ),
            ("info", "stray white space; over 1,000 characters"),
        ),
        None,
    ),
)

RULES: dict[str, Rule] = {r.id: r for r in _ALL}


def asked_of_model() -> dict[str, str]:
    """The rules the model's review reports, with their descriptions (hygiene is offline's: it is exact)."""
    return {r.id: r.description for r in _ALL if r.model is not None}


def table() -> str:
    """docs/LINT.md's rule table (tests/test_lint_docs.py fails when the two differ)."""
    lines = ["| rule | offline | model | finds (offline) |", "|---|---|---|---|"]
    for r in _ALL:
        offline = "preview" if "offline" in r.preview else " / ".join(s for s, _ in r.offline)
        model = "not asked" if r.model is None else ("preview" if "llm" in r.preview else r.model)
        finds = "; ".join(f"{s}: {what}" for s, what in r.offline)
        lines.append(f"| `{r.id}` | {offline} | {model} | {finds} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(), end="")
