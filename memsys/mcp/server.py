"""The MCP server: the only module that imports the `mcp` SDK.

Tools come from tools.py. Every result is a CallToolResult whose structured content (and
text) is the S001 envelope; failures are marked isError. Failures the SDK raises itself
(arguments that do not fit the schema, an unknown tool, a crash) become envelopes too: the
plain SDK would reduce a crash to "Error executing tool X" and drop its message.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from memsys import __version__
from memsys.mcp.tools import TOOLS, Envelope

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "memsys is long-term memory. Call memory_context (or memory_recall) at the start of a "
    "task, memory_store when you learn a preference, decision, fix or fact worth keeping, and "
    "search for indexed documents. Every tool answers {success, data} or {success, error}."
)


def to_result(env: Envelope) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(env, default=str))],
        structured_content=env,
        is_error=not env.get("success", False),
    )


def _as_result_tool(fn: Callable[..., Envelope]) -> Callable[..., CallToolResult]:
    """Same parameters (so the same input schema), but returns a CallToolResult."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        return to_result(fn(*args, **kwargs))

    signature = inspect.signature(fn, eval_str=True)
    wrapper.__signature__ = signature.replace(return_annotation=CallToolResult)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{name: p.annotation for name, p in signature.parameters.items()},
        "return": CallToolResult,
    }
    return wrapper


def _argument_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid arguments: " + "; ".join(parts)


class MemsysMCPServer(MCPServer):
    async def call_tool(self, name, arguments, context=None):  # type: ignore[no-untyped-def,override]
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            log.error("tool %s crashed", name, exc_info=exc.__cause__)
            cause = exc.__cause__
            detail = f": {type(cause).__name__}: {cause}" if cause else ""
            return to_result({"success": False, "error": f"Internal error in {name}{detail}"})
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = _argument_error(cause)
            else:
                message = str(cause) if cause else str(exc)
            return to_result({"success": False, "error": message})


def build_server() -> MemsysMCPServer:
    server = MemsysMCPServer(
        name="memsys", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    for spec in TOOLS:
        server.add_tool(
            _as_result_tool(spec.fn),
            name=spec.fn.__name__,
            description=inspect.getdoc(spec.fn),
            annotations=ToolAnnotations(
                read_only_hint=spec.read_only,
                destructive_hint=spec.destructive,
                idempotent_hint=spec.idempotent,
                open_world_hint=False,
            ),
        )
    return server


def http_security(extra_hosts: list[str] | None = None) -> TransportSecuritySettings:
    """DNS-rebinding protection on; loopback names with and without a port are allowed."""
    hosts = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
    hosts += extra_hosts or []
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def http_routes(server: MemsysMCPServer, extra_hosts: list[str] | None = None):  # type: ignore[no-untyped-def]
    """Routes serving streamable HTTP at exactly /mcp, and the session manager to run."""
    app = server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=http_security(extra_hosts)
    )
    return app.routes, server.session_manager


def run_stdio() -> None:
    """`memsys mcp`: serve over stdio. Logs go to stderr; stdout belongs to the protocol."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    from memsys import schema
    from memsys.background import worker

    schema.ensure_current()
    server = build_server()
    worker().start()
    try:
        server.run("stdio")
    finally:
        worker().stop()
