"""The MCP server: the only module that imports the `mcp` SDK.

Every tool comes from the operation table (memsys.operations). Its input schema is the
input model's fields, stripped of memsys's validators: the SDK checks types, memsys checks
values, so a bad value gets memsys's message. Every result is a CallToolResult whose
structured content (and text) is the S001 envelope; failures are marked isError. Failures
the SDK raises itself (arguments that do not fit the schema, an unknown tool, a crash)
become envelopes too, and so do arguments a tool does not take: they are refused, never
dropped.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolResult,
    TextContent,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import (
    ValidationError,
)
from starlette.routing import Route

from memsys import __version__, db, envelope, tenancy
from memsys.config import allowed_hosts, allowed_origins
from memsys.errors import MemsysError, bounded, clauses
from memsys.mcp.bodies import ReadableBodies
from memsys.mcp.signatures import plain, tool_signature
from memsys.mcp.stdio import UNREADABLE, ReadableLines, lines_of
from memsys.operations import BY_NAME, OPERATIONS, Operation

log = logging.getLogger(__name__)
# How long `memsys mcp` lets the calls in flight end, rolled back, once stdin closes; a call
# still running then (a statement waiting for a lock) ends with the process, uncommitted.
STDIN_GRACE_S = 3.0
# How long the stop of `memsys mcp` goes on cancelling the statements of calls still running
# (memsys.db.cancel_running): a call between two statements is cancelled at its next one.
STOP_CANCEL_S = 2.0
# The largest POST body /mcp reads: a memory_store_batch at its limits (1,000 memories of
# 32,000 characters and 64 KiB of metadata) fits when its text is ASCII (not always when it
# is not: up to 4 bytes a character in UTF-8, 12 escaped as \ud83d\ude00); the SDK's
# 4 MiB refused one of 80 memories that stdio and REST store. Bigger: 413; a longer line of
# `memsys mcp`'s stdin is refused unread, under its id (memsys.mcp.stdio.lines_of).
MAX_HTTP_BODY = 128 * 1024 * 1024
GRAPH_RESOURCE = "memory://knowledge-graph"  # as the official memory server names it
CORE_RESOURCE = "memory://core"  # CORE.md (S003), for a client to load at session start

INSTRUCTIONS = (
    "memsys is long-term memory. Call memory_context (or memory_recall) at the start of a "
    "task, memory_store when you learn a preference, decision, fix or fact worth keeping, and "
    "search for indexed documents. Every memsys tool answers {success, data} or {success, "
    "error}; the nine knowledge-graph tools named as in the official memory server "
    "(create_entities, read_graph, …) answer in that server's shapes, errors as text."
)


def to_result(env: envelope.Envelope, is_error: bool | None = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(env, default=str))],
        structured_content=env,
        is_error=not env.get("success", False) if is_error is None else is_error,
    )


# ------------------------------------------------------------------ schemas from the models


def call(op: Operation, arguments: dict[str, Any]) -> envelope.Envelope:
    data = {k: plain(v) for k, v in arguments.items()}
    try:
        return envelope.ok(op.run(data).model_dump(mode="json", by_alias=True))
    except MemsysError as exc:
        return envelope.failure(tenancy.shown(exc, tenancy.current()))


def answer(op: Operation, arguments: dict[str, Any]) -> CallToolResult:
    """The tool's result: the envelope, or for the memory-server drop-in its bare shape."""
    env = call(op, arguments)
    if op.mcp_envelope:
        return to_result(env)
    if env["success"]:
        return to_result(env["data"], is_error=False)
    return _plain_error(env["error"])


def _plain_error(message: str) -> CallToolResult:
    """The memory server's error result: its message as text, no envelope."""
    return CallToolResult(content=[TextContent(type="text", text=bounded(message))], is_error=True)


def make_tool(op: Operation) -> Any:
    def tool(**arguments: Any) -> CallToolResult:
        return answer(op, arguments)

    signature = tool_signature(op, CallToolResult)
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = {
        **{name: p.annotation for name, p in signature.parameters.items()},
        "return": CallToolResult,
    }
    tool.__name__ = tool.__qualname__ = op.name
    tool.__doc__ = op.summary
    return tool


