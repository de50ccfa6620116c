"""The app the browser tests serve: kvplan's own, behind the strictest policy the page must bear.

`create` is uvicorn's factory. It adds a Content-Security-Policy that allows nothing but this
origin (no inline script or style, no data: or blob: images), so a page that needs more shows
up as a console error in tests/web/test_page.py.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from starlette.middleware.base import RequestResponseEndpoint

from service.app import create_app

POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def create() -> FastAPI:
    app = create_app()

    @app.middleware("http")
    async def strict_policy(request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = POLICY
        return response

    return app
