"""The snapshot format: three kinds of record as plain dicts in a fixed key order, and the
checks every reader applies. No I/O here; `files` and `markdown` read and write records,
`live` reads them from the database.

A memory record keeps what a user wrote and what memsys decided about it (type, scores,
tags, lifecycle, stage, pin, metadata, times). Mutable runtime state (access counts, last
access) is left out, as S003 keeps it out of git (`_state.json`). An edge is named by
(namespace, from, type, to), so its id is derived from those and stays the same across
databases; its integer database id is not exported.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from memsys import jsonvalue, relations
from memsys.errors import bounded, encodable
from memsys.ids import content_hash
from memsys.models.chunk import STAGES
from memsys.schemas import edges as edges_schema
from memsys.schemas import memories as memories_schema
from memsys.schemas.common import CLOCK_SKEW, check_values
from memsys.schemas.preferences import PreferenceRestoreIn
from memsys.vocabulary import DEFAULT_LIFECYCLE, LIFECYCLES, MEMORY_TYPES

SCHEMA_VERSION = "1.1"
FORMAT = "memsys-export"

Record = dict[str, Any]

MEMORY_KEYS = (
    "kind",
    "id",
    "namespace",
    "type",
    "content",
    "content_hash",
    "importance",
    "confidence",
    "tags",
    "lifecycle",
    "stage",
    "pinned",
    "metadata",
    "happened",
    "created",
    "updated",
)
EDGE_KEYS = (
    "kind",
    "id",
    "namespace",
    "type",
    "from_id",
    "to_id",
    "strength",
    "context",
    "created",
)
PREFERENCE_KEYS = ("kind", "namespace", "key", "value", "lifecycle")
KEYS = {"memory": MEMORY_KEYS, "edge": EDGE_KEYS, "preference": PREFERENCE_KEYS}
# A memory read from a file of a schema version before `happened` (1.0): the file cannot say
# when it happened, so import keeps what the database holds and diff sees no change.
HAPPENED_UNKNOWN = "happened_unknown"
# A memory read from a vault file byte for byte as memsys last wrote or imported it: nobody
# edited it, so an import changes nothing of the memory (what the database learned since —
# confidence from outcomes, a stage from maintenance — is not undone by an untouched file).
UNEDITED = "unedited"
# Keys the readers add themselves (a relation read from a memory file's frontmatter).
READER_KEYS = {"from_relation", HAPPENED_UNKNOWN, UNEDITED}
# Fields whose change makes a new version of a memory on import (times follow the change).
VERSIONED: tuple[str, ...] = ("type", "content", "importance", "confidence", "tags")
VERSIONED += ("lifecycle", "stage", "pinned", "metadata", "happened")
# Keys a record holds only when they have a value (a memory's `happened`: memory_store's
# reference_time, when one was given).
OPTIONAL = {"happened"}

# What every record of one edge (its file, the relations naming it) must agree on.
EDGE_AGREED = ("type", "strength", "context")


def edge_disagreement(a: Record, b: Record) -> str | None:
    """The first field two records of one edge give differently (an edit made in one place
    and not the other), else None."""
    return next((n for n in EDGE_AGREED if a.get(n) != b.get(n)), None)


def disagreeing(at: Record, other: Record, name: str, there: str) -> str:
    """The problem of `at` giving `name` otherwise than `other` (at `there`) does."""
    return (
        f"edge {at['id']}: {name} {at.get(name)!r} here, {other.get(name)!r} at {there}: "
        "edit both the same way, or delete one of them"
    )


_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,39}$")
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, where it is (file and line when known)."""

    source: str
    line: int | None
    message: str

    def __post_init__(self) -> None:  # a message echoing a field's value: never megabytes
        object.__setattr__(self, "message", bounded(self.message))
        object.__setattr__(self, "source", encodable(self.source))  # a file name not UTF-8

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.message}"


class Located(dict[str, Any]):
    """A record that remembers where it was read (file, line of each key) for problems."""

    source: str = "<input>"
    lines: dict[str, int]

    def at(self, key: str | None = None) -> int | None:
        lines = getattr(self, "lines", {})
        return lines.get(key or "", lines.get(""))


def loads(text: str | bytes) -> Any:
    """json.loads refusing an object that gives a key twice: json keeps the last one, so an
    edit above it (a second `"value"` in a preference line, a second `"memories"` array)
    would be lost without a word, as YAML's would in a frontmatter."""
    return jsonvalue.loads(text)


def edge_id(namespace: str, source: str, relation: str, target: str) -> str:
    """The stable id of an edge: the same four names give the same id in every database."""
    digest = hashlib.sha256("\x1f".join((namespace, source, relation, target)).encode())
    return f"edge_{digest.hexdigest()[:16]}"


