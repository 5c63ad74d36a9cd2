"""Request-level rules shared by every route: the Host/Origin allow-list and who the caller is
(the admin token, a scoped token, or the local user)."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

import anyio
from starlette.datastructures import Headers
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memsys import envelope, tenancy

OPEN_PATHS = {"/v1/health", "/docs", "/openapi.json", "/docs/oauth2-redirect"}
DOCS_ASSETS = "/docs/assets"  # Swagger UI's JS and CSS (memsys.api.docs)
SCOPE_KEY = tenancy.ASGI_KEY


def matches(value: str, patterns: Iterable[str]) -> bool:
    """`value` against patterns such as "localhost", "localhost:*", "http://127.0.0.1:*"."""
    for pattern in patterns:
        if pattern.endswith(":*"):
            base, _, port = value.rpartition(":")
            if base == pattern[:-2] and port.isdigit():
                return True
        elif value == pattern:
            return True
    return False


class OriginGuardMiddleware(BaseHTTPMiddleware):
    """DNS-rebinding protection for REST, with the allow-lists MCP's transport uses: a Host
    outside them is 421, a browser Origin outside them is 403 (a page on another site may
    not read or write memories through the user's browser)."""

    def __init__(self, app: ASGIApp, hosts: list[str], origins: list[str]) -> None:
        super().__init__(app)
        self._hosts, self._origins = hosts, origins

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path.startswith("/mcp"):  # the MCP transport checks its own requests
            return await call_next(request)
        host = request.headers.get("host", "")
        if not matches(host, self._hosts):
            return JSONResponse(envelope.failure(f"Host not allowed: {host}"), status_code=421)
        origin = request.headers.get("origin")
        if origin is not None and not matches(origin, self._origins):
            return JSONResponse(envelope.failure(f"Origin not allowed: {origin}"), status_code=403)
        return await call_next(request)


class TokenAuthMiddleware:
    """Who a request runs for. The scheme is case-insensitive (RFC 7235); the admin token
    (MEMSYS_API_TOKEN) is compared in constant time; a scoped token (`memsys token create`)
    is looked up by the sha256 of its secret. The resulting scope is set for the request
    (memsys.tenancy, carried into the threads that run services) and kept in the ASGI scope
    under SCOPE_KEY for the MCP tool handlers, which run outside the request's task.

    Without MEMSYS_API_TOKEN (loopback only, see `memsys serve`) a request without a token
    is the local user: every namespace. A request that carries a token must carry a valid one.
    """

    def __init__(self, app: ASGIApp, admin_token: str | None) -> None:
        self.app = app
        self._admin = admin_token.encode() if admin_token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in OPEN_PATHS or path.startswith(DOCS_ASSETS + "/"):
            await self.app(scope, receive, send)
            return
        caller = await self._caller(Headers(scope=scope).get("authorization"))
        if caller is None:
            refused = JSONResponse(
                envelope.failure("Missing, wrong, expired or revoked bearer token"),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refused(scope, receive, send)
            return
        scope[SCOPE_KEY] = caller
        with tenancy.using(caller):
            await self.app(scope, receive, send)

    async def _caller(self, header: str | None) -> tenancy.Scope | None:
        if header is None:
            return tenancy.ADMIN if self._admin is None else None
        scheme, _, given = header.partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            return None
        if self._admin is not None and hmac.compare_digest(given.encode(), self._admin):
            return tenancy.ADMIN
        return await anyio.to_thread.run_sync(_scoped, given)


def _scoped(secret: str) -> tenancy.Scope | None:
    from memsys import deferred
    from memsys.db import session_scope
    from memsys.services import tokens

    # Reads and stamps the token row only: no need to wait for earlier calls' traces.
    with tenancy.using(tenancy.ADMIN), deferred.not_waiting(), session_scope() as session:
        return tokens.authenticate(session, secret)
