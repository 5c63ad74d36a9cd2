"""The live database as snapshot records, read page by page (keyset pagination: each page is
one short query, so memory stays flat at any size and other queries may run in between).

Exported: live memories, live edges between two live memories, current preferences.
Document chunks are left out (they come back by indexing their files again), and so are
the entities and `mentions` edges memsys derives from memory text on every write.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.models.chunk import AGED
from memsys.services.history import full_texts
from memsys.vault.records import Record, edge_id, ordered, timestamp

PAGE = 1000

_MEMORIES = text(
    """
    SELECT namespace, id, memory_type, content, content_hash, importance, confidence, tags,
           lifecycle, stage, pinned, metadata, occurred_at, created_at, updated_at
    FROM chunk
    WHERE doc_type = 'memory' AND valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
      AND (namespace, id) > (:after_ns, :after_id)
    ORDER BY namespace, id
    LIMIT :page
    """
)
_EDGE_COLUMNS = """
    SELECT DISTINCT ON (e.namespace, e.source_id, e.relation, e.target_id)
           e.namespace, e.source_id, e.relation, e.target_id, e.weight, e.context, e.created_at,
           s.content AS source_content, s.metadata AS source_meta,
           t.content AS target_content, t.metadata AS target_meta
    FROM edge e
    JOIN chunk s ON s.namespace = e.namespace AND s.id = e.source_id
         AND s.doc_type = 'memory' AND s.valid_to IS NULL
    JOIN chunk t ON t.namespace = e.namespace AND t.id = e.target_id
         AND t.doc_type = 'memory' AND t.valid_to IS NULL
    WHERE e.valid_to IS NULL AND e.source_kind = 'chunk' AND e.target_kind = 'chunk'
"""
_EDGES = text(
    _EDGE_COLUMNS
    + """
      AND (CAST(:namespace AS text) IS NULL OR e.namespace = :namespace)
      AND (e.namespace, e.source_id, e.relation, e.target_id) > (:ns, :src, :rel, :tgt)
    ORDER BY e.namespace, e.source_id, e.relation, e.target_id, e.id
    LIMIT :page
    """
)
_EDGES_OF = text(
    _EDGE_COLUMNS
    + """
      AND e.namespace = :namespace
      AND (e.source_id = ANY(CAST(:ids AS text[])) OR e.target_id = ANY(CAST(:ids AS text[])))
    ORDER BY e.namespace, e.source_id, e.relation, e.target_id, e.id
    """
)
_PREFERENCES = text(
    """
    SELECT namespace, key, value, lifecycle FROM preference
    WHERE valid_to IS NULL AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
    ORDER BY namespace, key
    """
)


def snapshot(session: Session) -> None:
    """Make the session's reads from here on one snapshot of the database: a REPEATABLE READ,
    READ ONLY transaction. Each page is a statement of its own, and under READ COMMITTED a
    write landing between two of them was read in part (an edge written after the memories
    were read, between a new memory and an exported one: a dangling edge, and a file that
    refuses to import). A transaction's isolation is set at its start, so what the session
    did before (a namespace check) is committed first. Once per transaction."""
    if session.info.get("memsys_snapshot") is session.get_transaction() is not None:
        return
    session.commit()
    options = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
    session.connection(execution_options=options)
    tenancy.apply(session)  # a scoped caller's namespaces, set for this transaction again
    session.info["memsys_snapshot"] = session.get_transaction()


def canonical(value: Any) -> Any:
    """JSON data with object keys sorted at every depth: one text form per value."""
    return json.loads(json.dumps(value, sort_keys=True))


def title(content: str, metadata: dict[str, Any] | None) -> str:
    """A memory's title (S003 wants one): metadata.title, else its first line, shortened."""
    given = (metadata or {}).get("title")
    if isinstance(given, str) and given.strip():
        return " ".join(given.split())[:120]
    for line in content.splitlines():
        line = " ".join(line.strip().lstrip("#").split())
        if line:
            return line if len(line) <= 80 else line[:79] + "…"
    return "memory"


