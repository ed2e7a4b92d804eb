"""taxonomy.json in and taxonomy.md out. A hand-edited taxonomy is checked before Stage 3 uses it."""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from taxonomy.config import LabelRules
from taxonomy.schemas import STATED, Taxonomy
from taxonomy.validate import label_problems


class TaxonomyError(ValueError):
    """A malformed taxonomy file, on one line naming the file, the place and the fix."""


def load_taxonomy(path: str | Path, rules: LabelRules | None = None) -> Taxonomy:
    path = Path(path)
    if not path.is_file():
        raise TaxonomyError(f"{path}: no such taxonomy file; fix: point to the taxonomy.json of a finished run")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaxonomyError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg}); fix: correct the edit at that line") from None
    try:
        taxonomy = Taxonomy.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TaxonomyError(f"{path}: {where}: {err['msg']}; fix: every capability needs name, description, diagnostic_signal, example_pattern, non_examples, members") from None
    if not taxonomy.capabilities:
        raise TaxonomyError(f"{path}: capabilities: empty; fix: list at least one capability")
    rules = rules or LabelRules()
    seen: set[str] = set()
    for i, cap in enumerate(taxonomy.capabilities):
        problems = label_problems(cap.name, rules)
        if problems:
            raise TaxonomyError(f"{path}: capabilities.{i}.name: {problems[0]}; fix: rename it")
        if cap.name in seen:
            raise TaxonomyError(f"{path}: capabilities.{i}.name: `{cap.name}` appears twice; fix: give each capability a unique name")
        seen.add(cap.name)
    # A hand edit changes the content; the hash then names the edited taxonomy, not the generated one.
    taxonomy.content_hash = taxonomy.compute_hash()
    if taxonomy.placement and taxonomy.placement_hash != taxonomy.content_hash:
        # edited by hand since its lines were counted: they would state counts of another taxonomy's tags
        taxonomy.placement, taxonomy.placement_hash = [], ""
        taxonomy.repairs.append("placement list dropped: the taxonomy was edited after its lines were counted")
    for i, rule in enumerate(taxonomy.placement):
        if rule.capability not in seen:
            raise TaxonomyError(f"{path}: placement.{i}.capability: no capability `{rule.capability}`; "
                                "fix: name an existing capability there, or delete the placement list")
    return taxonomy


def principle_mark(value: bool | None) -> str:
    """✓ needed, – not needed, ? unknown (the offline backend does not decide)."""
    return "?" if value is None else "✓" if value else "–"


def _function_words(taxonomy: Taxonomy) -> str:
    langs = taxonomy.function_words_of
    if not langs:
        return ""
    said = langs[0] if len(langs) == 1 else ", ".join(langs[:-1]) + " and " + langs[-1]
    return f" Function words of {said} (“the”, “of”) name nothing."


def _stated(c) -> str:
    """A person's statement of what the capability checks (`taxonomy edit describe`), marked as theirs."""
    return f"**{STATED}:** {c.checks} " if c.checks else ""


def _stated_intro(taxonomy: Taxonomy) -> str:
    """What of an offline taxonomy a person has said, and how to say the rest: the backend reads no meaning."""
    unsaid = sum(not c.checks for c in taxonomy.capabilities)
    how = "`taxonomy edit RUN describe NAME \"what it checks\"`"
    if unsaid == len(taxonomy.capabilities):
        return (" Nothing here names the kind of check a capability is: no model read the criteria. Once you have read a "
                f"capability's criteria, say what it checks with {how}; this file, the report and every export then carry "
                "your sentence, marked as yours.")
    rest = f" {unsaid} of the {len(taxonomy.capabilities)} capabilities have none yet ({how})." if unsaid else ""
    return " A “What it checks” sentence was written by a person, not drawn from the criteria." + rest