def moment(value: Any) -> datetime:
    """A moment in UTC from an ISO 8601 text or a datetime (naive: UTC)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        raise ValueError(f"not a timestamp: {value!r}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc: datetime = value.astimezone(UTC)
    except OverflowError:  # "0001-01-01T00:00:00+14:00": a year BC in UTC
        raise ValueError(f"{value.isoformat()} is outside the years 1-9999 in UTC") from None
    return utc


def timestamp(value: Any) -> str:
    """A moment as the one text form exports use: ISO 8601 in UTC with +00:00."""
    return str(moment(value).isoformat())


def ordered(record: Record) -> Record:
    """The record with its keys in the format's order (unknown keys dropped, and an optional
    one without a value)."""
    return {
        k: record[k]
        for k in KEYS[record["kind"]]
        if k in record and not (k in OPTIONAL and record[k] is None)
    }


def _number(rec: Record, key: str, low: float, high: float, problems: list[str]) -> None:
    value = rec.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(f"{key}: expected a number, got {value!r}")
    elif not low <= value <= high:
        problems.append(f"{key}: {value} is outside {low}..{high}")
    else:
        rec[key] = float(value)


def _text(rec: Record, key: str, pattern: re.Pattern[str] | None, problems: list[str]) -> None:
    value = rec.get(key)
    if value is not None and not isinstance(value, str):  # YAML reads `id: 007` as 7
        problems.append(f"{key}: {value!r} is not text (quote it)")
    elif not isinstance(value, str) or not value.strip():
        problems.append(f"{key}: missing or empty")
    elif pattern is not None and not pattern.match(value):
        problems.append(f"{key}: {value!r} is not a valid {key}")


def _time(rec: Record, key: str, problems: list[str], required: bool = True) -> None:
    if rec.get(key) is None and not required:
        return
    try:
        when = moment(rec.get(key))
    except (TypeError, ValueError):
        problems.append(
            f"{key}: expected an ISO 8601 timestamp in the years 1-9999 (UTC), got {rec.get(key)!r}"
        )
        return
    rec[key] = when.isoformat()
    if when > _latest():
        problems.append(f"{key}: {rec[key]} is in the future")


def _latest() -> datetime:
    return datetime.now(UTC) + CLOCK_SKEW


def _limited(rec: Record, key: str, check: Any, problems: list[str]) -> None:
    """rec[key] as memory_store's own check of that field leaves it, or its reason."""
    try:
        rec[key] = check(rec[key])
    except ValueError as exc:
        problems.append(f"{key}: {exc}")


def check_memory(rec: Record) -> list[tuple[str, str]]:
    """Normalise a memory record in place; (field, problem) for each thing wrong."""
    found: list[tuple[str, str]] = []

    def field(key: str, check: Any) -> None:
        problems: list[str] = []
        check(problems)
        found.extend((key, p) for p in problems)

    field("id", lambda p: _text(rec, "id", _ID, p))
    rec.setdefault("namespace", "global")
    field("namespace", lambda p: _text(rec, "namespace", _NAMESPACE, p))
    if rec.get("type") not in MEMORY_TYPES:
        found.append(("type", f"type: unknown memory type {rec.get('type')!r}"))
    content = rec.get("content")
    if not isinstance(content, str) or not content.strip():
        found.append(("content", "content: missing or empty"))
    else:
        field("content", lambda p: _limited(rec, "content", memories_schema.stored_content_text, p))
        # Derived: a hand edit of the content leaves a stale hash behind, which is no error.
        rec["content_hash"] = content_hash(rec["content"])
    field("importance", lambda p: _number(rec, "importance", 0.0, 1.0, p))
    rec.setdefault("confidence", 0.3)
    field("confidence", lambda p: _number(rec, "confidence", 0.0, 1.0, p))
    rec["tags"] = [] if rec.get("tags") is None else rec["tags"]  # `tags: no` is no list
    if not isinstance(rec["tags"], list) or not all(isinstance(t, str) for t in rec["tags"]):
        found.append(("tags", "tags: expected a list of strings"))
    else:  # what memory_store allows, cleaned as it cleans them
        field("tags", lambda p: _limited(rec, "tags", memories_schema.tag_list, p))
    rec.setdefault("lifecycle", DEFAULT_LIFECYCLE.get(str(rec.get("type")), "project"))
    if rec["lifecycle"] not in LIFECYCLES:
        found.append(("lifecycle", f"lifecycle: {rec['lifecycle']!r} is not one of {LIFECYCLES}"))
    rec.setdefault("stage", "active")
    if rec["stage"] not in STAGES:
        found.append(("stage", f"stage: {rec['stage']!r} is not one of {STAGES}"))
    rec.setdefault("pinned", False)
    if not isinstance(rec["pinned"], bool):
        found.append(("pinned", "pinned: expected true or false"))
    rec["metadata"] = {} if rec.get("metadata") is None else rec["metadata"]
    if not isinstance(rec["metadata"], dict):
        found.append(("metadata", "metadata: expected a mapping"))
    elif (problem := json_problem(rec["metadata"], "metadata")) is not None:
        found.append(("metadata", problem))
    else:
        field("metadata", lambda p: _limited(rec, "metadata", memories_schema.metadata_map, p))
    # When the remembered thing happened (memory_store's reference_time): what a question
    # naming a date matches; absent, when it was written.
    rec.setdefault("happened", None)
    if not rec.get(HAPPENED_UNKNOWN):
        field("happened", lambda p: _time(rec, "happened", p, required=False))
    field("created", lambda p: _time(rec, "created", p))
    rec.setdefault("updated", rec.get("created"))
    field("updated", lambda p: _time(rec, "updated", p))
    return found


