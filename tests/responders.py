"""Answers a Gemini-shaped test server gives, read off our own prompts the way a model would.

They are deliberately simple but always valid, so a test can break exactly one thing at a time.
"""

from __future__ import annotations

import hashlib
import html
import re

from taxonomy.config import LabelRules
from taxonomy.validate import stem_word

CRITERION = re.compile(r'<criterion idx="(\d+)"[^>]*>\n(?:\(part of: [^\n]*\)\n)?(.*?)\n</criterion>', re.S)
CANDIDATE = re.compile(r"^- `([a-z_]+)`: ([\d.]+)% \((\d+) criteria\)", re.M)
TAXONOMY_NAME = re.compile(r"^### `([a-z_]+)`", re.M)
MEMBER = re.compile(r'<label freq="\d+">([a-z_]+)</label>')

CHECKS = {
    ("metric", "score", "accuracy", "loss", "%", "result"): "reported_metric_value_recomputation_capability",
    ("implement", "code", "function", "class", "model"): "implementation_logic_inspection_capability",
    ("dataset", "data", "load"): "input_data_setup_verification_capability",
    ("save", "file", "directory", "log"): "artifact_presence_confirmation_capability",
    ("plot", "figure", "visual", "chart"): "visual_output_inspection_capability",
}
FALLBACK = "criterion_requirement_interpretation_capability"


