"""Rule-based entity extraction: the names a chunk talks about, without any LLM.

What counts as a mention (each normalised to a stable key `concept#<lowercase words>`):
- proper names: runs of capitalised words ("Shirley Temple", "Kiss and Tell") joined by
  short lowercase connectors ("of", "and", "de", …), minus sentence-initial function words;
- quoted terms ("…", '…', `…`) of 1–6 words;
- code identifiers and file names: snake_case, CamelCase, dotted.names, name.ext.
Single capitalised words are kept (names like "Paris" matter) unless they are common
sentence starters. The extractor is deliberately simple and predictable: it links chunks that
share a name, which is what graph retrieval (memsys/retrieval/graph.py) walks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memsys.ids import as_read

MAX_MENTIONS = 24  # per chunk: long chunks do not flood the graph
CONNECTORS = {"of", "and", "de", "la", "le", "van", "von", "der", "den", "du", "da", "the", "&"}
STARTERS = {
    "a", "an", "the", "this", "that", "these", "those", "it", "its", "he", "she", "they", "we",
    "i", "you", "his", "her", "their", "our", "my", "your", "in", "on", "at", "for", "from",
    "something", "nothing", "everything", "anything", "someone", "everyone", "anyone",
    "somebody", "nobody", "everybody", "anybody", "none",
    "by", "with", "as", "but", "and", "or", "if", "when", "while", "after", "before", "since",
    "what", "which", "who", "whom", "whose", "where", "why", "how", "is", "are", "was", "were",
    "do", "does", "did", "yes", "no", "not", "so", "also", "then", "there", "here", "some",
    "all", "any", "each", "both", "one", "two", "many", "most", "more", "other", "such",
    "hey", "hi", "oh", "wow", "thanks", "thank", "sure", "well", "just", "really", "that's",
    "it's", "i'm", "i've", "i'd", "i'll", "you're", "we're", "they're", "can", "could",
    "would", "should", "will", "may", "might", "must", "have", "has", "had", "be", "been",
    # discourse words and times relative to now: capitalised only because they open a
    # sentence ("However, …", "Yesterday we …"), never a thing a text is about
    "however", "meanwhile", "therefore", "thus", "hence", "although", "though", "because",
    "maybe", "perhaps", "finally", "instead", "otherwise", "besides", "moreover",
    "furthermore", "anyway", "overall", "eventually", "additionally", "nevertheless",
    "nonetheless", "indeed", "probably", "actually", "basically", "apparently", "obviously",
    "hopefully", "clearly", "suddenly", "luckily", "honestly", "fortunately", "unfortunately",
    "usually", "sometimes", "often", "currently", "recently", "later", "earlier",
    "afterwards", "please", "let's", "ok", "okay", "now", "yet", "until", "unless", "whether",
    "yesterday", "today", "tonight", "tomorrow",
}  # fmt: skip

_WORD = r"[A-Z][\w'’\-]*"
_GAP = r"[^\S\n]+"  # spaces within a line: a name never runs on past a line break
_JOIN = "|".join(sorted(c for c in CONNECTORS if c != "&"))
_NAME = re.compile(rf"{_WORD}(?:{_GAP}(?:(?:{_JOIN}|&){_GAP})?{_WORD})*")
_OPENING = re.compile(r"[\s#>*_\"“`'\-]*")
_QUOTED = re.compile(r"[\"“`']([^\"”`'\n]{2,60})[\"”`']")
_IDENT = re.compile(
    r"\b(?:[a-z]+(?:_[a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|"
    r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+)\b"
)


@dataclass(frozen=True)
class Mention:
    key: str
    name: str


def normalise(name: str) -> str:
    """A name's key words; read as dedup reads a text (ids.as_read: a zero-width space is
    nothing, not a word break)."""
    return " ".join(re.sub(r"[^\w\s.\-]", " ", as_read(name).lower()).split())


def key_for(name: str) -> str:
    """A name's stable key; one of punctuation alone (an episode's entity_names: "!!!", "?")
    is keyed as written, not `concept#`, which would make it every such name's entity."""
    return f"concept#{normalise(name) or name.strip()}"


