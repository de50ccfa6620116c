"""Request dependencies: the catalog snapshot, a database session, settings, metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from .catalog.snapshot import CatalogSnapshot
from .metrics import Metrics
from .settings import Settings


def get_catalog(request: Request) -> CatalogSnapshot:
    """The one way a request gets the catalog: this replica's current snapshot."""
    snapshot: CatalogSnapshot = request.app.state.catalog.get()
    return snapshot


def get_session(request: Request) -> Iterator[Session]:
    """A session for this request; the router commits, anything unfinished is rolled back."""
    with request.app.state.db.session() as session:
        yield session


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


CatalogDep = Annotated[CatalogSnapshot, Depends(get_catalog)]
SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
