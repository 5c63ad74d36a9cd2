"""Lint a snapshot (or the live database) against memory-schema.yaml: types, required fields,
field types, ranges, lengths, enums, retention. Records stream through once; each check is a
few dict lookups, so 100k memories take seconds, not minutes.

Findings are errors (the record breaks the schema) or warnings (past its retention, an
edge type the schema does not list). Some errors have a safe fix — a missing field with a
default, a number outside its range clamped to it — that `--fix` writes back into the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from memsys import regular_files
from memsys.errors import InvalidInput, from_os_error
from memsys.vault import markdown, records
from memsys.vault.records import Located, Problem, Record, timestamp

SCHEMA_FILE = "memory-schema.yaml"
UNREAD = (
    "not read by import: a memory's file goes under graph/<type>/ (or vault/ when pinned), "
    "with frontmatter"
)
SECTIONS = {"edge": "relationship", "preference": "preference_store"}


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warning
    source: str
    line: int | None
    message: str
    fix: tuple[str, Any] | None = None  # (field, value) a safe fix writes


@dataclass
class Report:
    schema_version: str
    checked: dict[str, int] = field(default_factory=lambda: {"memory": 0, "edge": 0})
    findings: list[Finding] = field(default_factory=list)

    def count(self, severity: str) -> int:
        return sum(f.severity == severity for f in self.findings)


def default_schema_path() -> Path:
    return Path(str(resources.files("memsys.vault").joinpath(SCHEMA_FILE)))


def load_schema(path: str | Path | None = None) -> dict[str, Any]:
    """The schema: the user's file, or the one shipped with memsys."""
    where = Path(path).expanduser() if path is not None else default_schema_path()
    if not where.exists() and not where.is_symlink():
        raise InvalidInput(f"Schema file not found: {where}")
    try:  # a folder, a pipe, a device or a link loop: refused with its reason, never read
        text = regular_files.read_bytes(where, str(where)).decode("utf-8")
        schema = yaml.load(text, Loader=markdown.SafeLoader)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInput(f"{where}: not valid YAML: {str(exc)[:200]}") from None
    except OSError as exc:  # a link loop, a name too long
        raise from_os_error(exc) from None
    types = schema.get("memory_types") if isinstance(schema, dict) else None
    if not isinstance(types, dict) or not all(
        isinstance(t, dict) and isinstance(t.get("schema"), dict) for t in types.values()
    ):
        raise InvalidInput(f"{where}: expected `memory_types`, each with a `schema` of fields")
    if "version" not in schema:
        raise InvalidInput(f"{where}: the schema has no `version`")
    specs = dict(types)
    for section in SECTIONS.values():  # edges' and preferences' rules: optional
        found = schema.get(section)
        if found is not None and not (
            isinstance(found, dict) and isinstance(found.get("schema", {}), dict)
        ):
            raise InvalidInput(f"{where}: {section}: expected a mapping with a `schema` of fields")
        if found is not None:
            specs[section] = {**found, "schema": found.get("schema", {})}
    for name, spec in specs.items():
        problem = _spec_problem(spec)
        if problem is not None:
            raise InvalidInput(f"{where}: {name}{problem}")
    return dict(schema)


def _spec_problem(spec: dict[str, Any]) -> str | None:
    """`: why` a type's settings, or `.field: why` one of its rules, cannot be checked
    against, or None."""
    problem = _type_problem(spec)
    if problem is not None:
        return f": {problem}"
    for field_name, rule in spec["schema"].items():
        problem = _rule_problem(rule)
        if problem is None and rule.get("default") is not None:
            broken = check_field("default", rule["default"], rule)
            problem = broken[0][0] if broken else None
        if problem is not None:
            return f".{field_name}: {problem}"
    return None


MAX_RETENTION_DAYS = 999_999_999  # the most days a timedelta holds


def _type_problem(spec: dict[str, Any]) -> str | None:
    """Why a type's own settings cannot be used (a retention that is no number of days, a
    lifecycle that is no name), or None: they were read as they are, mid-lint."""
    days = spec.get("retention_days")
    if days is not None and (
        not isinstance(days, int) or isinstance(days, bool) or not 0 <= days <= MAX_RETENTION_DAYS
    ):
        return f"retention_days must be a whole number 0..{MAX_RETENTION_DAYS}, got {days!r}"
    if spec.get("lifecycle") is not None and not isinstance(spec["lifecycle"], str):
        return f"lifecycle must be a name, got {spec['lifecycle']!r}"
    return None


FIELD_TYPES = ("string", "id", "float", "int", "boolean", "array", "enum", "timestamp", "json")


