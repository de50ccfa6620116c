"""Request mechanics every slice shares: entity tags, conditional requests, page cursors.

ETags and `If-Match`/`If-None-Match` follow RFC 9110 §8.8.3 and §13.1. A catalog entry's tag is
its revision (`"3"`); a computed answer's tag is the catalog token plus a digest of the body.
Cursors are opaque to clients: the URL-safe base64 of the slug the next page starts at.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import Request, Response

from .errors import InvalidRequest, PreconditionFailed, PreconditionRequired


def etag(revision: int) -> str:
    """The strong ETag of an entry at `revision`: the number in quotes, e.g. `"3"`."""
    return f'"{revision}"'


def etag_for(token: str, body: bytes) -> str:
    """The ETag of a computed answer: what it was computed from, and what it says."""
    return f'"{token}-{hashlib.sha256(body).hexdigest()[:16]}"'


def _tags(header: str) -> list[str]:
    """The entity tags a conditional header lists, weak ones (`W/"3"`) compared as strong."""
    return [tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()]


def none_match(header: str | None, tag: str) -> bool:
    """True when an If-None-Match header already names `tag` (or `*`): answer 304."""
    if header is None:
        return False
    tags = _tags(header)
    return "*" in tags or tag in tags


def etag_matches(request: Request, tag: str) -> bool:
    """The request's If-None-Match names `tag`."""
    return none_match(request.headers.get("if-none-match"), tag)


def if_none_match(header: str | None, revision: int) -> bool:
    """True when a conditional GET's If-None-Match already names this revision (-> 304)."""
    return none_match(header, etag(revision))


def revision_read(response: Response, revision: int, header: str | None) -> Response | None:
    """A conditional GET of an entry at `revision`: the 304 to send when `If-None-Match`
    (`header`) names it; else None, with the answer's `ETag` and `Cache-Control: no-cache` set
    on `response`."""
    tag = etag(revision)
    if none_match(header, tag):
        return Response(status_code=304, headers={"ETag": tag, "Cache-Control": "no-cache"})
    response.headers["ETag"] = tag
    response.headers["Cache-Control"] = "no-cache"
    return None


def if_match_tags(header: str | None) -> list[str]:
    """The tags of a write's If-Match: 428 when it is missing or `*` (a blind overwrite)."""
    if header is None or not header.strip():
        raise PreconditionRequired(
            "send If-Match with the entry's ETag (GET it first) so concurrent edits are detected",
            field="If-Match",
        )
    tags = _tags(header)
    if "*" in tags:
        raise PreconditionRequired(
            'If-Match must name the entry\'s ETag (its revision, e.g. "3"); * would overwrite '
            "changes made by others",
            field="If-Match",
        )
    return tags


def check_if_match(header: str | None, revision: int, what: str) -> None:
    """412 unless If-Match names `revision`; `what` names the entry, e.g. `GPU 'h100'`."""
    if etag(revision) not in if_match_tags(header):
        raise PreconditionFailed(
            f"{what} is at revision {revision}, not {header}: "
            "someone changed it; GET it again and reapply your change",
            field="If-Match",
            headers={"ETag": etag(revision)},
            current_revision=revision,
        )


def encode_cursor(slug: str) -> str:
    return base64.urlsafe_b64encode(slug.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, slug: re.Pattern[str]) -> str | None:
    """The slug a cursor starts at; 422 for anything this API did not issue."""
    if cursor is None:
        return None
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        start = raw.decode()
    except ValueError:
        start = ""
    if not slug.fullmatch(start):
        raise InvalidRequest(
            "cursor: not a cursor this API issued; use the `next_cursor` of the previous page",
            field="cursor",
        )
    return start
