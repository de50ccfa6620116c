"""What every resource router documents the same way: the conditional-request headers a client
sends, the `ETag` it gets back, and the problem answers of an operation.

The semantics of these headers are `service/kit/conditional.py`'s; this module only says them once
for the OpenAPI contract, so the catalog, the deployment profiles and the calibrations read
alike to a client (and to the Backstage plugin generated from the spec).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Header, Request, Response

from .security import READ_KEY_PARAMETER

Responses = dict[int | str, dict[str, Any]]

IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description='The `ETag` from your GET (e.g. `"3"`). Required: missing is 428, stale 412.',
    ),
]
IfNoneMatch = Annotated[
    str | None,
    Header(
        alias="If-None-Match",
        description="An `ETag` you hold; if it is still current the answer is 304, no body.",
    ),
]


LINK_HEADER = {
    "description": 'The next page, as `<url>; rel="next"` (absent on the last page).',
    "schema": {"type": "string"},
}


def next_page_url(request: Request, response: Response, next_cursor: str | None) -> str | None:
    """The relative URL of a list's next page, with the same filters; also sent as a `Link`
    header. A read key never travels in a link: the client adds its own again."""
    if next_cursor is None:
        return None
    dropped = {"cursor", READ_KEY_PARAMETER}
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in dropped]
    url = f"{request.url.path}?{urlencode([*params, ('cursor', next_cursor)])}"
    response.headers["Link"] = f'<{url}>; rel="next"'
    return url


def etag_header(what: str) -> dict[str, Any]:
    """The `ETag` response header of an entry (`what`: "entry", "profile", ...)."""
    return {
        "description": f'The {what}\'s revision, quoted (e.g. `"3"`); send it back in `If-Match`.',
        "schema": {"type": "string"},
    }


def problem_responses(
    descriptions: Mapping[int, str],
    *codes: int,
    ok: Mapping[int | str, dict[str, Any]] | None = None,
) -> Responses:
    """An operation's documented answers: `ok` (the successes, with their headers), then each
    problem status with the router's own description of it; every route may also answer 503
    (the database), so `descriptions` must say what 503 means there."""
    out: Responses = dict(ok or {})
    for code in (*codes, 503):
        out[code] = {"description": descriptions[code]}
    return out