def _rule_problem(rule: Any) -> str | None:
    """Why a field's rule cannot be checked against (an unknown type, a bound that is no
    number, a negative length), or None."""
    if not isinstance(rule, dict):
        return "expected a mapping of constraints"
    if rule.get("type", "json") not in FIELD_TYPES:
        return f"unknown type {rule.get('type')!r} (one of {', '.join(FIELD_TYPES)})"
    for bound in ("min", "max"):
        if rule.get(bound) is not None and not _is_number(rule[bound]):
            return f"{bound} must be a number, got {rule[bound]!r}"
    for count in ("max_length", "max_items"):
        value = rule.get(count)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            return f"{count} must be a whole number >= 0, got {value!r}"
    low, high = rule.get("min"), rule.get("max")
    if low is not None and high is not None and low > high:  # --fix would clamp to either
        return f"min {low} is above max {high}"
    if rule.get("type") == "enum" and not isinstance(rule.get("values"), list):
        return "an enum needs a list of `values`"
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "id": lambda v: isinstance(v, str) and 0 < len(v) <= 40,
    "float": _is_number,
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "enum": lambda v: isinstance(v, str),
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "timestamp":
        return _is_time(value)
    check = TYPE_CHECKS.get(kind)
    return check is None or check(value)


def _is_time(value: Any) -> bool:
    try:
        timestamp(value)
    except (TypeError, ValueError):
        return False
    return True


def check_field(name: str, value: Any, rule: dict[str, Any]) -> list[tuple[str, Any]]:
    """(message, safe fix value or None) for each way `value` breaks `rule`."""
    if value is None:
        if rule.get("required"):
            return [(f"{name}: required field missing", rule.get("default"))]
        return []
    kind = rule.get("type", "json")
    if not _type_ok(value, kind):
        return [(f"{name}: expected {kind}, got {type(value).__name__}", None)]
    found: list[tuple[str, Any]] = []
    low, high = rule.get("min"), rule.get("max")
    if low is not None and value < low:
        found.append((f"{name}: {value} below minimum {low}", float(low)))
    if high is not None and value > high:
        found.append((f"{name}: {value} above maximum {high}", float(high)))
    limit = rule.get("max_length")
    # Text as import keeps it: trimmed (a vault file's body ends with a newline).
    size = (
        len(value.strip()) if isinstance(value, str) else len(str(value)) if kind == "json" else 0
    )
    if limit is not None and size > limit:
        found.append((f"{name}: {size} characters, more than {limit}", None))
    if kind == "enum" and value not in rule.get("values", []):
        found.append((f"{name}: {value!r} is not one of {rule.get('values')}", None))
    if kind == "array":
        if rule.get("max_items") is not None and len(value) > rule["max_items"]:
            found.append((f"{name}: {len(value)} items, more than {rule['max_items']}", None))
        item = rule.get("item_type")
        if item and not all(_type_ok(v, item) for v in value):
            found.append((f"{name}: every item must be {item}", None))
    return found


