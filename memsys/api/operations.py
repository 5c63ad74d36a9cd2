"""REST routes built from the operation table (memsys.operations).

A POST or PUT route takes the input model as its JSON body (so OpenAPI shows its fields,
descriptions and bounds); GET and DELETE take it from the query string. Fields in the path
(`{key}`) or listed in `Rest.query` are separate parameters, and the body or query model is
then the input model without them. Either way memsys validates the whole input once more
through the operation, so a path or query value gets the same checks as a body value.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response
from pydantic import (
    BaseModel,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    create_model,
)
from pydantic.fields import FieldInfo
from starlette.convertors import PathConvertor, register_url_convertor

from memsys import schemas as s
from memsys.api.deps import JsonBodyRoute
from memsys.operations import OPERATIONS, Operation, Rest
from memsys.schemas.common import Rule

PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


class KeyConvertor(PathConvertor):
    """`{key:path}` of the operation table: a key may hold "/", but does not end in a
    sub-resource of its own route, so /preferences/a/history is the history of "a" (a PUT
    there is 405, not a write of the key "a/history"; such keys are refused on write). The
    key "history" itself is a key: the look-behind alone also saw the route's own "/"
    before it, and /preferences/history was no route (a PUT redirected to "history/")."""

    regex = r"(?:history|.*(?<!/history))"


register_url_convertor("key", KeyConvertor())


@functools.cache
def part_of(model: type[s.Input], names: tuple[str, ...], suffix: str) -> type[BaseModel]:
    """`model` limited to `names` (validators are applied later, on the whole input)."""
    fields: dict[str, Any] = {
        name: (info.annotation, _copy(info))
        for name, info in model.model_fields.items()
        if name in names
    }
    return create_model(f"{model.__name__}{suffix}", __base__=s.Input, **fields)


def _copy(info: FieldInfo) -> FieldInfo:
    copied = FieldInfo.merge_field_infos(info)
    copied.metadata = [m for m in info.metadata if not callable(getattr(m, "func", None))]
    return copied


def published(info: FieldInfo | None) -> list[Any]:
    """The rules a field publishes (memsys.schemas.common.Rule), as publish-only copies: a
    path or query parameter shows them in OpenAPI; the operation checks the value itself."""
    if info is None:
        return []
    return [Rule(**m.keywords) for m in info.metadata if isinstance(m, Rule)]


def strict(model: type[BaseModel]) -> WrapValidator:
    """A JSON body has the types OpenAPI states: `0` is not false, `"5"` is not 5, `true` is
    not 1 (pydantic would convert them). JSON Schema's integer includes 5.0, so that one
    passes. Query and path values are text and keep pydantic's conversions."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        result = handler(value)  # memsys's own checks and messages first
        if isinstance(value, dict):
            try:
                model.model_validate(value, strict=True)
            except ValidationError as exc:
                wrong = [e for e in exc.errors() if not _integral(e)]
                if wrong:
                    raise ValidationError.from_exception_data(
                        exc.title,
                        [{"type": e["type"], "loc": e["loc"], "input": e["input"]} for e in wrong],
                    ) from None
        return result

    return WrapValidator(validate)


def _integral(error: Any) -> bool:
    given = error.get("input")
    return error["type"] == "int_type" and isinstance(given, float) and given.is_integer()


def _parameter(name: str, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)


