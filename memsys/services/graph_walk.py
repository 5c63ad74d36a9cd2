"""Walks of the entity graph in SQL: a recursive CTE that is cycle-safe (a node is never
revisited on one path), depth-bounded, filtered by relation and by validity at `as_of`, with
each node's fan-out capped (hubs) and the result limited (S000 "Read Order": limit early).
`sql/graph_walks.sql` runs the same walk from psql.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memsys.models import Edge, Entity

FANOUT = 25  # edges followed per node and hop, strongest first
MAX_EDGES = 2000

_WALK = text(
    """
    WITH RECURSIVE walk(node, depth, path, edge_id) AS (
        SELECT s.id, 0, ARRAY[s.id], NULL::bigint
        FROM unnest(CAST(:seeds AS text[])) AS s(id)
      UNION ALL
        SELECT nxt.node, w.depth + 1, w.path || nxt.node, nxt.id
        FROM walk w
        CROSS JOIN LATERAL (
            SELECT e.id,
                   CASE WHEN e.source_id = w.node THEN e.target_id ELSE e.source_id END AS node
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
    SELECT edge_id, node, min(depth) AS depth
    FROM walk
    GROUP BY edge_id, node
    ORDER BY min(depth), edge_id NULLS FIRST
    LIMIT :max_rows
    """
)


@dataclass
class Walk:
    depth: dict[str, int]  # entity id → hops from the nearest seed
    edges: list[Edge]  # in the order reached (nearer first)
    entities: dict[str, Entity]


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
    """Entities within `depth` hops of the seeds through edges valid at `as_of`."""
    rows = session.execute(
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
    ).all()
    hops: dict[str, int] = {}
    edge_order: list[int] = []
    for edge_id, node_id, d in rows:
        hops[node_id] = min(hops.get(node_id, d), d)
        if edge_id is not None and edge_id not in edge_order:
            edge_order.append(edge_id)
    edges = {
        e.id: e
        for e in session.scalars(select(Edge).where(Edge.namespace == ns, Edge.id.in_(edge_order)))
    }
    entities = {
        e.id: e
        for e in session.scalars(select(Entity).where(Entity.namespace == ns, Entity.id.in_(hops)))
    }
    return Walk(depth=hops, edges=[edges[i] for i in edge_order], entities=entities)
