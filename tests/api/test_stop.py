"""The HTTP server's stop (as `memsys serve` stops on SIGINT or SIGTERM): uvicorn's grace
for the requests under way, then what is left of them ended — in the database too."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text

from memsys.api.app import create_app
from tests.conftest import lock_waiters, table_counts, until
from tests.security.helpers import free_port

GRACE_S = 1  # `memsys serve` gives 5 s (memsys.api.server.STOP_GRACE_S)


@contextmanager
def stoppable_server() -> Iterator[tuple[str, uvicorn.Server, threading.Thread]]:
    """A real uvicorn server with a grace before the stop cancels what runs; the caller
    stops it (should_exit) and waits for its thread."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(background=False),
            host="127.0.0.1",
            port=port,
            log_level="info",
            timeout_graceful_shutdown=GRACE_S,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert until(lambda: server.started, 60)
    try:
        yield f"http://127.0.0.1:{port}", server, thread
    finally:
        server.should_exit = True
        thread.join(60)


@contextmanager
def table_locked(name: str) -> Iterator[None]:
    """`name` locked by a transaction of another client (not a connection of memsys's)."""
    engine = create_engine(os.environ["MEMSYS_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            conn.execute(text(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE"))
            yield
            conn.rollback()
    finally:
        engine.dispose()


def test_the_stop_cancels_a_call_waiting_for_a_lock_and_it_writes_nothing(
    embedder: object,
) -> None:
    """A call waiting for a lock another transaction held outlived the stop's grace: the
    process then waited for its thread as long as the lock was held (up to the statement
    timeout), and once the lock was let go the call still wrote. The stop cancels its
    statement: its transaction is rolled back while the lock is still held."""
    answers: list[Any] = []
    before = table_counts()
    with stoppable_server() as (base, server, thread):
        with table_locked("chunk"):

            def store() -> None:
                content = {"content": "Stored by a call the stop cut off"}
                answers.append(httpx.post(f"{base}/v1/memories", json=content, timeout=600))

            caller = threading.Thread(target=store, daemon=True)
            caller.start()
            assert until(lambda: lock_waiters() == 1, 60), "the call never waited for the lock"
            server.should_exit = True
            thread.join(60)
            assert not thread.is_alive()
            assert lock_waiters() == 0  # the lock still held, the call's wait ended
            caller.join(60)
        assert until(lambda: not caller.is_alive(), 60)
    assert answers[0].status_code == 503  # it was "Internal Server Error", logged as a crash
    assert answers[0].json()["error"].startswith("The server stopped before this call answered")
    assert table_counts() == before  # nothing written, now that the lock is gone


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def large_export(embedder: object) -> Iterator[None]:
    """Enough to export that the transfer waits for a client that does not read (12 MB)."""
    header = {"kind": "header", "format": "memsys-export", "schema_version": "1.0"}
    records = [
        {
            "kind": "memory",
            "id": f"mem_{i:016x}",
            "namespace": "global",
            "type": "fact",
            "content": f"Export test memory number {i}",
            "importance": 0.5,
            "confidence": 0.5,
            "metadata": {"filler": "x" * 60_000},
            "created": "2026-01-01T00:00:00+00:00",
            "updated": "2026-01-01T00:00:00+00:00",
        }
        for i in range(1, 201)
    ]
    from fastapi.testclient import TestClient

    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as client:
        body = "\n".join(json.dumps(r) for r in [header, *records]) + "\n"
        assert client.post("/v1/import", content=body).status_code == 200
    yield


def test_an_export_the_stop_cuts_off_is_a_warning_not_a_server_error(
    large_export: None,
) -> None:
    """An export whose client still had most of it to read when the server stopped was
    logged by uvicorn as "Exception in ASGI application" (ERROR) with a traceback, and its
    transaction was left to the garbage collector. It is one warning line now."""
    seen = Records()
    watched = [logging.getLogger("uvicorn.error"), logging.getLogger("memsys")]
    with stoppable_server() as (base, server, thread):
        for logger in watched:
            logger.addHandler(seen)
        try:
            port = int(base.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port)) as client:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                request = f"GET /v1/export?format=jsonl HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
                client.sendall(request.encode())
                assert client.recv(64).startswith(b"HTTP/1.1 200")  # then it reads no more
                server.should_exit = True
                thread.join(60)
                assert not thread.is_alive()
        finally:
            for logger in watched:
                logger.removeHandler(seen)
    errors = [r for r in seen.records if r.levelno >= logging.ERROR and "Cancel" not in r.msg]
    assert errors == [], [r.getMessage() for r in errors]
    assert not [r for r in seen.records if r.exc_info], "a traceback was logged"
    cut = [r.getMessage() for r in seen.records if r.name == "memsys.api.vault"]
    assert cut == ["GET /v1/export: the server is stopping; the export was cut off"]


def test_a_cut_export_s_own_failure_is_still_logged() -> None:
    """uvicorn's report of an export memsys cut off itself is dropped (memsys logged the
    cut as a warning), but every uvicorn error of that request was dropped with it: a real
    failure after the cut (closing the export's transaction on a database gone, say) left
    no trace in the log."""
    import asyncio
    import contextvars
    import sys

    from memsys.api import vault

    def report(message: str, error: BaseException | None) -> logging.LogRecord:
        exc_info = None
        if error is not None:
            try:
                raise error
            except BaseException:
                exc_info = sys.exc_info()
        return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, message, (), exc_info)

    def kept_after_a_cut(record: logging.LogRecord) -> bool:
        def run() -> bool:
            vault._cut({"method": "GET", "path": "/v1/export"}, "the server is stopping")
            return vault.QUIET_CUTS.filter(record)

        return contextvars.copy_context().run(run)

    incomplete = report("ASGI callable returned without completing response.", None)
    assert not kept_after_a_cut(incomplete)
    assert not kept_after_a_cut(report("Exception in ASGI application\n", asyncio.CancelledError()))
    assert kept_after_a_cut(report("Exception in ASGI application\n", RuntimeError("rollback")))
    assert kept_after_a_cut(report("Something else went wrong", None))
    assert vault.QUIET_CUTS.filter(incomplete)  # a request no export cut: logged
