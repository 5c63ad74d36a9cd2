"""memory_relate joins any two nodes of one namespace (issue 10 §3: memory, entity, fact, chunk,
episode), typed from the registry, weighted, with context text; memory_edge_forget closes such
an edge and leaves memsys's own links (observations, mentions) alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from memsys.db import session_scope
from memsys.models import Chunk, Edge, Entity
from tests.cli.helpers import run
from tests.factories import index, store
from tests.services.test_edges import fails, op


def edge(edge_id: int) -> Edge:
    with session_scope() as s:
        return s.scalars(select(Edge).where(Edge.id == edge_id)).one()


def entity_id(name: str) -> str:
    found = op("search_entities", query=name, num_results=1)["entities"]
    assert found[0]["name"] == name
    return str(found[0]["uuid"])


def redis_nodes() -> tuple[str, str, dict[str, Any], str]:
    """A decision memory, the Redis entity the memory and the episode name (the extractor's:
    the S002 reads show create_entities' one of the name in its place), a fact about it and
    an episode naming it."""
    memory = store("We chose Redis for the session cache", memory_type="decision").id
    op("create_entities", entities=[{"name": "Redis", "entityType": "database",
                                     "observations": ["An in-memory store"]}])  # fmt: skip
    with session_scope() as s:
        redis = s.scalars(select(Entity.id).where(Entity.key == "concept#redis")).one()
    fact = op("fact_set", entity="Redis", attribute="version", content="Redis 7.2")["fact"]
    episode = op("add_episode", content="The SessionStore depends on Redis.")["episode_id"]
    return memory, redis, fact, episode


def test_edges_between_kinds_with_context(embedder: Any, tmp_path: Path) -> None:
    memory, redis, fact, episode = redis_nodes()
    doc = tmp_path / "cache.md"
    doc.write_text("# Cache\n\nSessions live in Redis with a one hour TTL.\n")
    index(doc, namespace="global")
    with session_scope() as s:
        chunk = s.scalars(select(Chunk.id).where(Chunk.doc_type != "memory")).first()
    assert chunk is not None

    why = "the decision names the database it chose"
    made = op("memory_relate", source_id=memory, target_id=redis, target_kind="entity",
              relation="depends_on", weight=2.5, context=why)  # fmt: skip
    assert made["created"] is True
    row = edge(made["edge_id"])
    assert (row.source_kind, row.target_kind, row.context, row.weight) == (
        "chunk", "entity", why, 2.5
    )  # fmt: skip
    again = op("memory_relate", source_id=memory, target_id=redis, target_kind="entity",
               relation="DEPENDS-ON")  # fmt: skip
    assert again == {"edge_id": made["edge_id"], "created": False}
    touching = {made["edge_id"]}
    for kind, node, target_kind, target in [
        ("entity", redis, "fact", fact["fact_id"]),
        ("episode", episode, "memory", memory),
        ("chunk", chunk, "entity", redis),
    ]:
        out = op("memory_relate", source_kind=kind, source_id=node, target_kind=target_kind,
                 target_id=target, relation="relates_to")  # fmt: skip
        assert out["created"] is True
        assert edge(out["edge_id"]).source_kind == ("chunk" if kind == "memory" else kind)
        if redis in (node, target):
            touching.add(out["edge_id"])

    # forgetting every edge of the entity closes those relate wrote and the episode's
    # SessionStore → Redis, not memsys's own observation link
    forgot = op("memory_edge_forget", memory_id=redis)
    assert len(touching) == 3 and touching < set(forgot["deleted_ids"])
    assert forgot["deleted_count"] == 4
    assert op("open_nodes", names=["Redis"])["entities"][0]["observations"] == [
        "An in-memory store"
    ]
    assert edge(made["edge_id"]).valid_to is not None


def test_bad_nodes_are_refused_and_write_nothing(embedder: Any) -> None:
    memory = store("The cache is Redis").id
    other = store("The queue is RabbitMQ", namespace="project:x").id
    assert "A memory cannot be related to itself" in fails(
        "memory_relate", source_id=memory, target_id=memory, relation="relates_to"
    )
    assert "Entity not found: " + other in fails(
        "memory_relate", source_id=memory, target_id=other, target_kind="entity",
        relation="relates_to")  # fmt: skip
    assert "Fact not found: fact_nope" in fails(
        "memory_relate", source_id=memory, target_id="fact_nope", target_kind="fact",
        relation="relates_to")  # fmt: skip
    assert "an edge stays within one namespace" in fails(
        "memory_relate", source_id=memory, target_id=other, relation="relates_to"
    )
    assert "source_kind" in fails(
        "memory_relate", source_id=memory, target_id=other, source_kind="table",
        relation="relates_to")  # fmt: skip
    assert "context is at most 2000 characters" in fails(
        "memory_relate", source_id=memory, target_id=other, relation="relates_to",
        context="x" * 2001)  # fmt: skip


def test_inspect_walks_edges_to_every_kind_of_node(embedder: Any) -> None:
    memory, redis, fact, episode = redis_nodes()
    op("memory_relate", source_id=memory, target_id=redis, target_kind="entity",
       relation="depends_on")  # fmt: skip
    op("memory_relate", source_kind="entity", source_id=redis, target_kind="fact",
       target_id=fact["fact_id"], relation="relates_to")  # fmt: skip
    op("memory_relate", source_kind="episode", source_id=episode, target_id=memory,
       relation="relates_to")  # fmt: skip

    seen = op("memory_inspect_graph", memory_id=memory, max_depth=2, output_format="mermaid")
    nodes = {n["id"]: (n["kind"], n["content"], n["depth"]) for n in seen["nodes"]}
    assert nodes == {
        memory: ("memory", "We chose Redis for the session cache", 0),
        redis: ("entity", "Redis", 1),
        episode: ("episode", "The SessionStore depends on Redis.", 1),
        fact["fact_id"]: ("fact", "Redis 7.2", 2),
        entity_id("SessionStore"): ("entity", "SessionStore", 2),  # the episode's relation
    }
    assert [memory, redis, fact["fact_id"]] in [p["path"] for p in seen["paths"]]
    assert '["Redis 7.2"]' in seen["mermaid"]
    assert seen["stats"]["total_edges"] == 4  # memsys's own mention links are not walked
    shown = run("inspect", memory, "--max-depth", "2").stdout  # the CLI names each kind
    assert f"{redis}  relevance 0.700  [entity]  Redis" in shown  # decay .7 a hop

    op("memory_edge_forget", memory_id=redis)  # the entity's edges closed: it drops out
    after = op("memory_inspect_graph", memory_id=memory, max_depth=2)
    assert {n["id"] for n in after["nodes"]} == {memory, episode}
