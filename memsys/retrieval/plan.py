"""The plan stage: which stores a query goes to (S004 "Query Router") and in which mode.

Each store has S004's own patterns plus a few generalisations of the same idea (marked
`S004` or `general` in the explanation), all matched on the lower-cased query:
- kv — the user's own settings: "what's my X", "my coding style", "do I prefer …";
- relational — named things and lists of them: "which client …", "list all projects",
  "who is …", "how many teams …";
- vector — open questions about a topic: "what about X", "explain …", "how to …";
- graph — causes, dependencies, connections (multi-hop): "what led to X", "why did …",
  "what depends on …", "how is X related to Y";
- event_log — when things happened: "what happened on …", "show timeline for …", and any
  date or range the temporal parser resolves ("last May", "yesterday", "in 2023");
- bayesian — probabilities: "P(X|Y)", "probability of X given Y", "how likely …".

A query may go to several stores at once. A query that matches nothing goes to the default:
hybrid retrieval over the vector store (dense + BM25 + graph + neighbourhood, fused). In
execution mode the bayesian store is skipped unless the query is explicitly probabilistic
("P(X|Y)" or "probability of X given Y"), as S004 asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memsys.retrieval import modes, timephrases

STORES = ("kv", "relational", "vector", "graph", "event_log", "bayesian")
DEFAULT_STORES = ["vector"]
DEFAULT_REASON = "Default: hybrid retrieval over the vector store (no store pattern matched)"

_NOUNS = (
    r"(?:clients?|projects?|entit(?:y|ies)|customers?|compan(?:y|ies)|teams?|people|persons?|"
    r"vendors?|repos?|repositor(?:y|ies)|services?|organi[sz]ations?|contacts?|"
    r"colleagues?|products?|accounts?|partners?)"
)


@dataclass(frozen=True)
class Rule:
    store: str
    pattern: re.Pattern[str]
    origin: str  # "S004" (the seed's own pattern) or "general" (our generalisation)


def _rules(store: str, origin: str, *patterns: str) -> list[Rule]:
    return [Rule(store, re.compile(p), origin) for p in patterns]


RULES: tuple[Rule, ...] = tuple(
    _rules("kv", "S004", r"what'?s my (.*?)\?", r"my (coding|writing|response) (style|tone|format)")
    + _rules(
        "kv",
        "general",
        r"\bwhat(?:'s| is| are|'re) my\b",
        r"\bmy (?:preferred|favou?rite|default|usual|chosen)\b",
        r"\bmy (?:[\w-]+ )?(?:preferences?|settings?|config(?:uration)?|style|tone|format)\b",
        r"\b(?:do|does|did) i (?:prefer|like|want|use)\b",
        r"\bhow do i (?:like|prefer|want)\b",
        r"\bwhich (?:[\w-]+ ){0,3}do i (?:prefer|like|use|want)\b",
        r"\bi (?:usually|normally) (?:use|prefer|want)\b",
        # An agent asks about its user in the third person ("which editor does the user
        # use?", "the user's preferred theme"): the same settings.
        r"\b(?:do|does|did) (?:the |my )?user (?:prefer|like|want|use)\b",
        r"\bwhat(?:'s| is| are|'re) (?:the |my )?user'?s\b",
        r"\b(?:the |my )?user'?s (?:preferred|favou?rite|default|usual|chosen)\b",
        r"\b(?:the |my )?user'?s (?:[\w-]+ )?(?:preferences?|settings?|config(?:uration)?)\b",
        r"\bthe user (?:usually|normally) (?:uses|prefers|wants)\b",
    )
    + _rules(
        "relational",
        "S004",
        r"what (client|project|entity) (.*?)\?",
        r"list all (clients|projects|entities)",
    )
    + _rules(
        "relational",
        "general",
        rf"\b(?:what|which) {_NOUNS}\b",
        rf"\b(?:list|show|name|enumerate|give me)\s+(?:me\s+)?(?:all|every|each|the)\s+"
        rf"(?:of (?:the|our|my)\s+)?(?:[\w-]+ )?{_NOUNS}\b",
        rf"\bhow many {_NOUNS}\b",
        r"\bwho (?:is|are|was|were|owns|maintains|leads|runs|works)\b",
        r"\bwhat do (?:we|i) know about\b",
        r"\b(?:contact|owner|maintainer) (?:of|for)\b",
    )
    + _rules("vector", "S004", r"what about (.*?)\?", r"explain (.*)", r"how to (.*)")
    + _rules(
        "vector",
        "general",
        r"\btell me (?:more )?about\b",
        r"\b(?:describe|summari[sz]e|overview of)\b",
        r"\bhow (?:do|can|should|would) (?:i|we|you|one) (?!(?:like|prefer|want)\b)",
        r"\banything (?:on|about)\b",
        r"\bnotes? (?:on|about)\b",
    )
    + _rules(
        "graph",
        "S004",
        r"what led to (.*?)\?",
        r"what caused (.*?)\?",
        r"trace (.*?) back to",
    )
    + _rules(
        "graph",
        "general",
        r"\b(?:led|leads|leading) to\b",
        r"\bwhat (?:caused|causes|triggered|broke)\b",
        r"\b(?:root cause|caused by|because of what|the reason for|reasons? behind)\b",
        r"\bwhy (?:did|does|do|is|was|were|are)\b",
        r"\bwhat (?:depends|relies|builds) on\b",
        r"\b(?:depend|depends|dependent|dependencies) (?:on|of)\b",
        r"\bhow (?:is|are|was|were) .{1,80}? (?:related|connected|linked|tied) to\b",
        r"\b(?:connection|relationship|link) between\b",
        r"\b(?:consequences?|knock-on effects?|downstream effects?) of\b",
        r"\bwhat (?:came|resulted|followed) (?:of|from)\b",
        r"\btrace (?:back|the)\b",
    )
    + _rules(
        "event_log",
        "S004",
        r"what happened (on|during|between) (.*?)\?",
        r"show timeline for (.*)",
    )
    + _rules(
        "event_log",
        "general",
        r"\bwhat happened\b",
        r"\btimeline\b",
        r"\bwhen (?:did|was|were|have|has)\b",
        r"\bwhat (?:did|have) (?:i|we|you|they) (?:do|done|change|changed|work(?:ed)? on|ship|"
        r"shipped|decide|decided)\b",
        r"\b(?:history|log|sequence) of (?:events|changes)\b",
        r"\bin what order\b",
        r"\bchangelog\b",
    )
    + _rules(
        "bayesian",
        "S004",
        # S004's P(X|Y) as a word of its own: "grep(error|warn)" is a regex, not a probability
        r"\bp\((.*?)\|(.*?)\)",
        r"probability of (.*?) given (.*)",
        r"what's the likelihood (.*)",
    )
    + _rules(
        "bayesian",
        "general",
        r"\b(?:probability|likelihood)\b",
        r"\bhow (?:likely|probable)\b",
        r"\b(?:chances?|odds) (?:of|that|are)\b",
        r"\bhow often does .{1,80}? when\b",
    )
)
# "Explicitly probabilistic": the only bayesian queries execution mode keeps.
EXPLICIT_PROBABILITY = re.compile(r"\bp\((.*?)\|(.*?)\)|probability of (.*?) given (.*)")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"'})


@dataclass
class Routing:
    """The plan for one query: its mode, the stores to ask, and why."""

    query: str
    mode: str
    mode_confidence: float
    mode_given: bool
    stores: list[str]
    matched: list[dict[str, str]] = field(default_factory=list)
    time_expressions: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def default(self) -> bool:
        return not self.matched

    @property
    def reasoning(self) -> str:
        if not self.matched:
            return DEFAULT_REASON
        parts = [f"{m['store']}: {m['origin']} pattern '{m['pattern']}'" for m in self.matched]
        parts += [
            f"{s}: skipped in execution mode (not explicitly probabilistic)" for s in self.dropped
        ]
        return "; ".join(parts)

    def explain(self) -> dict[str, Any]:
        """S004's explain_routing shape: query, mode, stores, reasoning."""
        return {
            "query": self.query,
            "mode": self.mode,
            "stores": self.stores,
            "reasoning": self.reasoning,
        }


