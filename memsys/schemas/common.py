"""What every input and output model shares: the base classes, `parse`, and the constrained
types (namespace, query, n_results, unit interval, memory type, lifecycle) defined once.

Validation messages are S001's where S001 gives one, and each says what to do instead.
Bounds S001 publishes (minimum, maximum, enum) appear in the JSON schema through
`json_schema_extra` but are checked by memsys's own validators, so a bad value gets that
message rather than a generic validation dump. Nothing here imports SQLAlchemy: the CLI
builds its options from these models.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from memsys.config import get_settings
from memsys.errors import InvalidInput, clauses, shortened
from memsys.vocabulary import MEMORY_TYPES

NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$")
MAX_RESULTS = 50
MAX_TOKENS_LIMIT = 200_000

M = TypeVar("M", bound=BaseModel)

# The text rules as JSON Schema patterns (ECMA 262 syntax, which Python's re reads alike), so
# that the published contract says what memsys refuses. TEXT_PATTERN goes on every input
# string without a narrower rule (memsys.schemas.contract); a lone surrogate, also refused,
# cannot be written in a pattern (it is not a character) and is stated in the descriptions.
TEXT_PATTERN = r"^[^\x00]*$"
# What str.strip() removes (str.isspace), spelled out so that every regex engine agrees.
SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NON_BLANK_PATTERN = rf"^[^\x00]*[^\x00{SPACE}][^\x00]*$"


# Characters that show nothing: spaces, controls, and the format characters text carries
# unseen (soft hyphen, zero-width, bidi, BOM); and on their own, the combining marks of the
# blocks that belong to no script (diacritics, for symbols, half marks): one attaches to the
# character before it, and a lone "\u0301" shows nothing (or a dotted circle). Spelled out,
# not looked up by Unicode category, so that the published JSON Schema pattern says exactly
# what the check refuses.
COMBINING = r"\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
INVISIBLE = (
    SPACE + r"\x00-\x08\x0e-\x1b\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u2066-\u206f\ufeff" + COMBINING
)
_SHOWN = re.compile(f"[^{INVISIBLE}]")
_SHOWN_WITH_MARKS = re.compile(f"[^{INVISIBLE.removesuffix(COMBINING)}]")
VISIBLE_PATTERN = rf"^[^\x00]*[^{INVISIBLE}][^\x00]*$"
STORED_VISIBLE_PATTERN = rf"^[^\x00]*[^{INVISIBLE.removesuffix(COMBINING)}][^\x00]*$"
# C0 and C1 control characters (a tab, \x1f), and the bidirectional controls that reorder
# what a reader sees ("Trojan Source"): never in a name.
CONTROL_CHARS = r"\x00-\x1f\x7f-\x9f"
BIDI_CHARS = r"\u202a-\u202e\u2066-\u2069"
CONTROL = re.compile(f"[{CONTROL_CHARS}]")
NAME_BREAKERS = re.compile(f"[{CONTROL_CHARS}{BIDI_CHARS}]")
PATTERN_END = r"$(?![\s\S])"  # `$` alone matches before a final newline in Python's re
NAME_CHARACTERS = rf"^[^{CONTROL_CHARS}{BIDI_CHARS}]*{PATTERN_END}"


def visible(text: str, *, marks: bool = False) -> bool:
    """Whether the text shows at least one character (a zero-width space, a BOM or a
    combining accent alone does not). `marks`: a combining mark counts, as it did before
    that rule — what import reads, so that a database's own export of text it stored then
    imports again."""
    return (_SHOWN_WITH_MARKS if marks else _SHOWN).search(text) is not None


MAX_DEPTH = 20  # nesting of lists and objects in any input (metadata, preference values)


def check_values(value: Any, where: str = "input", depth: int = 0) -> None:
    """Text PostgreSQL cannot store, or structures no one means, refused before any work:
    a NUL character, a lone surrogate (not Unicode), nesting deeper than MAX_DEPTH, NaN or
    Infinity (Python's JSON reads them; JSON and PostgreSQL have no such numbers)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where} is {value}: NaN and Infinity are not JSON numbers")
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


def parse(model: type[M], data: dict[str, Any], context: dict[str, Any] | None = None) -> M:
    """Validate `data` as `model`; on failure raise InvalidInput with a one-line reason."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise InvalidInput(describe_validation_error(exc, model.model_fields)) from None


def describe_validation_error(exc: ValidationError, known: Iterable[str] = ()) -> str:
    """One line for every error; an unknown top-level field names the one it may stand for
    (`type` for `memory_type`) among `known`."""
    parts = []
    for err in exc.errors():
        ctx_error = (err.get("ctx") or {}).get("error")
        if err["type"] == "value_error" and ctx_error is not None:
            parts.append(str(ctx_error))
            continue
        where = ".".join(str(p) for p in err["loc"]) or "input"
        hint = _meant(where, known) if err["type"] == "extra_forbidden" else None
        parts.append(f"{where}: {err['msg']}" + (f" (did you mean {hint}?)" if hint else ""))
    return clauses(parts)


def _meant(given: str, known: Iterable[str]) -> str | None:
    names = list(known)
    ends = [n for n in names if n.endswith(f"_{given}") or n.startswith(f"{given}_")]
    close = ends or difflib.get_close_matches(given, names, n=1, cutoff=0.75)
    return close[0] if len(close) >= 1 and (not ends or len(ends) == 1) else None


# ---------------------------------------------------------------- checks


class Rule:
    """A check memsys runs itself (with its own message), published in the JSON schema as
    the keywords that say the same, so the OpenAPI and MCP schemas state what is refused.
    Without `check` it only publishes (for a rule another validator enforces)."""

    def __init__(self, check: Callable[..., Any] | None = None, **keywords: Any) -> None:
        self.check, self.keywords = check, keywords

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        if self.check is None:
            return handler(source)
        return AfterValidator(self.check).__get_pydantic_core_schema__(source, handler)

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        published = handler(schema)
        published.update(self.keywords)
        return published


def given(*groups: tuple[str, ...], only_one: bool = False, alone: bool = False) -> dict[str, Any]:
    """JSON Schema for "at least one of these groups of fields is given, not null" (with
    `only_one`: exactly one; with `alone`: and no field of another group given either) — a
    rule a model's validator or service checks — for a model's `json_schema_extra`."""
    fields = [f for group in groups for f in group]

    def one(group: tuple[str, ...]) -> dict[str, Any]:
        properties: dict[str, Any] = {f: {"not": {"type": "null"}} for f in group}
        if alone:
            properties |= {f: {"type": "null"} for f in fields if f not in group}
        return {"required": list(group), "properties": properties}

    return {"oneOf" if only_one or alone else "anyOf": [one(group) for group in groups]}


def one_way(ways: Iterable[tuple[str, bool]], wording: str) -> None:
    """Refuse input naming more than one of the ways a call picks what it acts on (the
    others would be dropped): `ways` is (name, given) pairs, `wording` says the choice
    with a `{given}` for the names given."""
    named = [name for name, given in ways if given]
    if len(named) > 1:
        raise ValueError(wording.format(given=" and ".join(named)))


NOT_BLANK = Rule(minLength=1, pattern=NON_BLANK_PATTERN)  # "… cannot be empty" (after strip)
VISIBLE_TEXT = Rule(minLength=1, pattern=VISIBLE_PATTERN)  # "… has no visible character"
STORED_TEXT = Rule(minLength=1, pattern=STORED_VISIBLE_PATTERN)  # as stored_content_text


def check_namespace(value: str) -> str:
    value = value.strip()
    if not NAMESPACE_PATTERN.match(value):
        raise ValueError(
            f"Invalid namespace: {shortened(repr(value), 140)}. Use 1-128 characters: "
            "letters, digits and _ . : / @ - (e.g. 'global', 'default', 'project:myapp')"
        )
    return value


def check_query(value: str) -> str:
    """A query trimmed, in Unicode's composed form (NFC), as memories are stored."""
    value = unicodedata.normalize("NFC", value.strip())
    if not value:
        raise ValueError("Query cannot be empty")
    limit = get_settings().max_query_chars
    if len(value) > limit:
        raise ValueError(f"Query is too long: {len(value)} characters (limit {limit})")
    return value


def check_memory_type(value: str) -> str:
    if value not in MEMORY_TYPES:
        raise ValueError(
            f"Invalid memory type: {shortened(value, 64)}. Use one of: {', '.join(MEMORY_TYPES)}"
        )
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


def within(low: float, high: float) -> Rule:
    """A number from `low` to `high`, or "<field> must be between low and high, got v"."""

    def check(value: float, info: ValidationInfo) -> float:
        if not low <= value <= high:
            raise ValueError(f"{info.field_name} must be between {low} and {high}, got {value}")
        return value

    return Rule(check, minimum=low, maximum=high)


MAX_OFFSET = 1_000_000_000  # PostgreSQL's OFFSET is a bigint: keep far below it


def check_offset(value: int) -> int:
    if not 0 <= value <= MAX_OFFSET:
        raise ValueError(f"offset must be 0 or more and at most {MAX_OFFSET}, got {value}")
    return value


def non_blank(what: str) -> Rule:
    """Text that is not empty or only spaces, or "<what> cannot be empty"."""

    def check(value: str) -> str:
        if not value.strip():
            raise ValueError(f"{what} cannot be empty")
        return value

    return Rule(check, minLength=1, pattern=NON_BLANK_PATTERN)


def _filled(value: str, info: ValidationInfo) -> str:
    if not value.strip():
        raise ValueError(f"{info.field_name} cannot be empty: leave it out instead")
    return value


# An optional identifier or filter given as blank text (a session id of spaces, a filter of
# ""): refused by the field's name, never stored as a key nor matched against nothing.
FILLED = Rule(_filled, minLength=1, pattern=NON_BLANK_PATTERN)


def path_checker(what: str) -> Rule:
    """A file or directory path: an empty one would silently mean the server's working dir."""
    return non_blank(f"{what} path")


def limited(limit: int, what: str | None = None) -> Rule:
    """Text of at most `limit` characters, or "<what> is too long: N characters (limit L)"
    (`what`: the field's name unless given, e.g. for the items of a list): a free-text field
    is stored, and nothing needs megabytes of it."""

    def check(value: str, info: ValidationInfo) -> str:
        if len(value) > limit:
            name = what or info.field_name
            raise ValueError(f"{name} is too long: {len(value):,} characters (limit {limit:,})")
        return value

    return Rule(check, maxLength=limit)


NOTE_CHARS = 8_000  # a note, a context, an error message: a paragraph or a stack trace head


def _in_utc_range(value: date, name: str) -> date:
    """A time whose offset takes it out of the years 1-9999 in UTC ("0001-01-01T00:00+14:00")
    is refused: every reader turns it into UTC (and PostgreSQL would store a year BC that
    no read of the memory could give back)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        in_utc(value, name)
    return value


def _iso(kind: type[date], what: str, form: str) -> Callable[[Any, ValidationInfo], Any]:
    """A day or a time is ISO 8601 text (or the Python object from Python callers): pydantic
    would also read a number, or text such as "0" or "0.5", as seconds since 1970, which no
    caller means."""

    def parse(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, kind):
            return _in_utc_range(value, info.field_name or what)
        if isinstance(value, str):
            try:
                parsed = kind.fromisoformat(value.strip())
            except ValueError:
                pass
            else:
                return _in_utc_range(parsed, info.field_name or what)
        hint = _PLUS_READ_AS_SPACE if isinstance(value, str) and _LOST_PLUS.search(value) else ""
        raise ValueError(f"Invalid {info.field_name or what}: {value!r}. Use {form}{hint}")

    return parse


# `…T10:00:00 01:00`: an offset whose `+` a URL's query string turned into a space.
_LOST_PLUS = re.compile(r"\d \d{2}(:?\d{2})?\s*$")
_PLUS_READ_AS_SPACE = " (in a URL's query string a '+' reads as a space: write it as %2B)"


# ---------------------------------------------------------------- constrained types
# The checks above as types. The `Optional…`/`…Filter` forms carry their description at the
# top level (inside a union pydantic would bury it in anyOf).

CLOCK_SKEW = timedelta(minutes=5)


def check_past(value: datetime | None, info: ValidationInfo) -> datetime | None:
    """check_as_of's rule, the value kept as given (a naive time stays naive: an observation
    envelope's canonical text, its identity, does not change)."""
    check_as_of(value, info)
    return value


def in_utc(value: datetime, name: str) -> datetime:
    """`value` in UTC, as every reader takes it; 0001-01-01T00:00:00+05:00 is before year 1
    there (OverflowError, an HTTP 500, where a ValueError refuses it)."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{name} {value.isoformat()} is outside the years 1-9999 in UTC") from None


def check_as_of(value: datetime | None, info: ValidationInfo) -> datetime | None:
    """An instant in the past (a naive time is UTC), in UTC; the future is refused, not
    guessed at, with the field's name (as_of, reference_time, valid_from). In UTC, because
    PostgreSQL reads no UTC offset past 15:59 and ISO 8601 allows up to 23:59: "+23:59" went
    to the database as given (DataError, HTTP 500)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = in_utc(value, info.field_name or "time")
    if value > datetime.now(UTC) + CLOCK_SKEW:
        raise ValueError(
            f"{info.field_name or 'time'} {value.isoformat()} is in the future; give a past "
            "time or omit it"
        )
    return value


SecretWarnings = Annotated[  # `= Field(default_factory=list)` where used (mypy sees it)
    list[str],
    Field(description="Secret-like strings found in what was written (it is stored all the same)"),
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
QueryText = Annotated[str, AfterValidator(check_query), NOT_BLANK]
OptionalQuery = Annotated[QueryText | None, Field(description="Optional search query")]
NResults = Annotated[
    int,
    AfterValidator(check_n_results),
    Field(
        description=f"Maximum number of results to return (1-{MAX_RESULTS})",
        json_schema_extra={"minimum": 1, "maximum": MAX_RESULTS},
    ),
]
UnitInterval = Annotated[float, Rule(check_unit, minimum=0.0, maximum=1.0)]
MinRelevance = Annotated[
    UnitInterval | None,
    Field(
        description="Only results at least this relevant (0.0-1.0; relevance is absolute: "
        "unrelated hits score low)",
        json_schema_extra={"minimum": 0.0, "maximum": 1.0},
    ),
]
TokenBudget = Annotated[
    int, AfterValidator(check_budget), Rule(minimum=1, maximum=MAX_TOKENS_LIMIT)
]
Offset = Annotated[int, AfterValidator(check_offset), Rule(minimum=0, maximum=MAX_OFFSET)]
Timestamp = Annotated[  # ISO 8601 text only
    datetime, BeforeValidator(_iso(datetime, "time", "ISO 8601, e.g. '2026-01-31T12:00:00Z'"))
]
Day = Annotated[date, BeforeValidator(_iso(date, "day", "YYYY-MM-DD, e.g. '2026-01-31'"))]
AsOf = Annotated[
    Timestamp | None,
    AfterValidator(check_as_of),
    Field(description="Read the graph as it was at this time (ISO 8601; default: now)"),
]
MemoryType = Annotated[
    str,
    AfterValidator(check_memory_type),
    Field(description="Type of memory", json_schema_extra={"enum": list(MEMORY_TYPES)}),
]
MemoryTypeFilter = Annotated[
    Annotated[str, Rule(check_memory_type, enum=list(MEMORY_TYPES))] | None,
    Field(description="Only this memory type"),
]
Lifecycle = Literal["personal", "project", "session"]
LifecycleFilter = Annotated[Lifecycle | None, Field(description="personal | project | session")]
