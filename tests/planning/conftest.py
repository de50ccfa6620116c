"""Fixtures of the sizing tests: an app whose reads need a key (KVPLAN_READ_KEYS), and one
whose GET /v1/capacity is answered by the FastAPI route alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.kit.db import Database
from service.planning.hot_path import CapacityHotPath
from tests.conftest import make_settings

KeyedClient = Callable[[str], AbstractContextManager[TestClient]]


@pytest.fixture
def keyed_client(engine: Engine, connection: Connection, database_url: str) -> KeyedClient:
    """`with keyed_client("k1,k2") as client:` a client of an app configured with those keys,
    in this test's rolled-back transaction."""

    @contextmanager
    def client(read_keys: str) -> Iterator[TestClient]:
        database = Database(engine)
        database.sessions = sessionmaker(
            bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        app = create_app(make_settings(database_url, read_keys=read_keys), database)
        with TestClient(app) as test_client:
            yield test_client

    return client


@pytest.fixture
def fastapi_only(engine: Engine, connection: Connection, database_url: str) -> Iterator[TestClient]:
    """A replica whose GET /v1/capacity is answered by the FastAPI route alone."""
    database = Database(engine)
    database.sessions = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    app = create_app(make_settings(database_url), database)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not CapacityHotPath]
    with TestClient(app) as test_client:
        yield test_client
