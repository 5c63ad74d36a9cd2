"""memory_query: S004's QueryResult (plan → channels → verify → curated core + extended)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from memsys.retrieval.modes import MODES
from memsys.schemas.common import (
    Input,
    NamespaceName,
    Output,
    QueryText,
    Timestamp,
    TokenBudget,
    in_utc,
    within,
)

MAX_CORE = 20
DEFAULT_BUDGET = 2500  # S002: at most 2500 tokens per response


def check_mode(value: str) -> str:
    if value not in MODES:
        raise ValueError(
            f"Unknown mode: {value!r}. Use one of: {', '.join(MODES)} "
            "(or leave it out to have it detected from the query)"
        )
    return value


def check_routable(value: str) -> str:
    if not re.search(r"\w", value):
        raise ValueError(
            f"Query has no words to route: {value!r}. Ask in words (e.g. 'what led to the outage?')"
        )
    return value


def check_past(value: datetime) -> datetime:
    moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    in_utc(moment, "as_of")
    if moment > datetime.now(UTC):
        raise ValueError(
            f"as_of is in the future ({moment.isoformat()}): give a past time, or leave it "
            "out to query the memory as it is now"
        )
    return moment


class QueryIn(Input):
    query: Annotated[
        QueryText,
        AfterValidator(check_routable),
        Field(description="What to look up, in plain words"),
    ]
    mode: Annotated[
        Annotated[str, AfterValidator(check_mode)] | None,
        Field(
            description="execution (precise, verified) | planning (broader) | brainstorming "
            "(broadest); detected from the query when left out",
            json_schema_extra={"enum": list(MODES)},
        ),
    ] = None
    namespace: Annotated[
        NamespaceName | None,
        Field(
            description="Only this namespace (e.g. 'project:myapp'); the user's preferences "
            "stored under 'global' answer in every namespace"
        ),
    ] = None
    top_k: Annotated[
        int,
        within(1, MAX_CORE),
        Field(
            description=f"Size of the curated core (1-{MAX_CORE}); the extended context adds "
            "15 / 25 / 30 more by mode",
            json_schema_extra={"minimum": 1, "maximum": MAX_CORE},
        ),
    ] = 5
    max_tokens: Annotated[
        TokenBudget,
        Field(
            description="Token budget for everything returned (output and every snippet)",
            json_schema_extra={"minimum": 1},
        ),
    ] = DEFAULT_BUDGET
    as_of: Annotated[
        Annotated[Timestamp, AfterValidator(check_past)] | None,
        Field(
            description="ISO 8601 time: answer from the memory as it was then (dates in the "
            "query are resolved against it)"
        ),
    ] = None


class QueryChunk(Output):
    id: str
    source: str  # memory | document | preference | entity | bayesian
    namespace: str
    snippet: str  # at most 200 characters (S002)
    score: float
    tokens: int  # of the snippet
    happened_at: datetime | None = None
    ground_truth: bool = False


class RoutingOut(Output):
    stores: list[str]
    reasoning: str
    matched: list[dict[str, str]]
    time_ranges: list[dict[str, str]]
    notes: list[str]


class VerificationOut(Output):
    verified: bool
    method: str  # ground_truth | agreement | none
    ground_truth_match: str | None
    confidence: float
    agreement: float | None
    checked: list[str]
    reason: str


class QueryOut(Output):
    query_id: str
    query: str
    output: str
    core_chunks: list[QueryChunk]
    extended_chunks: list[QueryChunk]
    latency_ms: float
    stores_queried: list[str]
    mode: str
    mode_confidence: float
    mode_detected: bool
    routing: RoutingOut
    verification: VerificationOut | None
    tokens_used: int
    max_tokens: int
    left_out: int
    # bayesian store (D9): x, y, method, given, hits, trials, prior, probability, known
    probability: dict[str, Any] | None = None
    timings: dict[str, Any]
