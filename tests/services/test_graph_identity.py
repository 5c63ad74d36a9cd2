"""Which entity a name means, and what a delete takes with it: names are read composed (NFC);
the memory server's `kg#` entity and the extractor's `concept#` one of a name are one entity
to a reader and to delete_entities; a delete closes everything hanging on what it closes; an
empty group_ids searches nowhere; deletes are not refused by S000's vocabulary gates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update

from memsys import ids, runner
from memsys.db import session_scope
from memsys.models import Chunk, Edge, Entity
from memsys.schemas.graph import GraphOut
from memsys.schemas.graph_jsonl import parse_jsonl, render_jsonl
from memsys.services import graph_io, observation_links
from tests.services.test_edges import fails, op

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


def live_edges(**where: str) -> list[Edge]:
    with session_scope() as s:
        stmt = select(Edge).where(Edge.valid_to.is_(None))
        for column, value in where.items():
            stmt = stmt.where(getattr(Edge, column) == value)
        return list(s.scalars(stmt.order_by(Edge.id)).all())


def test_deleting_a_name_deletes_the_extractors_entity_of_it_too(embedder: Any) -> None:
    op("add_episode", content="Alice Smith works with Bob Jones on the Atlas project.")
    op("create_entities", entities=[{"name": "Alice Smith", "entityType": "person"}])
    found = op("search_entities", query="Alice Smith", num_results=10)["entities"]
    assert "Alice Smith" in [e["name"] for e in found]
    op("delete_entities", entityNames=["Alice Smith"])
    assert live_entities("Alice Smith") == []
    found = op("search_entities", query="Alice Smith", num_results=10)["entities"]
    assert "Alice Smith" not in [e["name"] for e in found]
    walk = op("query_graph", query="Alice Smith", depth=2, max_results=10)
    assert "Alice Smith" not in walk["scope"]
    assert not any("Alice Smith" in link for link in walk["links"])
    # the episode's memory still says it: its mention edge stays (staleness reads it)
    assert [e.relation for e in live_edges(source_kind="chunk")].count("mentions") >= 3
    # said again, the name is back
    op("add_episode", content="Alice Smith joined the Atlas project again.")
    assert [e.key for e in live_entities("Alice Smith")] == ["concept#alice smith"]


def test_deleting_an_entity_closes_the_edges_of_its_facts(embedder: Any) -> None:
    op("fact_set", entity="Atlas", attribute="owner", content="Alice")
    op("fact_set", entity="Atlas", attribute="owner", content="Bob")  # supersedes → v1
    assert [e.relation for e in live_edges(source_kind="fact")] == ["supersedes"]
    op("delete_entities", entityNames=["Atlas"])
    assert live_edges(source_kind="fact") == [] and live_edges(target_kind="fact") == []


def test_an_empty_group_ids_searches_no_namespace(embedder: Any) -> None:
    """S002's group_ids is an optional filter: left out, the graph namespace is searched; an
    empty list filters every namespace out (it read the default one)."""
    op("add_episode", content="auth.ts depends on token.ts.")
    assert op("search_entities", query="auth.ts")["entities"]
    assert op("search_entities", query="auth.ts", group_ids=[]) == {"entities": []}
    assert op("search_edges", query="auth.ts")["edges"]
    assert op("search_edges", query="auth.ts", group_ids=[]) == {"edges": []}


def test_deletes_are_not_refused_by_the_vocabulary(embedder: Any) -> None:
    """S000's gates (registry relations and type pairs between keyed entities, envelope
    types) guard what is written; rows written before a gate (or before the vocabulary
    changed) could not be deleted, the delete being refused as if it wrote them."""
    keyed = [
        {"name": "err#boom", "entityType": "error"},
        {"name": "dep#left-pad", "entityType": "dependency"},
        {"name": "fix#boom#0123abcd", "entityType": "fix"},
    ]
    op("create_entities", entities=keyed)
    legacy = '{"type":"legacy.note","text":"kept from an old version"}'
    with session_scope() as s:
        ids = {e.name: e.id for e in s.scalars(select(Entity))}
        for source, target, relation in [
            ("err#boom", "dep#left-pad", "blames"),  # not in the registry
            ("err#boom", "fix#boom#0123abcd", "resolves"),  # the pair reversed
        ]:
            s.add(Edge(namespace="global", source_kind="entity", source_id=ids[source],
                       target_kind="entity", target_id=ids[target], relation=relation))  # fmt: skip
        observation_links.link(s, "global", [(ids["err#boom"], "err#boom", [legacy])], {})
    op("create_relations", relations=[
        {"from": "err#boom", "to": "dep#left-pad", "relationType": "caused_by"}
    ])  # fmt: skip
    assert len(op("read_graph")["relations"]) == 3
    op("delete_relations", relations=[
        {"from": "err#boom", "to": "dep#left-pad", "relationType": "blames"},
        {"from": "err#boom", "to": "fix#boom#0123abcd", "relationType": "resolves"},
        {"from": "err#boom", "to": "dep#left-pad", "relationType": "CAUSED_BY"},
    ])  # fmt: skip
    assert op("read_graph")["relations"] == []
    op("delete_observations", deletions=[{"entityName": "err#boom", "observations": [legacy]}])
    assert op("open_nodes", names=["err#boom"])["entities"][0]["observations"] == []


def test_one_name_is_one_entity_to_the_s002_reads(embedder: Any) -> None:
    """The extractor's entity of a name and create_entities' one were listed side by side
    (two "Alice Smith", one `concept`, one `person`), each with half of what is known."""
    op("add_episode", content="Alice Smith depends on Bob Jones for the Atlas release.")
    op("create_entities", entities=[{"name": "Alice Smith", "entityType": "person"}])
    op("create_entities", entities=[{"name": "Carol", "entityType": "person"}])
    op("create_relations", relations=[
        {"from": "Alice Smith", "to": "Carol", "relationType": "manages"}
    ])  # fmt: skip
    [person] = [e for e in live_entities("Alice Smith") if e.key.startswith("kg#")]
    walk = op("query_graph", query="Alice Smith", depth=1, max_results=10)
    assert walk["scope"].count("Alice Smith") == 1
    [alice] = [e for e in walk["entities"] if e["name"] == "Alice Smith"]
    assert (alice["uuid"], alice["entity_type"]) == (person.id, "person")
    assert {"Alice Smith→Bob Jones", "Alice Smith→Carol"} <= set(walk["links"])
    ends = {(e["source_node_uuid"], e["target_name"]) for e in walk["edges"]}
    assert {(person.id, "Bob Jones"), (person.id, "Carol")} <= ends
    found = op("search_entities", query="Alice Smith", num_results=10)["entities"]
    assert [e["uuid"] for e in found if e["name"] == "Alice Smith"] == [person.id]
    edges = op("search_edges", query="Alice Smith", num_results=10)["edges"]
    assert {(e["source_node_uuid"], e["target_name"]) for e in edges} >= {
        (person.id, "Bob Jones"), (person.id, "Carol")
    }  # fmt: skip
    context = op("build_context", entity_names=["Alice Smith"])
    assert [e["uuid"] for e in context["entities"] if e["name"] == "Alice Smith"] == [person.id]
    assert {f["object"] for f in context["facts"] if f["kind"] == "edge"} >= {"Bob Jones", "Carol"}


def test_a_query_about_nothing_stored_finds_no_node(embedder: Any) -> None:
    op("create_entities", entities=[
        {"name": "Alice", "entityType": "person", "observations": ["likes green tea"]},
        {"name": "Bob", "entityType": "person", "observations": ["plays the guitar in a band"]},
    ])  # fmt: skip
    assert op("search_nodes", query="xqzv blorptangle") == {"entities": [], "relations": []}
    assert op("search_entities", query="quantum chromodynamics lattice")["entities"] == []
    # a paraphrase with no word in common still finds its entity
    assert [e["name"] for e in op("search_nodes", query="hot beverage")["entities"]] == ["Alice"]
    assert [e["name"] for e in op("search_nodes", query="musician")["entities"]] == ["Bob"]


def test_words_that_open_a_sentence_are_not_entities(embedder: Any) -> None:
    """Discourse and time words capitalised only because they open a sentence ("However",
    "Yesterday") became entities of every episode, related_to each other."""
    from memsys import extraction

    text = (
        "However, Yesterday the deploy failed. Meanwhile Alice Smith fixed Atlas. "
        "Unfortunately, Tomorrow is a holiday. Today Bob Jones reviews it."
    )
    assert [m.name for m in extraction.extract(text)] == ["Alice Smith", "Atlas", "Bob Jones"]
    indefinite = "Something broke. Nobody saw it. Everyone blamed Atlas."
    assert [m.name for m in extraction.extract(indefinite)] == ["Atlas"]
    out = op("add_episode", content="However, Yesterday nothing happened to Atlas.")
    assert out["entities"] == ["Atlas"] and out["relations"] == []


def test_a_name_is_only_the_twin_of_the_same_name(embedder: Any) -> None:
    """The extractor's key drops punctuation: deleting the S000 entity `err#boom` closed the
    extractor's "Err Boom" (key concept#err boom) as if it were the same name."""
    op("create_entities", entities=[{"name": "err#boom", "entityType": "error"}])
    op("add_episode", content="The Err Boom dashboard depends on Grafana.")
    op("delete_entities", entityNames=["err#boom"])
    assert [e.key for e in live_entities("Err Boom")] == ["concept#err boom"]


