"""The dense channel: cosine similarity by pgvector's HNSW index (iterative scans are on for
every connection, so a filtered search still returns `pool` rows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from memsys.models.chunk import DIMENSIONS
from memsys.retrieval import filters as sql_filters

_KNN = """
SELECT c.namespace, c.id, 1 - (c.embedding <=> :embedding) AS similarity
FROM chunk c
WHERE c.embedding IS NOT NULL AND {where}
ORDER BY c.embedding <=> :embedding
LIMIT :pool
"""


def search(
    session: Session,
    vector: np.ndarray,
    filters: dict[str, Any],
    as_of: datetime | None,
    pool: int,
) -> list[tuple[tuple[str, str], float]]:
    """The `pool` nearest chunks: ((namespace, id), cosine similarity), best first."""
    statement = text(_KNN.format(where=sql_filters.where(filters, as_of))).bindparams(
        bindparam("embedding", type_=Vector(DIMENSIONS))
    )
    params = {**sql_filters.binds(filters, as_of), "embedding": vector, "pool": pool}
    rows = session.execute(statement, params).all()
    return [((r.namespace, r.id), float(r.similarity)) for r in rows]
