"""S002's graph reads: search_entities, search_edges, query_graph, build_context.

Ranking is the one memsys already has (knowledge_read.ranked_entities: name matches, then
entities linked to what the retrieval pipeline ranks highest); neighbourhoods come from the
recursive CTE in graph_walk. Every read is "as of" a time, now by default: an edge or fact
counts when valid_from <= as_of < valid_to. One name is one entity: the extractor's entity of
a name (`concept#…`) is shown as the memory server's one of that name when there is one
(`twins`), with the edges of both.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from memsys import extraction
from memsys.config import get_settings
from memsys.errors import NotFound, shortened
from memsys.models import Edge, Entity, Fact
from memsys.runner import before_transaction
from memsys.schemas.temporal import (
    BuildContextIn,
    BuildContextOut,
    ContextFact,
    EntityEdge,
    QueryGraphIn,
    QueryGraphOut,
    SearchEdgesIn,
    SearchEdgesOut,
    SearchEntitiesIn,
    SearchEntitiesOut,
    node,
)
from memsys.services import graph_walk, namespaces, search, tracing
from memsys.services.knowledge import extracted_twins
from memsys.services.knowledge_read import ranked_entities, there_at
from memsys.services.observation_links import KEY_PREFIX

DECAY = 0.7  # relevance kept per hop away from a match
CONTEXT_DEPTH = 2


def _now(as_of: datetime | None) -> datetime:
    return as_of or datetime.now(UTC)


def _open(entity: Entity | graph_walk.Node, at: datetime, linked: set[str]) -> bool:
    """Whether an entity existed at `at`: not closed by then, and made by then or joined by
    an edge valid then (`linked`: an episode may relate entities first seen today from a
    reference time last week). A name first stored after `at` is not shown as of `at`."""
    return not _closed_by(entity, at) and (entity.valid_from <= at or entity.id in linked)


def _closed_by(entity: Entity | graph_walk.Node, at: datetime) -> bool:
    return entity.valid_to is not None and entity.valid_to <= at


def _linked(edges: list[Any]) -> set[str]:
    return {end for e in edges for end in (e.source_id, e.target_id)}


def _groups(params: Any) -> list[str]:
    """The namespaces to search: group_ids (S002's optional filter; an empty list filters
    everything out), else the graph namespace."""
    if params.group_ids is None:
        return [get_settings().graph_namespace]
    return list(dict.fromkeys(params.group_ids))


Ranked = list[tuple[Entity, float]]
Read = Callable[[Session, Any], Any]


def traced(ids_of: Callable[[Any], list[str]]) -> Callable[[Read], Read]:
    """Trace a graph read like every retrieval (memsys.services.tracing): the pipeline's
    channels come from the ranking it runs, the ids returned from `ids_of(answer)`."""

    def wrap(read: Read) -> Read:
        @functools.wraps(read)
        def run(session: Session, params: Any) -> Any:
            if hasattr(params, "group_ids"):
                scope = _groups(params)
            else:
                scope = [params.namespace or get_settings().graph_namespace]
            ns = scope[0] if len(scope) == 1 else None
            with tracing.traced(
                read.__name__, params.query, namespace=ns, filters={"scope": scope}, params=params
            ) as draft:
                answer = read(session, params)
                tracing.write(
                    session,
                    draft,
                    retrieved=[{"id": i} for i in ids_of(answer)],
                    stores=["vector", "fulltext", "graph"],
                )
                return answer

        return run

    return wrap


def twins(
    session: Session, ns: str, ids: Iterable[str], as_of: datetime | None = None
) -> dict[str, Entity]:
    """One name is one entity to a reader: the memory server's entity (create_entities,
    fact_set) standing for each of the extractor's (`concept#…`, episodes and memories)
    among `ids` that has its name — concept id → that entity (there as of `as_of`)."""
    concepts = session.execute(
        select(Entity.id, Entity.key, Entity.name).where(
            Entity.namespace == ns, Entity.id.in_(list(ids)), Entity.key.startswith("concept#")
        )
    ).all()
    if not concepts:
        return {}
    named = session.scalars(
        select(Entity)
        .where(
            Entity.namespace == ns,
            Entity.key.startswith(KEY_PREFIX),
            func.lower(Entity.name).in_({c.name.lower() for c in concepts}),
            there_at(as_of),
        )
        .order_by(Entity.created_at, Entity.id)
    )
    by_key: dict[str, Entity] = {}
    for entity in named:
        by_key.setdefault(extraction.key_for(entity.name), entity)
    return {c.id: by_key[c.key] for c in concepts if c.key in by_key}


def _readable(session: Session, ns: str, named: bool) -> bool:
    """Whether a read has a graph in `ns`. One the call names must exist (NotFound lists the
    known ones); the default graph namespace not existing yet is an empty graph, as the
    memory server's reads have it (memsys.services.knowledge.graph_exists)."""
    if named:
        namespaces.require(session, ns)
        return True
    try:
        namespaces.require(session, ns)
    except NotFound:
        return False
    return True


