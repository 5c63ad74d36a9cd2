"""Import a snapshot: check all of it first, then apply it in one transaction.

Pass 1 reads every record, checks it (fields, duplicate ids, edges whose memories exist
neither in the snapshot nor in the database, ids this database forgot or keeps in another
namespace) and collects every problem with its file and line. With problems and without
`partial`, nothing is written. Pass 2 reads the snapshot again and applies it batch by batch
(`apply`): unchanged records are skipped, new ones inserted with their ids and times,
changed memories become new versions. Only the two passes' id sets are held in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys import deferred, secretscan, tenancy
from memsys.db import raise_if_cancelled, session_scope
from memsys.errors import Protected
from memsys.schemas.vault import MAX_LISTED
from memsys.services import namespaces
from memsys.vault import apply, records
from memsys.vault import restore as restore_mode
from memsys.vault.files import Snapshot
from memsys.vault.records import UNEDITED, Located, Problem, Record

BATCH = 256
# An import that adds at least this many memories refreshes the planner's statistics of the
# tables it grew, inside its own transaction (they commit with the rows). Autovacuum would
# within a minute; until then the graph walk planned on an "empty" edge table read every
# mention edge of the namespace per seed (benchmarks/README.md, "With mention edges").
ANALYZE_AFTER = 1_000
_ANALYZE = text("ANALYZE chunk, edge, entity")
# Restore mode also refreshes them once early, when that many memories are written: planned
# on the statistics of empty tables, the lookups of each batch (content held by another
# memory, the entities it names) read every row of the namespace once PostgreSQL settles on
# a generic plan, at its 11th batch, and an import slowed as it grew (10k memories: 2 s of
# the server's CPU, mostly in the last batches). Elsewhere the ANALYZE's lock, held until
# the import commits, would make a concurrent import's own ANALYZE wait.
ANALYZE_EARLY = 1_000
LOOKUP = 2000

# Memories a purge erased: the event log keeps that it happened (and the id), nothing more.
_PURGED = text(
    """
    SELECT DISTINCT subject_id FROM event
    WHERE event_type = 'purge' AND subject_kind = 'memory'
      AND subject_id = ANY(CAST(:ids AS text[]))
    """
)
# A document's chunks share the memories' ids (the key is namespace and id): a memory under
# one of their ids would fail the insert (UniqueViolation, the whole import rolled back).
_TAKEN = text(
    """
    SELECT DISTINCT id, namespace FROM chunk
    WHERE doc_type <> 'memory' AND id = ANY(CAST(:ids AS text[]))
    """
)
_KNOWN = text(
    """
    SELECT id, namespace, valid_to IS NULL AS live FROM chunk
    WHERE doc_type = 'memory' AND id = ANY(CAST(:ids AS text[]))
    """
)
_HELD = text("SELECT DISTINCT id, namespace FROM chunk WHERE id = ANY(CAST(:ids AS text[]))")


def _held_unseen(ids: list[str]) -> set[str]:
    """The ids a scoped caller's import may not take: held in a namespace it cannot read.
    Memory ids are unique across namespaces (the admin's calls by id find one row), but the
    policies hide those rows from the import's own checks: beta's id was stored in acme,
    and the admin's memory_get then answered acme's text for it. Looked up as the admin,
    told as `unavailable` (no namespace, no content, not even that the id exists)."""
    if tenancy.current().admin or not ids:
        return set()
    with tenancy.using(tenancy.ADMIN), deferred.not_waiting(), session_scope() as side:
        held = [
            (row.id, row.namespace)
            for start in range(0, len(ids), LOOKUP)
            for row in side.execute(_HELD, {"ids": ids[start : start + LOOKUP]})
        ]
    return {memory_id for memory_id, ns in held if not tenancy.may_read(ns)}


def unavailable(memory_id: str) -> str:
    """A scoped caller's refusal of an id held where it cannot read. Worded as a rule of the
    token, not as a fact of the database: "taken" confirmed that the id exists in another
    namespace. (The admin reads every namespace and is told where the id is instead.)"""
    return f"id {memory_id} cannot be imported with this token: give the memory another id"


@dataclass
class Counts:
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    duplicate: int = 0


@dataclass
class Report:
    """What an import found and did (or, in a dry run, would do)."""

    dry_run: bool
    partial: bool
    applied: bool = False
    memories: Counts = field(default_factory=Counts)
    edges: Counts = field(default_factory=Counts)
    preferences: Counts = field(default_factory=Counts)
    problems: list[Problem] = field(default_factory=list)
    versions: list[dict[str, str]] = field(default_factory=list)  # memory id → superseded copy
    # Secret-like texts (memsys.secretscan): the first MAX_LISTED, and how many in all (an
    # import of a million flagged records holds no million strings).
    warnings: list[str] = field(default_factory=list)
    warning_count: int = 0

    def flag(self, found: list[str]) -> None:
        """Count a record's warnings, keeping them while fewer than MAX_LISTED are kept."""
        self.warning_count += len(found)
        self.warnings += found[: MAX_LISTED - len(self.warnings)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "partial": self.partial,
            "applied": self.applied,
            "memories": vars(self.memories),
            "edges": vars(self.edges),
            "preferences": vars(self.preferences),
            "problems": [
                {"source": p.source, "line": p.line, "message": p.message} for p in self.problems
            ],
            "versions": self.versions,
            "warnings": self.warnings,
            "warning_count": self.warning_count,
        }


@dataclass
class _Seen:
    memories: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (ns, where)
    edges: dict[str, tuple[Located, bool]] = field(default_factory=dict)  # id → (rec, file)
    preferences: dict[tuple[str, str], str] = field(default_factory=dict)
    bad: set[str] = field(default_factory=set)  # memory ids and edge ids to skip
    unedited: set[str] = field(default_factory=set)  # memory ids of files as memsys wrote them
    forgotten: set[str] = field(default_factory=set)  # of those, forgotten since: skipped


def _where(rec: Located, key: str | None = None) -> str:
    line = rec.at(key)
    return rec.source if line is None else f"{rec.source}:{line}"


def _problem(rec: Located, key: str | None, message: str) -> Problem:
    return Problem(rec.source, rec.at(key), message)


def _checked(snapshot: Snapshot, seen: _Seen, problems: list[Problem]) -> Iterator[Located]:
    """Records that pass their own checks and are not duplicates (pass 1)."""
    for item in snapshot.items():
        if isinstance(item, Problem):
            problems.append(item)
            continue
        found = records.check(item)
        if found:
            problems += [_problem(item, key, msg) for key, msg in found]
            if item.get("kind") == "memory" and isinstance(item.get("id"), str):
                seen.bad.add(item["id"])
            continue
        kind = item["kind"]
        if kind == "memory":
            first = seen.memories.get(item["id"])
            if first is not None:
                problems.append(
                    _problem(item, "id", f"duplicate id {item['id']} (also at {first[1]})")
                )
                seen.bad.add(item["id"])
                continue
            seen.memories[item["id"]] = (item["namespace"], _where(item, "id"))
            if item.get(UNEDITED):
                seen.unedited.add(item["id"])
        elif kind == "preference":
            name = (item["namespace"], item["key"])
            if name in seen.preferences:
                where = seen.preferences[name]
                problems.append(_problem(item, "key", f"duplicate preference (also at {where})"))
                continue
            seen.preferences[name] = _where(item, "key")
        yield item


def _edge_seen(seen: _Seen, rec: Located, problems: list[Problem]) -> None:
    """Keep one record per edge id: an edge file wins over a relation in frontmatter. Two
    records of one edge that disagree (a strength edited in a note's relations, its edge
    file left as it was) are a problem, never one edit silently dropped."""
    from_file = not rec.get("from_relation")
    first = seen.edges.get(rec["id"])
    if first is not None and not (from_file and first[1]):
        name = records.edge_disagreement(rec, first[0])
        if name is not None:
            at, other = (rec, first[0]) if rec.get("from_relation") else (first[0], rec)
            message = records.disagreeing(at, other, name, _where(other, name))
            problems.append(_problem(at, name, message))
    if first is None or (from_file and not first[1]):
        seen.edges[rec["id"]] = (rec, from_file)
    elif from_file and first[1]:
        where = _where(first[0])
        problems.append(_problem(rec, "id", f"duplicate edge {rec['id']} (also at {where})"))


def _check_database(session: Session, seen: _Seen, problems: list[Problem]) -> None:
    """Ids the database forgot, purged or keeps in another namespace; edges with a missing
    end."""
    ids = list(seen.memories)
    known: dict[str, tuple[str, bool]] = {}
    purged: set[str] = set()
    for start in range(0, len(ids), LOOKUP):
        part = {"ids": ids[start : start + LOOKUP]}
        for row in session.execute(_KNOWN, part):
            if row.live or row.id not in known:
                known[row.id] = (row.namespace, row.live)
        purged.update(session.scalars(_PURGED, part))
        for row in session.execute(_TAKEN, part):
            ns, where = seen.memories[row.id]
            if row.namespace == ns:
                problems.append(
                    _at(
                        where, f"id {row.id} is a document chunk's here: give the memory another id"
                    )
                )
                seen.bad.add(row.id)
    for memory_id in sorted(_held_unseen(ids)):
        _, where = seen.memories[memory_id]
        problems.append(_at(where, unavailable(memory_id)))
        seen.bad.add(memory_id)
    for memory_id, (ns, where) in seen.memories.items():
        if memory_id in purged and memory_id not in known:
            problems.append(
                _at(
                    where,
                    f"memory {memory_id} was purged in this database: import does not bring "
                    "back what a purge erased (remove it from the snapshot, or store it anew)",
                )
            )
            seen.bad.add(memory_id)
            continue
        if memory_id not in known:
            continue
        there, live = known[memory_id]
        if there != ns:
            problems.append(
                _at(
                    where,
                    f"memory {memory_id} is in namespace {there} here, "
                    f"not {ns}: import does not move memories",
                )
            )
            seen.bad.add(memory_id)
        elif not live and memory_id in seen.unedited:
            # Forgotten after memsys wrote the file: the forget stands, and the next export
            # removes the file.
            seen.bad.add(memory_id)
            seen.forgotten.add(memory_id)
        elif not live:
            problems.append(
                _at(
                    where,
                    f"memory {memory_id} was forgotten in this database: "
                    "import does not bring it back (store it anew)",
                )
            )
            seen.bad.add(memory_id)
    ends = {e for rec, _ in seen.edges.values() for e in (rec["from_id"], rec["to_id"])}
    outside = sorted(ends - set(seen.memories))
    live_outside: dict[str, str] = {}
    for start in range(0, len(outside), LOOKUP):
        for row in session.execute(_KNOWN, {"ids": outside[start : start + LOOKUP]}):
            if row.live:
                live_outside[row.id] = row.namespace
    for edge_id, (rec, _) in seen.edges.items():
        for end in (rec["from_id"], rec["to_id"]):
            owner: str | None = (
                seen.memories[end][0] if end in seen.memories else live_outside.get(end)
            )
            if owner is None:
                problems.append(
                    _problem(
                        rec,
                        None,
                        f"dangling edge: memory {end} is neither "
                        "in this snapshot nor in the database",
                    )
                )
                seen.bad.add(edge_id)
                break
            if owner != rec["namespace"]:
                problems.append(
                    _problem(
                        rec,
                        None,
                        f"edge in namespace {rec['namespace']} but memory {end} is in {owner}",
                    )
                )
                seen.bad.add(edge_id)
                break
            if end in seen.forgotten and not rec.get(UNEDITED):
                # an edge edited by hand to a memory forgotten since: its edit cannot apply
                problems.append(
                    _problem(
                        rec,
                        None,
                        f"memory {end} was forgotten in this database: "
                        "an edge to it is not imported (store the memory anew)",
                    )
                )
            if end in seen.bad:
                seen.bad.add(edge_id)


def _at(where: str, message: str) -> Problem:
    source, _, line = where.rpartition(":")
    if source and line.isdigit():
        return Problem(source, int(line), message)
    return Problem(where, None, message)


def _read(snapshot: Snapshot) -> tuple[_Seen, list[Problem]]:
    """Pass 1 over the file alone: every problem of its records, and what pass 2 must skip."""
    seen, problems = _Seen(), list[Problem]()
    for rec in _checked(snapshot, seen, problems):
        if rec["kind"] == "edge":
            _edge_seen(seen, rec, problems)
    return seen, problems


def _as_checked(rec: Located, seen: _Seen) -> bool:
    """Whether pass 2 reads a record as pass 1 did: a memory or preference of the namespace
    it was checked (and the namespace's turn taken) in."""
    if rec["kind"] == "memory":
        first = seen.memories.get(rec["id"])
        return first is not None and first[0] == rec["namespace"]
    if rec["kind"] == "preference":
        return (rec["namespace"], rec["key"]) in seen.preferences
    return True


def _namespaces(seen: _Seen) -> set[str]:
    """Every namespace the snapshot writes in."""
    names = {ns for ns, _ in seen.memories.values()} | {ns for ns, _ in seen.preferences}
    return names | {rec["namespace"] for rec, _ in seen.edges.values()}


def _flagged(rec: Located) -> list[str]:
    """The secret warnings of a record's text, with its file and line (memory_store flags
    its content so, preference_set its value): imported all the same."""
    if rec["kind"] == "memory":
        return secretscan.warnings(str(rec["content"]), f"{_where(rec, 'content')}: content")
    if rec["kind"] == "preference":
        text = secretscan.value_text(rec["value"])
        return secretscan.warnings(text, f"{_where(rec, 'value')}: value")
    return []


def run(
    session: Session,
    snapshot: Snapshot,
    dry_run: bool = False,
    partial: bool = False,
    restore: bool = False,
) -> Report:
    """Check the snapshot, then (unless told not to, or refused) apply it in this session;
    `restore`: with the vector index built once after the writes (memsys/vault/restore.py)."""
    report = Report(dry_run=dry_run, partial=partial)
    seen, report.problems = _read(snapshot)
    # A dry run counts what the valid records would change even beside problems (what a
    # partial import would apply): its zeros read as "nothing to import".
    if report.problems and not (partial or dry_run):
        return report
    names = _namespaces(seen)
    # A dry run is refused as the import would be: it counted the rows of namespaces the
    # caller cannot read as new (the policies hid them), for a read-only token too.
    refused = sorted(n for n in names if not tenancy.may_write(n))
    if refused:
        raise Protected(f"{tenancy.denied_message()}; the file writes in {', '.join(refused)}")
    if not dry_run:
        # Before it reads a table: writers of these namespaces wait for the import at their
        # start, holding nothing (up to MEMSYS_BUSY_WAIT_S, then refused: errors.Busy), and
        # the import waits for those already running (a second import of the same
        # namespaces, too) holding nothing either.
        namespaces.write_alone(session, names)
    _check_database(session, seen, report.problems)
    report.memories.unchanged += len(seen.forgotten)
    if report.problems and not (partial or dry_run):
        return report
    rebuild = restore and not dry_run
    checked = len(report.problems)
    # Pass 2 finds what only the database shows (an edit to a text another memory holds):
    # its writes stay undone, unless partial, when it finds a problem.
    point = session.begin_nested() if not dry_run else None
    plan = apply.Plan(session, dry_run, report, halt_on_problem=not partial)
    with (
        restore_mode.vector_index_built_after(session, lambda: not plan.halted)
        if rebuild
        else nullcontext(),
        plan,
    ):
        batch: list[Record] = []
        analyzed = not rebuild
        for rec in _checked(snapshot, _Seen(), []):
            if not _as_checked(rec, seen):
                continue  # the file changed between the passes: only what was checked
            if rec["kind"] == "memory" and rec["id"] in seen.bad:
                continue  # refused in pass 1 (a problem): neither stored nor flagged
            report.flag(_flagged(rec))
            if rec["kind"] == "memory":
                batch.append(rec)
                if len(batch) >= BATCH:
                    raise_if_cancelled()  # a cancelled import stops between batches
                    plan.memories(batch)
                    batch = []
                    if not analyzed and plan.written >= ANALYZE_EARLY:
                        session.execute(_ANALYZE)
                        analyzed = True
            elif rec["kind"] == "preference":
                plan.preference(rec)
        if batch:
            raise_if_cancelled()
            plan.memories(batch)
        plan.finish()  # every memory written before the edges that name them
        kept: list[Record] = [
            rec for key, (rec, _) in sorted(seen.edges.items()) if key not in seen.bad
        ]
        for start in range(0, len(kept), BATCH):
            raise_if_cancelled()
            plan.edges(kept[start : start + BATCH])
    if len(report.problems) > checked and not partial:
        if point is not None:
            point.rollback()
        return report
    if point is not None:
        point.commit()
    if not dry_run and report.memories.new >= ANALYZE_AFTER:
        session.execute(_ANALYZE)
    report.applied = not dry_run
    return report
