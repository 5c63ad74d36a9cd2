"""Accesses: counted on every read that hands memories to a caller, without blocking reads.

One statement per read, for all of its hits: it appends a row per memory to the access log
(an INSERT waits for no one) and bumps `chunk.access_count` / `last_accessed_at` only on rows
no other transaction holds (`SKIP LOCKED`), so two readers of one hot memory never queue up
behind each other, nor behind a writer. A bump skipped that way is not lost: the log holds
it, and `fold` (run by maintenance and by the `decay` operation) sets each counter to the sum
of its log. The log is also what hot/warm/cold and as-of reads (replay) are computed from.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.db import rowcount

HOT_ACCESSES = 5  # S004: ≥ 5 accesses in 30 days is hot; none in 30 days is cold
TEMPERATURE_WINDOW = timedelta(days=30)

_RECORD = text(
    """
    WITH hit AS (
        SELECT c.namespace, c.id FROM chunk c
        WHERE c.doc_type = 'memory' AND c.valid_to IS NULL AND c.id = ANY(:ids)
    ), logged AS (
        INSERT INTO memory_access (namespace, memory_id, accessed_at)
        SELECT namespace, id, coalesce(CAST(:at AS timestamptz), now()) FROM hit
    ), free AS (
        SELECT c.namespace, c.id FROM chunk c JOIN hit USING (namespace, id)
        ORDER BY c.namespace, c.id
        FOR UPDATE OF c SKIP LOCKED
    )
    UPDATE chunk c
    SET access_count = c.access_count + 1,
        last_accessed_at = greatest(c.last_accessed_at, coalesce(CAST(:at AS timestamptz), now()))
    FROM free WHERE c.namespace = free.namespace AND c.id = free.id
    """
)

# Counters that disagree with their log (a skipped bump), set to the log's sum.
_FOLD = text(
    """
    WITH total AS (
        SELECT namespace, memory_id, sum(hits) AS hits, max(accessed_at) AS last
        FROM memory_access GROUP BY namespace, memory_id
    )
    UPDATE chunk c SET access_count = total.hits, last_accessed_at = total.last
    FROM total
    WHERE c.namespace = total.namespace AND c.id = total.memory_id
      AND (c.access_count <> total.hits
           OR c.last_accessed_at IS DISTINCT FROM total.last)
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
    """Count one access for each memory handed to a caller (feeds decay and hot/cold)."""
    if memory_ids:
        session.execute(_RECORD, {"ids": list(dict.fromkeys(memory_ids)), "at": at})


def fold(session: Session) -> int:
    """Bring every access counter in line with the log; returns how many were behind."""
    return rowcount(session, _FOLD)


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