def _trim(words: list[str]) -> list[str]:
    while words and (words[0].lower() in STARTERS or words[0].lower() in CONNECTORS):
        words = words[1:]
    while words and words[-1].lower() in CONNECTORS:
        words = words[:-1]
    return words


def extract(text: str) -> list[Mention]:
    """Distinct mentions in order of first appearance (at most MAX_MENTIONS), in the text
    as dedup reads it (ids.as_read: "Ali\u200bce" is "Alice")."""
    text = as_read(text)
    found: dict[str, Mention] = {}

    def add(name: str) -> None:
        norm = normalise(name)
        if len(norm) < 2 or norm.isdigit() or len(norm) > 80:
            return
        key = f"concept#{norm}"
        if key not in found and len(found) < MAX_MENTIONS:
            found[key] = Mention(key=key, name=name.strip())

    for match in _NAME.finditer(text):
        words = match.group(0).split()
        doubled = _doubled(words)
        # The name once, then the second copy with what follows it ("Bank of America Bank
        # of America Tower": the bank and the tower, not a "Tower" of its own).
        parts = [words]
        if doubled is not None:
            first, rest = doubled
            parts = [first, words[len(words) - len(rest) - len(first) :]]
        for part in parts:
            trimmed = _trim(part)
            if trimmed:
                add(" ".join(trimmed))
    for match in _QUOTED.finditer(text):
        inner = match.group(1).strip()
        if 1 <= len(inner.split()) <= 6:
            add(inner)
    for match in _IDENT.finditer(text):
        add(match.group(0))
    return list(found.values())


# What follows a title: a colon, comma, parenthesis, dash, semicolon, a line break or the end.
# A capitalised word running on into the sentence ("Rapamycin delays…") is not one.
_DELIMITED = re.compile(r"[ \t]*(?:[:,;(\n\u2013\u2014]|-\s|$)")


_ARTICLES = ("the", "a", "an")
_NAME_WORDS = 12  # the longest name looked for twice (a key holds at most 80 characters)


def _doubled(words: list[str]) -> tuple[list[str], list[str]] | None:
    """A name of two words or more written twice in a row, the second time perhaps after an
    article — an entry's title joined to its text by a space, where the text opens with the
    same name ("Demon Dice Demon Dice, originally…", "The Hythrun Chronicles The Hythrun
    Chronicles is…") —, as (the name once, the words after the second copy); else None.
    One-word names are left alone: "Chori Chori" and "Duran Duran" are names."""
    low = [w.lower() for w in words[: 2 * _NAME_WORDS + 1]]  # a run may be a whole text
    for k in range(min(len(low) // 2, _NAME_WORDS), 1, -1):
        for skip in (0, 1):
            if skip and (low[k] not in _ARTICLES or low[0] in _ARTICLES):
                continue
            if low[k + skip] == low[0] and low[k + skip : 2 * k + skip] == low[:k]:
                return words[:k], words[2 * k + skip :]
    return None


def subject(text: str) -> str | None:
    """The key of the name a text opens with ("Young, New South Wales: Young is a town…",
    "# Deploy notes", "Caroline: I went…"), or None. A chunk that opens with a name set off
    as a title is about it — an encyclopedia entry's title, a note's heading, a turn's
    speaker — which makes it the place to look when another chunk mentions that name (graph
    retrieval's second hop)."""
    text = as_read(text)
    opening = _OPENING.match(text)
    if opening is None:
        return None
    match = _NAME.match(text, opening.end())
    if match is None:
        return None
    doubled = _doubled(match.group(0).split())
    if doubled is not None:  # a title is what its text repeats at once
        whole = doubled[0]
    elif not _DELIMITED.match(text, match.end()):
        return None  # "Rapamycin delays aging…", "Effect of …": a sentence's first word
    else:
        whole = match.group(0).split()
    words = _trim(whole)
    dropped = {w.lower() for w in whole[: len(whole) - len(words)]}
    if not words or not dropped <= set(_ARTICLES):
        return None  # "In 1986 …", "When Paris …": a sentence, not a name
    norm = normalise(" ".join(words))
    if len(norm) < 2 or norm.isdigit() or len(norm) > 80:
        return None
    return f"concept#{norm}"
