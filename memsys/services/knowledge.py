"""The knowledge graph behind the official MCP memory server's nine verbs (server-memory).

Entities are `entity` rows keyed `kg#<name>` in a namespace. An observation is a memory
(a `fact` chunk, embedded and searchable like any other, deduplicated by content) linked to
its entity by an `observation_of` edge; relations are entity → entity edges. Deletes close
rows (`valid_to`) and keep history. `search_nodes` ranks entities by the retrieval pipeline
over their observations, after exact name and type matches — not by substring alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

import numpy as np
from sqlalchemy import func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memsys import extraction, ids, secretscan, tenancy
from memsys.config import get_settings
from memsys.db import clock, rowcount, take_turns, take_turns_all
from memsys.embeddings import get_embedder
from memsys.errors import NotFound
from memsys.models import Chunk, Edge, Entity, Fact
from memsys.runner import before_transaction
from memsys.schemas.graph import (
    AddedObservations,
    AddObservationsIn,
    CreateEntitiesIn,
    CreateRelationsIn,
    DeleteEntitiesIn,
    DeleteObservationsIn,
    DeleteRelationsIn,
    DoneOut,
    EntitiesOut,
    EntityIn,
    EntityOut,
    ObservationsIn,
    ObservationsOut,
    RelationOut,
    RelationsOut,
)
from memsys.schemas.memories import check_batch_load
from memsys.services import events, lifecycle, namespaces, observation_links
from memsys.services.mentions import MENTIONS
from memsys.services.observation_links import (
    KEY_PREFIX,
    OBSERVATION_OF,
    entity_key,
    observation_edges,
    valid_at,
)

Vectors = dict[str, np.ndarray]


def graph_namespace(params: Any) -> str:
    return str(params.namespace or get_settings().graph_namespace)


def graph_exists(session: Session, params: Any) -> bool:
    """Whether the call's graph namespace exists. The default one (no namespace given) not
    existing yet is the memory server's empty graph, as on a fresh install: reads find
    nothing, deletes delete nothing. A namespace the call names must exist (NotFound lists
    the known ones), as for every read in memsys."""
    if params.namespace is not None:
        namespaces.require(session, params.namespace)
        return True
    try:
        namespaces.require(session, graph_namespace(params))
    except NotFound:
        return False
    return True


def embed_texts(texts: list[str]) -> Vectors:
    unique = sorted(set(texts))
    if not unique:
        return {}
    return dict(zip(unique, get_embedder().embed(unique), strict=True))


def live_entities(
    session: Session,
    ns: str,
    names: list[str] | None = None,
    at: datetime | None = None,
    lock: Literal["share", "update"] | None = None,
) -> list[Entity]:
    """The memory server's entities live now, or with `at` those valid then. `lock`: a
    writer of what hangs on them ("share": observations, relations) and their deleter
    ("update") take turns, so nothing is added to an entity a delete has closed."""
    stmt = select(Entity).where(
        Entity.namespace == ns, *valid_at(Entity, at), Entity.key.startswith(KEY_PREFIX)
    )
    if names is not None:
        stmt = stmt.where(Entity.key.in_([entity_key(n) for n in names]))
    stmt = stmt.order_by(Entity.created_at, Entity.id)
    if lock is not None:
        stmt = stmt.with_for_update(read=lock == "share")
    return list(session.scalars(stmt))


def observed(
    session: Session, ns: str, entities: list[Entity], at: datetime | None = None
) -> tuple[dict[str, list[str]], set[str]]:
    """What was observed of each entity (entity id → texts, in order) and the ids of the
    observation memories holding it."""
    texts: dict[str, list[str]] = defaultdict(list)
    memories: set[str] = set()
    for row in observation_edges(session, ns, [e.id for e in entities], at):
        texts[row.target_id].append(row.content)
        memories.add(row.source_id)
    return texts, memories


def entities_out(
    session: Session, ns: str, entities: list[Entity], at: datetime | None = None
) -> list[EntityOut]:
    observed_texts, _ = observed(session, ns, entities, at)
    return [
        EntityOut(name=e.name, entityType=e.entity_type, observations=observed_texts[e.id])
        for e in entities
    ]


def relations_of(
    session: Session, ns: str, entities: list[Entity], both: bool, at: datetime | None = None
) -> list[RelationOut]:
    by_id = {e.id: e.name for e in entities}
    ends = (Edge.source_id.in_(by_id), Edge.target_id.in_(by_id))
    stmt = select(Edge).where(
        Edge.namespace == ns,
        *valid_at(Edge, at),
        Edge.source_kind == "entity",
        Edge.target_kind == "entity",
        (ends[0] & ends[1]) if both else or_(*ends),
    )
    edges = list(session.scalars(stmt.order_by(Edge.id)))
    missing = {i for e in edges for i in (e.source_id, e.target_id) if i not in by_id}
    if missing:
        rows = session.execute(
            select(Entity.id, Entity.name).where(Entity.namespace == ns, Entity.id.in_(missing))
        )
        by_id.update(dict(rows.tuples().all()))
    return [
        RelationOut(
            **{"from": by_id[e.source_id], "to": by_id[e.target_id]}, relationType=e.relation
        )
        for e in edges
    ]


def add_to(
    session: Session, ns: str, entity: Entity, contents: list[str], vectors: Vectors
) -> list[str]:
    """Observations the entity does not have yet, stored as memories and linked."""
    return observation_links.link(session, ns, [(entity.id, entity.name, contents)], vectors)[0]


def _close_observations(
    session: Session, ns: str, edges: list[Any], at: datetime | None = None
) -> None:
    """Close observation edges at `at` (default: the server's clock now); a memory made for
    an entity goes when nothing links it."""
    if not edges:
        return
    at = at or clock(session)
    session.execute(
        update(Edge)
        .where(Edge.namespace == ns, Edge.id.in_([r.id for r in edges]))
        .values(valid_to=at, expired_at=at)
    )
    for chunk_id in {r.source_id for r in edges}:
        still_linked = session.scalar(
            select(func.count()).where(
                Edge.namespace == ns,
                Edge.source_id == chunk_id,
                Edge.relation == OBSERVATION_OF,
                Edge.valid_to.is_(None),
            )
        )
        chunk = session.get(Chunk, (ns, chunk_id))
        if not still_linked and chunk is not None and "entity" in (chunk.meta or {}):
            chunk.valid_to = at
    session.flush()


def _record(session: Session, ns: str, operation: str, count: int) -> None:
    events.record(
        session,
        namespace=ns,
        event_type="delete" if operation.startswith("delete") else "edit",
        operation=operation,
        subject_kind="graph",
        payload={"items": count},
    )


# ------------------------------------------------------------------ the nine verbs


def embed_observations(texts: list[str]) -> Vectors:
    """The vectors of one call's observations (a bounded load, as memory_store_batch's)."""
    check_batch_load(texts, "observations")
    return embed_texts(texts)


@before_transaction(lambda p: embed_observations([o for e in p.entities for o in e.observations]))
def create_entities(
    session: Session, params: CreateEntitiesIn, prepared: Vectors | None = None
) -> EntitiesOut:
    """Entities not yet present (by name) are created with their observations; an existing
    name is skipped, as server-memory does (and so is a repeat of a name within the call).
    Set-wise: a fixed number of statements per call (memsys.services.observation_links)."""
    ns = graph_namespace(params)
    vectors = prepared or embed_observations([o for e in params.entities for o in e.observations])
    namespaces.ensure(session, ns)
    given: dict[str, EntityIn] = {}
    for item in params.entities:
        given.setdefault(item.name, item)
    existing = {e.name for e in live_entities(session, ns, list(given))}
    fresh = [item for item in given.values() if item.name not in existing]
    made = observation_links.create_entities(
        session, ns, [(item.name, item.entityType) for item in fresh]
    )
    wanted = [(made[i.name], i.name, i.observations) for i in fresh if i.name in made]
    aged: set[str] = set()
    added = observation_links.link(session, ns, wanted, vectors, aged)
    created = live_entities(session, ns, list(made)) if made else []
    _record(session, ns, "create_entities", len(created))
    flagged = flag(zip([w[1] for w in wanted], added, strict=True))
    back = revived(session, ns, aged, "create_entities")
    return EntitiesOut(entities=entities_out(session, ns, created), warnings=flagged, revived=back)


def flag(written: Iterable[tuple[str, list[str]]]) -> list[str]:
    """The secret warnings (memsys.secretscan) of the observations written, by entity name:
    flagged as memory_store flags its content, stored all the same."""
    return [
        warning
        for name, contents in written
        for content in contents
        for warning in secretscan.warnings(content, f"an observation of {name}")
    ]


def revived(session: Session, ns: str, aged: set[str], operation: str) -> list[str]:
    """Bring back the aged memories an observation restated (observation_links.link's
    `aged`), as memory_store does one it deduplicates onto (lifecycle.revive): the ids it
    revived, sorted."""
    if not aged:
        return []
    return sorted(lifecycle.revive(session, ns, sorted(aged), operation))


def upsert_entity(session: Session, ns: str, name: str, entity_type: str) -> tuple[Entity, bool]:
    """The live entity of that name, created if missing; True when this call created it. Two
    writers of one name converge on one row (the unique index on live keys). One found is
    held (a share lock) as live_entities' writers hold theirs: a delete_entities waits for
    what this transaction hangs on it (a fact, an observation) and closes that too."""
    while True:
        new_id = session.execute(
            insert(Entity)
            .values(
                namespace=ns,
                id=ids.new_id(ids.ENTITY),
                key=entity_key(name),
                name=name,
                entity_type=entity_type,
                created_at=func.clock_timestamp(),  # the order they were given, as listed
            )
            .on_conflict_do_nothing(
                index_elements=["namespace", "key"], index_where=text("valid_to IS NULL")
            )
            .returning(Entity.id)
        ).scalar()
        if new_id is not None:
            entity = session.get(Entity, (ns, new_id))
            assert entity is not None
            return entity, True
        found = live_entities(session, ns, [name], lock="share")
        if found:
            return found[0], False
        # deleted between the two statements: the name is free again


_MORE_EVIDENCE = text(
    """
    UPDATE edge SET evidence_chunk_ids = evidence_chunk_ids || CAST(:ev AS text[])
    WHERE namespace = :ns AND source_id = :s AND target_id = :t AND relation = :r
      AND valid_to IS NULL AND NOT evidence_chunk_ids @> CAST(:ev AS text[])
    """
)


def relate_entities(
    session: Session,
    ns: str,
    source_id: str,
    target_id: str,
    relation: str,
    context: str | None = None,
    valid_from: datetime | None = None,
    evidence: list[str] | None = None,
    valid_to: datetime | None = None,
) -> bool:
    """One live edge per (source, target, relation); True when this call wrote it. Writers of
    one triple take turns, so two processes never write it twice. A memory stating a
    relation that exists joins its evidence (a purge of one of them leaves it standing).
    `valid_to`: a relation known to have ended then, written closed beside any live edge of
    the triple (an episode older than the one that denied it, or than the live edge)."""
    take_turns(session, ns, source_id, target_id, relation)
    live = (
        Edge.namespace == ns,
        Edge.source_id == source_id,
        Edge.target_id == target_id,
        Edge.relation == relation,
        Edge.valid_to.is_(None),
    )
    exists = session.scalar(select(func.count()).where(*live))
    if exists and valid_to is None:
        if evidence:
            session.execute(
                _MORE_EVIDENCE,
                {"ns": ns, "s": source_id, "t": target_id, "r": relation, "ev": evidence},
            )
        return False
    edge = Edge(
        namespace=ns,
        source_kind="entity",
        source_id=source_id,
        target_kind="entity",
        target_id=target_id,
        relation=relation,
        context=context,
        evidence_chunk_ids=evidence or [],
    )
    if valid_from is not None:
        edge.valid_from = valid_from
    if valid_to is not None:
        edge.valid_to, edge.expired_at = valid_to, clock(session)
    session.add(edge)
    session.flush()
    return True


def _require(session: Session, ns: str, names: list[str]) -> dict[str, Entity]:
    found = {e.name: e for e in live_entities(session, ns, names, lock="share")}
    for name in names:
        if name not in found:
            raise NotFound(f"Entity with name {name} not found")
    return found


def create_relations(session: Session, params: CreateRelationsIn) -> RelationsOut:
    """New (from, to, relationType) triples only; both entities must exist."""
    ns = graph_namespace(params)
    graph_exists(session, params)  # else its entities are not found
    tenancy.require_write(ns)
    namespaces.share(session, [ns])  # after any import of the namespace (it takes no turns)
    entities = _require(session, ns, [n for r in params.relations for n in (r.from_, r.to)])
    created: list[RelationOut] = []
    for r in params.relations:
        if relate_entities(session, ns, entities[r.from_].id, entities[r.to].id, r.relationType):
            created.append(
                RelationOut(**{"from": r.from_, "to": r.to}, relationType=r.relationType)
            )
    _record(session, ns, "create_relations", len(created))
    return RelationsOut(relations=created)


def _all_contents(items: list[ObservationsIn]) -> list[str]:
    return [c for o in items for c in o.contents]


@before_transaction(lambda p: embed_observations(_all_contents(p.observations)))
def add_observations(
    session: Session, params: AddObservationsIn, prepared: Vectors | None = None
) -> ObservationsOut:
    ns = graph_namespace(params)
    vectors = prepared or embed_observations(_all_contents(params.observations))
    graph_exists(session, params)  # else its entities are not found
    tenancy.require_write(ns)
    namespaces.share(session, [ns])  # after any import of the namespace (it takes no turns)
    entities = _require(session, ns, [o.entityName for o in params.observations])
    wanted = [(entities[o.entityName].id, o.entityName, o.contents) for o in params.observations]
    aged: set[str] = set()
    added = observation_links.link(session, ns, wanted, vectors, aged)
    results = [
        AddedObservations(entityName=o.entityName, addedObservations=new)
        for o, new in zip(params.observations, added, strict=True)
    ]
    _record(session, ns, "add_observations", sum(len(r.addedObservations) for r in results))
    flagged = flag((r.entityName, r.addedObservations) for r in results)
    back = revived(session, ns, aged, "add_observations")
    return ObservationsOut(results=results, warnings=flagged, revived=back)


def extracted_twins(
    session: Session,
    ns: str,
    names: list[str],
    lock: Literal["share", "update"] | None = None,
) -> list[Entity]:
    """The extractor's live entities (`concept#…`, memsys.services.mentions: episodes and
    memories) of these names: what a reader sees as the same entity as the memory server's
    one of the name — its key, and its name but for case (the key drops punctuation:
    `err#boom` is not "Err Boom")."""
    keys = {extraction.key_for(n) for n in names}
    stmt = select(Entity).where(
        Entity.namespace == ns,
        Entity.valid_to.is_(None),
        Entity.key.in_(keys),
        func.lower(Entity.name).in_({n.lower() for n in names}),
    )
    if lock is not None:  # in key order, as mentions.upsert holds them: no deadlock
        stmt = stmt.with_for_update(read=lock == "share").order_by(Entity.key)
    return list(session.scalars(stmt.order_by(Entity.created_at, Entity.id)))


def _twin_ids(twins: list[Entity], name: str) -> list[str]:
    """The ids among extracted_twins' entities that are the twin of `name`."""
    key = extraction.key_for(name)
    return [t.id for t in twins if t.key == key and t.name.lower() == name.lower()]


