"""What every resource router documents the same way: the conditional-request headers a client
sends, the `ETag` it gets back, and the problem answers of an operation.

The semantics of these headers are `service/conditional.py`'s; this module only says them once
for the OpenAPI contract, so the catalog, the deployment profiles and the calibrations read
alike to a client (and to the Backstage plugin generated from the spec).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Header

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
