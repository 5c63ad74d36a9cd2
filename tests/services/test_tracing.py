"""Every retrieval is traced: each tool that retrieves, a failed call, retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text

from memsys import runner
from memsys.config import get_settings
from memsys.db import session_scope
from memsys.errors import InvalidInput, NotFound
from memsys.models import Event, QueryTrace
from memsys.operations import BY_NAME, OPERATIONS, Operation
from memsys.retrieval import fusion, pipeline
from memsys.retrieval import trace as shape
from memsys.schemas import MemoryRecallIn
from memsys.services import debug, memories
from memsys.services.debug_attribution import record_of
from tests.factories import store

# Values for the required fields of tools that retrieve (besides the query).
SAMPLE = {"query": "when do backups run", "max_tokens": 400, "filters": {}}

RETRIEVING = [
    op
    for op in OPERATIONS
    if op.read_only and op.input is not None and "query" in op.input.model_fields
]


def test_the_retrieving_tools_are_found() -> None:
    names = {op.name for op in RETRIEVING}
    assert {"search", "memory_recall", "memory_context", "search_nodes"} <= names


def traces() -> list[QueryTrace]:
    with session_scope() as s:
        rows = list(s.scalars(select(QueryTrace).order_by(QueryTrace.created_at)))
        s.expunge_all()
        return rows


@pytest.fixture
def memories_stored(embedder: Any) -> list[str]:
    return [
        store("Backups run nightly at 02:00 UTC", memory_type="fact").id,
        store("The office plant needs water on Mondays").id,
        store("Backups are kept for 30 days in the eu-west bucket", memory_type="fact").id,
    ]


@pytest.mark.parametrize("op", RETRIEVING, ids=lambda op: op.name)
def test_every_retrieving_tool_writes_a_full_trace(op: Operation, memories_stored: Any) -> None:
    assert op.input is not None
    data = {
        n: SAMPLE[n] for n, f in op.input.model_fields.items() if f.is_required() or n == "query"
    }
    op.run(data)
    (row,) = traces()
    assert row.operation == op.name and row.query == SAMPLE["query"]
    assert row.error is None and row.event_id is not None
    # Every channel's pool, the fused candidates, fusion version and weights, the call.
    assert set(row.channels) >= {"dense", "lexical", "graph", "neighbours", "terms"}
    dense_pool = shape.pools(record_of(row))["dense"]
    dense_ids = [c[0] for c in dense_pool]
    assert set(memories_stored) <= set(dense_ids)
    scores = [c[1] for c in dense_pool]
    assert scores == sorted(scores, reverse=True)
    assert {c[0] for c in row.candidates} >= set(dense_ids)
    assert row.fusion["version"] == fusion.FUSION_VERSION
    assert row.fusion["dense"] == fusion.CURRENT.dense
    assert row.fusion["request"]["limit"] >= 1 and row.fusion["embedding"]
    assert row.fusion["input"]["query"] == SAMPLE["query"]
    assert {"embed_ms", "dense_ms", "lexical_ms", "fuse_ms", "total_ms"} <= set(row.timings)


def test_forget_by_query_is_traced_too(memories_stored: Any) -> None:
    BY_NAME["memory_forget"].run({"query": "office plant watering", "min_similarity": 0.5})
    (row,) = traces()
    assert row.operation == "memory_forget"
    assert [r["id"] for r in row.retrieved] == [memories_stored[1]]


def test_a_failed_retrieval_keeps_its_trace(memories_stored: Any, monkeypatch: Any) -> None:
    """A real statement timeout in the dense channel: the call fails, its writes roll back,
    and its trace is written afterwards in a transaction of its own."""
    real = pipeline._first

    def slow(session: Any, *args: Any) -> Any:
        session.execute(text("SET LOCAL statement_timeout = '20ms'"))
        session.execute(text("SELECT pg_sleep(1)"))
        return real(session, *args)

    monkeypatch.setattr(pipeline, "_first", slow)
    with pytest.raises(Exception, match="statement timeout"):
        runner.execute(memories.recall, MemoryRecallIn, {"query": "backups"})
    (row,) = traces()
    assert row.operation == "memory_recall" and row.error_type == "system_error"
    assert row.error is not None and "statement timeout" in row.error
    assert "SELECT" not in row.error and "pg_sleep" not in row.error  # no SQL leaks
    assert row.retrieved == [] and row.timings["total_ms"] > 0
    with session_scope() as s:  # the query event came with it; access counts rolled back
        assert (
            s.scalar(select(func.count()).select_from(Event).where(Event.event_type == "query"))
            == 1
        )
        assert s.scalar(text("SELECT count(*) FROM memory_access")) == 0


def test_a_refused_call_leaves_no_trace(memories_stored: Any) -> None:
    with pytest.raises(NotFound):
        runner.execute(memories.recall, MemoryRecallIn, {"query": "x", "namespace": "nope"})
    assert traces() == []


def test_prune_keeps_the_retention_window(memories_stored: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(debug, "PRUNE_BATCH", 1)  # two old traces: deleted batch by batch
    for query in ("backups", "plant", "bucket"):
        runner.execute(memories.recall, MemoryRecallIn, {"query": query})
    with session_scope() as s:
        old = list(s.scalars(select(QueryTrace).order_by(QueryTrace.id)))[:2]
        for row in old:
            row.created_at = row.created_at - timedelta(days=31)
        s.execute(
            text(
                "UPDATE event SET occurred_at = occurred_at - interval '31 days' "
                "WHERE subject_id = ANY(:ids)"
            ),
            {"ids": [r.id for r in old]},
        )
    with session_scope() as s:
        now = s.scalar(select(func.now()))
        assert now is not None
        assert debug.prune_traces(s, now) == 2
    left = traces()
    assert len(left) == 1 and left[0].id not in {r.id for r in old}
    with session_scope() as s:
        queries = s.scalars(select(Event.subject_id).where(Event.event_type == "query")).all()
        assert queries == [left[0].id]
    out = BY_NAME["debug_prune_traces"].run({"older_than_days": 1})
    assert out.deleted == 0 and out.older_than_days == 1  # type: ignore[attr-defined]


def test_a_retention_of_0_keeps_every_trace(memories_stored: Any, monkeypatch: Any) -> None:
    """0 is "no limit" as in every other MEMSYS_ setting: it used to put the cut-off at now,
    so each `memsys maintain` deleted every trace."""
    runner.execute(memories.recall, MemoryRecallIn, {"query": "backups"})
    monkeypatch.setenv("MEMSYS_TRACE_RETENTION_DAYS", "0")
    get_settings.cache_clear()
    try:
        with session_scope() as s:
            now = s.scalar(select(func.now()))
            assert now is not None
            assert debug.prune_traces(s, now + timedelta(days=3650)) == 0
        with pytest.raises(InvalidInput, match="older_than_days"):
            BY_NAME["debug_prune_traces"].run({})
    finally:
        monkeypatch.delenv("MEMSYS_TRACE_RETENTION_DAYS")
        get_settings.cache_clear()
    assert len(traces()) == 1


def test_the_query_log_filters_to_the_traces_of_searches_over_all_namespaces(
    embedder: Any, client: Any
) -> None:
    """The log lists an admin's search over every namespace under '*' (a token's over all of
    its own under '*@<token id>'), yet `namespace` took only a namespace's name: '*' was an
    invalid namespace on MCP, REST and the CLI, so those traces could not be picked out."""
    import json

    from memsys.mcp.server import call
    from tests.cli.helpers import run

    store("Backups run nightly at 02:00", namespace="project:ops")
    runner.execute(memories.recall, MemoryRecallIn, {"query": "when do backups run"})
    runner.execute(
        memories.recall,
        MemoryRecallIn,
        {"query": "when do backups run", "namespace": "project:ops"},
    )
    wanted = {"namespace": "*"}
    mcp = call(BY_NAME["debug_query_log"], wanted)
    assert mcp["success"], mcp
    rest = client.get("/v1/debug/query-log", params=wanted)
    assert rest.status_code == 200, rest.text
    cli = run("trace", "log", "--namespace", "*", "--json")
    assert cli.exit_code == 0, cli.output
    for answer in (mcp["data"], rest.json(), json.loads(cli.output)):
        assert [t["namespace"] for t in answer["traces"]] == ["*"] and answer["total"] == 1
    token_traces = client.get("/v1/debug/query-log", params={"namespace": "*@tok_x"})
    assert token_traces.json()["traces"] == []  # no such token's: none, not a refusal
    refused = client.get("/v1/debug/query-log", params={"namespace": "*x"})
    assert refused.status_code == 422 and "namespace" in refused.text


def test_the_query_log_refuses_an_operation_no_tool_has() -> None:
    """A misspelt namespace is refused ("not 'no traces'"); a misspelt operation listed no
    traces, as if the tool had never run."""
    from memsys.mcp.server import call

    refused = call(BY_NAME["debug_query_log"], {"operation": "memory_recal"})
    assert not refused["success"] and "memory_recal" in refused["error"]
    assert "memory_recall" in refused["error"]  # what it may have meant
    known = call(BY_NAME["debug_query_log"], {"operation": "memory_recall"})
    assert known["success"] and known["data"]["traces"] == []


def test_a_trace_id_is_read_as_why_reads_a_memory_id(embedder: Any) -> None:
    """`why` trims the memory id; every debugger tool answered "Trace not found: qry_… "
    for a trace id pasted with a space, and "Trace not found: " for a blank one."""
    from memsys.mcp.server import call

    store("Backups run nightly at 02:00 UTC")
    trace_id = runner.execute(
        memories.recall, MemoryRecallIn, {"query": "when do backups run"}
    ).trace_id
    pasted = f" {trace_id}\n"
    for name, extra in (
        ("debug_trace", {}),
        ("debug_replay", {}),
        ("debug_why", {"memory_id": "mem_0"}),
        ("debug_feedback", {"verdict": "right"}),
    ):
        answer = call(BY_NAME[name], {"trace_id": pasted, **extra})
        assert answer["success"], (name, answer)
        blank = call(BY_NAME[name], {"trace_id": "  ", **extra})
        assert not blank["success"] and "cannot be empty" in blank["error"], (name, blank)
