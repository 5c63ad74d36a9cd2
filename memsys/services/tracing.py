"""Every retrieval leaves a trace (FEATURES F1), a failed one included.

A tool that retrieves opens `traced(...)`; the retrieval pipeline's result reaches it through
`search.hybrid` (`saw`), and the tool writes the trace with what it returned (`write`), in
the tool's own transaction. When the tool fails with an unexpected error, the trace is kept
aside with `error` and `error_type = 'system_error'` and the runner writes it in a
transaction of its own after the rollback (`collecting` / `write_failures`). A refused call
(MemsysError: bad input, unknown namespace) retrieved nothing and leaves no trace: bad input
leaves the data untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from memsys import deferred, ids
from memsys.db import session_scope, transaction_time
from memsys.embeddings import embed_query
from memsys.errors import MemsysError
from memsys.models.log import ALL_NAMESPACES
from memsys.retrieval import fusion, lexical
from memsys.retrieval import trace as shape
from memsys.retrieval.pipeline import Retrieval
from memsys.services import events

log = logging.getLogger(__name__)

ROUTING = "hybrid: pgvector kNN + BM25 (PostgreSQL), score-aware fusion"
STORES = ["vector", "fulltext"]
USER_CONTEXT = ("session_id", "user_id", "agent", "project")
MAX_ERROR_CHARS = 500


@dataclass
class Draft:
    """What one tool call has retrieved so far."""

    operation: str
    query: str
    namespace: str
    filters: dict[str, Any]
    user_context: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    found: Retrieval | None = None
    request: dict[str, Any] = field(default_factory=dict)
    call: dict[str, Any] = field(default_factory=dict)  # the tool's input, for replay

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 3)


_current: ContextVar[Draft | None] = ContextVar("memsys_trace_draft", default=None)
_failures: ContextVar[list[dict[str, Any]] | None] = ContextVar(
    "memsys_trace_failures", default=None
)


@dataclass
class Replay:
    """How a replayed call retrieves: as of a time, with given weights, pool and vector."""

    as_of: datetime | None
    weights: fusion.Weights
    method: str
    pool: int | None
    vector: np.ndarray | None
    terms: lexical.QueryTerms | None = None  # BM25 statistics as the trace recorded them
    written: list[str] = field(default_factory=list)  # the trace ids the replayed call wrote


_replay: ContextVar[Replay | None] = ContextVar("memsys_trace_replay", default=None)


@contextmanager
def replaying(how: Replay) -> Iterator[Replay]:
    token = _replay.set(how)
    try:
        yield how
    finally:
        _replay.reset(token)


def replay_settings() -> Replay | None:
    """The replay in progress on this call, if any (search.hybrid retrieves as it says)."""
    return _replay.get()


def user_context_of(params: Any) -> dict[str, Any]:
    """The caller's session/user/agent, from the fields of the call that name them."""
    found = {name: getattr(params, name, None) for name in USER_CONTEXT}
    return {k: v for k, v in found.items() if v is not None}


@contextmanager
def traced(
    operation: str,
    query: str,
    *,
    namespace: str | None,
    filters: dict[str, Any],
    params: Any = None,
) -> Iterator[Draft]:
    draft = Draft(
        operation=operation,
        query=query,
        namespace=namespace or ALL_NAMESPACES,
        filters=filters,
        user_context=user_context_of(params),
        call=params.model_dump(mode="json") if params is not None else {},
    )
    token = _current.set(draft)
    try:
        yield draft
    except MemsysError:
        raise
    except Exception as exc:
        pending = _failures.get()
        if pending is not None:
            pending.append(_failure(draft, exc))
        raise
    finally:
        _current.reset(token)


def saw(found: Retrieval, request: dict[str, Any]) -> None:
    """The pipeline's result, for the trace of the tool call in progress (if any)."""
    draft = _current.get()
    if draft is not None:
        draft.found, draft.request = found, request


