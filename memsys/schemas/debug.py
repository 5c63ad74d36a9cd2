"""The context-assembly debugger's reads: a trace, the query log, feedback on a trace."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from memsys.retrieval.modes import MODES
from memsys.schemas.common import (
    FILLED,
    NAMESPACE_PATTERN,
    NOTE_CHARS,
    Input,
    Offset,
    Output,
    Rule,
    check_namespace,
    limited,
    non_blank,
    within,
)
from memsys.schemas.query import check_mode

MAX_LOG_PAGE = 500
MAX_EXPECTED = 100  # ids named in one piece of feedback
ID_CHARS = 128
Mode = Annotated[str, Rule(check_mode, enum=list(MODES))]


TraceId = Annotated[
    str,
    non_blank("trace_id"),
    AfterValidator(str.strip),  # as debug_why trims its memory id: one pasted keeps a space
    Field(
        description="A trace id (the trace_id of a search, recall or context, the query_id of "
        "a memory_query)"
    ),
]


class TraceIn(Input):
    trace_id: TraceId


class FeedbackOut(Output):
    verdict: str
    note: str | None = None
    expected_ids: list[str] = []
    attribution: dict[str, Any] = {}
    error_type: str | None = None
    error_subtype: str | None = None
    at: datetime


class TraceBody(Output):
    """A trace's content: what a replay produces too (without id and time)."""

    operation: str
    query: str
    user_context: dict[str, Any] = {}
    filters: dict[str, Any]
    mode_detected: str | None = None
    mode_confidence: float | None = None
    stores_queried: list[str]
    routing_logic: str | None
    channels: dict[str, Any] = Field(
        {}, description="Each channel's candidates, best first: {id, score, rank}"
    )
    candidates: list[dict[str, Any]] = Field(
        description="Every fused candidate, best first: {id, score (fused), rank}"
    )
    fusion: dict[str, Any] = Field(
        {}, description="Fusion version, method and weights; the retrieval request"
    )
    retrieved: list[dict[str, Any]]
    timings: dict[str, Any]
    verification: dict[str, Any] | None = None
    output: dict[str, Any] | None
    total_latency_ms: float
    error: str | None
    error_type: str | None
    error_subtype: str | None = None


class TraceOut(TraceBody):
    id: str
    namespace: str
    created_at: datetime
    feedback: list[FeedbackOut]


# Where a call over every namespace is logged: '*' (an admin's), '*@<token id>' (a scoped
# token's, over all of its namespaces: memsys.models.log, the row security's migrations).
ALL_NAMESPACES_LOGGED = re.compile(r"^\*(@[A-Za-z0-9_.:-]{1,126})?$")


def check_logged_namespace(value: str) -> str:
    """A namespace, or where calls over every namespace are logged ('*', '*@<token id>')."""
    value = value.strip()
    if ALL_NAMESPACES_LOGGED.match(value):
        return value
    if value.startswith("*"):
        raise ValueError(
            f"Invalid namespace: {value[:140]!r}. Use a namespace, '*' (calls over every "
            "namespace) or '*@<token id>' (a token's calls over all of its namespaces)"
        )
    return check_namespace(value)


LoggedNamespace = Annotated[
    str,
    AfterValidator(check_logged_namespace),
    Field(
        json_schema_extra={
            "pattern": f"^(?:{ALL_NAMESPACES_LOGGED.pattern[1:-1]}|"
            f"{NAMESPACE_PATTERN.pattern[1:-1]})$",
            "maxLength": 128,
        }
    ),
]


class QueryLogIn(Input):
    limit: Annotated[int, within(1, MAX_LOG_PAGE), Field(description="Page size (1-500)")] = 50
    offset: Annotated[Offset, Field(description="Traces to skip")] = 0
    namespace: Annotated[
        LoggedNamespace | None,
        Field(
            description="Only traces of this namespace; '*' those of calls over every "
            "namespace, '*@<token id>' a token's over all of its namespaces"
        ),
    ] = None
    operation: Annotated[
        Annotated[str, FILLED] | None, Field(description="Only this tool, e.g. memory_recall")
    ] = None


class QueryLogItem(Output):
    id: str
    namespace: str
    created_at: datetime
    operation: str
    query: str
    results: int
    total_latency_ms: float
    error: str | None
    error_type: str | None = None


class QueryLogOut(Output):
    traces: list[QueryLogItem]
    total: int
    limit: int
    offset: int


def _trimmed_ids(ids: list[str]) -> list[str]:
    """Ids trimmed as `why` trims its memory id (one pasted from a table keeps a space)."""
    return [i.strip() for i in ids]


class TraceFeedbackIn(Input):
    trace_id: TraceId
    verdict: Annotated[
        Literal["right", "wrong"], Field(description="Was the retrieved context right?")
    ]
    note: Annotated[
        Annotated[str, limited(NOTE_CHARS)] | None,
        Field(description="What was wrong, in your words"),
    ] = None
    expected_ids: Annotated[
        Annotated[
            list[Annotated[str, non_blank("An expected id"), limited(ID_CHARS, "An expected id")]],
            AfterValidator(_trimmed_ids),
        ]
        | None,
        Field(
            description="Ids that should have been returned: the answer says where each was "
            f"(at most {MAX_EXPECTED})",
            max_length=MAX_EXPECTED,
        ),
    ] = None
    expected_mode: Annotated[
        Mode | None,
        Field(description="The query mode that was right (checks the mode detected)"),
    ] = None


class TraceFeedbackOut(Output):
    trace_id: str
    verdict: str
    attribution: dict[str, Any] = Field(
        description="Per expected id: returned at rank N, or 'not returned'"
    )
    error_type: str | None = Field(
        None, description="context_bug, model_bug or system_error (None when right)"
    )
    error_subtype: str | None = Field(
        None,
        description="For a context bug: wrong_store_queried, wrong_mode_detected, "
        "wrong_lifecycle_filter or retrieval_ranking_error",
    )
    reason: str | None = Field(None, description="Why it was classified so")
    where_lost: dict[str, Any] = Field(
        {}, description="Per expected id: which channels saw it and which stage lost it"
    )


class TraceWhyIn(Input):
    trace_id: TraceId
    memory_id: Annotated[
        str,
        non_blank("memory_id"),
        limited(ID_CHARS),
        Field(description="The memory (or chunk) id to explain"),
    ]


class TraceWhyOut(Output):
    trace_id: str
    memory_id: str
    stage: str = Field(
        description="returned, or the stage that lost it: scope, retrieval, fusion, dedupe, output"
    )
    reason: str
    returned_rank: int | None
    fused_rank: int | None
    fused_score: float | None
    channels: dict[str, Any] = Field(description="Per channel: rank and score, or not in pool")
    memory: dict[str, Any] | None = Field(
        None, description="The memory as of the trace: namespace, type, validity"
    )
