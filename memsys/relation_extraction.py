"""Rule-based relations between the entities a sentence names (no LLM).

Within a sentence, each pair of neighbouring mentions (memsys.extraction) is related by the
words between them: "auth.ts depends on token.ts" → depends_on, "X is caused by Y" →
caused_by, "X replaces Y" → supersedes, … (PATTERNS, first match wins); neighbours with no such
words are related_to. The sentence is kept as the relation's fact. JSON episodes are read
through their string values and `key: value` pairs.

A negation between the two ("auth.ts no longer depends on token.ts", "does not use",
"stopped using") makes the relation a denied one (`negated`): the episode closes the live edge
instead of writing it. "A uses B instead of C" (or "…, not C", "rather than C") states A uses B
and denies A uses C. A negated pair with no relation words states nothing either way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import pairwise

from memsys import extraction
from memsys.ids import as_read

PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\b(?:is |are |was )?caused by\b|\bbecause of\b|\bdue to\b", "caused_by"),
    (r"\bdepends? on\b|\brel(?:y|ies) on\b", "depends_on"),
    (r"\b(?:is |are )?(?:a )?part of\b|\bbelongs? to\b", "part_of"),
    (r"\brequires?\b|\bneeds?\b", "requires"),
    (r"\b(?:replaces?|supersedes?)\b", "supersedes"),
    (r"\bcontradicts?\b", "contradicts"),
    (r"\bsimilar to\b|\bresembles?\b", "similar_to"),
    (r"\b(?:fix(?:es)?|resolves?|solves?)\b", "solves"),
    (r"\b(?:causes?|leads? to|triggers?)\b", "causes"),
    (r"\bbuilds? on\b|\bextends?\b", "builds_on"),
    (r"\binstead of\b|\balternative to\b", "alternative_to"),
    (r"\bfollows?\b|\bcomes? after\b", "follows"),
    (r"\b(?:uses?|using|calls?|imports?)\b", "uses"),
)
_COMPILED = tuple((re.compile(p, re.I), r) for p, r in PATTERNS)
_NEGATION = re.compile(
    r"n't\b|\b(?:not|no longer|never|no more|stop(?:ped|s)?|ceased?|quit)\b", re.I
)
_INSTEAD = re.compile(r"^\W*(?:instead of|rather than|in place of|not)\W*$", re.I)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
DEFAULT = "related_to"


@dataclass(frozen=True)
class Found:
    source: extraction.Mention
    target: extraction.Mention
    relation: str
    sentence: str
    negated: bool = False  # the sentence denies it: a live edge of this triple is closed


def relation_between(words: str) -> str:
    for pattern, relation in _COMPILED:
        if pattern.search(words):
            return relation
    return DEFAULT


def readable(content: str) -> str:
    """The text of an episode: JSON becomes `key: value` lines of its scalar values; JSON
    nested deeper than Python reads (`[` 15,000 times: a RecursionError, HTTP 500) or
    walks is read as the text it is."""
    try:
        return _lines(json.loads(content), content)
    except (ValueError, RecursionError):
        return content


def _lines(data: object, content: str) -> str:
    if not isinstance(data, dict | list):
        return content
    lines: list[str] = []

    def walk(value: object, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif value is not None:
            lines.append(f"{key}: {value}" if key else str(value))

    walk(data, "")
    return "\n".join(lines)


def _positioned(sentence: str) -> list[tuple[int, int, extraction.Mention]]:
    spots = []
    lowered = sentence.lower()
    for m in extraction.extract(sentence):
        at = lowered.find(m.name.lower())
        if at >= 0:
            spots.append((at, at + len(m.name), m))
    spots.sort(key=lambda s: s[0])
    kept: list[tuple[int, int, extraction.Mention]] = []
    for spot in spots:  # a mention inside another ("auth" in "auth.ts") is not a neighbour
        if not kept or spot[0] >= kept[-1][1]:
            kept.append(spot)
    return kept


def extract(text: str) -> tuple[list[extraction.Mention], list[Found]]:
    """The entities a text names and the relations its sentences state between them."""
    mentions = {m.key: m for m in extraction.extract(text)}
    found: dict[tuple[str, str, str], Found] = {}
    for sentence in _SENTENCE.split(text):
        sentence = as_read(sentence).strip()  # as its names are: found where they stand
        spots = _positioned(sentence)
        stated: Found | None = None  # the previous pair's relation, for "instead of"
        for (_, end, a), (start, _, b) in pairwise(spots):
            if a.key == b.key:
                continue
            mentions.setdefault(a.key, a)
            mentions.setdefault(b.key, b)
            words = sentence[end:start]
            relation = relation_between(words)
            negated = _NEGATION.search(words) is not None
            if _INSTEAD.match(words) and stated is not None and not stated.negated:
                denied = Found(stated.source, b, stated.relation, sentence, negated=True)
                found.setdefault((stated.source.key, b.key, "~" + stated.relation), denied)
            if negated and relation == DEFAULT:
                stated = None
                continue
            stated = Found(a, b, relation, sentence, negated)
            found.setdefault((a.key, b.key, ("~" if negated else "") + relation), stated)
    return list(mentions.values()), list(found.values())