def _ranked(
    session: Session,
    groups: list[str],
    query: str,
    limit: int,
    as_of: datetime | None = None,
    named: bool = True,
) -> Ranked:
    """The entities matching `query` best (as of `as_of`: the graph a read of then walks),
    the extractor's entity of a name folded into the memory server's one (`twins`).
    `named`: the call named the namespaces (else the default one may not exist yet)."""
    found: dict[tuple[str, str], tuple[Entity, float]] = {}
    for ns in groups:
        if not _readable(session, ns, named):
            continue
        ranked = ranked_entities(session, ns, query, limit, as_of=as_of)
        standing = twins(session, ns, [e.id for e, _ in ranked], as_of)
        for entity, score in ranked:
            entity = standing.get(entity.id, entity)
            held = found.get((ns, entity.id))
            found[(ns, entity.id)] = (entity, max(score, held[1] if held else score))
    return sorted(found.values(), key=lambda pair: -pair[1])[:limit]


def _folded(session: Session, ns: str, found: graph_walk.Walk, at: datetime) -> graph_walk.Walk:
    """A walk with the extractor's entity of a name folded into the memory server's one
    (`twins`): one node, at the nearer depth, carrying both entities' edges."""
    standing = twins(session, ns, found.entities, at)
    if not standing:
        return found
    alias = {concept: entity.id for concept, entity in standing.items()}
    depth = {i: d for i, d in found.depth.items() if i not in alias}
    entities = {i: e for i, e in found.entities.items() if i not in alias}
    for concept, entity in standing.items():
        depth[entity.id] = min(found.depth[concept], depth.get(entity.id, found.depth[concept]))
        entities.setdefault(entity.id, entity)  # type: ignore[arg-type]  # the same columns
    edges = [
        dataclasses.replace(
            e,
            source_id=alias.get(e.source_id, e.source_id),
            target_id=alias.get(e.target_id, e.target_id),
        )
        for e in found.edges
    ]
    kept = [e for e in edges if e.source_id != e.target_id]
    return graph_walk.Walk(depth=depth, edges=once(kept), entities=entities)


Stated = TypeVar("Stated", Edge, graph_walk.Link)


def once(edges: list[Stated], alias: dict[str, str] | None = None) -> list[Stated]:
    """One edge per (source, target, relation) once twins are folded (`alias`): a relation
    both an episode and create_relations stated was listed twice. The one kept says most:
    an edge with its sentence (an episode's fact) first, then the earliest begun; the rest
    keep their places in the order given."""
    ends = alias or {}

    def triple(e: Stated) -> tuple[str, str, str]:
        return ends.get(e.source_id, e.source_id), ends.get(e.target_id, e.target_id), e.relation

    def rank(e: Stated) -> tuple[bool, datetime, int]:
        return e.context is None, e.valid_from, e.id

    best: dict[tuple[str, str, str], Stated] = {}
    for e in edges:
        held = best.get(triple(e))
        if held is None or rank(e) < rank(held):
            best[triple(e)] = e
    return [e for e in edges if best[triple(e)] is e]


def _walk_from(
    session: Session, ns: str, seeds: list[Entity], depth: int, at: datetime
) -> graph_walk.Walk:
    """graph_walk.walk from the seeds and the extractor's entities of their names, folded."""
    named = [e.name for e in seeds if e.key.startswith(KEY_PREFIX)]
    also = [e.id for e in extracted_twins(session, ns, named)] if named else []
    ids = list(dict.fromkeys([*(e.id for e in seeds), *also]))
    return _folded(session, ns, graph_walk.walk(session, ns, ids, depth, at), at)


