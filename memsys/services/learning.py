"""TRY/LEARN: a memory earns confidence by being used successfully.

memory_apply records a TRY; memory_outcome a LEARN that moves confidence by a bounded step:
+0.10 on success (at most 1.0), -0.15 on failure (at least 0.0) — monotone in outcomes, and
a failure costs more than a success earns, so a rule that fails as often as it works loses
confidence. Reaching 0.9 makes a memory a golden rule (S001), protected from forget unless
forced; `promoted` says when an outcome did that. Golden rules are also exempt from decay
and aging (memsys.services.decay.exempt): an aged memory an outcome promotes is rekindled in
the same transaction. Every step is a validation_event row with the old
and new confidence, and a memory_change row, so confidence can be read as of any past time
(memsys.retrieval.signals) and a query replayed with the confidence it saw.

An outcome for a memory that was never applied is accepted (the agent may have used a
memory it found by itself) and counted like any other, but the answer carries a `warning`
saying that no TRY was recorded, so a caller that forgot memory_apply notices.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.models import Chunk, ValidationEvent
from memsys.schemas.learning import (
    MemoryApplyIn,
    MemoryApplyOut,
    MemoryOutcomeIn,
    MemoryOutcomeOut,
    ValidationEventOut,
    ValidationHistoryIn,
    ValidationHistoryOut,
    ValidationSummary,
)
from memsys.services import events, lifecycle, memories, namespaces
from memsys.services import history as change_log
from memsys.vocabulary import is_golden

SUCCESS_STEP = 0.10
FAILURE_STEP = 0.15


def next_confidence(old: float, success: bool) -> float:
    new = old + SUCCESS_STEP if success else old - FAILURE_STEP
    return round(min(1.0, max(0.0, new)), 6)


def _event(session: Session, chunk: Chunk, **values: object) -> int:
    return int(
        session.execute(
            insert(ValidationEvent)
            .values(namespace=chunk.namespace, memory_id=chunk.id, **values)
            .returning(ValidationEvent.id)
        ).scalar_one()
    )


def apply(session: Session, params: MemoryApplyIn) -> MemoryApplyOut:
    chunk = memories.live_memory(session, params.memory_id)
    tenancy.require_write(chunk.namespace)  # a TRY is recorded on the memory
    event_id = _event(
        session, chunk, event_type="applied", context=params.context, session_id=params.session_id
    )
    return MemoryApplyOut(memory_id=chunk.id, event_id=event_id)


def outcome(session: Session, params: MemoryOutcomeIn) -> MemoryOutcomeOut:
    # Outcomes of one memory queue up on its row, after its namespace's write turn (an import
    # editing the memory is waited for at most MEMSYS_BUSY_WAIT_S, holding nothing).
    namespaces.share_of_memory(session, params.memory_id)
    chunk = memories.live_memory(session, params.memory_id, lock=True)
    old = chunk.confidence
    new = next_confidence(old, params.success)
    was_golden = is_golden(chunk.memory_type, old)
    applied = session.scalar(
        select(ValidationEvent.id)
        .where(
            ValidationEvent.namespace == chunk.namespace,
            ValidationEvent.memory_id == chunk.id,
            ValidationEvent.event_type == "applied",
        )
        .limit(1)
    )
    chunk.confidence = new
    change_log.record(session, chunk, "confidence", old, new, "memory_outcome")
    _event(
        session,
        chunk,
        event_type="succeeded" if params.success else "failed",
        error_msg=params.error_msg,
        session_id=params.session_id,
        old_confidence=old,
        new_confidence=new,
    )
    events.record(
        session,
        namespace=chunk.namespace,
        event_type="edit",
        operation="memory_outcome",
        subject_kind="memory",
        subject_id=chunk.id,
        payload={"old_confidence": old, "new_confidence": new, "success": params.success},
        session_id=params.session_id,
    )
    session.flush()
    promoted = not was_golden and is_golden(chunk.memory_type, new)
    if promoted and chunk.stage != "active":
        # A golden rule is exempt, always active: an aged one comes back in full at once,
        # as a pinned one does, not with its summary until the next maintenance.
        lifecycle.rekindle(session, chunk, datetime.now(UTC), "memory_outcome")
    return MemoryOutcomeOut(
        memory_id=chunk.id,
        outcome_success=params.success,
        old_confidence=old,
        new_confidence=new,
        promoted=promoted,
        warning=None
        if applied is not None
        else "No memory_apply was recorded for this memory; the outcome was counted anyway. "
        "Call memory_apply before acting on a memory so its history shows the TRY.",
    )


def history(session: Session, params: ValidationHistoryIn) -> ValidationHistoryOut:
    chunk = memories.live_memory(session, params.memory_id)
    mine = (ValidationEvent.namespace == chunk.namespace, ValidationEvent.memory_id == chunk.id)
    stmt = select(ValidationEvent).where(*mine)
    if params.event_type:
        stmt = stmt.where(ValidationEvent.event_type == params.event_type)
    rows = session.scalars(stmt.order_by(ValidationEvent.id.desc()).limit(params.limit)).all()
    counts = dict(
        session.execute(
            select(ValidationEvent.event_type, func.count())
            .where(*mine)
            .group_by(ValidationEvent.event_type)
        )
        .tuples()
        .all()
    )
    succeeded, failed = counts.get("succeeded", 0), counts.get("failed", 0)
    return ValidationHistoryOut(
        events=[
            ValidationEventOut(
                id=r.id,
                event_type=r.event_type,
                context=r.context,
                error_msg=r.error_msg,
                old_confidence=r.old_confidence,
                new_confidence=r.new_confidence,
                session_id=r.session_id,
                timestamp=r.created_at,
            )
            for r in rows
        ],
        summary=ValidationSummary(
            total_applications=counts.get("applied", 0),
            success_count=succeeded,
            failure_count=failed,
            success_rate=round(succeeded / (succeeded + failed), 4) if succeeded + failed else None,
        ),
    )
