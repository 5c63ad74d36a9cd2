"""Diff two snapshots (files, folders, or the live database): records added, removed, and
changed field by field. Both sides are read in this memsys's schema version (older files are
upgraded as they are read), so snapshots of different versions compare field for field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.errors import InvalidInput
from memsys.jsonvalue import same
from memsys.vault import files, live, records
from memsys.vault.records import Located, Problem, Record

LIVE = "live"
SHOWN_PROBLEMS = 20
UNKNOWN = "(not in the snapshot)"  # a value a snapshot does not hold
IGNORED = {"kind", "id", "content_hash"}  # identity, and what content already says


def _key(rec: Record) -> tuple[str, str]:
    if rec["kind"] == "preference":
        return ("preference", f"{rec['namespace']}/{rec['key']}")
    return (rec["kind"], rec["id"])


def _readable(item: Located) -> bool:
    """Whether the caller may read the record's namespace (one it cannot name is left to
    the checks): a scoped token diffing an admin's export saw the ids of other namespaces'
    rows, and their names, listed as removed."""
    namespace = item.get("namespace")
    return not isinstance(namespace, str) or tenancy.may_read(namespace)


def read(session: Session, source: str, namespace: str | None) -> dict[tuple[str, str], Record]:
    """A snapshot as {(kind, id): record}; a snapshot with problems is refused, listing them."""
    found: dict[tuple[str, str], Record] = {}
    if source == LIVE:
        return {_key(r): r for r in live.records(session, namespace)}
    problems: list[Problem] = []
    from_file: set[tuple[str, str]] = set()
    seen: dict[tuple[str, str], Located] = {}  # each edge's first record, as read
    for item in files.open_snapshot(source).items():
        if isinstance(item, Problem):
            problems.append(item)
            continue
        if not _readable(item):  # a row the policies would hide, were it in the database
            continue
        issues = records.check(item)
        if issues:
            problems += [Problem(item.source, item.at(k), m) for k, m in issues]
            continue
        if namespace is not None and item["namespace"] != namespace:
            continue
        key = _key(item)
        relation_only = bool(item.get("from_relation"))
        first = seen.setdefault(key, item) if item["kind"] == "edge" else item
        differ = None if first is item else records.edge_disagreement(item, first)
        if differ is not None:  # edited in one place only: as import and lint refuse it
            at, other = (item, first) if relation_only else (first, item)
            there = f"{other.source}:{other.at(differ)}" if other.at(differ) else other.source
            problems.append(
                Problem(at.source, at.at(differ), records.disagreeing(at, other, differ, there))
            )
        if key in found:
            if relation_only:  # the edge file (or an earlier relation) has it already
                continue
            if key in from_file:
                problems.append(Problem(item.source, item.at("id"), f"duplicate {key[1]}"))
                continue
        if not relation_only:
            from_file.add(key)
        found[key] = records.ordered(item)
        if relation_only:  # a relation holds no time: the one read is its memory's
            found[key]["created"] = UNKNOWN
        if item.get(records.HAPPENED_UNKNOWN):  # a file from before `happened` existed
            found[key]["happened"] = UNKNOWN
    if problems:
        shown = "; ".join(str(p) for p in problems[:SHOWN_PROBLEMS])
        more = (
            f" (and {len(problems) - SHOWN_PROBLEMS} more)"
            if len(problems) > SHOWN_PROBLEMS
            else ""
        )
        raise InvalidInput(f"{source} has {len(problems)} problem(s): {shown}{more}")
    return found


def changed_fields(a: Record, b: Record) -> dict[str, dict[str, Any]]:
    """Each field that differs; one a side does not know (UNKNOWN) is no difference."""
    names = [k for k in records.KEYS[a["kind"]] if k not in IGNORED]
    return {
        name: {"before": a.get(name), "after": b.get(name)}
        for name in names
        if not same(a.get(name), b.get(name)) and UNKNOWN not in (a.get(name), b.get(name))
    }


def compare(a: dict[tuple[str, str], Record], b: dict[tuple[str, str], Record]) -> dict[str, Any]:
    """{added, removed, changed, counts, identical}: b relative to a."""
    added = [{"kind": k, "id": i} for (k, i) in sorted(b.keys() - a.keys())]
    removed = [{"kind": k, "id": i} for (k, i) in sorted(a.keys() - b.keys())]
    changed = []
    for key in sorted(a.keys() & b.keys()):
        fields = changed_fields(a[key], b[key])
        if fields:
            changed.append({"kind": key[0], "id": key[1], "fields": fields})
    counts = {"added": len(added), "removed": len(removed), "changed": len(changed)}
    counts["unchanged"] = len(a.keys() & b.keys()) - len(changed)
    return {
        "added": added,
        "removed": removed,
        "changed": changed,
        "counts": counts,
        "identical": not (added or removed or changed),
    }


def lines(result: dict[str, Any]) -> Iterable[str]:
    """The diff for a person: + added, - removed, ~ changed with each field's before/after."""
    for entry in result["added"]:
        yield f"+ {entry['kind']} {entry['id']}"
    for entry in result["removed"]:
        yield f"- {entry['kind']} {entry['id']}"
    for entry in result["changed"]:
        yield f"~ {entry['kind']} {entry['id']}"
        for name, change in entry["fields"].items():
            yield f"    {name}: {_short(change['before'])} -> {_short(change['after'])}"


def _short(value: Any, limit: int = 100) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