# ------------------------------------------------------------------ the server


def _refused(name: str, message: str) -> CallToolResult:
    """A call refused before its tool ran, in the tool's own shape: the memsys envelope, or
    for the memory-server drop-in tools that server's plain-text error result."""
    op = BY_NAME.get(name)
    if op is not None and not op.mcp_envelope:
        return _plain_error(message)
    return to_result(envelope.failure(message))


def _argument_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid arguments: " + clauses(parts)


async def _flag_when_cancelled(cancelled: threading.Event, done: threading.Event) -> None:
    """Set `cancelled` when the SDK cancels the call's task (the client's
    notifications/cancelled, or the session ending) before the call is `done`. The tool's
    worker thread is not interrupted; it sees the flag at its commit (memsys.db.cancellable)."""
    try:
        await anyio.sleep_forever()
    finally:
        if not done.is_set():
            cancelled.set()


class MemsysMCPServer(MCPServer):
    accepted: dict[str, frozenset[str]]
    in_flight: int = 0  # tool calls running now
    stopping: threading.Timer | None = None  # the stop stdin's closing set (stdin_closed)

    async def call_tool(self, name, arguments, context=None):  # type: ignore[no-untyped-def]
        if arguments and UNREADABLE in arguments:  # a line the SDK could not read (stdio)
            return _refused(name, str(arguments[UNREADABLE]))
        known = self.accepted.get(name)
        unknown = sorted(set(arguments or {}) - known) if known is not None else []
        if unknown:
            takes = ", ".join(sorted(known or ())) or "no arguments"
            return _refused(
                name, f"Unknown argument(s) for {name}: {', '.join(unknown)} (it takes: {takes})"
            )
        caller = caller_of(context)
        if caller is None:
            return _refused(name, "No caller scope for this request; refused")
        cancelled, done = threading.Event(), threading.Event()
        self.in_flight += 1
        try:
            # The tool's worker thread copies this context: the caller, and the flag the SDK's
            # cancellation of this task sets (a call cancelled before it commits is rolled back).
            with tenancy.using(caller), db.cancellable(cancelled):
                async with anyio.create_task_group() as watch:
                    watch.start_soon(_flag_when_cancelled, cancelled, done)
                    try:
                        result = await self._run_tool(name, arguments, context)
                        done.set()
                        return result
                    finally:
                        watch.cancel_scope.cancel()
        finally:
            self.in_flight -= 1
            if not self.in_flight and self.stopping is not None:
                # The calls ended within the grace: the serving ends as it does, and the
                # stop (a second drain, racing its cleanup, os._exit) is not to come.
                self.stopping.cancel()
                self.stopping = None

    async def _run_tool(self, name: str, arguments: Any, context: Any) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            log.error("tool %s crashed", name, exc_info=exc.__cause__)
            return _refused(name, f"Internal error in {name}; see the server log")
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = _argument_error(cause)
            else:
                message = str(cause) if cause else str(exc)
            return _refused(name, message)

    def stdin_closed(self) -> None:
        """stdin closed: the client went away. The SDK cancels the calls in flight (each rolls
        back at its commit); if one has not ended within STDIN_GRACE_S (a statement waiting
        for a lock), the process stops as on SIGTERM and the call ends uncommitted. The stop
        is called off when the last of them ends (call_tool). Runs on the event loop, as
        call_tool's count of the calls in flight does."""
        if self.in_flight:
            self.stopping = threading.Timer(STDIN_GRACE_S, _stop_stdio, args=(signal.SIGTERM, None))
            self.stopping.daemon = True
            self.stopping.start()

    async def run_stdio_async(self) -> None:
        """The SDK's stdio serving, reading stdin through memsys.mcp.stdio (a call whose JSON
        the SDK cannot read is answered, not dropped)."""
        lowlevel = self._lowlevel_server  # what the SDK's own run_stdio_async runs
        stdin = lines_of(sys.stdin.buffer, MAX_HTTP_BODY)  # a line: as much as a POST body
        lines = cast(Any, ReadableLines(stdin, _sdk_reads, self.stdin_closed))  # a line source
        try:
            async with stdio_server(stdin=lines) as (read_stream, write_stream):
                options = lowlevel.create_initialization_options()
                await lowlevel.run(read_stream, write_stream, options)
        except* (BrokenPipeError, ConnectionResetError):
            # The client closed the pipe it reads answers from: nobody hears this server.
            # Stopped as on SIGTERM (a thread still waits in a read of stdin, which is open).
            log.warning("memsys mcp: the client closed its end of stdout; stopping")
            _stop_stdio(signal.SIGPIPE, None)

    async def read_resource(self, uri, context=None):  # type: ignore[no-untyped-def]
        caller = caller_of(context)
        if caller is None:
            raise ResourceError("No caller scope for this request; refused")
        with tenancy.using(caller):
            return await super().read_resource(uri, context)

    async def get_prompt(self, name, arguments=None, context=None):  # type: ignore[no-untyped-def]
        # core_memory reads CORE.md: under the request's scope, as tools and resources
        caller = caller_of(context)
        if caller is None:
            raise MCPError(INVALID_PARAMS, "No caller scope for this request; refused")
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts())
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name} (prompts: {known})")
        takes = {a.name for a in prompt.arguments or ()}
        unknown = sorted(set(arguments or {}) - takes)
        if unknown:
            raise MCPError(
                INVALID_PARAMS,
                f"Unknown argument(s) for the prompt {name}: {', '.join(unknown)} (it takes: "
                f"{', '.join(sorted(takes)) or 'no arguments'})",
            )
        with tenancy.using(caller):
            return await super().get_prompt(name, arguments, context)


