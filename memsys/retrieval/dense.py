"""The dense channel: cosine similarity by pgvector's HNSW index (iterative scans are on for
every connection, so a filtered search still returns `pool` rows).

The channel is a subquery (`KNN`), not a statement of its own: the pipeline reads the
candidates' features in the same statement (pipeline._FIRST), one round trip fewer.
"""

from __future__ import annotations

import numpy as np
import orjson

# The `pool` chunks nearest to :embedding under the caller's filters ({where}), with their
# cosine distance. Iterative scans return them in relaxed order: whoever ranks them sorts.
KNN = """
SELECT c.namespace, c.id, c.embedding <=> CAST(:embedding AS vector) AS distance
FROM chunk c
WHERE c.embedding IS NOT NULL AND {where}
ORDER BY c.embedding <=> CAST(:embedding AS vector)
LIMIT :pool
"""


def literal(vector: np.ndarray) -> str:
    """A vector in pgvector's text form: the query's embedding, written once per query and
    bound as text by every statement that compares with it (a recall runs up to five), and
    an import's vectors. orjson writes each float32 as the shortest decimal that reads back
    as the same float32 (pgvector stores float32), ~20x faster than formatting each float."""
    flat = np.ascontiguousarray(vector, dtype=np.float32)
    return orjson.dumps(flat, option=orjson.OPT_SERIALIZE_NUMPY).decode()
