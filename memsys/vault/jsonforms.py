"""The JSON forms of a snapshot: one JSON document or JSON lines, written piece by piece and
read record by record with the line of every record and problem.

The JSON document is written one record per line between its array brackets, so memsys
reads its own exports line by line (streaming, with line numbers); a JSON document laid out
any other way is read whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TextIO

from memsys.errors import InvalidInput
from memsys.vault import markdown, records
from memsys.vault.records import FORMAT, SCHEMA_VERSION, Located, Problem, Record, ordered

Item = Located | Problem
ARRAYS = {"memory": "memories", "edge": "edges", "preference": "preferences"}
TOP_KEYS = ("format", "schema_version", *ARRAYS.values())  # of the JSON document


def dumps(record: Record) -> str:
    return json.dumps(ordered(record), ensure_ascii=False)


def json_text(records: Iterable[Record], version: str = SCHEMA_VERSION) -> Iterator[str]:
    """One JSON document, piece by piece: a header, then the memories, edges and preferences
    arrays, one record per line. Records come grouped by kind in that order (as
    live.records gives them)."""
    yield json.dumps({"format": FORMAT, "schema_version": version})[:-1] + ",\n"
    kinds = list(ARRAYS)
    at, first = -1, True
    for rec in records:
        while at < kinds.index(rec["kind"]):
            at += 1
            yield ("" if at == 0 else "\n],\n") + f'"{ARRAYS[kinds[at]]}": [\n'
            first = True
        yield ("" if first else ",\n") + dumps(rec)
        first = False
    while at < len(kinds) - 1:
        at += 1
        yield ("" if at == 0 else "\n],\n") + f'"{ARRAYS[kinds[at]]}": [\n'
    yield "\n]}\n"


def jsonl_text(records: Iterable[Record], version: str = SCHEMA_VERSION) -> Iterator[str]:
    """JSON lines: a header line, then one record per line."""
    yield json.dumps({"kind": "header", "format": FORMAT, "schema_version": version}) + "\n"
    for rec in records:
        yield dumps(rec) + "\n"


def write(out: TextIO, form: str, records: Iterable[Record]) -> dict[str, int]:
    """Write records as `form` (json or jsonl); returns how many of each kind."""
    counts = dict.fromkeys(ARRAYS.values(), 0)

    def counted() -> Iterator[Record]:
        for rec in records:
            counts[ARRAYS[rec["kind"]]] += 1
            yield rec

    pieces = jsonl_text(counted()) if form == "jsonl" else json_text(counted())
    for piece in pieces:
        out.write(piece)
    return counts


def file_version(path: Path) -> tuple[Literal["json", "jsonl"], str, str, int]:
    """A JSON file's form and schema version, read from its first line (or whole), with
    where that version was read."""
    with path.open("rb") as f:
        first = f.readline().strip()
    try:
        head = _loads(first)
        if isinstance(head, dict) and head.get("kind") == "header":
            return "jsonl", str(head.get("schema_version", "")), str(path), 1
        if isinstance(head, dict) and "kind" in head:  # a record first: lines, no header
            raise InvalidInput(
                f"{path}:1: JSON lines without their header: the first line of a memsys "
                'export is {"kind": "header", "format": "memsys-export", "schema_version": …}'
            )
    except ValueError:
        pass
    try:
        head = _loads(first.rstrip(b",") + b"}")
        if isinstance(head, dict) and "schema_version" in head:
            return "json", str(head["schema_version"]), str(path), 1
    except ValueError:
        pass
    try:
        data = _loads(path.read_bytes())
    except ValueError as exc:
        line = getattr(exc, "lineno", 1)
        raise InvalidInput(f"{path}:{line}: not JSON: {why(exc)}") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}:1: expected a memsys export (a JSON object)")
    return "json", str(data.get("schema_version", "")), str(path), 1


def _loads(text: str | bytes) -> Any:
    """json.loads; ValueError for whatever it cannot read: bad JSON, text that is not UTF-8,
    an integer of more digits than Python converts, nesting deeper than its stack."""
    try:
        return records.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def why(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return getattr(exc, "msg", None) or str(exc).split("; ")[0]


def record_line(text: str | bytes, source: str, n: int) -> Item:
    try:
        data = _loads(text)
    except ValueError as exc:
        return Problem(source, n, f"not valid JSON: {why(exc)}")
    if not isinstance(data, dict):
        return Problem(source, n, "expected a JSON object")
    return markdown.located(_as_read(data), source, {"": n})


def _as_read(data: dict[str, Any]) -> dict[str, Any]:
    """A record as its file holds it, a key named like a mark memsys's readers set
    (records.READER_KEYS: `unedited`, `happened_unknown`) renamed, so that the record's check
    refuses it as the unknown field it is: taken for the mark, it skipped the memory's edit
    on import, or the check of its `happened`."""
    if not any(k in records.READER_KEYS for k in data):
        return data
    return {(f"{k} (in the file)" if k in records.READER_KEYS else k): v for k, v in data.items()}


def jsonl_items(path: Path) -> Iterator[Item]:
    with path.open("rb") as f:  # each line decoded on its own: a bad one is one problem
        f.readline()
        for n, line in enumerate(f, start=2):
            if line.strip():
                yield record_line(line, str(path), n)


_STRUCTURE = {b'"memories": [', b'"edges": [', b'"preferences": [', b"],", b"]}", b"]"}


def _export_layout(lines: Iterable[bytes]) -> bool:
    """Whether every line is one of an export's own: a record (an object on its line), a
    bracket of the arrays, or blank. A valid document laid out otherwise (its header line
    alike, `"memories": [{…},` after it) is read whole, not refused line by line."""
    return all(not t or t in _STRUCTURE or _one_record(t) for t in map(bytes.strip, lines))


def _header_line(line: bytes) -> bool:
    """Whether `line` is an export's first line: the header's fields, alone, and a comma. A
    document headed so with its first record on that line too (`…"1.1", "memories": [{…},`,
    as a script joining an export's lines writes it) is read whole: line by line, that
    record was passed over without a word."""
    text = line.strip()
    if not (text.startswith(b'{"format"') and text.endswith(b",")):
        return False
    try:
        head = _loads(text[:-1] + b"}")
    except ValueError:
        return False
    return isinstance(head, dict) and set(head) <= {"format", "schema_version"}


def _one_record(line: bytes) -> bool:
    return line.startswith(b"{") and line.endswith((b"}", b"},"))  # not `{…}],`


def json_items(path: Path) -> Iterator[Item]:
    with path.open("rb") as f:
        first = f.readline()
        if _header_line(first) and _export_layout(f):
            f.seek(len(first))
            for n, raw in enumerate(f, start=2):
                try:
                    text = raw.decode("utf-8").strip()
                except UnicodeDecodeError:
                    yield Problem(str(path), n, "not UTF-8 text")
                    continue
                if text.startswith("{"):  # a record; the other lines are brackets or blank
                    yield record_line(text.rstrip(","), str(path), n)
            return
    yield from _whole_json(path)


def _whole_json(path: Path) -> Iterator[Item]:
    try:
        data = _loads(path.read_bytes())
    except ValueError as exc:
        yield Problem(str(path), getattr(exc, "lineno", None), f"not valid JSON: {why(exc)}")
        return
    if not isinstance(data, dict):
        yield Problem(str(path), 1, "expected a memsys export (a JSON object)")
        return
    unknown = [key for key in data if key not in TOP_KEYS]
    if unknown:  # a misspelt `memorys` would drop every record under it without a word
        raw = path.read_bytes()  # in the encoding json.loads found (UTF-8, 16 or 32)
        lines = _key_lines(raw.decode(json.detect_encoding(raw)).lstrip("\ufeff"))
        for key in unknown:
            message = f"{key}: unknown key of a memsys export (it holds {', '.join(TOP_KEYS)})"
            yield Problem(str(path), lines.get(key), message)
    for kind, array in ARRAYS.items():
        items = data.get(array) or []
        if not isinstance(items, list):
            yield Problem(str(path), None, f"{array}: expected a list")
            continue
        for i, rec in enumerate(items):
            where = f"{path} {array}[{i}]"
            if not isinstance(rec, dict):
                yield Problem(where, None, "expected a JSON object")
                continue
            rec = _as_read(rec)
            rec.setdefault("kind", kind)
            yield markdown.located(rec, where, {})


_SPACE = re.compile(r"[ \t\n\r]*")


def _space(text: str, at: int) -> int:
    """Where the JSON whitespace from `at` ends."""
    found = _SPACE.match(text, at)
    return found.end() if found else at


def _key_lines(text: str) -> dict[str, int]:
    """The line of each key of the JSON object `text` (read without error already)."""
    decoder, found = json.JSONDecoder(), dict[str, int]()
    at = _space(text, text.index("{") + 1)
    while text[at] == '"':
        key, at = decoder.raw_decode(text, at)
        found.setdefault(key, text.count("\n", 0, at) + 1)
        at = _space(text, decoder.raw_decode(text, _space(text, _space(text, at) + 1))[1])
        if text[at] == ",":
            at = _space(text, at + 1)
    return found
