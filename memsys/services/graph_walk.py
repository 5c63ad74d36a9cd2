"""Walks of the entity graph in SQL: a recursive CTE that is cycle-safe (a node is never
revisited on one path), depth-bounded, filtered by relation and by validity at `as_of`, with
each node's fan-out capped (hubs) and the result limited (S000 "Read Order": limit early).
`sql/graph_walks.sql` runs the same walk from psql.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

FANOUT = 25  # edges followed per node and hop, strongest first
MAX_EDGES = 2000

# The walk carries each edge's columns along (the lateral scan has read its row already), so
# only the entities reached are looked up at the end; rows come back as plain tuples.
_WALK = text(
    """
    WITH RECURSIVE walk(node, depth, path, edge_id, source_id, target_id, relation, weight,
                        context, created_at, valid_from, valid_to, expired_at) AS (
        SELECT s.id, 0, ARRAY[s.id], NULL::bigint, NULL::text, NULL::text, NULL::text,
               NULL::float8, NULL::text, NULL::timestamptz, NULL::timestamptz,
               NULL::timestamptz, NULL::timestamptz
        FROM unnest(CAST(:seeds AS text[])) AS s(id)
      UNION ALL
        SELECT nxt.node, w.depth + 1, w.path || nxt.node, nxt.id, nxt.source_id, nxt.target_id,
               nxt.relation, nxt.weight, nxt.context, nxt.created_at, nxt.valid_from,
               nxt.valid_to, nxt.expired_at
        FROM walk w
        CROSS JOIN LATERAL (
            SELECT e.id,
                   CAST(CASE WHEN e.source_id = w.node THEN e.target_id ELSE e.source_id END
                        AS text) AS node,
                   CAST(e.source_id AS text) AS source_id, CAST(e.target_id AS text) AS target_id,
                   CAST(e.relation AS text) AS relation, CAST(e.weight AS float8) AS weight,
                   e.context, e.created_at, e.valid_from, e.valid_to, e.expired_at
            FROM edge e
            WHERE e.namespace = :ns
              AND (e.source_id = w.node OR (:both AND e.target_id = w.node))
              AND e.source_kind = 'entity' AND e.target_kind = 'entity'
              AND e.valid_from <= :as_of AND (e.valid_to IS NULL OR e.valid_to > :as_of)
              AND (CAST(:relations AS text[]) IS NULL
                   OR e.relation = ANY(CAST(:relations AS text[])))
            ORDER BY e.weight DESC, e.id
            LIMIT :fanout
        ) nxt
        WHERE w.depth < :depth AND NOT nxt.node = ANY(w.path)
    )
    , reached AS (
        SELECT edge_id, node, min(depth) AS depth, source_id, target_id, relation, weight,
               context, created_at, valid_from, valid_to, expired_at
        FROM walk
        GROUP BY edge_id, node, source_id, target_id, relation, weight, context, created_at,
                 valid_from, valid_to, expired_at
        ORDER BY min(depth), edge_id NULLS FIRST
        LIMIT :max_rows
    )
    SELECT r.depth, n.namespace, n.id, n.name, n.entity_type, n.summary, n.created_at,
           n.valid_from, n.valid_to,
           r.edge_id, r.source_id, r.target_id, r.relation, r.weight, r.context,
           r.created_at, r.valid_from, r.valid_to, r.expired_at
    FROM reached r
    JOIN entity n ON n.namespace = :ns AND n.id = r.node
    ORDER BY r.depth, r.edge_id NULLS FIRST
    """
)


@dataclass
class Node:
    """An entity as a walk returns it (the columns the S002 answers need)."""

    namespace: str
    id: str
    name: str
    entity_type: str
    summary: str | None
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None


@dataclass
class Link:
    """An edge between two entities as a walk returns it."""

    namespace: str
    id: int
    source_id: str
    target_id: str
    relation: str
    weight: float
    context: str | None
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    expired_at: datetime | None


@dataclass
class Walk:
    depth: dict[str, int]  # entity id → hops from the nearest seed
    edges: list[Link]  # in the order reached (nearer first)
    entities: dict[str, Node]


def walk(
    session: Session,
    ns: str,
    seeds: list[str],
    depth: int,
    as_of: datetime,
    relations: list[str] | None = None,
    both: bool = True,
    max_edges: int = MAX_EDGES,
) -> Walk:
    """Entities within `depth` hops of the seeds through edges valid at `as_of`: one
    statement returns the nodes and edges reached, nearest first."""
    rows = (
        session.execute(
            _WALK,
            {
                "ns": ns,
                "seeds": seeds,
                "depth": depth,
                "as_of": as_of,
                "relations": relations,
                "both": both,
                "fanout": FANOUT,
                "max_rows": max_edges + len(seeds),
            },
        )
        .tuples()
        .all()
    )
    found = Walk(depth={}, edges=[], entities={})
    seen: set[int] = set()
    for row in rows:  # positional: (depth, 8 entity columns, 10 edge columns)
        hops, key, edge_id = row[0], row[2], row[9]
        if key not in found.entities:  # rows come nearest first: the first depth is the least
            found.entities[key] = Node(*row[1:9])
            found.depth[key] = hops
        if edge_id is not None and edge_id not in seen:
            seen.add(edge_id)
            found.edges.append(Link(ns, *row[9:]))
    return found
