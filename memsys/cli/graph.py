"""`memsys graph`: the knowledge-graph verbs of the official MCP memory server (their
commands come from memsys.operations.graph; results print as the JSON those tools return),
and import/export of that server's JSONL file, to move over in one command and back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsys import regular_files
from memsys.cli.output import Json, inert, json_dumps, path_given, read_input, short, warn

if TYPE_CHECKING:
    from pydantic import BaseModel

    from memsys.schemas.edges import MemoryEdgeForgetOut, MemoryInspectOut, MemoryRelateOut

app = typer.Typer(no_args_is_help=True)

GraphNamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Namespace of the graph (default: MEMSYS_GRAPH_NAMESPACE, 'global')",
    ),
]


def show(result: BaseModel) -> None:
    typer.echo(json_dumps(result.model_dump(mode="json", by_alias=True)))
    for warning in getattr(result, "warnings", []):  # on stderr too, as memsys store does
        warn(warning)


def related(r: MemoryRelateOut) -> None:
    typer.echo(f"Edge {r.edge_id}" + ("" if r.created else " (already there)"))


def edges_forgotten(r: MemoryEdgeForgetOut) -> None:
    listed = f": {', '.join(map(str, r.deleted_ids))}" if r.deleted_ids else ""
    typer.echo(f"Forgot {r.deleted_count} edge{'' if r.deleted_count == 1 else 's'}{listed}")


def inspected(r: MemoryInspectOut) -> None:
    if r.stats.truncated:
        warn(
            "more was within reach than one answer holds (500 nodes, 2,000 edges, strongest "
            "edges first): lower --max-depth or name --edge-types"
        )
    if r.mermaid is not None:
        typer.echo(inert(r.mermaid), nl=False)  # its labels are memories' text
        return
    for node in r.nodes:
        score = "" if node.relevance is None else f"  relevance {node.relevance:.3f}"
        kind = "" if node.kind == "memory" else f"  [{node.kind}]"
        typer.echo(inert(f"{'  ' * node.depth}{node.id}{score}{kind}  {short(node.content, 80)}"))
    for edge in r.edges:
        typer.echo(f"edge {edge.id}: {edge.source} -{edge.relation}-> {edge.target}")


def _graph_op(name: str, data: dict[str, Any]) -> Any:
    from memsys.cli import remote
    from memsys.operations import BY_NAME

    return remote.run(BY_NAME[name], data)


@app.command("export")
def export(
    path: Annotated[
        str, typer.Argument(help="The JSONL file to write; - for stdout.", callback=path_given)
    ],
    namespace: GraphNamespaceOption = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="ISO 8601 time: the graph as it was then.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Write the graph as the official memory server's JSONL file (MEMORY_FILE_PATH)."""
    from memsys.errors import InvalidInput
    from memsys.schemas.graph_jsonl import render_jsonl

    if as_json and path == "-":
        raise InvalidInput("--json goes with a file: with -, the graph's JSONL is the output")
    given = {"namespace": namespace, "as_of": as_of}
    graph = _graph_op("read_graph", {k: v for k, v in given.items() if v is not None})
    text = render_jsonl(graph)
    if path == "-":
        sys.stdout.write(text)
    else:
        with regular_files.replaced(Path(path).expanduser(), path) as out:
            out.write(text)
        entities, relations = len(graph.entities), len(graph.relations)
        if as_json:
            typer.echo(json_dumps({"path": path, "entities": entities, "relations": relations}))
        else:
            typer.echo(f"Exported {entities} entities, {relations} relations")


@app.command("import")
def import_(
    path: Annotated[
        str,
        typer.Argument(help="The memory server's JSONL file; - for stdin.", callback=path_given),
    ],
    namespace: GraphNamespaceOption = None,
    as_json: Json = False,
) -> None:
    """Load the official memory server's JSONL file: entities (with their observations),
    then relations, in one transaction (a bad line writes nothing). Existing names and
    relations are kept as they are."""
    from memsys import runner
    from memsys.cli import remote
    from memsys.schemas.graph_jsonl import parse_jsonl
    from memsys.services import graph_io

    text = read_input(path)
    query = {} if namespace is None else {"namespace": namespace}
    answer = remote.post_file("/graph/import", text.encode("utf-8"), query)
    if answer is None:  # no server: here
        answer = graph_io.summary(*runner.run(graph_io.import_graph, parse_jsonl(text, namespace)))
    if as_json:
        typer.echo(json_dumps(answer))
    else:
        typer.echo(
            f"Imported {answer['entities_created']} new entities, "
            f"{answer['relations_created']} new relations"
        )
    flagged = answer.get("warnings", [])  # a secret-like observation: stored, flagged
    for warning in flagged if isinstance(flagged, list) else []:
        warn(warning)
    revived = answer.get("revived", [])
    for memory_id in revived if isinstance(revived, list) else []:
        typer.echo(f"{memory_id}: aged, made active again")  # as `memsys store` says of one
