"""Request-level rules shared by every route: the Host/Origin allow-list and who the caller is
(the admin token, a scoped token, or the local user)."""

from __future__ import annotations

import hmac
import json
import logging
import typing
import urllib.parse
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import anyio
from fastapi import HTTPException
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memsys import envelope, jsonvalue, tenancy

log = logging.getLogger(__name__)
OPEN_PATHS = {"/v1/health", "/docs", "/openapi.json", "/docs/oauth2-redirect"}
DOCS_ASSETS = "/docs/assets"  # Swagger UI's JS and CSS (memsys.api.docs)
SCOPE_KEY = tenancy.ASGI_KEY


class JsonBodyRoute(APIRoute):
    """A route whose JSON body names each field once: `{"content": "a", "content": "b"}`
    kept the last without a word (one argument silently dropped, where a query parameter
    given twice is refused), and a number of more digits than Python reads was answered
    as if the body were not UTF-8 or nested too deeply."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await handle(_JsonBodyRequest(request.scope, request.receive))

        return handler


class _JsonBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = jsonvalue.loads(body)
            except json.JSONDecodeError:
                raise  # FastAPI says where and why (422)
            except UnicodeDecodeError:
                raise HTTPException(400, f"{_UNREAD}: it is not UTF-8 text") from None
            except RecursionError:
                raise HTTPException(400, f"{_UNREAD}: it is nested too deeply") from None
            except jsonvalue.KeyTwice as exc:
                raise HTTPException(422, f"{_UNREAD}: {exc}; give it once") from None
            except ValueError:  # Python reads no integer of more than 4,300 digits
                raise HTTPException(422, f"{_UNREAD}: a number has too many digits") from None
        return self._json


_UNREAD = "The body could not be read as JSON"


def declared_length(request: Request) -> int:
    """The body's size as its Content-Length says (0 when it says nothing readable)."""
    try:
        return int(request.headers.get("content-length", "0"))
    except ValueError:  # not a number: the body is counted as it comes
        return 0


def unread_body(status: int, message: str) -> JSONResponse:
    """The error of a request refused before its body was read to the end (a body of NULs,
    bytes that are not UTF-8, too many): the connection closes after it, or the server
    would go on reading and dropping what an endless client sends."""
    return JSONResponse(envelope.failure(message), status, headers={"Connection": "close"})


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


class OriginGuardMiddleware:
    """DNS-rebinding protection for REST, with the allow-lists MCP's transport uses: a Host
    outside them is 421, a browser Origin outside them is 403 (a page on another site may
    not read or write memories through the user's browser).

    Plain ASGI, not Starlette's BaseHTTPMiddleware: that one relays a streamed body through
    a queue and, when the app fails in the middle of it (a streamed export whose database
    connection was lost), ends the body as if it were whole — the client got a 200 with a
    cut export and no sign of the failure. Here the failure reaches the server, which
    breaks off the response."""

    def __init__(self, app: ASGIApp, hosts: list[str], origins: list[str]) -> None:
        self.app = app
        self._hosts, self._origins = hosts, origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The MCP transport checks its own requests.
        if scope["type"] != "http" or scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        refused = None
        if not matches(host, self._hosts):
            refused = JSONResponse(envelope.failure(f"Host not allowed: {host}"), status_code=421)
        origin = headers.get("origin")
        if refused is None and origin is not None and not matches(origin, self._origins):
            refused = JSONResponse(
                envelope.failure(f"Origin not allowed: {origin}"), status_code=403
            )
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


