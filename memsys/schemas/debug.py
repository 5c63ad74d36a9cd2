"""The context-assembly debugger's reads: a trace, the query log, feedback on a trace."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from memsys.schemas.common import Input, NamespaceName, Offset, Output, within

MAX_LOG_PAGE = 500


TraceId = Annotated[str, Field(description="A trace id (trace_id of a search, recall or context)")]


class TraceIn(Input):
    trace_id: TraceId


class FeedbackOut(Output):
    verdict: str
    note: str | None = None
    expected_ids: list[str] = []
    attribution: dict[str, Any] = {}
    at: datetime


class TraceOut(Output):
    id: str
    namespace: str
    created_at: datetime
    operation: str
    query: str
    filters: dict[str, Any]
    stores_queried: list[str]
    routing_logic: str | None
    candidates: list[dict[str, Any]]
    retrieved: list[dict[str, Any]]
    timings: dict[str, Any]
    output: dict[str, Any] | None
    total_latency_ms: float
    error: str | None
    error_type: str | None
    feedback: list[FeedbackOut]


class QueryLogIn(Input):
    limit: Annotated[int, within(1, MAX_LOG_PAGE), Field(description="Page size (1-500)")] = 50
    offset: Annotated[Offset, Field(description="Traces to skip")] = 0
    namespace: Annotated[
        NamespaceName | None, Field(description="Only traces of this namespace")
    ] = None
    operation: Annotated[str | None, Field(description="Only this tool, e.g. memory_recall")] = None


class QueryLogItem(Output):
    id: str
    namespace: str
    created_at: datetime
    operation: str
    query: str
    results: int
    total_latency_ms: float
    error: str | None


class QueryLogOut(Output):
    traces: list[QueryLogItem]
    total: int
    limit: int
    offset: int


class TraceFeedbackIn(Input):
    trace_id: TraceId
    verdict: Annotated[
        Literal["right", "wrong"], Field(description="Was the retrieved context right?")
    ]
    note: Annotated[str | None, Field(description="What was wrong, in your words")] = None
    expected_ids: Annotated[
        list[str] | None,
        Field(description="Ids that should have been returned: the answer says where each was"),
    ] = None


class TraceFeedbackOut(Output):
    trace_id: str
    verdict: str
    attribution: dict[str, Any] = Field(
        description="Per expected id: returned at rank N, or 'not returned'"
    )
