"""S002's temporal graph: episodes and their extraction, search_entities, search_edges,
query_graph, build_context, as-of reads of edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from memsys.db import session_scope
from memsys.models import Edge, Entity, Episode
from tests.services.test_edges import fails, op

AUTH = "The auth.ts file depends on token.ts for JWT refresh handling."
LAST_WEEK = (datetime.now(UTC) - timedelta(days=7)).isoformat()


@pytest.fixture
def episodes(embedder: Any) -> dict[str, Any]:
    first = op("add_episode", content=AUTH, source_description="Code review session",
               reference_time=LAST_WEEK)  # fmt: skip
    second = op("add_episode", content="The SessionStore is part of Redis. "
                "token.ts uses session.py to persist refresh tokens.")  # fmt: skip
    return {"first": first, "second": second}


def test_an_episode_extracts_entities_and_relations(episodes: dict[str, Any]) -> None:
    first = episodes["first"]
    assert first["episode_id"].startswith("ep_") and first["memory_id"].startswith("mem_")
    assert {"auth.ts", "token.ts", "JWT"} <= set(first["entities"])
    assert {"source": "auth.ts", "target": "token.ts", "relation_type": "depends_on",
            "fact": AUTH} in first["relations"]  # fmt: skip
    second = episodes["second"]["relations"]
    assert any(r["relation_type"] == "part_of" for r in second)
    assert any(r["relation_type"] == "uses" and r["source"] == "token.ts" for r in second)
    with session_scope() as s:
        episode = s.scalars(select(Episode)).first()
        assert episode is not None and episode.source_description == "Code review session"
        edge = s.scalars(select(Edge).where(Edge.relation == "depends_on")).one()
        assert edge.valid_from.date() == datetime.fromisoformat(LAST_WEEK).date()
        assert edge.evidence_chunk_ids == [first["memory_id"]]
        links = s.scalars(select(Edge).where(Edge.source_kind == "episode")).all()
        assert len(links) >= 3


def test_json_episodes_and_named_entities(embedder: Any) -> None:
    out = op("add_episode", content='{"service": "Billing", "owner": {"name": "Alice Smith"}}',
             entity_names=["Billing", "Alice Smith"])  # fmt: skip
    assert {"Billing", "Alice Smith"} <= set(out["entities"])
    assert [(r["source"], r["target"]) for r in out["relations"]] == [("Billing", "Alice Smith")]


def test_search_entities_and_edges_rank_with_the_retrieval(episodes: dict[str, Any]) -> None:
    found = op("search_entities", query="JWT token refresh", num_results=5)["entities"]
    names = [e["name"] for e in found]
    assert {"JWT", "token.ts", "auth.ts"} == set(names[:3])  # the best hit names them
    assert all(0 <= e["score"] <= 1 for e in found) and found[0]["group_id"] == "global"
    edges = op("search_edges", query="what does auth.ts depend on", num_results=3)["edges"]
    assert edges[0]["relation_type"] == "depends_on"
    assert (edges[0]["source_name"], edges[0]["target_name"]) == ("auth.ts", "token.ts")
    assert edges[0]["fact"] == AUTH
    # as of two weeks ago nothing was known yet
    before = (datetime.now(UTC) - timedelta(days=14)).isoformat()
    assert op("search_edges", query="auth.ts", as_of=before)["edges"] == []


def test_query_graph_walks_from_the_matches(episodes: dict[str, Any]) -> None:
    out = op("query_graph", query="auth.ts", max_results=10, depth=2)
    assert out["scope"][0] == "auth.ts" and out["relevance"][0] == 1.0
    assert "auth.ts→token.ts" in out["links"]
    assert "session.py" in out["scope"]  # two hops: auth.ts → token.ts → session.py
    assert out["relevance"] == sorted(out["relevance"], reverse=True)


def test_the_walk_is_bounded_by_depth_relation_and_time(episodes: dict[str, Any]) -> None:
    from memsys.services import graph_walk

    now = datetime.now(UTC)
    with session_scope() as s:
        ids = dict(s.execute(select(Entity.name, Entity.id)).tuples().all())
        reach = {
            depth: {
                n
                for n, i in ids.items()
                if i in graph_walk.walk(s, "global", [ids["auth.ts"]], depth, now).depth
            }
            for depth in (1, 2, 3)
        }
        only_uses = graph_walk.walk(s, "global", [ids["token.ts"]], 3, now, relations=["uses"])
        outgoing = graph_walk.walk(s, "global", [ids["token.ts"]], 1, now, both=False)
        earlier = graph_walk.walk(s, "global", [ids["auth.ts"]], 3, now - timedelta(days=8))
    assert reach[1] == {"auth.ts", "token.ts"}
    assert reach[2] == {"auth.ts", "token.ts", "JWT", "session.py"}
    assert {e.relation for e in only_uses.edges} == {"uses"}
    assert ids["auth.ts"] not in outgoing.depth  # auth.ts → token.ts is incoming to token.ts
    assert earlier.edges == []  # the episode's relations start at its reference time


def test_build_context_and_closed_edges_as_of(episodes: dict[str, Any]) -> None:
    ctx = op("build_context", entity_names=["auth.ts"], max_facts=5)
    assert ctx["facts"][0]["fact"] == AUTH and ctx["facts"][0]["distance"] == 0
    assert AUTH in ctx["context"] and len(ctx["facts"]) <= 5
    # closing the edge (history, not deletion): gone now, still there as of before
    closed_at = datetime.now(UTC)
    with session_scope() as s:
        s.execute(update(Edge).where(Edge.relation == "depends_on").values(valid_to=closed_at))
    now = op("build_context", entity_names=["auth.ts"])
    assert all(f["fact"] != AUTH for f in now["facts"])
    then = op("build_context", entity_names=["auth.ts"],
              as_of=(closed_at - timedelta(seconds=1)).isoformat())  # fmt: skip
    assert then["facts"][0]["fact"] == AUTH


def test_a_name_first_stored_later_is_not_in_a_graph_read_as_of_before(embedder: Any) -> None:
    """query_graph as of a time listed entities first stored after it (a name alone, no
    edge then); one an episode related from an earlier reference time still counts."""
    related = op("add_episode", content="Drumwell.ts depends on Ledger.ts.",
                 reference_time=LAST_WEEK)["relations"][0]  # fmt: skip
    before = datetime.now(UTC).isoformat()
    op("create_entities", entities=[{"name": "NEBULA-4471", "entityType": "code"}])
    assert "NEBULA-4471" in op("query_graph", query="NEBULA-4471")["scope"]
    assert "NEBULA-4471" not in op("query_graph", query="NEBULA-4471", as_of=before)["scope"]
    three_days_ago = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    then = op("query_graph", query=related["source"], as_of=three_days_ago)["scope"]
    assert {related["source"], related["target"]} <= set(then)  # related from last week on


def test_build_context_as_of_reads_a_back_dated_fact(embedder: Any) -> None:
    """fact_set may date a fact before its entity was made: as of a time between, the
    entity the caller names is there with that fact."""
    op("fact_set", entity="Nightjar", attribute="role", content="runs the payroll",
       valid_from=LAST_WEEK)  # fmt: skip
    three_days_ago = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    ctx = op("build_context", entity_names=["Nightjar"], as_of=three_days_ago)
    assert any("runs the payroll" in f["fact"] for f in ctx["facts"]), ctx


def test_build_context_ranks_from_a_centre_that_exists(episodes: dict[str, Any]) -> None:
    found = op("search_entities", query="token.ts", num_results=5)["entities"]
    centre = next(e["uuid"] for e in found if e["name"] == "token.ts")
    ctx = op("build_context", entity_names=["auth.ts"], center_node_uuid=centre)
    assert ctx["facts"] and ctx["facts"][0]["distance"] == 0  # an edge of token.ts itself
    assert "token.ts" in (ctx["facts"][0]["subject"], ctx["facts"][0]["object"])
    # A centre that is no entity ranked nothing and said nothing; now it is named.
    missing = fails("build_context", entity_names=["auth.ts"], center_node_uuid="ent_nothere")
    assert "Entity ent_nothere (center_node_uuid) not found" in missing
    assert "center_node_uuid cannot be empty" in fails(
        "build_context", entity_names=["auth.ts"], center_node_uuid="  "
    )


def test_bad_graph_reads_are_refused(episodes: dict[str, Any]) -> None:
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert "is in the future" in fails("query_graph", query="auth", as_of=future)
    assert "as_of" in fails("search_edges", query="auth", as_of="last tuesday")
    assert "depth must be between 1 and 3" in fails("query_graph", query="auth", depth=7)
    assert "Entity with name Nobody not found" in fails("build_context", entity_names=["Nobody"])
    assert "Episode content cannot be empty" in fails("add_episode", content="  ")


def test_named_entities_are_linked_once_and_must_name_something(embedder: Any) -> None:
    """entity_names naming one entity twice ("Alice", "alice") related it to itself; names
    of punctuation alone were all keyed `concept#`: one entity for all of them."""
    out = op("add_episode", content="Alice met the team.", entity_names=["Alice", "alice"])
    assert out["entities"] == ["Alice"] and out["relations"] == []
    with session_scope() as s:
        assert s.scalars(select(Edge).where(Edge.source_id == Edge.target_id)).all() == []
    op("add_episode", content="It happened.", entity_names=["!!!", "???"])
    with session_scope() as s:
        keys = s.scalars(select(Entity.key).where(Entity.name.in_(["!!!", "???"]))).all()
    assert sorted(keys) == ["concept#!!!", "concept#???"]
