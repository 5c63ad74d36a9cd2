"""The knowledge graph's writes of entities and observations, set-wise (create_entities,
add_observations, typed observations, the JSONL importer all come here).

An observation is a memory (a `fact` chunk, stored by memsys.services.memory_batch with the
rules of memory_store) linked to its entity by an `observation_of` edge. A call costs a fixed
number of statements whatever its size: the entity rows in one INSERT, the observation locks
in one statement, the observations the entities already have in one SELECT, the memories in
memory_batch's few, the edges in one INSERT. Writers to one entity still take turns (the same
advisory lock as before, one per entity, taken in sorted order), so the same observation from
two processes is linked once.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import ColumnElement, func, insert, or_, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from memsys import ids
from memsys.db import take_turns_all
from memsys.embeddings import get_embedder
from memsys.models import Chunk, Edge, Entity
from memsys.models.chunk import AGED
from memsys.schemas import MemoryStoreIn
from memsys.schemas.memories import STORED
from memsys.services import history, memory_batch

OBSERVATION_OF = "observation_of"
KEY_PREFIX = "kg#"


def entity_key(name: str) -> str:
    return KEY_PREFIX + name


def valid_at(model: Any, at: datetime | None) -> list[ColumnElement[bool]]:
    """The rows live now (`at` None), or those valid at `at`: begun by then, not closed yet."""
    if at is None:
        return [model.valid_to.is_(None)]
    return [model.valid_from <= at, or_(model.valid_to.is_(None), model.valid_to > at)]


def observations_among(session: Session, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which of these memories ((namespace, id)) hold an entity's observation now (a live
    `observation_of` edge). Lifecycle never closes one (consolidation, S002 decay): it
    belongs to its entity as written, and closing it would take it off the entity."""
    if not keys:
        return set()
    rows = session.execute(
        select(Edge.namespace, Edge.source_id)
        .where(
            tuple_(Edge.namespace, Edge.source_id).in_(keys),
            Edge.relation == OBSERVATION_OF,
            Edge.valid_to.is_(None),
        )
        .distinct()
    )
    return {(r.namespace, r.source_id) for r in rows}


class ObservationEdge(NamedTuple):
    id: int
    target_id: str  # the entity
    source_id: str  # the observation's memory
    content: str
    stage: str = "active"  # the memory's (memsys.models.chunk.STAGES)


def observation_edges(
    session: Session, ns: str, entity_ids: list[str], at: datetime | None = None
) -> list[ObservationEdge]:
    """Observation edges of the entities with their text (edge id, entity, memory): the live
    ones, or with `at` those valid then (a deleted observation is closed, not gone). The text
    is the observation as written: a memory aging cut to a summary or a key (maintenance)
    reads as its full text from its history, so the graph's reads, its deletes by text and
    the check for an observation already there never see the cut."""
    memory_open = (
        Chunk.valid_to.is_(None)
        if at is None
        else or_(Chunk.valid_to.is_(None), Chunk.valid_to > at)
    )
    rows = session.execute(
        select(Edge.id, Edge.target_id, Edge.source_id, Chunk.content, Chunk.stage)
        .join(Chunk, (Chunk.namespace == Edge.namespace) & (Chunk.id == Edge.source_id))
        .where(
            Edge.namespace == ns,
            Edge.relation == OBSERVATION_OF,
            *valid_at(Edge, at),
            Edge.target_id.in_(entity_ids),
            memory_open,
        )
        .order_by(Edge.id)
    ).all()
    aged = [(ns, r.source_id, r.content) for r in rows if r.stage in AGED]
    full = history.full_texts(session, aged) if aged else {}
    return [
        ObservationEdge(
            r.id, r.target_id, r.source_id, full.get((ns, r.source_id), r.content), r.stage
        )
        for r in rows
    ]


# created_at is each row's own clock: entities keep the order they were given in (read_graph
# lists them so). Two writers of one name converge on one row (the unique index on live keys).
_ENTITIES = (
    pg_insert(Entity)
    .values(created_at=func.clock_timestamp())
    .on_conflict_do_nothing(
        index_elements=["namespace", "key"], index_where=text("valid_to IS NULL")
    )
    .returning(Entity.id, Entity.name)
)


def create_entities(session: Session, ns: str, items: list[tuple[str, str]]) -> dict[str, str]:
    """Create (name, entity type) entities that have no live row, in one statement; name →
    id of those this call created (a name a concurrent writer created first is not among them).
    """
    if not items:
        return {}
    take_turns_all(session, [(ns, "entity", entity_key(name)) for name, _ in items])
    rows = [
        {
            "namespace": ns,
            "id": ids.new_id(ids.ENTITY),
            "key": entity_key(name),
            "name": name,
            "entity_type": entity_type,
        }
        for name, entity_type in items
    ]
    return {r.name: r.id for r in session.execute(_ENTITIES, rows)}


def link(
    session: Session,
    ns: str,
    wanted: list[tuple[str, str, list[str]]],
    vectors: dict[str, np.ndarray],
    aged: set[str] | None = None,
) -> list[list[str]]:
    """Add observations to entities: (entity id, entity name, contents) → for each, the
    contents it did not have yet (in order, each once). `vectors` maps content → embedding
    (what is missing is embedded here). `aged` gets the ids of the memories given again that
    are not active (an observation the entity has, a memory a new one deduplicates onto),
    for the caller to revive as memory_store does (knowledge.revived)."""
    entity_ids = sorted({w[0] for w in wanted})
    take_turns_all(session, [(ns, "observations", e) for e in entity_ids])
    present: dict[str, set[str]] = defaultdict(set)
    resting: dict[tuple[str, str], str] = {}  # (entity, text) → its memory, not active
    for row in observation_edges(session, ns, entity_ids):
        present[row.target_id].add(row.content)
        if row.stage != "active":
            resting[(row.target_id, row.content)] = row.source_id
    added: list[list[str]] = []
    pending: list[tuple[str, str]] = []
    memories: dict[str, MemoryStoreIn] = {}
    for entity_id, name, contents in wanted:
        if aged is not None:
            aged.update(resting[(entity_id, c)] for c in contents if (entity_id, c) in resting)
        fresh = [c for c in dict.fromkeys(contents) if c not in present[entity_id]]
        present[entity_id].update(fresh)
        pending += [(entity_id, c) for c in fresh]
        for content in fresh:
            # Checked by the input that brought it (Observation: new text, or an import's
            # as stored), so read as stored here.
            memories.setdefault(
                content,
                MemoryStoreIn.model_validate(
                    {
                        "content": content,
                        "memory_type": "fact",
                        "namespace": ns,
                        "metadata": {"entity": name},
                    },
                    context=STORED,
                ),
            )
        added.append(fresh)
    if not pending:
        return added
    missing = [c for c in memories if c not in vectors]
    if missing:
        vectors = {**vectors, **dict(zip(missing, get_embedder().embed(missing), strict=True))}
    stored = memory_batch.store_many(
        session, list(memories.values()), [vectors[c] for c in memories], aged
    )
    memory_of = {c: r.id for c, r in zip(memories, stored, strict=True)}
    session.execute(
        insert(Edge),
        [
            {
                "namespace": ns,
                "source_kind": "chunk",
                "source_id": memory_of[content],
                "target_kind": "entity",
                "target_id": entity_id,
                "relation": OBSERVATION_OF,
            }
            for entity_id, content in pending
        ],
    )
    return added
