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

Whether write order means anything in this store is measured on every query (`Near.gate`): the
mean cosine of each seed with its own neighbours against the mean cosine of those neighbours
with the *other* seeds (rows written far from them). In a conversation the first is clearly
higher (LoCoMo: +.103 median, +.042 at the 5th percentile); in a store of unrelated passages
written one after another the two are equal (HotpotQA, SciFact shuffled: at most +.022 for 95 %
of queries; benchmarks/README.md, "Write order as evidence"). The pipeline multiplies the
channel's weight by the gate, a ramp from 0 at a lift of GATE_LOW to 1 at GATE_HIGH, so the
channel speaks where order carries meaning and is silent where it is noise.
Nothing here reads benchmark metadata: only what any store has (created_at, chunk order).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from memsys.models.chunk import DIMENSIONS
from memsys.retrieval import filters as sql_filters

Key = tuple[str, str]
GATE_LOW = 0.02  # lift in cosine below which write order is taken as noise
GATE_HIGH = 0.04  # ... and from which the channel has its full weight

# {where} is the caller's filters and validity for the neighbour `c`; each side is one index
# range scan on (namespace, doc_type, created_at) or (namespace, document_id).
# <width> is written in as a number, not bound: with a bound LIMIT PostgreSQL estimated its
# reusable (generic) plan dearer than one made for the values and planned the statement anew
# on every call (~1 ms of a 4-5 ms statement at 10k; benchmarks/README.md).
# `coherence`: the cosine of seed and neighbour; `apart`: the neighbour's mean cosine with the
# other seeds it is not a neighbour of (NULL with a single seed or without embeddings).
# A stored embedding mostly lives out of line (TOAST: a row with its text passes 2 kB), and
# every use of the column fetches it again; subvector(…, 1, DIMENSIONS) copies each seed's and
# neighbour's once where it is read, so the ~400 cosines below read memory (at 100k: 4.0 ->
# 2.4 ms per query).
_NEIGHBOURS = f"""
WITH seed AS (
    SELECT s.namespace, s.id, s.doc_type, s.created_at, s.document_id, s.chunk_index,
           subvector(s.embedding, 1, {DIMENSIONS}) AS embedding
    FROM chunk s
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON s.namespace = k.namespace AND s.id = k.id
), near AS (
SELECT seed.namespace, seed.id AS seed_id, n.id, n.distance, n.embedding,
       1 - (n.embedding <=> seed.embedding) AS coherence
FROM seed
CROSS JOIN LATERAL (
    (SELECT b.id, b.embedding,
            row_number() OVER (ORDER BY b.created_at DESC, b.id DESC) AS distance
     FROM (SELECT c.id, c.created_at, subvector(c.embedding, 1, {DIMENSIONS}) AS embedding
           FROM chunk c
           WHERE seed.doc_type = 'memory' AND c.namespace = seed.namespace
             AND c.doc_type = 'memory' AND (c.created_at, c.id) < (seed.created_at, seed.id)
             AND c.created_at >= seed.created_at - CAST(:gap AS interval) AND {{where}}
           ORDER BY c.created_at DESC, c.id DESC LIMIT <width>) b)
    UNION ALL
    (SELECT b.id, b.embedding, row_number() OVER (ORDER BY b.created_at, b.id) AS distance
     FROM (SELECT c.id, c.created_at, subvector(c.embedding, 1, {DIMENSIONS}) AS embedding
           FROM chunk c
           WHERE seed.doc_type = 'memory' AND c.namespace = seed.namespace
             AND c.doc_type = 'memory' AND (c.created_at, c.id) > (seed.created_at, seed.id)
             AND c.created_at <= seed.created_at + CAST(:gap AS interval) AND {{where}}
           ORDER BY c.created_at, c.id LIMIT <width>) b)
    UNION ALL
    (SELECT c.id, subvector(c.embedding, 1, {DIMENSIONS}) AS embedding,
            abs(c.chunk_index - seed.chunk_index) AS distance
     FROM chunk c
     WHERE seed.document_id IS NOT NULL AND c.namespace = seed.namespace
       AND c.document_id = seed.document_id AND c.id <> seed.id
       AND c.chunk_index BETWEEN seed.chunk_index - <width> AND seed.chunk_index + <width>
       AND {{where}})
) n
), apart AS (
    -- Each neighbour once (several seeds can share it) against the seeds it is not next to;
    -- its own seed is among those it is next to.
    SELECT d.namespace, d.id, avg(1 - (d.embedding <=> o.embedding)) AS apart
    FROM (SELECT DISTINCT ON (namespace, id) namespace, id, embedding,
                 array_agg(seed_id) OVER (PARTITION BY namespace, id) AS next_to
          FROM near) d
    JOIN seed o ON o.namespace = d.namespace AND o.id <> d.id AND o.id <> ALL(d.next_to)
    GROUP BY d.namespace, d.id
)
SELECT near.namespace, near.seed_id, near.id, near.distance, near.coherence, apart.apart
       <also columns>
FROM near LEFT JOIN apart ON apart.namespace = near.namespace AND apart.id = near.id
<also join>
"""
# `Also`: more columns of each neighbour not among the keys the caller knows, read in the
# same statement (the pipeline's features of a new candidate: one round trip fewer). The
# neighbour's chunk row is `cand`, its embedding (the copy above) `near.embedding`.
_ALSO_JOIN = """
LEFT JOIN LATERAL (
    SELECT <columns> FROM chunk cand
    WHERE cand.namespace = near.namespace AND cand.id = near.id
      AND (near.namespace, near.id) NOT IN (
          SELECT * FROM unnest(CAST(:known_namespaces AS text[]), CAST(:known_ids AS text[])))
) also ON true
"""


