"""Accesses: counted on every read that hands memories to a caller, without blocking reads.

One statement per read, for all of its hits: a row per live memory appended to the access log
(an INSERT waits for no one), not counted yet. A read never rewrites the memory's own row:
an UPDATE of a chunk row whose page has no room writes a new version into every index, the
HNSW graph included, and an approximate index that changes under reads cannot answer a
replayed query as it answered the original (benchmarks/README.md, "Traces and access counts
after the answer": 20 of 600 traces at 100k). `fold` (run by maintenance and by the `decay`
operation) adds the log rows not counted yet to `chunk.access_count` / `last_accessed_at`
and marks them counted, in one statement, so each run reads only what is new and no row is
ever counted twice. What a caller is shown is the live figure, counter plus the log rows not
folded yet (`live_count`, `live_last`, `live`), and so is what decay, stages and the
briefs decide on (decay.SIGNALS), whether or not a fold has run. The log is also what
hot/warm/cold and as-of reads (replay) are computed from.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import func, select, text, tuple_
from sqlalchemy.orm import Session

from memsys.models import Chunk, MemoryAccess
from memsys.services import namespaces


class Live(NamedTuple):
    access_count: int
    last_accessed_at: datetime | None


FOLD_BATCH = 5000  # log rows per fold statement
HOT_ACCESSES = 5  # S004: ≥ 5 accesses in 30 days is hot; none in 30 days is cold
TEMPERATURE_WINDOW = timedelta(days=30)

_RECORD = text(
    """
    INSERT INTO memory_access (namespace, memory_id, accessed_at, counted)
    SELECT c.namespace, c.id, coalesce(CAST(:at AS timestamptz), now()), false
    FROM chunk c
    WHERE c.doc_type = 'memory' AND c.valid_to IS NULL AND c.id = ANY(:ids)
    """
)

# The log rows not counted yet, added to their counters and marked counted in one statement:
# a row is taken once. Rows another fold holds are skipped (that fold takes them), rows of
# uncommitted reads are not seen yet (the next fold takes them); only the partial index of
# rows not counted is read.
_FOLDING = text("SELECT pg_try_advisory_xact_lock(hashtext('memsys:fold'))")
_FOLD = text(
    """
    WITH pending AS (
        SELECT namespace, id FROM memory_access
        WHERE NOT counted  -- and not in a namespace being imported (namespaces.free_to_write)
          AND pg_try_advisory_xact_lock_shared(hashtextextended(:turn || namespace, 0))
        ORDER BY id LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ), taken AS (
        UPDATE memory_access a SET counted = true
        FROM pending
        WHERE a.namespace = pending.namespace AND a.id = pending.id
        RETURNING a.namespace, a.memory_id, a.hits, a.accessed_at
    ), fresh AS (
        SELECT namespace, memory_id, sum(hits) AS hits, max(accessed_at) AS last
        FROM taken GROUP BY namespace, memory_id
    ), moved AS (
        UPDATE chunk c SET access_count = c.access_count + fresh.hits,
                           last_accessed_at = greatest(c.last_accessed_at, fresh.last)
        FROM fresh
        WHERE c.namespace = fresh.namespace AND c.id = fresh.memory_id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM taken) AS taken, (SELECT count(*) FROM moved) AS moved
    """
)

_TEMPERATURE = text(
    """
    SELECT c.namespace, c.id, c.pinned,
           coalesce((SELECT sum(a.hits) FROM memory_access a
                     WHERE a.namespace = c.namespace AND a.memory_id = c.id
                       AND a.accessed_at > :since AND a.accessed_at <= :now), 0) AS recent
    FROM chunk c
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON c.namespace = k.namespace AND c.id = k.id
    """
)


_TEMPERATURE_COUNTS = text(
    """
    WITH recent AS (
        SELECT namespace, memory_id, sum(hits) AS hits FROM memory_access
        WHERE accessed_at > :since AND accessed_at <= :now
          AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
        GROUP BY namespace, memory_id
    )
    SELECT CASE WHEN c.pinned THEN 'pinned'
                WHEN coalesce(r.hits, 0) >= :hot THEN 'hot'
                WHEN coalesce(r.hits, 0) > 0 THEN 'warm'
                ELSE 'cold' END AS temperature,
           count(*) AS n
    FROM chunk c LEFT JOIN recent r ON r.namespace = c.namespace AND r.memory_id = c.id
    WHERE c.doc_type = 'memory' AND c.valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR c.namespace = :namespace)
    GROUP BY 1
    """
)


def record(session: Session, memory_ids: list[str], at: datetime | None = None) -> None:
    """Log one access for each memory handed to a caller (feeds decay and hot/cold)."""
    if memory_ids:
        session.execute(_RECORD, {"ids": list(dict.fromkeys(memory_ids)), "at": at})


def _pending(of: Any) -> Any:
    """`of` over the access-log rows of each chunk not folded yet (a correlated subquery;
    `NOT counted` is the predicate of their partial index)."""
    return (
        select(of)
        .where(
            MemoryAccess.namespace == Chunk.namespace,
            MemoryAccess.memory_id == Chunk.id,
            ~MemoryAccess.counted,
        )
        .scalar_subquery()
    )


def live_count() -> Any:
    """`chunk.access_count` plus the accesses not folded yet, as a column."""
    return Chunk.access_count + _pending(func.coalesce(func.sum(MemoryAccess.hits), 0))


def live_last() -> Any:
    """`chunk.last_accessed_at` or the latest access not folded yet, as a column."""
    return func.greatest(Chunk.last_accessed_at, _pending(func.max(MemoryAccess.accessed_at)))


def live(session: Session, keys: list[tuple[str, str]]) -> dict[tuple[str, str], Live]:
    """Each memory's access count and last access as a caller sees them: its counters plus
    the accesses logged since the last fold."""
    if not keys:
        return {}
    rows = session.execute(
        select(Chunk.namespace, Chunk.id, live_count().label("n"), live_last().label("last")).where(
            tuple_(Chunk.namespace, Chunk.id).in_(keys)
        )
    )
    return {(r.namespace, r.id): Live(int(r.n), r.last) for r in rows}


def fold_batch(session: Session, limit: int = FOLD_BATCH) -> tuple[int, int]:
    """Fold up to `limit` log rows not counted yet into their counters: (rows taken,
    counters moved). One fold at a time: while another transaction folds, this one takes
    nothing (two folds could lock the same counters in opposite orders)."""
    if not session.scalar(_FOLDING):
        return 0, 0
    row = session.execute(_FOLD, {"limit": limit, "turn": namespaces.TURN_PREFIX}).one()
    return int(row.taken), int(row.moved)


def fold(session: Session) -> int:
    """Add every access logged but not counted since the last fold to its counter, a batch
    of statements at a time in this transaction; returns how many counters moved (0 on a
    second run). Maintenance folds batch by batch in transactions of their own instead."""
    moved = 0
    while True:
        taken, counted = fold_batch(session)
        moved += counted
        if taken < FOLD_BATCH:
            return moved


def classify(pinned: bool, recent: int) -> str:
    """S004's hot / warm / cold / pinned, from accesses in the last 30 days."""
    if pinned:
        return "pinned"
    if recent >= HOT_ACCESSES:
        return "hot"
    return "warm" if recent > 0 else "cold"


def temperatures(
    session: Session, keys: list[tuple[str, str]], now: datetime
) -> dict[tuple[str, str], str]:
    """hot / warm / cold / pinned of each memory, as of `now`."""
    if not keys:
        return {}
    rows = session.execute(
        _TEMPERATURE,
        {
            "namespaces": [k[0] for k in keys],
            "ids": [k[1] for k in keys],
            "since": now - TEMPERATURE_WINDOW,
            "now": now,
        },
    )
    return {(r.namespace, r.id): classify(r.pinned, int(r.recent)) for r in rows}


def temperature_counts(session: Session, namespace: str | None, now: datetime) -> dict[str, int]:
    """How many live memories are hot, warm, cold and pinned as of `now`."""
    rows = session.execute(
        _TEMPERATURE_COUNTS,
        {
            "since": now - TEMPERATURE_WINDOW,
            "now": now,
            "namespace": namespace,
            "hot": HOT_ACCESSES,
        },
    )
    counts = {r.temperature: int(r.n) for r in rows}
    return {k: counts.get(k, 0) for k in ("hot", "warm", "cold", "pinned")}
