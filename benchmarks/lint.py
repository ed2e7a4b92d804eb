"""Recall of `taxonomy lint`'s offline rules on defects injected into the bundled corpora, the share of
untouched criteria it flags at warning or above, and its time on all of HealthBench.

    nice .venv/bin/python benchmarks/lint.py                      # all three corpora, 40 injections per kind
    nice .venv/bin/python benchmarks/lint.py --corpora healthbench --n 100 --sample /tmp/sample.md

Each kind of defect is injected into its own copy of a corpus, at most once per task where the corpus
has tasks enough, and the copy is linted with every rule. A defect counts as found when a finding of
the expected rule names the injected criterion; recall is given at any severity and at warning or above.

  sign        flip the sign of a clearly worded criterion: one opening with a word that states a failure
              ("Fails", "Incorrectly", ...) or a success ("Correctly", "Accurately", ...). The list is the
              benchmark's, English, and the linter never reads it: it learns its cues from the corpus.
  sign-any    flip the sign of any criterion (context: most wordings carry no sign a reader could see)
  duplicate   repeat a criterion in its task with a case, space, punctuation or one-word change
  contradiction  add a criterion's negation ("Does not ...", "is not", "has not been") with the same sign
  compound    join two criteria of a task into one (", and ", "; ", ". " or "; and, separately, ")
  weight      scale a weight by 20 or by 1/20
  uncovered   drop the only criterion that checks a requirement sentence of the brief
  ungrounded  add a made-up quoted name to a criterion
  hygiene     put encoding junk into a criterion

`--sample FILE` writes up to 15 real findings per rule and severity from the untouched corpora, for a
reader to judge. `--judged [FIXTURE ...]` prints precision per rule, source and severity on the labelled
rubrics of tests/fixtures/lint/ (the offline rules; with `--findings`, a saved run's findings, e.g. a
model's) and how many labelled defects were found.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import taxonomy  # noqa: E402
from taxonomy.lint import lint  # noqa: E402
from taxonomy.text import NEGATIONS, words  # noqa: E402

# A repeated criterion is a finding to count, not a row to collapse (as `taxonomy lint` reads a corpus).
KEEP_REPEATS = {"corpus": {"on_duplicate": "keep"}}
FAILURE_OPENINGS = {"fails", "incorrectly", "wrongly", "inaccurately", "falsely", "omits", "neglects", "misses"}
SUCCESS_OPENINGS = {"correctly", "accurately", "appropriately", "properly"}
EXPECTED = {
    "sign": "sign-mismatch",
    "sign-any": "sign-mismatch",
    "duplicate": "duplicate",
    "contradiction": "contradiction",
    "compound": "compound",
    "weight": "weight-outlier",
    "uncovered": "uncovered-brief",
    "ungrounded": "ungrounded",
    "hygiene": "hygiene",
}
_REQUIREMENT = re.compile(
    r"\b(?:must|should|shall|need to|needs to|required|requires|make sure|ensure|please|do not|don't|"
    r"at most|at least|no more than|fewer than|less than|only)\b",
    re.I,
)


def load(name: str) -> pl.DataFrame:
    """A bundled corpus by name (pipelines/NAME.toml), or a corpus file (a labelled fixture)."""
    source = Path(name) if Path(name).suffix else ROOT / "pipelines" / f"{name}.toml"
    frame = taxonomy.read_corpus(source, settings=KEEP_REPEATS)
    if "context" not in frame.columns:
        frame = frame.with_columns(pl.lit("").alias("context"))
    return frame.select("criterion_id", "task_id", "text", "weight", "brief", "context")


def spread(rows: list[dict], n: int, rng: random.Random) -> list[dict]:
    """n candidates, one per task first, then more from tasks already used."""
    rng.shuffle(rows)
    seen, first, rest = set(), [], []
    for r in rows:
        (rest if r["task_id"] in seen else first).append(r)
        seen.add(r["task_id"])
    return (first + rest)[:n]


def new_id(r: dict, tag: str) -> str:
    return f"{r['criterion_id']}~{tag}"


def negate(text: str) -> str:
    ws = text.split()
    first = ws[0]
    if re.fullmatch(r"[A-Z][a-z]+s", first) and not first.endswith("ss"):
        base = first[:-2] if first.endswith(("sses", "shes", "ches", "xes")) else first[:-1]
        return f"Does not {base.lower()} {' '.join(ws[1:])}"
    for aux in (" has been ", " have been ", " is ", " are ", " was ", " were ", " can be "):
        if aux in text:
            head, tail = aux.strip().split(" ", 1) if aux.count(" ") > 2 else (aux.strip(), "")
            return text.replace(aux, f" {head} not {tail + ' ' if tail else ''}", 1)
    return f"Fails to ensure that {text[0].lower()}{text[1:]}"


def variant(text: str, k: int, rng: random.Random) -> str:
    ws = text.split()
    if k % 5 == 0:
        return text.upper() if len(text) < 200 else text.lower()
    if k % 5 == 1:
        return "  " + "  ".join(ws) + " "
    if k % 5 == 2:
        return text.rstrip(".") + "!" if text.endswith(".") else text + "."
    if k % 5 == 3:  # drop one word that is neither the first, a number nor a negation
        cands = [
            i for i, w in enumerate(ws) if i > 0 and not any(c.isdigit() for c in w) and w.lower() not in NEGATIONS
        ]
        i = rng.choice(cands)
        return " ".join(ws[:i] + ws[i + 1 :])
    i = rng.randrange(1, len(ws))
    return " ".join(ws[:i] + ["the"] + ws[i:])


def inject(frame: pl.DataFrame, kind: str, n: int, rng: random.Random) -> tuple[pl.DataFrame, list[str]]:
    """The corpus with n defects of one kind, and the criterion ids each defect should be found on."""
    rows = frame.to_dicts()
    by_task = defaultdict(list)
    for r in rows:
        by_task[r["task_id"]].append(r)
    add, drop, expect = [], set(), []
    if kind in ("sign", "sign-any"):

        def clear(r):  # the cue word among the first four ("Fails to ...", "The agent fails to ...")
            first = set(words(r["text"])[:4])
            return (first & FAILURE_OPENINGS and r["weight"] < 0) or (first & SUCCESS_OPENINGS and r["weight"] > 0)

        for r in spread([r for r in rows if r["weight"] and (kind == "sign-any" or clear(r))], n, rng):
            r["weight"] = -r["weight"]
            expect.append(r["criterion_id"])
    elif kind == "duplicate":
        for k, r in enumerate(spread([r for r in rows if len(r["text"].split()) >= 6], n, rng)):
            add.append({**r, "criterion_id": new_id(r, "dup"), "text": variant(r["text"], k, rng)})
            expect.append(add[-1]["criterion_id"])
    elif kind == "contradiction":
        for r in spread([r for r in rows if len(r["text"].split()) >= 4 and r["weight"]], n, rng):
            add.append({**r, "criterion_id": new_id(r, "neg"), "text": negate(r["text"])})
            expect.append(add[-1]["criterion_id"])
    elif kind == "compound":
        tasks = [t for t, rs in by_task.items() if len(rs) >= 3]
        for k, t in enumerate(spread([{"task_id": t} for t in tasks], n, rng)):
            a, b = rng.sample([r for r in by_task[t["task_id"]] if r["criterion_id"] not in drop], 2)
            joint = (", and ", "; ", ". ", "; and, separately, ")[k % 4]
            second = b["text"] if joint == ". " else b["text"][0].lower() + b["text"][1:]
            a["text"] = a["text"].rstrip(" .") + joint + second
            drop.add(b["criterion_id"])
            expect.append(a["criterion_id"])
    elif kind == "weight":
        for k, r in enumerate(spread([r for r in rows if r["weight"]], n, rng)):
            r["weight"] = r["weight"] * (20 if k % 2 == 0 else 1 / 20)
            expect.append(r["criterion_id"])
    elif kind == "uncovered":
        expect = _drop_only_checks(by_task, n, rng, drop)
    elif kind == "ungrounded":
        for k, r in enumerate(spread(list(rows), n, rng)):
            r["text"] = r["text"].rstrip(" .") + f', as the "Quarnix-{k + 7}" protocol states.'
            expect.append(r["criterion_id"])
    elif kind == "hygiene":
        for r in spread([r for r in rows if " " in r["text"]], n, rng):
            r["text"] = r["text"].replace(" ", " â€™ ", 1)
            expect.append(r["criterion_id"])
    out = [r for r in rows if r["criterion_id"] not in drop] + add
    return pl.DataFrame(out, schema=frame.schema), expect


def _content(text: str) -> set[str]:
    from taxonomy.text import FUNCTION_WORDS

    return {w[:5] for w in words(text) if w not in FUNCTION_WORDS and len(w) > 1}


def _drop_only_checks(by_task: dict, n: int, rng: random.Random, drop: set) -> list[str]:
    """Drop the one criterion holding at least half the words of a requirement sentence of the brief."""
    found = []
    tasks = list(by_task)
    rng.shuffle(tasks)
    for t in tasks:
        rows = by_task[t]
        for sentence in re.split(r"(?<=[.!?])\s+", rows[0]["brief"] or ""):
            need = _content(sentence)
            if sentence.endswith("?") or not _REQUIREMENT.search(sentence) or len(need) < 2:
                continue
            holders = [r for r in rows if len(need & _content(r["text"])) >= 0.5 * len(need)]
            if len(holders) == 1 and len(rows) > 2:
                drop.add(holders[0]["criterion_id"])
                found.append(t)  # the finding names the task's first criterion: found by task
                break
        if len(found) >= n:
            break
    return found


# Rules that learn from the whole corpus (sign cues, its weight range) are measured on copies holding
# a few defects each, as a real corpus would, not dozens that would shift what they learn.
PER_COPY = {"sign": 5, "sign-any": 5, "weight": 5, "compound": 5}


def recall(frame: pl.DataFrame, kind: str, n: int, seed: int) -> tuple[int, int, int]:
    size = PER_COPY.get(kind, n)
    total = anywhere = strong = 0
    for round_ in range(-(-n // size)):
        injected, expect = inject(frame, kind, size, random.Random(seed + 1000 * round_))
        if not expect:
            break
        found = [f for f in lint(injected, select=list(dict.fromkeys(EXPECTED.values()))) if f.rule == EXPECTED[kind]]
        hit = (lambda f, e: f.task_id == e) if kind == "uncovered" else (lambda f, e: e in f.criterion_ids)
        total += len(expect)
        anywhere += sum(any(hit(f, e) for f in found) for e in expect)
        strong += sum(any(hit(f, e) and f.severity != "info" for f in found) for e in expect)
    return total, anywhere, strong


def flagged_share(frame: pl.DataFrame) -> tuple[float, dict]:
    found = lint(frame)
    flagged = {c for f in found if f.severity != "info" for c in f.criterion_ids}
    counts = defaultdict(int)
    for f in found:
        counts[(f.rule, f.severity)] += 1
    return len(flagged) / frame.height, dict(counts), found


def write_sample(path: Path, corpora: dict[str, list], per: int, seed: int) -> None:
    rng = random.Random(seed)
    lines = ["# Real findings to judge: defect (D) or not (N)", ""]
    for name, found in corpora.items():
        groups = defaultdict(list)
        for f in found:
            groups[(f.rule, f.severity)].append(f)
        for (rule, severity), fs in sorted(groups.items()):
            lines.append(f"## {name} {rule} {severity} ({len(fs)} findings, {min(per, len(fs))} shown)")
            for f in rng.sample(fs, min(per, len(fs))):
                lines.append(f"- [ ] `{f.criterion_ids}` {f.message}")
            lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def timed_cli() -> tuple[float, float]:
    """(wall, CPU) seconds of the whole command, interpreter start and corpus load included. On a
    shared machine the CPU seconds are what the command costs; wall time also counts the others' load."""
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [
            str(ROOT / ".venv/bin/taxonomy"),
            "lint",
            str(ROOT / "pipelines/healthbench.toml"),
            "--format",
            "json",
            "--fail-on",
            "never",
            "--provider",
            "offline",
        ],
        check=True,
        capture_output=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - start, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


