"""Stage 2c: merge the micro-capabilities into 8-10 canonical ones.

The model proposes membership; code checks every constraint (count, shares computed from the
mapping, coverage, names, P2/P3 with reasons) and as the last resort repairs deterministically. What
only the whole answer can mend (count, shares, a candidate listed twice) is asked again in a fresh,
small request carrying the previous grouping with the shares and the violations (`regroup`); a
defect of one capability's own card (its name, an empty field, a P2/P3 reason) is
asked about in a focused follow-up carrying only that card, its members and the violation; a
candidate the model left out is mapped to its nearest capability in code: that repair needs no call.
Boundaries come after membership is settled, as the paper has
them ("non-examples contrasting it with its nearest siblings"): code computes each final
capability's nearest siblings (siblings.py), and one small call writes the non-examples against
exactly those; a boundary that breaks the rule is asked again in a focused follow-up that carries
only that capability, its siblings and the violation, never the whole merge again. The offline
backend (offline/backend.py) goes straight to the solver and `assemble`.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import partial

import numpy as np

from taxonomy.config import PipelineConfig
from taxonomy.llm.runner import Answer, Job, Runner
from taxonomy.merge.check import card_problems, check_merge, hard_violations
from taxonomy.merge.measures import capability_similarity, to_taxonomy_capabilities
from taxonomy.merge.solver import boundary_sentence, solve_merge
from taxonomy.run import RunError
from taxonomy.prompts import render
from taxonomy.schemas import (
    BoundaryAnswer,
    CardFixAnswer,
    DesignPrinciples,
    MembershipAnswer,
    MembershipCapability,
    MergedCapability,
    MicroCapability,
    RegroupAnswer,
    Taxonomy,
)
from taxonomy.merge.siblings import (
    MAX_NON_EXAMPLES,
    MIN_BOUNDARY_WORDS,
    boundary_problems,
    capability_co_counts,
    choose_siblings,
)
from taxonomy.validate import Violation


def _merged(answer: MembershipAnswer) -> list[MergedCapability]:
    return [MergedCapability(**cap.model_dump(), non_examples=[]) for cap in answer.capabilities]


def map_unmapped(
    proposal: list[MergedCapability], micro: list[MicroCapability], centroids: np.ndarray
) -> tuple[list[MergedCapability], list[str]]:
    """Candidates no capability lists go to the capability whose centroid is nearest to theirs:
    a repair the program makes itself, so it costs no call. Returns a copy and the repairs."""
    listed = {n for cap in proposal for n in cap.member_input_names}
    missing = [i for i, m in enumerate(micro) if m.name not in listed]
    if not missing or not proposal:
        return proposal, []
    proposal = [cap.model_copy(deep=True) for cap in proposal]
    sim = capability_similarity(
        proposal
        + [
            MergedCapability(
                name=micro[i].name,
                description="",
                diagnostic_signal="",
                example_pattern="",
                non_examples=[],
                member_input_names=[micro[i].name],
            )
            for i in missing
        ],
        micro,
        centroids,
    )
    notes = []
    for k, i in enumerate(missing):
        row = sim[len(proposal) + k, : len(proposal)]
        target = proposal[int(np.argmax(row))]
        target.member_input_names.append(micro[i].name)
        notes.append(f"mapped `{micro[i].name}`, which the model left out, to `{target.name}` (nearest by centroid)")
    return proposal, notes


def _membership_violations(answer: MembershipAnswer, micro, centroids, cfg: PipelineConfig) -> list[Violation]:
    """What only the whole answer can fix: count, shares, members listed twice or unknown. One
    capability's own card (name, fields, P2/P3 reasons) is asked about in a focused follow-up."""
    proposal, _ = map_unmapped(_merged(answer), micro, centroids)
    return check_merge(proposal, micro, cfg.merge, cfg.labels, similarity=None, cards=False)


