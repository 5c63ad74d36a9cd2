"""The read verbs of the knowledge graph (read_graph, search_nodes, open_nodes); the writes
and the storage they share are in memsys.services.knowledge."""

from __future__ import annotations

from sqlalchemy.orm import Session

from memsys.runner import before_transaction
from memsys.schemas.graph import GraphOut, OpenNodesIn, ReadGraphIn, SearchNodesIn
from memsys.services import namespaces, search, tracing
from memsys.services.knowledge import (
    entities_out,
    graph_namespace,
    live_entities,
    observation_edges,
    relations_of,
)

SEARCH_CANDIDATES = 30


def read_graph(session: Session, params: ReadGraphIn) -> GraphOut:
    ns = graph_namespace(params)
    namespaces.require(session, ns)
    entities = live_entities(session, ns)
    return GraphOut(
        entities=entities_out(session, ns, entities),
        relations=relations_of(session, ns, entities, both=True),
    )


@before_transaction(search.embed_query_of)
def search_nodes(session: Session, params: SearchNodesIn) -> GraphOut:
    """Entities whose name or type contains the query first, then those whose observations
    the retrieval pipeline ranks highest; relations with either end among them."""
    ns = graph_namespace(params)
    scope = {"namespace": ns}
    with tracing.traced(
        "search_nodes", params.query, namespace=ns, filters=scope, params=params
    ) as t:
        namespaces.require(session, ns)
        out = _search_nodes(session, params, ns)
        tracing.write(
            session,
            t,
            retrieved=[{"id": e.name} for e in out.entities],
            stores=["vector", "fulltext", "graph"],
        )
        return out


def _search_nodes(session: Session, params: SearchNodesIn, ns: str) -> GraphOut:
    needle = params.query.lower()
    every = live_entities(session, ns)
    by_name = [e for e in every if needle in e.name.lower() or needle in e.entity_type.lower()]
    found = search.hybrid(
        session,
        params.query,
        filters={"namespace": ns, "doc_type": "memory"},
        limit=SEARCH_CANDIDATES,
        count_access=False,
    )
    hit_rank = {h.id: n for n, h in enumerate(found.hits)}
    ranked: dict[str, int] = {}
    for row in observation_edges(session, ns, [e.id for e in every]):
        if row.source_id in hit_rank:
            ranked[row.target_id] = min(ranked.get(row.target_id, 10**6), hit_rank[row.source_id])
    by_id = {e.id: e for e in every}
    chosen = by_name + [
        by_id[i] for i in sorted(ranked, key=ranked.__getitem__) if by_id[i] not in by_name
    ]
    return GraphOut(
        entities=entities_out(session, ns, chosen),
        relations=relations_of(session, ns, chosen, both=False),
    )


def open_nodes(session: Session, params: OpenNodesIn) -> GraphOut:
    ns = graph_namespace(params)
    namespaces.require(session, ns)
    entities = live_entities(session, ns, params.names)
    order = {n: i for i, n in enumerate(params.names)}
    entities.sort(key=lambda e: order[e.name])
    return GraphOut(
        entities=entities_out(session, ns, entities),
        relations=relations_of(session, ns, entities, both=False),
    )
