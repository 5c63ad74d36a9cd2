"""/docs: Swagger UI from assets shipped in a PyPI package, so the page works offline.

FastAPI's default page loads Swagger UI from a CDN, which leaves /docs blank on a machine
without network access. The `fastapi-swagger` package ships Swagger UI 5 (OpenAPI 3.1) as
plain files; memsys serves them under /docs/assets and points the page there.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from memsys.api.deps import DOCS_ASSETS


def assets_dir() -> Path:
    return Path(str(resources.files("fastapi_swagger") / "resources"))


def mount(app: FastAPI) -> None:
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} — API docs",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
            oauth2_redirect_url="/docs/oauth2-redirect",
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