def test_the_s002_reads_of_a_fresh_install_find_nothing(embedder: Any) -> None:
    """Before anything is written, the default graph namespace does not exist: the memory
    server's reads answer an empty graph, but search_entities, search_edges and query_graph
    failed with 'Namespace not found: global'. A namespace the call names must still exist."""
    assert op("search_entities", query="auth.ts") == {"entities": []}
    assert op("search_edges", query="auth.ts") == {"edges": []}
    assert op("query_graph", query="auth.ts")["entities"] == []
    assert "Entity with name auth.ts not found" in fails("build_context", entity_names=["auth.ts"])
    assert "Namespace not found: elsewhere" in fails(
        "search_entities", query="auth.ts", group_ids=["elsewhere"]
    )
    assert "Namespace not found: elsewhere" in fails(
        "query_graph", query="auth.ts", namespace="elsewhere"
    )


def test_an_observation_of_combining_marks_only_stored_before_can_be_deleted_and_moved(
    embedder: Any,
) -> None:
    """Text of combining marks only ("\u0301") is refused as content now, and the rule was
    applied to deletes too: an observation stored before it could never be deleted by its
    text, nor the server's own export imported again."""
    op("create_entities", entities=[{"name": "Legacy", "entityType": "note"}])
    with session_scope() as s:
        entity = s.scalars(select(Entity).where(Entity.name == "Legacy")).one()
        observation_links.link(s, "global", [(entity.id, "Legacy", ["placeholder"])], {})
        s.execute(  # as an older memsys stored it
            update(Chunk)
            .where(Chunk.content == "placeholder")
            .values(content="\u0301", content_hash=ids.content_hash("\u0301"))
        )
    assert op("open_nodes", names=["Legacy"])["entities"][0]["observations"] == ["\u0301"]
    exported = render_jsonl(GraphOut.model_validate(op("read_graph")))
    runner.run(graph_io.import_graph, parse_jsonl(exported, "copy"))
    copied = op("open_nodes", names=["Legacy"], namespace="copy")["entities"]
    assert copied[0]["observations"] == ["\u0301"]
    op("delete_observations", deletions=[{"entityName": "Legacy", "observations": ["\u0301"]}])
    assert op("open_nodes", names=["Legacy"])["entities"][0]["observations"] == []
    assert "no visible character" in fails(
        "add_observations", observations=[{"entityName": "Legacy", "contents": ["\u0301"]}]
    )


