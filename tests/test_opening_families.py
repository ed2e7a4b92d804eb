"""Opening words a corpus uses interchangeably are one check: the offline backend keeps them together.

A rubric writer who varies the verb ("Advises …", "Recommends …", "Suggests …") writes one kind of
check; cut by the verb it became capabilities a reader could not tell apart. Through the library
(`opening_families`) and through `taxonomy run` on a generated corpus of verb-first criteria.
"""
from __future__ import annotations

import re

import polars as pl

from tests.conftest import invoke

ADVICE = ("Advises", "Recommends", "Suggests")
STATEMENT = ("States", "Mentions", "Notes")


def _topic(t: int, j: int) -> str:
    """A word of task t alone (a topic, never check language)."""
    return "".join("bdfgklmnprstvz"[(7 * t + 3 * j + k) % 14] + "aeiou"[(t + j + k) % 5] for k in range(3))


def _rows(tasks: int = 16) -> list[tuple[str, str]]:
    rows = []
    for t in range(tasks):
        for j, verb in enumerate(ADVICE):
            rows += [(f"t{t}", f"{verb} seeking {_topic(t, j)} care early."),
                     (f"t{t}", f"{verb} the user to avoid {_topic(t, j + 3)} at night.")]
        for j, verb in enumerate(STATEMENT):
            rows += [(f"t{t}", f"{verb} that {_topic(t, j)} is usually harmless."),
                     (f"t{t}", f"{verb} that the {_topic(t, j + 3)} may return.")]
        rows += [(f"t{t}", f"Fails to mention {_topic(t, 1)} risk."), (f"t{t}", f"Fails to mention {_topic(t, 2)} dose.")]
        rows += [(f"t{t}", f"Asks about {_topic(t, 4)} history."), (f"t{t}", f"Asks how long {_topic(t, 5)} lasted.")]
        rows += [(f"t{t}", f"Uses plain language about {_topic(t, 6)}."), (f"t{t}", f"Uses plain language for {_topic(t, 7)}.")]
    return rows


def test_words_followed_alike_are_one_family_and_others_stay_apart():
    from taxonomy.offline.families import opening_families

    rows = _rows()
    # a word of one task only is that task's subject, however it is followed
    rows += [("t0", f"Mentionsx that {_topic(0, j)} is usually harmless.") for j in range(8)]
    fam = opening_families([r[1] for r in rows], [r[0] for r in rows])
    assert sorted(fam.members.values()) == [["advises", "recommends", "suggests"], ["mentions", "notes", "states"]]
    assert fam.written(fam.of("Recommends")) == "Advises / Recommends / Suggests"
    assert fam.of("fails") is None and fam.of("asks") is None and fam.of("mentionsx") is None


def test_a_family_that_opens_most_of_the_corpus_is_its_lead_not_a_check():
    from taxonomy.offline.families import MAX_SHARE, opening_families

    rows = [r for r in _rows() if r[1].split()[0] in ADVICE + ("Fails",)]
    assert sum(r[1].split()[0] in ADVICE for r in rows) > MAX_SHARE * len(rows)
    assert opening_families([r[1] for r in rows], [r[0] for r in rows]).members == {}


def test_an_offline_run_keeps_an_opening_family_in_one_capability_and_says_so(offline_env, tmp_path):
    rows = _rows()
    pl.DataFrame({"task_id": [r[0] for r in rows], "text": [r[1] for r in rows]}).write_csv(tmp_path / "verbs.csv")
    (tmp_path / "verbs.toml").write_text('name = "verbs"\n[corpus]\npath = "verbs.csv"\nformat = "table"\n'
                                         '[cluster]\nk = 20\n[merge]\nmin_caps = 3\nmax_caps = 6\n')
    run_dir = tmp_path / "run"
    invoke("run", tmp_path / "verbs.toml", "--run-dir", run_dir, "-q", "--no-report")
    crit = pl.read_parquet(run_dir / "criteria.parquet").join(pl.read_parquet(run_dir / "stage3_tags.parquet"), on="criterion_id")
    primary = {verb: set(crit.filter(pl.col("text").str.starts_with(verb))["primary"]) for verb in ADVICE + STATEMENT}
    advice, statement = set().union(*(primary[v] for v in ADVICE)), set().union(*(primary[v] for v in STATEMENT))
    assert len(advice) == 1 and len(statement) == 1 and advice != statement, primary
    md = (run_dir / "taxonomy.md").read_text()
    assert "“A / B …” is one opening written several ways" in md  # the list says how to read a family line
    for family, cap in ((ADVICE, advice.pop()), (STATEMENT, statement.pop())):
        section = md.split(f"## `{cap}`")[1].split("\n## ")[0]
        openings = [set(o.split(" / ")) for o in re.findall(r"“([^”]+) …”", section.split("\n")[2])]
        assert openings == [set(family)], section  # the description gives the family as its one opening, not a verb of it
        word = "|".join(re.escape(w) for w in family)
        placed = re.findall(rf"Opens with “((?:{word})(?: / (?:{word}))*) …” → `{cap}`", md)
        assert [set(p.split(" / ")) for p in placed] == [set(family)], md  # and the placement list places by it
