"""stdin for `memsys mcp`: a tool call the MCP SDK cannot read still gets its answer.

The SDK reads each line with pydantic, which refuses a lone surrogate escape (`"\\ud83d"`,
half an emoji cut by a client) and JSON nested ~200 levels deep; it then drops the line,
and the client waits for an answer forever. Python's own JSON reader takes both, so such a
`tools/call` line is rewritten into the same call with one argument, UNREADABLE, holding
the reason; memsys answers it as it answers any bad input: the tool's error result, by the
same rules (`memsys.schemas.common.check_values`) that refuse it over REST and the CLI.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from memsys.schemas.common import check_values

UNREADABLE = "memsys:unreadable"  # the argument carrying why a call's JSON was refused
DEEP = 100  # brackets on a line beyond which pydantic may refuse it (its limit is ~200)
_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_NAME = re.compile(r'"name"\s*:\s*"([A-Za-z0-9_.-]{1,64})"')


def _suspect(line: str) -> bool:
    """Cheap: only a line with a \\u escape or many brackets can fail the SDK's reader."""
    return "\\u" in line or line.count("{") + line.count("[") > DEEP


def readable(line: str, sdk_reads: Callable[[str], bool]) -> str:
    """The line, or a tool call the SDK can read in place of one it cannot (`sdk_reads`:
    whether the SDK's own reader takes a line; memsys.mcp.server alone imports the SDK)."""
    if not _suspect(line) or sdk_reads(line):
        return line
    try:
        message: Any = json.loads(line)
    except RecursionError:  # deeper than Python reads: find the call by its text
        return _rewritten(line, None, "The call's arguments are nested too deeply to read")
    except ValueError:
        return line  # not JSON at all: the SDK answers that itself
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return line
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return _rewritten(line, message, _why(arguments))


def _why(arguments: Any) -> str:
    if isinstance(arguments, dict):
        try:
            for name, value in arguments.items():
                check_values(value, str(name))
        except ValueError as exc:
            return str(exc)
    return "The call's JSON could not be read"


def _rewritten(line: str, message: dict[str, Any] | None, reason: str) -> str:
    if message is not None:
        ident, params = message.get("id"), message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
    else:
        if '"tools/call"' not in line:
            return line
        found = _ID.search(line)
        ident = json.loads(found.group(1)) if found else None
        named = _NAME.search(line)
        name = named.group(1) if named else None
    if not isinstance(ident, int | str) or isinstance(ident, bool):
        return line  # a notification: nobody waits for its answer
    call = {"name": name if isinstance(name, str) else "", "arguments": {UNREADABLE: reason}}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": call})


class ReadableLines:
    """An async line source (what the SDK's stdio_server reads) with each line readable."""

    def __init__(self, lines: Any, sdk_reads: Callable[[str], bool]) -> None:
        self._lines, self._sdk_reads = lines, sdk_reads

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            yield readable(line, self._sdk_reads)