def edge_out(
    edge: Edge | graph_walk.Link,
    names: dict[str, str],
    score: float,
    alias: dict[str, str] | None = None,
) -> EntityEdge:
    """`alias`: an end shown as another entity (`twins`)."""
    source = (alias or {}).get(edge.source_id, edge.source_id)
    target = (alias or {}).get(edge.target_id, edge.target_id)
    return EntityEdge(
        uuid=edge.id,
        source_node_uuid=source,
        target_node_uuid=target,
        source_name=names.get(source, source),
        target_name=names.get(target, target),
        relation_type=edge.relation,
        fact=edge.context,
        group_id=edge.namespace,
        created_at=edge.created_at,
        valid_from=edge.valid_from,
        valid_to=edge.valid_to,
        expired_at=edge.expired_at,
        score=round(score, 4),
    )


def _names(session: Session, ns: str, ids: set[str]) -> dict[str, str]:
    rows = session.execute(
        select(Entity.id, Entity.name).where(Entity.namespace == ns, Entity.id.in_(ids))
    )
    return dict(rows.tuples().all())


@before_transaction(search.embed_query_of)
@traced(lambda out: [e.uuid for e in out.entities])
def search_entities(session: Session, params: SearchEntitiesIn) -> SearchEntitiesOut:
    """Entities for a query, best first, with a relevance score."""
    named = params.group_ids is not None
    ranked = _ranked(session, _groups(params), params.query, params.num_results, named=named)
    return SearchEntitiesOut(entities=[node(e, score) for e, score in ranked])


@before_transaction(search.embed_query_of)
@traced(lambda out: [e.uuid for e in out.edges])
def search_edges(session: Session, params: SearchEdgesIn) -> SearchEdgesOut:
    """Relations valid at as_of around the entities the query ranks: an edge scores the mean
    of its two ends' relevance (an end that did not match counts 0)."""
    at = _now(params.as_of)
    ranked = _ranked(
        session, _groups(params), params.query, params.num_results * 2, params.as_of,
        named=params.group_ids is not None,
    )  # fmt: skip
    score = {e.id: s for e, s in ranked}
    out: list[EntityEdge] = []
    for ns in {e.namespace for e, _ in ranked}:
        named = [e.name for e, _ in ranked if e.namespace == ns and e.key.startswith(KEY_PREFIX)]
        ends = set(score) | {c.id for c in extracted_twins(session, ns, named)}
        edges = session.scalars(
            select(Edge).where(
                Edge.namespace == ns,
                Edge.source_kind == "entity",
                Edge.target_kind == "entity",
                or_(Edge.source_id.in_(ends), Edge.target_id.in_(ends)),
                Edge.valid_from <= at,
                or_(Edge.valid_to.is_(None), Edge.valid_to > at),
            )
        ).all()
        touched = {i for e in edges for i in (e.source_id, e.target_id)}
        alias = {c: e.id for c, e in twins(session, ns, touched, params.as_of).items()}
        names = _names(session, ns, touched | set(alias.values()))
        for e in once(list(edges), alias):
            source = alias.get(e.source_id, e.source_id)
            target = alias.get(e.target_id, e.target_id)
            if source == target:
                continue
            mean = (score.get(source, 0.0) + score.get(target, 0.0)) / 2
            out.append(edge_out(e, names, mean, alias))
    out.sort(key=lambda e: (-e.score, e.uuid))
    return SearchEdgesOut(edges=out[: params.num_results])


@before_transaction(search.embed_query_of)
@traced(lambda out: [e.uuid for e in out.entities])
def query_graph(session: Session, params: QueryGraphIn) -> QueryGraphOut:
    """S002 query_graph: the best-matching entities and their neighbourhood within `depth`
    hops at as_of; relevance decays by DECAY per hop from the nearest match."""
    ns = params.namespace or get_settings().graph_namespace
    at = _now(params.as_of)
    named = params.namespace is not None
    seeds = _ranked(session, [ns], params.query, params.max_results, params.as_of, named)
    if not seeds:
        return QueryGraphOut(scope=[], entities=[], links=[], edges=[], relevance=[])
    top = max(s for _, s in seeds)
    found = _walk_from(session, ns, [e for e, _ in seeds], params.depth, at)
    relevance = {e.id: s for e, s in seeds}
    for entity_id, hops in found.depth.items():
        relevance.setdefault(entity_id, top * DECAY**hops)
    linked = _linked(found.edges)
    live = {i: e for i, e in found.entities.items() if _open(e, at, linked)}
    order = {e.id: n for n, (e, _) in enumerate(seeds)}  # name matches before linked ones
    chosen = sorted(
        live, key=lambda i: (-relevance[i], order.get(i, len(order)), found.depth[i], live[i].name)
    )
    chosen = chosen[: params.max_results]
    kept = set(chosen)
    names = {i: live[i].name for i in chosen}
    edges = [e for e in found.edges if e.source_id in kept and e.target_id in kept]
    scored = [
        edge_out(e, names, (relevance[e.source_id] + relevance[e.target_id]) / 2) for e in edges
    ]
    return QueryGraphOut(
        scope=[names[i] for i in chosen],
        entities=[node(live[i], relevance[i]) for i in chosen],
        links=[f"{e.source_name}→{e.target_name}" for e in scored],
        edges=scored,
        relevance=[round(relevance[i], 4) for i in chosen],
    )