def delete_entities(session: Session, params: DeleteEntitiesIn) -> DoneOut:
    """Close the entities — the memory server's of each name and the extractor's of it —,
    their observations, every relation touching them and their versioned facts with what
    hangs on those (unknown names are ignored, as server-memory does). The memories that
    mention a name keep their mention edges: what a text says is not the graph's to undo,
    and it marks them as naming something deleted (memsys eval's staleness)."""
    ns = graph_namespace(params)
    if not graph_exists(session, params):
        return DoneOut(success=True, message="Entities deleted successfully")
    tenancy.require_write(ns)
    namespaces.share(session, [ns])  # after any import of the namespace
    entities = live_entities(session, ns, params.entityNames, lock="update")
    entities += extracted_twins(session, ns, params.entityNames, lock="update")
    ids_ = [e.id for e in entities]
    at = clock(session)  # one time for the entities and all they close (as_of reads agree)
    _close_observations(session, ns, observation_edges(session, ns, ids_), at)
    facts = session.scalars(
        update(Fact)
        .where(Fact.namespace == ns, Fact.entity_id.in_(ids_), Fact.valid_to.is_(None))
        .values(valid_to=at)
        .returning(Fact.id)
    ).all()
    ends = [*ids_, *facts]
    session.execute(
        update(Edge)
        .where(
            Edge.namespace == ns,
            Edge.valid_to.is_(None),
            or_(Edge.source_id.in_(ends), Edge.target_id.in_(ends)),
            ~((Edge.source_kind == "chunk") & (Edge.relation == MENTIONS)),
        )
        .values(valid_to=at, expired_at=at)
    )
    for entity in entities:
        entity.valid_to = at
    session.flush()
    _record(session, ns, "delete_entities", len(entities))
    return DoneOut(success=True, message="Entities deleted successfully")


