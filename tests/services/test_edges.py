"""Edges between memories: relate, forget in its three modes, inspect with paths and mermaid."""

from __future__ import annotations

import re
from typing import Any

import pytest

from memsys.mcp.server import call
from memsys.operations import BY_NAME
from tests.conftest import table_counts
from tests.factories import store


def op(name: str, **args: Any) -> Any:
    answer = call(BY_NAME[name], args)
    assert answer["success"], answer
    return answer["data"]


def fails(name: str, **args: Any) -> str:
    before = table_counts()
    answer = call(BY_NAME[name], args)
    assert answer["success"] is False
    assert table_counts() == before
    return str(answer["error"])


@pytest.fixture
def chain(embedder: Any) -> list[str]:
    """a → b → c → d, and a → c; each a memory of one namespace."""
    texts = [
        "Login fails with 500",
        "The session store is full",
        "Redis maxmemory is 64 MB",
        "Raise maxmemory to 1 GB",
    ]
    ids = [store(content=t, namespace="project:app").id for t in texts]
    a, b, c, d = ids
    for source, target, relation in (
        (a, b, "caused_by"),
        (b, c, "caused_by"),
        (c, d, "relates_to"),
        (a, c, "relates_to"),
    ):
        op("memory_relate", source_id=source, target_id=target, relation=relation)
    return ids


def test_relate_is_idempotent_and_checked(chain: list[str], embedder: Any) -> None:
    a, b, *_ = chain
    again = op("memory_relate", source_id=a, target_id=b, relation="caused_by")
    assert again["created"] is False
    assert "Invalid relation: likes" in fails(
        "memory_relate", source_id=a, target_id=b, relation="likes"
    )
    assert "Memory not found: mem_nope" in fails(
        "memory_relate", source_id=a, target_id="mem_nope", relation="relates_to"
    )
    assert "cannot be related to itself" in fails(
        "memory_relate", source_id=a, target_id=a, relation="relates_to"
    )
    other = store(content="Elsewhere entirely", namespace="project:other").id
    # Which end is where: "The memory and the memory are in different namespaces" named
    # neither.
    assert re.search(
        r"The source memory is in \S+ and the target memory in project:other: an edge stays "
        r"within one namespace",
        fails("memory_relate", source_id=a, target_id=other, relation="relates_to"),
    )


def test_inspect_walks_hops_with_decaying_relevance(chain: list[str]) -> None:
    a, b, c, d = chain
    out = op("memory_inspect_graph", memory_id=a, max_depth=2)
    depth = {n["id"]: n["depth"] for n in out["nodes"]}
    assert depth == {a: 0, b: 1, c: 1, d: 2}
    relevance = {n["id"]: n["relevance"] for n in out["nodes"]}
    assert relevance[a] == 1.0 and relevance[b] == pytest.approx(0.7)
    assert relevance[d] == pytest.approx(0.49)
    assert [a, c, d] in [p["path"] for p in out["paths"]]
    assert out["stats"] == {
        "total_nodes": 4,
        "total_edges": 4,
        "max_depth_reached": 2,
        "truncated": False,
    }
    one_hop = op(
        "memory_inspect_graph",
        memory_id=a,
        max_depth=1,
        direction="outgoing",
        edge_types=["caused_by"],
    )
    assert {n["id"] for n in one_hop["nodes"]} == {a, b}
    # Any spelling of a relation; one the registry does not know (an imported vault may have
    # stored it) matches its edges, not an error; text that is no relation is refused.
    spelled = op("memory_inspect_graph", memory_id=a, max_depth=1, edge_types=["Caused-By"])
    assert {n["id"] for n in spelled["nodes"]} == {a, b}
    other = op("memory_inspect_graph", memory_id=a, max_depth=1, edge_types=["inspired_by"])
    assert {n["id"] for n in other["nodes"]} == {a}
    assert "Invalid edge type" in fails("memory_inspect_graph", memory_id=a, edge_types=["a;b"])
    incoming = op("memory_inspect_graph", memory_id=d, max_depth=1, direction="incoming")
    assert {n["id"] for n in incoming["nodes"]} == {c, d}
    assert "max_depth must be between 1 and 5" in fails(
        "memory_inspect_graph", memory_id=a, max_depth=9
    )


def test_mermaid_is_a_flowchart_with_one_arrow_per_edge(chain: list[str]) -> None:
    text = op("memory_inspect_graph", memory_id=chain[0], output_format="mermaid")["mermaid"]
    lines = text.strip().splitlines()
    assert lines[0] == "flowchart LR"
    nodes = [line for line in lines[1:] if re.fullmatch(r'    n\d+\["[^"\[\]]+"\]', line)]
    arrows = [line for line in lines[1:] if re.fullmatch(r"    n\d+ -->\|\w+\| n\d+", line)]
    assert len(nodes) == 4 and len(arrows) == 4 and len(lines) == 9


