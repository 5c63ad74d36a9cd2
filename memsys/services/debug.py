"""The debugger's tools on stored traces: read one, page through the query log, record
feedback (and attribute the error), explain where a memory went, prune old traces.

Feedback is an event on the trace (event_type 'feedback'), in the trace's namespace; for each
id the caller expected, the answer says whether the traced query returned it and at which
rank, and a wrong answer is classified (memsys.services.debug_attribution) onto the trace's
error_type / error_subtype.
"""

from __future__ import annotations

import difflib
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, tuple_
from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.config import get_settings
from memsys.db import rowcount
from memsys.errors import InvalidInput, NotFound, Protected
from memsys.models import Chunk, Event, QueryTrace
from memsys.models.log import ALL_NAMESPACES
from memsys.retrieval import trace as shape
from memsys.schemas.debug import (
    FeedbackOut,
    QueryLogIn,
    QueryLogItem,
    QueryLogOut,
    TraceFeedbackIn,
    TraceFeedbackOut,
    TraceIn,
    TraceOut,
    TraceWhyIn,
    TraceWhyOut,
)
from memsys.schemas.debug_replay import PruneTracesIn, PruneTracesOut
from memsys.services import debug_attribution, events, namespaces

FEEDBACK = "feedback"


def find(session: Session, trace_id: str) -> QueryTrace:
    row = session.scalars(select(QueryTrace).where(QueryTrace.id == trace_id)).first()
    if row is None:
        raise NotFound(f"Trace not found: {trace_id}")
    return row


def trace(session: Session, params: TraceIn) -> TraceOut:
    row = find(session, params.trace_id)
    notes = session.scalars(
        select(Event)
        .where(Event.event_type == FEEDBACK, Event.subject_id == row.id)
        .order_by(Event.id)
    )
    return TraceOut(
        **readable(debug_attribution.record_of(row)),
        id=row.id,
        namespace=row.namespace,
        created_at=row.created_at,
        feedback=[FeedbackOut(**n.payload, at=n.occurred_at) for n in notes],
    )


def readable(record: dict[str, Any]) -> dict[str, Any]:
    """A stored trace's compact lists as {id, score, rank} rows."""
    channels = dict(record.get("channels") or {})
    for name, pool in shape.pools(record).items():
        channels[name] = shape.ranked(pool)
    candidates = shape.ranked(record.get("candidates") or [])
    return {**record, "channels": channels, "candidates": candidates}


def query_log(session: Session, params: QueryLogIn) -> QueryLogOut:
    """Traces, newest first."""
    if not (params.namespace or "").startswith(ALL_NAMESPACES):  # '*', '*@<token id>': no name
        namespaces.require(session, params.namespace)  # a misspelt one: not "no traces"
    stmt = select(QueryTrace)
    if params.namespace:
        stmt = stmt.where(QueryTrace.namespace == params.namespace)
    if params.operation:
        stmt = stmt.where(QueryTrace.operation == params.operation)
        _require_operation(session, params.operation)
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
                error_type=r.error_type,
            )
            for r in rows
        ],
        total=int(total or 0),
        limit=params.limit,
        offset=params.offset,
    )


