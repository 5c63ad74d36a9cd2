"""Request-level rules shared by every route: the Host/Origin allow-list and the bearer token."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from memsys import envelope

OPEN_PATHS = {"/v1/health", "/docs", "/openapi.json", "/docs/oauth2-redirect"}
DOCS_ASSETS = "/docs/assets"  # Swagger UI's JS and CSS (memsys.api.docs)


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


class BearerTokenMiddleware(BaseHTTPMiddleware):
    """With MEMSYS_API_TOKEN set, every request (health and docs aside) must carry it. The
    scheme is case-insensitive (RFC 7235); the token is compared in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        super().__init__(app)
        self._expected = token.encode()

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if path in OPEN_PATHS or path.startswith(DOCS_ASSETS + "/"):
            return await call_next(request)
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        valid = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self._expected
        )
        if not valid:
            return JSONResponse(
                envelope.failure("Missing or wrong bearer token (MEMSYS_API_TOKEN)"),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)