def taxonomy_markdown(taxonomy: Taxonomy) -> str:
    # One undecided reason shared by P2 and P3 of every capability (the offline backend's) is said once: a
    # column of "?" under every capability tells a reader nothing, and readers said so.
    reasons = {(c.needs_native_inspection, c.needs_domain_conventions, c.needs_native_inspection_reason, c.needs_domain_conventions_reason)
               for c in taxonomy.capabilities}
    said_once = len(reasons) == 1 and (reason := next(iter(reasons)))[:2] == (None, None) and reason[2] == reason[3]
    lines = [f"# Capability taxonomy: {taxonomy.corpus or 'corpus'}", "",
             f"{len(taxonomy.capabilities)} capabilities over {taxonomy.n_criteria} criteria; content hash `{taxonomy.content_hash}`.", ""]
    if said_once:
        lines += ["Design principles (the paper's Section 4): P1 reactive verification applies to every capability. "
                  "P2 (needs native inspection of the artifacts) and P3 (needs domain conventions absent from the criterion text) "
                  f"are left out of the table, since every capability has the same answer. {reason[2]}", ""]
    else:
        lines += ["Design principles (the paper's Section 4): P1 reactive verification applies to every capability; "
                  "P2 = needs native inspection of the artifacts (properties lost when flattened to text or rendered); "
                  "P3 = needs domain conventions absent from the criterion text. ✓ yes, – no, ? unknown.", ""]
    columns = [] if said_once else ["P1", "P2", "P3"]
    lines += ["| capability | share | " + "".join(f"{col} | " for col in columns) + "description |",
              "|---|---:|" + ":-:|" * len(columns) + "---|"]
    for c in taxonomy.capabilities:
        marks = [] if said_once else ["✓", principle_mark(c.needs_native_inspection), principle_mark(c.needs_domain_conventions)]
        lines.append(f"| `{c.name}`{' (' + c.title + ')' if c.title else ''} | {100 * c.share:.1f}% | "
                     + "".join(f"{m} | " for m in marks) + f"{_stated(c)}{c.description} |")
    if taxonomy.written_by == "offline":
        lines[4:4] = ["Written by the offline backend, not by a model: each capability's name, title (in brackets) and texts "
                      "are drawn from its criteria: the openings and phrases that set them apart, with the share of its criteria "
                      "that use each, the form most of them are written in (the words they share, in order, “…” where they "
                      "differ), and criteria quoted as they are written." + _function_words(taxonomy)
                      + _stated_intro(taxonomy), ""]
    if taxonomy.violations:  # first, so no reader takes the shares below at face value
        lines[4:4] = ["**Broken constraints** (kept with --accept-violations):", ""] + [f"- {v}" for v in taxonomy.violations] + [""]
    if taxonomy.placement:  # imported here: the offline backend loads scikit-learn, which reading a taxonomy needs not
        from taxonomy.offline.placement import placement_markdown

        lines += placement_markdown(taxonomy)
    for c in taxonomy.capabilities:
        # Offline micro-cluster names are word counts, not a reader's words: listed, they read as what the capability holds.
        members = (f"{len(c.members)} micro-clusters of Stage 1 labels (named from word counts; listed in `taxonomy.json`)"
                   if taxonomy.written_by == "offline" else ", ".join(f"`{m}`" for m in c.members))
        lines += ["", f"## `{c.name}`" + (f": {c.title}" if c.title else ""), ""] + ([_stated(c).strip(), ""] if c.checks else []) + [
                  c.description, "", f"- **Diagnostic signal:** {c.diagnostic_signal}",
                  f"- **Example:** {c.example_pattern}", f"- **Members:** {members}"]
        if not said_once:
            lines += [f"- **P2, native inspection:** {principle_mark(c.needs_native_inspection)} {c.needs_native_inspection_reason}".rstrip(),
                      f"- **P3, domain conventions:** {principle_mark(c.needs_domain_conventions)} {c.needs_domain_conventions_reason}".rstrip()]
        lines += [f"- **Boundary:** {ne}" for ne in c.non_examples]
    if taxonomy.repairs:
        lines += ["", "## Repairs made in code", ""] + [f"- {r}" for r in taxonomy.repairs]
    return "\n".join(lines) + "\n"