def stated(query: str, **args: Any) -> list[tuple[str, str, str]]:
    edges = op("search_edges", query=query, num_results=20, **args)["edges"]
    return [(e["source_name"], e["target_name"], e["relation_type"]) for e in edges]


def test_delete_relations_closes_the_relation_an_episode_stated_too(embedder: Any) -> None:
    """delete_relations closed only create_relations' edge: the same relation stated by an
    episode stayed live, and search_edges / query_graph kept showing it after the delete."""
    op("add_episode", content="auth.ts depends on token.ts.")
    op("add_episode", content="Alice Smith depends on Bob Jones.")  # an episode alone
    op("create_entities", entities=[
        {"name": "auth.ts", "entityType": "file"}, {"name": "token.ts", "entityType": "file"}
    ])  # fmt: skip
    triple = {"from": "auth.ts", "to": "token.ts", "relationType": "depends_on"}
    op("create_relations", relations=[triple])
    assert set(stated("auth.ts")) == {("auth.ts", "token.ts", "depends_on")}
    before = datetime.now(UTC)
    op("delete_relations", relations=[
        triple, {"from": "Alice Smith", "to": "Bob Jones", "relationType": "depends_on"}
    ])  # fmt: skip
    assert op("read_graph")["relations"] == []
    assert stated("auth.ts") == [] and stated("Alice Smith") == []
    assert op("query_graph", query="auth.ts", depth=2)["links"] == []
    assert live_edges(source_kind="entity") == []
    # closed, not gone: a read as of before the delete still has it
    was = {("auth.ts", "token.ts", "depends_on")}
    assert set(stated("auth.ts", as_of=before.isoformat())) == was
    # stated again, it is back
    op("add_episode", content="auth.ts depends on token.ts again.")
    assert set(stated("auth.ts")) == was


