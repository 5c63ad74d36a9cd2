"""What every front end does with a call: validate the input, run the service in one
transaction, hand back the output schema. Errors propagate as MemsysError."""

import functools
import logging
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.orm import Session

from memsys import deferred
from memsys.db import session_scope
from memsys.errors import Contended, from_os_error
from memsys.schemas import parse
from memsys.services import tracing

log = logging.getLogger(__name__)
In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out")


def execute(service: Callable[[Session, In], Out], model: type[In], data: dict[str, Any]) -> Out:
    return run(service, parse(model, data))


def before_transaction(
    prepare: Callable[[Any], Any],
) -> Callable[[Callable[..., Out]], Callable[..., Out]]:
    """Mark a service's slow step that needs no transaction (reading a file, embedding):
    `run` calls `prepare(params)` before the transaction opens, so a slow model never holds
    a pooled connection or a row lock, and passes a result that is not None as `prepared=`.
    (One short text may instead be embedded beside its call's first statements, for the
    milliseconds that takes: a retrieval's query, embeddings.QueryCache.prefetch, and a
    single memory's content, embeddings.embed_beside — `prepare` then only starts it.)"""

    def mark(service: Callable[..., Out]) -> Callable[..., Out]:
        setattr(service, "prepare", prepare)  # noqa: B010 (an attribute of a function)
        return service

    return mark


def retrieval_only(service: Callable[..., Out]) -> Callable[..., Out]:
    """Mark a retrieval that reads neither traces nor access counts (ranking uses confidence
    and stage): it does not wait for the trace and access writes earlier calls left behind
    (memsys.deferred). Anything that reads or removes those rows must not be marked."""
    setattr(service, "retrieval_only", True)  # noqa: B010 (an attribute of a function)
    return service


# How often a call the server rolled back to break a deadlock runs again (errors.Contended),
# and the pause before each retry, growing, with jitter so two victims do not meet again.
ATTEMPTS = 4
_PAUSE_S = 0.02


def run(service: Callable[[Session, In], Out], params: In) -> Out:
    """Run a service on input that is already validated, in one transaction; a transaction
    the server rolled back to let another through runs again (nothing of it was written, and
    what `prepare` made is reused)."""
    try:
        prepare = getattr(service, "prepare", None)
        prepared = prepare(params) if prepare is not None else None
        for attempt in range(1, ATTEMPTS):
            try:
                return _once(service, params, prepared, last=False)
            except Contended:
                time.sleep(_PAUSE_S * attempt * (1 + random.random()))
        return _once(service, params, prepared, last=True)
    except OSError as exc:  # a path the file system refused (too long, a link loop, …)
        log.warning("%s: refused by the system: %s", _operation_name(service), exc)
        raise from_os_error(exc) from None


def _operation_name(service: Callable[..., Any]) -> str:
    """The service's function name, for a log line: a call with arguments bound
    (functools.partial, as `memsys index` binds its progress bar) by the function it calls,
    not the partial's repr (an address and every bound argument)."""
    while isinstance(service, functools.partial):
        service = service.func
    return str(getattr(service, "__name__", type(service).__name__))


def _once(service: Callable[..., Out], params: In, prepared: Any, last: bool) -> Out:
    collecting = tracing.collecting()
    try:
        # A retrieval's trace and access counts are written after it commits (memsys.deferred).
        waits = not getattr(service, "retrieval_only", False)
        with (
            nullcontext() if waits else deferred.not_waiting(),
            deferred.collecting(),
            session_scope() as session,
        ):
            if prepared is None:
                return service(session, params)
            return service(session, params, prepared=prepared)
    except Contended:
        if last:  # else the attempt that follows writes the call's trace
            tracing.write_failures()
        raise
    except Exception:
        tracing.write_failures()  # a failed retrieval keeps its trace, written after rollback
        raise
    finally:
        tracing.stop_collecting(collecting)


def execute_bare(service: Callable[[Session], Out]) -> Out:
    """A service that takes no input (stats, namespace list)."""
    with session_scope() as session:
        return service(session)
