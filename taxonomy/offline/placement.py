"""An ordered list of rules a reader can apply to place a criterion, and that the offline tags follow.

The tagger scores a criterion by its Stage 1 labels and phrases, which no reader can redo by
hand. What a reader can do is check a criterion's first words and its words, in order, and stop
at the first rule that fits. The rules are learned from the scores' tags (a greedy decision list,
as CN2 or RIPPER build one): each step takes the opening or phrase whose not yet placed criteria
go mostly to one capability, preferring the rule that places the most of them for the fewest
misplaced. Then the tags follow the list (`follow`): a criterion a line fits is tagged as the line
says, the scores' choice ranked after it. Readers given the list applied it to the letter and
placed 97-100% of the criteria it caught as it says, and half of the rest; a list the tags only
mostly followed sent them wrong exactly where the two differed. A phrase rule uses only a phrase
of the capability's own title: a stray word that happens to sort criteria ("time", "following")
would read as what the capability checks, and readers took it so. After the list comes a line for
each opening a capability's title leads with that the list left out, when most of what it still
catches goes there. Criteria no rule fits are left to the descriptions, and the list says how many
and which capability the tags put most of them in (the `rest` step), as a default for a criterion
no description fits better either.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from taxonomy.offline.openings import Openings
from taxonomy.offline.features import STEM_LETTERS, WORD, is_spaceless, stem
from taxonomy.schemas import PlacementRule, Taxonomy

__all__ = ["placement_rules", "placement_markdown", "placement_cue", "placement_summary", "placement_intro", "lines",
           "placement_unlisted", "UNLISTED_INTRO", "follow", "first_lines", "MAX_RULES", "MIN_PRECISION"]

# Readers placed nearly every criterion a line caught as it says and about half of the rest (reader tests on
# seven corpora), so the list reaches as far as its lines stay telling. Over four seeds on seven corpora, 40
# lines at 0.6 caught 44-89% of the criteria (27-78% at 20 lines and 0.8), and the NMI of the tags that
# follow them against the gold kinds moved by under 0.025 on seven of eight gold fields (PaperBench's
# finegrained category fell from 0.194 to 0.163).
MAX_RULES = 40        # a list a reader scans per criterion, not a classifier
MIN_PRECISION = 0.6   # of the criteria a rule catches, this share the scores put where it says; it moves the rest
MISPLACED_COST = 3    # a rule is worth the criteria it places right less this many per one it places wrong
MIN_CAUGHT = 0.005    # a rule catches at least this share of the corpus (and at least 3 criteria)


def _features(openings: Openings, titles: list[set[str]], least: int) -> list[tuple[str, str]]:
    """(kind, text) of every opening common enough and every title phrase: the lines the list may take."""
    texts = sorted({openings.form[key] for key, count in openings.total.items() if count >= least})
    return [("opens", text) for text in texts] + [("uses", text) for text in sorted(set().union(*titles))]


def placement_rules(primary: np.ndarray, names: list[str], texts: list[str], openings: Openings,
                    titles: list[set[str]], leads: list[str | None] = ()) -> list[PlacementRule]:
    """Up to MAX_RULES lines, in the order a reader applies them, for the criteria `texts` tagged `primary`;
    `titles[c]` are the phrases capability c's title shows, as written, and `leads[c]` the key of the
    opening it leads with, if any (see _lead_rules). What a line would catch is read as PLACEMENT_INTRO
    says, so the list is learned on exactly what a reader (and `follow`) matches. The steps said after the
    lines are counted by `follow`, on the tags that follow them."""
    n, k = len(primary), len(names)
    least = max(3, int(np.ceil(MIN_CAUGHT * n)))
    candidates = _features(openings, titles, least)
    fit = _fitting(candidates, texts)
    features = [(kind, text, rows) for j, (kind, text) in enumerate(candidates)
                if len(rows := np.flatnonzero(fit[:, j])) >= least]
    open_ = np.ones(n, bool)
    rules: list[PlacementRule] = []
    while len(rules) < MAX_RULES:
        best = None
        for f, (kind, text, rows) in enumerate(features):
            rows = rows[open_[rows]]
            if len(rows) < least:
                continue
            counts = np.bincount(primary[rows], minlength=k)
            c = int(counts.argmax())
            right = int(counts[c])
            if right < MIN_PRECISION * len(rows) or (kind == "uses" and text not in titles[c]):
                continue
            # Of two that place alike, the longer opening says more ("Cross-validation is used …", not "Cross …")
            # and the shorter phrase carries over to criteria not seen ("preprocessing", not "preprocessing including").
            worth = (right - MISPLACED_COST * (len(rows) - right), len(text) if kind == "opens" else -len(text))
            if best is None or worth > best[0]:
                best = (worth, f, c, right, len(rows))
        if best is None:
            break
        _, f, c, right, caught = best
        kind, text, rows = features[f]
        open_[rows] = False
        rules.append(PlacementRule(kind=kind, text=text, capability=names[c], caught=caught, right=right))
    opening_rows = {text: rows for kind, text, rows in features if kind == "opens"}
    return rules + _lead_rules(primary, names, [openings.form[key] if key else None for key in leads],
                               opening_rows, open_, least, {r.text for r in rules})


def _rest_rule(primary: np.ndarray, names: list[str], open_: np.ndarray) -> list[PlacementRule]:
    """Where the criteria no line caught mostly go: readers with a criterion that fits no line asked for a
    default, and the tags say which capability takes most of them (and how many of them that is)."""
    rest = primary[open_]
    if len(rest) == 0:
        return []
    counts = np.bincount(rest, minlength=len(names))
    c = int(counts.argmax())
    return [PlacementRule(kind="rest", text="", capability=names[c], caught=len(rest), right=int(counts[c]))]


def lines(taxonomy: Taxonomy) -> list[PlacementRule]:
    """The list's lines a reader matches a criterion against (the other steps are said after them)."""
    return [r for r in taxonomy.placement if r.kind in ("opens", "uses")]


