"""Which entity a name means, and what a delete takes with it: names are read composed (NFC);
the memory server's `kg#` entity and the extractor's `concept#` one of a name are one entity
to a reader and to delete_entities; a delete closes everything hanging on what it closes; an
empty group_ids searches nowhere; deletes are not refused by S000's vocabulary gates."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from memsys.db import session_scope
from memsys.models import Entity
from tests.services.test_edges import op

DECOMPOSED, COMPOSED = "Cafe\u0301 Central", "Caf\u00e9 Central"


def live_entities(name: str) -> list[Entity]:
    with session_scope() as s:
        rows = s.scalars(select(Entity).where(Entity.name == name, Entity.valid_to.is_(None)))
        return list(rows.all())


def test_a_name_typed_decomposed_is_the_composed_one(embedder: Any) -> None:
    op("create_entities", entities=[{"name": DECOMPOSED, "entityType": "place"}])
    again = op("create_entities", entities=[{"name": COMPOSED, "entityType": "place"}])
    assert again["entities"] == []  # already there
    graph = op("read_graph")
    assert [e["name"] for e in graph["entities"]] == [COMPOSED]
    opened = op("open_nodes", names=[DECOMPOSED])["entities"]
    assert [e["name"] for e in opened] == [COMPOSED]
    op("add_observations", observations=[{"entityName": DECOMPOSED, "contents": ["Opens at 8"]}])
    op("fact_set", entity=DECOMPOSED, attribute="owner", content="Zo\u00eb")
    assert op("fact_get", entity=COMPOSED)["facts"][0]["content"] == "Zo\u00eb"
    op("create_entities", entities=[{"name": "Vienna", "entityType": "city"}])
    op("create_relations", relations=[{"from": DECOMPOSED, "to": "Vienna", "relationType": "in"}])
    assert op("read_graph")["relations"] == [
        {"from": COMPOSED, "to": "Vienna", "relationType": "in"}
    ]
    # an episode's text is composed before its names are read
    out = op("add_episode", content=f"{DECOMPOSED} uses Vienna Water.")
    assert COMPOSED in out["entities"]
    assert [e.key for e in live_entities(COMPOSED) if e.key.startswith("concept#")] == [
        "concept#caf\u00e9 central"
    ]
    op("delete_entities", entityNames=[DECOMPOSED])
    assert [e["name"] for e in op("read_graph")["entities"]] == ["Vienna"]
