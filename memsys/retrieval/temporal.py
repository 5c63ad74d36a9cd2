"""The temporal channel: dates and ranges in a query, matched against when memories happened.

The query's time phrases are read by `timephrases.find` (ranges [start, end) relative to a
reference `now`). A memory happened at its `occurred_at` (memory_store's `reference_time`),
or when it was written if none was given. `search` returns the memories inside the ranges,
nearest to the query embedding first; the pipeline fuses that with the other channels
(score 1 inside a range). A query with no time expression costs nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.retrieval import filters as sql_filters
from memsys.retrieval.timephrases import Span

Key = tuple[str, str]
HAPPENED = "coalesce(c.occurred_at, c.created_at)"


def inside(spans: list[Span], happened: dict[Key, datetime]) -> dict[Key, float]:
    """1.0 for each chunk that happened inside one of `spans` (the others are left out)."""
    if not spans:
        return {}
    return {k: 1.0 for k, when in happened.items() if any(s.contains(when) for s in spans)}


# Those with a vector nearest first, then those still on the embedding queue (without one
# yet: full text finds them, and so does their time), in key order: the same rows whatever
# plan reads them (a replay's as-of filter may get another plan). Two branches, so that the
# first may still take the HNSW index, which holds no row without a vector.
_IN_RANGE = """
SELECT namespace, id FROM (
    (SELECT c.namespace, c.id, c.embedding <=> CAST(:embedding AS vector) AS distance
     FROM chunk c
     WHERE {where} AND c.embedding IS NOT NULL AND ({ranges})
     ORDER BY c.embedding <=> CAST(:embedding AS vector)
     LIMIT :k)
    UNION ALL
    (SELECT c.namespace, c.id, NULL FROM chunk c
     WHERE {where} AND c.embedding IS NULL AND ({ranges})
     ORDER BY c.namespace, c.id
     LIMIT :k)
) AS hit
ORDER BY distance NULLS LAST, namespace, id
LIMIT :k
"""


def search(
    session: Session,
    spans: list[Span],
    embedding: str,
    filters: dict[str, Any],
    as_of: datetime | None,
    k: int,
) -> list[tuple[Key, float]]:
    """Up to `k` chunks that happened inside one of `spans`, nearest to the query's
    `embedding` (dense.literal) first, those still waiting for their vector last; each scores
    1 (inside a range is all this channel knows)."""
    if not spans:
        return []
    ranges = " OR ".join(
        f"({HAPPENED} >= :t{i}_start AND {HAPPENED} < :t{i}_end)" for i in range(len(spans))
    )
    sql = text(_IN_RANGE.format(where=sql_filters.where(filters, as_of), ranges=ranges))
    params: dict[str, Any] = {**sql_filters.binds(filters, as_of), "embedding": embedding, "k": k}
    for i, span in enumerate(spans):
        params[f"t{i}_start"], params[f"t{i}_end"] = span.start, span.end
    return [((r.namespace, r.id), 1.0) for r in session.execute(sql, params)]