def _require_operation(session: Session, operation: str) -> None:
    """A tool's name, or one a trace was logged under (a tool since renamed): a misspelt
    one is refused, not answered with "no traces"."""
    from memsys.operations import BY_NAME  # the table of tools

    if operation in BY_NAME:
        return
    if session.scalar(select(QueryTrace.id).where(QueryTrace.operation == operation).limit(1)):
        return
    close = difflib.get_close_matches(operation, list(BY_NAME), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise NotFound(f"No tool is named {operation!r}{hint}: give a tool's name, as the log shows")


def _require_known(session: Session, memory_ids: list[str]) -> None:
    """Expected ids name memories (or chunks) that exist or existed: a mistyped one would be
    recorded as a memory retrieval lost, a false bug in the error attribution."""
    if not memory_ids:
        return
    known = set(session.scalars(select(Chunk.id).where(Chunk.id.in_(memory_ids)).distinct()))
    unknown = [
        i
        for i in memory_ids
        if i not in known and not debug_attribution.preference_versions(session, i)
    ]
    if unknown:
        raise NotFound(
            f"No memory has the expected id {', '.join(unknown[:5])}"
            + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            + ": nothing recorded"
        )


def feedback(session: Session, params: TraceFeedbackIn) -> TraceFeedbackOut:
    row = find(session, params.trace_id)
    returned = [r.get("id") for r in row.retrieved]
    expected = list(dict.fromkeys(params.expected_ids or []))  # each once, in order
    _require_known(session, [i for i in expected if i not in returned])
    attribution: dict[str, object] = {
        memory_id: (
            {"returned_at_rank": returned.index(memory_id) + 1}
            if memory_id in returned
            else "not returned"
        )
        for memory_id in expected
    }
    error_type = subtype = reason = None
    lost: dict[str, object] = {}
    if params.verdict == "wrong":
        error_type, subtype, reason, lost = debug_attribution.classify(
            session, row, expected, params.expected_mode
        )
    elif row.error_type != debug_attribution.SYSTEM_ERROR:
        reason = "judged right"
    if row.error_type != debug_attribution.SYSTEM_ERROR:  # a failed call stays a failure
        # A caller may judge a trace it can read (a read-only token, its own cross-namespace
        # traces), but only one that may change the trace's namespace classifies the row:
        # PostgreSQL's policies drop the others' UPDATE (it failed the call with a 500). Their
        # verdict is kept in the feedback event.
        if tenancy.may_write(row.namespace):
            row.error_type, row.error_subtype = error_type, subtype
        elif (error_type, subtype) != (row.error_type, row.error_subtype):
            reason = f"{reason}; not written on the trace: {tenancy.denied_message()}"
    else:
        error_type, subtype = row.error_type, row.error_subtype
    payload: dict[str, object] = {
        "verdict": params.verdict,
        "note": params.note,
        "expected_ids": expected,
        "attribution": attribution,
        "error_type": error_type,
        "error_subtype": subtype,
    }
    if params.expected_mode and row.mode_detected:
        payload["mode_correct"] = params.expected_mode == row.mode_detected
    events.record(
        session,
        namespace=row.namespace,
        event_type=FEEDBACK,
        operation="debug_feedback",
        subject_kind="query_trace",
        subject_id=row.id,
        payload=payload,
    )
    session.flush()
    return TraceFeedbackOut(
        trace_id=row.id,
        verdict=params.verdict,
        attribution=attribution,
        error_type=error_type,
        error_subtype=subtype,
        reason=reason,
        where_lost=lost,
    )


def why(session: Session, params: TraceWhyIn) -> TraceWhyOut:
    """Why a memory was, or was not, in a traced result: channels, fused rank, the stage."""
    row = find(session, params.trace_id)
    found = debug_attribution.where_lost(session, row, params.memory_id.strip())
    return TraceWhyOut(
        trace_id=row.id,
        memory_id=found["memory_id"],
        stage=found["stage"],
        reason=found["reason"],
        returned_rank=found["returned_rank"],
        fused_rank=found["fused_rank"],
        fused_score=found["fused_score"],
        channels=found["channels"],
        memory=found["memory"],
    )


def prune_traces(session: Session, now: datetime, older_than_days: int | None = None) -> int:
    """Delete traces older than the retention (MEMSYS_TRACE_RETENTION_DAYS, default 30; 0:
    kept for good) and their query events; returns how many traces went. `memsys maintain`
    calls this."""
    days = older_than_days or get_settings().trace_retention_days
    if days == 0:  # as 0 is "no limit" in every other MEMSYS_ setting: nothing is too old
        return 0
    cutoff = now - timedelta(days=days)
    # In batches: each statement stays short (MEMSYS_STATEMENT_TIMEOUT_S) however long
    # pruning was put off; all of them are one transaction still.
    count = _delete_in_batches(session, (QueryTrace.id,), QueryTrace.created_at < cutoff)
    _delete_in_batches(
        session,
        (Event.namespace, Event.id),
        Event.event_type.in_(("query", FEEDBACK)),
        Event.subject_kind == "query_trace",
        Event.occurred_at < cutoff,
    )
    return count


PRUNE_BATCH = 5_000


def _delete_in_batches(session: Session, key: tuple[Any, ...], *where: Any) -> int:
    """Delete the rows matching `where` of the table whose primary-key columns are `key`:
    their keys read once, then PRUNE_BATCH rows at a time by key (a `LIMIT` re-run per batch
    would step over the rows already deleted in this transaction again each time); how many
    went — under a scoped token, the rows it may change of those it reads (the policies drop
    the others' DELETE without a word)."""
    table = key[0].table
    found = [tuple(row) for row in session.execute(select(*key).where(*where))]
    went = 0
    for start in range(0, len(found), PRUNE_BATCH):
        batch = found[start : start + PRUNE_BATCH]
        went += rowcount(session, delete(table).where(tuple_(*key).in_(batch)))
    return went


def prune(session: Session, params: PruneTracesIn) -> PruneTracesOut:
    if not tenancy.current().write:  # a read-only token: refused, not "deleted: 0"
        raise Protected(tenancy.denied_message())
    now = session.scalar(select(func.now()))
    assert now is not None
    days = params.older_than_days or get_settings().trace_retention_days
    if days == 0:
        raise InvalidInput(
            "Traces are kept for good here (MEMSYS_TRACE_RETENTION_DAYS=0); give older_than_days "
            "to delete the older ones"
        )
    deleted = prune_traces(session, now, days)
    return PruneTracesOut(deleted=deleted, older_than_days=days, cutoff=now - timedelta(days=days))
