"""The FastAPI app: /v1 routes (from the operation table), one error mapping, MCP streamable
HTTP at /mcp.

Built by a factory: the MCP session manager can run once per instance, so each app (and
each test client) gets its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from memsys import __version__, db, deferred, envelope, tenancy
from memsys.api import docs, graph_io, operations, system, vault
from memsys.api.deps import (
    OriginGuardMiddleware,
    StoppedMiddleware,
    TokenAuthMiddleware,
    Utf8UrlMiddleware,
    known_query_only,
)
from memsys.background import worker
from memsys.config import allowed_hosts, allowed_origins, get_settings
from memsys.embeddings import warm_up
from memsys.errors import MemsysError, clauses, shortened
from memsys.mcp.server import build_server, http_routes
from memsys.schemas.common import ErrorOut
from memsys.schemas.contract import publish_text_rule

log = logging.getLogger(__name__)


def create_app(extra_hosts: list[str] | None = None, background: bool = True) -> FastAPI:
    routes, session_manager = http_routes(build_server(), extra_hosts)
    ignored = get_settings().ignored_token_roots()
    if ignored:  # the operator named them for tokens, who would read only 403s
        log.warning(
            "MEMSYS_TOKEN_INDEX_ROOTS: %s not within MEMSYS_INDEX_ROOTS: no token reads there",
            ", ".join(str(p) for p in ignored),
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The model loads before the server accepts requests: no first request pays for it.
        await anyio.to_thread.run_sync(warm_up)
        if background:
            worker().start()
        try:
            async with session_manager.run():
                try:
                    yield
                finally:
                    # The server's grace is over (uvicorn cancelled the requests under way):
                    # the calls still running wait in the database, for a lock held by
                    # another transaction, say. Their statements are cancelled, so that they
                    # end rolled back and the stop does not wait for them (MCP calls too,
                    # which the session manager waits for), the embedding worker's as well.
                    if background:
                        worker().stopping()
                    await anyio.to_thread.run_sync(_cancel_running)
        finally:
            deferred.drain()  # the last answers' traces and access counts
            if background:
                worker().stop()

    logging.getLogger("uvicorn.error").addFilter(vault.QUIET_CUTS)  # once: the same filter
    app = FastAPI(
        dependencies=[Depends(known_query_only)],
        title="memsys",
        version=__version__,
        description="Long-term memory for LLM agents on one PostgreSQL database.",
        lifespan=lifespan,
        docs_url=None,  # served by memsys.api.docs from packaged assets (no CDN)
        redoc_url=None,
    )
    docs.mount(app)

    @app.exception_handler(MemsysError)
    async def _memsys_error(request: Request, exc: MemsysError) -> JSONResponse:
        message = tenancy.shown(exc, request.scope.get(tenancy.ASGI_KEY))
        return JSONResponse(envelope.failure(message), status_code=exc.status_code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # 404 unknown path, 405 wrong method, 400 a body that is not JSON or not UTF-8
        headers = dict(exc.headers or {})
        detail = str(exc.detail)
        path = shortened(request.url.path)
        if exc.status_code == 405:  # every method of the path, not only the first route's
            headers["Allow"] = ", ".join(sorted(allowed_methods(app, request)))
            if detail == "Method Not Allowed":  # Starlette's words: say which and what else
                detail = f"{request.method} is not a method of {path}: it takes {headers['Allow']}"
        elif exc.status_code == 404 and detail == "Not Found":  # no route has that path
            detail = f"No route {request.method} {path}: the routes are listed at /docs"
        if detail == _UNPARSED_BODY:  # FastAPI's words when its JSON reader raised
            detail = (
                "The body could not be read as JSON: it is not UTF-8 text, or it is nested "
                "too deeply"
            )
        return JSONResponse(envelope.failure(detail), status_code=exc.status_code, headers=headers)

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(request: Request, exc: ClientDisconnect) -> Response:
        # The client hung up before its body arrived (a cut upload): nobody reads an answer,
        # nothing ran, and it is not a crash (it was logged as one, with two tracebacks).
        log.info("%s %s: the client left before sending its body", request.method, request.url.path)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        # Never SQL, parameters or a traceback to the client; the log has them.
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return JSONResponse(envelope.failure("Internal error; see the server log"), 500)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        kind = request.headers.get("content-type", "")
        if _not_json(kind) and any(e.get("loc") == ("body",) for e in exc.errors()):
            return JSONResponse(
                envelope.failure(
                    f"Send the body as JSON (Content-Type: application/json), not {kind!r}"
                ),
                status_code=415,
            )
        message = _describe_request_errors(exc, _elsewhere(request))
        return JSONResponse(envelope.failure(message), status_code=422)

    app.include_router(system.router, prefix="/v1")
    app.include_router(operations.router(), prefix="/v1")
    app.include_router(graph_io.router, prefix="/v1", responses=operations.common_errors(True))
    app.include_router(vault.router, prefix="/v1", responses=operations.common_errors(True))
    app.router.routes.extend(routes)
    app.add_middleware(TokenAuthMiddleware, admin_token=get_settings().api_token)
    app.add_middleware(Utf8UrlMiddleware)
    app.add_middleware(  # outermost: a foreign Host or Origin is refused before anything
        OriginGuardMiddleware,
        hosts=allowed_hosts(extra_hosts),
        origins=allowed_origins(extra_hosts),
    )
    app.add_middleware(StoppedMiddleware)  # outermost: any request the stop cuts off
    generate = app.openapi

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            document = generate()
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.setdefault("ErrorOut", ErrorOut.model_json_schema())  # errors' $ref
            app.openapi_schema = publish_text_rule(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _cancel_running() -> None:
    running = db.cancel_running()
    if running:
        log.warning(
            "stopping: cancelled the database work of %d call(s) still running; "
            "their transactions were rolled back",
            running,
        )


def allowed_methods(app: FastAPI, request: Request) -> set[str]:
    """The methods some route of this path answers (the Allow header of a 405)."""
    methods: set[str] = set()
    for route in _leaves(app.router.routes):
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return methods


def _leaves(routes: Iterable[Any]) -> Iterator[Any]:
    """The routes themselves: FastAPI keeps an included router as one entry whose
    `effective_candidates()` are its routes under the prefix."""
    for route in routes:
        candidates = getattr(route, "effective_candidates", None)
        if candidates is None:
            yield route
        else:
            yield from _leaves(candidates())


_UNPARSED_BODY = "There was an error parsing the body"


def _not_json(content_type: str) -> bool:
    kind = content_type.split(";")[0].strip().lower()
    return bool(kind) and not (kind == "application/json" or kind.endswith("+json"))


def _elsewhere(request: Request) -> dict[str, str]:
    """Where this route takes each field it does not read from the body: the URL path or the
    query string (PUT /v1/preferences/{key}?namespace=…)."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return {}
    places = {p.name: "the URL path" for p in dependant.path_params}
    places.update({p.name: f"the query string (?{p.name}=…)" for p in dependant.query_params})
    return places


def _describe_request_errors(exc: RequestValidationError, elsewhere: dict[str, str]) -> str:
    parts = []
    for err in exc.errors():
        at = err.get("loc", ())
        name = str(at[1]) if len(at) == 2 and at[0] == "body" else None
        if err.get("type") == "extra_forbidden" and name in elsewhere:
            # a field sent in the body that this route takes in its path or query string
            parts.append(f"{name}: goes in {elsewhere[name]}, not in the body")
            continue
        if err.get("type") == "json_invalid":  # where and why, not "5: JSON decode error"
            where = err.get("loc", ("body", 0))[-1]
            why = (err.get("ctx") or {}).get("error", "not JSON")
            parts.append(f"The body is not valid JSON: {why} at character {where}")
            continue
        if err.get("type") == "missing" and tuple(err.get("loc", ())) == ("body",):
            # was "request: Field required": no word of a body, nor of what it should be
            parts.append("The body is missing: send the input as a JSON object (at least {})")
            continue
        ctx_error = (err.get("ctx") or {}).get("error")
        if err.get("type") == "value_error" and ctx_error is not None:
            parts.append(str(ctx_error))
            continue
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        parts.append(f"{'.'.join(loc) or 'request'}: {err.get('msg')}")
    return clauses(parts)