def check_edge(rec: Record) -> list[tuple[str, str]]:
    """Normalise an edge record in place; (field, problem) for each thing wrong."""
    found: list[tuple[str, str]] = []
    rec.setdefault("namespace", "global")
    named: list[str] = []  # as a memory's namespace: an edge id is made of it
    _text(rec, "namespace", _NAMESPACE, named)
    found.extend(("namespace", p) for p in named)
    relation = rec.get("type")
    known = relations.canonical(relation) if isinstance(relation, str) else None
    if known is None or relations.BY_NAME[known].internal:  # as memory_relate refuses it
        found.append(
            ("type", f"type: {relation!r} is not a relation memsys knows (memory_relate's list)")
        )
    else:
        rec["type"] = known
    for key in ("from_id", "to_id"):
        if not isinstance(rec.get(key), str) or not _ID.match(rec[key]):
            found.append((key, f"{key}: missing or not a memory id"))
    if not found and rec["from_id"] == rec["to_id"]:
        found.append(("to_id", "to_id: an edge cannot join a memory to itself"))
    rec.setdefault("strength", 1.0)
    problems: list[str] = []
    _number(rec, "strength", 0.0, edges_schema.MAX_WEIGHT, problems)  # memory_relate's weight
    context = rec.setdefault("context", None)
    if context is not None and not isinstance(context, str):
        problems.append("context: expected text")
    else:
        _limited(rec, "context", edges_schema.edge_context, problems)
    _time(rec, "created", problems)
    found.extend((p.split(":", 1)[0], p) for p in problems)
    if not found:
        rec["id"] = edge_id(rec["namespace"], rec["from_id"], rec["type"], rec["to_id"])
    return found


def check_preference(rec: Record) -> list[tuple[str, str]]:
    """Normalise a preference record in place by preference_set's own rules, but for a key
    the database may hold from before a rule refused it (PreferenceRestoreIn)."""
    rec.setdefault("namespace", "global")
    rec.setdefault("lifecycle", "personal")
    if "value" not in rec:
        return [("value", "value: missing")]
    if (problem := json_problem(rec["value"], "value")) is not None:
        return [("value", problem)]
    fields = {k: rec[k] for k in ("namespace", "key", "value", "lifecycle") if k in rec}
    try:
        checked = PreferenceRestoreIn.model_validate(fields)
    except ValidationError as exc:
        found = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "record"
            found.append((key, f"{key}: {error['msg'].removeprefix('Value error, ')}"))
        return found
    rec.update(namespace=checked.namespace, key=checked.key, lifecycle=checked.lifecycle)
    return []


def json_problem(value: Any, where: str) -> str | None:
    """Why a metadata or preference value cannot be stored as it was read, or None: types
    JSON has not — YAML reads an unquoted 2024-05-01 as a date, which would be stored as
    text and then differ from the file on every later import. (What every input refuses —
    NUL, lone surrogates, deep nesting, NaN — `check` has found before: unstorable.)"""
    try:
        _json_types(value, where)
    except ValueError as exc:
        return str(exc)
    return None


def _json_types(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: the key {key!r} is not text (quote it)")
            _json_types(item, f"{where}.{key}")
    elif isinstance(value, list):
        for item in value:
            _json_types(item, where)
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{where} is a {type(value).__name__}, not a JSON value (quote it)")


CHECKS = {"memory": check_memory, "edge": check_edge, "preference": check_preference}


def unstorable(rec: Record) -> list[tuple[str, str]]:
    """(field, problem) for each field holding what no input may (check_values), counted
    from the field as memory_store counts them."""
    found = []
    for key, value in rec.items():
        try:
            check_values(value, str(key))
        except ValueError as exc:
            found.append((str(key), str(exc)))
    return found


def check(rec: Record) -> list[tuple[str, str]]:
    """Normalise any record in place; (field, problem) for each thing wrong. First what no
    input may hold anywhere (a NUL, a lone surrogate, deep nesting, NaN: check_values)."""
    found = unstorable(rec)
    if found:
        return found
    kind = rec.get("kind")
    if not isinstance(kind, str) or kind not in CHECKS:  # `"kind": []` is no key of CHECKS
        return [("kind", f"kind: expected memory, edge or preference, got {kind!r}")]
    unknown = [str(k) for k in rec if k not in KEYS[kind] and k not in READER_KEYS]
    if unknown:  # refused, never dropped: a misspelt field would lose what it held
        hint = " (your own fields go under metadata)" if kind == "memory" else ""
        return [(k, f"{k}: unknown field of a {kind} record{hint}") for k in unknown]
    return CHECKS[kind](rec)


def identity(rec: Record) -> tuple[str, ...]:
    """What names a record across snapshots: memory id, edge id, (namespace, key)."""
    if rec["kind"] == "preference":
        return ("preference", rec["namespace"], rec["key"])
    return (rec["kind"], rec["id"])
