"""The append-only event log and query traces, written in the caller's transaction (a
retrieval's trace and query event: after it, with its transaction's time; memsys.deferred)."""

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from memsys import ids
from memsys.models import Event


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


# A constant statement (built once, prepared by the driver after a few runs): building an
# INSERT … SELECT in the ORM on every query cost ~2 ms of CPU (benchmarks/bench_trace.py).
_JSON = (
    "payload",
    "filters",
    "stores",
    "candidates",
    "retrieved",
    "timings",
    "output",
    "channels",
    "fusion",
    "user_context",
    "verification",
)
_TRACE = text(
    """
    WITH query_event AS (
        INSERT INTO event (namespace, event_type, operation, subject_kind, subject_id,
                           payload, session_id, occurred_at)
        VALUES (:namespace, 'query', :operation, 'query_trace', :id, :payload, :session_id,
                coalesce(CAST(:at AS timestamptz), now()))
        RETURNING id
    )
    INSERT INTO query_trace (namespace, id, operation, query, filters, stores_queried,
                             routing_logic, candidates, retrieved, timings, output, channels,
                             fusion, user_context, mode_detected, mode_confidence,
                             verification, error, error_type, total_latency_ms, event_id,
                             created_at)
    SELECT :namespace, :id, :operation, :query, :filters, :stores, :routing, :candidates,
           :retrieved, :timings, :output, :channels, :fusion, :user_context, :mode_detected,
           :mode_confidence, :verification, :error, :error_type, :total_latency_ms,
           query_event.id, coalesce(CAST(:at AS timestamptz), now())
    FROM query_event
    """
).bindparams(*[bindparam(name, type_=JSONB(none_as_null=True)) for name in _JSON])


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
    trace_id: str | None = None,
    at: datetime | None = None,
) -> str:
    """Write a query event and its trace together (FEATURES F1), in one statement (one
    round trip: the event's INSERT is a CTE whose id the trace row takes); returns the id.
    `trace_id` and `at` (both rows' time; now() without it) come from a deferred write."""
    trace_id = trace_id or ids.new_id(ids.QUERY)
    payload = {"query": query, "results": len(retrieved), **({"error": error} if error else {})}
    session.execute(
        _TRACE,
        {
            "namespace": namespace,
            "id": trace_id,
            "operation": operation,
            "payload": payload,
            "session_id": (user_context or {}).get("session_id"),
            "query": query,
            "filters": filters,
            "stores": stores,
            "routing": routing,
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
            "at": at,
        },
    )
    return trace_id