def regroup(
    answer: Answer[MembershipAnswer], micro, centroids, cfg: PipelineConfig, runner: Runner
) -> Answer[MembershipAnswer]:
    """What only the whole answer can mend (count, shares, a candidate listed twice) is asked again in a fresh,
    small request: the previous grouping by name with each candidate's share, the rules and the violations.
    Neither the candidates' cards (the first request carried them) nor the conversation is sent again, and the
    capabilities' cards stay in code, so a re-ask costs a fraction of the first call, not more each round."""
    best, violations, attempts = answer.value, answer.violations, answer.attempts
    for _ in range(cfg.llm.reask_attempts):
        if best is None or not violations:
            break
        prompt = render(
            "stage2_merge.j2",
            ask="membership_fix",
            rules=cfg.labels,
            merge=cfg.merge,
            previous=_grouping(best, micro, centroids),
            n_total=sum(m.n_criteria for m in micro),
            violations=[str(v) for v in violations[:40]],
        )
        check = partial(_regroup_violations, previous=best, micro=micro, centroids=centroids, cfg=cfg)
        (fix,) = runner.run(
            "merge",
            [Job(prompt=prompt, schema=RegroupAnswer, validate=check, reask=False)],
            "Stage 2 merge: regrouping",
        )
        attempts += fix.attempts
        if fix.value is None:
            break
        best, violations = _regrouped(best, fix.value), fix.violations
    return Answer(best, violations, attempts)


def _grouping(answer: MembershipAnswer, micro, centroids) -> list[dict]:
    """The answer's capabilities by name, every candidate in one (a left-out one where code maps it), with shares."""
    of = {m.name: m for m in micro}
    grouped, _ = map_unmapped(_merged(answer), micro, centroids)
    out = []
    for cap in grouped:
        members = [
            {
                "name": n,
                "known": n in of,
                "share": of[n].share if n in of else 0.0,
                "n_criteria": of[n].n_criteria if n in of else 0,
            }
            for n in cap.member_input_names
        ]
        out.append({"name": cap.name, "share": sum(m["share"] for m in members), "members": members})
    return out


def _regrouped(previous: MembershipAnswer, new: RegroupAnswer) -> MembershipAnswer:
    """The new grouping with each kept name's card from the previous answer; a new name brings its own card,
    and whatever it leaves out (an empty field, an undecided P2/P3) goes to the focused card follow-up."""
    cards = {c.name: c.model_dump(exclude={"member_input_names"}) for c in previous.capabilities}
    caps = [
        MembershipCapability.model_construct(
            **{
                **cards.get(g.name, g.model_dump(exclude={"member_input_names"})),
                "name": g.name,
                "member_input_names": g.member_input_names,
            }
        )
        for g in new.capabilities
    ]
    return MembershipAnswer.model_construct(capabilities=caps)


def _regroup_violations(
    answer: RegroupAnswer, previous: MembershipAnswer, micro, centroids, cfg: PipelineConfig
) -> list[Violation]:
    return _membership_violations(_regrouped(previous, answer), micro, centroids, cfg)


def own_card_problems(caps: list, cfg: PipelineConfig) -> dict[int, list[str]]:
    """Per capability index, what is wrong with its own card: name form, empty fields, P2/P3, a name
    an earlier capability already holds."""
    out: dict[int, list[str]] = {}
    seen: set[str] = set()
    for i, cap in enumerate(caps):
        problems = card_problems(cap, cfg.labels) + principle_problems(cap)
        if cap.name in seen:
            problems.append(
                f"the name `{cap.name}` is already used by another capability; give this one a distinct name"
            )
        seen.add(cap.name)
        if problems:
            out[i] = problems
    return out


