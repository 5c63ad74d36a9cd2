"""Memories: store (content-hash dedup), recall, forget, count, list.

memory_context renders them for a prompt in memsys.services.context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Select, func, select, tuple_
from sqlalchemy.orm import Session

from memsys import ids, tenancy
from memsys.db import clock, take_turns_all
from memsys.embeddings import embed_beside, embed_query, get_embedder
from memsys.errors import InvalidInput, NotFound
from memsys.models import Chunk
from memsys.models.chunk import AGED
from memsys.runner import before_transaction, retrieval_only
from memsys.schemas import (
    MemoryCountIn,
    MemoryCountOut,
    MemoryForgetIn,
    MemoryForgetOut,
    MemoryHit,
    MemoryItem,
    MemoryListIn,
    MemoryListOut,
    MemoryRecallIn,
    MemoryRecallOut,
    MemoryStoreBatchIn,
    MemoryStoreBatchOut,
    MemoryStoreIn,
    MemoryStoreOut,
)
from memsys.schemas.memories import check_batch_load
from memsys.services import (
    access,
    erasure,
    events,
    lifecycle,
    memory_batch,
    namespaces,
    search,
    tracing,
)


def live_memories() -> Select[Chunk]:
    """Live memories (not closed), as a select to narrow."""
    return select(Chunk).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None))


def live_memory(session: Session, memory_id: str, lock: bool = False) -> Chunk:
    """One live memory by id (ids are unique across namespaces); `lock` holds its row until
    commit, so that writers of one memory take turns."""
    stmt = live_memories().where(Chunk.id == memory_id)
    chunk = session.scalars(stmt.with_for_update() if lock else stmt).first()
    if chunk is None:
        raise NotFound(f"Memory not found: {memory_id}")
    return chunk


def held(session: Session, keys: list[tuple[str, str]], closed_too: bool = False) -> list[Chunk]:
    """The live memories of these (namespace, id) keys (`closed_too`: forgotten ones as
    well), locked until commit in (namespace, id) order — the order every call that locks
    several takes, so two queue, never deadlock — and read afresh."""
    stmt = select(Chunk).where(tuple_(Chunk.namespace, Chunk.id).in_(keys))
    if not closed_too:
        stmt = stmt.where(Chunk.valid_to.is_(None))
    return list(
        session.scalars(
            stmt.order_by(Chunk.namespace, Chunk.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    )


def embed_content(params: MemoryStoreIn) -> Callable[[], np.ndarray]:
    return embed_beside(params.content)


@before_transaction(embed_content)
def store(
    session: Session,
    params: MemoryStoreIn,
    prepared: np.ndarray | Callable[[], np.ndarray] | None = None,
) -> MemoryStoreOut:
    """Store a memory; identical live content in the same namespace returns the existing id.
    Through the runner its embedding starts before the transaction opens, on the embedding
    worker when that is idle, and is awaited only when the row is written (the duplicate
    check and the entities it names run meanwhile); a caller inside another service passes
    the vector itself. One memory is a batch of one (memsys.services.memory_batch: the rules
    live there)."""
    ready = prepared if prepared is not None else embed_content(params)
    if callable(ready):
        return _stored(session, [params], lambda: [ready()], "memory_store")[0]
    return _stored(session, [params], [ready], "memory_store")[0]


Vectors = Sequence[np.ndarray] | Callable[[], Sequence[np.ndarray]]


def _stored(
    session: Session, items: Sequence[MemoryStoreIn], vectors: Vectors, operation: str
) -> list[MemoryStoreOut]:
    """memory_batch.store_many, then the aged duplicates revived (_revived). A duplicate
    that was aged can have been closed since it was read (a decay deleting a session memory
    does not take the turns of its text, and revive waited for it): its item is stored anew,
    as it would have been had the store come after that close."""
    aged: set[str] = set()
    results = memory_batch.store_many(session, items, vectors, aged)
    revived = _revived(session, results, aged, operation)
    waited = [i for i, r in enumerate(results) if r.id in aged and r.id not in revived]
    if waited:
        live = set(
            session.scalars(
                select(Chunk.id).where(
                    Chunk.id.in_([results[i].id for i in waited]), Chunk.valid_to.is_(None)
                )
            )
        )
        if gone := [i for i in waited if results[i].id not in live]:
            again = memory_batch.store_many(
                session, [items[i] for i in gone], _picked(vectors, gone)
            )
            for i, out in zip(gone, again, strict=True):
                results[i] = out
    return results


def _picked(vectors: Vectors, positions: list[int]) -> Vectors:
    if callable(vectors):
        return lambda: [vectors()[i] for i in positions]
    return [vectors[i] for i in positions]


def _revived(
    session: Session, results: list[MemoryStoreOut], aged: set[str], operation: str
) -> set[str]:
    """A store that restates an aged memory (demoted, archived: `aged`, the duplicates that
    are not active) brings it back, full text and all, and says so (`revived`): stored
    again, it belongs in recall. The ids it revived."""
    by_namespace: dict[str, list[str]] = {}
    for r in results:
        if r.duplicate and r.id in aged:
            by_namespace.setdefault(r.namespace, []).append(r.id)
    revived: set[str] = set()
    for namespace in sorted(by_namespace):
        revived |= lifecycle.revive(session, namespace, by_namespace[namespace], operation)
    for r in results:
        r.revived = r.id in revived
    return revived


def embed_batch(params: MemoryStoreBatchIn) -> np.ndarray:
    contents = [m.content for m in params.memories]
    check_batch_load(contents, "memories")
    return get_embedder().embed(contents)


@before_transaction(embed_batch)
def store_batch(
    session: Session, params: MemoryStoreBatchIn, prepared: np.ndarray | None = None
) -> MemoryStoreBatchOut:
    """Store many memories in one transaction, embedded together (at the model's batch
    speed) before it opens, and written set-wise (a few statements per namespace, not per
    memory); each is deduplicated as memory_store does, also within the batch. One bad item
    refuses the whole batch (validation runs before anything is written)."""
    vectors = prepared if prepared is not None else embed_batch(params)
    results = _stored(session, params.memories, list(vectors), "memory_store_batch")
    duplicates = sum(r.duplicate for r in results)
    return MemoryStoreBatchOut(
        results=results, stored=len(results) - duplicates, duplicates=duplicates
    )


def _hit(h: search.Hit) -> MemoryHit:
    return MemoryHit(
        id=h.id,
        content=h.content,
        memory_type=h.memory_type or "",
        namespace=h.namespace,
        confidence=h.confidence,
        importance=h.importance,
        score=round(h.score, 4),
        similarity=None if h.similarity is None else round(h.similarity, 4),
        tags=h.tags,
        metadata=h.metadata,
        created_at=h.created_at,
        happened_at=h.happened_at,
    )


def recall_hits(
    session: Session, query: str, filters: dict[str, Any], limit: int, count_access: bool = True
) -> search.Retrieval:
    namespaces.require(session, filters.get("namespace"))
    return search.hybrid(
        session,
        query,
        filters={**filters, "doc_type": "memory"},
        limit=limit,
        count_access=count_access,
    )


@retrieval_only
@before_transaction(search.embed_query_of)
def recall(session: Session, params: MemoryRecallIn) -> MemoryRecallOut:
    """Memories most relevant to a query, with S001's filters applied in SQL."""
    filters = params.model_dump(exclude={"query", "n_results", "min_relevance"})
    with tracing.traced(
        "memory_recall", params.query, namespace=params.namespace, filters=filters, params=params
    ) as t:
        found = recall_hits(session, params.query, filters, params.n_results)
        hits = [_hit(h) for h in search.relevant(found, params.min_relevance)]
        trace_id = tracing.write(
            session, t, retrieved=[{"id": h.id, "score": h.score} for h in hits]
        )
    return MemoryRecallOut(
        memories=hits, total=len(hits), query=params.query, filters=filters, trace_id=trace_id
    )


