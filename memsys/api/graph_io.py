"""POST /v1/graph/import and GET /v1/graph/export: the official memory server's JSONL file
over HTTP, so a user moves a MEMORY_FILE_PATH in (`curl --data-binary @memory.jsonl`) and back
out (`curl … > memory.jsonl`) in one command. Raw JSON lines, not JSON bodies: these are
files, not operations (the same import/export is `memsys graph import|export`)."""

from __future__ import annotations

import codecs
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse

from memsys import runner
from memsys.api.deps import declared_length, unread_body
from memsys.config import get_settings
from memsys.schemas import parse
from memsys.schemas.common import NamespaceName
from memsys.schemas.graph import ReadGraphIn
from memsys.schemas.graph_jsonl import parse_jsonl, render_jsonl
from memsys.services import graph_io, knowledge_read

router = APIRouter(tags=["graph"])
NDJSON = "application/x-ndjson"


class JsonLines(PlainTextResponse):
    media_type = NDJSON


# The file is read whole into memory (then parsed whole): past this it is refused whatever
# MEMSYS_MAX_IMPORT_BYTES says (4 GiB by default, for a snapshot spooled to a file).
MAX_BODY = 64 * 1024 * 1024
Namespace = Annotated[
    NamespaceName | None,
    Query(description="Namespace of the graph (default: MEMSYS_GRAPH_NAMESPACE)"),
]


AsOf = Annotated[
    str | None, Query(description="ISO 8601 time: the graph as it was then (default: now)")
]


@router.get("/graph/export", response_class=JsonLines)
def export_graph(namespace: Namespace = None, as_of: AsOf = None) -> JsonLines:
    """The graph as the memory server's JSONL file (entities, then relations); with as_of,
    as it was then (deletes close rows, so a deleted entity is in an earlier export)."""
    given = {"namespace": namespace, "as_of": as_of}
    params = parse(ReadGraphIn, {k: v for k, v in given.items() if v is not None})
    graph = runner.run(knowledge_read.read_graph, params)
    return JsonLines(render_jsonl(graph))


@router.post(
    "/graph/import",
    response_model=dict[str, int | list[str]],
    responses={413: {"description": "A body over MEMSYS_MAX_IMPORT_BYTES (or 64 MiB)"}},
)
async def import_graph(request: Request, namespace: Namespace = None) -> Any:
    """Load a memory server JSONL file (the request body): new entities with their
    observations, then new relations; existing names and triples are kept. Every line is
    validated first; one bad line refuses the file and writes nothing. `warnings`, when
    there is one: an observation written that looks like it holds a secret (stored all the
    same, as memory_store flags its content)."""
    limit = min(MAX_BODY, get_settings().max_import_bytes)
    if declared_length(request) > limit:  # refused before a byte of it is read
        return unread_body(413, _too_large(limit))
    pieces, size = [], 0
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        async for piece in request.stream():  # read up to the limit, not whole before it
            size += len(piece)
            if size > limit:  # a body without a Content-Length, or a false one
                return unread_body(413, _too_large(limit))
            pieces.append(decoder.decode(piece))
            if "\0" in pieces[-1]:  # no JSON line holds one: /dev/zero sent as the file
                return unread_body(422, "The body holds a NUL character: it is no JSON lines")
        pieces.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        return unread_body(400, "The body is not UTF-8 text")  # as /v1/import
    text = "".join(pieces)

    def run() -> dict[str, int | list[str]]:
        params = parse_jsonl(text, namespace)
        return graph_io.summary(*runner.run(graph_io.import_graph, params))

    return await anyio.to_thread.run_sync(run)


def _too_large(limit: int) -> str:
    return (
        f"The body is over the {limit}-byte limit of a graph import (MEMSYS_MAX_IMPORT_BYTES, "
        f"{MAX_BODY} at most: the file is read whole): nothing was imported. Import the graph "
        "in parts, or raise the limit"
    )
