"""The paper's design principles P2 and P3 of a capability, in the words every export carries them.

P2 (`needs_native_inspection`): the check depends on artifact properties lost when the work is flattened
to text or rendered. P3 (`needs_domain_conventions`): it depends on conventions the criterion does not
state. Each is true, false or None (unknown: the offline backend decides neither without a domain-free
signal), with a one-sentence reason. P1 (reactive verification) applies to every capability.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from taxonomy.schemas import DesignPrinciples, TaxonomyCapability

FIELDS = ("needs_native_inspection", "needs_domain_conventions")
WORD = {True: "yes", False: "no", None: "unknown"}

# What a judge should make of each value; the reason follows it.
_JUDGE = {
    "needs_native_inspection": (
        "Native inspection (P2)",
        {
            True: (
                "needed: inspect the artifacts themselves (structure, metadata, cross-file references), not a text or "
                "rendered view of them."
            ),
            False: "not needed: the content read as text or rendered is enough to judge.",
            None: (
                "unknown: not decided for this kind of check; where a criterion turns on how an artifact is built "
                "(structure, metadata, cross-file references), inspect the artifact itself."
            ),
        },
    ),
    "needs_domain_conventions": (
        "Domain conventions (P3)",
        {
            True: "needed: the check depends on conventions the criterion text does not state.",
            False: "not needed: the criterion text states what the check depends on.",
            None: (
                "unknown: not decided for this kind of check; where a "
                "criterion relies on a convention it does not state, "
                "say in your reason which convention you applied."
            ),
        },
    ),
}


def judge_lines(cap: DesignPrinciples) -> list[str]:
    """Two markdown bullets, one per principle, telling a grader what the check needs and why. An unknown
    value comes without its reason: that says why the tool could not decide, which no grader can act on."""
    out = []
    for field in FIELDS:
        head, says = _JUDGE[field]
        value = getattr(cap, field)
        reason = " ".join(str(getattr(cap, f"{field}_reason") or "").split()) if value is not None else ""
        out.append(f"- **{head}:** {says[value]}" + (f" Why: {reason}" if reason else ""))
    return out


def fields(cap: DesignPrinciples) -> dict[str, Any]:
    """The four fields as taxonomy.json holds them (None stays null: unknown)."""
    return {k: getattr(cap, k) for f in FIELDS for k in (f, f"{f}_reason")}


def any_of(values: Iterable[bool | None]) -> bool | None:
    """A criterion's value over the capabilities it is tagged with: true when any needs it, false when
    all are decided false, unknown otherwise (also with no capability at all)."""
    values = list(values)
    if any(v is True for v in values):
        return True
    return False if values and all(v is False for v in values) else None


def summary(caps: Iterable[TaxonomyCapability]) -> str:
    """One line naming the capabilities per principle value, for file headers."""
    caps = list(caps)
    parts = []
    for field in FIELDS:
        head = _JUDGE[field][0]
        by = {v: [c.name for c in caps if getattr(c, field) is v] for v in (True, False, None)}
        parts.append(
            f"{head}: "
            + "; ".join(
                f"{WORD[v]} for all {len(caps)} capabilities"
                if len(names) == len(caps)
                else f"{WORD[v]} for {', '.join(names)}"
                for v, names in by.items()
                if names
            )
        )
    return ". ".join(parts) + "."
