"""stdin for `memsys mcp`: a request the MCP SDK cannot read still gets its answer.

The SDK reads each line with pydantic, which refuses a lone surrogate escape (`"\\ud83d"`,
half an emoji cut by a client) and JSON nested ~200 levels deep; it then drops the line,
and the client waits for an answer forever. Python's own JSON reader takes both, so such a
`tools/call` line is rewritten into the same call with one argument, UNREADABLE, holding
the reason; memsys answers it as it answers any bad input: the tool's error result, by the
same rules (`memsys.schemas.common.check_values`) that refuse it over REST and the CLI.
Any other request (`resources/read`, `tools/list`, …) is rewritten into the same method
with parameters the SDK refuses, so the client gets JSON-RPC's "Invalid request parameters"
under its id. A notification waits for no answer and goes on as it came.

A request that is not JSON-RPC 2.0 as the SDK reads it (no `"jsonrpc": "2.0"`, params
that are not an object, a line cut short) is refused so too, and each request of a batch
(a JSON array: MCP takes one request per line) under its own id.

A line that gives a key twice in one object (`{"content":"a","content":"b"}`) is read by the
SDK, keeping the last value without a word; it is refused so too, naming the key, as REST
and the CLI refuse it. The HTTP transport reads each POST body through the same filter.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from memsys import jsonvalue
from memsys.schemas.common import check_values

log = logging.getLogger(__name__)
UNREADABLE = "memsys:unreadable"  # the argument carrying why a call's JSON was refused
DEEP = 100  # brackets on a line beyond which pydantic may refuse it (its limit is ~200)


# Besides an escape and many brackets, what makes a line unreadable to both readers: a raw
# control character (JSON allows one only escaped: a NUL a client wrote raw), a byte that is
# not UTF-8 (stdin is read with surrogateescape: it comes as a lone surrogate), and an
# integer of more digits than Python converts (4,300). The SDK dropped such a line unanswered.
_RAW = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
_NOT_UTF8 = re.compile(r"[\udc80-\udcff]")
_DIGITS = re.compile(r"\d{4301}")


def _suspect(line: str) -> bool:
    """Cheap: only such a line can fail the SDK's reader."""
    return (
        "\\u" in line
        or line.count("{") + line.count("[") > DEEP
        or _RAW.search(line) is not None
        or (len(line) > 4_300 and _DIGITS.search(line) is not None)
    )


def readable(line: str, sdk_reads: Callable[[str], bool]) -> str:
    """The line, or a tool call the SDK can read in place of one it cannot (`sdk_reads`:
    whether the SDK's own reader takes a line; memsys.mcp.server alone imports the SDK)."""
    parsed, twice = _parsed(line)
    shape = _shape(parsed)
    if twice is None and shape is None and not _suspect(line):
        return line
    if twice is None and sdk_reads(line):
        return line
    try:
        try:
            message: Any = json.loads(line)
        except RecursionError:  # deeper than Python reads: the call's id from its top level
            message = _top_level(line)
            reason = "The call's arguments are nested too deeply to read"
        except json.JSONDecodeError as exc:  # a raw control character
            message = _top_level(line)
            why = exc.msg.removesuffix(" at").lower()
            reason = f"The call's JSON could not be read: {why} at character {exc.pos}"
        except ValueError:  # an integer of more digits than Python converts
            message = _top_level(line)
            reason = "The call's JSON could not be read: a number has too many digits"
        else:
            params = message.get("params") if isinstance(message, dict) else None
            if isinstance(params, dict) and message.get("method") == "tools/call":
                params = params.get("arguments")  # a tool's arguments, named as the tool's
            reason = _why(params)
            if twice is not None and reason == _UNREAD:
                reason = f"{_UNREAD}: {twice}; give it once"
            elif shape is not None and reason == _UNREAD:
                reason = f"The request is not one MCP reads: {shape}"
        if _NOT_UTF8.search(line):
            reason = "The call is not UTF-8 text: it holds a byte that is not UTF-8"
        if not isinstance(message, dict):
            return line
        return _rewritten(message, reason) or line
    except Exception:  # never the reader's end: what cannot be rewritten goes as it came
        return line


_FAILED = object()  # a line Python's reader could not read either


def _parsed(line: str) -> tuple[Any, str | None]:
    """The line read as JSON (or _FAILED), and why it is refused if an object in it gives a
    key twice: the SDK's reader keeps the last one without a word (`{"content":"a",
    "content":"b"}` stored "b"), where REST and the CLI refuse such JSON."""
    try:
        return jsonvalue.loads(line), None
    except jsonvalue.KeyTwice as exc:
        return _FAILED, str(exc)
    except (ValueError, RecursionError):  # unreadable for another reason: see `readable`
        return _FAILED, None


def _shape(message: Any) -> str | None:
    """What keeps a message from being a JSON-RPC 2.0 message as the SDK reads it, in the
    parts a client gets wrong (the SDK dropped such a request unanswered); None when it
    looks right. A line Python could not read is left to `readable`."""
    if message is _FAILED:
        return "its JSON could not be read"
    if isinstance(message, list):
        return BATCH
    if not isinstance(message, dict):
        return "it is not a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'it lacks "jsonrpc": "2.0"'
    if "method" in message and not isinstance(message["method"], str):
        return "its method is not a string"
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return "its params are not an object"
    return None


BATCH = "a batch (a JSON array) of requests; MCP takes one request per line"


_UNREAD = "The call's JSON could not be read"


def _why(arguments: Any) -> str:
    if isinstance(arguments, dict):
        try:
            for name, value in arguments.items():
                check_values(name, "an argument's name")
                check_values(value, str(name))
        except ValueError as exc:
            return str(exc)
    return _UNREAD