def _card_fix_violations(
    answer: CardFixAnswer, asked: list[int], proposal: list[MergedCapability], cfg: PipelineConfig
) -> list[Violation]:
    out = []
    given: dict[int, object] = {}
    for fix in answer.capabilities:
        if fix.capability_idx not in asked or fix.capability_idx in given:
            out.append(
                Violation(
                    None,
                    f"capability_idx {fix.capability_idx} was not asked "
                    f"about (or is answered twice); answer for {asked}",
                )
            )
        else:
            given[fix.capability_idx] = fix
    taken = {c.name for i, c in enumerate(proposal) if i not in asked}
    names = [f.name for f in given.values()]
    for i in asked:
        fix = given.get(i)
        if fix is None:
            out.append(Violation(None, f"capability {i}: missing from the answer"))
            continue
        problems = card_problems(fix, cfg.labels) + principle_problems(fix)
        if fix.name in taken or names.count(fix.name) > 1:
            problems.append(
                f"the name `{fix.name}` is already used by another capability; give this one a distinct name"
            )
        out += [Violation(None, f"capability {i}: {p}") for p in problems]
    return out


def fix_cards(
    proposal: list[MergedCapability], micro, cfg: PipelineConfig, runner: Runner
) -> tuple[list[MergedCapability], dict[int, list[str]]]:
    """Capabilities whose own card broke a rule are asked about alone: their card, members and violations,
    not the whole merge again; up to `llm.reask_attempts` rounds. Returns the proposal with every valid
    rewrite applied, and what is still wrong (by index)."""
    proposal = [c.model_copy(deep=True) for c in proposal]
    wrong = own_card_problems(proposal, cfg)
    # the name of a rewrite that was itself rejected, shown with its violations next round
    rejected: dict[int, str] = {}
    for round_ in range(cfg.llm.reask_attempts):
        if not wrong:
            break
        asked = sorted(wrong)
        caps = [
            {
                **proposal[i].model_dump(),
                "capability_idx": i,
                "members": proposal[i].member_input_names,
                "violations": wrong[i],
                "rejected": rejected.get(i, ""),
            }
            for i in asked
        ]
        prompt = render(
            "stage2_merge.j2",
            ask="cards",
            rules=cfg.labels,
            capabilities=caps,
            max_reason_words=MAX_REASON_WORDS,
            taken=[c.name for i, c in enumerate(proposal) if i not in wrong],
        )
        job = Job(
            prompt=prompt,
            schema=CardFixAnswer,
            validate=partial(_card_fix_violations, asked=asked, proposal=proposal, cfg=cfg),
            reask=False,
        )
        (answer,) = runner.run("merge", [job], f"re-asking the cards of {len(asked)} capabilities")
        fixes = {fix.capability_idx: fix for fix in (answer.value.capabilities if answer.value else [])}
        for i in asked:
            own = [
                v.message.removeprefix(f"capability {i}: ")
                for v in answer.violations
                if v.message.startswith(f"capability {i}:")
            ]
            if i in fixes and not own:
                for field in (
                    "name",
                    "description",
                    "diagnostic_signal",
                    "example_pattern",
                    *DesignPrinciples.model_fields,
                ):
                    setattr(proposal[i], field, getattr(fixes[i], field))
            elif i in fixes:
                rejected[i] = f"`{fixes[i].name}`, rejected: " + "; ".join(own)
        wrong = own_card_problems(proposal, cfg)
    return proposal, wrong


# A sentence ends at a full stop, question or exclamation mark followed by more text, except after an
# abbreviation ("e.g.", "i.e.", "etc.", "vs.", single letters): the prompt allows those in a reason.
_SENTENCE_BREAK = re.compile(
    r"(?<![A-Za-z]\.[A-Za-z])(?<!\b[A-Za-z])(?<!\betc)(?<!\bvs)(?<!\bcf)[.!?]+\s+(?=\S)|[。！？](?=\S)"
)
MAX_REASON_WORDS = 45


def sentence_count(text: str) -> int:
    text = text.strip()
    return 0 if not text else len(_SENTENCE_BREAK.findall(text)) + 1


