"""Mode detection (S004 "Mode Awareness"): execution, planning or brainstorming, with a
confidence.

- execution wants precision: do or look up one thing now ("fix …", "run …", "what is the
  port of …", "give me the exact command");
- planning wants breadth in order: steps, priorities, schedules, approaches ("plan the
  migration", "what should we do first", "roadmap for Q3");
- brainstorming wants range: ideas, alternatives, what-ifs ("brainstorm names", "what if we
  dropped Redis", "other ways to …").

Each mode has cue patterns with a weight; the mode with the highest total wins. A query with
no cue is a plain question of fact, which is execution (precision), at a low confidence. The
confidence grows with the winner's lead over the runner-up: a query with cues of two modes
("plan some ideas") is uncertain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MODES = ("execution", "planning", "brainstorming")
DEFAULT_MODE = "execution"
DEFAULT_CONFIDENCE = 0.5

_IMPERATIVE = (
    r"^(?:please\s+)?(?:fix|run|deploy|apply|set|use|write|implement|add|remove|delete|"
    r"update|rename|install|configure|restart|revert|rollback|roll back|merge|commit|push|"
    r"patch|debug|bump|upgrade|format|lint|build|execute|open|create|generate|show me|"
    r"give me|get me|print|copy|move|enable|disable|turn on|turn off|grant|rotate)\b"
)

CUES: dict[str, tuple[tuple[str, float], ...]] = {
    "execution": (
        (_IMPERATIVE, 1.5),
        (r"\b(?:exact|exactly|precise|precisely|specific)\b", 1.0),
        (r"\b(?:right now|immediately|asap)\b", 1.0),
        (r"\bthe (?:command|flag|value|port|path|version|url|setting|syntax|error)\b", 1.0),
        (r"\bwhat(?:'s| is| are) (?:the|my|our)\b", 0.5),
        (r"\bhow do i (?:run|install|configure|set|fix|use|call|start|stop|reset)\b", 1.0),
    ),
    "planning": (
        (r"\bplan(?:s|ning|ned)?\b", 1.5),
        (r"\b(?:roadmap|milestones?|strategy|strategies|schedule|timeline for the)\b", 1.5),
        (r"\bprioriti[sz]e|priorities\b", 1.5),
        (r"\b(?:next|coming|upcoming) (?:sprint|quarter|release|month|phase|steps?)\b", 1.5),
        (r"\bsteps? (?:to|for|needed)\b", 1.0),
        (r"\bhow (?:should|shall) (?:we|i)\b", 1.5),
        (r"\bwhat should (?:we|i) do (?:first|next)\b", 1.5),
        (r"\b(?:in what order|sequence the|break (?:it |this )?down|phases?|estimate)\b", 1.0),
        (r"\b(?:approach|trade-?offs?|migration path|rollout|organi[sz]e the)\b", 1.0),
        (r"\b(?:before we|ahead of|prepare for|deadline)\b", 1.0),
    ),
    "brainstorming": (
        (r"\bbrainstorm(?:ing)?\b", 2.0),
        (r"\bideas?\b", 1.5),
        (r"\bwhat if\b", 1.5),
        (r"\balternatives?\b|\bother (?:ways|approaches|options)\b", 1.5),
        (r"\b(?:creative|creatively|imagine|unconventional|novel|wild|crazy|fresh)\b", 1.5),
        (r"\b(?:could we|might we|what could)\b", 1.0),
        (r"\b(?:ways to|options for|possibilities|possible ways)\b", 1.0),
        (r"\b(?:come up with|think of|explore|riff on|inspiration|inspire)\b", 1.5),
        (r"\b(?:suggest|suggestions?)\b", 1.0),
    ),
}
_COMPILED = {m: [(re.compile(p), w) for p, w in cues] for m, cues in CUES.items()}
_QUOTES = str.maketrans({"’": "'", "‘": "'"})


@dataclass(frozen=True)
class Detected:
    mode: str
    confidence: float
    scores: dict[str, float]
    cues: list[str]


def detect(query: str) -> Detected:
    """The query's mode and how sure the cues make it (DEFAULT_CONFIDENCE when none)."""
    text = " ".join(query.translate(_QUOTES).lower().split())
    scores = dict.fromkeys(MODES, 0.0)
    cues: list[str] = []
    for mode, patterns in _COMPILED.items():
        for pattern, weight in patterns:
            if pattern.search(text):
                scores[mode] += weight
                cues.append(f"{mode}: '{pattern.pattern}'")
    ranked = sorted(MODES, key=lambda m: (-scores[m], MODES.index(m)))
    best, second = scores[ranked[0]], scores[ranked[1]]
    if best == 0:
        return Detected(DEFAULT_MODE, DEFAULT_CONFIDENCE, scores, cues)
    # One clear cue ≈ 0.75; a lead of several cues approaches 1; a tie is 0.5.
    confidence = 0.5 + 0.5 * (best - second) / (best + 0.5)
    return Detected(ranked[0], round(min(confidence, 0.99), 3), scores, cues)
