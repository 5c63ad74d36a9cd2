"""The neighbourhood channel: a strong hit pulls in what was written next to it.

A conversation is stored turn by turn and a document chunk by chunk, so the piece that answers
a question often sits right beside the one that matches it best (the question turn before the
answer, the paragraph after a heading). For each seed (the best first-stage hits) this channel
fetches, under the caller's filters and `as_of`:
- memories: the `width` memories written just before and just after it in the same namespace
  (order of `created_at`, then id), no further apart in time than `gap` — one episode;
- document chunks: the chunks of the same document within `width` places of its chunk_index.

A neighbour's channel score is its seed's strength, decayed by distance and scaled by how
close the two are in meaning (the cosine of their embeddings, to the power `coherence`): in a
conversation the next turn is on the same subject, in a store of unrelated notes written one
after another it is not, and there write order is noise the channel must not add. The
neighbour is then scored by every other channel too and ranked on its own merit plus that
share (fusion.py).
Nothing here reads benchmark metadata: only what any store has (created_at, chunk order).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.retrieval import filters as sql_filters

Key = tuple[str, str]

# {where} is the caller's filters and validity for the neighbour `c`; each side is one index
# range scan on (namespace, doc_type, created_at) or (namespace, document_id).
_NEIGHBOURS = """
WITH seed AS (
    SELECT s.namespace, s.id, s.doc_type, s.created_at, s.document_id, s.chunk_index,
           s.embedding
    FROM chunk s
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON s.namespace = k.namespace AND s.id = k.id
)
SELECT seed.namespace, seed.id AS seed_id, n.id, n.distance,
       coalesce(1 - (n.embedding <=> seed.embedding), 0) AS coherence
FROM seed
CROSS JOIN LATERAL (
    (SELECT b.id, b.embedding,
            row_number() OVER (ORDER BY b.created_at DESC, b.id DESC) AS distance
     FROM (SELECT c.id, c.created_at, c.embedding FROM chunk c
           WHERE seed.doc_type = 'memory' AND c.namespace = seed.namespace
             AND c.doc_type = 'memory' AND (c.created_at, c.id) < (seed.created_at, seed.id)
             AND c.created_at >= seed.created_at - CAST(:gap AS interval) AND {where}
           ORDER BY c.created_at DESC, c.id DESC LIMIT :width) b)
    UNION ALL
    (SELECT b.id, b.embedding, row_number() OVER (ORDER BY b.created_at, b.id) AS distance
     FROM (SELECT c.id, c.created_at, c.embedding FROM chunk c
           WHERE seed.doc_type = 'memory' AND c.namespace = seed.namespace
             AND c.doc_type = 'memory' AND (c.created_at, c.id) > (seed.created_at, seed.id)
             AND c.created_at <= seed.created_at + CAST(:gap AS interval) AND {where}
           ORDER BY c.created_at, c.id LIMIT :width) b)
    UNION ALL
    (SELECT c.id, c.embedding, abs(c.chunk_index - seed.chunk_index) AS distance
     FROM chunk c
     WHERE seed.document_id IS NOT NULL AND c.namespace = seed.namespace
       AND c.document_id = seed.document_id AND c.id <> seed.id
       AND c.chunk_index BETWEEN seed.chunk_index - :width AND seed.chunk_index + :width
       AND {where})
) n
"""


def search(
    session: Session,
    seeds: Sequence[tuple[Key, float]],
    filters: dict[str, Any],
    as_of: datetime | None,
    *,
    width: int,
    gap: timedelta,
    decay: float,
    coherence: float,
) -> list[tuple[Key, float]]:
    """Neighbours of `seeds` ((key, strength > 0)), scored max over seeds of
    strength · decay^(distance − 1) · max(0, cos(seed, neighbour))^coherence; best first.
    Seeds can be each other's neighbours."""
    strength = {key: s for key, s in seeds if s > 0}
    if not strength or width < 1:
        return []
    statement = text(_NEIGHBOURS.format(where=sql_filters.where(filters, as_of)))
    params = {
        **sql_filters.binds(filters, as_of),
        "namespaces": [k[0] for k in strength],
        "ids": [k[1] for k in strength],
        "width": width,
        "gap": gap,
    }
    scores: dict[Key, float] = {}
    for row in session.execute(statement, params):
        share = strength[(row.namespace, row.seed_id)] * decay ** (int(row.distance) - 1)
        share *= max(0.0, float(row.coherence)) ** coherence
        key = (row.namespace, row.id)
        scores[key] = max(scores.get(key, 0.0), share)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0][1]))