def principle_problems(cap: DesignPrinciples, name: str | None = None) -> list[str]:
    """P2 and P3 are decided (true or false) with a one-sentence reason each."""
    name = name or getattr(cap, "name", "capability")
    out = []
    for field, what in (
        (
            "needs_native_inspection",
            "P2: does checking it depend on artifact properties lost "
            "when the deliverable is flattened to text or rendered",
        ),
        ("needs_domain_conventions", "P3: does it depend on conventions absent from the criterion text"),
    ):
        value, reason = getattr(cap, field), getattr(cap, f"{field}_reason").strip()
        if value is None:
            out.append(f"`{name}`: set `{field}` to true or false ({what}?)")
        sentences = sentence_count(reason)
        if not reason or sentences > 1 or len(reason.split()) > MAX_REASON_WORDS:
            out.append(
                f"`{name}`: `{field}_reason` must be one sentence of at most {MAX_REASON_WORDS} words saying why "
                f"({'it is empty' if not reason else f'it has {sentences} sentences and {len(reason.split())} words'})"
            )
    return out


def _boundary_violations(answer: BoundaryAnswer, siblings: dict[str, list[str]], names: list[str]) -> list[Violation]:
    """Per capability asked about: its answer's non-examples against exactly its listed siblings."""
    out = []
    given: dict[str, list[str]] = {}
    for item in answer.capabilities:
        if item.name not in siblings:
            out.append(
                Violation(
                    None,
                    f"`{item.name}` is not one of the capabilities asked about; "
                    f"answer for {', '.join(f'`{n}`' for n in siblings)}",
                )
            )
        elif item.name in given:
            out.append(Violation(None, f"`{item.name}` is answered twice; answer each capability once"))
        else:
            given[item.name] = item.non_examples
    for name, near in siblings.items():
        if name not in given:
            out.append(Violation(None, f"`{name}`: missing from the answer; give its non_examples"))
        else:
            out += [Violation(None, f"`{name}`: {p}") for p in boundary_problems(name, given[name], near, names)]
    return out


def _boundary_items(
    answer: BoundaryAnswer | None, siblings: dict[str, list[str]], names: list[str]
) -> dict[str, list[str]]:
    """The capabilities whose non-examples in this answer pass the rule."""
    if answer is None:
        return {}
    out: dict[str, list[str]] = {}
    for item in answer.capabilities:
        if (
            item.name in siblings
            and item.name not in out
            and not boundary_problems(item.name, item.non_examples, siblings[item.name], names)
        ):
            out[item.name] = list(item.non_examples)
    return out


def boundaries_prompt(
    cfg: PipelineConfig,
    todo: list[str],
    by_name: dict[str, MergedCapability],
    siblings: dict[str, list[str]],
    previous: dict[str, tuple[list[str], list[str]]],
    round_: int,
) -> str:
    """The boundaries call for the capabilities in TODO: each with its siblings and, after the first round, its
    last non-examples and what was wrong with them, and the cards of the siblings not asked about. The estimate
    prices the first round's prompt with this same function, over stand-in capabilities."""
    caps = [
        {
            "name": n,
            "description": by_name[n].description,
            "diagnostic_signal": by_name[n].diagnostic_signal,
            "siblings": siblings[n],
            "previous": previous.get(n, ([], []))[0],
            "violations": previous.get(n, ([], []))[1],
        }
        for n in todo
    ]
    context = (
        [by_name[s] for s in dict.fromkeys(s for n in todo for s in siblings[n]) if s not in todo] if round_ else []
    )
    return render(
        "stage2_merge.j2",
        ask="boundaries",
        rules=cfg.labels,
        capabilities=caps,
        context=context,
        violations=bool(round_),
        max_non_examples=MAX_NON_EXAMPLES,
        min_boundary_words=MIN_BOUNDARY_WORDS,
    )


