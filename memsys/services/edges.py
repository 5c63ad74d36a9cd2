"""Edges between memories: relate, forget, inspect (S001 memory_relate, memory_edge_forget,
memory_inspect_graph). An edge lives in its memories' namespace; forgetting closes it
(`valid_to`, `expired_at`) and keeps it for as-of reads. Only the registry's public relations
are touched here: the `mentions` and `observation_of` edges memsys writes itself are left
alone. memory_relate also joins a memory, document chunk, entity, fact or episode to any other
of them in one namespace (`source_kind`, `target_kind`), with an optional `context`; forget
closes those too, and inspect walks them all (each node says its kind).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, literal, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.db import clock, take_turns
from memsys.errors import InvalidInput, NotFound
from memsys.models import Chunk, Edge, Entity, Episode, Fact
from memsys.schemas.edges import (
    MEMORY_RELATIONS,
    GraphEdge,
    GraphNode,
    GraphPath,
    InspectStats,
    MemoryEdgeForgetIn,
    MemoryEdgeForgetOut,
    MemoryInspectIn,
    MemoryInspectOut,
    MemoryRelateIn,
    MemoryRelateOut,
)
from memsys.services import events, memories, namespaces
from memsys.services.observation_links import valid_at

MAX_PATHS = 200
# What one inspect answers at most: a memory two hops from a hub (an entity related to
# thousands) reached every node of it, each with its content, in one answer. The walk takes
# each hop's edges strongest first and stops adding nodes and edges at these (stats.truncated).
MAX_NODES = 500
MAX_EDGES = 2000


def _public_edges(at: datetime | None = None) -> list[ColumnElement[bool]]:
    """Live edges of a public relation between any two nodes (memory_relate writes them all;
    memsys's own mention and observation links are not public); with `at`, those valid at
    that time instead."""
    return [*valid_at(Edge, at), Edge.relation.in_(MEMORY_RELATIONS)]


_LIVE: dict[str, Any] = {"chunk": Chunk, "entity": Entity, "fact": Fact}


def _where(session: Session, kind: str, node_id: str, hold: bool = False) -> str | None:
    """The namespace of a live node of the given kind, None when there is none; `hold` keeps
    it live until commit (a forget, purge or delete of it waits; one that went first leaves
    it not found)."""
    if kind == "episode":
        return session.scalar(select(Episode.namespace).where(Episode.id == node_id))
    model = _LIVE["chunk" if kind == "memory" else kind]
    stmt = select(model.namespace).where(model.id == node_id, model.valid_to.is_(None))
    if kind == "memory":
        stmt = stmt.where(Chunk.doc_type == "memory")
    found: str | None = session.scalar(
        stmt.limit(1).with_for_update(read=True) if hold else stmt.limit(1)
    )
    return found


def _node(session: Session, kind: str, node_id: str) -> tuple[str, str]:
    """(namespace, stored kind) of a live node of the given kind, held live until commit;
    NotFound otherwise."""
    ns = _where(session, kind, node_id, hold=True)
    if ns is None:
        raise NotFound(f"{kind.capitalize()} not found: {node_id}")
    return ns, "chunk" if kind == "memory" else kind


def _one_namespace(params: MemoryRelateIn, source: str | None, target: str | None) -> None:
    """An edge stays within one namespace (an end not found yet is checked when held)."""
    if source is not None and target is not None and source != target:
        raise InvalidInput(
            f"The source {params.source_kind} is in {source} and the target "
            f"{params.target_kind} in {target}: an edge stays within one namespace"
        )


def relate(session: Session, params: MemoryRelateIn) -> MemoryRelateOut:
    """One edge per (source, target, relation): relating twice returns the first edge."""
    if params.source_id == params.target_id:
        raise InvalidInput(f"A {params.source_kind} cannot be related to itself")
    ends = [(params.source_kind, params.source_id), (params.target_kind, params.target_id)]
    where = {i: _where(session, k, i) for k, i in ends}
    _one_namespace(params, where[params.source_id], where[params.target_id])
    # The write turns of their namespaces first (an import or a purge writing there alone
    # is waited for, up to MEMSYS_BUSY_WAIT_S), then both ends held live, in the order every
    # locker of several rows takes (by id: one namespace), so a forget of both cannot
    # deadlock with it.
    namespaces.share(session, sorted({w for w in where.values() if w is not None}))
    held = {i: _node(session, k, i) for k, i in sorted(ends, key=lambda end: end[1])}
    (ns, source_kind), (target_ns, target_kind) = held[params.source_id], held[params.target_id]
    _one_namespace(params, ns, target_ns)
    source, target = params.source_id, params.target_id
    take_turns(session, ns, source, target, params.relation)
    existing = session.scalar(
        select(Edge.id).where(
            Edge.namespace == ns,
            Edge.source_kind == source_kind,
            Edge.source_id == source,
            Edge.target_kind == target_kind,
            Edge.target_id == target,
            Edge.relation == params.relation,
            Edge.valid_to.is_(None),
        )
    )
    if existing is not None:
        return MemoryRelateOut(edge_id=existing, created=False)
    edge_id = session.execute(
        insert(Edge)
        .values(
            namespace=ns,
            source_kind=source_kind,
            source_id=source,
            target_kind=target_kind,
            target_id=target,
            relation=params.relation,
            weight=params.weight,
            context=params.context,
        )
        .returning(Edge.id)
    ).scalar_one()
    events.record(
        session,
        namespace=ns,
        event_type="create",
        operation="memory_relate",
        subject_kind="edge",
        subject_id=str(edge_id),
        payload={"relation": params.relation, "source": source, "target": target},
    )
    return MemoryRelateOut(edge_id=edge_id, created=True)


def edge_forget(session: Session, params: MemoryEdgeForgetIn) -> MemoryEdgeForgetOut:
    """Three modes: one edge by id; every edge of a memory (by direction); the edges between
    a source and a target. `relation` narrows any of them. Any public relation between any
    kinds of node (memory_relate writes them all); memsys's own links are not touched."""
    where: list[ColumnElement[bool]] = [
        Edge.valid_to.is_(None),
        Edge.relation.in_(MEMORY_RELATIONS),
    ]
    if params.edge_id is not None:
        where.append(Edge.id == params.edge_id)
    elif params.memory_id is not None:
        out, into = Edge.source_id == params.memory_id, Edge.target_id == params.memory_id
        sides = {"outgoing": out, "incoming": into, "both": or_(out, into)}
        where.append(sides[params.direction])
    elif params.source_id is not None and params.target_id is not None:
        where += [Edge.source_id == params.source_id, Edge.target_id == params.target_id]
    else:
        raise InvalidInput(
            "Say which edges to forget: edge_id, memory_id, or source_id with target_id"
        )
    if params.relation is not None:
        where.append(Edge.relation == params.relation)
    touched = sorted(session.scalars(select(Edge.namespace).where(*where).distinct()))
    for namespace in touched:  # edges the caller sees but may not change: refused, not 0
        tenancy.require_write(namespace)
    namespaces.share(session, touched)  # after any import of those namespaces
    at = clock(session)
    closed = list(
        session.execute(
            update(Edge)
            .where(*where)
            .values(valid_to=at, expired_at=at)
            .returning(Edge.id, Edge.namespace)
        )
    )
    if params.edge_id is not None and not closed:
        raise NotFound(f"Edge not found: {params.edge_id}")
    for namespace in {row.namespace for row in closed}:
        events.record(
            session,
            namespace=namespace,
            event_type="delete",
            operation="memory_edge_forget",
            subject_kind="edge",
            payload={"edge_ids": sorted(r.id for r in closed if r.namespace == namespace)},
        )
    deleted = sorted(row.id for row in closed)
    return MemoryEdgeForgetOut(deleted_ids=deleted, deleted_count=len(deleted))


def inspect(session: Session, params: MemoryInspectIn) -> MemoryInspectOut:
    """The nodes (memories, chunks, entities, facts, episodes) within max_depth hops of a
    memory, the edges between them, every simple path from it (relevance decays by
    decay_factor per hop), as JSON or a mermaid flowchart."""
    origin = memories.live_memory(session, params.memory_id)
    ns = origin.namespace
    at = params.as_of
    depth = {origin.id: 0}
    edges: dict[int, Edge] = {}
    frontier = {origin.id}
    labels = _labels(session, ns, {origin.id: "chunk"}, at)
    reached = 0
    truncated = False
    for hop in range(1, params.max_depth + 1):
        # MAX_EDGES + 1 suffice though a hop ("both") fetches edges seen before: those are at
        # most len(edges), so a full fetch holds more new edges than there is room for, and
        # the loop meets one with no room (truncated).
        found = _edges_from(session, ns, frontier, params, MAX_EDGES + 1)
        reached_now: dict[str, str] = {}
        for edge in found:
            if edge.id not in edges and len(edges) >= MAX_EDGES:
                truncated = True
                break
            edges[edge.id] = edge
            for node, kind in (
                (edge.source_id, edge.source_kind),
                (edge.target_id, edge.target_kind),
            ):
                if node in depth:
                    continue
                if len(depth) >= MAX_NODES:
                    truncated = True
                    continue
                depth[node] = hop
                reached_now[node] = kind
        # A closed node (forgotten, merged away) ends a path: the walk does not go through it
        # to what hangs on it (a merge's survivor showed at depth 2 with no edge to it).
        live = _labels(session, ns, reached_now, at)
        labels.update(live)
        frontier = set(live)
        if not frontier:
            break
        reached = hop
    kept = {node for node in depth if node in labels}
    shown_edges = [e for e in edges.values() if e.source_id in kept and e.target_id in kept]
    score = params.include_scores

    def relevance(hops: int) -> float | None:
        return round(params.decay_factor**hops, 6) if score else None

    nodes = [
        GraphNode(
            id=n,
            kind=labels[n][0],
            content=labels[n][1],
            depth=depth[n],
            relevance=relevance(depth[n]),
        )
        for n in sorted(kept, key=lambda n: (depth[n], n))
    ]
    paths = [
        GraphPath(path=p, total_relevance=relevance(len(p) - 1))
        for p in _paths(origin.id, shown_edges, params.direction, params.max_depth)
    ]
    out = MemoryInspectOut(
        origin_id=origin.id,
        nodes=nodes,
        edges=[
            GraphEdge(
                id=e.id,
                source=e.source_id,
                target=e.target_id,
                relation=e.relation,
                weight=e.weight,
            )
            for e in sorted(shown_edges, key=lambda e: e.id)
        ],
        paths=paths,
        stats=InspectStats(
            total_nodes=len(nodes),
            total_edges=len(shown_edges),
            max_depth_reached=reached,
            truncated=truncated,
        ),
    )
    if params.output_format == "mermaid":
        out.mermaid = mermaid(out)
    return out


def _labels(
    session: Session, ns: str, kinds: dict[str, str], at: datetime | None
) -> dict[str, tuple[str, str]]:
    """id → (kind, text) of the nodes live at `at` (now by default): a memory's or a document
    chunk's content, an entity's name, a fact's content, an episode's content."""
    wanted: dict[str, list[str]] = defaultdict(list)
    for node, kind in kinds.items():
        wanted[kind].append(node)
    out: dict[str, tuple[str, str]] = {}
    for kind, node_ids in wanted.items():
        if kind == "episode":
            stmt = select(Episode.id, literal("episode"), Episode.content).where(
                Episode.namespace == ns, Episode.id.in_(node_ids)
            )
            if at is not None:
                stmt = stmt.where(Episode.created_at <= at)
        elif kind in _LIVE:
            model = _LIVE[kind]
            shown = {
                "chunk": case((Chunk.doc_type == "memory", "memory"), else_="chunk"),
                "entity": literal("entity"),
                "fact": literal("fact"),
            }[kind]
            text = Entity.name if kind == "entity" else model.content
            stmt = select(model.id, shown, text).where(
                model.namespace == ns, model.id.in_(node_ids), *valid_at(model, at)
            )
        else:
            continue
        out.update({row[0]: (row[1], row[2]) for row in session.execute(stmt)})
    return out


def _edges_from(
    session: Session, ns: str, frontier: set[str], params: MemoryInspectIn, limit: int
) -> list[Edge]:
    """The frontier's edges, strongest first, at most `limit` of them."""
    out, into = Edge.source_id.in_(frontier), Edge.target_id.in_(frontier)
    sides = {"outgoing": out, "incoming": into, "both": or_(out, into)}
    stmt = select(Edge).where(
        Edge.namespace == ns, sides[params.direction], *_public_edges(params.as_of)
    )
    if params.edge_types:
        stmt = stmt.where(Edge.relation.in_(params.edge_types))
    return list(session.scalars(stmt.order_by(Edge.weight.desc(), Edge.id).limit(limit)))


def _paths(origin: str, edges: list[Edge], direction: str, max_depth: int) -> list[list[str]]:
    """Simple paths from the origin (at most MAX_PATHS), following edges as inspected."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        if direction in ("outgoing", "both"):
            neighbours[e.source_id].add(e.target_id)
        if direction in ("incoming", "both"):
            neighbours[e.target_id].add(e.source_id)
    found: list[list[str]] = []
    stack = [[origin]]
    while stack and len(found) < MAX_PATHS:
        path = stack.pop()
        if len(path) > 1:
            found.append(path)
        if len(path) <= max_depth:
            for nxt in sorted(neighbours[path[-1]], reverse=True):
                if nxt not in path:
                    stack.append([*path, nxt])
    return sorted(found, key=lambda p: (len(p), p))


def _label(text: str) -> str:
    """A node label mermaid accepts: one line, no quotes or brackets, at most 60 characters."""
    line = " ".join(text.split())
    for bad in '"[](){}<>|#;`':
        line = line.replace(bad, " ")
    line = " ".join(line.split())
    return line if len(line) <= 60 else line[:59] + "…"


def mermaid(graph: MemoryInspectOut) -> str:
    """A mermaid flowchart: one node per memory (short label), one arrow per edge."""
    alias = {node.id: f"n{i}" for i, node in enumerate(graph.nodes)}
    lines = ["flowchart LR"]
    for node in graph.nodes:
        lines.append(f'    {alias[node.id]}["{_label(node.content) or node.id}"]')
    for edge in graph.edges:
        lines.append(f"    {alias[edge.source]} -->|{edge.relation}| {alias[edge.target]}")
    return "\n".join(lines) + "\n"
