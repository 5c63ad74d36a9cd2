"""A retrieval's trace and access counts are written after it answers (memsys.deferred)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import select, text

from memsys import deferred, runner
from memsys.db import get_engine, session_scope
from memsys.models import Event, QueryTrace
from memsys.schemas import MemoryRecallIn
from memsys.services import memories
from tests.factories import store


def recall_in_thread(*queries: str) -> tuple[threading.Thread, dict[str, Any]]:
    answer: dict[str, Any] = {}

    def call() -> None:
        for query in queries:
            answer[query] = runner.run(memories.recall, MemoryRecallIn(query=query))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, answer


def test_recalls_answer_while_their_traces_wait_and_a_trace_keeps_its_calls_time(
    embedder: Any,
) -> None:
    ids = [store("Backups run nightly at 02:00 UTC").id, store("Backups last 30 days").id]
    with get_engine().connect() as blocker:
        blocker.begin()
        # Inserts into query_trace wait for this lock; reads do not.
        blocker.execute(text("LOCK TABLE query_trace IN EXCLUSIVE MODE"))
        # Two recalls: neither waits for its own trace, nor the second for the first's
        # (a call that waited would sit out the writer's 10 s settle limit).
        thread, answer = recall_in_thread("when do backups run", "how long are backups kept")
        thread.join(timeout=8)
        assert not thread.is_alive(), "a recall waited for a trace write"
        out = answer["when do backups run"]
        assert {m.id for m in out.memories} == set(ids)
        with get_engine().connect() as reader:
            written = reader.scalar(
                text("SELECT count(*) FROM query_trace WHERE id = :id"), {"id": out.trace_id}
            )
        assert written == 0  # the answer is out, its trace is not yet
        blocker.rollback()

    deferred.settle()
    with session_scope() as s:
        traces = [
            s.scalars(select(QueryTrace).where(QueryTrace.id == a.trace_id)).one()
            for a in answer.values()
        ]
        events = [s.scalars(select(Event).where(Event.id == t.event_id)).one() for t in traces]
        accessed = set(
            s.execute(
                text("SELECT DISTINCT accessed_at FROM memory_access WHERE memory_id = ANY(:ids)"),
                {"ids": ids},
            ).scalars()
        )
    assert [r["id"] for r in traces[0].retrieved] == [m.id for m in out.memories]
    assert [e.occurred_at for e in events] == [t.created_at for t in traces]
    assert accessed == {t.created_at for t in traces}  # each call's accesses at its time


def test_deferred_rows_carry_the_calls_transaction_time(embedder: Any) -> None:
    memory = store("Releases are tagged from the main branch").id
    with deferred.collecting(), session_scope() as s:  # what the runner does
        called_at = s.scalar(text("SELECT now()"))
        out = memories.recall(s, MemoryRecallIn(query="where are releases tagged from"))
    deferred.settle()
    with session_scope() as s:
        trace = s.scalars(select(QueryTrace).where(QueryTrace.id == out.trace_id)).one()
        accessed = s.scalar(
            text("SELECT accessed_at FROM memory_access WHERE memory_id = :id"), {"id": memory}
        )
    # Not the time of the writer's own (later) transaction: a replay as of the trace sees
    # the rows the call saw, and the call's accesses fall at the call.
    assert trace.created_at == called_at
    assert accessed == called_at


def test_each_transaction_of_a_session_gets_its_own_time() -> None:
    """The time a call's deferred rows carry is its own transaction's, never the one before
    it on the same session (whose freed object a new transaction may reuse the id of)."""
    from sqlalchemy.orm import Session

    from memsys.db import transaction_time
    from memsys.services import namespaces

    seen = []
    with Session(get_engine()) as session:
        with session.begin():
            namespaces.ensure(session, "times")
        for _ in range(20):
            with session.begin():
                namespaces.require(session, "times")  # reads now() along
            with session.begin():
                seen.append((transaction_time(session), session.scalar(text("SELECT now()"))))
    assert all(kept == actual for kept, actual in seen)


def test_the_next_call_sees_the_last_ones_deferred_writes(embedder: Any) -> None:
    memory = store("The deploy window is Tuesday afternoon")
    out = runner.run(memories.recall, MemoryRecallIn(query="when can we deploy"))
    # No settle here: opening a transaction waits for what earlier calls left to write.
    with session_scope() as s:
        assert s.scalar(select(QueryTrace.id).where(QueryTrace.id == out.trace_id))
        count = s.scalar(
            text("SELECT count(*) FROM memory_access WHERE memory_id = :id"), {"id": memory.id}
        )
    assert count == 1


def test_a_process_that_ends_right_after_a_recall_leaves_its_trace(embedder: Any) -> None:
    store("The staging database is rebuilt every Sunday")
    script = (
        "from memsys import runner\n"
        "from memsys.schemas import MemoryRecallIn\n"
        "from memsys.services import memories\n"
        "out = runner.run(memories.recall, MemoryRecallIn(query='staging database'))\n"
        "print(out.trace_id)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    trace_id = done.stdout.strip().splitlines()[-1]
    with session_scope() as s:
        assert s.scalar(select(QueryTrace.id).where(QueryTrace.id == trace_id))


def test_memsys_mcp_stopped_with_sigterm_writes_its_last_answers_traces(embedder: Any) -> None:
    store("Incident reviews happen on Thursday mornings")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "memsys"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:

        def send(message: dict[str, Any]) -> None:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            proc.stdin.flush()

        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            }
        )
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        arguments = {"query": "when are incident reviews"}
        send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {"name": "memory_recall", "arguments": arguments},
            }
        )
        answer = json.loads(json.loads(proc.stdout.readline())["result"]["content"][0]["text"])
        proc.send_signal(signal.SIGTERM)  # stdin still open: a stop, not the end of input
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    with session_scope() as s:
        assert s.scalar(select(QueryTrace.id).where(QueryTrace.id == answer["data"]["trace_id"]))
