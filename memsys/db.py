"""Engine and `session_scope()`: the one transaction seam.

The server is MEMSYS_DATABASE_URL's, or the embedded one (memsys.embedded) when it is unset.
Also here: the transaction's time, the advisory locks by which writers take turns, and what
a database error means to a caller (a lost connection, a time limit, contention).
"""

from __future__ import annotations

import functools
import json
import logging
import select
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from datetime import datetime
from typing import Any, cast

import orjson
import psycopg
from psycopg.pq import ConnStatus
from psycopg.rows import namedtuple_row
from sqlalchemy import (
    CursorResult,
    Engine,
    Executable,
    create_engine,
    event,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.pool import QueuePool
from sqlalchemy.sql.elements import TextClause

from memsys import deferred, embedded, tenancy
from memsys.config import Settings, get_settings
from memsys.dberrors import connection_lost, short_of_resources, timed_out
from memsys.errors import (
    Cancelled,
    Conflict,
    DatabaseUnavailable,
    Protected,
    TimedOut,
)

log = logging.getLogger(__name__)

_lock = threading.Lock()
_engine: Engine | None = None
_sessionmaker: sessionmaker[Session] | None = None


def database_url(settings: Settings | None = None) -> str:
    settings = settings or get_settings()
    if settings.database_url:
        url = settings.database_url
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        return url
    return embedded.start(settings)


def describe_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return make_url(url).render_as_string(hide_password=True)


def json_text(value: Any) -> str:
    """JSON for JSONB parameters: orjson (~6x faster than the standard library on a trace's
    candidates; PostgreSQL stores the same values), and the standard library for what orjson
    refuses (integers beyond 64 bits) or would accept where the standard library does not
    (dates: they go on to its TypeError, as before). NaN and Infinity, which orjson writes
    as null, never come from a caller: every input refuses them (schemas.common.check_values,
    the vault's record checks); a NaN memsys computed itself is stored as null."""
    try:
        return orjson.dumps(value, option=_ORJSON, default=_not_json).decode()
    except TypeError:
        return json.dumps(value)


_ORJSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
_ORJSON |= orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


POOL_SIZE, POOL_OVERFLOW = 5, 10
POOL_WAIT_S = 30.0  # how long a call waits for a free connection when all are in use


def make_engine(
    url: str, settings: Settings | None = None, pool_wait_s: float = POOL_WAIT_S
) -> Engine:
    settings = settings or get_settings()
    # Session settings go in as connection options so that prepared statements see them.
    # relaxed_order iterative scans keep filtered HNSW queries from returning too few rows.
    # statement_timeout and lock_timeout: no request hangs (timed_out() says what happened).
    options = (
        f"-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search={settings.hnsw_ef_search} "
        f"-c timezone=UTC {tenancy.CONNECTION_OPTIONS} "
        f"-c statement_timeout={_milliseconds(settings.statement_timeout_s)} "
        f"-c lock_timeout={_milliseconds(settings.lock_timeout_s)}"
    )
    engine = create_engine(
        url,
        pool_size=POOL_SIZE,
        max_overflow=POOL_OVERFLOW,
        pool_timeout=pool_wait_s,
        connect_args={"options": options},
        json_serializer=json_text,
    )
    event.listen(engine, "checkin", _at_rest)
    event.listen(engine, "checkout", functools.partial(_still_open, engine.dialect))
    event.listen(engine, "checkout", _now_busy)
    event.listen(engine, "checkin", _no_longer_busy)
    return engine


# The connections calls hold now (checked out of a pool), which `cancel_running` interrupts
# when the server stops; not those of the deferred writes (the last answers' traces, which
# the stop writes before it ends).
_busy: dict[Any, Any] = {}  # pool entry → its psycopg connection
# Reentrant: `memsys mcp`'s signal handler cancels on the main thread, which may hold it.
_busy_lock = threading.RLock()


def _now_busy(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    if not deferred.writing():
        with _busy_lock:
            _busy[record] = dbapi_connection


def _no_longer_busy(dbapi_connection: Any, record: Any) -> None:
    with _busy_lock:
        _busy.pop(record, None)


# How long `cancel_running` goes on cancelling: a call whose statement was cancelled between
# two of them (the cancel found its connection idle) is cancelled again at its next one.
CANCEL_FOR_S = 5.0


def cancel_running(within_s: float = CANCEL_FOR_S) -> int:
    """Cancel the statements of the calls still running, for a server that stops after its
    grace: a statement waiting for a lock another transaction holds waited as long as that
    transaction (the stop with it, up to MEMSYS_STATEMENT_TIMEOUT_S). Each such call fails,
    its transaction rolled back, and gives its connection back; repeated until none holds
    one or `within_s` passed (at least once: `within_s` 0 cancels what runs now, for a
    process about to exit). Returns how many were running."""
    deadline = time.monotonic() + within_s
    running: int | None = None
    while True:
        # Cancelled under the lock: a connection given back and taken again by another
        # thread (the deferred writes) between the listing and its cancel is not cancelled.
        with _busy_lock:
            held = list(_busy.values())
            running = len(held) if running is None else running
            if not held:
                return running
            for connection in held:
                with suppress(Exception):  # closed meanwhile, or the server is gone
                    connection.cancel_safe(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
        if time.monotonic() >= deadline:
            return running
        time.sleep(0.1)


# A connection that rested longer than this is pinged on checkout (a firewall or a NAT may
# have dropped it without a word); one in steady use is checked by its socket alone.
IDLE_PING_S = 30.0


def _at_rest(dbapi_connection: Any, record: Any) -> None:
    record.info["at_rest_since"] = time.monotonic()


def _still_open(dialect: Any, dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Refuse a pooled connection the server has ended (a restart, pg_terminate_backend,
    idle_session_timeout); SQLAlchemy then opens another.

    Instead of pool_pre_ping's round trip on every checkout (~0.25 ms per call here): a
    connection at rest has nothing to read (memsys never LISTENs), so a readable socket
    means the server said goodbye. A peer that vanished without a word is not seen that way,
    so a connection that rested longer than IDLE_PING_S is pinged as before."""
    pgconn = getattr(dbapi_connection, "pgconn", None)
    try:
        if pgconn is not None:
            if dbapi_connection.closed or pgconn.status != ConnStatus.OK:
                raise DisconnectionError("the connection is closed")
            if _readable(pgconn.socket):
                raise DisconnectionError("the server ended this connection")
        since = record.info.pop("at_rest_since", None)
        if pgconn is None or (since is not None and time.monotonic() - since > IDLE_PING_S):
            dialect.do_ping(dbapi_connection)
    except DisconnectionError:
        raise
    except Exception as exc:  # a failed ping, a socket the OS refuses to watch
        raise DisconnectionError(f"the connection failed its check: {exc}") from exc


def _readable(fd: int) -> bool:
    """Whether `fd` has something to read, without waiting (poll: no limit on fd numbers)."""
    if hasattr(select, "poll"):
        watch = select.poll()
        watch.register(fd, select.POLLIN)
        return bool(watch.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # Windows
    return bool(readable)


def _milliseconds(seconds: float) -> int:
    """A limit in PostgreSQL's unit; 0 stays "none", anything above it at least 1 ms."""
    return 0 if seconds == 0 else max(1, round(seconds * 1000))


def get_engine() -> Engine:
    global _engine, _sessionmaker
    if _engine is None:
        with _lock:
            if _engine is None:
                url = database_url()
                engine = make_engine(url)
                try:
                    with engine.connect() as conn:
                        conn.execute(text("SELECT 1"))
                except OperationalError as exc:
                    raise DatabaseUnavailable(
                        f"Cannot connect to PostgreSQL at {describe_url(url)}: "
                        f"{str(exc.orig).strip().splitlines()[0]}"
                    ) from exc
                _engine = engine
                _sessionmaker = sessionmaker(engine, expire_on_commit=False)
    return _engine


def set_engine(engine: Engine | None) -> None:
    """Point every session at `engine`; None closes the current one's connections."""
    global _engine, _sessionmaker
    deferred.settle()  # what calls left to write goes where they ran
    with _lock:
        if _engine is not None and _engine is not engine:
            _engine.dispose()
        _engine = engine
        _sessionmaker = sessionmaker(engine, expire_on_commit=False) if engine else None


def stop_embedded() -> None:
    """Leave the embedded server now (it stops if this was its last user), not at exit."""
    set_engine(None)
    embedded.leave()


# Set by a front end whose call may be cancelled (memsys.mcp: notifications/cancelled, or
# the client gone): session_scope then rolls the call's transaction back, never commits it.
_cancelled: ContextVar[threading.Event | None] = ContextVar("memsys_cancelled", default=None)


@contextmanager
def cancellable(cancelled: threading.Event) -> Iterator[None]:
    """Run the block's transactions (and those of worker threads that copy this context)
    as a call that `cancelled.set()` cancels: one that has not committed by then rolls back
    and raises Cancelled; one whose commit had begun stays committed."""
    token = _cancelled.set(cancelled)
    try:
        yield
    finally:
        _cancelled.reset(token)


def raise_if_cancelled() -> None:
    """Raise Cancelled if this call was cancelled: session_scope asks before and at its
    commit; a long call's loop (a folder's files, an import's batches) asks as it goes, so
    as not to run on to its commit only to roll back there."""
    cancelled = _cancelled.get()
    # The writes a committed call left (memsys.deferred) run under a copy of its context,
    # flag included; that call is done, and a cancel that came after it changes nothing.
    if cancelled is not None and cancelled.is_set() and not deferred.writing():
        raise Cancelled("The call was cancelled before it committed; nothing of it was written")


@contextmanager
def session_scope() -> Iterator[Session]:
    """One transaction: commit when the block succeeds, roll back when it raises or when
    its call was cancelled (`cancellable`). It first waits for the deferred writes (traces,
    access counts) of the calls this process has answered (memsys.deferred.settle: not on
    the writer's thread, not inside `not_waiting`, at most SETTLE_SECONDS)."""
    raise_if_cancelled()
    deferred.settle()
    get_engine()
    assert _sessionmaker is not None
    session = _sessionmaker()
    try:
        tenancy.apply(session)  # a scoped caller's namespaces, for this transaction only
        yield session
        raise_if_cancelled()  # the last moment a cancel is heard: after it, the commit stands
        session.commit()
    except DBAPIError as exc:
        lost = connection_lost(exc)
        if lost is None:
            session.rollback()
            if getattr(exc.orig, "sqlstate", None) == _DENIED and not tenancy.current().admin:
                raise Protected(tenancy.denied_message()) from None
            late = timed_out(exc)
            if late is not None:
                raise late from None
            short = short_of_resources(exc)
            if short is not None:
                raise short from None
            raise
        with suppress(DBAPIError):  # the connection is gone: nothing was committed
            session.rollback()
        raise lost from exc
    except StaleDataError:
        # An ORM update that matched no row: the policies hid a row the caller may read but
        # not change from the UPDATE (refused), or another call deleted or re-keyed the row
        # since this one read it (a conflict, for admins and writers alike).
        session.rollback()
        if any(not tenancy.may_write(ns) for ns in session.info.get(_CHANGING, ())):
            raise Protected(tenancy.denied_message()) from None
        raise Conflict(
            "Another call changed or deleted what this call was changing while it ran; "
            "nothing of this call was written. Read it again and retry."
        ) from None
    except PoolTimeout:  # every connection stayed in use (long imports, a flood of calls)
        session.rollback()
        pool = getattr(session.get_bind(), "pool", None)
        waited = pool.timeout() if isinstance(pool, QueuePool) else POOL_WAIT_S
        raise TimedOut(
            f"Every database connection of this server stayed in use for {waited:g} s (other "
            "calls are running: long imports, or more calls at once than connections); this "
            "call did nothing. Try again."
        ) from None
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


# SQLSTATE classes of a refused or lost connection: 08 connection exception,
# 57P admin shutdown / crash shutdown / cannot connect now.
_ADVISORY_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


def transaction_time(session: Session) -> datetime:
    """now() of the session's transaction, read once per transaction: the time a deferred
    write records (what an inline write's now() would have been)."""
    session.connection()  # begins the transaction if it has not begun
    # Keyed by the transaction object itself (held here), not its id(): a later transaction
    # of the same session may be given a freed one's id.
    transaction = session.get_transaction()
    cached = session.info.get("memsys_now")
    if cached is None or cached[0] is not transaction:
        cached = (transaction, session.scalar(_NOW))
        session.info["memsys_now"] = cached
    return cast(datetime, cached[1])


def remember_transaction_time(session: Session, now: datetime) -> None:
    """Keep the transaction's now() that a statement read along with something else, so
    that `transaction_time` needs no round trip of its own."""
    session.info["memsys_now"] = (session.get_transaction(), now)


_NOW = text("SELECT now()")
_CLOCK = text("SELECT clock_timestamp()")


def clock(session: Session) -> datetime:
    """The server's clock now, not the transaction's start: the time of a change made once
    the writer's turn or rows are held (a transaction that waited for another began before
    the rows that one wrote)."""
    return cast(datetime, session.scalar(_CLOCK))


def writing_alone(session: Session, namespaces: Iterable[str]) -> None:
    """Say that this transaction holds these namespaces' write turns alone (an import:
    memsys.services.namespaces.write_alone): no other writer runs in them until it ends, so
    the turns it would take per key there (take_turns, take_turns_all) are not taken. A large
    import took one lock per row it wrote, held to its commit, and ran out of PostgreSQL's
    lock table (max_locks_per_transaction) at a few thousand."""
    held = alone(session)
    session.info[_ALONE] = (session.get_transaction(), held | set(namespaces))


def alone(session: Session) -> frozenset[str]:
    """The namespaces this transaction writes alone in (writing_alone)."""
    held = session.info.get(_ALONE)
    if held is None or held[0] is not session.get_transaction():
        return frozenset()
    return frozenset(held[1])


_ALONE = "memsys_alone"


def take_turns(session: Session, *parts: str) -> None:
    """Serialise the transactions that name the same parts (a namespace and a key, a file, a
    pair of memories) until they commit: a transaction-level advisory lock. None in a
    namespace the transaction writes alone in (writing_alone): no one to take turns with."""
    if parts and parts[0] in alone(session):
        return
    session.execute(_ADVISORY_LOCK, {"key": "\x1f".join(parts)})


_ADVISORY_LOCKS = """
    SELECT count({lock}(hashtextextended(k, 0)))
    FROM (
        SELECT k FROM (SELECT DISTINCT k FROM unnest(CAST(:keys AS text[])) AS u(k)) AS d
        ORDER BY k COLLATE "C"
    ) AS sorted
"""
_TAKE_ALL = {
    False: text(_ADVISORY_LOCKS.format(lock="pg_advisory_xact_lock")),
    True: text(_ADVISORY_LOCKS.format(lock="pg_advisory_xact_lock_shared")),
}


def take_turns_all(session: Session, keys: list[tuple[str, ...]], shared: bool = False) -> None:
    """take_turns for many keys in one statement, always in the same (sorted) order, so two
    transactions that share some keys queue instead of deadlocking. The order is by code
    point whatever the database's collation: Python's sorted() gives the same. `shared`:
    holders of a shared turn go together and wait only for an exclusive one. None in a
    namespace the transaction writes alone in (writing_alone)."""
    held = alone(session)
    keys = [k for k in keys if not k or k[0] not in held]
    if keys:
        session.execute(*turns_statement(keys, shared))


# The same, taken only while the shared turn of :holding is held (or can be had at once).
_TAKE_ALL_HOLDING = text(
    _ADVISORY_LOCKS.format(lock="pg_advisory_xact_lock")
    + "WHERE (SELECT pg_try_advisory_xact_lock_shared(hashtextextended(:holding, 0)))"
)


def turns_statement(
    keys: list[tuple[str, ...]], shared: bool = False, holding: str | None = None
) -> tuple[TextClause, dict[str, Any]]:
    """take_turns_all's statement and parameters, to send along with others (in_one_trip).
    `holding`: a key whose shared turn must come first; the exclusive turns are taken only
    if it is held, or free at once (a statement sent before the caller knows it has it)."""
    params = {"keys": ["\x1f".join(parts) for parts in keys]}
    if holding is None:
        return _TAKE_ALL[shared], params
    assert not shared
    return _TAKE_ALL_HOLDING, {**params, "holding": holding}


Statement = tuple[TextClause, dict[str, Any]]


def _not_the_second_report(record: logging.LogRecord) -> bool:
    """Drop psycopg's "error ignored terminating <Pipeline>" warning. When a statement of a
    pipeline fails, psycopg raises its error from the block and, about half the time, logs
    the same failure again as it leaves the pipeline; that line went to stderr (the CLI's
    first use printed it while the schema was being created) and to the server's log,
    though the error itself is raised and handled as any other."""
    return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_not_the_second_report)


def in_one_trip(session: Session, *statements: Statement) -> list[list[Any]]:
    """Run text() statements in the session's transaction one after another, each as its
    own statement (its own snapshot: a read sees what a lock taken by the statement before
    it waited for), as separate session.execute calls would, but sent to the server in one
    round trip (psycopg's pipeline mode); the rows of each, with attribute access. The
    first statement that fails fails the call, and the ones after it do not run. Without
    pipeline support (another driver, an old libpq) they are executed one by one."""
    connection = session.connection()
    raw = connection.connection.driver_connection
    if not isinstance(raw, psycopg.Connection) or not psycopg.Pipeline.is_supported():
        return [list(session.execute(stmt, params)) for stmt, params in statements]
    dialect = connection.dialect
    sent: list[tuple[str, dict[str, Any]]] = []
    try:
        cursors = []
        with raw.pipeline():
            for stmt, params in statements:
                sql = _compiled(stmt, dialect)
                sent.append((sql, params))
                cursors.append(raw.cursor(row_factory=namedtuple_row).execute(sql, params))
        return [cursor.fetchall() if cursor.description else [] for cursor in cursors]
    except psycopg.Error as exc:  # as SQLAlchemy raises it: session_scope maps DBAPIError
        # A pipeline reports the first failure when it syncs, not which statement failed:
        # the error names every statement of the trip (for logs; clients never see SQL).
        sql = ";\n".join(s for s, _ in sent)
        params = {k: v for _, p in sent for k, v in p.items()}
        raise DBAPIError.instance(sql, params, exc, psycopg.Error, dialect=dialect) from exc


@functools.lru_cache(maxsize=64)
def _compiled(stmt: TextClause, dialect: Any) -> str:
    return str(stmt.compile(dialect=dialect))


def rowcount(session: Session, statement: Executable) -> int:
    """Rows an UPDATE or DELETE touched."""
    result = session.execute(statement)
    return int(cast(CursorResult[Any], result).rowcount or 0)


_DENIED = "42501"  # insufficient_privilege: a row-level security policy refused a write
_CHANGING = "memsys.changing"  # session.info: the namespaces a scoped caller's flush changes


@event.listens_for(Session, "before_flush")
def _note_changing(session: Session, flush_context: Any, instances: Any) -> None:
    """Note the namespaces of the rows a scoped caller's flush updates or deletes: a failed
    flush expires them, and session_scope tells a refusal from a conflict by them."""
    if not tenancy.current().admin:
        rows = [*session.dirty, *session.deleted]
        session.info[_CHANGING] = {getattr(row, "namespace", None) for row in rows} - {None}