def _close(session: Session, targets: list[Chunk], operation: str, purge: bool) -> list[Chunk]:
    """Close (or, with purge, erase) memories and log each one; the ones it closed. It takes
    each content's turn, as memory_store does, so that a store of the same text waits and
    then writes a new memory rather than answer with the id being closed; a memory that
    another call closed meanwhile is left out (it is gone once, not twice)."""
    if not targets:
        return []
    touched = sorted({c.namespace for c in targets})
    for namespace in touched:  # the policies drop a reader's DELETE: "purged", nothing erased
        tenancy.require_write(namespace)
    if purge:
        # A purge writes alone in its namespaces, as an import does, for the few ms it takes:
        # writers in flight commit first, so the entities it finds nothing names any more
        # are not being named by a store at that moment (memsys.services.erasure).
        namespaces.write_alone_briefly(session, touched)
    else:
        namespaces.share(session, touched)  # after any import
    take_turns_all(session, sorted(_turns(targets)))
    # A purge erases a memory forgotten meanwhile too; a forget leaves it (gone once).
    still = set(held(session, [(c.namespace, c.id) for c in targets], closed_too=purge))
    closed = [c for c in targets if c in still]
    at = clock(session)  # its rows held (a store that committed meanwhile began before)
    if purge:  # what repeats their text goes first (memsys.services.erasure)
        for ns in sorted({c.namespace for c in closed}):
            erasure.erase(session, ns, [c.id for c in closed if c.namespace == ns])
    for chunk in closed:
        if purge:
            session.delete(chunk)
        else:
            chunk.valid_to = at
        # A purge records that it happened, never what the memory said.
        events.record(
            session,
            namespace=chunk.namespace,
            event_type="purge" if purge else "delete",
            operation=operation,
            subject_kind="memory",
            subject_id=chunk.id,
        )
    session.flush()
    return closed


