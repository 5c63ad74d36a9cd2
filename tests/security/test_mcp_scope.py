"""MCP over HTTP takes the caller's scope from the request that carries the tool call."""

from __future__ import annotations

from types import SimpleNamespace

from memsys import tenancy
from memsys.mcp.server import caller_of

SCOPED = tenancy.Scope(read=("project:a*",), write=(), token_id="tok_x")


def context(request: object) -> SimpleNamespace:
    return SimpleNamespace(_request_context=SimpleNamespace(request=request))


def test_the_scope_comes_from_the_request_not_the_task() -> None:
    request = SimpleNamespace(scope={tenancy.ASGI_KEY: SCOPED})
    with tenancy.using(tenancy.ADMIN):  # whatever the handler's task carries
        assert caller_of(context(request)) is SCOPED


def test_a_request_without_a_scope_is_refused_and_stdio_is_local() -> None:
    assert caller_of(context(SimpleNamespace(scope={}))) is None
    assert caller_of(context(None)) == tenancy.ADMIN
    with tenancy.using(SCOPED):
        assert caller_of(None) is SCOPED
