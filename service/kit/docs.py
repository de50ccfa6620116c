"""The interactive docs, served from files kvplan installs: no CDN, so /docs works air-gapped.

FastAPI's own pages (`get_swagger_ui_html`, `get_redoc_html`) point at jsDelivr by default;
kvplan renders the same pages with the Swagger UI 5 and ReDoc bundles that the
`fastapi-offline` package ships in its `static/` folder, mounted under /docs/assets.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

ASSETS_URL = "/docs/assets"


def _assets_dir() -> Path:
    return Path(str(resources.files("fastapi_offline").joinpath("static")))


def install_docs(app: FastAPI) -> None:
    """Mount the bundled assets and the two pages; create the app with docs_url=None."""
    app.mount(ASSETS_URL, StaticFiles(directory=_assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
