"""A client that goes away in the middle of a streamed answer leaves nothing open behind it."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from memsys.api import vault
from memsys.db import get_engine
from tests.conftest import table_counts


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees objects meanwhile: what a cycle holds stays held, as it
    does in a server between two runs of the garbage collector."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# An ASGI request for GET /v1/export?format=jsonl, as uvicorn (ASGI spec 2.3) sends it
# (other requests: this with their method, path and headers).
EXPORT_SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.3"},
    "http_version": "1.1",
    "method": "GET",
    "scheme": "http",
    "path": "/v1/export",
    "raw_path": b"/v1/export",
    "root_path": "",
    "query_string": b"format=jsonl",
    "headers": [(b"host", b"127.0.0.1:8700")],
    "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8700),
}


def _export_cut_after_first_piece(app: Any) -> list[bytes]:
    """GET /v1/export over ASGI as uvicorn runs it, the client hanging up once the first
    piece of the body arrived; the pieces it got."""
    got: list[bytes] = []
    asked, first, gone = anyio.Event(), anyio.Event(), anyio.Event()

    async def receive() -> dict[str, Any]:
        if not asked.is_set():
            asked.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await first.wait()
        gone.set()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if gone.is_set():
            return  # as uvicorn does: what is sent after the hang-up goes nowhere
        if message["type"] == "http.response.body" and message.get("body"):
            got.append(message["body"])
            first.set()
            await gone.wait()  # the client reads no more: sending waits until it hangs up

    scope = dict(EXPORT_SCOPE)

    async def call() -> None:
        with anyio.fail_after(30):
            await app(scope, receive, send)

    anyio.run(call)
    return got


def test_an_export_the_client_left_gives_its_connection_back(
    client: TestClient, no_collector: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export's read-only transaction stayed open after the client hung up (idle in
    transaction, holding a pooled connection and a snapshot) until the garbage collector
    happened to close the paused generator: a dozen cut downloads held most of the pool."""
    for i in range(3):
        stored = client.post("/v1/memories", json={"content": f"Exported memory number {i}"})
        assert stored.status_code == 201
    monkeypatch.setattr(vault, "PIECE", 16)  # a piece per record: the cut comes mid-export
    whole = client.get("/v1/export", params={"format": "jsonl"}).content
    pool = get_engine().pool
    before = pool.checkedout()  # type: ignore[attr-defined]
    got = b"".join(_export_cut_after_first_piece(client.app))
    assert got and whole.startswith(got) and len(got) < len(whole)  # cut mid-export
    assert pool.checkedout() == before  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/import", "/v1/graph/import"])
def test_a_client_that_hangs_up_before_its_body_is_not_a_server_crash(
    client: TestClient, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client gone before its whole body arrived (a cut upload of a large import) was
    logged as a crash — 'POST /v1/import failed', then uvicorn's 'Exception in ASGI
    application', two tracebacks — and the exception escaped the app."""
    sent: list[dict[str, Any]] = []
    parts = iter(
        [
            {"type": "http.request", "body": b'{"content": "half a bo', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )

    async def receive() -> dict[str, Any]:
        return next(parts, {"type": "http.disconnect"})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        **EXPORT_SCOPE,
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8700"),
            (b"content-type", b"application/json"),
            (b"content-length", b"1000"),
        ],
    }

    async def call() -> None:
        with anyio.fail_after(30):
            await client.app(scope, receive, send)

    anyio.run(call)  # raised ClientDisconnect
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert table_counts()["chunk"] == 0


def test_an_export_that_fails_midway_is_not_ended_as_whole(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export's database connection lost after its first memory went out: the body was
    ended as if complete (a 200 with a cut JSON lines file that reads as a whole one, curl
    exit 0), the middleware relaying it having swallowed the failure. Now the failure
    reaches the server, which breaks the response off (the client sees a cut transfer)."""
    for i in range(3):
        client.post("/v1/memories", json={"content": f"Exported memory number {i}"})
    monkeypatch.setattr(vault, "PIECE", 16)
    sent: list[dict[str, Any]] = []
    asked, ended = False, [0]

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if b'"kind": "memory"' in message.get("body", b"") and not ended[0]:
            # The export's snapshot transaction is open, the edges not read yet: end it.
            with get_engine().connect() as conn:
                ended[0] = conn.scalar(
                    text(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND state = 'idle in transaction'"
                    )
                )

    scope = dict(EXPORT_SCOPE)

    async def call() -> None:
        with anyio.fail_after(30):
            await client.app(scope, receive, send)

    with pytest.raises(Exception):  # noqa: B017 (whatever it is, it reaches the server)
        anyio.run(call)
    assert ended == [1]
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert bodies and all(m.get("more_body") for m in bodies)  # never ended as complete


@pytest.fixture
def statement_timeout_1s(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """MEMSYS_STATEMENT_TIMEOUT_S=1 for one test, on an engine of its own."""
    from memsys import db
    from memsys.config import get_settings

    monkeypatch.setenv("MEMSYS_STATEMENT_TIMEOUT_S", "1")
    get_settings.cache_clear()
    db.set_engine(None)
    try:
        yield
    finally:
        monkeypatch.delenv("MEMSYS_STATEMENT_TIMEOUT_S")
        get_settings.cache_clear()
        db.set_engine(None)


def test_an_export_that_cannot_start_is_an_error_not_a_cut_200(
    client: TestClient, statement_timeout_1s: None
) -> None:
    """The export's first statements ran only once the answer had begun: a database that
    could not answer (down, or a table locked past the statement limit) gave a 200 and a
    body that broke off, with no word of why. They run before the answer now: a 503 that
    says what happened, as any other call gives."""
    client.post("/v1/memories", json={"content": "Exported memory"})
    holder = create_engine(get_engine().url).connect()
    try:
        holder.exec_driver_sql("LOCK TABLE chunk IN ACCESS EXCLUSIVE MODE")  # held on purpose
        answer = client.get("/v1/export", params={"format": "jsonl"})
    finally:
        holder.rollback()
        holder.close()
        holder.engine.dispose()
    assert answer.status_code == 503
    assert answer.json()["success"] is False and "statement timeout" in answer.json()["error"]
    assert client.get("/v1/export", params={"format": "jsonl"}).status_code == 200


def test_an_export_whose_client_stopped_reading_is_cut_and_gives_its_connection_back(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that stays connected but reads no more (its socket buffers full): sending
    the next piece waited for as long as it stayed, its export's transaction open (idle in
    transaction, a pooled connection and a snapshot held). Now a piece that cannot be sent
    within EXPORT_SEND_TIMEOUT_S ends the response, cut (never ended as complete)."""
    for i in range(3):
        client.post("/v1/memories", json={"content": f"Exported memory number {i}"})
    monkeypatch.setattr(vault, "PIECE", 16)
    monkeypatch.setattr(vault, "EXPORT_SEND_TIMEOUT_S", 0.5)
    pool = get_engine().pool
    before = pool.checkedout()  # type: ignore[attr-defined]
    sent: list[dict[str, Any]] = []
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await anyio.sleep_forever()  # the client never hangs up
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and any(
            m["type"] == "http.response.body" for m in sent
        ):
            await anyio.sleep_forever()  # the first piece went out; the next never drains
        sent.append(message)

    async def call() -> None:
        with anyio.fail_after(20):
            await client.app(dict(EXPORT_SCOPE), receive, send)

    anyio.run(call)  # TimeoutError: the stalled client held the export
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert len(bodies) == 1 and bodies[0]["more_body"]  # cut, never ended as complete
    assert pool.checkedout() == before  # type: ignore[attr-defined]