def draw_boundaries(
    proposal: list[MergedCapability], micro, centroids, cfg: PipelineConfig, runner: Runner, co_micro=None
) -> list[str]:
    """Non-examples for settled capabilities, against the nearest siblings computed here; returns repairs.

    One call for all capabilities, then up to `llm.reask_attempts` focused follow-ups, each carrying
    only the capabilities still failing, their siblings and what was wrong. A capability still without
    valid boundaries gets the program's own sentences (said so in the repairs)."""
    names = [c.name for c in proposal]
    if len(proposal) < 2:
        return []
    sim = capability_similarity(proposal, micro, centroids)
    near = choose_siblings(sim, capability_co_counts(proposal, micro, co_micro), k=MAX_NON_EXAMPLES)
    siblings = {names[i]: [names[j] for j in near[i]] for i in range(len(proposal))}
    by_name = {c.name: c for c in proposal}
    done: dict[str, list[str]] = {}
    previous: dict[str, tuple[list[str], list[str]]] = {}  # name -> (its last non-examples, what was wrong)
    for round_ in range(cfg.llm.reask_attempts + 1):
        todo = [n for n in names if n not in done]
        if not todo:
            break
        asked = {n: siblings[n] for n in todo}
        prompt = boundaries_prompt(cfg, todo, by_name, siblings, previous, round_)
        job = Job(
            prompt=prompt,
            schema=BoundaryAnswer,
            validate=partial(_boundary_violations, siblings=asked, names=names),
            reask=False,
        )
        (answer,) = runner.run(
            "merge",
            [job],
            "Stage 2 boundaries" if not round_ else f"re-asking the boundaries of {len(todo)} capabilities",
        )
        done.update(_boundary_items(answer.value, asked, names))
        given = {
            item.name: item.non_examples
            for item in (answer.value.capabilities if answer.value else [])
            if item.name in asked
        }
        for n in todo:
            if n not in done:
                problems = (
                    boundary_problems(n, given[n], siblings[n], names) if n in given else ["missing from the answer"]
                )
                previous[n] = (list(given.get(n, [])), problems)
    repairs = []
    for i, cap in enumerate(proposal):
        if cap.name in done:
            cap.non_examples = done[cap.name]
        else:
            cap.non_examples = [boundary_sentence(proposal[j]) for j in near[i][:2]]
            repairs.append(
                f"`{cap.name}`: no valid boundaries from the model after {cfg.llm.reask_attempts + 1} attempt(s) "
                f"({'; '.join(previous.get(cap.name, ([], ['no answer']))[1][:2])}); the program wrote them against "
                + ", ".join(f"`{proposal[j].name}`" for j in near[i][:2])
            )
    return repairs


def _distinguish(capabilities: list, suffix: str) -> list:
    """Two capabilities cut from one group (a repair split) inherit the same card text; a reader
    and a Stage 3 tagger must still tell them apart, so each names what it covers."""

    def gist(text: str) -> str:  # the offline cards differ only in a parenthesised name
        return re.sub(r"\s*\([^)]*\)", "", text).strip().lower()

    seen = Counter(gist(c.description) for c in capabilities)
    for cap in capabilities:
        if seen[gist(cap.description)] > 1:
            covers = ", ".join(m.removesuffix(suffix).replace("_", " ") for m in cap.members[:6])
            cap.description = f"{cap.description} It covers: {covers}."
    return capabilities


SOLVER_UNKNOWN = "Unknown: this capability was formed by the repair solver, not decided by the model."


