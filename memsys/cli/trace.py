"""`memsys trace`: how traces, the query log and feedback read on a terminal (the commands
come from memsys.operations.debug)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from memsys.cli.output import echo, short, show_table

if TYPE_CHECKING:
    from memsys.schemas.debug import QueryLogOut, TraceFeedbackOut, TraceOut, TraceWhyOut
    from memsys.schemas.debug_replay import (
        AlertsOut,
        ErrorAttributionOut,
        PruneTracesOut,
        ReplayOut,
    )

app = typer.Typer(no_args_is_help=True)


def show(r: TraceOut) -> None:
    echo(f"{r.id}  {r.operation}  {r.namespace}  {r.created_at:%Y-%m-%d %H:%M:%S}")
    echo(f"query: {r.query}")
    echo(f"filters: {json.dumps(r.filters)}  routing: {r.routing_logic}")
    timings = ", ".join(f"{k} {v} ms" for k, v in r.timings.items())
    echo(f"timings: {timings}")
    if r.fusion.get("version"):
        pools = ", ".join(f"{k} {len(v)}" for k, v in r.channels.items() if k != "terms")
        echo(f"fusion: {r.fusion['version']}  candidates: {len(r.candidates)} ({pools})")
    if r.error:
        echo(f"error ({r.error_type}): {r.error}")
    elif r.error_type:
        echo(f"attributed: {r.error_type}" + (f" / {r.error_subtype}" if r.error_subtype else ""))
    show_table(
        ["rank", "id", "score", "tokens"],
        [[n, h.get("id"), h.get("score"), h.get("tokens")] for n, h in enumerate(r.retrieved, 1)],
    )
    for f in r.feedback:
        echo(f"feedback {f.at:%Y-%m-%d %H:%M}: {f.verdict}" + (f" ({f.note})" if f.note else ""))


def log(r: QueryLogOut) -> None:
    show_table(
        ["trace", "when", "operation", "namespace", "results", "ms", "query"],
        [
            [
                t.id,
                f"{t.created_at:%m-%d %H:%M:%S}",
                t.operation,
                t.namespace,
                t.results,
                round(t.total_latency_ms, 1),
                short(t.query, 60),
            ]
            for t in r.traces
        ],
    )
    echo(f"{r.offset + 1 if r.traces else 0}-{r.offset + len(r.traces)} of {r.total}")


def feedback_given(r: TraceFeedbackOut) -> None:
    echo(f"Recorded: {r.trace_id} was {r.verdict}")
    for memory_id, where in r.attribution.items():
        if isinstance(where, dict) and "returned_at_rank" in where:
            where = f"returned at rank {where['returned_at_rank']}"
        echo(f"  {memory_id}: {where if isinstance(where, str) else json.dumps(where)}")
    feedback_classified(r)


def feedback_classified(r: TraceFeedbackOut) -> None:
    if r.error_type:
        sub = f" / {r.error_subtype}" if r.error_subtype else ""
        echo(f"  attributed: {r.error_type}{sub}: {r.reason}")
    for memory_id, where in r.where_lost.items():
        if where["stage"] != "returned":  # said above: "returned at rank N"
            echo(f"  {memory_id}: lost at {where['stage']}: {where['reason']}")


def why(r: TraceWhyOut) -> None:
    echo(f"{r.memory_id} in {r.trace_id}: {r.stage}: {r.reason}")
    rows = []
    for name, seen in r.channels.items():
        found = seen.get("rank") is not None
        rows.append([name, seen.get("rank") or "-", seen.get("score") if found else "-"])
    show_table(["channel", "rank", "score"], rows)
    if r.fused_rank is not None:
        echo(f"fused rank {r.fused_rank} (score {r.fused_score})")


def replayed(r: ReplayOut) -> None:
    when = "now" if r.as_of is None else f"as of {r.as_of:%Y-%m-%d %H:%M:%S}"
    echo(f"replay of {r.trace_id} {when} ({r.fusion_version}), {r.replay_ms} ms")
    if r.identical:
        echo("identical: every channel, rank, score and the output match the trace")
        return
    echo(f"first stage that changed: {r.changed_stage}")
    for stage, change in r.diff.items():
        parts = [f"{k} {len(v)}" for k, v in change.items() if isinstance(v, list)]
        echo(f"  {stage}: {', '.join(parts) or json.dumps(change)[:200]}")
    for name, change in r.fields.items():
        echo(
            f"  {name}: {short(json.dumps(change['original']), 60)} -> "
            f"{short(json.dumps(change['replay']), 60)}"
        )


def errors(r: ErrorAttributionOut) -> None:
    echo(
        f"last {r.days} days: {r.total_queries} queries, {r.failed_queries} failed, "
        f"{r.judged_queries} judged"
    )
    show_table(["failure", "count"], [[k, v] for k, v in r.failure_breakdown.items()])
    show_table(["context bug", "count"], [[k, v] for k, v in r.context_bug_breakdown.items()])


def alerts(r: AlertsOut) -> None:
    for a in r.alerts:
        echo(f"{a.severity.upper()} {a.type}: {a.message}")
    if not r.alerts:
        echo(f"no alerts over the last {r.days} day(s)")
    echo(", ".join(f"{k} {'-' if v is None else v}" for k, v in r.metrics.items()))


def pruned(r: PruneTracesOut) -> None:
    echo(
        f"Deleted {r.deleted} traces older than {r.older_than_days} days "
        f"(before {r.cutoff:%Y-%m-%d %H:%M})"
    )