def _top_level(line: str) -> dict[str, Any]:
    """The top-level `id` and `method` of a JSON object too deep for json.loads, read by
    walking its text (a nested "id" in the arguments is not the request's)."""
    found: dict[str, Any] = {}
    decoder = json.JSONDecoder(strict=False)  # a raw control character in a string too
    with contextlib.suppress(ValueError):  # a line cut inside a value: what came before it
        _walk(line, found, decoder)
    return found


def _walk(line: str, found: dict[str, Any], decoder: json.JSONDecoder) -> None:
    depth, i, key = 0, 0, None
    while i < len(line):
        char = line[i]
        if char == '"':
            text, end = decoder.raw_decode(line, i)  # the whole string, escapes and all
            if depth == 1 and key is None and line[end:].lstrip().startswith(":"):
                key = text
                i = line.index(":", end) + 1
                continue
            if depth == 1 and key in ("id", "method"):
                found[key] = text
            key = None if depth == 1 else key
            i = end
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif depth == 1 and key == "id" and (char.isdigit() or char == "-"):
            found["id"], i = decoder.raw_decode(line, i)
            key = None
            continue
        if depth == 1 and char == ",":
            key = None
        i += 1


def _safe(text: str) -> str:
    """Text a line may carry: a lone surrogate written as its escape (the SDK's reader
    refuses one in the answer's request as in the question's)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _rewritten(message: dict[str, Any], reason: str) -> str | None:
    """The request as one the SDK reads and answers under the same id: a tool call with its
    arguments replaced by the reason, any other method with a `_meta` that is not an object
    (the SDK answers "Invalid request parameters"); None for a notification or a line
    without a method (nobody waits for an answer to it)."""
    ident, method, params = message.get("id"), message.get("method"), message.get("params")
    if not isinstance(ident, int | str) or isinstance(ident, bool) or not isinstance(method, str):
        return None
    if isinstance(ident, str):
        ident = _safe(ident)
    if method == "tools/call":
        name = params.get("name") if isinstance(params, dict) else None
        refused = {
            "name": _safe(name) if isinstance(name, str) else "",
            "arguments": {UNREADABLE: _safe(reason)},
        }
    else:
        refused = {"_meta": _safe(reason)}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": _safe(method), "params": refused})


async def lines_of(file: Any, limit: int) -> AsyncIterator[str]:
    """The lines of a blocking binary file (stdin), each read in a worker thread that is
    abandoned if the reader is cancelled: the server stopping (the client closed its end of
    stdout) does not wait in that read until the client writes again. A line of more than
    `limit` bytes is never held whole: what is past the limit is read and dropped as it
    comes, and the request is refused under its id (read from the line's opening, or its
    ending: _too_long)."""
    while True:
        raw = await anyio.to_thread.run_sync(file.readline, limit + 1, abandon_on_cancel=True)
        if not raw:
            return
        if len(raw) > limit and not raw.endswith(b"\n"):
            opening, ending = raw[:PEEK], raw[-PEEK:]
            while raw and not raw.endswith(b"\n"):  # the rest of the line, dropped
                raw = await anyio.to_thread.run_sync(file.readline, PIECE, abandon_on_cancel=True)
                ending = (ending + raw)[-PEEK:]
            refused = _too_long(_text(opening), _text(ending), limit)
            if refused is not None:
                yield refused
            continue
        yield raw.decode("utf-8", "surrogateescape")


PEEK = 64 * 1024  # of a line past the limit, what is read for its id and method
PIECE = 1024 * 1024  # what is read at a time of the rest of such a line


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _too_long(opening: str, ending: str, limit: int) -> str | None:
    """The refusal of a request whose line is over `limit` bytes, under the id its opening
    gives, or its ending when the id is its last member (as the TypeScript SDK writes a
    request: method, params, jsonrpc, id); None when neither gives one (a notification:
    nobody waits for an answer to it)."""
    reason = (
        f"The request is over the {limit}-byte limit of one MCP message: it was not read. "
        "Send less in one call (a batch in parts, a snapshot by path: memory_import)"
    )
    log.warning("memsys mcp: a request of more than %d bytes was refused unread", limit)
    message = _top_level(opening)
    last = _LAST_ID.search(ending[-_LAST_ID_CHARS:])
    if "id" not in message and last is not None:
        message["id"] = json.loads(last.group(1))
    return _rewritten(message, reason)


# The id as the last member of the line's object: right before the closing brace that ends
# the line (a member of an object nested in it would be followed by that object's brace).
_LAST_ID = re.compile(r',\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')
_LAST_ID_CHARS = 4096  # of the ending, where that id is looked for


class ReadableLines:
    """An async line source (what the SDK's stdio_server reads) with each line readable;
    `closed` is called when the lines end (stdin closed: the client went away)."""

    def __init__(
        self, lines: Any, sdk_reads: Callable[[str], bool], closed: Callable[[], None]
    ) -> None:
        self._lines, self._sdk_reads, self._closed = lines, sdk_reads, closed

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if line.lstrip().startswith("["):
                for refused in batch_refused(line):
                    yield refused
                continue
            yield readable(line, self._sdk_reads)
        self._closed()


def batch_refused(line: str) -> list[str]:
    """For a batch (a JSON array of requests, which MCP no longer takes and the SDK dropped
    unanswered), each request in it refused under its own id; the line as it came when it
    is no batch Python can read (the SDK answers or drops it as before)."""
    try:
        batch = json.loads(line)
    except (ValueError, RecursionError):
        return [line]
    if not isinstance(batch, list):
        return [line]
    refused = [_rewritten(m, f"The request came in {BATCH}") for m in batch if isinstance(m, dict)]
    return [r for r in refused if r is not None]
