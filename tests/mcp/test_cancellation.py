"""`memsys mcp` calls that end before they finish: cancelled by the client
(notifications/cancelled), or left when the client goes away (stdin closes). A call
cancelled before it commits writes nothing; a call that committed stays done."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

from tests.conftest import lock_waiters, table_counts, until
from tests.mcp.test_stdio import CLIENT, _others_busy, raw_server

SET_EDITOR = {"name": "preference_set", "arguments": {"key": "editor", "value": "vim"}}


class Raw:
    """`memsys mcp` spoken to as raw JSON-RPC lines."""

    def __init__(self) -> None:
        self.proc = raw_server()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]

    def initialize(self) -> None:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}
        self.send({"id": 1, "method": "initialize", "params": params})
        assert self.read()["id"] == 1
        self.send({"method": "notifications/initialized"})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@contextmanager
def preferences_locked() -> Iterator[Connection]:
    """The preference table locked by the test: a call that writes one waits for it."""
    from memsys.db import get_engine

    holder = get_engine().connect()
    try:
        holder.exec_driver_sql("LOCK TABLE preference IN EXCLUSIVE MODE")
        yield holder
    finally:
        holder.rollback()
        holder.close()


def test_a_call_cancelled_before_it_commits_writes_nothing() -> None:
    """notifications/cancelled for a preference_set waiting for a lock: the SDK answered
    nothing (as the protocol asks), and the call went on to commit its write anyway."""
    server = Raw()
    try:
        server.initialize()
        with preferences_locked():
            server.send({"id": 2, "method": "tools/call", "params": SET_EDITOR})
            assert until(lambda: lock_waiters() == 1, 60)
            server.send(
                {"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "no"}}
            )
            time.sleep(0.5)  # the notification is read before the lock goes
        assert until(lambda: lock_waiters() == 0 and _others_busy() == 0, 30)
        server.send({"id": 3, "method": "tools/call", "params": {"name": "memory_count"}})
        answer = server.read()
        assert answer["id"] == 3  # none for the cancelled call, and the server goes on
        assert json.loads(answer["result"]["content"][0]["text"])["success"]
        assert table_counts()["preference"] == 0
        # A call that is not cancelled still writes.
        server.send({"id": 4, "method": "tools/call", "params": SET_EDITOR})
        assert server.read()["id"] == 4
        assert table_counts()["preference"] == 1
    finally:
        server.stop()


def test_stdin_closing_cancels_the_calls_in_flight_and_the_process_exits() -> None:
    """The client goes away (stdin closes) while a call waits for a lock: the process went
    on waiting, and committed the call once the lock was free; only SIGTERM stopped it.
    The lock goes well within STDIN_GRACE_S, so the call itself must hear the cancel (the
    stop after the grace would end it uncommitted whatever the call did)."""
    from memsys.mcp.server import STDIN_GRACE_S

    assert STDIN_GRACE_S >= 2.0
    server = Raw()
    try:
        server.initialize()
        with preferences_locked():
            server.send({"id": 2, "method": "tools/call", "params": SET_EDITOR})
            assert until(lambda: lock_waiters() == 1, 60)
            assert server.proc.stdin is not None
            server.proc.stdin.close()
            time.sleep(1.0)  # stdin's end is read; the call still waits for the lock
            assert server.proc.poll() is None
        assert server.proc.wait(timeout=20) == 0
        assert until(lambda: lock_waiters() == 0 and _others_busy() == 0, 30)
        assert table_counts()["preference"] == 0
    finally:
        server.stop()


def test_a_call_still_waiting_after_the_grace_ends_with_the_process() -> None:
    """stdin closed while a call waits for a lock that never goes: the process stops
    STDIN_GRACE_S later (as on SIGTERM), the lock still held, and the call is not written.
    Its statement is cancelled before the process ends: its backend went on waiting for
    the lock (and holding what the call had locked) after the process was gone, as long
    as the lock was held, since PostgreSQL sees a client gone only when it next talks."""
    server = Raw()
    try:
        server.initialize()
        with preferences_locked():
            server.send({"id": 2, "method": "tools/call", "params": SET_EDITOR})
            assert until(lambda: lock_waiters() == 1, 60)
            assert server.proc.stdin is not None
            server.proc.stdin.close()
            assert server.proc.wait(timeout=20) == 0  # the lock is still held
            assert until(lambda: lock_waiters() == 0, 10), "its backend still waits"
        assert until(lambda: lock_waiters() == 0 and _others_busy() == 0, 30)
        assert table_counts()["preference"] == 0
    finally:
        server.stop()


def test_a_finished_call_still_leaves_its_trace(embedder: object) -> None:
    """A retrieval's trace is written after its answer, under a copy of the call's context
    (memsys.deferred): that copy carried the call's cancellation flag, which the call's end
    set, so no MCP retrieval left a trace."""
    import anyio

    from memsys import deferred
    from memsys.mcp.server import build_server

    server = build_server()

    async def calls() -> None:
        await server.call_tool("memory_store", {"content": "Deploys run on Tuesdays"})
        await server.call_tool("memory_recall", {"query": "when do deploys run"})

    anyio.run(calls)
    assert deferred.settle()
    assert table_counts()["query_trace"] == 1


def test_a_cancel_after_the_answer_leaves_the_trace_written(embedder: object) -> None:
    """A cancel that comes after a retrieval answered (its flag set while its trace waits
    in memsys.deferred's writer) changes nothing: the writer's transaction runs under a copy
    of the call's context, flag included, and is exempt (db.raise_if_cancelled). The trace's
    insert is held on a lock until the flag is set, so it commits after the cancel."""
    import threading

    from memsys import db, deferred, runner
    from memsys.schemas import MemoryRecallIn
    from memsys.services import memories
    from tests.factories import store

    store("Backups run every night at two")
    assert deferred.settle()
    cancelled = threading.Event()
    holder = db.get_engine().connect()
    try:
        holder.exec_driver_sql("LOCK TABLE query_trace IN EXCLUSIVE MODE")
        with db.cancellable(cancelled):
            runner.execute(memories.recall, MemoryRecallIn, {"query": "when do backups run"})
        assert until(lambda: lock_waiters() == 1, 30)  # the writer, at the trace's insert
        cancelled.set()
    finally:
        holder.rollback()
        holder.close()
    assert deferred.settle()
    assert table_counts()["query_trace"] == 1


def test_calls_that_end_within_the_grace_call_off_the_stop(
    embedder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stdin closed while a call ran: the stop STDIN_GRACE_S later was never called off,
    so a shutdown taking longer (its drain of the deferred writes) was stopped mid-way by a
    second drain and os._exit. The call ending in time calls it off."""
    import anyio

    from memsys.mcp import server as module

    stops: list[int] = []
    monkeypatch.setattr(module, "_stop_stdio", lambda signum, frame: stops.append(signum))
    monkeypatch.setattr(module, "STDIN_GRACE_S", 0.5)
    server = module.build_server()

    async def call_then_close() -> None:
        async with anyio.create_task_group() as calls:
            calls.start_soon(server.call_tool, "memory_count", {})
            while not server.in_flight:
                await anyio.sleep(0)
            server.stdin_closed()  # as the last line of stdin is read
        assert server.in_flight == 0

    anyio.run(call_then_close)
    time.sleep(1.0)  # past the grace
    assert stops == []


def test_a_cancelled_index_directory_stops_before_its_next_file(
    embedder: object, tmp_path: Path
) -> None:
    """A cancelled index_directory went on through every file of the folder (thousands,
    holding its connection and the namespace's lock) only to roll back at its commit: it
    stops at the next file."""
    import threading

    from memsys import db
    from memsys.errors import Cancelled
    from memsys.schemas import IndexDirectoryIn
    from memsys.services import folders

    for i in range(3):
        (tmp_path / f"note{i}.md").write_text(
            f"# Note {i}\nThe build cache lives in /var/cache/{i}\n"
        )
    cancelled, read = threading.Event(), []
    with pytest.raises(Cancelled), db.cancellable(cancelled), db.session_scope() as session:
        cancelled.set()  # after the call's transaction began
        with pytest.raises(Cancelled):
            folders.index_directory(
                session,
                IndexDirectoryIn(dir_path=str(tmp_path)),
                progress=lambda step, n, total: read.append(n),
            )
    assert read == []
    assert table_counts()["document"] == 0


def test_a_cancelled_import_stops_before_its_next_batch(
    embedder: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled vault import went on writing batch after batch, only to roll back at
    its commit: it stops before the next batch (here: the edges, after the memories)."""
    import threading

    from memsys import db
    from memsys.errors import Cancelled
    from memsys.vault import apply, files, importer
    from tests.vault.test_import_batches import memory, write_jsonl

    records: list[dict[str, Any]] = [
        memory(1, "The staging database is reset every Monday"),
        memory(2, "Staging resets are announced in the ops channel"),
        {
            "kind": "edge",
            "namespace": "global",
            "type": "relates_to",
            "from_id": f"mem_{2:016x}",
            "to_id": f"mem_{1:016x}",
            "created": "2026-01-01T00:00:00+00:00",
        },
    ]
    write_jsonl(tmp_path / "snap.jsonl", records)
    cancelled = threading.Event()
    finish, edges = apply.Plan.finish, []

    def finish_then_cancel(plan: apply.Plan) -> None:
        finish(plan)
        cancelled.set()  # the client cancels while the memories are written

    monkeypatch.setattr(apply.Plan, "finish", finish_then_cancel)
    monkeypatch.setattr(apply.Plan, "edges", lambda plan, batch: edges.append(batch))
    snapshot = files.open_snapshot(tmp_path / "snap.jsonl")
    with pytest.raises(Cancelled), db.cancellable(cancelled), db.session_scope() as session:
        importer.run(session, snapshot)  # without the check, Cancelled came at the commit
    assert edges == []
    assert table_counts()["chunk"] == 0


def test_a_client_that_closes_its_end_of_stdout_stops_the_server_cleanly() -> None:
    """The client closed the pipe it reads answers from (stdin still open): the next answer
    crashed `memsys mcp` with a BrokenPipeError traceback on stderr and exit status 1."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "memsys"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        proc.stdin.write((json.dumps(init) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        proc.stdout.close()
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
        said = proc.stderr.read().decode()
        assert "Traceback" not in said and "closed" in said, said
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
