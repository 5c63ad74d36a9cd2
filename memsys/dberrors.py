"""What a database error means to a caller: the server gone, a time limit passed, contention,
resources short, or a server that cannot hold memsys's schema (pgvector missing or old). Each
is one of memsys's errors, which every front end shows the same way (HTTP 503, the MCP
envelope, CLI exit 1); session_scope maps a failed transaction's error through these.
"""

from __future__ import annotations

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, OperationalError

from memsys.config import get_settings
from memsys.errors import Contended, DatabaseUnavailable, SystemRefused, TimedOut

_LOST_SQLSTATES = ("08", "57P")


def connection_lost(exc: DBAPIError) -> DatabaseUnavailable | None:
    """The error every front end shows (HTTP 503, CLI exit 1) when the server went away.

    Only connection failures qualify; a query error or a serialization failure stays what it is.
    """
    sqlstate = getattr(exc.orig, "sqlstate", None)
    refused = isinstance(exc, OperationalError) and sqlstate is None
    if not (exc.connection_invalidated or refused or str(sqlstate).startswith(_LOST_SQLSTATES)):
        return None
    first = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
    return DatabaseUnavailable(f"Database unavailable: {first}")


# query_canceled (statement_timeout, or an operator's cancel request: the server's message
# tells them apart only in its own language) and lock_not_available (lock_timeout).
_TIMED_OUT = {
    "57014": (
        "The database cancelled a statement of this call: it ran past the statement timeout "
        "(MEMSYS_STATEMENT_TIMEOUT_S, {s} s; a wait for another transaction's lock counts), "
        "or an operator cancelled it. Its transaction was rolled back."
    ),
    "55P03": (
        "Another transaction held what this call needs for more than {s} s "
        "(MEMSYS_LOCK_TIMEOUT_S). Its transaction was rolled back; try again."
    ),
}


# deadlock_detected, serialization_failure: the server rolled the transaction back so that
# another could go on; the same call run again normally goes through.
_CONTENDED = {"40P01", "40001"}


def timed_out(exc: DBAPIError) -> TimedOut | None:
    """The error every front end shows (HTTP 503, the MCP envelope, CLI exit 1) when a
    statement or a lock wait passed its limit, or the server broke a deadlock (Contended,
    which the runner retries); None for any other error."""
    sqlstate = str(getattr(exc.orig, "sqlstate", None))
    if sqlstate in _CONTENDED:
        return Contended(
            "The database rolled this call back to let another transaction writing the same "
            "rows go on (a deadlock it broke, or a serialization conflict); nothing of it was "
            "written. Try again."
        )
    template = _TIMED_OUT.get(sqlstate)
    if template is None:
        return None
    settings = get_settings()
    limit = settings.statement_timeout_s if sqlstate == "57014" else settings.lock_timeout_s
    if limit == 0:  # no limit set: only a cancel request ends a statement
        return TimedOut("The database cancelled this call; its transaction was rolled back.")
    return TimedOut(template.format(s=f"{limit:g}"))


# insufficient_resources: what the server could not give this call. out_of_memory is mostly
# its lock table: a transaction holds a lock per item it writes (but an import, which writes
# alone in its namespaces), and all of them share max_locks_per_transaction ×
# max_connections slots.
_SHORT_OF = {
    "53100": "The database's disk is full: nothing of this call was written.",
    "53200": (
        "The database ran out of shared memory for this call: one transaction held too many "
        "locks (one per item written; max_locks_per_transaction). Nothing was written: send "
        "the items in parts (a smaller file)."
    ),
}


def short_of_resources(exc: DBAPIError) -> SystemRefused | None:
    """The error every front end shows (HTTP 503, the MCP envelope, CLI exit 1) when the
    server lacked the disk or shared memory a call needed; None for any other error."""
    sqlstate = str(getattr(exc.orig, "sqlstate", None))
    if not sqlstate.startswith("53"):
        return None
    return SystemRefused(
        _SHORT_OF.get(
            sqlstate,
            "The database lacked the resources this call needed; nothing of it was written.",
        )
    )


def pgvector_problem(available: str | None, server_version_num: int) -> str | None:
    """Why this server cannot hold memsys's schema (None when it can)."""
    if server_version_num < 150000:
        return f"PostgreSQL {server_version_num} is too old: memsys needs PostgreSQL >= 15."
    if available is None:
        return (
            "This PostgreSQL server has no pgvector extension. Install pgvector >= 0.7 on the "
            "server (e.g. `apt install postgresql-16-pgvector`, or run the pgvector/pgvector "
            "image), or unset MEMSYS_DATABASE_URL to use the embedded server."
        )
    version = tuple(int(p) for p in available.split(".")[:2])
    if version < (0, 7):
        return (
            f"pgvector {available} is too old: memsys needs pgvector >= 0.7 (0.8 for "
            "iterative filtered scans). Upgrade the extension package on the server."
        )
    return None


def check_pgvector(conn: Connection) -> None:
    """Fail with a message that names the fix when the server cannot hold memsys's schema."""
    available = conn.execute(
        text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    server = int(conn.execute(text("SHOW server_version_num")).scalar_one())
    problem = pgvector_problem(available, server)
    if problem:
        raise DatabaseUnavailable(problem)
