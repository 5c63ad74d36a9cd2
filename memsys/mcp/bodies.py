"""The /mcp endpoint's POST bodies read as `memsys mcp` reads a line of stdin
(memsys.mcp.stdio.readable), off the event loop, within the SDK's size limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from starlette.datastructures import Headers

from memsys.mcp.stdio import readable


class ReadableBodies:
    """The /mcp endpoint with each POST body read as `memsys mcp` reads a line of stdin
    (memsys.mcp.stdio.readable; `sdk_reads` says whether the SDK's reader takes a text, and
    comes from memsys.mcp.server, the SDK's one importer): a call whose JSON gives a key
    twice, which the SDK would read keeping the last, is answered with the tool's error
    naming the key. A body past `limit` (the SDK's, which answers it 413) is never held
    whole: one whose Content-Length says so is passed on unread, one found so as it comes is
    passed on then. The read of a body (a parse of up to `limit` bytes) runs on a worker
    thread: on the event loop, a 69 MB batch stalled every other request for seconds."""

    def __init__(self, app: Any, limit: int, sdk_reads: Callable[[str], bool]) -> None:
        self.app, self.limit, self.sdk_reads = app, limit, sdk_reads

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or self._declared_past(scope):
            await self.app(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nobody to answer
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit:  # for the SDK to refuse: what came so far, then the rest
                await self.app(scope, _replayed(chunks, more, receive), send)
                return
        body = await anyio.to_thread.run_sync(_readable_body, b"".join(chunks), self.sdk_reads)
        await self.app(scope, _replayed([body], False, receive), send)

    def _declared_past(self, scope: Any) -> bool:
        """Whether the request's Content-Length is past the limit (the SDK answers 413)."""
        declared = Headers(scope=scope).get("content-length")
        try:
            return declared is not None and int(declared) > self.limit
        except ValueError:  # not a number: the body is read as it comes
            return False


def _readable_body(body: bytes, sdk_reads: Callable[[str], bool]) -> bytes:
    text = body.decode("utf-8", "surrogateescape")
    line = readable(text, sdk_reads)
    return body if line is text else line.encode("utf-8", "surrogateescape")


def _replayed(chunks: list[bytes], more: bool, receive: Any) -> Any:
    """An ASGI receive giving what was already read of a body as one message, then on
    (one chunk is given as it is: bytes.join of one returns it, no copy)."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": b"".join(chunks), "more_body": more}

    return replay
