"""The official memory server's file (MEMORY_FILE_PATH): JSON lines of
`{"type":"entity","name","entityType","observations"}` and
`{"type":"relation","from","to","relationType"}`. Read into the create_entities and
create_relations inputs (every line validated before anything is written), written from
read_graph's output. Used by `memsys graph import|export` and POST/GET /v1/graph/import|export.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypeVar

from memsys import jsonvalue
from memsys.errors import InvalidInput
from memsys.schemas.common import Input, parse
from memsys.schemas.graph import MAX_ITEMS, CreateEntitiesIn, CreateRelationsIn, GraphOut
from memsys.schemas.memories import STORED

M = TypeVar("M", CreateEntitiesIn, CreateRelationsIn)


class GraphImportIn(Input):
    """A file's entities and relations, in calls of at most MAX_ITEMS (a create_entities
    call's limit): the import runs them all in one transaction."""

    entities: list[CreateEntitiesIn] = []
    relations: list[CreateRelationsIn] = []


def objects(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line; a line that is not a JSON object is an error
    naming it. Lines end at "\n" (a "\r" before it is JSON whitespace) and nowhere else: a
    value may hold U+2028, U+0085 or U+001C, at which splitlines() would cut it. A byte-order
    mark opening the text (Windows Notepad writes one) marks the encoding: no content."""
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = jsonvalue.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {n}: not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise InvalidInput(f"line {n}: not valid JSON: nested too deeply to read") from None
        except jsonvalue.KeyTwice as exc:  # json kept the last without a word
            raise InvalidInput(f"line {n}: not valid JSON: {exc}") from None
        except ValueError:  # an integer of more digits than Python converts
            raise InvalidInput(f"line {n}: not valid JSON: a number has too many digits") from None
        if not isinstance(item, dict):
            raise InvalidInput(f"line {n}: expected a JSON object")
        yield n, item


def parse_jsonl(text: str, namespace: str | None = None) -> GraphImportIn:
    entities: list[tuple[int, dict[str, Any]]] = []
    relations: list[tuple[int, dict[str, Any]]] = []
    for n, item in objects(text):
        kind = item.pop("type", None)
        if kind not in ("entity", "relation"):
            raise InvalidInput(f"line {n}: not an entity or relation line")
        (entities if kind == "entity" else relations).append((n, item))
    scope = {} if namespace is None else {"namespace": namespace}
    return GraphImportIn(
        entities=[_call(CreateEntitiesIn, "entities", part, scope) for part in _parts(entities)],
        relations=[
            _call(CreateRelationsIn, "relations", part, scope) for part in _parts(relations)
        ],
    )


def _parts(lines: list[tuple[int, dict[str, Any]]]) -> list[list[tuple[int, dict[str, Any]]]]:
    return [lines[i : i + MAX_ITEMS] for i in range(0, len(lines), MAX_ITEMS)]


def _call(
    model: type[M], field: str, part: list[tuple[int, dict[str, Any]]], scope: dict[str, Any]
) -> M:
    """One call's input; a line it refuses is named by its line number in the file. Its text
    is read as stored (STORED): a server's own export imports again."""
    try:
        return parse(model, {field: [item for _, item in part], **scope}, STORED)
    except InvalidInput:
        for n, item in part:  # the first line that is wrong on its own
            try:
                parse(model, {field: [item], **scope}, STORED)
            except InvalidInput as exc:
                raise InvalidInput(f"line {n}: {exc.message}") from None
        raise  # wrong only together (a namespace), as the message says


def render_jsonl(graph: GraphOut) -> str:
    lines = [
        json.dumps({"type": "entity", **e.model_dump(mode="json")}, ensure_ascii=False)
        for e in graph.entities
    ] + [
        json.dumps({"type": "relation", **r.model_dump(mode="json", by_alias=True)})
        for r in graph.relations
    ]
    return "".join(line + "\n" for line in lines)
