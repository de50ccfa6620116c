"""Suite-wide fixtures.

The suite runs against a real PostgreSQL and fails, not skips, without one
(KVPLAN_TEST_DATABASE_URL). Each test session gets its own database, migrated to head and
seeded; each test runs inside a transaction that is rolled back (the app's commits become
savepoints), so tests never see each other's writes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.catalog.seed import seed_catalog
from service.kit.db import Database, normalize_url
from service.kit.migrate import upgrade
from service.kit.settings import Settings

ADMIN_TOKEN = "test-admin-token-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _server_url() -> URL:
    url = os.environ.get("KVPLAN_TEST_DATABASE_URL")
    if not url:
        raise pytest.UsageError(
            "KVPLAN_TEST_DATABASE_URL is not set: the suite needs a PostgreSQL database "
            "(`make test` sets postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        )
    return make_url(normalize_url(url))


def _admin_connect(url: URL) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        dbname=url.database,
        connect_timeout=5,
        autocommit=True,
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    url = _server_url()
    try:
        with _admin_connect(url):
            pass
    except psycopg.OperationalError as exc:
        raise pytest.UsageError(f"PostgreSQL at {url} is unreachable: {exc}") from exc


def create_database(prefix: str = "kvplan_test") -> str:
    """A new, empty PostgreSQL database on the test server; returns its URL."""
    url = _server_url()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with _admin_connect(url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.set(database=name).render_as_string(hide_password=False)


def drop_database(db_url: str) -> None:
    url = _server_url()
    name = make_url(db_url).database
    with _admin_connect(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """This session's database, migrated to head and seeded."""
    url = create_database()
    try:
        upgrade(url)
        engine = create_engine(url)
        with Database(engine).session() as session:
            seed_catalog(session)
            session.commit()
        engine.dispose()
        yield url
    finally:
        drop_database(url)


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def connection(engine: Engine) -> Iterator[Connection]:
    """One connection in one transaction, rolled back after the test."""
    conn = engine.connect()
    outer = conn.begin()
    try:
        yield conn
    finally:
        outer.rollback()
        conn.close()


def make_settings(database_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": database_url,
        "admin_tokens": ADMIN_TOKEN,
        "catalog_ttl_seconds": 0,
        # Off: property and fuzz tests write hundreds of times through one app;
        # tests/test_ratelimit.py turns it on.
        "write_rate_per_second": 0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def app(engine: Engine, connection: Connection, database_url: str) -> FastAPI:
    database = Database(engine)
    database.sessions = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    return create_app(make_settings(database_url), database)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client