def test_edge_forget_in_its_three_modes(chain: list[str]) -> None:
    a, _, c, d = chain
    first = op("memory_inspect_graph", memory_id=a, max_depth=1)["edges"][0]["id"]  # a → b
    # an id with a memory or ends that do not match it forgot the edge anyway: refused
    for other in ({"memory_id": c}, {"source_id": c, "target_id": a}, {"target_id": d}):
        said = fails("memory_edge_forget", edge_id=first, **other)
        assert "Give one of edge_id, memory_id, or source_id with target_id" in said
    assert "not memory_id and source_id/target_id" in fails(
        "memory_edge_forget", memory_id=c, source_id=c, target_id=d
    )
    assert op("memory_edge_forget", edge_id=first)["deleted_ids"] == [first]
    assert "Edge not found" in fails("memory_edge_forget", edge_id=first)
    # the relation in any spelling memory_relate takes (it matched nothing: deleted_count 0)
    pair = op("memory_edge_forget", source_id=c, target_id=d, relation="Relates-To")
    assert pair["deleted_count"] == 1
    around = op("memory_edge_forget", memory_id=c, direction="both")
    assert around["deleted_count"] == 2  # b → c and a → c
    assert op("memory_inspect_graph", memory_id=a)["stats"]["total_edges"] == 0
    assert "Say which edges" in fails("memory_edge_forget")


def test_registry_relations_and_inspect_as_of(chain: list[str]) -> None:
    from datetime import UTC, datetime

    a, b, _, d = chain
    # any registry relation, any case: S000's CAUSED_BY is S001's caused_by, stored once
    assert op("memory_relate", source_id=a, target_id=b, relation="CAUSED_BY")["created"] is False
    made = op("memory_relate", source_id=d, target_id=a, relation="Solves")
    assert made["created"] is True
    before = datetime.now(UTC).isoformat()
    op("memory_edge_forget", source_id=a, target_id=b)
    now = op("memory_inspect_graph", memory_id=a, max_depth=1, direction="outgoing")
    assert b not in {n["id"] for n in now["nodes"]}
    then = op("memory_inspect_graph", memory_id=a, max_depth=1, direction="outgoing", as_of=before)
    assert b in {n["id"] for n in then["nodes"]}


def test_inspect_does_not_walk_through_a_forgotten_memory(chain: list[str]) -> None:
    """A closed node ends a path: the walk went on through b, forgotten, and listed c and d at
    depth 2 and 3 with no edge or path that reached them (as after a merge closes b)."""
    a, b, c, d = chain
    op("memory_edge_forget", source_id=a, target_id=c)  # a reaches c only through b now
    op("memory_forget", memory_id=b)
    graph = op("memory_inspect_graph", memory_id=a, max_depth=3)
    assert [n["id"] for n in graph["nodes"]] == [a]
    assert graph["edges"] == [] and graph["paths"] == []
    assert graph["stats"]["max_depth_reached"] == 0
    assert c in {n["id"] for n in op("memory_inspect_graph", memory_id=d)["nodes"]}


def test_inspect_from_a_hub_is_bounded(embedder: Any) -> None:
    """A memory joined to an entity related to more entities than an answer holds: the walk
    stops at MAX_NODES nodes and says so, instead of returning every node it reaches (5,000
    entities came back in one 1.7 MB answer; a store of long memories makes that hundreds)."""
    from memsys.services.edges import MAX_NODES

    ns = "project:hub"
    many = MAX_NODES + 50
    names = [f"Spoke {i}" for i in range(many)]
    entities = [{"name": n, "entityType": "thing"} for n in ["Hub", *names]]
    assert call(BY_NAME["create_entities"], {"namespace": ns, "entities": entities})
    relations = [{"from": "Hub", "to": n, "relationType": "related_to"} for n in names]
    assert call(BY_NAME["create_relations"], {"namespace": ns, "relations": relations})
    hub = call(BY_NAME["search_entities"], {"query": "Hub", "group_ids": [ns]})
    hub_id = next(e["uuid"] for e in hub["data"]["entities"] if e["name"] == "Hub")
    origin = store(content="The hub service notes", namespace=ns).id
    op("memory_relate", source_id=origin, target_id=hub_id, target_kind="entity",
       relation="related_to")  # fmt: skip

    graph = op("memory_inspect_graph", memory_id=origin, max_depth=2)
    assert len(graph["nodes"]) == MAX_NODES
    assert graph["stats"]["truncated"] is True
    assert graph["stats"]["total_nodes"] == MAX_NODES
    kept = {n["id"] for n in graph["nodes"]}
    assert all(e["source"] in kept and e["target"] in kept for e in graph["edges"])
    # One hop reaches only the hub: nothing was cut.
    near = op("memory_inspect_graph", memory_id=origin, max_depth=1)
    assert len(near["nodes"]) == 2 and near["stats"]["truncated"] is False
