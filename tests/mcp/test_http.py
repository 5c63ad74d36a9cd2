"""MCP over streamable HTTP (`memsys serve`'s /mcp), spoken to as raw JSON-RPC POSTs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memsys.api.app import create_app
from memsys.mcp.server import MAX_HTTP_BODY
from tests.conftest import table_counts
from tests.security.helpers import http_server

ACCEPT = "application/json, text/event-stream"


class Http:
    """One MCP session at /mcp of a server in this process."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=60)
        self.headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        }
        response = self.post(
            json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        )
        self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self.headers["Mcp-Protocol-Version"] = "2025-06-18"
        self.post('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def post(self, body: str | bytes) -> httpx.Response:
        return self.http.post("/mcp", content=body, headers=self.headers)

    def ask(self, body: str | bytes) -> dict[str, Any]:
        """The JSON-RPC answer to one request (the SSE event or JSON body carrying it)."""
        response = self.post(body)
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("application/json"):
            return response.json()  # type: ignore[no-any-return]
        events = [
            json.loads(line[len("data:") :])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[len("data:") :].strip()
        ]
        return events[-1]  # type: ignore[no-any-return]

    def call(self, ident: int, name: str, arguments: str) -> dict[str, Any]:
        return self.ask(
            f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call",'
            f'"params":{{"name":"{name}","arguments":{arguments}}}}}'
        )


@pytest.fixture(scope="module")
def base(embedder: object) -> Iterator[str]:
    with http_server() as url:
        yield url


def test_a_key_given_twice_is_refused_naming_it(base: str) -> None:
    """The SDK's JSON reader kept the last of two values of a key: `content` given twice
    stored the second without a word, where REST refuses such a body (422)."""
    mcp = Http(base)
    result = mcp.call(1, "memory_store", '{"content":"first","content":"second"}')["result"]
    assert result["isError"] is True
    assert "the key 'content' is given twice" in result["structuredContent"]["error"]
    nested = mcp.call(2, "memory_store", '{"content":"x","metadata":{"a":1,"a":2}}')["result"]
    assert "the key 'a' is given twice" in nested["structuredContent"]["error"]
    assert table_counts()["chunk"] == 0
    ok = mcp.call(3, "memory_store", '{"content":"given once"}')["result"]
    assert ok["structuredContent"]["success"] is True


def test_a_call_cancelled_over_http_before_it_commits_writes_nothing(base: str) -> None:
    """notifications/cancelled over HTTP for a preference_set waiting for a lock: rolled
    back at its commit, as over stdio (tests/mcp/test_cancellation.py)."""
    from tests.conftest import lock_waiters, until
    from tests.mcp.test_cancellation import SET_EDITOR, preferences_locked
    from tests.mcp.test_stdio import _others_busy

    mcp = Http(base)
    answers: list[httpx.Response] = []
    call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": SET_EDITOR})
    with preferences_locked():
        asking = threading.Thread(target=lambda: answers.append(mcp.post(call)), daemon=True)
        asking.start()
        assert until(lambda: lock_waiters() == 1, 60)
        cancel = {"method": "notifications/cancelled", "params": {"requestId": 2}}
        assert mcp.post(json.dumps({"jsonrpc": "2.0", **cancel})).status_code == 202
        time.sleep(0.5)
    asking.join(30)
    assert until(lambda: lock_waiters() == 0 and _others_busy() == 0, 30)
    assert table_counts()["preference"] == 0
    ok = mcp.call(3, "preference_set", '{"key":"editor","value":"vim"}')["result"]
    assert ok["structuredContent"]["success"] is True


def test_a_body_past_the_limit_is_refused_without_being_held_whole(embedder: object) -> None:
    """/mcp read each POST body whole (to refuse a key given twice) before the SDK's limit
    saw it: a client sending an endless body had memsys hold all of it. Past the limit,
    what came so far goes on to the SDK, which answers 413 and reads no more."""
    import anyio

    app = create_app(background=False)
    piece = b" " * (1024 * 1024)
    most = MAX_HTTP_BODY // len(piece) + 1  # pieces the limit lets through
    pulled = 0
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        if pulled > most + 50:  # 50 MiB past the limit: the endless body was being read
            raise AssertionError("the body was read past the limit")
        return {"type": "http.request", "body": piece, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = post_scope()

    async def post() -> None:
        async with app.router.lifespan_context(app):
            with anyio.fail_after(60):
                await app(scope, receive, send)

    anyio.run(post)
    assert statuses == [413] and pulled <= most


def post_scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    """The ASGI scope of a POST to /mcp opening a session, with these headers added."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8700"),
            (b"content-type", b"application/json"),
            (b"accept", ACCEPT.encode()),
            *headers,
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8700),
    }


def test_a_body_declared_past_the_limit_is_refused_unread(embedder: object) -> None:
    """A POST whose Content-Length was past the limit had its body read (up to the limit,
    128 MiB held) before the SDK answered 413 for the size it had declared: it is refused
    with nothing of it read."""
    import anyio

    app = create_app(background=False)
    pulled = 0
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b" " * (1024 * 1024), "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = post_scope((b"content-length", str(MAX_HTTP_BODY + 1).encode()))

    async def post() -> None:
        async with app.router.lifespan_context(app):
            with anyio.fail_after(60):
                await app(scope, receive, send)

    anyio.run(post)
    assert statuses == [413] and pulled == 0


def test_a_body_is_read_off_the_event_loop(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """/mcp read each POST body (a JSON parse of up to 128 MiB) on the event loop: a 69 MB
    batch stalled every other request for seconds. The read runs on a worker thread."""
    import asyncio

    from memsys.mcp import bodies

    read = bodies.readable
    on_loop: list[bool] = []

    def readable(line: str, sdk_reads: Any) -> str:
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:  # a worker thread: no event loop runs here
            on_loop.append(False)
        return read(line, sdk_reads)

    monkeypatch.setattr(bodies, "readable", readable)
    mcp = Http(base)
    ok = mcp.call(1, "memory_store", '{"content":"read off the event loop"}')["result"]
    assert ok["structuredContent"]["success"] is True
    assert on_loop and not any(on_loop)


def test_a_batch_within_the_tool_s_limits_is_not_refused_for_its_size(base: str) -> None:
    """memory_store_batch of 80 memories with 60 KB of metadata each (within its limits:
    1,000 memories, 64 KiB of metadata each) is a 4.8 MB body: the SDK's default limit
    (4 MiB) answered it 413 "Request body too large", where stdio and REST store it."""
    mcp = Http(base)
    memories = [
        {"content": f"Batch memory number {i}", "metadata": {"blob": "m" * 60_000}}
        for i in range(80)
    ]
    answer = mcp.call(1, "memory_store_batch", json.dumps({"memories": memories}))
    assert answer["result"]["structuredContent"]["success"] is True
    assert answer["result"]["structuredContent"]["data"]["stored"] == 80
