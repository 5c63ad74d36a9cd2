"""The debugger's analyses: replay a trace, attribute errors, monitoring alerts, retention."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from memsys.schemas.common import Input, Output, within
from memsys.schemas.debug import TraceBody, TraceId

MAX_DAYS = 365


class ReplayIn(Input):
    trace_id: TraceId
    now: Annotated[
        bool,
        Field(
            description="Replay against today's memories with today's fusion weights "
            "(default: as of the trace's time, with the weights it used)"
        ),
    ] = False


class ReplayOut(Output):
    trace_id: str = Field(description="The trace that was replayed")
    as_of: datetime | None = Field(description="The memory state replayed (None: now)")
    fusion_version: str | None
    replay: TraceBody = Field(description="The trace the replay produced (not stored)")
    identical: bool = Field(description="True when the replay reproduced the trace exactly")
    changed_stage: str | None = Field(
        description="The first stage whose result differs: embed, dense, lexical, graph, "
        "neighbours, fusion, dedupe or output"
    )
    diff: dict[str, Any] = Field(description="Per stage: added, removed, moved, rescored")
    fields: dict[str, Any] = Field(description="Other fields that differ: original and replay")
    replay_ms: float


Days = Annotated[int, within(1, MAX_DAYS), Field(description="Days to look back (1-365)")]


class ErrorAttributionIn(Input):
    days: Days = 30


class ErrorAttributionOut(Output):
    days: int
    total_queries: int
    failed_queries: int
    judged_queries: int = Field(description="Traces that received feedback")
    failure_breakdown: dict[str, int]
    context_bug_breakdown: dict[str, int]
    context_bug_rate: float | None = Field(description="Context bugs / failed queries")


class AlertsIn(Input):
    days: Annotated[int, within(1, MAX_DAYS), Field(description="Window in days (1-365)")] = 1


class Alert(Output):
    type: str
    severity: str
    message: str
    value: float
    threshold: float


class AlertsOut(Output):
    days: int
    alerts: list[Alert]
    metrics: dict[str, float | None] = Field(
        description="latency_p95_ms, verification_failure_rate, mode_accuracy, "
        "context_bug_rate over the window (None: nothing to measure)"
    )


class PruneTracesIn(Input):
    older_than_days: Annotated[
        Annotated[int, within(1, 36_500)] | None,
        Field(description="Delete traces older than this (default: the retention setting)"),
    ] = None


class PruneTracesOut(Output):
    deleted: int
    older_than_days: int
    cutoff: datetime
