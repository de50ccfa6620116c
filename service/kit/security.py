"""Who may call: admin tokens for writes (at a bounded rate, ratelimit.py), read keys for reads.
Compared in constant time, never logged.

Read keys (`KVPLAN_READ_KEYS`) are optional: without them every read is open, as it always was.
With them, each read (`GET`, and the sizing `POST`s, which store nothing) presents one in any of
the three ways KEDA's `metrics-api` scaler can send one (kedacore/keda
`pkg/scalers/metrics_api_scaler.go`, `getMetricAPIServerRequest`): the `X-API-KEY` header
(`authMode: apiKey`, `method: header`), the `api_key` query parameter (`method: query`), or
`Authorization: Bearer` (`authMode: bearer`), where an admin token passes too. Spreadsheet
functions cannot send headers, so they use `api_key`. A key in a URL reaches access logs unless
redacted: `install_key_redaction` masks it in uvicorn's.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable, Coroutine, Iterable
from typing import Annotated, Any

from fastapi import Depends, Request, Response, Security
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader, APIKeyQuery, HTTPAuthorizationCredentials, HTTPBearer

from .errors import TooManyRequests, Unauthorized
from .ratelimit import WriteLimiter, retry_after
from .settings import Settings

# Documents the scheme in OpenAPI; the check itself is `AdminRoute`, which runs first.
bearer_scheme = HTTPBearer(auto_error=False, description="An admin token (KVPLAN_ADMIN_TOKENS).")

READ_KEY_HEADER = "X-API-KEY"
READ_KEY_PARAMETER = "api_key"
_ONLY_WITH_KEYS = "Needed only where KVPLAN_READ_KEYS is set; reads are open otherwise."
read_key_header = APIKeyHeader(
    name=READ_KEY_HEADER,
    scheme_name="ReadKeyHeader",
    auto_error=False,
    description=f"A read key (KVPLAN_READ_KEYS) in the X-API-KEY header. {_ONLY_WITH_KEYS}",
)
read_key_query = APIKeyQuery(
    name=READ_KEY_PARAMETER,
    scheme_name="ReadKeyQuery",
    auto_error=False,
    description="A read key (KVPLAN_READ_KEYS) as the `api_key` query parameter, for callers "
    "that cannot send headers (spreadsheet functions, KEDA `method: query`). It never changes "
    f"the answer, its cache key or its ETag. {_ONLY_WITH_KEYS}",
)
read_key_bearer = HTTPBearer(
    scheme_name="ReadKeyBearer",
    auto_error=False,
    description=f"A read key (KVPLAN_READ_KEYS) or an admin token as a bearer token. "
    f"{_ONLY_WITH_KEYS}",
)


def _bearer(request: Request) -> str | None:
    return bearer_token(request.headers.get("authorization"))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        return None
    return presented.strip()


def _matches(presented: str, keys: Iterable[str]) -> bool:
    """Compare against every configured key without stopping early."""
    presented_bytes = presented.encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(presented_bytes, key.encode())
    return matched


def require_admin(request: Request) -> None:
    """Dependency for every write; runs before the body is read or validated: the token, then
    the token's write rate (ratelimit.py)."""
    tokens: tuple[str, ...] = request.app.state.settings.admin_token_list
    presented = _bearer(request)
    if presented is None:
        raise Unauthorized("writes need an Authorization: Bearer <admin token> header")
    if not _matches(presented, tokens):
        raise Unauthorized("the bearer token is not an admin token")
    limiter: WriteLimiter = request.app.state.write_limiter
    wait = limiter.take(presented)
    if wait > 0:
        request.app.state.metrics.writes_rate_limited.inc()
        raise TooManyRequests(
            f"this admin token has written too often: the limit is {limiter.policy()}",
            retry_after=retry_after(wait),
        )


def read_key_presented(
    settings: Settings, *, header: str | None, query: str | None, authorization: str | None
) -> bool:
    """True where reads are open, or one of the three ways presents a read key (an admin token
    passes as a bearer); every way is compared, in constant time."""
    keys = settings.read_key_list
    if not keys:
        return True
    matched = False
    for presented in (header, query):
        if presented:
            matched |= _matches(presented, keys)
    bearer = bearer_token(authorization)
    if bearer is not None:
        matched |= _matches(bearer, (*keys, *settings.admin_token_list))
    return matched


def check_read_key(request: Request) -> None:
    """401 unless reads are open or the request presents a read key (or an admin token)."""
    settings = request.app.state.settings
    if not settings.read_key_list:
        return
    if not read_key_presented(
        settings,
        header=request.headers.get(READ_KEY_HEADER),
        query=request.query_params.get(READ_KEY_PARAMETER),
        authorization=request.headers.get("authorization"),
    ):
        raise Unauthorized(
            "reads need a read key: the X-API-KEY header, the api_key query parameter, or "
            "Authorization: Bearer"
        )


async def require_read_key(
    request: Request,
    _header: Annotated[str | None, Security(read_key_header)],
    _query: Annotated[str | None, Security(read_key_query)],
    _bearer_token: Annotated[HTTPAuthorizationCredentials | None, Security(read_key_bearer)],
) -> None:
    """Dependency of every read; the three parameters only document the schemes in OpenAPI."""
    check_read_key(request)


# A read route's dependencies, and its OpenAPI extra: `{}` says a read needs no key at all
# where none is configured (OpenAPI 3.1, Operation Object `security`: "to make security
# optional, an empty security requirement ({}) can be included in the array").
READ = [Depends(require_read_key)]
READ_OPENAPI: dict[str, Any] = {"security": [{}]}


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AdminRoute(APIRoute):
    """A route whose writes are refused (401) before the body is read or validated."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if request.method in WRITE_METHODS:
                require_admin(request)
            return await handler(request)

        return checked


# ---------------------------------------------------------------------------------------------
# keeping read keys out of logs

_KEY_IN_URL = re.compile(rf"([?&]{READ_KEY_PARAMETER}=)[^&#\s\"]*", re.IGNORECASE)


def redact(text: str) -> str:
    """A URL or a log line with the value of every `api_key` parameter masked."""
    return _KEY_IN_URL.sub(r"\1***", text)


class RedactKeys(logging.Filter):
    """Masks `api_key=...` in a record's message and arguments (uvicorn's access log has the
    whole query string in its arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


# The loggers that print request URLs: kvplan's access log (middleware.AccessLog), uvicorn's
# (where it is turned on), and uvicorn's error log on bad requests.
_URL_LOGGERS = ("kvplan.access", "uvicorn.access", "uvicorn.error")


def install_key_redaction() -> None:
    """Add the filter to the loggers that print request URLs (once per process)."""
    for name in _URL_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactKeys) for f in logger.filters):
            logger.addFilter(RedactKeys())
