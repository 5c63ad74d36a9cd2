"""The graph channel (HippoRAG): Personalized PageRank over chunks and the entities they
mention, seeded by the query's own names and by the entities of the best first-stage hits.

The subgraph is fetched in SQL (chunk → entity 'mentions' edges written at write time by
memsys/services/mentions.py): the seed entities, minus hubs (entities mentioned by more than
`HUB_CAP` chunks carry no information and would pull in half the corpus), and every live chunk
mentioning them under the caller's filters. PageRank runs in numpy on that bipartite graph
(restart probability `fusion.Weights.graph_restart` to the seeds), so a chunk that shares a
rare name with the query or with a strong hit — the bridge passage of a multi-hop question —
scores high even when it shares few words with the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy import TextClause, text
from sqlalchemy.orm import Session

from memsys import extraction
from memsys.retrieval import filters as sql_filters

Key = tuple[str, str]
HUB_CAP = 40
RESTART = 0.3  # the default; fusion.Weights.graph_restart is what the pipeline passes

# The query's names that the store knows, hubs excluded (a name in most chunks — a speaker's
# name in their own conversation — says nothing about which chunk is meant).
# `subject`: some live chunk is about the entity (opens with its name: a mention weighted
# above 1, memsys/services/mentions.py). {where}: the namespace, or none — a statement for
# each, as "(:namespace IS NULL OR …)" made the statement slower (0.51 -> 0.39 ms at 10k).
_QUERY_ENTITIES = """
    SELECT n.namespace, n.id,
           EXISTS (SELECT 1 FROM edge s
                   WHERE s.namespace = n.namespace AND s.target_id = n.id
                     AND s.relation = 'mentions' AND s.weight > 1 AND {s_valid}) AS subject
    FROM entity n
    WHERE {n_valid} AND n.key = ANY(CAST(:keys AS text[]))
      AND {where}
      AND (SELECT count(*) FROM (
               SELECT 1 FROM edge e
               WHERE e.namespace = n.namespace AND e.target_id = n.id
                 AND e.relation = 'mentions' AND {e_valid}
               LIMIT :hub_cap + 1) d) <= :hub_cap
"""
_HIT_ENTITIES = """
    SELECT e.namespace, e.source_id, e.target_id FROM edge e
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON e.namespace = k.namespace AND e.source_id = k.id
    WHERE e.relation = 'mentions' AND e.source_kind = 'chunk' AND {e_valid}
"""
# A seed's degree is counted only up to HUB_CAP + 1: a hub (a speaker's name in every turn of
# their conversation) is recognised after reading 41 index entries, not all of its mentions.
_NEIGHBOURS = """
WITH seeds AS (
    SELECT * FROM unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS s(namespace, id)
), small AS (
    SELECT s.namespace, s.id FROM seeds s
    WHERE (SELECT count(*) FROM (
               SELECT 1 FROM edge e
               WHERE e.namespace = s.namespace AND e.target_id = s.id
                 AND e.relation = 'mentions' AND {e_valid}
               LIMIT :hub_cap + 1) d) <= :hub_cap
)
SELECT e.namespace, e.source_id AS chunk_id, e.target_id AS entity_id, e.weight
FROM small
JOIN edge e ON e.namespace = small.namespace AND e.target_id = small.id
JOIN chunk c ON c.namespace = e.namespace AND c.id = e.source_id
WHERE e.relation = 'mentions' AND {e_valid} AND {where}
"""


def _valid(alias: str, live: bool) -> str:
    """Rows live now, or valid at `:as_of` (a replay sees the graph the query saw then)."""
    if live:
        return f"{alias}.valid_to IS NULL"
    return (
        f"{alias}.valid_from <= :as_of AND ({alias}.valid_to IS NULL OR {alias}.valid_to > :as_of)"
    )


def _sql(statement: str, as_of: datetime | None, where: str = "") -> TextClause:
    """The statement for live rows or for rows valid at a time (`:as_of`), built once each:
    every recall runs these."""
    return _built(statement, as_of is None, where)


@lru_cache(maxsize=64)
def _built(statement: str, live: bool, where: str) -> TextClause:
    valid = {alias: _valid(alias, live) for alias in ("n", "e", "s")}
    return text(
        statement.format(n_valid=valid["n"], e_valid=valid["e"], s_valid=valid["s"], where=where)
    )


@dataclass
class Named:
    """The stored, non-hub entities a query names, and how many of them a stored chunk is
    about (the query asks about a thing the store has an entry for)."""

    keys: list[Key] = field(default_factory=list)
    subjects: int = 0


def named(
    session: Session, query: str, namespace: str | None, as_of: datetime | None = None
) -> Named:
    """The stored, non-hub entities the query names (as they were at `as_of`)."""
    keys = [m.key for m in extraction.extract(query)]
    if not keys:
        return Named()
    params = {"keys": keys, "namespace": namespace, "hub_cap": HUB_CAP, "as_of": as_of}
    scope = "true" if namespace is None else "n.namespace = :namespace"
    rows = session.execute(_sql(_QUERY_ENTITIES, as_of, where=scope), params).all()
    return Named([(r.namespace, r.id) for r in rows], sum(1 for r in rows if r.subject))


def seeds(
    session: Session,
    query_entities: Sequence[Key],
    hits: Sequence[tuple[Key, float]],
    as_of: datetime | None = None,
) -> dict[Key, float]:
    """Entity → restart weight: the query's names (weight 1 each), then the entities of the
    first-stage hits, each hit's weight shared among its entities."""
    weights: dict[Key, float] = dict.fromkeys(query_entities, 1.0)
    if hits:
        params = {
            "namespaces": [k[0] for k, _ in hits],
            "ids": [k[1] for k, _ in hits],
            "as_of": as_of,
        }
        by_chunk: dict[Key, list[Key]] = {}
        for row in session.execute(_sql(_HIT_ENTITIES, as_of), params):
            by_chunk.setdefault((row.namespace, row.source_id), []).append(
                (row.namespace, row.target_id)
            )
        for key, weight in hits:
            entities = by_chunk.get(key, [])
            for entity in entities:
                weights[entity] = weights.get(entity, 0.0) + weight / len(entities)
    return weights


