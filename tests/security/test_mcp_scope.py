"""MCP over HTTP takes the caller's scope from the request that carries the tool call."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

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


def test_a_prompt_runs_under_the_requests_scope_not_the_tasks(embedder: object) -> None:
    """Tools and resources took the caller from the request; the core_memory prompt ran
    under whatever scope its task carried (the admin's, were the SDK to stop carrying the
    request's context along): CORE.md of every namespace."""
    import anyio

    from memsys.mcp.server import build_server
    from tests.security.helpers import run

    run("memory_store", content="BETA-SECRET zebra codes", namespace="project:beta")
    run("memory_store", content="Acme ships on Tuesdays", namespace="project:acme")
    server = build_server()
    scoped = SimpleNamespace(scope={tenancy.ASGI_KEY: SCOPED})
    stranger = SimpleNamespace(scope={})

    async def prompt(request: object) -> str:
        with tenancy.using(tenancy.ADMIN):
            result = await server.get_prompt("core_memory", None, context(request))
        return str(result)

    shown = anyio.run(prompt, scoped)
    assert "Acme ships" in shown and "BETA-SECRET" not in shown
    with pytest.raises(Exception, match="No caller scope"):
        anyio.run(prompt, stranger)
