"""The dense channel: cosine similarity by pgvector's HNSW index (iterative scans are on for
every connection, so a filtered search still returns `pool` rows).

The channel is a subquery (`KNN`), not a statement of its own: the pipeline reads the
candidates' features in the same statement (pipeline._FIRST), one round trip fewer.
"""

from __future__ import annotations

import numpy as np

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
    """The query's embedding in pgvector's text form. Written once per query and bound as
    text by every statement that compares with it: formatting 384 floats costs ~0.2 ms, and
    a recall runs up to five such statements."""
    return "[" + ",".join(map(repr, vector.tolist())) + "]"
