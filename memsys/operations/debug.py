"""The rows of the context-assembly debugger (memsys.services.debug)."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import debug as d
from memsys.schemas import debug_replay as r

TRACE_CLI = "memsys.cli.trace"

DEBUG_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="debug_trace",
        summary="A retrieval's trace: query, filters, routing, candidates, what was returned, "
        "per-stage timings, and any feedback given on it.",
        service="debug:trace",
        input=d.TraceIn,
        output=d.TraceOut,
        effect="read",
        rest=(Rest("GET", "/debug/trace/{trace_id}"),),
        cli=Cli("trace show", arguments=("trace_id",), render=f"{TRACE_CLI}:show"),
    ),
    Operation(
        name="debug_query_log",
        summary="Recent retrievals, newest first, page by page.",
        service="debug:query_log",
        input=d.QueryLogIn,
        output=d.QueryLogOut,
        effect="read",
        rest=(Rest("GET", "/debug/query-log"),),
        cli=Cli("trace log", render=f"{TRACE_CLI}:log"),
    ),
    Operation(
        name="debug_feedback",
        summary="Say whether a retrieval was right or wrong (and which memories it should "
        "have returned); the answer says where each expected memory was.",
        service="debug:feedback",
        input=d.TraceFeedbackIn,
        output=d.TraceFeedbackOut,
        effect="write",
        rest=(Rest("POST", "/debug/trace/{trace_id}/feedback"),),
        cli=Cli(
            "trace feedback",
            arguments=("trace_id", "verdict"),
            flags={"expected_ids": ("--expected",)},
            render=f"{TRACE_CLI}:feedback_given",
        ),
    ),
    Operation(
        name="debug_why",
        summary="Why a memory was or was not in a traced result: which channels saw it and "
        "at what rank, its fused rank, and the stage that dropped it (or its returned rank).",
        service="debug:why",
        input=d.TraceWhyIn,
        output=d.TraceWhyOut,
        effect="read",
        rest=(Rest("GET", "/debug/trace/{trace_id}/why/{memory_id}"),),
        cli=Cli("trace why", arguments=("trace_id", "memory_id"), render=f"{TRACE_CLI}:why"),
    ),
    Operation(
        name="debug_replay",
        summary="Replay a traced retrieval against the memories as of its time, with the "
        "fusion weights it used (or now=true: today's memories and weights), and diff the "
        "traces stage by stage. Writes nothing.",
        service="debug_replay:replay",
        input=r.ReplayIn,
        output=r.ReplayOut,
        effect="read",
        rest=(Rest("POST", "/debug/replay/{trace_id}"),),
        cli=Cli("trace replay", arguments=("trace_id",), render=f"{TRACE_CLI}:replayed"),
    ),
    Operation(
        name="debug_error_attribution",
        summary="Failures over the last N days: context bugs (wrong store, wrong mode, "
        "wrong lifecycle filter, ranking error), model bugs and system errors.",
        service="debug_attribution:error_attribution",
        input=r.ErrorAttributionIn,
        output=r.ErrorAttributionOut,
        effect="read",
        rest=(Rest("GET", "/debug/error-attribution"),),
        cli=Cli("trace errors", render=f"{TRACE_CLI}:errors"),
    ),
    Operation(
        name="debug_monitoring_alerts",
        summary="Active alerts: p95 latency, verification failure rate, mode accuracy and "
        "context-bug rate against their thresholds (MEMSYS_ALERT_* settings).",
        service="debug_attribution:monitoring_alerts",
        input=r.AlertsIn,
        output=r.AlertsOut,
        effect="read",
        rest=(Rest("GET", "/debug/monitoring/alerts"),),
        cli=Cli("trace alerts", render=f"{TRACE_CLI}:alerts"),
    ),
    Operation(
        name="debug_prune_traces",
        summary="Delete traces (and their query events) older than the retention "
        "(MEMSYS_TRACE_RETENTION_DAYS, default 30) or older_than_days.",
        service="debug:prune",
        input=r.PruneTracesIn,
        output=r.PruneTracesOut,
        effect="destructive",
        rest=(Rest("POST", "/debug/traces/prune"),),
        cli=Cli("trace prune", render=f"{TRACE_CLI}:pruned"),
    ),
)
