"""What every input and output model shares: the base classes, `parse`, and the constrained
types (namespace, query, n_results, unit interval, memory type, lifecycle) defined once.

Validation messages are S001's where S001 gives one, and each says what to do instead.
Bounds S001 publishes (minimum, maximum, enum) appear in the JSON schema through
`json_schema_extra` but are checked by memsys's own validators, so a bad value gets that
message rather than a generic validation dump. Nothing here imports SQLAlchemy: the CLI
builds its options from these models.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from memsys.config import get_settings
from memsys.errors import InvalidInput
from memsys.vocabulary import MEMORY_TYPES

NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$")
MAX_RESULTS = 50
MAX_TOKENS_LIMIT = 200_000

M = TypeVar("M", bound=BaseModel)


MAX_DEPTH = 20  # nesting of lists and objects in any input (metadata, preference values)


def check_values(value: Any, where: str = "input", depth: int = 0) -> None:
    """Text PostgreSQL cannot store, or structures no one means, refused before any work:
    a NUL character, a lone surrogate (not Unicode), nesting deeper than MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"{where} contains a NUL character (\\u0000), which cannot be stored")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where} is not valid Unicode (a lone surrogate)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            check_values(key, where, depth + 1)
            check_values(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            check_values(item, where, depth + 1)


class Input(BaseModel):
    """An operation's input: unknown fields are refused, never dropped; text that cannot be
    stored is refused before anything runs."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                check_values(value, str(name))
        return data


class Output(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ErrorOut(BaseModel):
    """Every failure, in every front end that answers JSON (memsys.envelope)."""

    success: Literal[False] = False
    error: str = Field(description="What went wrong and what to do instead")


def parse(model: type[M], data: dict[str, Any]) -> M:
    """Validate `data` as `model`; on failure raise InvalidInput with a one-line reason."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        ctx_error = (err.get("ctx") or {}).get("error")
        if err["type"] == "value_error" and ctx_error is not None:
            parts.append(str(ctx_error))
            continue
        where = ".".join(str(p) for p in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


# ---------------------------------------------------------------- checks


def check_namespace(value: str) -> str:
    value = value.strip()
    if not NAMESPACE_PATTERN.match(value):
        raise ValueError(
            f"Invalid namespace: {value!r}. Use 1-128 characters: letters, digits and _ . : / @ -"
            " (e.g. 'global', 'default', 'project:myapp')"
        )
    return value


def check_query(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("Query cannot be empty")
    limit = get_settings().max_query_chars
    if len(value) > limit:
        raise ValueError(f"Query is too long: {len(value)} characters (limit {limit})")
    return value


def check_memory_type(value: str) -> str:
    if value not in MEMORY_TYPES:
        raise ValueError(f"Invalid memory type: {value}. Use one of: {', '.join(MEMORY_TYPES)}")
    return value


def check_unit(value: float, info: ValidationInfo) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{info.field_name} must be between 0.0 and 1.0, got {value}")
    return value


def check_n_results(value: int) -> int:
    if not 1 <= value <= MAX_RESULTS:
        raise ValueError(f"n_results must be between 1 and {MAX_RESULTS}, got {value}")
    return value


def check_budget(value: int, info: ValidationInfo) -> float:
    if not 1 <= value <= MAX_TOKENS_LIMIT:
        raise ValueError(f"{info.field_name} must be between 1 and {MAX_TOKENS_LIMIT}, got {value}")
    return value


def within(low: float, high: float) -> AfterValidator:
    """A number from `low` to `high`, or "<field> must be between low and high, got v"."""

    def check(value: float, info: ValidationInfo) -> float:
        if not low <= value <= high:
            raise ValueError(f"{info.field_name} must be between {low} and {high}, got {value}")
        return value

    return AfterValidator(check)


MAX_OFFSET = 1_000_000_000  # PostgreSQL's OFFSET is a bigint: keep far below it


def check_offset(value: int) -> int:
    if not 0 <= value <= MAX_OFFSET:
        raise ValueError(f"offset must be 0 or more and at most {MAX_OFFSET}, got {value}")
    return value


def path_checker(what: str) -> AfterValidator:
    """A file or directory path: an empty one would silently mean the server's working dir."""

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(f"{what} path cannot be empty")
        return value

    return AfterValidator(check)


# ---------------------------------------------------------------- constrained types
# The checks above as types. The `Optional…`/`…Filter` forms carry their description at the
# top level (inside a union pydantic would bury it in anyOf).

CLOCK_SKEW = timedelta(minutes=5)


def check_as_of(value: datetime | None) -> datetime | None:
    """An instant in the past (a naive time is UTC); the future is refused, not guessed at."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    if value > datetime.now(UTC) + CLOCK_SKEW:
        raise ValueError(f"as_of {value.isoformat()} is in the future; give a past time or omit it")
    return value


AsOf = Annotated[
    datetime | None,
    AfterValidator(check_as_of),
    Field(description="Read the graph as it was at this time (ISO 8601; default: now)"),
]
NamespaceName = Annotated[
    str,
    AfterValidator(check_namespace),
    Field(json_schema_extra={"pattern": NAMESPACE_PATTERN.pattern, "maxLength": 128}),
]
NamespaceFilter = Annotated[
    NamespaceName | None,
    Field(description="Only this namespace (e.g. 'global', 'project:myapp')"),
]
QueryText = Annotated[str, AfterValidator(check_query)]
OptionalQuery = Annotated[QueryText | None, Field(description="Optional search query")]
NResults = Annotated[
    int,
    AfterValidator(check_n_results),
    Field(
        description=f"Maximum number of results to return (1-{MAX_RESULTS})",
        json_schema_extra={"minimum": 1, "maximum": MAX_RESULTS},
    ),
]
UnitInterval = Annotated[float, AfterValidator(check_unit)]
MinRelevance = Annotated[
    UnitInterval | None,
    Field(
        description="Only results at least this relevant (0.0-1.0; relevance is absolute: "
        "unrelated hits score low)",
        json_schema_extra={"minimum": 0.0, "maximum": 1.0},
    ),
]
TokenBudget = Annotated[int, AfterValidator(check_budget)]
Offset = Annotated[int, AfterValidator(check_offset)]
MemoryType = Annotated[
    str,
    AfterValidator(check_memory_type),
    Field(description="Type of memory", json_schema_extra={"enum": list(MEMORY_TYPES)}),
]
MemoryTypeFilter = Annotated[
    Annotated[str, AfterValidator(check_memory_type)] | None,
    Field(description="Only this memory type"),
]
Lifecycle = Literal["personal", "project", "session"]
LifecycleFilter = Annotated[Lifecycle | None, Field(description="personal | project | session")]
