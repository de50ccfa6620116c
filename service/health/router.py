"""Liveness, readiness and the problem-type pages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import text

from ..errors import PROBLEM_TYPES, NotFound, ServiceUnavailable
from ..migrate import current_revision, head_revision

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process answers", operation_id="healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: the database answers and is migrated to head",
    operation_id="readyz",
    responses={503: {"description": "Database unreachable or not migrated"}},
)
def readyz(
    request: Request,
    allow_stale: Annotated[
        bool,
        Query(
            description="Also ready while the database is unreachable if this replica holds a "
            "catalog snapshot to answer reads from (what the Helm chart's readiness probe asks, "
            "so a database outage does not empty the Service autoscalers poll)."
        ),
    ] = False,
) -> dict[str, str | None]:
    engine = request.app.state.db.engine
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        current = current_revision(engine)
    except Exception as exc:  # any failure to reach the database means "not ready"
        if allow_stale and request.app.state.catalog.loaded:
            return {"status": "serving the last catalog; database unreachable", "revision": None}
        raise ServiceUnavailable(f"database unreachable: {type(exc).__name__}") from exc
    head = head_revision()
    if current != head:
        raise ServiceUnavailable(
            f"database schema at revision {current}, expected {head}: run `kvplan migrate`"
        )
    return {"status": "ready", "revision": current}


@router.get(
    "/problems/{code}",
    summary="What a problem type means",
    operation_id="getProblemType",
    response_class=PlainTextResponse,
)
def problem_type(code: str) -> str:
    if code not in PROBLEM_TYPES:
        raise NotFound(f"no problem type {code!r}", suggestions=sorted(PROBLEM_TYPES))
    return f"{code}: {PROBLEM_TYPES[code]}\n"