class StoppedMiddleware:
    """A request the server's stop cut off (uvicorn cancels what runs past its grace) before
    it answered gets a 503 that says so. uvicorn answered it "Internal Server Error" as text,
    and logged it as a crash, with a traceback. A response under way (a streamed export) is
    broken off as it was: the client must not read a cut body as whole."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except anyio.get_cancelled_exc_class():
            if started:
                raise
            log.warning("%s %s: cut off by the server's stop", scope["method"], scope["path"])
            stopped = JSONResponse(envelope.failure(STOPPED), 503, headers={"Connection": "close"})
            await stopped(scope, receive, send)


STOPPED = (
    "The server stopped before this call answered: what it had not committed was rolled "
    "back. Check before you retry it"
)


class Utf8UrlMiddleware:
    """A path or query string whose percent-encoded bytes are not UTF-8 is refused (400), as
    a body that is not UTF-8 is: the server would read `%FF` as U+FFFD and store a key
    nobody typed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for part, raw in (
                ("path", scope.get("raw_path") or b""),
                ("query string", (scope.get("query_string") or b"").replace(b"+", b" ")),
            ):
                try:
                    urllib.parse.unquote_to_bytes(raw).decode("utf-8")
                except UnicodeDecodeError:
                    refused = JSONResponse(
                        envelope.failure(f"The URL's {part} is not UTF-8 text"), status_code=400
                    )
                    await refused(scope, receive, send)
                    return
        await self.app(scope, receive, send)


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
            # Open to anyone; the admin is still told apart (without a database lookup), for
            # what only the operator may read (/v1/health's database error).
            if self._is_admin(Headers(scope=scope).get("authorization")):
                scope[SCOPE_KEY] = tenancy.ADMIN
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
        given = _bearer(header)
        if given is None:
            return None
        if self._is_admin(header):
            return tenancy.ADMIN
        return await anyio.to_thread.run_sync(_scoped, given)

    def _is_admin(self, header: str | None) -> bool:
        """The admin token, or no header where none is configured (the local user)."""
        if self._admin is None:
            return header is None
        given = _bearer(header) if header is not None else None
        return given is not None and hmac.compare_digest(given.encode(), self._admin)


def _bearer(header: str) -> str | None:
    """The credentials of a Bearer Authorization header (any case), or None."""
    scheme, _, given = header.partition(" ")
    given = given.strip()
    return given if scheme.lower() == "bearer" and given else None


def _scoped(secret: str) -> tenancy.Scope | None:
    from memsys import deferred
    from memsys.db import session_scope
    from memsys.services import tokens

    # Reads and stamps the token row only: no need to wait for earlier calls' traces.
    with tenancy.using(tenancy.ADMIN), deferred.not_waiting(), session_scope() as session:
        return tokens.authenticate(session, secret)


def known_query_only(request: Request) -> None:
    """Refuse a query parameter the route does not take (422) instead of ignoring it: a
    mistyped `dryrun=true` must not become an import that writes. A parameter that takes one
    value and is given twice (`?limit=5&limit=500`) is refused too: one of the two would be
    dropped without a word."""
    route = request.scope.get("route")
    if route is None or not request.query_params:
        return
    from fastapi import HTTPException

    names, lists = _query_names(route)
    unknown = sorted(set(request.query_params) - names)
    if unknown:
        taken = ", ".join(sorted(names)) or "none"
        raise HTTPException(
            422, f"Unknown query parameter(s): {', '.join(unknown)} (this route takes: {taken})"
        )
    given = Counter(key for key, _ in request.query_params.multi_items())
    repeated = sorted(key for key, times in given.items() if times > 1 and key not in lists)
    if repeated:
        raise HTTPException(
            422,
            f"Query parameter(s) given more than once: {', '.join(repeated)} (each takes "
            "one value)",
        )


def _query_names(route: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The query parameters a route declares, with the fields of a query model, and those of
    them that take a list (kept on the route once worked out)."""
    known: tuple[frozenset[str], frozenset[str]] | None = getattr(route, "memsys_query_names", None)
    if known is None:
        names: dict[str, Any] = {}
        pending = [route.dependant]
        while pending:
            dependant = pending.pop()
            pending.extend(dependant.dependencies)
            for param in dependant.query_params:
                model = _model(param.field_info.annotation)
                if model is None:
                    names[param.alias] = param.field_info.annotation
                else:
                    names |= {f.alias or n: f.annotation for n, f in model.model_fields.items()}
        lists = {name for name, kind in names.items() if _takes_list(kind)}
        known = (frozenset(names), frozenset(lists))
        route.memsys_query_names = known
    return known


def _takes_list(annotation: Any) -> bool:
    """Whether a parameter's type is a list or a set (also when optional)."""
    for kind in (annotation, *typing.get_args(annotation)):
        if kind in (list, set, tuple) or typing.get_origin(kind) in (list, set, tuple):
            return True
    return False


def _model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a query parameter carries (also when optional), or None."""
    for kind in (annotation, *typing.get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None
