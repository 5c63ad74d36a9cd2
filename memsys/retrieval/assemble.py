"""The assemble stage (S004 "curated core", S002 snippets): what a query hands back.

The ranked items are split into a curated core (`core` items, 5 by default) and an extended
context whose size depends on the mode (S004: execution 15, planning 25, brainstorming 30).
Every returned item carries a snippet of at most 200 characters (S002 "SNIPPET
<max_200_chars>"); the output text is the core items' full content (S004 format_output),
each cut to its snippet when the whole does not fit. The token budget covers everything
returned — the output plus every snippet — and is never exceeded: an item too large for what
is left is skipped (a smaller one further down may still fit). `left_out` counts what the
budget cut: the items a budget without limit would have returned (the first core + extended
of the ranking) that this answer does not hold.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from memsys.tokens import count_tokens

EXTENDED = {"execution": 15, "planning": 25, "brainstorming": 30}
SNIPPET_CHARS = 200
SEPARATOR = "\n\n"


@dataclass
class Item:
    """One ranked candidate: a chunk, or a structured answer (a preference, an entity)."""

    id: str
    source: str  # memory | document | preference | entity
    namespace: str
    content: str
    score: float
    happened_at: datetime | None = None
    ground_truth: bool = False  # authoritative: a preference, a golden-rule memory
    tokens: int | None = None  # count_tokens(content) when known (a chunk's stored count)


@dataclass
class Piece:
    item: Item
    snippet: str
    tokens: int


@dataclass
class Assembled:
    core: list[Piece] = field(default_factory=list)
    extended: list[Piece] = field(default_factory=list)
    output: str = ""
    tokens_used: int = 0
    left_out: int = 0


# Words too common in questions to say where in a text the answer is.
_QUESTION_WORDS = frozenset({
    "what", "when", "where", "which", "whom", "whose", "does", "have", "that", "this", "with",
    "from", "about", "there", "their", "would", "should", "could", "were", "been", "into",
    "they", "them", "your", "yours", "mine",
})  # fmt: skip
_ENDINGS = ("ing", "ed", "es", "s")  # "owns" finds "owned", "items" finds "item"
_WORD = re.compile(r"[^\W_]+")
_SENTENCE = re.compile(r"(?:^|(?<=[.!?;:])\s)(?=\S)")


def focus_words(query: str) -> frozenset[str]:
    """The query's words that can place an answer in a text: 4 letters or more (or holding a
    digit), without question words."""
    words = {w for w in _WORD.findall(query.lower()) if len(w) >= 4 or any(c.isdigit() for c in w)}
    return frozenset(_stem(w) for w in words - _QUESTION_WORDS)


def _stem(word: str) -> str:
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def _focus(flat: str, limit: int, near: Collection[str]) -> int:
    """Where the window of `limit` characters holding most of `near` starts: a sentence
    start (0 when the opening holds as many as any, or nothing matches). Matched in `flat`
    itself, case-blind (lowering first moves offsets: "İ" lowers to two characters), and in
    time linear in the matches (each sentence start is one bisect)."""
    if not near:
        return 0
    words = sorted(near, key=lambda w: (-len(w), w))  # "database" before "data"
    either = "|".join(f"({re.escape(w)})" for w in words)
    pattern = re.compile(rf"(?<![^\W_])(?:{either})", re.IGNORECASE)
    found = [(m.start(), m.lastindex or 0) for m in pattern.finditer(flat)]
    if not found:
        return 0
    at = [position for position, _ in found]
    starts = [m.start() for m in _SENTENCE.finditer(flat)]

    def held(start: int, width: int) -> int:
        return len({w for _, w in found[bisect_left(at, start) : bisect_left(at, start + width)]})

    best, best_at = held(0, limit - 1), 0
    for start, end in zip(starts, [*starts[1:], len(flat)], strict=True):
        first = bisect_left(at, start)
        if start == 0 or first == len(at) or at[first] >= end:
            continue  # a window opens at a sentence that holds one of the words
        count = held(start, limit - 2)
        if count > best:
            best, best_at = count, start
    return best_at


def snippet(text: str, limit: int = SNIPPET_CHARS, near: Collection[str] = ()) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters ("…" marks a
    cut). Given the query's `near` words (focus_words), a long text's snippet starts at the
    sentence whose window holds most of them when the opening holds fewer: the answer in a
    note's last paragraph is what the caller needs to see."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    start = _focus(flat, limit, near)
    lead = "…" if start else ""
    room = limit - 1 - len(lead)
    cut = flat[start : start + room]
    space = cut.rfind(" ")
    if start + room < len(flat) and space > room // 2:
        cut = cut[:space]
    end = "" if start + len(cut) >= len(flat) else "…"
    return lead + cut.rstrip() + end


def _snippet_tokens(item: Item, short: str) -> int:
    """Tokens of `item`'s snippet. A snippet that is the whole content, only stripped (the
    usual short memory), counts what the chunk has stored: nothing at the edges makes a
    token. Anything else is counted: flattening whitespace is not neutral for the tokenizer,
    which deletes some characters str.split() takes for spaces (form feeds, \\x1c–\\x1f)."""
    if item.tokens is not None and short == item.content.strip():
        return item.tokens
    return count_tokens(short)


def curated(items: list[Item], mode: str, core: int, max_tokens: int, query: str = "") -> Assembled:
    """Core and extended context from `items` (best first) within `max_tokens`; snippets
    show the part of each text the `query` points at."""
    out = Assembled()
    texts: list[str] = []
    near = focus_words(query)
    room = core + EXTENDED[mode]  # what a budget without limit returns: items[:room]
    for rank, item in enumerate(items):
        if len(out.core) == core and len(out.extended) == EXTENDED[mode]:
            break
        short = snippet(item.content, near=near)
        if len(out.core) < core:
            cost = _snippet_tokens(item, short)
            whole = item.tokens if item.tokens is not None else count_tokens(item.content)
            fits = whole + cost <= max_tokens - out.tokens_used
            text = item.content.strip() if fits else short
            total = cost + (whole if fits else cost)
            if out.tokens_used + total > max_tokens:
                out.left_out += rank < room
                continue
            texts.append(text)
            out.core.append(Piece(item, short, cost))
            out.tokens_used += total
        else:
            cost = _snippet_tokens(item, short)
            if out.tokens_used + cost > max_tokens:
                out.left_out += rank < room
                continue
            out.extended.append(Piece(item, short, cost))
            out.tokens_used += cost
    out.output = SEPARATOR.join(texts)
    return out
