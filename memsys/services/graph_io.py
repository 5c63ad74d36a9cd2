"""Import of the official memory server's JSONL in one transaction: its entities (with their
observations, embedded before the transaction opens), then its relations. Names and triples
already present are kept as they are, so importing a file twice changes nothing."""

from __future__ import annotations

from sqlalchemy.orm import Session

from memsys.runner import before_transaction
from memsys.schemas.graph import EntitiesOut, RelationsOut
from memsys.schemas.graph_jsonl import GraphImportIn
from memsys.services import knowledge


def _texts(params: GraphImportIn) -> list[str]:
    return [
        o for e in (params.entities.entities if params.entities else []) for o in e.observations
    ]


@before_transaction(lambda p: knowledge.embed_texts(_texts(p)))
def import_graph(
    session: Session, params: GraphImportIn, prepared: knowledge.Vectors | None = None
) -> tuple[EntitiesOut, RelationsOut]:
    vectors = prepared if prepared is not None else knowledge.embed_texts(_texts(params))
    made = EntitiesOut(entities=[])
    if params.entities is not None:
        made = knowledge.create_entities(session, params.entities, prepared=vectors)
    linked = RelationsOut(relations=[])
    if params.relations is not None:
        linked = knowledge.create_relations(session, params.relations)
    return made, linked