def _lead_rules(primary: np.ndarray, names: list[str], leads: list[str | None], opening_rows: dict[str, np.ndarray],
                open_: np.ndarray, least: int, listed: set[str]) -> list[PlacementRule]:
    """After the list, a line for each opening a title leads with (`leads[c]`, as written) that the list
    left out for placing under MIN_PRECISION, while most of what it still catches goes where it says: a
    reader who sees a title lead with "States that …" looks for it in the list, and without it placed those
    by guess. An opening too rare to be among `opening_rows` is too rare for a line."""
    out = []
    for c, text in enumerate(leads):
        if not text or text in listed or text not in opening_rows:
            continue
        rows = opening_rows[text]
        rows = rows[open_[rows]]
        right = int((primary[rows] == c).sum())
        if len(rows) >= least and right > len(rows) / 2:
            open_[rows] = False
            out.append(PlacementRule(kind="opens", text=text, capability=names[c], caught=len(rows), right=right))
    return out


SPREAD_PENALTIES = 5  # negative-weight criteria a corpus needs before their spread is worth a sentence


def _penalty_rule(primary: np.ndarray, penalty: np.ndarray, names: list[str]) -> list[PlacementRule]:
    """Readers of a corpus whose penalties sit in no capability of their own asked where a penalty goes:
    when no capability holds most of them and none is mostly penalties, a `penalties` step says so, with
    the capability holding the most."""
    if penalty.sum() < SPREAD_PENALTIES:
        return []
    counts = np.bincount(primary[penalty], minlength=len(names))
    sizes = np.bincount(primary, minlength=len(names))
    top = int(counts.argmax())
    if counts[top] * 2 > penalty.sum() or np.any(counts * 2 > sizes):
        return []
    return [PlacementRule(kind="penalties", text="", capability=names[top], caught=int(penalty.sum()), right=int(counts[top]))]


PLACEMENT_INTRO = (f"Go down the list and stop at the first line that fits the criterion: how it opens, or a word or phrase "
                   f"it uses. Case and punctuation do not count; a word of more than {STEM_LETTERS} letters matches any word "
                   f"of more than {STEM_LETTERS} sharing its first {STEM_LETTERS}, a word of {STEM_LETTERS} letters any word that "
                   "begins with it, a shorter one only itself. "
                   "The offline tags follow this list: a criterion a line fits is tagged as the line says, whatever the "
                   "descriptions and boundaries below suggest. Each line says how many of the criteria this taxonomy was "
                   "built from it caught, after the lines above it.")
FAMILY_NOTE = "“A / B …” is one opening written several ways: the criterion opens with A or with B."


def placement_intro(taxonomy: Taxonomy) -> str:
    """The list's reading instructions, with what “A / B …” means when a line has an opening family."""
    families = any(r.kind == "opens" and " / " in r.text for r in lines(taxonomy))
    return PLACEMENT_INTRO + (" " + FAMILY_NOTE if families else "")


def placement_cue(rule: PlacementRule) -> str:
    return f"Opens with “{rule.text} …”" if rule.kind == "opens" else f"Contains “{rule.text}”"


