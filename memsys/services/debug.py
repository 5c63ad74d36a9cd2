"""The debugger's first tools: read a trace, page through the query log, record feedback.

Feedback is an event on the trace (event_type 'feedback'), in the trace's namespace; for each
id the caller expected, the answer says whether the traced query returned it and at which
rank, the first step of attributing a wrong answer.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memsys.errors import NotFound
from memsys.models import Event, QueryTrace
from memsys.schemas.debug import (
    FeedbackOut,
    QueryLogIn,
    QueryLogItem,
    QueryLogOut,
    TraceFeedbackIn,
    TraceFeedbackOut,
    TraceIn,
    TraceOut,
)
from memsys.services import events

FEEDBACK = "feedback"


def _trace(session: Session, trace_id: str) -> QueryTrace:
    row = session.scalars(select(QueryTrace).where(QueryTrace.id == trace_id)).first()
    if row is None:
        raise NotFound(f"Trace not found: {trace_id}")
    return row


def trace(session: Session, params: TraceIn) -> TraceOut:
    row = _trace(session, params.trace_id)
    notes = session.scalars(
        select(Event)
        .where(Event.event_type == FEEDBACK, Event.subject_id == row.id)
        .order_by(Event.id)
    )
    return TraceOut(
        id=row.id,
        namespace=row.namespace,
        created_at=row.created_at,
        operation=row.operation,
        query=row.query,
        filters=row.filters,
        stores_queried=row.stores_queried,
        routing_logic=row.routing_logic,
        candidates=row.candidates,
        retrieved=row.retrieved,
        timings=row.timings,
        output=row.output,
        total_latency_ms=row.total_latency_ms,
        error=row.error,
        error_type=row.error_type,
        feedback=[FeedbackOut(**n.payload, at=n.occurred_at) for n in notes],
    )


def query_log(session: Session, params: QueryLogIn) -> QueryLogOut:
    """Traces, newest first."""
    stmt = select(QueryTrace)
    if params.namespace:
        stmt = stmt.where(QueryTrace.namespace == params.namespace)
    if params.operation:
        stmt = stmt.where(QueryTrace.operation == params.operation)
    total = session.scalar(select(func.count()).select_from(stmt.subquery()))
    rows = session.scalars(
        stmt.order_by(QueryTrace.created_at.desc(), QueryTrace.id)
        .limit(params.limit)
        .offset(params.offset)
    )
    return QueryLogOut(
        traces=[
            QueryLogItem(
                id=r.id,
                namespace=r.namespace,
                created_at=r.created_at,
                operation=r.operation,
                query=r.query,
                results=len(r.retrieved),
                total_latency_ms=r.total_latency_ms,
                error=r.error,
            )
            for r in rows
        ],
        total=int(total or 0),
        limit=params.limit,
        offset=params.offset,
    )


def feedback(session: Session, params: TraceFeedbackIn) -> TraceFeedbackOut:
    row = _trace(session, params.trace_id)
    returned = [r.get("id") for r in row.retrieved]
    attribution: dict[str, object] = {
        expected: (
            {"returned_at_rank": returned.index(expected) + 1}
            if expected in returned
            else "not returned"
        )
        for expected in params.expected_ids or []
    }
    events.record(
        session,
        namespace=row.namespace,
        event_type=FEEDBACK,
        operation="debug_feedback",
        subject_kind="query_trace",
        subject_id=row.id,
        payload={
            "verdict": params.verdict,
            "note": params.note,
            "expected_ids": params.expected_ids or [],
            "attribution": attribution,
        },
    )
    return TraceFeedbackOut(trace_id=row.id, verdict=params.verdict, attribution=attribution)