async def clear_refusals(ctx: Any, call_next: Any) -> Any:
    """Every request's refusal in words a client can act on (the SDK's server middleware).
    The SDK answered params that do not fit a method with "Invalid request parameters" and
    nothing more (memsys's own reason for a line it could not read, memsys.mcp.stdio,
    dropped with it), an unknown method with "Method not found", and any other failure
    with the exception's text under code 0, its traceback logged as a crash."""
    if ctx.request_id is None:  # a notification: nobody reads an answer
        return await call_next(ctx)
    method, params = ctx.method, ctx.params
    reason = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(reason, str):  # memsys.mcp.stdio's refusal of a line, for this method
        raise MCPError(INVALID_PARAMS, reason)
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        raise MCPError(INVALID_PARAMS, _params_error(method, exc)) from None
    except MCPError as exc:
        if exc.code == METHOD_NOT_FOUND:
            raise MCPError(METHOD_NOT_FOUND, f"Method not served by memsys: {method}") from None
        if exc.message == "Invalid request parameters" and not exc.data:  # the SDK's gate
            raise MCPError(
                INVALID_PARAMS,
                f"{method} before the session is initialized: send initialize, then "
                "notifications/initialized",
            ) from None
        raise
    except Exception as exc:
        log.error("MCP request %s failed", method, exc_info=exc)
        raise MCPError(INTERNAL_ERROR, f"Internal error in {method}; see the server log") from None


