"""Extractive summaries for archived memories (no model): the sentences that carry the text.

The first sentence is kept (it usually says what the memory is about), then the sentences
whose words recur most in the text, until SUMMARY_TOKENS; they are printed in their original
order. A text already that short is its own summary. A rehydratable memory keeps only a key:
the first KEY_WORDS words of its summary.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from memsys.tokens import count_tokens

SUMMARY_TOKENS = 50
KEY_WORDS = 12
ELLIPSIS = "…"

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_'-]{2,}")
_COMMON_WORDS = (
    "the and for are but not you all any can had her was one our out has have this that with "
    "from they will would there their what when which who been were into than then them these "
    "those its also just only very more most some such"
)
_COMMON = frozenset(_COMMON_WORDS.split())


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _COMMON]


def _cut(text: str, tokens: int) -> str:
    """The longest run of leading words within `tokens`, with an ellipsis."""
    words = text.split()
    kept: list[str] = []
    for word in words:
        if count_tokens(" ".join([*kept, word, ELLIPSIS])) > tokens:
            break
        kept.append(word)
    return " ".join(kept) + ELLIPSIS


def summarize(text: str, tokens: int = SUMMARY_TOKENS) -> str:
    text = text.strip()
    if count_tokens(text) <= tokens:
        return text
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    if count_tokens(sentences[0]) >= tokens:
        return _cut(sentences[0], tokens)
    freq: Counter[str] = Counter(_words(text))

    def weight(sentence: str) -> float:
        words = set(_words(sentence))
        total: int = sum(freq[w] for w in words)
        return total / max(1.0, math.sqrt(len(words)))

    chosen = {0}
    used = count_tokens(sentences[0])
    for i in sorted(range(1, len(sentences)), key=lambda i: (-weight(sentences[i]), i)):
        cost = count_tokens(sentences[i]) + 1
        if used + cost <= tokens:
            chosen.add(i)
            used += cost
    return " ".join(sentences[i] for i in sorted(chosen))


def key_of(summary: str) -> str:
    words = summary.split()
    if len(words) <= KEY_WORDS:
        return summary
    return " ".join(words[:KEY_WORDS]) + ELLIPSIS
