"""Answers a Gemini-shaped test server gives, read off our own prompts the way a model would.

They are deliberately simple but always valid, so a test can break exactly one thing at a time.
"""
from __future__ import annotations

import hashlib
from collections import Counter
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
    words = [stem_word(w) for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 5 and not any(f in w for f in FORBIDDEN)]
    # One order and one form, as a model heeding "distinct within this category" would: a word
    # and its inflections always give the same name.
    return sorted(dict.fromkeys(words))[:2]


def discovery_item(i: int, text: str) -> dict:
    """Like a model's labels: a kind of check, made specific by what the criterion is about."""
    lowered = text.lower()
    kinds = [label for keys, label in CHECKS.items() if any(k in lowered for k in keys)][:2] or [FALLBACK]
    labels = ["_".join(topic_words(text) + [kinds[0]])] + kinds[1:]
    return {"criterion_idx": i, "capabilities": labels, "rationale": f'the verifier needs to check "{quote(text)}" in the deliverable'}


def discovery(prompt: str) -> dict:
    return {"items": [discovery_item(i, t) for i, t in criteria(prompt)]}


def canonicalize(prompt: str) -> dict:
    members = MEMBER.findall(prompt)
    name = members[0] if members else FALLBACK
    return {
        "name": name, "description": f"Checks of the kind `{name}` names.",
        "diagnostic_signal": "The trace shows the verifier opening the evidence.",
        "example_pattern": "The verifier opens the deliverable and compares.", "non_examples": [],
    }


NEAREST = re.compile(r"^- `([a-z_]+)`: .* Nearest: (.*)\.$", re.M)
SIBLING_HINT = re.compile(r"`([a-z_]+)`'s non_examples name none of its nearest siblings \(([^)]*)\)")


def merge(prompt: str, n_caps: int = 9, reask: str = "") -> dict:
    """Greedy balanced grouping: biggest candidate to the currently smallest group. Each capability
    draws boundaries against the next two; a re-ask naming its nearest siblings is heeded, as a
    model reading the violations would."""
    candidates = [(name, float(share)) for name, share, _ in CANDIDATE.findall(prompt)]
    n_caps = min(n_caps, len(candidates))
    groups: list[list[tuple[str, float]]] = [[] for _ in range(n_caps)]
    for name, share in sorted(candidates, key=lambda c: -c[1]):
        min(groups, key=lambda g: sum(s for _, s in g)).append((name, share))
    names = [g[0][0] for g in groups]
    hinted = {name: re.findall(r"`([a-z_]+)`", listed) for name, listed in SIBLING_HINT.findall(reask)}
    owner = {n: g[0][0] for g in groups for n, _ in g}
    nearest = {name: re.findall(r"`([a-z_]+)`", listed) for name, listed in NEAREST.findall(prompt)}

    def boundaries(name: str) -> list[str]:
        """Against the groups holding its members' nearest candidates, most often first."""
        members = next(g for g in groups if g[0][0] == name)
        votes = Counter(owner[n] for m, _ in members for n in nearest.get(m, []) if n in owner and owner[n] != name)
        i = names.index(name)
        others = hinted.get(name) or [n for n, _ in votes.most_common(2)] or [names[(i + d) % len(names)] for d in (1, 2) if len(names) > d]
        return [f"if the criterion is about what {other} covers, prefer `{other}`" for other in dict.fromkeys(others[:2]) if other != name]

    return {"capabilities": [
        {
            # Card texts as long as the prompt asks (1-2 sentences, 1 sentence, 1-2 sentences), as a model writes them.
            "name": g[0][0], "description": f"Everything `{g[0][0]}` covers: the verifier reads the deliverable and decides whether it shows what the criterion states.",
            "diagnostic_signal": "The trace shows the verifier opening the evidence the criterion names and quoting it before it decides.",
            "example_pattern": "The verifier opens the delivered file, finds the value the criterion names, and checks it against the request.",
            "non_examples": boundaries(g[0][0]),
            "needs_native_inspection": _stable(g[0][0]) % 2 == 0,
            "needs_native_inspection_reason": "The check reads properties of the deliverable that plain text loses.",
            "needs_domain_conventions": _stable(g[0][0]) % 3 == 0,
            "needs_domain_conventions_reason": "The criterion relies on conventions it does not state.",
            "member_input_names": [n for n, _ in g],
        }
        for g in groups
    ]}


def tagging(prompt: str) -> dict:
    names = TAXONOMY_NAME.findall(prompt)
    items = []
    for i, text in criteria(prompt):
        first = _stable(text) % len(names)
        items.append({"criterion_idx": i, "capabilities": [names[first], names[(first + 1) % len(names)]]})
    return {"items": items}


def guidance(prompt: str) -> dict:
    return {"summary": "Check the evidence directly.", "procedure": ["open the deliverable", "locate the value", "compare"],
            "evidence": ["the value in the file", "the source"], "pitfalls": ["trusting the agent's summary", "rounding"]}


SPLIT_PART = re.compile(r"^Part (\d+) \([\d.]+% of criteria\):\n  - `([a-z_]+)`", re.M)


def split_names(prompt: str) -> dict:
    """Each part named after its first micro-capability, as a model might."""
    parts = SPLIT_PART.findall(prompt)
    return {"parts": [
        {"part_idx": int(i), "name": name, "description": f"Checks of the kind `{name}` names.",
         "diagnostic_signal": "The verifier opens the evidence.", "example_pattern": "The verifier checks the value.",
         "non_examples": []}
        for i, name in parts
    ]}


def kind(prompt: str) -> str:
    if "Criteria to annotate" in prompt:
        return "discover"
    if "ONE cluster" in prompt:
        return "canonicalize"
    if "Merge near-duplicates" in prompt:
        return "merge"
    if "Criteria to tag" in prompt:
        return "tag"
    if "judge guidance" in prompt:
        return "guidance"
    if "splitting one capability" in prompt:
        return "split"
    raise AssertionError("unknown prompt kind")


ANSWER = {"discover": discovery, "canonicalize": canonicalize, "merge": merge, "tag": tagging, "guidance": guidance,
          "split": split_names}


def model(req) -> dict:
    """The default well-behaved model: re-asks are answered from the original request (the first turn);
    a merge re-ask also reads the siblings the validator named."""
    prompt = req.texts[0]
    if kind(prompt) == "merge":
        return merge(prompt, reask=req.texts[-1] if len(req.texts) > 1 else "")
    return ANSWER[kind(prompt)](prompt)