def delete_observations(session: Session, params: DeleteObservationsIn) -> DoneOut:
    ns = graph_namespace(params)
    if not graph_exists(session, params):
        return DoneOut(success=True, message="Observations deleted successfully")
    tenancy.require_write(ns)
    namespaces.share(session, [ns])  # after any import of the namespace
    entities = {
        e.name: e for e in live_entities(session, ns, [d.entityName for d in params.deletions])
    }
    doomed = []
    for d in params.deletions:
        entity = entities.get(d.entityName)
        if entity is not None:
            wanted = set(d.observations)
            doomed += [
                r for r in observation_edges(session, ns, [entity.id]) if r.content in wanted
            ]
    _close_observations(session, ns, doomed)
    _record(session, ns, "delete_observations", len(doomed))
    return DoneOut(success=True, message="Observations deleted successfully")


def delete_relations(session: Session, params: DeleteRelationsIn) -> DoneOut:
    """Close each named relation (history kept, as every graph delete): the memory server's
    edge of the triple and the one an episode or a memory stated between the extractor's
    entities of the same names (`extracted_twins`) — the S002 reads show those two as one
    relation, so deleting only the first left it listed. A later episode stating it again
    writes it again."""
    ns = graph_namespace(params)
    if not graph_exists(session, params):
        return DoneOut(success=True, message="Relations deleted successfully")
    tenancy.require_write(ns)
    namespaces.share(session, [ns])  # after any import of the namespace
    names = [n for r in params.relations for n in (r.from_, r.to)]
    ours = {e.name: e.id for e in live_entities(session, ns, names)}
    theirs = extracted_twins(session, ns, names)
    triples = []
    for r in params.relations:
        pairs = [(ours[r.from_], ours[r.to])] if r.from_ in ours and r.to in ours else []
        pairs += [(s, t) for s in _twin_ids(theirs, r.from_) for t in _twin_ids(theirs, r.to)]
        triples += [(s, t, r.relationType) for s, t in pairs]
    take_turns_all(session, [(ns, *t) for t in triples])  # as relate_entities, episodes
    at = clock(session)  # once the turns are held: after what a writer of one committed
    closed = 0
    for source, target, relation in triples:
        closed += rowcount(
            session,
            update(Edge)
            .where(
                Edge.namespace == ns,
                Edge.source_kind == "entity",
                Edge.source_id == source,
                Edge.target_kind == "entity",
                Edge.target_id == target,
                Edge.relation == relation,
                Edge.valid_to.is_(None),
            )
            .values(valid_to=at, expired_at=at),
        )
    _record(session, ns, "delete_relations", closed)
    return DoneOut(success=True, message="Relations deleted successfully")
