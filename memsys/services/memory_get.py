"""memory_get (S002): one memory by id, read the way recall reads its hits.

The read is an access (access.record: a row in the access log, folded into the memory's
counter by maintenance; the count shown includes it), so decay scores and hot / warm / cold
see direct reads as well as recalls. An archived or rehydratable memory is rekindled by the
read — its full text back from its history, else its summary marked lossy — as a recall
that finds it does, except when the caller may not write its namespace (a read-only token
reads what is stored) or another transaction holds its row (a read never waits; the next
one rekindles).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memsys.errors import NotFound
from memsys.models import Chunk, Edge
from memsys.models.chunk import AGED
from memsys.schemas.lifecycle import MemoryGetIn, MemoryGetOut
from memsys.services import access, lifecycle, memories, namespaces
from memsys.tenancy import may_write


def get(session: Session, params: MemoryGetIn, now: datetime | None = None) -> MemoryGetOut:
    now = now or datetime.now(UTC)
    try:
        memory = memories.live_memory(session, params.memory_id)
    except NotFound:
        earlier = _earlier_version(session, params.memory_id)
        if earlier is None:
            raise
        return earlier
    key = (memory.namespace, memory.id)
    rekindled = False
    if memory.stage in AGED and may_write(memory.namespace):
        row = session.execute(
            select(*lifecycle.ROW)
            .where(Chunk.namespace == memory.namespace, Chunk.id == memory.id)
            .where(namespaces.free_to_write(Chunk.namespace))  # never waits for an import
            .with_for_update(skip_locked=True)
        ).first()
        if row is not None and row.stage in AGED:
            lifecycle.rekindle(session, row, now, "memory_get")
            rekindled = True
            session.refresh(memory)  # the rekindled text and stage
    access.record(session, [memory.id], at=now)  # a log row: the memory's own row stays
    counted = access.live(session, [key]).get(key, memory)  # this read included
    return _out(
        memory,
        counted.access_count,
        rekindled=rekindled,
        last_accessed_at=counted.last_accessed_at,
        temperature=access.temperatures(session, [key], now).get(key, "cold"),
    )


def _out(memory: Chunk, access_count: int, **fields: Any) -> MemoryGetOut:
    """The answer for a memory row; `fields`: what this read decided (rekindled, …)."""
    return MemoryGetOut(
        **memories.item(memory, access_count).model_dump(),
        stage=memory.stage,
        pinned=memory.pinned,
        golden=memory.golden,
        lossy=memory.lossy,
        decay_score=memory.decay_score,
        **fields,
    )


def _earlier_version(session: Session, memory_id: str) -> MemoryGetOut | None:
    """A closed copy that a live memory supersedes (the previous fields an import or edit
    kept), read as it was: no access, no rekindling. A forgotten memory is no version."""
    found = session.execute(
        select(Chunk, Edge.source_id)
        .join(
            Edge,
            (Edge.namespace == Chunk.namespace)
            & (Edge.target_kind == "chunk")
            & (Edge.target_id == Chunk.id)
            & (Edge.relation == "supersedes")
            & Edge.valid_to.is_(None),
        )
        .where(Chunk.id == memory_id, Chunk.doc_type == "memory", Chunk.valid_to.is_not(None))
        .limit(1)
    ).first()
    if found is None:
        return None
    copy, newer = found
    return _out(
        copy,
        copy.access_count,
        rekindled=False,
        last_accessed_at=copy.last_accessed_at,
        temperature="cold",
        superseded_by=newer,
        valid_to=copy.valid_to,
    )
