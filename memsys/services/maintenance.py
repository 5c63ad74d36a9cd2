"""S001's graph maintenance: memory_detect_contradictions (B19), memory_check_supersedes (B20),
memory_backfill_edges (B22). Candidates come from pgvector (cosine similarity of the stored
embeddings, same namespace, live memories); the opposition test is memsys.contradiction's
rules; edges go through edges.relate (one per pair and relation)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys import contradiction
from memsys.embeddings import get_embedder
from memsys.errors import NotFound
from memsys.models import Chunk
from memsys.retrieval import dense
from memsys.schemas.edges import MemoryRelateIn
from memsys.schemas.maintenance import (
    BackfillEdgesIn,
    BackfillEdgesOut,
    CheckSupersedesIn,
    CheckSupersedesOut,
    Contradiction,
    DetectContradictionsIn,
    DetectContradictionsOut,
)
from memsys.services import decay, edges, events, memories, mentions, namespaces
from memsys.vocabulary import is_golden

CANDIDATES = 20
SUPERSEDE_SIMILARITY = 0.75

_NEAREST = text(
    """
    SELECT c.id, c.content, c.created_at,
           1 - (c.embedding <=> CAST(:embedding AS vector)) AS similarity
    FROM chunk c
    WHERE c.namespace = :ns AND c.doc_type = 'memory' AND c.valid_to IS NULL AND c.id <> :id
      AND c.embedding IS NOT NULL
    ORDER BY c.embedding <=> CAST(:embedding AS vector)
    LIMIT :k
    """
)
_ORPHANS = text(
    """
    SELECT c.namespace, c.id, c.content
    FROM chunk c
    WHERE c.doc_type = 'memory' AND c.valid_to IS NULL
      AND (CAST(:ns AS text) IS NULL OR c.namespace = :ns)
      AND NOT EXISTS (
          SELECT 1 FROM edge e
          WHERE e.namespace = c.namespace AND e.valid_to IS NULL
            AND (e.source_id = c.id OR e.target_id = c.id))
    ORDER BY c.created_at, c.id
    LIMIT :limit
    """
)


def _nearest(session: Session, memory: Chunk, threshold: float) -> list[Any]:
    """The memory's nearest live neighbours by meaning, most similar first. A memory still
    waiting on the embedding queue for its vector (an upgrade queued it to be embedded
    whole) is embedded here, as the queue will embed it."""
    stored = memory.embedding
    vector = get_embedder().embed_one(memory.content) if stored is None else np.asarray(stored)
    params = {"ns": memory.namespace, "id": memory.id, "k": CANDIDATES}
    rows = session.execute(_NEAREST, {**params, "embedding": dense.literal(vector)}).all()
    return [r for r in rows if r.similarity >= threshold]


def _relate(session: Session, source: str, target: str, relation: str) -> bool:
    return edges.relate(
        session, MemoryRelateIn(source_id=source, target_id=target, relation=relation)
    ).created


def detect_contradictions(
    session: Session, params: DetectContradictionsIn
) -> DetectContradictionsOut:
    """Similar memories that state the opposite (negation, opposite preference, changed value)."""
    memory = memories.live_memory(session, params.memory_id)
    found = []
    for row in _nearest(session, memory, params.similarity_threshold):
        why = contradiction.reason(memory.content, row.content)
        if why is not None:
            found.append(
                Contradiction(
                    memory_id=row.id,
                    content=row.content,
                    similarity=round(float(row.similarity), 4),
                    contradiction_reason=why,
                )
            )
    created = 0
    if params.create_edges:
        created = sum(_relate(session, memory.id, c.memory_id, "contradicts") for c in found)
    return DetectContradictionsOut(contradictions=found, edges_created=created)


def _protected(memory: Chunk) -> bool:
    """What an update never closes on its own: golden rules, pinned memories, ground truth
    (memory_forget asks for force on golden rules; consolidation keeps them too)."""
    return (
        memory.pinned
        or is_golden(memory.memory_type, memory.confidence)
        or decay.ground_truth(memory)
    )


def check_supersedes(session: Session, params: CheckSupersedesIn) -> CheckSupersedesOut:
    """The older memory this one replaces: the most similar earlier memory it contradicts or
    updates (a changed value for the same subject). With create_edge (the default) the
    decision is acted on as consolidation acts on a merge: a `supersedes` edge newer → older,
    and the older memory closed (valid_to now, a `delete` event naming its successor), so
    recall stops returning it while reads as of an earlier time still see it. A protected
    older memory (golden, pinned, ground truth) is linked but stays open."""
    memory = memories.live_memory(session, params.memory_id)
    if params.create_edge:
        namespaces.share(session, [memory.namespace])  # after any import of the namespace
    for row in _nearest(session, memory, SUPERSEDE_SIMILARITY):
        if row.created_at >= memory.created_at:
            continue
        why = contradiction.reason(row.content, memory.content)
        if why is None:
            continue
        created = closed = False
        if params.create_edge:
            # Both held, as a forget of both holds them: the two queue, never deadlock.
            both = [(memory.namespace, memory.id), (memory.namespace, row.id)]
            held = {c.id: c for c in memories.held(session, both)}
            if memory.id not in held:  # forgotten meanwhile
                raise NotFound(f"Memory not found: {memory.id}")
            if row.id not in held:  # a concurrent check closed it: look further
                continue
            older = held[row.id]
            created = _relate(session, memory.id, older.id, "supersedes")
            if not _protected(older):
                decay.close(
                    session,
                    older,
                    datetime.now(UTC),
                    "memory_check_supersedes",
                    superseded_by=memory.id,
                )
                closed = True
        return CheckSupersedesOut(
            superseded_id=row.id,
            edge_created=created,
            superseded_closed=closed,
            similarity=round(float(row.similarity), 4),
            reason=why,
        )
    return CheckSupersedesOut(superseded_id=None, edge_created=False)


def backfill_edges(session: Session, params: BackfillEdgesIn) -> BackfillEdgesOut:
    """Memories with no live edge at all get their entity mentions linked; one that names no
    entity is related to its nearest memory (relates_to) when that is similar enough. One
    still waiting on the embedding queue for its vector is left for a later run (it stays
    among `remaining_orphans`): embedding it here would hold the namespace meanwhile."""
    namespaces.require(session, params.namespace)  # a typo is no namespace without orphans
    args = {"ns": params.namespace, "limit": params.limit}
    orphans = session.execute(_ORPHANS, args).all()
    if params.dry_run:
        return BackfillEdgesOut(
            orphans_found=len(orphans),
            processed=0,
            mention_edges_created=0,
            relates_edges_created=0,
            remaining_orphans=len(orphans),
        )
    linked = related = 0
    namespaces.share(session, sorted({row.namespace for row in orphans}))  # after any import
    for row in orphans:
        made = mentions.link(session, row.namespace, [(row.id, row.content)])
        linked += made
        if made:
            continue
        memory = memories.live_memory(session, row.id)
        if memory.embedding is None:
            continue
        near = _nearest(session, memory, params.similarity_threshold)
        if near:
            related += _relate(session, row.id, near[0].id, "relates_to")
    for ns in {row.namespace for row in orphans}:
        events.record(
            session,
            namespace=ns,
            event_type="edit",
            operation="memory_backfill_edges",
            subject_kind="edge",
            payload={"orphans": sum(r.namespace == ns for r in orphans)},
        )
    remaining = len(session.execute(_ORPHANS, {**args, "limit": params.limit}).all())
    return BackfillEdgesOut(
        orphans_found=len(orphans),
        processed=len(orphans),
        mention_edges_created=linked,
        relates_edges_created=related,
        remaining_orphans=remaining,
    )