FIXTURES = ROOT / "tests" / "fixtures" / "lint"


def judged(path: Path, findings: Path | None = None) -> tuple[list, dict[str, set[str]]]:
    """A labelled fixture's findings and its labels: criterion_id -> the rules it is a defect of
    ("uncovered-brief:words" names the brief's requirement). The findings are the offline rules' (every
    rule, previews included), or those of a `taxonomy lint FIXTURE --preview --format json` run saved in
    `findings` (with a model: the model's own and the merged ones, each with its source)."""
    from taxonomy.lint.check import check, rules
    from taxonomy.lint.findings import Finding

    if findings is None:
        found, _ = check(path, rules(None, None, preview=True), "offline")
    else:
        found = [Finding(**f) for f in json.loads(findings.read_text(encoding="utf-8"))["findings"]]
    frame = taxonomy.read_corpus(path, settings=KEEP_REPEATS)
    labels = {cid: {x for x in (d or "").split("|") if x} for cid, d in zip(frame["criterion_id"], frame["defect"])}
    return found, labels


def real(f, labels: dict[str, set[str]]) -> bool:
    """A finding is a real defect when a criterion it names is labelled with its rule (for uncovered-brief:
    when its evidence holds the labelled requirement)."""
    for cid in f.criterion_ids:
        for label in labels.get(cid, ()):
            rule, _, words_ = label.partition(":")
            if rule == f.rule and (not words_ or words_.lower() in f.evidence.lower()):
                return True
    return False


