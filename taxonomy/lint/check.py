"""`taxonomy lint` as a library call: read the target, run the offline rules, add the model's review
when a model is configured, place every finding on its file's line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from taxonomy.config import ConfigError
from taxonomy.lint import run_rules
from taxonomy.lint.coverage import skipped
from taxonomy.lint.findings import SEVERITIES, Finding
from taxonomy.lint.llm import STAGE, jobs, merge, read_answers
from taxonomy.lint.output import summary
from taxonomy.lint.reading import Corpus
from taxonomy.lint.rules import RULES
from taxonomy.lint.target import Target, load_target
from taxonomy.llm.context_cache import tokens
from taxonomy.llm.providers import resolve_provider_name
from taxonomy.pipeline import open_session


FAIL_ON = ("error", "warning", "never")


@dataclass
class Plan:
    """Which rules run offline and which of the model's findings are kept."""

    offline: list[str]
    model: list[str]


def choice(option: str, value: str, allowed: tuple[str, ...]) -> str:
    """A checked option value: anything else is one line naming the allowed ones (exit 2)."""
    if value not in allowed:
        raise ConfigError(f"{option} {value}: not a choice; fix: use one of {' | '.join(allowed)}")
    return value


def rules(select: str | None, ignore: str | None, preview: bool = False) -> Plan:
    """The rules `--select`, `--ignore` and `--preview` leave, per source: a rule named in --select runs
    from every source it has, previews included; an unknown name is a one-line error naming the known ones."""

    def names(option: str, value: str | None) -> list[str]:
        listed = [n.strip() for n in (value or "").split(",") if n.strip()]
        for n in listed:
            if n not in RULES:
                raise ConfigError(
                    f"{option} {n}: unknown rule; fix: use one or more of {', '.join(RULES)}, separated by commas"
                )
        return listed

    chosen, dropped = set(names("--select", select)), set(names("--ignore", ignore))
    kept = [r for r in RULES.values() if r.id not in dropped and (not chosen or r.id in chosen)]

    def on(rule, source: str) -> bool:
        asked = source == "offline" or rule.model is not None
        return asked and (rule.id in chosen or preview or rule.default(source))

    return Plan([r.id for r in kept if on(r, "offline")], [r.id for r in kept if on(r, "llm")])


def fails(findings: list[Finding], fail_on: str) -> bool:
    return fail_on != "never" and bool(at_least(findings, fail_on))


def at_least(findings: list[Finding], severity: str) -> list[Finding]:
    """`--min-severity`: the findings at or above it."""
    least = SEVERITIES.index(severity)
    return [f for f in findings if SEVERITIES.index(f.severity) >= least]


def check(path: Path, plan: Plan, provider: str | None = None, quiet: bool = True) -> tuple[list[Finding], dict]:
    target = load_target(path)
    corpus = Corpus.of(target.frame, target.capability)
    found = run_rules(corpus, plan.offline)
    found, llm = _with_model(target, corpus, found, plan.model, provider, quiet)
    where = target.locations({f.criterion_ids[0] for f in found})
    for f in found:
        f.location = where.get(f.criterion_ids[0], {"file": None, "line": None, "pointer": None})
    n_tasks = target.frame["task_id"].n_unique()
    summ = summary(found, target.frame.height, n_tasks, llm)
    summ["skipped"] = skipped(corpus, plan.offline, plan.model, llm, target.frame.height)
    return found, summ


def _with_model(
    target: Target, corpus: Corpus, found: list[Finding], chosen: list[str], provider: str | None, quiet: bool
) -> tuple[list[Finding], dict]:
    backend = resolve_provider_name(provider or target.cfg.llm.provider)
    if backend == "offline":
        return found, {"asked": 0, "why": "offline: set GEMINI_API_KEY or pass --provider for the model's review"}
    if not chosen:
        return found, {"asked": 0, "why": "no rule selected that the model reviews"}
    session = open_session(
        target.cfg,
        provider=backend,
        run_dir=target.run_dir,
        show_progress=not quiet,
        from_source=target.run_dir is None,
    )
    asked = jobs(corpus)
    answers = session.backend.ask(STAGE, [job for _, job in asked], "lint: reviewing each task's criteria")
    if answers is None:
        return found, {"asked": 0, "why": f"the {backend} backend runs no model"}
    review = read_answers(corpus, [task for task, _ in asked], answers)
    model = [f for f in review.findings if f.rule in chosen]
    return merge(found, model), review.summary()


OUTPUT_TOKENS_PER_TASK = 150  # a few findings of about 50 tokens each; most tasks of a sound rubric have none


def review_cost(path: Path) -> str:
    """What the model's review of TARGET would cost (`taxonomy lint --dry-run`): one call per task,
    prompts built exactly; answers sized at OUTPUT_TOKENS_PER_TASK; re-asks not included."""
    target = load_target(path)
    asked = jobs(Corpus.of(target.frame))
    prompt = sum(tokens(job.prompt) for _, job in asked)
    usage = {"prompt_tokens": prompt, "output_tokens": OUTPUT_TOKENS_PER_TASK * len(asked)}
    batch = {**usage, "batch_prompt_tokens": prompt, "batch_output_tokens": usage["output_tokens"]}
    prices = target.cfg.llm.prices
    return (
        f"Model review ({target.cfg.llm.model}): {len(asked)} calls "
        f"(one per task), {prompt} prompt tokens (exact prompts), "
        f"~{usage['output_tokens']} output tokens; {prices.cost(usage):.4f} "
        f"USD online, {prices.cost(batch):.4f} USD in batch mode; "
        "re-asks not included. The offline rules cost nothing.\n"
    )