def placement_summary(taxonomy: Taxonomy, code=lambda name: f"`{name}`") -> str:
    """What the list as a whole catches and places, and what it leaves to the descriptions; `code` marks up a
    capability's name (Markdown by default)."""
    rules = lines(taxonomy)
    caught = sum(r.caught for r in rules)
    n = max(taxonomy.n_criteria, caught)
    rest = (f"The other {n - caught} ({100 * (n - caught) / max(n, 1):.0f}%) fit none of them: place those by the descriptions."
            if n > caught else "Every criterion fits one of them.")
    fallback = next((r for r in taxonomy.placement if r.kind == "rest"), None)
    if fallback is not None and n > caught:
        rest += (f" Of those, the tags put the most in {code(fallback.capability)} ({fallback.right} of {fallback.caught}): "
                 "a criterion that fits no description better goes there.")
    spread = next((r for r in taxonomy.placement if r.kind == "penalties"), None)
    if spread is not None:
        rest += (f" The {spread.caught} penalties (negative weight) are spread over the capabilities, at most {spread.right} "
                 f"of them in {code(spread.capability)}: place a penalty by the check it names, as a reward.")
    return f"These {len(rules)} lines catch {caught} of the {n} criteria. {rest}"


UNLISTED_INTRO = "Where the tags put the criteria that fit no line, with the most typical of each:"


def placement_unlisted(taxonomy: Taxonomy, code=lambda name: f"`{name}`") -> list[str]:
    """One item per capability holding criteria no line fits: how many, and one of them as written. Readers left
    with such a criterion placed about half as tagged and asked for examples of what fits no line."""
    return [f"{code(r.capability)}: {r.caught}, such as “{r.text}”" for r in taxonomy.placement if r.kind == "unlisted"]


def _line_words(text: str) -> list[str]:
    """A line's words as the intro matches them (see _answers): a long word by its first letters, marked cut
    ("unterscheidet" is not "unter"), a word of STEM_LETTERS letters marked as a prefix, a shorter one as itself."""
    return [_line_word(w) for w in WORD.findall(text.lower())]


@lru_cache(maxsize=1 << 16)  # a corpus has far fewer words than it has words written
def _line_word(word: str) -> str:
    if stem(word) != word:
        return word[:STEM_LETTERS] + "…"
    return word + "+" if len(word) == STEM_LETTERS and not is_spaceless(word) else word


# Readers of three corpora expected a word to match its inflections ("Achse" and "Achsen", "save" and "saved").
# A line word of exactly STEM_LETTERS letters matches any word that begins with it: with the list learned on
# what this reading catches, the German corpus's NMI rose from 0.301 to 0.307 and its list caught 3% more, the
# six other corpora unchanged. Words of 4 letters too (German 0.314) cost DevAI its "save" line, which then
# caught every "saved" across capabilities, and its catch-all's name coverage fell from 0.54 to 0.47.
@lru_cache(maxsize=1 << 16)
def _answers(word: str) -> frozenset[str]:
    """The line words (as _line_word writes them) that a criterion's `word` matches: a line word of more than
    STEM_LETTERS letters matches one of more than STEM_LETTERS sharing its first STEM_LETTERS, one of
    STEM_LETTERS letters any word that begins with it ("Achse": "Achsen"), a shorter one only itself."""
    if is_spaceless(word) or len(word) < STEM_LETTERS:
        return frozenset([word])
    head = word[:STEM_LETTERS]
    return frozenset([head + "+", head + "…"] if len(word) > STEM_LETTERS else [head + "+"])


class _Reading:
    """A criterion as PLACEMENT_INTRO tells a reader to match it: for each of its words in order, the line words
    it matches."""

    def __init__(self, text: str):
        self.text = (text or "").lower()
        self.words = [_answers(w) for w in WORD.findall(self.text)]
        self.seen = frozenset().union(*self.words)

    def has(self, want: list[str]) -> bool:
        """Whether the line words `want` match words of it side by side."""
        return any(all(w in self.words[i + m] for m, w in enumerate(want)) for i in range(len(self.words) - len(want) + 1))

    def spaceless(self, kind: str, form: str) -> bool:
        """A line in a script without spaces, whose words nothing marks: it fits as written, an opening at the start
        of the criterion's first run of letters."""
        if kind == "uses":
            return form.lower() in self.text
        first = WORD.search(self.text)
        return first is not None and self.text[first.start():].startswith(form.lower())


