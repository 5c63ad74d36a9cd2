"""S001's response envelope, built here and nowhere else: `{"success": true, "data": …}` or
`{"success": false, "error": "…"}` (MCP results, REST error bodies)."""

from __future__ import annotations

from typing import Any

from memsys.errors import bounded

Envelope = dict[str, Any]


def ok(data: Any) -> Envelope:
    return {"success": True, "data": data}


def failure(message: str) -> Envelope:
    return {"success": False, "error": bounded(message)}