def _turns(targets: list[Chunk]) -> set[tuple[str, str, str]]:
    """The content turns a store of these memories' texts takes: their digest, and the one
    dedup computes now for a row hashed before it read unseen characters away that the
    upgrade c8e4a1f7d362 left as it was (an aged row holds a summary: its own digest only)."""
    turns = {(c.namespace, "memory", c.content_hash) for c in targets}
    turns |= {
        (c.namespace, "memory", ids.content_hash(c.content)) for c in targets if c.stage not in AGED
    }
    return turns


@before_transaction(search.embed_query_of)
def forget(session: Session, params: MemoryForgetIn) -> MemoryForgetOut:
    """Forget by id, by query, or by `input_value` (an id if it looks like one, else a query)."""
    memory_id, query = params.memory_id, params.query
    if params.input_value is not None and memory_id is None and query is None:
        value = params.input_value  # validated: a memory id, or a checked query
        if ids.looks_like_memory_id(value) or _memory_named(session, value, params.namespace):
            memory_id = value
        else:
            query = value
    if memory_id is None and query is None:
        raise InvalidInput("Give memory_id, query or input_value to say what to forget")
    namespaces.require(session, params.namespace)

    if memory_id is not None:
        # A purge also takes a memory forgotten before (closed, its text still kept): the
        # way to erase what was only forgotten. A forget finds live memories only.
        stmt = select(Chunk).where(Chunk.doc_type == "memory", Chunk.id == memory_id.strip())
        if not params.purge:
            stmt = stmt.where(Chunk.valid_to.is_(None))
        if params.namespace:
            stmt = stmt.where(Chunk.namespace == params.namespace)
        targets = list(session.scalars(stmt))
        if not targets:
            raise NotFound(f"Memory not found: {memory_id}")
    else:
        assert query is not None
        scope = {"namespace": params.namespace}
        with tracing.traced(
            "memory_forget", query, namespace=params.namespace, filters=scope, params=params
        ) as t:
            found = recall_hits(session, query, scope, params.n_results, count_access=False)
            chosen = [h for h in found.hits if _similarity(h, query) >= params.min_similarity]
            rows = (session.get(Chunk, (h.namespace, h.id)) for h in chosen)
            targets = [c for c in rows if c is not None]
            targets += _copies(session, targets, params.namespace)
            tracing.write(session, t, retrieved=[{"id": h.id, "score": h.score} for h in chosen])

    protected = [c for c in targets if c.golden and not params.force]
    # A pinned memory is one the user marked as kept: a query that happens to match it does
    # not forget it (naming its id does: that is the user asking for that memory).
    pinned = [
        c for c in targets if memory_id is None and c.pinned and not c.golden and not params.force
    ]
    kept = protected + pinned
    doomed = _close(session, [c for c in targets if c not in kept], "memory_forget", params.purge)
    if memory_id is not None and not doomed and not protected:  # forgotten meanwhile
        raise NotFound(f"Memory not found: {memory_id}")
    return MemoryForgetOut(
        deleted_ids=[c.id for c in doomed],
        deleted_count=len(doomed),
        protected_ids=[c.id for c in protected],
        pinned_kept_ids=[c.id for c in pinned],
        pinned_kept_count=len(pinned),
        purged=params.purge and bool(doomed),
    )


