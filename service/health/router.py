"""Liveness, readiness and the problem-type pages.

`/healthz` is a coroutine that touches nothing: it answers while the database hangs and while
every worker thread is busy. `/readyz` asks the database from a thread of its own (one check at
a time, shared by concurrent probes) and answers within `readiness_timeout_seconds` whatever
the database does: 503 when the check has not come back by then, and 503 while the replica has
not loaded its catalog (it loads it before taking requests; only a load that failed at start
leaves a replica without one).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import text

from ..kit.db import Database
from ..kit.errors import PROBLEM_TYPES, NotFound, ServiceUnavailable
from ..kit.migrate import current_revision, head_revision

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process answers", operation_id="healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


class ReadinessCheck:
    """One database check in flight at a time, in its own thread; probes share its result."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._lock = threading.Lock()
        self._running: Future[str | None] | None = None

    def start(self) -> Future[str | None]:
        """The check in flight, or a new one: the schema revision the database is at."""
        with self._lock:
            if self._running is None or self._running.done():
                future: Future[str | None] = Future()
                threading.Thread(
                    target=self._check, args=(future,), name="kvplan-readyz", daemon=True
                ).start()
                self._running = future
            return self._running

    def _check(self, future: Future[str | None]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            engine = self._db.engine
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            future.set_result(current_revision(engine))
        except BaseException as exc:  # handed to the probe that waits
            future.set_exception(exc)


def _readiness(request: Request) -> ReadinessCheck:
    check: ReadinessCheck | None = getattr(request.app.state, "readiness", None)
    if check is None:
        check = request.app.state.readiness = ReadinessCheck(request.app.state.db)
    return check


@router.get(
    "/readyz",
    summary="Readiness: the database answers and is migrated to head",
    operation_id="readyz",
    responses={
        503: {
            "description": "Database unreachable, not answering within the readiness timeout "
            "(1 s by default), or not migrated; or the catalog not loaded yet"
        }
    },
)
async def readyz(
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
    database: Database = request.app.state.db
    timeout: float = request.app.state.settings.readiness_timeout_seconds
    try:
        if not database.health.may_try():
            raise TimeoutError(
                f"the database has not answered for {database.health.silent_seconds:.0f} s"
            )
        check = asyncio.wrap_future(_readiness(request).start())
        # a probe that gives up leaves the check running (shielded) for the next probe; its
        # outcome is collected here so that asyncio never reports it as unretrieved
        check.add_done_callback(lambda done: done.cancelled() or done.exception())
        current = await asyncio.wait_for(asyncio.shield(check), timeout)
    except Exception as exc:  # any failure to reach the database means "not ready"
        if allow_stale and request.app.state.catalog.loaded:
            return {"status": "serving the last catalog; database unreachable", "revision": None}
        if isinstance(exc, TimeoutError):
            detail = str(exc) or f"the database did not answer within {timeout:g} s"
            raise ServiceUnavailable(detail) from exc
        raise ServiceUnavailable(f"database unreachable: {type(exc).__name__}") from exc
    head = head_revision()
    if current != head:
        raise ServiceUnavailable(
            f"database schema at revision {current}, expected {head}: run `kvplan migrate`"
        )
    catalog = request.app.state.catalog
    if request.app.state.settings.catalog_ttl_seconds > 0 and not catalog.loaded:
        catalog.warm()  # the load at start failed: ready once a background load has worked
        raise ServiceUnavailable("the catalog is loading")
    return {"status": "ready", "revision": current}


@router.get(
    "/problems/{code}",
    summary="What a problem type means",
    operation_id="getProblemType",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        404: {"description": "No such problem type; `suggestions` lists those that exist."},
    },
)
async def problem_type(code: str) -> str:
    if code not in PROBLEM_TYPES:
        raise NotFound(f"no problem type {code!r}", suggestions=sorted(PROBLEM_TYPES))
    return f"{code}: {PROBLEM_TYPES[code]}\n"
