"""Writes that follow the answer: a retrieval's trace and its access counts.

A retrieval reads; what it records about itself (its trace, FEATURES F1, and one access per
memory it handed out) is written by one background thread after the call's transaction
commits, so the caller has its answer without waiting for those writes. What the writes say
is fixed before the answer leaves: the trace's id, its time and its access rows' time are the
call's transaction time, so a replay and the access log read exactly what an inline write
would have left.

Consistency within a process: every transaction this process opens (`db.session_scope`)
first waits until the deferred writes of calls that returned before it are committed
(`settle`), so any later call — reading a trace, replaying it, counting accesses, purging a
memory — sees them. Retrievals alone do not wait (`not_waiting`; the runner's
`retrieval_only` services): ranking reads confidence and stage, never a trace or an access
count, so a run of recalls answers each without queueing behind the last one's writes.
Another process sees the writes a few milliseconds after the answer.

What is given up: a process killed between an answer and its writes (SIGKILL, power loss)
loses those traces and access counts; the data the call read is untouched. A clean stop
(SIGTERM, the end of a CLI command) writes them first (`drain`). A write that fails is
logged and dropped: it never fails the call that has already answered.

A call collects its writes with `collecting()` (the runner does); a service run outside it
(a test's own session) or inside `inline()` (a replay, in the savepoint it rolls back) writes
them in the caller's transaction. A failed call's trace (tracing.write_failures) is written
after its rollback, in a transaction of its own, not here.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

from sqlalchemy import text
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

Write = Callable[[Session], None]
WRITER_NICE = 10  # the writer thread's niceness: behind any call in flight
SETTLE_SECONDS = 10.0  # a caller never waits longer for earlier writes (the database may be gone)

_ASYNC_COMMIT = text("SET LOCAL synchronous_commit = off")

_pending: ContextVar[list[Write] | None] = ContextVar("memsys_deferred", default=None)
_waiting: ContextVar[bool] = ContextVar("memsys_deferred_waiting", default=True)


def active() -> bool:
    """Whether the call in progress collects deferred writes (it runs through the runner)."""
    return _pending.get() is not None


def defer(write: Write) -> None:
    """Queue `write` to run after the current call commits (only while `active()`)."""
    pending = _pending.get()
    if pending is None:
        raise RuntimeError("no call collects deferred writes here: write inline")
    pending.append(write)


@contextmanager
def collecting() -> Iterator[None]:
    """Collect the call's deferred writes; hand them to the writer when the block ends
    without an error (its transaction committed), drop them when it raises (rolled back)."""
    pending: list[Write] = []
    token = _pending.set(pending)
    try:
        yield
    finally:
        _pending.reset(token)
    if pending:
        # The caller's context goes with its writes: the tenancy scope they run under.
        _writer().submit(contextvars.copy_context(), pending)


class _Writer:
    """One thread that runs the calls' writes in order, each call's in one transaction."""

    def __init__(self) -> None:
        self._jobs: deque[tuple[contextvars.Context, list[Write]]] = deque()
        self._changed = threading.Condition()
        self._submitted = 0
        self._done = 0
        self._stuck: int | None = None  # `_done` when a caller last gave up waiting
        self._thread: threading.Thread | None = None

    def submit(self, context: contextvars.Context, writes: list[Write]) -> None:
        with self._changed:
            self._jobs.append((context, writes))
            self._submitted += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="memsys-deferred")
                self._thread.daemon = True
                self._thread.start()
            self._changed.notify_all()

    def _loop(self) -> None:
        from memsys.db import session_scope

        _yield_cpu()
        while True:
            with self._changed:
                while not self._jobs:
                    self._changed.wait()
                context, writes = self._jobs.popleft()
            try:
                context.run(_run, session_scope, writes)
            except Exception:  # the answer is out: log it, never take the writer down
                log.warning("a deferred write (trace or access count) failed", exc_info=True)
            with self._changed:
                self._done += 1
                self._changed.notify_all()

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def settle(self, timeout: float = SETTLE_SECONDS) -> bool:
        """Wait until every write submitted before this call is committed (not the ones
        submitted while it waits: a busy server never starves a caller)."""
        with self._changed:
            target = self._submitted
            if self._done >= target:
                return True
            if self._stuck == self._done:  # still on the write a caller gave up on: go on
                return False
            if self._changed.wait_for(lambda: self._done >= target, timeout):
                return True
            self._stuck = self._done
        log.warning("deferred writes still pending after %.0f s; going on without them", timeout)
        return False


def _yield_cpu() -> None:
    """Lower this thread's CPU priority (Linux schedules threads one by one): on a busy
    machine the calls in flight — embedding a query, reading — go first, and the writes that
    follow an answer take the time left over."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITER_NICE)
    except (AttributeError, OSError):  # not Linux, or not allowed: the usual priority
        return


def _run(session_scope: Callable[[], AbstractContextManager[Session]], writes: list[Write]) -> None:
    with session_scope() as session:
        # A trace or an access count lost to a crash costs no data; not waiting for the
        # WAL flush keeps each write's commit off the disk's latency.
        session.execute(_ASYNC_COMMIT)
        for write in writes:
            write(session)


_instance: _Writer | None = None
_instance_lock = threading.Lock()


def _writer() -> _Writer:
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = _Writer()
            atexit.register(drain)  # before the embedded server's own exit hook (LIFO)
        return _instance


@contextmanager
def inline() -> Iterator[None]:
    """Write here, in the caller's transaction, what would be deferred (a replay: its
    savepoint's rollback must take the writes too)."""
    token = _pending.set(None)
    try:
        yield
    finally:
        _pending.reset(token)


@contextmanager
def not_waiting() -> Iterator[None]:
    """For a call that reads neither traces nor access counts (a retrieval): its
    transactions do not wait for the writes earlier calls left behind."""
    token = _waiting.set(False)
    try:
        yield
    finally:
        _waiting.reset(token)


def writing() -> bool:
    """Whether this thread is the writer's (running the writes of calls that committed)."""
    return _instance is not None and _instance.on_thread()


def settle(timeout: float = SETTLE_SECONDS) -> bool:
    """Wait for the deferred writes of calls that have returned (no-op on the writer's own
    thread, inside `not_waiting`, and when nothing was ever deferred); False when they were
    still pending when the time ran out, or still stuck on the write an earlier caller gave
    up on (one wait per stuck write, not one per transaction)."""
    writer = _instance
    if writer is None or writer.on_thread() or not _waiting.get():
        return True
    return writer.settle(timeout)


def drain() -> None:
    """Write what is pending before the process (or its database) stops."""
    settle()
