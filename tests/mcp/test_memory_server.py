"""memsys as a drop-in for the official MCP memory server (server-memory 0.6): its nine
tools over stdio with its names, arguments and result shapes (no memsys envelope), its
resource, plus memsys's history and ranking underneath."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from sqlalchemy import select

from memsys.db import session_scope
from memsys.models import Entity
from tests.conftest import table_counts
from tests.mcp.test_stdio import Stdio, _connected

READ = {"read_graph", "search_nodes", "open_nodes"}
DELETES = {"delete_entities", "delete_observations", "delete_relations"}


@pytest.fixture(scope="module")
def mcp() -> Iterator[Stdio]:
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(_connected()) as s:
        yield Stdio(portal, s)


def shape(mcp: Stdio, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The tool's result: structured content, the same JSON as text, not an error."""
    result = mcp.call(name, args)
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return dict(result.structured_content)


ALICE = {
    "name": "Alice",
    "entityType": "person",
    "observations": ["Works on the billing service", "Prefers Go"],
}


def test_the_nine_tools_with_their_annotations(mcp: Stdio) -> None:
    tools = mcp.tools()
    for name in READ | DELETES | {"create_entities", "create_relations", "add_observations"}:
        assert name in tools, name
        assert tools[name].annotations.read_only_hint == (name in READ), name
        assert tools[name].annotations.destructive_hint == (name in DELETES), name
    relation = tools["create_relations"].input_schema["$defs"]["RelationIn"]["properties"]
    assert set(relation) == {"from", "to", "relationType"}


def test_entities_relations_and_observations_round_trip(mcp: Stdio) -> None:
    billing = {"name": "Billing", "entityType": "service", "observations": []}
    created = shape(mcp, "create_entities", {"entities": [ALICE, billing]})
    assert created == {"entities": [ALICE, billing]}
    assert shape(mcp, "create_entities", {"entities": [ALICE]}) == {"entities": []}

    works = {"from": "Alice", "to": "Billing", "relationType": "works_on"}
    assert shape(mcp, "create_relations", {"relations": [works]}) == {"relations": [works]}
    assert shape(mcp, "create_relations", {"relations": [works]}) == {"relations": []}

    added = shape(
        mcp,
        "add_observations",
        {"observations": [{"entityName": "Alice", "contents": ["Prefers Go", "On call in March"]}]},
    )
    assert added == {
        "results": [{"entityName": "Alice", "addedObservations": ["On call in March"]}]
    }

    opened = shape(mcp, "open_nodes", {"names": ["Billing"]})
    assert opened == {"entities": [billing], "relations": [works]}

    found = shape(mcp, "search_nodes", {"query": "who is on call this spring"})
    assert found["entities"][0]["name"] == "Alice" and works in found["relations"]

    removed = shape(
        mcp,
        "delete_observations",
        {"deletions": [{"entityName": "Alice", "observations": ["Prefers Go"]}]},
    )
    assert removed["success"] is True
    graph = shape(mcp, "read_graph", {})
    alice = next(e for e in graph["entities"] if e["name"] == "Alice")
    assert alice["observations"] == ["Works on the billing service", "On call in March"]

    assert shape(mcp, "delete_relations", {"relations": [works]})["success"] is True
    assert shape(mcp, "read_graph", {})["relations"] == []
    assert shape(mcp, "delete_entities", {"entityNames": ["Alice", "Nobody"]})["success"] is True
    assert shape(mcp, "read_graph", {}) == {"entities": [billing], "relations": []}

    # History, not destruction: Alice's row is closed and still there.
    with session_scope() as s:
        rows = s.scalars(select(Entity).where(Entity.name == "Alice")).all()
    assert len(rows) == 1 and rows[0].valid_to is not None


def test_a_fresh_install_has_the_memory_servers_empty_graph(mcp: Stdio) -> None:
    """An agent's first call on a fresh install (read_graph, as the memory server's own
    prompt has it) was an error: "Namespace not found: global. No namespaces exist yet."
    """
    empty = {"entities": [], "relations": []}
    assert shape(mcp, "read_graph", {}) == empty
    assert shape(mcp, "search_nodes", {"query": "Alice"}) == empty
    assert shape(mcp, "open_nodes", {"names": ["Alice"]}) == empty
    done = shape(mcp, "delete_entities", {"entityNames": ["Alice"]})
    assert done == {"success": True, "message": "Entities deleted successfully"}
    missing = mcp.call(
        "add_observations", {"observations": [{"entityName": "Alice", "contents": ["x"]}]}
    )
    assert missing.is_error and "Entity with name Alice not found" in missing.content[0].text
    # a namespace the call names is still checked
    named = mcp.call("read_graph", {"namespace": "project:typo"})
    assert named.is_error and "Namespace not found: project:typo" in named.content[0].text
    mcp.settle()
    assert table_counts()["namespace"] == 0


def test_errors_are_tool_errors_and_write_nothing(mcp: Stdio) -> None:
    shape(mcp, "create_entities", {"entities": [ALICE]})  # not a retrieval: settles the server
    before = table_counts()
    missing = mcp.call(
        "add_observations", {"observations": [{"entityName": "Bob", "contents": ["x"]}]}
    )
    assert missing.is_error and "Entity with name Bob not found" in missing.content[0].text
    bad = mcp.call(
        "create_relations",
        {"relations": [{"from": "Alice", "to": "Nobody", "relationType": "knows"}]},
    )
    assert bad.is_error and "Entity with name Nobody not found" in bad.content[0].text
    empty = mcp.call("create_entities", {"entities": [{"name": " ", "entityType": "person"}]})
    assert empty.is_error and "name cannot be empty" in empty.content[0].text
    # Refused before the tool runs, the same plain text (they came back as memsys envelopes).
    for args, reason in (
        ({"entities": [ALICE], "colour": "red"}, "Unknown argument(s) for create_entities"),
        ({"entities": "Alice"}, "Invalid arguments: entities"),
    ):
        refused = mcp.call("create_entities", args)
        text = refused.content[0].text
        assert refused.is_error and text.startswith(reason) and "success" not in text, text
    mcp.settle()
    assert table_counts() == before


def test_namespaces_keep_graphs_apart_and_the_resource_reads_the_default(mcp: Stdio) -> None:
    shape(mcp, "create_entities", {"entities": [ALICE]})
    other = {"name": "Carol", "entityType": "person", "observations": []}
    shape(mcp, "create_entities", {"entities": [other], "namespace": "project:x"})
    assert [e["name"] for e in shape(mcp, "read_graph", {})["entities"]] == ["Alice"]
    scoped = shape(mcp, "read_graph", {"namespace": "project:x"})
    assert [e["name"] for e in scoped["entities"]] == ["Carol"]
    resource = mcp.portal.call(lambda: mcp.session.read_resource("memory://knowledge-graph"))
    assert [e["name"] for e in json.loads(resource.contents[0].text)["entities"]] == ["Alice"]


def test_concurrent_creates_of_one_name_give_one_entity(embedder: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    def create(_: int) -> Any:
        return call(
            BY_NAME["create_entities"], {"entities": [{"name": "Dana", "entityType": "person"}]}
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(create, range(8)))
    assert all(a["success"] for a in answers)
    assert sum(len(a["data"]["entities"]) for a in answers) == 1
    with session_scope() as s:
        live = s.scalars(select(Entity).where(Entity.name == "Dana", Entity.valid_to.is_(None)))
        assert len(live.all()) == 1
