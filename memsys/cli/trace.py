"""`memsys trace`: how traces, the query log and feedback read on a terminal (the commands
come from memsys.operations.debug)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from memsys.cli.output import echo, short, show_table

if TYPE_CHECKING:
    from memsys.schemas.debug import QueryLogOut, TraceFeedbackOut, TraceOut

app = typer.Typer(no_args_is_help=True)


def show(r: TraceOut) -> None:
    echo(f"{r.id}  {r.operation}  {r.namespace}  {r.created_at:%Y-%m-%d %H:%M:%S}")
    echo(f"query: {r.query}")
    echo(f"filters: {json.dumps(r.filters)}  routing: {r.routing_logic}")
    timings = ", ".join(f"{k} {v} ms" for k, v in r.timings.items())
    echo(f"timings: {timings}")
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
        echo(f"  {memory_id}: {where}")
