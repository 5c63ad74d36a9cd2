"""The append-only event log and query traces, written in the caller's transaction."""

from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from memsys import ids
from memsys.models import Event, QueryTrace


def record(
    session: Session,
    *,
    namespace: str,
    event_type: str,
    operation: str,
    subject_kind: str | None = None,
    subject_id: str | None = None,
    payload: dict[str, Any] | None = None,
    session_id: str | None = None,
) -> int:
    """Append one event; returns its id."""
    return session.execute(
        insert(Event)
        .values(
            namespace=namespace,
            event_type=event_type,
            operation=operation,
            subject_kind=subject_kind,
            subject_id=subject_id,
            payload=payload or {},
            session_id=session_id,
        )
        .returning(Event.id)
    ).scalar_one()


def trace_query(
    session: Session,
    *,
    namespace: str,
    operation: str,
    query: str,
    filters: dict[str, Any],
    stores: list[str],
    routing: str,
    candidates: list[dict[str, Any]],
    retrieved: list[dict[str, Any]],
    timings: dict[str, float],
    output: dict[str, Any] | None = None,
    mode: str | None = None,
    mode_confidence: float | None = None,
    verification: dict[str, Any] | None = None,
) -> str:
    """Write a query event and its trace together (FEATURES F1); returns the trace id."""
    trace_id = ids.new_id(ids.QUERY)
    event_id = record(
        session,
        namespace=namespace,
        event_type="query",
        operation=operation,
        subject_kind="query_trace",
        subject_id=trace_id,
        payload={"query": query, "results": len(retrieved)},
    )
    session.execute(
        insert(QueryTrace).values(
            namespace=namespace,
            id=trace_id,
            operation=operation,
            query=query,
            filters=filters,
            stores_queried=stores,
            routing_logic=routing,
            candidates=candidates,
            retrieved=retrieved,
            timings=timings,
            output=output,
            mode_detected=mode,
            mode_confidence=mode_confidence,
            verification=verification,
            total_latency_ms=timings.get("total_ms", 0.0),
            event_id=event_id,
        )
    )
    return trace_id