def test_a_relation_stated_by_an_episode_and_by_create_relations_is_listed_once(
    embedder: Any,
) -> None:
    """The extractor's entity of a name is read as the memory server's one; the relation each
    of them holds was then listed twice by search_edges, query_graph and build_context."""
    op("add_episode", content="Alice Smith depends on Bob Jones.")
    op("create_entities", entities=[
        {"name": "Alice Smith", "entityType": "person"},
        {"name": "Bob Jones", "entityType": "person"},
    ])  # fmt: skip
    triple = {"from": "Alice Smith", "to": "Bob Jones", "relationType": "depends_on"}
    op("create_relations", relations=[triple])
    assert op("read_graph")["relations"] == [triple]
    assert op("open_nodes", names=["Alice Smith"])["relations"] == [triple]
    assert stated("Alice Smith") == [("Alice Smith", "Bob Jones", "depends_on")]
    [edge] = op("search_edges", query="Alice Smith")["edges"]
    assert edge["fact"] == "Alice Smith depends on Bob Jones."  # the episode's, which says most
    walk = op("query_graph", query="Alice Smith", depth=1)
    assert walk["links"] == ["Alice Smith→Bob Jones"]
    context = op("build_context", entity_names=["Alice Smith"])
    assert [f["fact"] for f in context["facts"]] == ["Alice Smith depends on Bob Jones."]


def test_a_name_with_unseen_characters_is_the_name_without_them(embedder: Any) -> None:
    """A no-break space, a zero-width space or a BOM in a name made another entity, though
    memory dedup reads those differences away (ids.as_read): pasted names named a twin."""
    op("create_entities", entities=[{"name": "Alice\u00a0Smith", "entityType": "person"}])
    for name in ("Alice Smith", "Ali\u200bce Smith", "\ufeffAlice Smith", "Alice\u2060 Smith"):
        assert op("create_entities", entities=[{"name": name, "entityType": "x"}]) == {
            "entities": []
        }  # already there
    assert [e["name"] for e in op("read_graph")["entities"]] == ["Alice Smith"]
    op("add_observations", observations=[{"entityName": "Ali\u200bce Smith", "contents": ["x1"]}])
    opened = op("open_nodes", names=["Alice\u00a0Smith"])["entities"]
    assert [(e["name"], e["observations"]) for e in opened] == [("Alice Smith", ["x1"])]
    # the extractor reads a name as written with them as the same name
    out = op("add_episode", content="Ali\u200bce\u00a0Smith depends on Bob\ufeff Jones.")
    assert out["entities"] == ["Alice Smith", "Bob Jones"]
    assert stated("Alice Smith") == [("Alice Smith", "Bob Jones", "depends_on")]
    op("delete_entities", entityNames=["Alice\u00a0Smith"])
    assert op("read_graph")["entities"] == [] and live_entities("Alice Smith") == []
