"""The assemble stage (S004 "curated core", S002 snippets): what a query hands back.

The ranked items are split into a curated core (`core` items, 5 by default) and an extended
context whose size depends on the mode (S004: execution 15, planning 25, brainstorming 30).
Every returned item carries a snippet of at most 200 characters (S002 "SNIPPET
<max_200_chars>"); the output text is the core items' full content (S004 format_output),
each cut to its snippet when the whole does not fit. The token budget covers everything
returned — the output plus every snippet — and is never exceeded: an item too large for what
is left is skipped (a smaller one further down may still fit), and `left_out` counts them.
"""

from __future__ import annotations

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


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters ("…" marks a
    cut)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _snippet_tokens(item: Item, short: str) -> int:
    """Tokens of `item`'s snippet. A snippet that is the whole content, only stripped (the
    usual short memory), counts what the chunk has stored: nothing at the edges makes a
    token. Anything else is counted: flattening whitespace is not neutral for the tokenizer,
    which deletes some characters str.split() takes for spaces (form feeds, \\x1c–\\x1f)."""
    if item.tokens is not None and short == item.content.strip():
        return item.tokens
    return count_tokens(short)


def curated(items: list[Item], mode: str, core: int, max_tokens: int) -> Assembled:
    """Core and extended context from `items` (best first) within `max_tokens`."""
    out = Assembled()
    texts: list[str] = []
    for item in items:
        if len(out.core) == core and len(out.extended) == EXTENDED[mode]:
            break
        short = snippet(item.content)
        if len(out.core) < core:
            cost = _snippet_tokens(item, short)
            whole = item.tokens if item.tokens is not None else count_tokens(item.content)
            fits = whole + cost <= max_tokens - out.tokens_used
            text = item.content.strip() if fits else short
            total = cost + (whole if fits else cost)
            if out.tokens_used + total > max_tokens:
                out.left_out += 1
                continue
            texts.append(text)
            out.core.append(Piece(item, short, cost))
            out.tokens_used += total
        else:
            cost = _snippet_tokens(item, short)
            if out.tokens_used + cost > max_tokens:
                out.left_out += 1
                continue
            out.extended.append(Piece(item, short, cost))
            out.tokens_used += cost
    out.output = SEPARATOR.join(texts)
    return out
