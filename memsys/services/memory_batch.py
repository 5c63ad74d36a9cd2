"""Many memories stored in a handful of statements (memory_store_batch, and the knowledge
graph's create_entities / add_observations, which store every observation as a memory).

The rules are memory_store's (memsys.services.memories.store): a live memory of the same
content in the namespace is returned as a duplicate (also within one batch: the first copy is
stored, the later ones point at it); golden rules start fully confident, everything else
unproven; the lifecycle defaults by type; each new memory is linked to the entities it
mentions and logged with a `create` event. Only the shape differs: per namespace, one
statement locks the content hashes (sorted, so two batches with shared contents take turns
instead of deadlocking), one reads the live duplicates, one multi-row INSERT writes the new
rows (ON CONFLICT DO NOTHING: a single memory_store racing the batch wins, and its row is
read back as a duplicate), then one call links the mentions and one INSERT writes the events.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import func, insert, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from memsys import ids, secretscan
from memsys.db import take_turns_all
from memsys.models import Chunk, Event
from memsys.schemas import MemoryStoreIn, MemoryStoreOut
from memsys.services import mentions, namespaces
from memsys.tokens import count_tokens_batch
from memsys.vocabulary import GOLDEN_RULE

INITIAL_CONFIDENCE = 0.3  # S001: a new memory is unproven; TRY/LEARN moves it
DEFAULT_LIFECYCLE = {"preference": "personal", "session": "session"}


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


_OUT = (Chunk.id, Chunk.content_hash, Chunk.memory_type, Chunk.confidence, Chunk.importance)


def _out(row: Any, namespace: str, duplicate: bool) -> MemoryStoreOut:
    return MemoryStoreOut(
        id=row.id,
        content_hash=f"sha256_{row.content_hash}",
        namespace=namespace,
        memory_type=row.memory_type or "",
        duplicate=duplicate,
        confidence=row.confidence,
        importance=row.importance,
    )


def _live(session: Session, namespace: str, digests: list[str]) -> dict[str, Any]:
    rows = session.execute(
        select(*_OUT).where(
            Chunk.namespace == namespace,
            Chunk.doc_type == "memory",
            Chunk.valid_to.is_(None),
            Chunk.content_hash.in_(digests),
        )
    )
    return {r.content_hash: r for r in rows}


def _row(item: MemoryStoreIn, digest: str, tokens: int, vector: np.ndarray) -> dict[str, Any]:
    return {
        "namespace": item.namespace,
        "id": ids.new_id(ids.MEMORY),
        "doc_type": "memory",
        "content": item.content,
        "content_hash": digest,
        "token_count": tokens,
        "embedding": vector,
        "memory_type": item.memory_type,
        "importance": item.importance,
        "confidence": 1.0 if item.memory_type == GOLDEN_RULE else INITIAL_CONFIDENCE,
        "tags": item.tags or [],
        "meta": item.metadata or {},
        "lifecycle": item.lifecycle or DEFAULT_LIFECYCLE.get(item.memory_type, "project"),
        "occurred_at": item.reference_time,
    }


# The statement's own clock per row, not the transaction's: memories stored in one batch keep
# the order they were given in (the neighbourhood channel reads it).
_INSERT = (
    pg_insert(Chunk)
    .values(created_at=func.clock_timestamp())
    .on_conflict_do_nothing(
        index_elements=["namespace", "content_hash"],
        index_where=text("doc_type = 'memory' AND valid_to IS NULL"),
    )
    .returning(*_OUT)
)


def _store_namespace(
    session: Session, namespace: str, items: list[tuple[int, MemoryStoreIn, str, np.ndarray]]
) -> dict[int, MemoryStoreOut]:
    """Store one namespace's share of a batch; (position, item, digest, vector) in order."""
    namespaces.ensure(session, namespace)
    digests = sorted({d for _, _, d, _ in items})
    take_turns_all(session, [(namespace, "memory", d) for d in digests])
    found = _live(session, namespace, digests)
    first: dict[str, tuple[MemoryStoreIn, np.ndarray]] = {}
    for _, item, digest, vector in items:
        if digest not in found:
            first.setdefault(digest, (item, vector))
    written: dict[str, Any] = {}
    if first:
        tokens = count_tokens_batch([item.content for item, _ in first.values()])
        rows = [
            _row(item, digest, n, vector)
            for (digest, (item, vector)), n in zip(first.items(), tokens, strict=True)
        ]
        written = {r.content_hash: r for r in session.execute(_INSERT, rows)}
        raced = [d for d in first if d not in written]  # a concurrent memory_store won
        found.update(_live(session, namespace, raced) if raced else {})
        contents = {d: item.content for d, (item, _) in first.items() if d in written}
        mentions.link(session, namespace, [(written[d].id, c) for d, c in contents.items()])
        session.execute(
            insert(Event),
            [
                {
                    "namespace": namespace,
                    "event_type": "create",
                    "operation": "memory_store",
                    "subject_kind": "memory",
                    "subject_id": written[d].id,
                    "payload": {"memory_type": first[d][0].memory_type, "content_hash": d},
                    "session_id": None,
                }
                for d in contents
            ],
        )
    out: dict[int, MemoryStoreOut] = {}
    seen: dict[str, MemoryStoreOut] = {}
    for position, item, digest, _ in items:
        if digest in seen:  # a later copy within the batch: the first one's answer
            out[position] = seen[digest].model_copy(update={"duplicate": True, "warnings": []})
            continue
        if digest in written:
            stored = _out(written[digest], namespace, duplicate=False)
            stored.warnings = secretscan.warnings(item.content)
        else:
            stored = _out(found[digest], namespace, duplicate=True)
        seen[digest] = out[position] = stored
    return out


def store_many(
    session: Session, items: Sequence[MemoryStoreIn], vectors: Sequence[np.ndarray]
) -> list[MemoryStoreOut]:
    """Store memories already embedded (vectors[i] is items[i]'s), in the caller's
    transaction; one result per item, in order, as memory_store would have answered."""
    by_namespace: dict[str, list[tuple[int, MemoryStoreIn, str, np.ndarray]]] = {}
    for i, item in enumerate(items):
        by_namespace.setdefault(item.namespace, []).append(
            (i, item, content_hash(item.content), vectors[i])
        )
    results: dict[int, MemoryStoreOut] = {}
    for namespace, share in by_namespace.items():
        results.update(_store_namespace(session, namespace, share))
    return [results[i] for i in range(len(items))]
