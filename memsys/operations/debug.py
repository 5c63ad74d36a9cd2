"""The rows of the context-assembly debugger (memsys.services.debug)."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import debug as d

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
)
