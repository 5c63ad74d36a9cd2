"""Import of the official memory server's JSONL in one transaction: its entities (with their
observations, embedded before the transaction opens), then its relations. Names and triples
already present are kept as they are, so importing a file twice changes nothing."""

from __future__ import annotations

from sqlalchemy.orm import Session

from memsys import tenancy
from memsys.db import writing_alone
from memsys.runner import before_transaction
from memsys.schemas.graph import EntitiesOut, RelationsOut
from memsys.schemas.graph_jsonl import GraphImportIn
from memsys.services import knowledge, namespaces


def _texts(params: GraphImportIn) -> list[str]:
    return [o for call in params.entities for e in call.entities for o in e.observations]


@before_transaction(lambda p: knowledge.embed_texts(_texts(p)))
def import_graph(
    session: Session, params: GraphImportIn, prepared: knowledge.Vectors | None = None
) -> tuple[EntitiesOut, RelationsOut]:
    """Every entity, then every relation, as create_entities / create_relations calls of at
    most 1,000 items each, all in this one transaction. It writes alone in its namespace, as
    memory_import does (other writers there wait for it at their start, up to
    MEMSYS_BUSY_WAIT_S): one lock for the whole import, not one per entity, observation and
    relation held to its commit, which ran out of the lock table at a few thousand rows."""
    vectors = prepared if prepared is not None else knowledge.embed_texts(_texts(params))
    written = sorted({knowledge.graph_namespace(c) for c in [*params.entities, *params.relations]})
    for ns in written:
        tenancy.require_write(ns)
    namespaces.write_alone(session, written)
    writing_alone(session, written)
    made = EntitiesOut(entities=[])
    for entities in params.entities:
        out = knowledge.create_entities(session, entities, prepared=vectors)
        made.entities += out.entities
        made.warnings += out.warnings
        made.revived += out.revived
    linked = RelationsOut(relations=[])
    for relations in params.relations:
        linked.relations += knowledge.create_relations(session, relations).relations
    return made, linked


def summary(made: EntitiesOut, linked: RelationsOut) -> dict[str, int | list[str]]:
    """What an import answers (REST, the CLI): counts, and its secret warnings and the aged
    memories it made active again (their ids), if any."""
    answer: dict[str, int | list[str]] = {
        "entities_created": len(made.entities),
        "relations_created": len(linked.relations),
    }
    if made.warnings:
        answer["warnings"] = made.warnings
    if made.revived:
        answer["revived"] = sorted(made.revived)
    return answer
