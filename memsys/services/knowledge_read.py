"""The read verbs of the knowledge graph (read_graph, search_nodes, open_nodes); the writes
and the storage they share are in memsys.services.knowledge."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from memsys.models import Edge, Entity
from memsys.runner import before_transaction, retrieval_only
from memsys.schemas.graph import GraphOut, OpenNodesIn, ReadGraphIn, SearchNodesIn
from memsys.services import search, tracing
from memsys.services.knowledge import (
    entities_out,
    graph_exists,
    graph_namespace,
    live_entities,
    relations_of,
)
from memsys.services.mentions import MENTIONS
from memsys.services.observation_links import KEY_PREFIX, OBSERVATION_OF

SEARCH_CANDIDATES = 30
# A hit links its entities only when it is about the query at all: its own relevance
# (fusion.relevance: cosine noisy-OR the query's BM25 share) at least this. MiniLM puts
# unrelated text at cosine 0-0.15 and a paraphrase ("hot beverage" / "likes green tea")
# above 0.3; without it every query, nonsense included, named the entities of whatever
# the dense channel ranked first.
MIN_LINKED_RELEVANCE = 0.2
SEARCH_LIMIT = 1000  # search_nodes: every name match, then the ranked ones


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def read_graph(session: Session, params: ReadGraphIn) -> GraphOut:
    ns = graph_namespace(params)
    if not graph_exists(session, params):
        return GraphOut(entities=[], relations=[])
    entities = live_entities(session, ns, at=params.as_of)
    return GraphOut(
        entities=entities_out(session, ns, entities, params.as_of),
        relations=relations_of(session, ns, entities, both=True, at=params.as_of),
    )


def _open_at(model: type[Entity] | type[Edge], at: datetime | None) -> ColumnElement[bool]:
    """Live rows, or the rows not closed by `at`."""
    if at is None:
        return model.valid_to.is_(None)
    return or_(model.valid_to.is_(None), model.valid_to > at)


def there_at(at: datetime | None) -> ColumnElement[bool]:
    """Live entities, or those that existed at `at` as temporal_graph._open has it: not closed
    by then, and made by then or joined by an edge valid then (an episode may relate names
    first stored today from a reference time last week). A name first stored later takes no
    seat in a view of the past."""
    if at is None:
        return Entity.valid_to.is_(None)
    joined = (
        select(Edge.id)
        .where(
            Edge.namespace == Entity.namespace,
            or_(Edge.source_id == Entity.id, Edge.target_id == Entity.id),
            Edge.valid_from <= at,
            _open_at(Edge, at),
        )
        .exists()
    )
    return and_(_open_at(Entity, at), or_(Entity.valid_from <= at, joined))


def ranked_entities(
    session: Session,
    ns: str,
    query: str,
    limit: int,
    memory_graph: bool = False,
    as_of: datetime | None = None,
) -> list[tuple[Entity, float]]:
    """Live entities (not closed by `as_of`) for a query: those whose name or type contains it
    first (score 1), then those linked to the memories and chunks the retrieval pipeline
    ranks highest (observations, mentions) and finds relevant (MIN_LINKED_RELEVANCE), by the
    best hit's relevance. `memory_graph`: only the memory server's entities."""
    needle = f"%{escape_like(query.lower())}%"
    named = select(Entity).where(
        Entity.namespace == ns,
        there_at(as_of),
        or_(
            func.lower(Entity.name).like(needle, escape="\\"),
            func.lower(Entity.entity_type).like(needle, escape="\\"),
        ),
    )
    if memory_graph:
        named = named.where(Entity.key.startswith(KEY_PREFIX))
    chosen: dict[str, tuple[Entity, float]] = {
        e.id: (e, 1.0)
        for e in session.scalars(named.order_by(Entity.created_at, Entity.id).limit(limit))
    }
    filters: dict[str, Any] = {"namespace": ns}
    if memory_graph:
        filters["doc_type"] = "memory"
    found = search.hybrid(
        session, query, filters=filters, limit=SEARCH_CANDIDATES, count_access=False, as_of=as_of
    )
    score = {h.id: h.score for h in found.hits if h.own >= MIN_LINKED_RELEVANCE}
    linked = select(Edge.target_id, Edge.source_id).where(
        Edge.namespace == ns,
        _open_at(Edge, as_of),
        Edge.source_kind == "chunk",
        Edge.target_kind == "entity",
        Edge.relation.in_([OBSERVATION_OF] if memory_graph else [OBSERVATION_OF, MENTIONS]),
        Edge.source_id.in_(score),
    )
    best: dict[str, float] = {}
    for entity_id, chunk_id in session.execute(linked):
        best[entity_id] = max(best.get(entity_id, 0.0), score[chunk_id])
    ordered = sorted((i for i in best if i not in chosen), key=lambda i: (-best[i], i))
    wanted = ordered[: max(0, limit - len(chosen))]
    rows = select(Entity).where(Entity.namespace == ns, Entity.id.in_(wanted), there_at(as_of))
    if memory_graph:
        rows = rows.where(Entity.key.startswith(KEY_PREFIX))
    by_id = {e.id: e for e in session.scalars(rows)}
    for i in wanted:
        if i in by_id:
            chosen[i] = (by_id[i], best[i])
    return list(chosen.values())


@retrieval_only
@before_transaction(search.embed_query_of)
def search_nodes(session: Session, params: SearchNodesIn) -> GraphOut:
    """Entities whose name or type contains the query first, then those whose observations
    the retrieval pipeline ranks highest; relations with either end among them."""
    ns = graph_namespace(params)
    scope = {"namespace": ns}
    with tracing.traced(
        "search_nodes", params.query, namespace=ns, filters=scope, params=params
    ) as t:
        chosen = (
            [e for e, _ in ranked_entities(session, ns, params.query, SEARCH_LIMIT, True)]
            if graph_exists(session, params)
            else []
        )
        tracing.write(
            session,
            t,
            retrieved=[{"id": e.name} for e in chosen],
            stores=["vector", "fulltext", "graph"],
        )
        return GraphOut(
            entities=entities_out(session, ns, chosen),
            relations=relations_of(session, ns, chosen, both=False),
        )


def open_nodes(session: Session, params: OpenNodesIn) -> GraphOut:
    ns = graph_namespace(params)
    if not graph_exists(session, params):
        return GraphOut(entities=[], relations=[])
    entities = live_entities(session, ns, params.names, params.as_of)
    order = {n: i for i, n in enumerate(params.names)}
    entities.sort(key=lambda e: order[e.name])
    return GraphOut(
        entities=entities_out(session, ns, entities, params.as_of),
        relations=relations_of(session, ns, entities, both=False, at=params.as_of),
    )
