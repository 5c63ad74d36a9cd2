"""The memory server's graph keeps its history (issue 10 §1: a delete closes rows; as-of reads
still see them): read_graph and open_nodes take `as_of`, and so does the JSONL export, on MCP,
REST and the CLI. Without it the answer is what it always was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memsys.api.app import create_app
from tests.cli.helpers import run
from tests.services.test_edges import fails, op

ALICE = {"name": "Alice", "entityType": "person", "observations": ["Likes tea", "Works remotely"]}
ACME = {"name": "Acme", "entityType": "company", "observations": ["Makes anvils"]}
WORKS_AT = {"from": "Alice", "to": "Acme", "relationType": "works_at"}


@pytest.fixture
def history(embedder: Any) -> Iterator[dict[str, str]]:
    before = datetime.now(UTC).isoformat()
    op("create_entities", entities=[ALICE, ACME])
    op("create_relations", relations=[WORKS_AT])
    whole = datetime.now(UTC).isoformat()
    op("delete_observations", deletions=[{"entityName": "Alice", "observations": ["Likes tea"]}])
    op("delete_entities", entityNames=["Acme"])
    yield {"before": before, "whole": whole}


def test_reads_as_of_see_what_a_delete_closed(history: dict[str, str]) -> None:
    now = op("read_graph")
    assert now["entities"] == [{**ALICE, "observations": ["Works remotely"]}]
    assert now["relations"] == []
    then = op("read_graph", as_of=history["whole"])
    assert then["entities"] == [ALICE, ACME] and then["relations"] == [WORKS_AT]
    assert op("read_graph", as_of=history["before"]) == {"entities": [], "relations": []}
    assert op("open_nodes", names=["Acme"])["entities"] == []
    opened = op("open_nodes", names=["Acme"], as_of=history["whole"])
    assert opened == {"entities": [ACME], "relations": [WORKS_AT]}
    # the past is read, not rewritten: a later write is not in it
    op("add_observations", observations=[{"entityName": "Alice", "contents": ["Rides a bike"]}])
    assert op("read_graph", as_of=history["whole"])["entities"][0] == ALICE


def test_as_of_over_rest_and_the_cli_and_bad_times(history: dict[str, str]) -> None:
    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as client:
        read = client.get("/v1/graph", params={"as_of": history["whole"]})
        assert read.status_code == 200, read.text
        body = read.json()
        assert [e["name"] for e in body.get("data", body)["entities"]] == ["Alice", "Acme"]
        exported = client.get("/v1/graph/export", params={"as_of": history["whole"]})
        assert exported.status_code == 200, exported.text
        lines = [json.loads(line) for line in exported.text.splitlines()]
        assert [line.get("name", line.get("relationType")) for line in lines] == [
            "Alice", "Acme", "works_at"
        ]  # fmt: skip
        refused = client.get("/v1/graph/export", params={"as_of": "last tuesday"})
        assert refused.status_code == 422 and "as_of" in refused.json()["error"]
    out = run("graph", "export", "-", "--as-of", history["whole"])
    assert out.exit_code == 0, out.output
    assert [json.loads(line)["type"] for line in out.stdout.splitlines()] == [
        "entity", "entity", "relation"
    ]  # fmt: skip
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert "is in the future" in fails("read_graph", as_of=future)
    assert "as_of" in fails("open_nodes", names=["Alice"], as_of="yesterday-ish")


def test_query_graph_and_search_edges_as_of_match_what_was_there_then(
    history: dict[str, str],
) -> None:
    """query_graph and search_edges walked the graph as of then but matched the query
    against today's entities and memories: Acme, deleted since, was no longer its own match
    (relevance 1 for its name) but came in last, as Alice's neighbour, under today's
    concept names; asked for by what it makes, it came after the entities still live."""
    asked = op("query_graph", query="Acme", as_of=history["whole"], depth=1)
    assert asked["scope"][0] == "Acme" and asked["relevance"][0] == 1.0
    made = op("query_graph", query="who makes anvils", as_of=history["whole"], depth=1)
    best = made["relevance"][0]  # its observation's relevance (tied with the concept "Makes")
    assert made["relevance"][made["scope"].index("Acme")] == best > 0.5
    edges = op("search_edges", query="Acme", as_of=history["whole"])["edges"]
    assert [(e["source_name"], e["target_name"]) for e in edges] == [("Alice", "Acme")]
    assert edges[0]["score"] >= 0.5  # one end is the entity named
    # without as_of: today's graph, where Acme is gone
    assert "Acme" not in op("query_graph", query="Acme", depth=1)["scope"]


def test_a_name_first_stored_later_takes_no_place_in_a_view_of_the_past(embedder: Any) -> None:
    """An entity stored after `as_of` matched the query by name and took one of the
    `max_results` seats before query_graph dropped it as not there then: the entity the
    past's memories linked to the query never got the seat, and fewer came back."""
    bob = {"name": "Bob", "entityType": "person", "observations": ["sells anvils for acme"]}
    op("create_entities", entities=[ACME, bob])
    then = datetime.now(UTC).isoformat()
    op("create_entities", entities=[{"name": "Acme Labs", "entityType": "company"}])
    asked = op("query_graph", query="Acme", as_of=then, max_results=2, depth=1)
    assert asked["scope"] == ["Acme", "Bob"]
    now = op("query_graph", query="Acme", max_results=2, depth=1)
    assert now["scope"] == ["Acme", "Acme Labs"]  # today both names match first