def _params_error(method: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "params"
        parts.append(f"{where}: {err['msg']}")
    return f"Invalid parameters for {method}: " + clauses(parts)


def _sdk_reads(line: str) -> bool:
    """Whether the SDK's stdio reader takes this line (its own check, as it runs it)."""
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:  # whatever the SDK's reader refuses
        return False
    return True


def caller_of(context: Any) -> tenancy.Scope | None:
    """The scope the HTTP auth layer gave the request that carries this call. Tool calls run
    in the MCP session's task, not the request's; SDK 2.3 happens to carry the request's
    contextvars along with each message, but that is its detail: the scope is read from the
    request itself, so a transport that does not carry them cannot run a call as the admin,
    and a request without a scope is refused. stdio has no request: the local user."""
    request_context = getattr(context, "_request_context", None)
    request = getattr(request_context, "request", None)
    if request is None:
        return tenancy.current()
    scope = getattr(request, "scope", None)
    caller = scope.get(tenancy.ASGI_KEY) if isinstance(scope, dict) else None
    return caller if isinstance(caller, tenancy.Scope) else None


def build_server() -> MemsysMCPServer:
    server = MemsysMCPServer(
        name="memsys",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        middleware=[clear_refusals],
    )
    server.accepted = {}
    for op in OPERATIONS:
        fn = make_tool(op)
        server.accepted[op.name] = frozenset(inspect.signature(fn).parameters)
        server.add_tool(
            fn,
            name=op.name,
            description=op.summary,
            annotations=ToolAnnotations(
                read_only_hint=op.read_only,
                destructive_hint=op.destructive,
                idempotent_hint=op.idempotent,
                open_world_hint=False,
            ),
        )

    @server.resource(
        GRAPH_RESOURCE,
        name="knowledge-graph",
        description="The whole knowledge graph of the default graph namespace, as read_graph",
        mime_type="application/json",
    )
    def knowledge_graph() -> str:
        result = call(BY_NAME["read_graph"], {})
        return json.dumps(result["data"] if result["success"] else result)

    def core_text() -> str:
        result = call(BY_NAME["memory_brief"], {"kind": "core"})
        return str(result["data"]["text"] if result["success"] else result["error"])

    server.resource(
        CORE_RESOURCE,
        name="core",
        description="CORE.md: the memories worth knowing at session start, grouped by type",
        mime_type="text/markdown",
    )(core_text)
    server.prompt(
        name="core_memory",
        description="Load CORE.md (the memories worth knowing) into the conversation",
    )(core_text)

    return server


def http_security(extra_hosts: list[str] | None = None) -> TransportSecuritySettings:
    """DNS-rebinding protection on; loopback names with and without a port are allowed."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts(extra_hosts),
        allowed_origins=allowed_origins(extra_hosts),
    )


def http_routes(server: MemsysMCPServer, extra_hosts: list[str] | None = None):  # type: ignore[no-untyped-def]
    """Routes serving streamable HTTP at exactly /mcp, and the session manager to run."""
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=http_security(extra_hosts),
        max_request_body_size=MAX_HTTP_BODY,
    )
    limit = server.session_manager.max_request_body_size
    for route in app.routes:
        if isinstance(route, Route) and route.path == "/mcp":
            route.app = ReadableBodies(route.app, limit, _sdk_reads)
    return app.routes, server.session_manager


def _stop_stdio(signum: int, frame: FrameType | None) -> None:
    """SIGTERM or SIGINT (Ctrl+C) while serving stdio. The event loop cannot unwind (a thread
    sits in a read of stdin until it closes: after a KeyboardInterrupt the process went on
    until stdin closed, and a call under way went on to commit), so stop here: write what
    the last answers left (memsys.deferred), stop the embedding worker, leave the embedded
    PostgreSQL (stopped if this was its last user), exit. A call still running ends with
    the process: its transaction is rolled back unless it had committed. Its statement is
    cancelled first (db.cancel_running): PostgreSQL sees a client gone only when it next
    talks to it, so a statement waiting for a lock went on waiting after the exit, holding
    the locks the call had taken, for as long as the other transaction held its own."""
    from memsys import db, deferred
    from memsys.background import worker

    try:
        worker().stopping()
        db.cancel_running(STOP_CANCEL_S)
        deferred.drain()
        worker().stop(timeout=2.0)
        db.stop_embedded()
    finally:  # whatever failed above, the process goes
        os._exit(0)


def run_stdio() -> None:
    """`memsys mcp`: serve over stdio. Logs go to stderr; stdout belongs to the protocol."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    from memsys import deferred, migrator
    from memsys.background import worker

    migrator.ensure_current()
    server = build_server()
    signal.signal(signal.SIGTERM, _stop_stdio)
    signal.signal(signal.SIGINT, _stop_stdio)
    worker().start()
    try:
        server.run("stdio")
    finally:
        deferred.drain()  # the last answers' traces and access counts
        worker().stop()