def endpoint(op: Operation, rest: Rest) -> Any:
    """The FastAPI endpoint of one route: parameters from the input model, the operation run
    on their union."""
    model = op.input
    wanted = tuple(model.model_fields) if model else ()
    if rest.fields is not None:
        wanted = tuple(n for n in wanted if n in rest.fields)
    in_path = tuple(PATH_PARAM.findall(rest.path))
    in_query = tuple(n for n in wanted if n in rest.query and n not in in_path)
    rest_of = tuple(n for n in wanted if n not in in_path and n not in in_query)
    as_query = rest.method in ("GET", "DELETE")

    params: list[inspect.Parameter] = [_parameter("response", Response)]
    for name in in_path:
        info = model.model_fields[name] if model else None
        description = info.description if info else None
        extra = info.json_schema_extra if info else None
        marker = Path(description=description, json_schema_extra=extra)
        kind = info.annotation if info else str
        params.append(_parameter(name, Annotated[kind, *published(info), marker]))
    for name in in_query:
        assert model is not None
        info = model.model_fields[name]
        marker = Query(description=info.description, json_schema_extra=info.json_schema_extra)
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[info.annotation, *published(info), marker],
                default=info.default,
            )
        )
    whole = model is not None and rest_of == tuple(model.model_fields)
    if model is not None and rest_of:
        carrier = model if whole else part_of(model, rest_of, "Query" if as_query else "Body")
        if as_query:
            params.append(_parameter("_input", Annotated[carrier, Query()]))
        else:
            params.append(_parameter("_input", Annotated[carrier, Body(), strict(carrier)]))

    def run(response: Response, **given: Any) -> s.Output:
        carried = given.pop("_input", None)
        if whole and isinstance(carried, s.Input):
            result = op.run_parsed(carried)
        else:
            data = dict(given)
            if carried is not None:
                data.update(carried.model_dump(exclude_unset=True))
            result = op.run(data)
        if rest.status == 201 and getattr(result, "duplicate", False):
            response.status_code = 200  # an identical memory already stored: nothing created
        return result

    run.__signature__ = inspect.Signature(params, return_annotation=op.output)  # type: ignore[attr-defined]
    run.__name__ = f"{op.name}_{rest.method.lower()}"
    run.__doc__ = (rest.summary or op.summary) + f" (MCP: {op.name})"
    return run


ERROR_REF = "#/components/schemas/ErrorOut"
ERRORS = {
    400: "A body, URL path or query string that is not UTF-8 (the error says which)",
    401: "Missing or wrong bearer token (when MEMSYS_API_TOKEN is set)",
    403: "A namespace the bearer token may not write, or a foreign browser Origin",
    404: "Unknown memory, preference, file or namespace",
    421: "A Host header outside the allow-list (DNS rebinding)",
    415: "A body sent without a JSON Content-Type",
    422: "Invalid input: the error says which field and why",
    500: "Internal error (details only in the server log)",
    503: "The database is unavailable",
}


def common_errors(body: bool) -> dict[int | str, dict[str, Any]]:
    """The error codes any route may answer, each with the error envelope (415 only where a
    body is read)."""
    return {
        code: {  # a $ref, not a model: JSON even on routes that answer JSON lines
            "description": text,
            "content": {"application/json": {"schema": {"$ref": ERROR_REF}}},
        }
        for code, text in ERRORS.items()
        if body or code != 415
    }


def error_responses(op: Operation, rest: Rest) -> dict[int | str, dict[str, Any]]:
    """The codes a route answers besides success, each with the error envelope."""
    codes = common_errors(body=rest.method in ("POST", "PUT"))
    if rest.status == 201:
        codes[200] = {"model": op.output, "description": "Identical content already stored"}
    return codes


def specificity(path: str) -> tuple[bool, int, tuple[bool, ...]]:
    segments = path.strip("/").split("/")
    return ":path}" in path, -len(segments), tuple(p.startswith("{") for p in segments)


def router() -> APIRouter:
    """Every operation's routes, the most specific first: catch-alls (`{key:path}`) last, and
    of two paths with as many segments, the one with a literal where the other has a
    parameter first (GET /memories/count before GET /memories/{memory_id})."""
    routes = [(op, rest) for op in OPERATIONS for rest in op.rest]
    routes.sort(key=lambda pair: specificity(pair[1].path))
    api = APIRouter(route_class=JsonBodyRoute)
    for op, rest in routes:
        api.add_api_route(
            rest.path.replace(":path}", ":key}"),
            endpoint(op, rest),
            methods=[rest.method],
            response_model=op.output,
            status_code=rest.status,
            tags=[rest.path.strip("/").split("/")[0]],
            responses=error_responses(op, rest),
            operation_id=operation_id(op, rest),
        )
    return api


def operation_id(op: Operation, rest: Rest) -> str:
    """`memory_get_get`; a second route of one method adds its last literal segment
    (`memory_get_get_by_id` for GET /memories/by-id/{memory_id})."""
    name = f"{op.name}_{rest.method.lower()}"
    if [r for r in op.rest if r.method == rest.method].index(rest) > 0:
        literal = [p for p in rest.path.strip("/").split("/") if not p.startswith("{")]
        name += "_" + literal[-1].replace("-", "_")
    return name
