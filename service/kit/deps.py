"""Request dependencies: the catalog snapshot, a database session, settings, metrics, and the
check of query parameter names."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from ..catalog.snapshot import CatalogCache, CatalogSnapshot
from .db import Database
from .engine_flags import known
from .errors import InvalidRequest, ServiceUnavailable
from .metrics import Metrics
from .security import READ_KEY_PARAMETER
from .settings import Settings


async def get_catalog(request: Request) -> CatalogSnapshot:
    """The one way a request gets the catalog: this replica's current snapshot.

    A coroutine: the snapshot held is returned without a worker thread; only a request that
    must wait for a refresh (none loaded yet, a TTL of 0, right after a local write) waits in
    one, so a slow database never blocks the event loop.
    """
    cache: CatalogCache = request.app.state.catalog
    snapshot = cache.get_nowait()
    if snapshot is None:
        snapshot = await run_in_threadpool(cache.get)
    return snapshot


def get_session(request: Request) -> Iterator[Session]:
    """A session for a request that reads; nothing is committed."""
    with request.app.state.db.session() as session:
        yield session


def get_write_session(request: Request) -> Iterator[Session]:
    """A session for a request that writes: the one place a write is committed.

    Commits when the endpoint returns, rolls back when it raises, then tells this replica's
    catalog snapshot to refresh. Used with `scope="function"`, so this runs when the endpoint
    returns, before the answer is sent: a client that reads after its write sees it.

    While the database is not answering (`DatabaseHealth`), a write is refused at once (503)
    instead of waiting out the answer deadline; a probe in the background finds out when it is
    back.
    """
    database: Database = request.app.state.db
    if not database.health.answering:
        database.probe_in_background()
        raise ServiceUnavailable(
            f"the database has not answered for {database.health.silent_seconds:.0f} s; "
            "writes are refused until it does"
        )
    with database.session() as session:
        yield session  # an exception from the endpoint rolls back (Database.session)
        session.commit()
    catalog: CatalogCache = request.app.state.catalog
    catalog.invalidate()
    catalog.settle()  # before the answer is sent: reads after it find the write


async def get_catalog_cache(request: Request) -> CatalogCache:
    """The replica's snapshot holder itself, for reads that fall back to it."""
    cache: CatalogCache = request.app.state.catalog
    return cache


async def get_database(request: Request) -> Database:
    database: Database = request.app.state.db
    return database


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


CatalogDep = Annotated[CatalogSnapshot, Depends(get_catalog)]
SessionDep = Annotated[Session, Depends(get_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]
CatalogCacheDep = Annotated[CatalogCache, Depends(get_catalog_cache)]
DatabaseDep = Annotated[Database, Depends(get_database)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]


# ---------------------------------------------------------------------------------------------
# query parameters nobody declared

# Sent by callers kvplan answers, never declared by a route: the read key (security.py).
_UNDECLARED_KNOWN = frozenset({READ_KEY_PARAMETER})
# How close an unknown name must be to a declared one to be taken for a misspelling of it
# (difflib's ratio: `max_model_length` against `max_model_len` is 0.90, `_` and `nocache` 0).
_MISSPELT_CUTOFF = 0.8


def _query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters a route declares, a query model's fields included (kept on the
    route after the first request)."""
    known: frozenset[str] | None = getattr(route, "_kvplan_query_names", None)
    if known is not None:
        return known
    names: set[str] = set()
    pending: list[Dependant] = [route.dependant]
    while pending:
        current = pending.pop()
        pending.extend(current.dependencies)
        for field in current.query_params:
            annotation = field.field_info.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                names.update(info.alias or name for name, info in annotation.model_fields.items())
            else:
                names.add(field.alias)
    known = frozenset(names)
    setattr(route, "_kvplan_query_names", known)  # noqa: B010
    return known


@functools.lru_cache(maxsize=4096)
def misspelling_of(name: str, declared: frozenset[str]) -> str | None:
    """The declared parameter an undeclared `name` is surely a misspelling of, else None
    (`_`, `api_key`, `nocache`: None). Remembered: callers repeat their URLs."""
    if name in declared or name in _UNDECLARED_KNOWN or known(name, declared):
        return None  # a field, the read key, an engine's spelling, a flag refused by name
    close = difflib.get_close_matches(name, sorted(declared), n=1, cutoff=_MISSPELT_CUTOFF)
    return close[0] if close else None


async def refuse_misspelt_parameters(request: Request) -> None:
    """Unknown query parameters are ignored (a spreadsheet's cache-busting `_=123`, KEDA's
    `api_key`), except one so close to a declared name that it is surely a misspelling of it:
    that is a 422 naming it, since ignoring it would answer a question nobody asked."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    declared = _query_names(route)
    for name in request.query_params:
        close = misspelling_of(name, declared)
        if close is not None:
            raise InvalidRequest(
                f"{name}: not a parameter of this request; did you mean {close}?",
                field=name,
                suggestions=[close],
            )