def normalise(query: str) -> str:
    return " ".join(query.translate(_QUOTES).lower().split())


def matches(query: str) -> list[Rule]:
    """Every rule the query matches (the first per store and origin is enough to explain)."""
    text = normalise(query)
    return [r for r in RULES if r.pattern.search(text)]


def route(query: str, mode: str | None = None) -> Routing:
    """Plan `query`: mode (given, else detected) and the stores to ask, in S004's order."""
    detected = modes.detect(query)
    if mode is not None and mode not in modes.MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(modes.MODES)}")
    chosen = mode or detected.mode
    confidence = 1.0 if mode is not None else detected.confidence
    matched: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for rule in matches(query):
        if (rule.store, rule.origin) in seen:
            continue
        seen.add((rule.store, rule.origin))
        matched.append(
            {"store": rule.store, "origin": rule.origin, "pattern": rule.pattern.pattern}
        )
    times = [e.text for e in timephrases.find(query)]
    if times and not any(m["store"] == "event_log" for m in matched):
        matched.append(
            {"store": "event_log", "origin": "general", "pattern": f"time expression {times[0]!r}"}
        )
    stores = [s for s in STORES if any(m["store"] == s for m in matched)]
    dropped: list[str] = []
    if (
        chosen == "execution"
        and "bayesian" in stores
        and not EXPLICIT_PROBABILITY.search(normalise(query))
    ):
        stores.remove("bayesian")
        dropped.append("bayesian")
    return Routing(
        query=query,
        mode=chosen,
        mode_confidence=confidence,
        mode_given=mode is not None,
        stores=stores or list(DEFAULT_STORES),
        matched=matched,
        time_expressions=times,
        dropped=dropped,
    )


def explain_routing(query: str, mode: str | None = None) -> dict[str, Any]:
    """S004's explain_routing: the stores chosen for `query` and the patterns that chose them."""
    return route(query, mode).explain()