def memory_record(row: Any, full: str | None = None) -> Record:
    """A memory as a snapshot holds it: an aged one with its `full` text (from its history),
    not the summary or key aging left in its row."""
    return ordered(
        {
            "kind": "memory",
            "id": row.id,
            "namespace": row.namespace,
            "type": row.memory_type,
            "content": row.content if full is None else full,
            "content_hash": row.content_hash,
            "importance": float(row.importance),
            "confidence": float(row.confidence),
            "tags": sorted(row.tags or []),
            "lifecycle": row.lifecycle,
            "stage": row.stage,
            "pinned": bool(row.pinned),
            "metadata": canonical(row.metadata or {}),
            "happened": None if row.occurred_at is None else timestamp(row.occurred_at),
            "created": timestamp(row.created_at),
            "updated": timestamp(row.updated_at),
        }
    )


def edge_record(row: Any) -> Record:
    """An edge, with both memories' titles for the vault (dropped from JSON)."""
    return {
        "kind": "edge",
        "id": edge_id(row.namespace, row.source_id, row.relation, row.target_id),
        "namespace": row.namespace,
        "type": row.relation,
        "from_id": row.source_id,
        "to_id": row.target_id,
        "strength": float(row.weight),
        "context": row.context or None,
        "created": timestamp(row.created_at),
        "from_title": title(row.source_content, row.source_meta),
        "to_title": title(row.target_content, row.target_meta),
    }


def memories(session: Session, namespace: str | None = None) -> Iterator[list[Record]]:
    """Live memories in (namespace, id) order, a page at a time."""
    after = ("", "")
    while True:
        rows = session.execute(
            _MEMORIES,
            {"namespace": namespace, "after_ns": after[0], "after_id": after[1], "page": PAGE},
        ).all()
        if not rows:
            return
        aged = [(r.namespace, r.id, r.content) for r in rows if r.stage in AGED]
        texts = full_texts(session, aged)
        yield [memory_record(r, texts.get((r.namespace, r.id))) for r in rows]
        after = (rows[-1].namespace, rows[-1].id)


def edges(session: Session, namespace: str | None = None) -> Iterator[Record]:
    """Live edges between live memories, in (namespace, from, type, to) order."""
    after = ("", "", "", "")
    while True:
        page = {"ns": after[0], "src": after[1], "rel": after[2], "tgt": after[3]}
        rows = session.execute(_EDGES, {"namespace": namespace, "page": PAGE, **page}).all()
        if not rows:
            return
        yield from (edge_record(r) for r in rows)
        last = rows[-1]
        after = (last.namespace, last.source_id, last.relation, last.target_id)


def edges_of(session: Session, page: list[Record]) -> list[Record]:
    """The edges touching a page of memories (for S003's `relations` frontmatter)."""
    found: list[Record] = []
    by_ns: dict[str, list[str]] = {}
    for rec in page:
        by_ns.setdefault(rec["namespace"], []).append(rec["id"])
    for ns, ids in by_ns.items():
        rows = session.execute(_EDGES_OF, {"namespace": ns, "ids": ids}).all()
        found += [edge_record(r) for r in rows]
    return found


def preferences(session: Session, namespace: str | None = None) -> Iterator[Record]:
    for row in session.execute(_PREFERENCES, {"namespace": namespace}):
        yield ordered(
            {
                "kind": "preference",
                "namespace": row.namespace,
                "key": row.key,
                "value": canonical(row.value),
                "lifecycle": row.lifecycle,
            }
        )


def records(session: Session, namespace: str | None = None) -> Iterator[Record]:
    """Every record of the snapshot: memories, then edges, then preferences, read in one
    snapshot of the database."""
    snapshot(session)
    for page in memories(session, namespace):
        yield from page
    for edge in edges(session, namespace):
        yield ordered(edge)
    yield from preferences(session, namespace)
