"""GET / and its assets: a page that asks the API what a person types into a form.

The files ship inside the package (`service/web/static`), so the page needs no build step, no
CDN and no network beyond kvplan itself. All script and style live in those files (nothing
inline), so the page and its files are served under `middleware.PAGE_POLICY` (its own script,
style, images and API calls, nothing inline; `middleware.policy_for` picks it for `/` and
`/web/...`). Every URL the page uses is relative, so it also works behind a path prefix (a
Backstage proxy route).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request, Response

from ..kit.conditional import etag_matches
from ..kit.errors import NotFound

router = APIRouter(include_in_schema=False)

MEDIA = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


@cache
def asset(name: str) -> Asset:
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    return Asset(body, MEDIA[name], f'"{hashlib.sha256(body).hexdigest()[:16]}"')


def _serve(request: Request, name: str) -> Response:
    found = asset(name)
    # no-cache: a browser asks again each time (a 304 while the file is the same), so a new
    # release's page and script are never mixed with an old one.
    headers = {"ETag": found.etag, "Cache-Control": "no-cache"}
    if etag_matches(request, found.etag):
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


@router.get("/")
def page(request: Request) -> Response:
    return _serve(request, "index.html")


@router.get("/web/{name}")
def web_asset(request: Request, name: str) -> Response:
    if name not in MEDIA or name == "index.html":
        raise NotFound(f"no page asset {name!r}", field="name")
    return _serve(request, name)
