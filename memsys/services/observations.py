"""memory_observe: file an S000 observation envelope under the entity its stable key names
(created on first sight), and link it to other keyed entities with registry relations.

Exactly-once equivalence (S000 "Concurrency"): the entity is upserted by its key (the unique
index on live keys) and observation and relation writers of one entity take turns, so the same
envelope sent twice, or by two processes at once, leaves one entity, one observation, one edge.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from memsys import keys, secretscan
from memsys.runner import before_transaction
from memsys.schemas.observations import canonical_text, parse_envelope, stable_key
from memsys.schemas.observe import MemoryObserveIn, MemoryObserveOut
from memsys.services import events, knowledge, namespaces


def _text(params: MemoryObserveIn) -> str:
    return canonical_text(parse_envelope(params.envelope, "envelope"))


@before_transaction(lambda p: knowledge.embed_texts([_text(p)]))
def observe(
    session: Session, params: MemoryObserveIn, prepared: knowledge.Vectors | None = None
) -> MemoryObserveOut:
    """Upsert the entity by its key, add the envelope as an observation, write the links."""
    ns = knowledge.graph_namespace(params)
    envelope = parse_envelope(params.envelope, "envelope")
    key, kind = stable_key(envelope)
    text = canonical_text(envelope)
    vectors = prepared or knowledge.embed_texts([text])
    namespaces.ensure(session, ns)
    entity, created = knowledge.upsert_entity(session, ns, key, kind)
    added = knowledge.add_to(session, ns, entity, [text], vectors)
    linked = 0
    for link in params.links:
        target_type = keys.type_of(link.target)
        assert target_type is not None
        target, _ = knowledge.upsert_entity(session, ns, link.target, target_type)
        linked += knowledge.relate_entities(session, ns, entity.id, target.id, link.relation)
    events.record(
        session,
        namespace=ns,
        event_type="edit",
        operation="memory_observe",
        subject_kind="entity",
        subject_id=entity.id,
        payload={"key": key, "type": envelope.type, "added": bool(added), "links": linked},
    )
    return MemoryObserveOut(
        entity=key,
        entityType=kind,
        namespace=ns,
        created=created,
        observation_added=bool(added),
        links_created=linked,
        warnings=secretscan.warnings(text, "the observation"),
    )