def _retrieval_fields(draft: Draft, vector: np.ndarray | None) -> dict[str, Any]:
    found = draft.found
    if found is None:
        return {"candidates": [], "channels": {}, "fusion": {"input": draft.call}, "timings": {}}
    return {
        "candidates": shape.candidates_of(found),
        "channels": shape.channels_of(found),
        "fusion": {**shape.fusion_of(found, draft.request, vector), "input": draft.call},
        "timings": dict(found.timings),
    }


def write(
    session: Session,
    draft: Draft,
    *,
    retrieved: list[dict[str, Any]],
    output: dict[str, Any] | None = None,
    stores: list[str] | None = None,
    routing: str | None = None,
    mode_detected: str | None = None,
    mode_confidence: float | None = None,
    verification: dict[str, Any] | None = None,
    timings: dict[str, float] | None = None,
) -> str:
    """Record the call's trace (and its query event) and return its id. A tool that detects
    a mode or verifies its result passes them here (`verification["passed"]` feeds the
    verification-failure alert). Through the runner the row is written after the call
    commits (memsys.deferred), with the call's transaction time; a replay (which reads the
    trace back in its savepoint) and a call outside the runner write it here."""
    replaying = _replay.get()
    # The vector the retrieval used: the replay's own, else the query cache's copy.
    if replaying is not None:
        vector = replaying.vector
    else:
        vector = embed_query(draft.query) if draft.found is not None and draft.query else None
    total_ms = draft.elapsed_ms()
    trace_id = ids.new_id(ids.QUERY)

    def insert(into: Session, at: datetime | None = None) -> None:
        fields = _retrieval_fields(draft, vector)
        # The pipeline's stages, then the tool's own (plan, verify, assemble…), then the total.
        events.trace_query(
            into,
            trace_id=trace_id,
            at=at,
            namespace=draft.namespace,
            operation=draft.operation,
            query=draft.query,
            filters=draft.filters,
            stores=STORES if stores is None else stores,
            routing=ROUTING if routing is None else routing,
            retrieved=retrieved,
            timings={**fields.pop("timings"), **(timings or {}), "total_ms": total_ms},
            output=output,
            user_context=draft.user_context,
            mode_detected=mode_detected,
            mode_confidence=mode_confidence,
            verification=verification,
            **fields,
        )

    if deferred.active():
        at = transaction_time(session)
        deferred.defer(lambda into: insert(into, at))
    else:  # outside the runner, or a replay (it writes inline, in its savepoint)
        insert(session)
    if replaying is not None:
        replaying.written.append(trace_id)
    return trace_id


def error_text(exc: BaseException) -> str:
    """The error's kind and first line, without SQL or parameters (a driver error's own
    message, not SQLAlchemy's statement dump)."""
    origin = getattr(exc, "orig", None) or exc
    lines = str(origin).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(origin).__name__}: {first}"[:MAX_ERROR_CHARS]


def _failure(draft: Draft, exc: BaseException) -> dict[str, Any]:
    return {
        "namespace": draft.namespace,
        "operation": draft.operation,
        "query": draft.query,
        "filters": draft.filters,
        "stores": STORES,
        "routing": ROUTING,
        "candidates": [],
        "retrieved": [],
        "timings": {"total_ms": draft.elapsed_ms()},
        "user_context": draft.user_context,
        "error": error_text(exc),
        "error_type": "system_error",
        "fusion": {"input": draft.call},
    }


def collecting() -> Any:
    """Start keeping failed traces for this call; returns the token for `stop_collecting`."""
    return _failures.set([])


def stop_collecting(token: Any) -> None:
    _failures.reset(token)


def write_failures() -> None:
    """Write the traces of this call's failed retrievals, each in its own transaction."""
    pending = _failures.get() or []
    while pending:
        row = pending.pop(0)
        try:
            with session_scope() as session:
                events.trace_query(session, **row)
        except Exception:  # the database itself may be what failed: the caller's error wins
            log.warning("could not write the trace of a failed %s", row["operation"], exc_info=True)