@dataclass
class Walk:
    """The walk's chunks by PageRank, best first, and which of them is *the* entry about one
    of the walked names: the only chunk (under the caller's filters) that opens with it — an
    encyclopedia-style entry, a note about one thing. A conversation's turns are not entries
    of their speaker: many turns open with the same name."""

    hits: list[tuple[Key, float]] = field(default_factory=list)
    entries: set[Key] = field(default_factory=set)


def search(
    session: Session,
    seed_weights: dict[Key, float],
    filters: dict[str, Any],
    as_of: datetime | None,
    pool: int,
    restart: float = RESTART,
) -> Walk:
    """Chunks by PageRank personalised on `seed_weights`, best first."""
    if not seed_weights:
        return Walk()
    entities = list(seed_weights)
    statement = _sql(_NEIGHBOURS, as_of, where=sql_filters.where(filters, as_of))
    params = {
        **sql_filters.binds(filters, as_of),
        "namespaces": [e[0] for e in entities],
        "ids": [e[1] for e in entities],
        "hub_cap": HUB_CAP,
    }
    edges = {
        ((r.namespace, r.chunk_id), (r.namespace, r.entity_id)): float(r.weight)
        for r in session.execute(statement, params)
    }
    if not edges:
        return Walk()
    scores = personalized_pagerank(edges, seed_weights, restart)
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0][1]))[:pool]
    about: dict[Key, list[Key]] = {}  # entity → the chunks opening with its name
    for (chunk, entity), weight in edges.items():
        if weight > 1:
            about.setdefault(entity, []).append(chunk)
    kept = {chunk for chunk, _ in ranked}
    entries = {c[0] for c in about.values() if len(c) == 1 and c[0] in kept}
    return Walk(ranked, entries)


def personalized_pagerank(
    edges: dict[tuple[Key, Key], float], seed_weights: dict[Key, float], alpha: float = RESTART
) -> dict[Key, float]:
    """PageRank with restarts (probability `alpha`) to the seed entities on the bipartite
    chunk–entity graph; returns the chunks' scores (their share of the walk's stationary
    distribution).

    `edges` maps (chunk, entity) to the mention's weight. A chunk passes its mass evenly to
    the names it mentions; a name passes its mass to the chunks mentioning it in proportion to
    the weight, so most of it goes to the chunk that is *about* the name (its subject,
    weighted `mentions.SUBJECT_WEIGHT`) rather than to every chunk that names it in passing.
    A seed with no edges (a hub the walk skips) sends its mass back to the seeds.

    Solved exactly rather than iterated. Every step from a name leads to a chunk and back to
    a name, so with M = (chunk→entity)(entity→chunk) the entities' scores solve
    r = αs + (1−α)²·M·r + (1−α)·s·(mass on edgeless seeds). No edge crosses a namespace, so
    y = (I − (1−α)²M)⁻¹·s is solved one namespace at a time (a few dozen names each), and the
    edgeless seeds' term only rescales it: r = α·y / (1 − (1−α)·Σ y over them), where y is s.
    A chunk's score is (1−α) times what its names send it."""
    total = sum(seed_weights.values())
    stay = 1 - alpha
    by_namespace: dict[str, dict[tuple[Key, Key], float]] = {}
    for pair, weight in edges.items():
        by_namespace.setdefault(pair[0][0], {})[pair] = weight
    linked = {e for _, e in edges}
    edgeless = sum(w for e, w in seed_weights.items() if e not in linked) / total
    scale = alpha / (1 - stay * edgeless)
    out: dict[Key, float] = {}
    for part in by_namespace.values():
        chunks, sent_on = _walk_block(part, seed_weights, total, stay)
        out.update(zip(chunks, (stay * scale * sent_on).tolist(), strict=True))
    return out


def _walk_block(
    edges: dict[tuple[Key, Key], float],
    seed_weights: dict[Key, float],
    total: float,
    stay: float,
) -> tuple[list[Key], np.ndarray]:
    """One namespace's chunks and what their names send them: (entity→chunk)·y, with
    y = (I − stay²·M)⁻¹·s over the block's entities (s: their share of the restart)."""
    chunks = sorted({c for c, _ in edges})
    entities = sorted({e for _, e in edges})
    ci = {c: i for i, c in enumerate(chunks)}
    ei = {e: i for i, e in enumerate(entities)}
    c_at = np.fromiter((ci[c] for c, _ in edges), dtype=np.intp, count=len(edges))
    e_at = np.fromiter((ei[e] for _, e in edges), dtype=np.intp, count=len(edges))
    to_entity = np.zeros((len(entities), len(chunks)))
    to_entity[e_at, c_at] = 1.0  # each (chunk, entity) pair is one key of `edges`
    to_entity /= to_entity.sum(axis=0)  # every chunk here has an edge
    to_chunk = np.zeros((len(chunks), len(entities)))
    to_chunk[c_at, e_at] = np.fromiter(edges.values(), dtype=np.float64, count=len(edges))
    to_chunk /= to_chunk.sum(axis=0)  # every entity here has an edge (weights 1 or 4)
    restart = np.array([seed_weights.get(e, 0.0) / total for e in entities])
    system = np.eye(len(entities)) - stay * stay * (to_entity @ to_chunk)
    return chunks, to_chunk @ np.linalg.solve(system, restart)
