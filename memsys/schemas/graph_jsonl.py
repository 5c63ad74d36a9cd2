"""The official memory server's file (MEMORY_FILE_PATH): JSON lines of
`{"type":"entity","name","entityType","observations"}` and
`{"type":"relation","from","to","relationType"}`. Read into the create_entities and
create_relations inputs (every line validated before anything is written), written from
read_graph's output. Used by `memsys graph import|export` and POST/GET /v1/graph/import|export.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memsys.errors import InvalidInput
from memsys.schemas.common import Input, parse
from memsys.schemas.graph import CreateEntitiesIn, CreateRelationsIn, GraphOut


class GraphImportIn(Input):
    entities: CreateEntitiesIn | None = None
    relations: CreateRelationsIn | None = None


def objects(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line; a line that is not a JSON object is an error
    naming it."""
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {n}: not valid JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise InvalidInput(f"line {n}: expected a JSON object")
        yield n, item


def parse_jsonl(text: str, namespace: str | None = None) -> GraphImportIn:
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    for n, item in objects(text):
        kind = item.pop("type", None)
        if kind not in ("entity", "relation"):
            raise InvalidInput(f"line {n}: not an entity or relation line")
        (entities if kind == "entity" else relations).append(item)
    scope = {} if namespace is None else {"namespace": namespace}
    return GraphImportIn(
        entities=parse(CreateEntitiesIn, {"entities": entities, **scope}) if entities else None,
        relations=parse(CreateRelationsIn, {"relations": relations, **scope})
        if relations
        else None,
    )


def render_jsonl(graph: GraphOut) -> str:
    lines = [
        json.dumps({"type": "entity", **e.model_dump(mode="json")}, ensure_ascii=False)
        for e in graph.entities
    ] + [
        json.dumps({"type": "relation", **r.model_dump(mode="json", by_alias=True)})
        for r in graph.relations
    ]
    return "".join(line + "\n" for line in lines)
