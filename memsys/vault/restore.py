"""Restore mode of an import: the vector index built once after the writes, not row by row.

An HNSW index grows one insertion at a time, and each costs more as the index grows: on this
project's 2-core machine, a 100k import spends a fifth of its CPU in the server, most of it
there (benchmarks/README.md). Restore mode drops the `chunk` table's HNSW indexes at the
start of the import's transaction and creates them again, from their own definitions, once
every record is written — over the whole table, memories already stored included. Dropping
an index takes the table for itself: until the import commits, every other call that reads
or writes memories waits (and gives up at its statement limit). So it is for loading a
database nobody is using — a restore — and asked for by name. A failed import rolls back
with its transaction, the indexes included.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from psycopg import errors as pg_errors
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from memsys import embedded
from memsys.config import get_settings
from memsys.errors import Conflict

_VECTOR_INDEXES = text(
    """
    SELECT format('%I.%I', schemaname, indexname) AS name, indexdef
    FROM pg_indexes
    WHERE schemaname = current_schema() AND tablename = 'chunk' AND indexdef LIKE '% USING hnsw %'
    ORDER BY indexname
    """
)
_SETTINGS = text(
    "SELECT current_setting('lock_timeout') AS lock_timeout, "
    "current_setting('statement_timeout') AS statement_timeout"
)
_SET = text("SELECT set_config(:name, :value, true)")
# How long the drop waits for calls already using the table before it gives up: new calls
# queue behind a waiting drop, so it must not wait long.
LOCK_WAIT = "5s"
# The build's settings, for the rest of the transaction. One statement builds the whole
# index: bounded by the data, not by a request's limit. Its memory raised, never lowered:
# pgvector builds the graph in memory when it fits (~0.5 GB for 100k memories of 384
# dimensions), far more slowly when it does not. Parallel helpers as `build_workers` says.
_BUILD_SETTINGS = text(
    """
    SELECT set_config('statement_timeout', '0', true),
           set_config('max_parallel_maintenance_workers', :workers, true),
           set_config('maintenance_work_mem', greatest(
               pg_size_bytes(current_setting('maintenance_work_mem')), pg_size_bytes(:memory)
           ) / 1024 || 'kB', true)
    """
)
_CURRENT_MEMORY = text(
    "SELECT CAST(pg_size_bytes(current_setting('maintenance_work_mem')) / 1048576 AS integer)"
)
_SHARED_MEMORY = Path("/dev/shm")


def build_memory() -> int:
    """The build's memory in MB: 1 GB; with the embedded server (on this machine) an eighth of
    its memory or of the container's limit where that is less, never below 64 MB. A server
    elsewhere gets 1 GB: its memory is not this process's to read."""
    if get_settings().database_url:
        return 1024
    return max(64, min(1024, embedded.memory_bytes() // 8 // 2**20))


def build_workers(memory_mb: int) -> int:
    """Parallel helpers for the build beside its leader: one per core beyond the first, and
    only on the embedded server whose shared memory (this machine's /dev/shm) has room for
    twice the build's memory. A parallel build keeps its graph there; a container's /dev/shm
    is often 64 MB, and a build that cannot get it fails after the whole import. A server
    elsewhere gets none: its shared memory is not this process's to read. On 2 cores one
    helper built 100k memories' index in 32 s instead of 51 (benchmarks/README.md)."""
    if get_settings().database_url:
        return 0
    try:
        stat = os.statvfs(_SHARED_MEMORY)
    except OSError:
        return 0
    if stat.f_bavail * stat.f_frsize < 2 * memory_mb * 2**20:
        return 0
    affinity = getattr(os, "sched_getaffinity", None)  # Linux: the cores this process may use
    cores = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    return max(0, min(cores, 8) - 1)


@contextmanager
def vector_index_built_after(
    session: Session, wanted: Callable[[], bool] = lambda: True
) -> Iterator[None]:
    """Drop the vector indexes of `chunk` now and build them when the block ends (in the
    session's transaction; an error in the block, or `wanted()` false at its end — the
    caller rolls back —, leaves the build undone and the drop to the rollback)."""
    indexes = session.execute(_VECTOR_INDEXES).all()
    before = session.execute(_SETTINGS).one()
    session.execute(_SET, {"name": "lock_timeout", "value": LOCK_WAIT})
    try:
        for row in indexes:
            session.execute(text(f"DROP INDEX {row.name}"))
    except OperationalError as exc:
        # Another restore that read the table too is a deadlock, found after 1 s.
        if not isinstance(exc.orig, (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected)):
            raise
        raise Conflict(
            f"restore mode needs the memories to itself, and other calls kept using them for "
            f"{LOCK_WAIT}: stop them (or import without restore mode) and try again"
        ) from None
    session.execute(_SET, {"name": "lock_timeout", "value": before.lock_timeout})
    yield
    if not wanted():
        return
    # What the build will have: build_memory() raises the server's setting, never lowers
    # it (the embedded server's own is 512 MB, embedded.py), and helpers need all of it in /dev/shm.
    memory = max(build_memory(), session.execute(_CURRENT_MEMORY).scalar_one())
    settings = {"memory": f"{memory}MB", "workers": str(build_workers(memory))}
    session.execute(_BUILD_SETTINGS, settings)
    for row in indexes:
        # As written: a partial index's definition may hold '%' (LIKE), not a placeholder.
        session.connection().exec_driver_sql(
            row.indexdef, execution_options={"no_parameters": True}
        )
    session.execute(_SET, {"name": "statement_timeout", "value": before.statement_timeout})
