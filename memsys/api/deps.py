"""Request-level rules shared by every route: the bearer token."""

import hmac

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

OPEN_PATHS = {"/v1/health", "/docs", "/openapi.json", "/docs/oauth2-redirect"}
DOCS_ASSETS = "/docs/assets"  # Swagger UI's JS and CSS (memsys.api.docs)


class BearerTokenMiddleware(BaseHTTPMiddleware):
    """With MEMSYS_API_TOKEN set, every request (health and docs aside) must carry it."""

    def __init__(self, app, token: str) -> None:  # type: ignore[no-untyped-def]
        super().__init__(app)
        self._expected = f"Bearer {token}".encode()

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if path in OPEN_PATHS or path.startswith(DOCS_ASSETS + "/"):
            return await call_next(request)
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            return JSONResponse(
                {"success": False, "error": "Missing or wrong bearer token (MEMSYS_API_TOKEN)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)
