"""The append-only event log and query traces, written in the caller's transaction."""

from typing import Any

from sqlalchemy import insert, literal, null, select
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
    channels: dict[str, Any] | None = None,
    fusion: dict[str, Any] | None = None,
    user_context: dict[str, Any] | None = None,
    mode_detected: str | None = None,
    mode_confidence: float | None = None,
    verification: dict[str, Any] | None = None,
    error: str | None = None,
    error_type: str | None = None,
) -> str:
    """Write a query event and its trace together (FEATURES F1), in one statement (one
    round trip: the event's INSERT is a CTE whose id the trace row takes); returns the id."""
    trace_id = ids.new_id(ids.QUERY)
    payload = {"query": query, "results": len(retrieved), **({"error": error} if error else {})}
    event = (
        insert(Event)
        .values(
            namespace=namespace,
            event_type="query",
            operation=operation,
            subject_kind="query_trace",
            subject_id=trace_id,
            payload=payload,
            session_id=(user_context or {}).get("session_id"),
        )
        .returning(Event.id)
        .cte("query_event")
    )
    values: dict[str, Any] = {
        "namespace": namespace,
        "id": trace_id,
        "operation": operation,
        "query": query,
        "filters": filters,
        "stores_queried": stores,
        "routing_logic": routing,
        "candidates": candidates,
        "retrieved": retrieved,
        "timings": timings,
        "output": output,
        "channels": channels or {},
        "fusion": fusion or {},
        "user_context": user_context or {},
        "mode_detected": mode_detected,
        "mode_confidence": mode_confidence,
        "verification": verification,
        "error": error,
        "error_type": error_type,
        "total_latency_ms": timings.get("total_ms", 0.0),
    }
    columns = QueryTrace.__table__.c
    row = select(
        *[
            null() if v is None else literal(v, type_=columns[k].type).label(k)
            for k, v in values.items()
        ],
        event.c.id,
    )
    session.execute(insert(QueryTrace).from_select([*values, "event_id"], row))
    return trace_id
