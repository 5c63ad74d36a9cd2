"""The rows of the official MCP memory server's nine tools (server-memory 0.6): same names,
arguments and result shapes, plus an optional namespace (memsys.services.knowledge)."""

from __future__ import annotations

from memsys import schemas as s
from memsys.operations.spec import Cli, Effect, Operation, Rest
from memsys.schemas import edges as e
from memsys.schemas import graph as g


def _graph(
    name: str,
    summary: str,
    input: type[s.Input],
    output: type[s.Output],
    effect: Effect,
    rest: Rest,
    cli: Cli,
) -> Operation:
    return Operation(
        name=name,
        summary=summary,
        service=f"knowledge_read:{name}" if effect == "read" else f"knowledge:{name}",
        input=input,
        output=output,
        effect=effect,
        rest=(rest,),
        cli=cli,
        mcp_envelope=False,
    )


GRAPH_CLI = "memsys.cli.graph"

# S001's edges between memories (memsys.services.edges), with the S001 envelope.
EDGE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="memory_relate",
        summary="Create a relationship (edge) between two memories, document chunks, "
        "entities, facts or episodes of one namespace (source_kind / target_kind; memories by "
        "default). Relating the same pair with the same relation again returns the existing "
        "edge.",
        service="edges:relate",
        input=e.MemoryRelateIn,
        output=e.MemoryRelateOut,
        effect="idempotent",
        rest=(Rest("POST", "/edges"),),
        cli=Cli(
            "relate",
            arguments=("source_id", "target_id", "relation"),
            render=f"{GRAPH_CLI}:related",
        ),
    ),
    Operation(
        name="memory_edge_forget",
        summary="Delete edges between memories: one by edge_id, all of a memory_id (by "
        "direction), or those between source_id and target_id; relation narrows any mode.",
        service="edges:edge_forget",
        input=e.MemoryEdgeForgetIn,
        output=e.MemoryEdgeForgetOut,
        effect="destructive",
        rest=(Rest("POST", "/edges/forget"),),
        cli=Cli("edge-forget", render=f"{GRAPH_CLI}:edges_forgotten"),
    ),
    Operation(
        name="memory_inspect_graph",
        summary="Inspect the graph around a memory: nodes within max_depth hops, edges, "
        "paths with relevance decaying per hop; JSON or a mermaid flowchart. At most 500 nodes "
        "and 2,000 edges, strongest edges first (stats.truncated says more was in reach).",
        service="edges:inspect",
        input=e.MemoryInspectIn,
        output=e.MemoryInspectOut,
        effect="read",
        rest=(Rest("POST", "/edges/inspect"),),
        cli=Cli("inspect", arguments=("memory_id",), render=f"{GRAPH_CLI}:inspected"),
    ),
)
GRAPH_OPERATIONS: tuple[Operation, ...] = (
    _graph(
        "create_entities",
        "Create multiple new entities in the knowledge graph",
        g.CreateEntitiesIn,
        g.EntitiesOut,
        "write",
        Rest("POST", "/graph/entities"),
        Cli("graph create-entities", render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "create_relations",
        "Create multiple new relations between entities in the knowledge graph. "
        "Relations should be in active voice",
        g.CreateRelationsIn,
        g.RelationsOut,
        "write",
        Rest("POST", "/graph/relations"),
        Cli("graph create-relations", render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "add_observations",
        "Add new observations to existing entities in the knowledge graph",
        g.AddObservationsIn,
        g.ObservationsOut,
        "write",
        Rest("POST", "/graph/observations"),
        Cli("graph add-observations", render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "delete_entities",
        "Delete multiple entities and their associated relations from the knowledge graph "
        "(closed, kept in history)",
        g.DeleteEntitiesIn,
        g.DoneOut,
        "destructive",
        Rest("POST", "/graph/entities/delete"),
        Cli("graph delete-entities", arguments=("entityNames",), render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "delete_observations",
        "Delete specific observations from entities in the knowledge graph",
        g.DeleteObservationsIn,
        g.DoneOut,
        "destructive",
        Rest("POST", "/graph/observations/delete"),
        Cli("graph delete-observations", render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "delete_relations",
        "Delete multiple relations from the knowledge graph",
        g.DeleteRelationsIn,
        g.DoneOut,
        "destructive",
        Rest("POST", "/graph/relations/delete"),
        Cli("graph delete-relations", render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "read_graph",
        "Read the entire knowledge graph",
        g.ReadGraphIn,
        g.GraphOut,
        "read",
        Rest("GET", "/graph"),
        Cli("graph read", render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "search_nodes",
        "Search for nodes in the knowledge graph based on a query (names and types first, "
        "then observations ranked by memsys's retrieval)",
        g.SearchNodesIn,
        g.GraphOut,
        "read",
        Rest("POST", "/graph/search"),
        Cli("graph search", arguments=("query",), render=f"{GRAPH_CLI}:show"),
    ),
    _graph(
        "open_nodes",
        "Open specific nodes in the knowledge graph by their names",
        g.OpenNodesIn,
        g.GraphOut,
        "read",
        Rest("POST", "/graph/open"),
        Cli("graph open", arguments=("names",), render=f"{GRAPH_CLI}:show"),
    ),
)
