"""Pinning (S003's vault, S004's "pinned"): a memory the user marked as always kept.

A pinned memory is exempt from decay, demotion, archiving and being merged away
(memsys.services.decay.exempt), its decay score is S003's 999, and hot / warm / cold /
pinned calls it pinned. Pinning an aged (demoted, archived, rehydratable) memory rekindles it
at once, full text back from its history. Unpinning puts it back under the usual rules: its
score is recomputed now, and the next maintenance ages it by its idle time.
Both write a `pinned` row to the memory's history in their transaction, so "was it pinned
as of T" has an answer (`pinned_as_of`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from memsys.models import Chunk
from memsys.schemas.lifecycle import PinIn, PinOut
from memsys.services import access, decay, events, history, lifecycle


def pin(session: Session, params: PinIn, now: datetime | None = None) -> PinOut:
    return _set(session, params.memory_id, True, now or datetime.now(UTC))


def unpin(session: Session, params: PinIn, now: datetime | None = None) -> PinOut:
    return _set(session, params.memory_id, False, now or datetime.now(UTC))


def _set(session: Session, memory_id: str, pinned: bool, now: datetime) -> PinOut:
    memory = lifecycle.live_row(session, memory_id, lock=True, turn=True)
    operation = "memory_pin" if pinned else "memory_unpin"
    changed = memory.pinned != pinned
    stage = memory.stage
    if pinned and stage != "active":
        lifecycle.rekindle(session, memory, now, operation)
        stage = "active"
    score = decay.score(
        memory.importance,
        decay.idle_days(memory, now),
        memory.access_count,
        memory.memory_type,
        pinned,
    )
    if changed:
        history.record(session, memory, "pinned", memory.pinned, pinned, operation, now)
        events.record(
            session,
            namespace=memory.namespace,
            event_type="edit",
            operation=operation,
            subject_kind="memory",
            subject_id=memory.id,
            payload={"pinned": pinned},
        )
    # Not an edit of what the memory says: updated_at stays.
    session.execute(
        update(Chunk)
        .where(Chunk.namespace == memory.namespace, Chunk.id == memory.id)
        .values(pinned=pinned, decay_score=round(score, 6), updated_at=Chunk.updated_at)
    )
    key = (memory.namespace, memory.id)
    return PinOut(
        memory_id=memory.id,
        pinned=pinned,
        changed=changed,
        stage=stage,
        decay_score=round(score, 6),
        temperature=access.temperatures(session, [key], now).get(key, "cold"),
    )


def pinned_as_of(session: Session, memory: Any, at: datetime) -> bool:
    """Whether `memory` (namespace, id, pinned) was pinned at `at`: the old value of its
    first pin change after then, else its flag now."""
    key = (memory.namespace, memory.id)
    earlier = history.earlier_values(session, [key], ("pinned",), at)
    return bool(earlier.get((*key, "pinned"), memory.pinned))
