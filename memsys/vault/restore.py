"""Restore mode of an import: the vector index built once after the writes, not row by row.

An HNSW index grows one insertion at a time, and each costs more as the index grows: on this
project's 2-core machine, a 100k import spends a fifth of its CPU in the server, most of it
there (benchmarks/README.md). Restore mode drops the `chunk` table's HNSW indexes at the
start of the import's transaction and creates them again, from their own definitions, once
every record is written. Dropping an index locks the table: until the import commits, every
other call that reads or writes memories waits (and gives up at its statement limit). So it
is for loading a database nobody is using — a restore — and asked for by name. A failed
import rolls back with its transaction, the indexes included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.orm import Session

_VECTOR_INDEXES = text(
    """
    SELECT format('%I.%I', schemaname, indexname) AS name, indexdef
    FROM pg_indexes
    WHERE schemaname = current_schema() AND tablename = 'chunk' AND indexdef LIKE '% USING hnsw %'
    ORDER BY indexname
    """
)
# What the build may use: pgvector builds the graph in memory when it fits (~0.5 GB for 100k
# memories of 384 dimensions) and far more slowly when it does not.
BUILD_MEMORY = "1GB"


@contextmanager
def vector_index_built_after(session: Session) -> Iterator[None]:
    """Drop the vector indexes of `chunk` now and build them when the block ends (in the
    session's transaction; an error in the block leaves the build undone and the drop to
    the rollback)."""
    indexes = session.execute(_VECTOR_INDEXES).all()
    for row in indexes:
        session.execute(text(f"DROP INDEX {row.name}"))
    yield
    limit = session.scalar(text("SELECT current_setting('statement_timeout')"))
    # One statement builds the whole index: bounded by the data, not by a request's limit.
    session.execute(
        text(
            "SELECT set_config('statement_timeout', '0', true), "
            "set_config('maintenance_work_mem', :memory, true)"
        ),
        {"memory": BUILD_MEMORY},
    )
    for row in indexes:
        session.execute(text(row.indexdef))
    session.execute(text("SELECT set_config('statement_timeout', :v, true)"), {"v": limit})
