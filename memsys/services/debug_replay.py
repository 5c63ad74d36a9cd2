"""Deterministic replay (FEATURES F2): run a traced call again and diff the two traces.

The replay runs the traced tool itself, with the input the trace kept, inside a savepoint
that is rolled back: what the tool does after retrieving (min_relevance, token budgets, the
context's sections) is replayed by the same code, and nothing the tool writes (its trace,
access counts) survives. Retrieval sees the rows valid at the trace's time (`as_of`; the
call's own `as_of` when it asked for one, with `now=true` too) and uses
the fusion version, method and pool the trace recorded; a version whose weights this memsys
no longer knows is refused, never guessed. `now=true` asks what the call returns today, with
today's weights. The query is embedded again and its digest compared with the trace's.

The graph channel's seeds (graph.named, graph.seeds) and walk are read as of then too. Not
yet read as of the trace: search_nodes' entity list and memory_context without a query —
these see the current rows.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memsys import deferred, tenancy
from memsys.embeddings import embed_query
from memsys.errors import InvalidInput
from memsys.models import QueryTrace
from memsys.retrieval import fusion, lexical
from memsys.retrieval import trace as shape
from memsys.schemas.debug import TraceBody
from memsys.schemas.debug_replay import ReplayIn, ReplayOut
from memsys.services import debug, tracing
from memsys.services.debug_attribution import asked_as_of, record_of, token_scope

# Weights the pipeline may scale per query (graph × graph_unnamed when no entity is named,
# neighbours × the gate of write order).
_PER_QUERY = {"graph", "neighbours"}


def weights_of(row: QueryTrace) -> fusion.Weights:
    """The weights a trace's retrieval used: its version's, checked against what it recorded."""
    recorded = row.fusion
    version = recorded.get("version")
    if version is None:
        return fusion.CURRENT  # nothing was fused (no retrieval ran): the weights do not matter
    known = fusion.KNOWN.get(str(version))
    if known is None:
        raise InvalidInput(
            f"Trace {row.id} used fusion version {version}, whose weights this memsys no "
            "longer knows: a replay would be a guess. Replay with now=true to see what the "
            "query returns today."
        )
    changed = sorted(
        k
        for k, v in known.as_dict().items()
        if k not in _PER_QUERY and k in recorded and recorded[k] != v
    )
    if changed:
        raise InvalidInput(
            f"Trace {row.id} recorded fusion version {version} with other values for "
            f"{', '.join(changed)} than this memsys has: it cannot be replayed faithfully"
        )
    return known


def replay(session: Session, params: ReplayIn) -> ReplayOut:
    """Run a traced call again (as of its time, or now) and diff the traces."""
    from memsys.operations import BY_NAME  # the table names each tool's service and input

    row = debug.find(session, params.trace_id)
    call = row.fusion.get("input")
    op = BY_NAME.get(row.operation)
    if call is None or op is None or op.input is None:
        raise InvalidInput(
            f"Trace {row.id} does not hold the call it traced (written by an older memsys "
            "or by a tool that cannot be replayed)"
        )
    weights = fusion.CURRENT if params.now else weights_of(row)
    request = row.fusion.get("request") or {}
    recorded = row.channels.get("terms")
    terms = None if params.now or not recorded else lexical.QueryTerms.recorded(recorded)
    # A call that asked for a view of the past asks for it again, now=true or not.
    asked = asked_as_of(row)
    how = tracing.Replay(
        as_of=asked or (None if params.now else row.created_at),
        weights=weights,
        method="zfuse" if params.now else str(row.fusion.get("method", "zfuse")),
        pool=None if params.now else request.get("pool"),
        vector=embed_query(row.query) if row.query else None,
        terms=terms,
    )
    started = time.perf_counter()
    # A token's call over all its namespaces runs over them again (an admin's replay
    # searched every namespace); a token replaying its own trace has its scope already.
    scope = token_scope(session, row) if tenancy.current().admin else None
    replayed = _run_and_undo(session, op.service, op.input.model_validate(call), how, scope)
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    changes = shape.diff(record_of(row), replayed)
    return ReplayOut(
        trace_id=row.id,
        as_of=how.as_of,
        fusion_version=None if not replayed.get("fusion") else weights.version,
        replay=TraceBody(**debug.readable(replayed)),
        identical=changes["identical"],
        changed_stage=changes["changed_stage"],
        diff=changes["stages"],
        fields=changes["fields"],
        replay_ms=elapsed,
    )


def _run_and_undo(
    session: Session,
    service_ref: str,
    params: Any,
    how: tracing.Replay,
    scope: tenancy.Scope | None = None,
) -> dict[str, Any]:
    """Run the tool in a savepoint (under `scope` when given: its settings go with the
    savepoint's rollback), read the trace it wrote, roll everything back."""
    from memsys.operations import resolve

    service = resolve(service_ref)
    savepoint = session.begin_nested()
    try:
        # Inline, so the rollback below takes them too: its trace and access counts.
        with (
            tenancy.using(scope) if scope else nullcontext(),
            tracing.replaying(how),
            deferred.inline(),
        ):
            if scope is not None:
                tenancy.apply(session)
            service(session, params)
        if not how.written:
            raise InvalidInput("The replayed call wrote no trace: it cannot be compared")
        new = session.scalars(select(QueryTrace).where(QueryTrace.id == how.written[-1])).one()
        return record_of(new)
    finally:
        savepoint.rollback()
