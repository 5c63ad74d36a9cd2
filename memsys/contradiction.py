"""Does one statement contradict another? Rules, no LLM (memory_detect_contradictions,
memory_check_supersedes). Two statements already judged similar contradict when:

1. negation: one negates what the other asserts ("X supports Y" / "X does not support Y");
2. opposite preference: the same words around an antonym pair (prefer/avoid, like/dislike,
   enable/disable, always/never, allow/forbid, …);
3. changed value: the same subject and attribute with another value ("the timeout is 30 s" /
   "the timeout is 60 s", "User prefers pytest" / "User prefers unittest"), the same sentence
   with one word changed ("Deploys go out on Tuesdays" / "… on Fridays"), or with other numbers.

What it cannot see: paraphrased opposition without shared words ("we moved off Postgres" vs
"the database is Postgres"), sarcasm, conditions ("only on Fridays"), or world knowledge.
"""

from __future__ import annotations

import re

NEGATORS = {
    "not", "no", "never", "none", "nobody", "nothing", "without", "cannot", "can't", "don't",
    "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't", "shouldn't",
    "mustn't", "hasn't", "haven't", "neither", "nor",
}  # fmt: skip
ANTONYMS = (
    ("prefer", "avoid"), ("prefers", "avoids"), ("like", "dislike"), ("likes", "dislikes"),
    ("love", "hate"), ("loves", "hates"), ("enable", "disable"), ("enabled", "disabled"),
    ("always", "never"), ("allow", "forbid"), ("allowed", "forbidden"), ("allow", "deny"),
    ("true", "false"), ("on", "off"), ("yes", "no"), ("include", "exclude"),
    ("accept", "reject"), ("increase", "decrease"), ("success", "failure"),
    ("works", "fails"), ("required", "optional"), ("sync", "async"),
)  # fmt: skip
_OPPOSITE: dict[str, set[str]] = {}
for _a, _b in ANTONYMS:
    _OPPOSITE.setdefault(_a, set()).add(_b)
    _OPPOSITE.setdefault(_b, set()).add(_a)
STOP = {"the", "a", "an", "to", "of", "in", "for", "and", "or", "is", "are", "be", "do", "does"}
_WORD = re.compile(r"[a-z0-9']+(?:[._-][a-z0-9']+)*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_ASSIGN = re.compile(
    r"^(?P<subject>.{2,80}?)\s+(?P<verb>is|are|was|equals|=|:|should be|must be|"
    r"prefers?|uses?|set to|runs on|defaults to)\s+(?P<value>.+)$"
)


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _words(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower().replace("n't", " not"))]


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _assignment(text: str) -> tuple[str, str] | None:
    match = _ASSIGN.match(" ".join(text.lower().strip().rstrip(".!").split()))
    if match is None:
        return None
    return f"{match['subject']} {match['verb']}", match["value"].strip()


def reason(a: str, b: str) -> str | None:
    """Why `b` contradicts `a`, or None when no rule sees an opposition."""
    wa, wb = _words(a), _words(b)
    na, nb = NEGATORS & set(wa), NEGATORS & set(wb)
    core_a = set(wa) - NEGATORS - STOP
    core_b = set(wb) - NEGATORS - STOP
    if bool(na) != bool(nb) and _overlap(core_a, core_b) >= 0.6:
        return "One states the negation of the other"
    for word in core_a:
        for opposite in _OPPOSITE.get(word, ()):
            if opposite in core_b and word not in core_b:
                rest = _overlap(core_a - {word}, core_b - {opposite})
                if rest >= 0.5:
                    return f"States opposite preference ({word} vs {opposite})"
    left, right = _assignment(a), _assignment(b)
    if left and right and left[0] == right[0] and left[1] != right[1]:
        return f"Changed value for '{left[0]}': {left[1]} → {right[1]}"
    if len(wa) == len(wb) >= 3:
        changed = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
        if len(changed) == 1 and changed[0][0] not in STOP:
            return f"Changed value: {changed[0][0]} → {changed[0][1]}"
    same_shape = _NUMBER.sub("#", a.lower()) == _NUMBER.sub("#", b.lower())
    if same_shape and _NUMBER.findall(a) != _NUMBER.findall(b):
        return "Same statement with a different number"
    return None