def _memory_named(session: Session, value: str, namespace: str | None) -> bool:
    """Whether a memory (live or forgotten, of a namespace the caller sees; of `namespace`
    when given) has this id: an import keeps the ids its file gives (`mem_abc123`,
    `note-7`), which do not look like the ids memsys makes, and `input_value` holding one is
    that memory, not a query."""
    stmt = select(Chunk.id).where(Chunk.doc_type == "memory", Chunk.id == value.strip())
    if namespace is not None:
        stmt = stmt.where(Chunk.namespace == namespace)
    return session.scalars(stmt.limit(1)).first() is not None


def _copies(session: Session, found: list[Chunk], namespace: str | None) -> list[Chunk]:
    """The live memories holding the text of one `found` in another namespace in scope:
    retrieval lists a text once (its dedup by content hash), so a forget by query over all
    namespaces closed one copy and the next recall showed the other, the same text."""
    if not found:
        return []
    stmt = live_memories().where(
        Chunk.content_hash.in_({c.content_hash for c in found}),
        Chunk.id.not_in([c.id for c in found]),
    )
    if namespace:
        stmt = stmt.where(Chunk.namespace == namespace)
    return list(session.scalars(stmt.order_by(Chunk.namespace, Chunk.id)))


def _similarity(hit: search.Hit, query: str) -> float:
    """The hit's cosine similarity to the query; a memory still waiting on the embedding
    queue for its vector is embedded here, as the queue will embed it (a document's chunk
    without one counts 0: forget takes memories)."""
    if hit.similarity is not None:
        return hit.similarity
    if hit.doc_type != "memory":
        return 0.0
    vector = get_embedder().embed_one(hit.content)
    return max(0.0, float(np.dot(vector, embed_query(query))))


def _filtered(stmt, params: MemoryCountIn):  # type: ignore[no-untyped-def]
    if params.namespace:
        stmt = stmt.where(Chunk.namespace == params.namespace)
    if params.memory_type:
        stmt = stmt.where(Chunk.memory_type == params.memory_type)
    return stmt


def count(session: Session, params: MemoryCountIn) -> MemoryCountOut:
    namespaces.require(session, params.namespace)
    stmt = _filtered(
        select(func.count()).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None)), params
    )
    return MemoryCountOut(count=session.scalar(stmt) or 0, filters=params.model_dump())


def item(c: Chunk, access_count: int) -> MemoryItem:
    """A memory as the listing and memory_get show it (`access_count`: the live figure,
    access.live)."""
    return MemoryItem(
        id=c.id,
        content=c.content,
        memory_type=c.memory_type or "",
        namespace=c.namespace,
        confidence=c.confidence,
        importance=c.importance,
        tags=c.tags,
        metadata=c.meta,
        access_count=access_count,
        created_at=c.created_at,
        updated_at=c.updated_at,
        happened_at=c.occurred_at or c.created_at,
    )


def list_memories(session: Session, params: MemoryListIn) -> MemoryListOut:
    namespaces.require(session, params.namespace)
    total = count(session, params).count
    # Accesses since the last fold count too: the live figure is what the list shows (and
    # orders by), read in the same statement as the rows.
    live = access.live_count().label("live_access_count")
    column = live if params.order_by == "access_count" else getattr(Chunk, params.order_by)
    order = column.desc() if params.descending else column.asc()
    stmt = _filtered(live_memories().add_columns(live), params).order_by(order, Chunk.id)
    rows = session.execute(stmt.limit(params.limit).offset(params.offset)).all()
    items = [item(c, int(n)) for c, n in rows]
    return MemoryListOut(memories=items, total=total, limit=params.limit, offset=params.offset)