class Linter:
    def __init__(self, schema: dict[str, Any], now: datetime | None = None) -> None:
        self.schema = schema
        self.now = now or datetime.now(UTC)
        self.report = Report(schema_version=str(schema.get("version")))
        self._seen: dict[tuple[str, ...], str] = {}  # a record's identity: where it was first
        self._edges: set[str] = set()
        self._edge_files: dict[str, str] = {}  # edge id: the file that wrote it first
        # edge id: its first record, as read and as checked
        self._edge_records: dict[str, tuple[Located | Record, Record]] = {}
        self._namespaces: dict[str, str] = {}  # memory id: its namespace

    def _add(
        self, rec: Located | Record, key: str | None, severity: str, message: str, fix: Any = None
    ) -> None:
        source = (
            getattr(rec, "source", None) or f"{rec.get('kind')} {rec.get('id') or rec.get('key')}"
        )
        line = rec.at(key) if isinstance(rec, Located) else None
        fixable = fix is not None and key is not None and line is not None
        pair = (str(key), fix) if fixable and not rec.get("from_relation") else None
        self.report.findings.append(Finding(severity, source, line, message, pair))

    def record(self, rec: Located | Record) -> None:
        kind = rec.get("kind")
        normal = dict(rec)  # as import reads it: check() fills defaults in place
        found = records.check(normal)
        # What the user wrote, and what import fills in where they wrote nothing (a field
        # import defaults is not missing: lint passes what import takes).
        values = {**normal, **rec}
        before = len(self.report.findings)
        if kind == "memory":
            self._memory(rec, values)
            if isinstance(normal.get("id"), str) and isinstance(normal.get("namespace"), str):
                self._namespaces.setdefault(normal["id"], normal["namespace"])
        elif isinstance(kind, str) and kind in SECTIONS:  # `"kind": []`: check() names it
            self._fields(rec, values, (self.schema.get(SECTIONS[kind]) or {}).get("schema", {}))
        errors = [f for f in self.report.findings[before:] if f.severity == "error"]
        edge = self._as_import(rec, normal, found, {f.message.split(":")[0] for f in errors})
        if edge is not None:  # one edge, however many files name it (its file, two relations)
            if edge in self._edges:
                return
            self._edges.add(edge)
        self.report.checked[str(kind)] = self.report.checked.get(str(kind), 0) + 1

    def finish(self) -> Report:
        """What only the whole snapshot shows, as import checks it: an edge whose memories
        are in another namespace (refused), or one the snapshot does not hold (the database
        must: else the edge dangles)."""
        for rec, checked in self._edge_records.values():
            for end in (checked["from_id"], checked["to_id"]):
                owner, ns = self._namespaces.get(end), checked["namespace"]
                if owner is None:
                    said = f"memory {end} is not in this snapshot: import needs it in the database"
                    self._add(rec, None, "warning", said)
                    break
                if owner != ns:
                    self._add(
                        rec, None, "error", f"edge in namespace {ns} but memory {end} is in {owner}"
                    )
                    break
        return self.report

    def _as_import(
        self,
        rec: Located | Record,
        checked: Record,
        found: list[tuple[str, str]],
        flagged: set[str],
    ) -> str | None:
        """What import would refuse that the schema lets through (a NUL, an unknown field, a
        duplicate id; `found` by records.check, which made `checked`): lint passes what
        import takes, and nothing it refuses. The id of an edge that passes (an edge named
        twice is the same edge), else None."""
        for key, message in found:
            if key not in flagged:
                self._add(rec, key, "error", message)
        if found:
            return None
        if checked.get("kind") == "edge":
            first_rec, earlier = self._edge_records.setdefault(str(checked["id"]), (rec, checked))
            differ = None if first_rec is rec else records.edge_disagreement(checked, earlier)
            if differ is not None:  # one edge edited in one place only: import refuses it
                mine = rec.get("from_relation")
                at, other = (rec, first_rec) if mine else (first_rec, rec)
                said, shown = (checked, earlier) if mine else (earlier, checked)
                line = other.at(differ) if isinstance(other, Located) else None
                there = f"{getattr(other, 'source', None) or 'edge'}" + (f":{line}" if line else "")
                self._add(at, differ, "error", records.disagreeing(said, shown, differ, there))
            if not rec.get("from_relation"):  # two records of one edge: import refuses it
                here = f"{getattr(rec, 'source', None) or 'edge'}"
                if isinstance(rec, Located) and rec.at("id") is not None and rec.lines:
                    here = f"{here}:{rec.at('id')}"  # a line of a JSON-lines file
                first = self._edge_files.setdefault(str(checked["id"]), here)
                if first != here:
                    self._add(
                        rec, "id", "error", f"duplicate edge {checked['id']} (also at {first})"
                    )
            return str(checked["id"])
        name = records.identity(checked)
        source = getattr(rec, "source", None) or " ".join(name)
        where = f"{source}:{rec.at('id') if isinstance(rec, Located) else ''}".rstrip(":")
        if name in self._seen:
            what = "duplicate id" if name[0] == "memory" else "duplicate preference"
            self._add(
                rec,
                "id" if name[0] == "memory" else "key",
                "error",
                f"{what} {name[-1]} (also at {self._seen[name]})",
            )
        else:
            self._seen[name] = where
        return None

    def _memory(self, rec: Located | Record, values: Record) -> None:
        named = values.get("type")  # `type: [a, b]` in a frontmatter is no name
        spec = self.schema["memory_types"].get(named) if isinstance(named, str) else None
        if spec is None:
            self._add(rec, "type", "error", f"type: unknown memory type {values.get('type')!r}")
            return
        rules = dict(spec["schema"])
        if "lifecycle" in rules and spec.get("lifecycle"):
            rules["lifecycle"] = {**rules["lifecycle"], "default": spec["lifecycle"]}
        if "updated" in rules and _is_time(values.get("created")):  # as text: --fix writes it
            rules["updated"] = {**rules["updated"], "default": timestamp(values.get("created"))}
        self._fields(rec, values, rules)
        days = spec.get("retention_days")
        updated = values.get("updated") or values.get("created")
        if days is not None and not values.get("pinned") and _is_time(updated):
            age = self.now - datetime.fromisoformat(timestamp(updated))
            if age > timedelta(days=days):
                self._add(
                    rec,
                    "updated",
                    "warning",
                    f"past retention: updated {age.days} days ago, {values.get('type')} "
                    f"keeps {days} days (pin it, update it, or forget it)",
                )

    def _fields(self, rec: Located | Record, values: Record, rules: dict[str, Any]) -> None:
        given = values.get("metadata")
        meta: dict[str, Any] = given if isinstance(given, dict) else {}
        for name, rule in rules.items():
            if not isinstance(rule, dict):
                continue
            value = values.get(name) if name in values else meta.get(name)
            if name == "type" and values.get("kind") == "edge" and isinstance(value, str):
                value = value.lower()
            for message, fix in check_field(name, value, rule):
                severity = "warning" if name == "type" and values.get("kind") == "edge" else "error"
                self._add(rec, name, severity, message, fix)


def lint(
    items: Iterable[Located | Problem | Record], schema: dict[str, Any], now: datetime | None = None
) -> Report:
    linter = Linter(schema, now)
    for item in items:
        if isinstance(item, Problem):
            linter.report.findings.append(Finding("error", item.source, item.line, item.message))
        else:
            linter.record(item)
    return linter.finish()


def fixes_by_file(report: Report) -> Iterator[tuple[str, list[Finding]]]:
    grouped: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.fix is not None:
            grouped.setdefault(f.source, []).append(f)
    yield from sorted(grouped.items())
