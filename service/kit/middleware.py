"""Pure ASGI layers around the app: the body limit and the security headers; and the access
log, which the HTTP metrics' layer (`metrics.MeasureRequests`) writes as it measures.

Pure ASGI (no `BaseHTTPMiddleware`): no layer starts a task or a thread, and none touches a
response body; they cost a dict lookup per request.
"""

from __future__ import annotations

import json
import logging
import random

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import PROBLEM_JSON, ContentTooLarge

# ---- body limit --------------------------------------------------------------------------------


class BodyLimit:
    """413 problem+json for a request body over `max_bytes`, before reading past the limit.

    A declared `Content-Length` over the limit is refused before one byte of the body is read.
    A body without one (chunked) is read as it streams in, counted, and refused the moment it
    crosses the limit; one within the limit is handed to the app whole.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: int | None = None
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit():
                declared = int(value)
        if declared is not None:
            if declared > self.max_bytes:
                await self._refuse(scope, send, f"the body declares {declared} bytes")
                return
            # the server hands over at most Content-Length bytes, within the limit
            await self.app(scope, receive, send)
            return
        # no length declared (chunked, or none at all): count what arrives
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            body: bytes = message.get("body", b"")
            received += len(body)
            if received > self.max_bytes:
                await self._refuse(scope, send, f"the body passed {self.max_bytes} bytes")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _refuse(self, scope: Scope, send: Send, what: str) -> None:
        problem = ContentTooLarge(
            f"{what}; the limit is {self.max_bytes} bytes (KVPLAN_MAX_BODY_BYTES)", field="body"
        )
        body = json.dumps(problem.body(scope.get("path", ""))).encode()
        await send(
            {
                "type": "http.response.start",
                "status": problem.status,
                "headers": [
                    (b"content-type", PROBLEM_JSON.encode()),
                    (b"content-length", str(len(body)).encode()),
                    # the rest of the body is never read: this connection cannot be reused
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """`messages` first, then whatever the server sends next (a disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


# ---- security headers --------------------------------------------------------------------------

# Each route's Content-Security-Policy is chosen here, by `policy_for`, and nowhere else.
#
# An API answer is data: nothing in it may run, load or be framed.
API_POLICY = "default-src 'none'; frame-ancestors 'none'"
# The page at / (service/web): its own script, style and icon from this host, the pictures as
# <img> from this host (or inline SVG, which loads nothing), its API calls to this host, and
# nothing inline. Its form is answered by the script (fetch), never submitted: form-action
# 'none' keeps its fields, the read key among them, out of any URL even where the script fails.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
# /docs and /redoc run the bundled Swagger UI and ReDoc (service/kit/docs.py): their own scripts
# and styles, one inline start-up script each, ReDoc's blob: worker, and requests to this host.
DOCS_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_DOCS_PATHS = ("/docs", "/redoc")
_PAGE_PATHS = ("/",)  # and everything under /web/ (service/web/router.py)
_COMMON = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


def policy_for(path: str) -> str:
    """The Content-Security-Policy of the answer at `path`: the page's, the docs', or the API's."""
    if path in _PAGE_PATHS or path.startswith("/web/"):
        return PAGE_POLICY
    if path in _DOCS_PATHS or path.startswith("/docs/"):
        return DOCS_POLICY
    return API_POLICY


class SecurityHeaders:
    """Adds the security headers to every answer (without replacing one the app set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = policy_for(scope.get("path", "")).encode()

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                for name, value in (*_COMMON, (b"content-security-policy", policy)):
                    if name not in present:
                        headers.append((name, value))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


# ---- access log --------------------------------------------------------------------------------

access_log = logging.getLogger("kvplan.access")


class AccessLog:
    """One line per answer of 400 and above, and a sample of the others.

    uvicorn's own access log formats a line for every request, which a replica polled by
    autoscalers cannot afford; this writes the same line (client, request line, status, plus
    the time taken) for every error, always, and for `sample` of the rest (0: none). Keys in
    URLs are masked (`security.install_key_redaction` filters this logger too).
    """

    def __init__(self, sample: float) -> None:
        self.sample = sample

    def answered(self, scope: Scope, status: int, seconds: float) -> None:
        if status < 400 and (self.sample <= 0 or random.random() >= self.sample):  # noqa: S311
            return
        client = scope.get("client")
        query = scope.get("query_string", b"")
        target = scope.get("path", "") + ("?" + query.decode("latin-1") if query else "")
        access_log.log(
            logging.WARNING if status >= 400 else logging.INFO,
            '%s - "%s %s HTTP/%s" %d %.1fms',
            f"{client[0]}:{client[1]}" if client else "-",
            scope.get("method", ""),
            target,
            scope.get("http_version", "1.1"),
            status,
            seconds * 1000,
        )