def precision(paths: list[Path], findings: list[Path] | None = None) -> None:
    """Precision per rule, source and severity on the labelled fixtures, and recall of their labelled defects."""
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    labelled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k, path in enumerate(paths):
        found, labels = judged(path, findings[k] if findings else None)
        for f in found:
            counts[(f.rule, f.source, f.severity)][0] += 1
            counts[(f.rule, f.source, f.severity)][1] += real(f, labels)
        for cid, rules_ in labels.items():
            for label in rules_:
                rule = label.partition(":")[0]
                labelled[rule][0] += 1
                labelled[rule][1] += any(f.rule == rule and real(f, {cid: {label}}) for f in found)
    print(f"\nPrecision on the labelled fixtures ({', '.join(p.name for p in paths)}), previews included:\n")
    print("| rule | source | severity | findings | real | precision |\n|---|---|---|---:|---:|---:|")
    strong = [0, 0]
    for (rule, source, severity), (n, hit) in sorted(counts.items()):
        print(f"| {rule} | {source} | {severity} | {n} | {hit} | {hit / n:.2f} |")
        if severity != "info":
            strong[0] += n
            strong[1] += hit
    if strong[0]:
        print(f"| all | all | warning+ | {strong[0]} | {strong[1]} | {strong[1] / strong[0]:.2f} |")
    print("\n| rule | labelled defects | found (any severity) |\n|---|---:|---:|")
    for rule, (n, hit) in sorted(labelled.items()):
        print(f"| {rule} | {n} | {hit} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", nargs="+", default=["healthbench", "paperbench", "devai"])
    ap.add_argument("--n", type=int, default=40, help="injections per kind and corpus")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sample", type=Path, help="write real findings to judge here")
    ap.add_argument(
        "--judged",
        nargs="*",
        type=Path,
        help="only the precision on these labelled fixtures (default: tests/fixtures/lint/*.csv)",
    )
    ap.add_argument(
        "--findings",
        nargs="*",
        type=Path,
        help="with --judged: each fixture's saved `taxonomy lint --format json` findings "
        "(a model run's, say) instead of the offline rules'",
    )
    args = ap.parse_args()
    if args.judged is not None:
        paths = args.judged or sorted(FIXTURES.glob("*.csv"))
        if args.findings and len(args.findings) != len(paths):
            ap.error("--findings needs one JSON file per fixture, in the same order")
        precision(paths, args.findings)
        return
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    real = {}
    print("| corpus | kind | injected | found (any severity) | found at warning+ |\n|---|---|---:|---:|---:|")
    for name in args.corpora:
        frame = load(name)
        for kind in EXPECTED:
            n, anywhere, strong = recall(frame, kind, args.n, args.seed)
            for i, v in enumerate((n, anywhere, strong)):
                totals[kind][i] += v
            print(
                f"| {name} | {kind} | {n} | {anywhere / n:.2f} | {strong / n:.2f} |"
                if n
                else f"| {name} | {kind} | 0 | – | – |"
            )
        share, counts, real[name] = flagged_share(frame)
        print(f"| {name} | untouched criteria flagged at warning+ | {frame.height} | {share:.3f} | |")
    print("\n| kind | injected | recall (any) | recall (warning+) |\n|---|---:|---:|---:|")
    for kind, (n, anywhere, strong) in totals.items():
        print(f"| {kind} | {n} | {anywhere / n:.2f} | {strong / n:.2f} |" if n else f"| {kind} | 0 | – | – |")
    if "healthbench" in args.corpora:
        walls, cpus = zip(*(timed_cli() for _ in range(3)))
        print(
            "\n`taxonomy lint pipelines/healthbench.toml` offline (5,965 criteria, start and load included), median "
            "of 3: "
            f"{sorted(walls)[1]:.1f} s wall, {sorted(cpus)[1]:.1f} s CPU; load average "
            f"{open('/proc/loadavg').read().split()[0]} on {os.cpu_count()} cores"
        )
    if args.sample:
        write_sample(args.sample, real, 15, args.seed)
        print(f"sample of real findings: {args.sample}")


if __name__ == "__main__":
    main()
