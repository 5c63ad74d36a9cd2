"""A tool's published signature from its operation's input model: the fields' types for the
SDK to check, stripped of memsys's validators (memsys checks values, so a bad value gets
memsys's message), and the arguments as plain JSON values for the operation.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Iterable
from datetime import date, datetime
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    create_model,
)
from pydantic.fields import FieldInfo

from memsys.operations import Operation
from memsys.schemas.common import Rule


def shown(metadata: Iterable[Any], base: Any) -> list[Rule]:
    """The JSON Schema keywords of memsys's rules and of pydantic's constraints, published
    without their checks (memsys runs those itself, with its own messages): clients see
    the bounds OpenAPI shows. `base` is the type they constrain."""
    many = "Items" if _is_list(base) else "Length"
    keywords: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, Rule):
            keywords |= m.keywords
        elif isinstance(m, FieldInfo) and isinstance(m.json_schema_extra, dict):
            keywords |= m.json_schema_extra  # a nested type's own keywords
        elif isinstance(m, annotated_types.MaxLen):
            keywords[f"max{many}"] = m.max_length
        elif isinstance(m, annotated_types.MinLen):
            keywords[f"min{many}"] = m.min_length
        elif isinstance(m, annotated_types.Ge):
            keywords["minimum"] = m.ge
        elif isinstance(m, annotated_types.Le):
            keywords["maximum"] = m.le
    return [Rule(None, **keywords)] if keywords else []


def _is_list(annotation: Any) -> bool:
    """Whether a (possibly optional, possibly annotated) type is a list."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_is_list(a) for a in get_args(annotation) if a is not type(None))
    return get_origin(annotation) is list


def field_type(info: FieldInfo, required: bool = False) -> Any:
    """A field's type as the MCP schema publishes it: bare, with its bounds and description."""
    rules = shown(info.metadata, info.annotation)
    return Annotated[(bare(info.annotation), *rules, published(info, required))]


def bare(annotation: Any) -> Any:
    """The type without memsys's validators (kept for the memsys-side validation), its
    rules' keywords still published."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *metadata = get_args(annotation)
        rules = shown(metadata, inner)
        return Annotated[(bare(inner), *rules)] if rules else bare(inner)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return bare_model(annotation)
    if origin in (Union, types.UnionType):
        return Union[tuple(bare(a) for a in get_args(annotation))]  # noqa: UP007
    if origin in (list, dict):
        return origin[tuple(bare(a) for a in get_args(annotation))]
    if annotation is int:  # JSON Schema's integer includes 5.0, as REST takes it; no "5"
        return Annotated[int, BeforeValidator(_integral), Strict()]
    if annotation in (float, bool):  # JSON types as given: no "5" for 5, no 1 for true
        return Annotated[annotation, Strict()]
    if annotation in (datetime, date):
        # A string for memsys to read (ISO 8601): the SDK's own reading would make 123 a
        # time in 1970 before memsys saw it, where REST refuses.
        kind = "date-time" if annotation is datetime else "date"
        return Annotated[str, Field(json_schema_extra={"format": kind})]
    return annotation


def _integral(value: Any) -> Any:
    """5.0 as 5 (a JSON number without a fraction is an integer); anything else as given,
    for the strict check to refuse ("5", true, 5.5)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def published(info: FieldInfo, required: bool = False) -> FieldInfo:
    """What the JSON schema shows of a field: description, bounds, default."""
    schema: dict[str, Any] = {"description": info.description}
    if info.alias:
        schema["alias"] = info.alias
    if isinstance(info.json_schema_extra, dict):
        schema["json_schema_extra"] = info.json_schema_extra
    if not required and not info.is_required():
        schema["default"] = info.default
    return Field(**schema)  # type: ignore[no-any-return]


@functools.cache
def bare_model(model: type[BaseModel]) -> type[BaseModel]:
    fields: dict[str, Any] = {
        name: (field_type(info), info.default) for name, info in model.model_fields.items()
    }
    return create_model(model.__name__, __config__=ConfigDict(extra="forbid"), **fields)


def tool_signature(op: Operation, returns: Any) -> inspect.Signature:
    """The tool function's signature for the SDK: keyword arguments as published, and
    `returns` (the SDK's result type) as its return annotation."""
    params = []
    fields = op.input.model_fields if op.input else {}
    for name, info in fields.items():
        if name in op.mcp_hidden:
            continue
        required = info.is_required() or name in op.mcp_required
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if required else info.default,
                annotation=field_type(info, required),
            )
        )
    return inspect.Signature(params, return_annotation=returns)


def plain(value: Any) -> Any:
    """Arguments as JSON-like data (the SDK hands nested objects over as models)."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_unset=True)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