def _resolve(session: Session, ns: str, names: list[str], at: datetime) -> list[Entity]:
    wanted = {n.lower(): n for n in names}
    rows = session.scalars(
        select(Entity)
        .where(Entity.namespace == ns, func.lower(Entity.name).in_(wanted))
        .order_by(Entity.created_at, Entity.id)
    ).all()
    # Named by the caller: any not closed by then (what joined them then is read next).
    found = [e for e in rows if not _closed_by(e, at)]
    missing = set(wanted) - {e.name.lower() for e in found}
    if missing:
        listed = ", ".join(sorted(wanted[m] for m in missing))
        raise NotFound(f"Entity with name {listed} not found")
    return found


def build_context(session: Session, params: BuildContextIn) -> BuildContextOut:
    """S002 build_context: the relations and versioned facts around the named entities as of
    a time, nearest first (to center_node_uuid when given), at most max_facts."""
    ns = params.namespace or get_settings().graph_namespace
    _readable(session, ns, params.namespace is not None)  # a fresh default: names not found
    at = _now(params.as_of)
    named = _resolve(session, ns, params.entity_names, at)
    found = _walk_from(session, ns, named, CONTEXT_DEPTH, at)
    distance = dict(found.depth)
    if params.center_node_uuid is not None:
        centred = graph_walk.walk(session, ns, [params.center_node_uuid], CONTEXT_DEPTH + 1, at)
        if params.center_node_uuid not in centred.depth:  # a typo must not rank silently
            raise NotFound(
                f"Entity {shortened(params.center_node_uuid, 80)} (center_node_uuid) not found "
                f"in namespace {ns}"
            )
        centred = _folded(session, ns, centred, at)
        distance = {i: centred.depth.get(i, CONTEXT_DEPTH + 2) for i in found.depth}
    # The names asked for count as of `at` (a fact may be back-dated before its entity).
    linked = _linked(found.edges) | {e.id for e in named}
    entities = {i: e for i, e in found.entities.items() if _open(e, at, linked)}
    names = {i: e.name for i, e in entities.items()}
    facts: list[ContextFact] = []
    for e in found.edges:
        if e.source_id in names and e.target_id in names:
            text = e.context or f"{names[e.source_id]} {e.relation} {names[e.target_id]}"
            facts.append(
                ContextFact(
                    kind="edge",
                    uuid=str(e.id),
                    subject=names[e.source_id],
                    relation_type=e.relation,
                    object=names[e.target_id],
                    fact=text,
                    distance=min(distance[e.source_id], distance[e.target_id]),
                    valid_from=e.valid_from,
                    valid_to=e.valid_to,
                )
            )
    versions = session.scalars(
        select(Fact).where(
            Fact.namespace == ns,
            Fact.entity_id.in_(names),
            Fact.valid_from <= at,
            or_(Fact.valid_to.is_(None), Fact.valid_to > at),
        )
    )
    for f in versions:
        assert f.entity_id is not None
        facts.append(
            ContextFact(
                kind="fact",
                uuid=f.id,
                subject=names[f.entity_id],
                relation_type=f.attribute,
                object=None,
                fact=f.content,
                distance=distance[f.entity_id],
                valid_from=f.valid_from,
                valid_to=f.valid_to,
            )
        )
    facts.sort(key=lambda f: (f.distance, f.kind != "fact", f.subject, f.uuid))
    facts = facts[: params.max_facts]
    lines = [f"- {f.fact} (since {f.valid_from:%Y-%m-%d})" for f in facts]
    return BuildContextOut(
        entities=[
            node(entities[i], DECAY ** distance[i])
            for i in sorted(entities, key=lambda i: (distance[i], names[i]))
        ],
        facts=facts,
        context="\n".join(lines),
    )