def _fitting(cues: list[tuple[str, str]], texts: list[str]) -> np.ndarray:
    """(n, len(cues)): whether each line, as its (kind, text), fits each criterion. An opening is settled by which
    criteria have each of its words in its place, and a phrase is read only against the criteria holding all its
    words (100,000 criteria read against 40 lines one by one took 11 s)."""
    forms = [[(form, _line_words(form)) for form in (text.split(" / ") if kind == "opens" else [text])]
             for kind, text in cues]  # an opening family "A / B": either form
    wanted = {w for fs in forms for _, want in fs for w in want}
    depth = max((len(want) for (kind, _), fs in zip(cues, forms) if kind == "opens" for _, want in fs), default=0)
    readings = [_Reading(text) for text in texts]
    holding: dict[str, set[int]] = {}
    placed: list[dict[str, set[int]]] = [{} for _ in range(depth)]  # placed[m][w]: the criteria whose word m matches w
    for i, reading in enumerate(readings):
        for word in reading.seen & wanted:
            holding.setdefault(word, set()).add(i)
        for m, words in enumerate(reading.words[:depth]):
            for word in words & wanted:
                placed[m].setdefault(word, set()).add(i)
    out = np.zeros((len(texts), len(cues)), bool)
    for j, (kind, _) in enumerate(cues):
        for form, want in forms[j]:
            if is_spaceless(form):
                rows = [i for i, reading in enumerate(readings) if reading.spaceless(kind, form)]
            elif not want:
                continue
            elif kind == "opens":
                rows = set.intersection(*(placed[m].get(w, set()) for m, w in enumerate(want)))
            else:
                held = set.intersection(*(holding.get(w, set()) for w in want))
                rows = held if len(want) == 1 else [i for i in held if readings[i].has(want)]
            out[list(rows), j] = True
    return out


def first_lines(rules: list[PlacementRule], texts: list[str]) -> np.ndarray:
    """Per criterion, the index in `rules` of the first line that fits it, -1 where none does."""
    fit = _fitting([(r.kind, r.text) for r in rules], texts)
    return np.where(fit.any(axis=1), fit.argmax(axis=1), -1) if len(rules) else np.full(len(texts), -1)


def follow(rules: list[PlacementRule], texts: list[str], primary: np.ndarray, names: list[str],
           bounds: tuple[float, float] = (0.0, 1.0), penalty: np.ndarray | None = None
           ) -> tuple[list[PlacementRule], np.ndarray, np.ndarray]:
    """The tags that follow the list's lines (`rules`, lines only, as placement_rules learned them on `primary`), and the
    list counted on them: each line catches what it fits after the lines above it and places all of it. The
    merge's hard constraints hold for these tags too: while a capability ends up past `bounds` (min, max share)
    where `primary` had it within them, the last line that moves criteria into it (too large) or out of it (too
    small) is dropped. Then the `rest` and `penalties` steps, counted on the tags. Returns the list, the tags, and
    which criteria no line fits."""
    index = {name: c for c, name in enumerate(names)}
    fit = _fitting([(r.kind, r.text) for r in rules], texts)
    caps = np.array([index[r.capability] for r in rules], dtype=int)
    n, k, (low, high) = max(len(texts), 1), len(names), bounds
    before = np.bincount(primary, minlength=k) / n
    keep = list(range(len(rules)))
    while True:
        tags, open_, caught = primary.copy(), np.ones(len(texts), bool), {}
        for j in keep:
            caught[j] = np.flatnonzero(open_ & fit[:, j])
            tags[caught[j]], open_[caught[j]] = caps[j], False
        share = np.bincount(tags, minlength=k) / n
        over = (share > high + 1e-9) & (share > before)
        under = (share < low - 1e-9) & (share < before)
        culprits = [j for j in keep if (over[caps[j]] and (primary[caught[j]] != caps[j]).any())
                    or under[primary[caught[j]]][primary[caught[j]] != caps[j]].any()]
        if not culprits:
            break
        keep.remove(culprits[-1])
    out = [rules[j].model_copy(update={"caught": len(caught[j]), "right": len(caught[j])}) for j in keep if len(caught[j])]
    out += _rest_rule(tags, names, open_)
    return out + (_penalty_rule(tags, penalty, names) if out and penalty is not None else []), tags, open_


def placement_markdown(taxonomy: Taxonomy) -> list[str]:
    """The offline placement rules as a list a reader goes down, with what each one catches."""
    if not taxonomy.placement:
        return []
    unlisted = placement_unlisted(taxonomy)
    return (["", "## Placing a criterion", "", placement_intro(taxonomy), ""]
            + [f"{i}. {placement_cue(r)} → `{r.capability}` ({r.caught} criteria)" for i, r in enumerate(lines(taxonomy), 1)]
            + ["", placement_summary(taxonomy)]
            + (["", UNLISTED_INTRO, ""] + [f"- {item}" for item in unlisted] if unlisted else []))