def _stable(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def criteria(prompt: str) -> list[tuple[int, str]]:
    return [(int(i), html.unescape(t.replace("&lt;", "<").replace("&gt;", ">"))) for i, t in CRITERION.findall(prompt)]


def quote(text: str) -> str:
    """Four words verbatim, starting at the first word that is not a short function word."""
    words = text.split()
    start = next((i for i, w in enumerate(words) if len(re.sub(r"\W", "", w)) >= 5), 0)
    start = min(start, max(len(words) - 4, 0))
    return " ".join(words[start : start + 4]).replace('"', "")


FORBIDDEN = set(LabelRules().forbidden_tokens) | set(LabelRules().agent_verbs)


def topic_words(text: str) -> list[str]:
    words = [
        stem_word(w) for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 5 and not any(f in w for f in FORBIDDEN)
    ]
    # One order and one form, as a model heeding "distinct within this category" would: a word
    # and its inflections always give the same name.
    return sorted(dict.fromkeys(words))[:2]


def discovery_item(i: int, text: str) -> dict:
    """Like a model's labels: a kind of check, made specific by what the criterion is about."""
    lowered = text.lower()
    kinds = [label for keys, label in CHECKS.items() if any(k in lowered for k in keys)][:2] or [FALLBACK]
    labels = ["_".join(topic_words(text) + [kinds[0]])] + kinds[1:]
    return {
        "criterion_idx": i,
        "capabilities": labels,
        "rationale": f'the verifier needs to check "{quote(text)}" in the deliverable',
    }


def discovery(prompt: str) -> dict:
    return {"items": [discovery_item(i, t) for i, t in criteria(prompt)]}


NEARBY = re.compile(r'<nearby cluster="(\d+)">(.*?)</nearby>')
NEARBY_LABEL = re.compile(r"<label>([a-z_]+)</label>")


def canonicalize(prompt: str) -> dict:
    """Named after its most frequent label; one boundary against each of the first two nearby clusters,
    naming that cluster's first label, as the prompt asks."""
    members = MEMBER.findall(prompt)
    name = members[0] if members else FALLBACK
    nearby = [NEARBY_LABEL.findall(labels)[0] for _, labels in NEARBY.findall(prompt)][:2]
    what = name.removesuffix("_capability").replace("_", " ")
    # Card texts as long as the prompt asks (1-2 sentences, 1 sentence, 1-2 sentences) and boundaries that say
    # where the line lies, as a model writes them: the merge prompt quotes them, and prompt sizes follow.
    return {
        "name": name,
        "description": (
            f"Checks of the kind `{name}` names: the verifier reads the deliverable for the {what} the criterion "
            "asks about and decides whether what it finds matches what the criterion states, without trusting the "
            "agent's own summary."
        ),
        "diagnostic_signal": (
            f"The trace shows the verifier locating the {what} evidence in the deliverable and quoting it before its "
            "verdict, not accepting a claim it never opened."
        ),
        "example_pattern": (
            f"Given a criterion about {what}, the verifier opens the delivered files, finds the passage or value that "
            "settles it, and compares it with the requirement before deciding."
        ),
        "non_examples": [
            f"if the criterion is about the checks that cluster's labels name rather than {what}, prefer `{label}`"
            for label in nearby
        ],
    }


NEAREST = re.compile(r"^- `([a-z_]+)`: .* Nearest: (.*)\.$", re.M)
BOUNDARY_CAP = re.compile(r"^### `([a-z_]+)`\n(?:- .*\n)*?- Nearest siblings: (.*)$", re.M)


def boundaries(prompt: str) -> dict:
    """Against the first two listed siblings of each capability asked about, as the prompt asks."""
    return {
        "capabilities": [
            {
                "name": name,
                "non_examples": [
                    f"if the criterion is mostly about what {s} covers, prefer `{s}`"
                    for s in re.findall(r"`([a-z_]+)`", listed)[:2]
                ],
            }
            for name, listed in BOUNDARY_CAP.findall(prompt)
        ]
    }


CARD_BLOCK = re.compile(r"^### Capability (\d+): `([a-z_]+)`\n(?:- .*\n)*?- Members \(\d+\): (.*)$", re.M)


def cards(prompt: str) -> dict:
    """Each card asked about renamed after a member no other capability is named after, with its fields filled."""
    kept = set(re.findall(r"`([a-z_]+)`", re.search(r"keep their names: (.*)\.\n", prompt)[1]))
    out = []
    for idx, name, members in CARD_BLOCK.findall(prompt):
        new = next(m for m in re.findall(r"`([a-z_]+)`", members) if m not in kept)
        kept.add(new)
        out.append(
            {
                "capability_idx": int(idx),
                "name": new,
                "description": f"Everything `{new}` covers, read from the deliverable.",
                "diagnostic_signal": "The trace shows the verifier opening the evidence.",
                "example_pattern": "The verifier checks the value.",
                "needs_native_inspection": False,
                "needs_native_inspection_reason": "Plain text keeps what it checks.",
                "needs_domain_conventions": False,
                "needs_domain_conventions_reason": "The criterion states what it needs.",
            }
        )
    return {"capabilities": out}


def merge(prompt: str, n_caps: int = 9) -> dict:
    """Greedy balanced grouping: biggest candidate to the currently smallest group. Boundaries are
    not asked for here: they come in their own call once membership is settled."""
    candidates = [(name, float(share)) for name, share, _ in CANDIDATE.findall(prompt)]
    n_caps = min(n_caps, len(candidates))
    groups: list[list[tuple[str, float]]] = [[] for _ in range(n_caps)]
    for name, share in sorted(candidates, key=lambda c: -c[1]):
        min(groups, key=lambda g: sum(s for _, s in g)).append((name, share))
    return {
        "capabilities": [
            {
                # Card texts as long as the prompt asks (1-2 sentences, 1 sentence, 1-2 sentences), as a model
                # writes them.
                "name": g[0][0],
                "description": (
                    f"Everything `{g[0][0]}` covers: the verifier reads the deliverable and decides whether it shows "
                    "what the criterion states."
                ),
                "diagnostic_signal": (
                    "The trace shows the verifier opening the evidence the criterion names and quoting it before it "
                    "decides."
                ),
                "example_pattern": (
                    "The verifier opens the delivered file, finds the value the criterion names, and checks it against "
                    "the request."
                ),
                "needs_native_inspection": _stable(g[0][0]) % 2 == 0,
                "needs_native_inspection_reason": (
                    "The check reads properties of the deliverable that plain text loses."
                ),
                "needs_domain_conventions": _stable(g[0][0]) % 3 == 0,
                "needs_domain_conventions_reason": "The criterion relies on conventions it does not state.",
                "member_input_names": [n for n, _ in g],
            }
            for g in groups
        ]
    }


REGROUP_CAP = re.compile(r"^- `([a-z_]+)` \([\d.]+% in all\):$", re.M)
REGROUP_MEMBER = re.compile(r"^  - `([a-z_]+)`: ([\d.]+)% \(\d+ criteria\)$", re.M)


def regroup(prompt: str) -> dict:
    """A membership re-ask answered as a model would: the same capability names (at most as many as the rules
    allow), the members balanced anew across them by share (the biggest member to the smallest group). Cards
    are kept by name."""
    high = int(re.search(r"between \d+ and (\d+) capabilities", prompt)[1])
    names = REGROUP_CAP.findall(prompt)[:high]  # too many: the first keep their names, the others' members go to them
    groups: list[list[tuple[str, float]]] = [[] for _ in names]
    for name, share in sorted(((n, float(s)) for n, s in REGROUP_MEMBER.findall(prompt)), key=lambda m: -m[1]):
        min(groups, key=lambda g: sum(s for _, s in g)).append((name, share))
    return {"capabilities": [{"name": cap, "member_input_names": [n for n, _ in g]} for cap, g in zip(names, groups)]}


def tagging(prompt: str) -> dict:
    names = TAXONOMY_NAME.findall(prompt)
    items = []
    for i, text in criteria(prompt):
        first = _stable(text) % len(names)
        items.append(
            {"criterion_idx": i, "capabilities": list(dict.fromkeys([names[first], names[(first + 1) % len(names)]]))}
        )
    return {"items": items}


def guidance(prompt: str) -> dict:
    return {
        "summary": "Check the evidence directly.",
        "procedure": ["open the deliverable", "locate the value", "compare"],
        "evidence": ["the value in the file", "the source"],
        "pitfalls": ["trusting the agent's summary", "rounding"],
    }


SPLIT_PART = re.compile(r"^Part (\d+) \([\d.]+% of criteria\):\n  - `([a-z_]+)`", re.M)


def split_names(prompt: str) -> dict:
    """Each part named after its first micro-capability, as a model might."""
    parts = SPLIT_PART.findall(prompt)
    return {
        "parts": [
            {
                "part_idx": int(i),
                "name": name,
                "description": f"Checks of the kind `{name}` names.",
                "diagnostic_signal": "The verifier opens the evidence.",
                "example_pattern": "The verifier checks the value.",
                "non_examples": [],
            }
            for i, name in parts
        ]
    }


def kind(prompt: str) -> str:
    if "Criteria to annotate" in prompt:
        return "discover"
    if "ONE cluster" in prompt:
        return "canonicalize"
    if "Your previous grouping" in prompt:
        return "regroup"
    if "Merge near-duplicates" in prompt:
        return "merge"
    if "drawing the boundaries" in prompt:
        return "boundaries"
    if "Capabilities to rewrite:" in prompt:
        return "cards"
    if "Criteria to tag" in prompt:
        return "tag"
    if "judge guidance" in prompt:
        return "guidance"
    if "splitting one capability" in prompt:
        return "split"
    raise AssertionError("unknown prompt kind")


ANSWER = {
    "discover": discovery,
    "canonicalize": canonicalize,
    "merge": merge,
    "regroup": regroup,
    "boundaries": boundaries,
    "cards": cards,
    "tag": tagging,
    "guidance": guidance,
    "split": split_names,
}


def model(req) -> dict:
    """The default well-behaved model: re-asks are answered from the original request (the first turn)."""
    prompt = req.texts[0]
    return ANSWER[kind(prompt)](prompt)


# What a capable model wrote into each field on a real run (a 290-criterion rubric: naming answers of about
# 400 tokens, merge answers of about 3,000): field -> characters. The test server's own answers are shorter.
REAL_FIELD_CHARS = {
    "rationale": 200,
    "description": 360,
    "diagnostic_signal": 250,
    "example_pattern": 360,
    "non_example": 210,
    "needs_native_inspection_reason": 160,
    "needs_domain_conventions_reason": 160,
}
_FILLER = (
    "the verifier reads the delivered files closely and compares what they state with what the criterion requires, "
    "quoting the passage or value that settles it rather than trusting the agent's own account of its work; "
)


def _lengthen(text: str, chars: int) -> str:
    """`text` grown to about `chars` characters with plain clauses, as a model's fuller sentence."""
    if len(text) >= chars:
        return text
    more = (_FILLER * (chars // len(_FILLER) + 1))[: max(0, chars - len(text) - 2)].rstrip(" ;,")
    return f"{text.rstrip('.')}: {more}."


def _realistic(value):
    """Every free-text field of an answer at the length a real model writes it."""
    if isinstance(value, list):
        return [_realistic(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, v in value.items():
        if key in REAL_FIELD_CHARS and isinstance(v, str):
            out[key] = _lengthen(v, REAL_FIELD_CHARS[key])
        elif key == "non_examples":
            out[key] = [
                t.replace(
                    ", prefer `", f", {_FILLER[: REAL_FIELD_CHARS['non_example'] - len(t)].rstrip(' ;,')}, prefer `", 1
                )
                for t in v
            ]
        else:
            out[key] = _realistic(v)
    return out


def realistic_model(req) -> dict:
    """The default model with every field as long as a real model writes it: for sizing, not behaviour."""
    return _realistic(model(req))


def boundary_fault_model():
    """(respond, faulted): the default model, except that its first boundary answer draws one
    capability's line against a capability that is not among its nearest siblings; `faulted`
    receives that capability's name."""
    faulted: list[str] = []

    def respond(req):
        answer = model(req)
        if kind(req.texts[0]) == "boundaries" and not faulted:
            caps = answer["capabilities"]
            listed = set(re.findall(r"Nearest siblings: (.*)", req.texts[0])[0].replace("`", "").split(", "))
            stranger = next((c["name"] for c in caps[1:] if c["name"] not in listed), None)
            if stranger:
                caps[0]["non_examples"] = [f"if the criterion is about something else entirely, prefer `{stranger}`"]
                faulted.append(caps[0]["name"])
        return answer

    return respond, faulted