@dataclass(frozen=True)
class Also:
    """Columns to read of every neighbour not in `known`: a select list over `cand` (its
    chunk row) and `near.embedding`, without braces, and the binds it uses."""

    columns: str
    params: dict[str, Any]
    known: Collection[Key]


@dataclass
class Near:
    """The channel's scores, best first, and how much write order means here (0 to 1)."""

    hits: list[tuple[Key, float]] = field(default_factory=list)
    gate: float = 1.0
    lift: float | None = None  # mean cosine with own neighbours minus with rows apart
    # With `Also`: each neighbour the caller did not know, its row with the columns asked for.
    rows: dict[Key, Any] = field(default_factory=dict)


def gate(lift: float | None) -> float:
    """The share of its weight the channel keeps for a measured lift (all of it when there
    is nothing to compare with: a single seed)."""
    if lift is None:
        return 1.0
    return min(1.0, max(0.0, (lift - GATE_LOW) / (GATE_HIGH - GATE_LOW)))


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
    also: Also | None = None,
) -> Near:
    """Neighbours of `seeds` ((key, strength > 0)), scored max over seeds of
    strength · decay^(distance − 1) · max(0, cos(seed, neighbour))^coherence; best first,
    with the gate measured on the same rows. Seeds can be each other's neighbours."""
    strength = {key: s for key, s in seeds if s > 0}
    if not strength or width < 1:
        return Near()
    template = _statement(int(width), None if also is None else also.columns)
    statement = sql_filters.statement(template, filters, as_of)
    params = {
        **sql_filters.binds(filters, as_of),
        "namespaces": [k[0] for k in strength],
        "ids": [k[1] for k in strength],
        "gap": gap,
    }
    rows: dict[Key, Any] = {}
    if also is not None:
        known = list(also.known)
        params |= also.params
        params |= {"known_namespaces": [k[0] for k in known], "known_ids": [k[1] for k in known]}
    scores: dict[Key, float] = {}
    own: list[float] = []
    apart: list[float] = []
    for row in session.execute(statement, params).mappings():
        key = (row["namespace"], row["id"])
        if also is not None and key not in also.known:
            rows[key] = row
        cosine = 0.0 if row["coherence"] is None else float(row["coherence"])
        share = strength[(row["namespace"], row["seed_id"])] * decay ** (int(row["distance"]) - 1)
        share *= max(0.0, cosine) ** coherence
        scores[key] = max(scores.get(key, 0.0), share)
        if row["coherence"] is not None and row["apart"] is not None:
            own.append(cosine)
            apart.append(float(row["apart"]))
    lift = sum(own) / len(own) - sum(apart) / len(apart) if own else None
    hits = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0][1]))
    return Near(hits, gate(lift), lift, rows)


@lru_cache(maxsize=8)
def _statement(width: int, also: str | None) -> str:
    """The channel's statement (a format template for sql_filters) for a width, with the
    `Also` columns if asked."""
    sql = _NEIGHBOURS.replace("<width>", str(width))
    if also is None:
        return sql.replace("<also columns>", "").replace("<also join>", "")
    join = _ALSO_JOIN.replace("<columns>", also)
    return sql.replace("<also columns>", ", also.*").replace("<also join>", join)