def merge(
    micro: list[MicroCapability],
    centroids: np.ndarray,
    cfg: PipelineConfig,
    runner: Runner,
    pipeline_name: str = "",
    co_micro: np.ndarray | None = None,
) -> Taxonomy:
    """The model's merge. `centroids[i]` is the label-embedding centroid of `micro[i]`; `co_micro[i, j]` (optional)
    counts criteria whose Stage 1 labels fall in both micro-clusters, for choosing each capability's siblings."""
    repairs: list[str] = []
    proposal, start = None, None
    total = sum(m.n_criteria for m in micro)
    sim = np.asarray(centroids, dtype=np.float64) @ np.asarray(centroids, dtype=np.float64).T
    near = [", ".join(f"`{micro[j].name}`" for j in row) for row in choose_siblings(sim, co_micro, k=2)]
    prompt = render(
        "stage2_merge.j2",
        ask="membership",
        rules=cfg.labels,
        merge=cfg.merge,
        candidates=micro,
        n_total=total,
        near=near,
        max_reason_words=MAX_REASON_WORDS,
    )
    job = Job(
        prompt=prompt,
        schema=MembershipAnswer,
        validate=partial(_membership_violations, micro=micro, centroids=centroids, cfg=cfg),
        reask=False,
    )
    (answer,) = runner.run("merge", [job], "Stage 2 merge")
    answer = regroup(answer, micro, centroids, cfg, runner)
    wrong: dict[int, list[str]] = {}
    if answer.value is not None:
        mapped, notes = map_unmapped(_merged(answer.value), micro, centroids)
        repairs += notes
        mapped, wrong = fix_cards(mapped, micro, cfg, runner)
    if answer.ok and not wrong:
        proposal = mapped
    else:
        start = mapped if answer.value else None
        broken = [str(v) for v in answer.violations] + [
            f"`{mapped[i].name}`: {p}" for i, ps in sorted(wrong.items()) for p in ps
        ]
        repairs.append(
            f"the model's merge still broke {len(broken)} rule(s) after {answer.attempts} attempt(s): "
            + "; ".join(broken[:5])
        )
    if proposal is None:
        # The boundaries are the model's own (draw_boundaries below), not the solver's.
        proposal, solver_notes = solve_merge(
            micro, centroids, cfg.merge, cfg.labels, start=start, co_micro=co_micro, boundaries=False
        )
        repairs += solver_notes
    repairs += draw_boundaries(proposal, micro, centroids, cfg, runner, co_micro)
    return assemble(proposal, micro, centroids, cfg, pipeline_name, co_micro, repairs, SOLVER_UNKNOWN)


def assemble(
    proposal: list[MergedCapability],
    micro: list[MicroCapability],
    centroids: np.ndarray,
    cfg: PipelineConfig,
    pipeline_name: str,
    co_micro: np.ndarray | None,
    repairs: list[str],
    unknown: str,
) -> Taxonomy:
    """The taxonomy of a settled merge: every rule checked once more, what still breaks one recorded as a
    violation, and a P2/P3 that nobody decided marked `unknown` with its reason."""
    remaining = check_merge(
        proposal,
        micro,
        cfg.merge,
        cfg.labels,
        capability_similarity(proposal, micro, centroids),
        co_counts=capability_co_counts(proposal, micro, co_micro),
    )
    repairs = repairs + [f"unresolved: {v}" for v in remaining]
    violations = hard_violations(proposal, micro, cfg.merge)
    if remaining and not violations:  # a name or boundary rule the solver could not mend
        violations = [f"merge rule: {v}" for v in remaining]
    capabilities = _distinguish(to_taxonomy_capabilities(proposal, micro), cfg.labels.suffix)
    for cap, card in zip(capabilities, proposal):
        for field in DesignPrinciples.model_fields:
            setattr(cap, field, getattr(card, field))
        for field in ("needs_native_inspection", "needs_domain_conventions"):
            if getattr(cap, field) is None and not getattr(cap, f"{field}_reason"):
                setattr(cap, f"{field}_reason", unknown)
    labels_of = {m.name: m.member_labels for m in micro}
    for cap in capabilities:
        cap.labels = sorted({label for member in cap.members for label in labels_of.get(member, [])})
    taxonomy = Taxonomy(
        corpus=pipeline_name,
        n_criteria=sum(m.n_criteria for m in micro),
        capabilities=capabilities,
        repairs=repairs,
        violations=violations,
    )
    taxonomy.content_hash = taxonomy.compute_hash()
    return taxonomy


class ConstraintError(RunError):
    """The merged taxonomy breaks a hard constraint and the run did not accept violations."""


def constraint_failure(taxonomy: Taxonomy, where: str) -> ConstraintError:
    """One line: the first broken constraint, how many more, where the rejected taxonomy is, the fix."""
    more = f" (and {len(taxonomy.violations) - 1} more)" if len(taxonomy.violations) > 1 else ""
    return ConstraintError(
        f"{where}: the merged taxonomy breaks a hard constraint: {taxonomy.violations[0]}{more}; "
        "fix: adjust merge.min_caps, max_caps, min_share, max_share or cluster.k in the pipeline config, "
        "or pass --accept-violations to keep it with the violations listed"
    )
