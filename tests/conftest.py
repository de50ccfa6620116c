"""Suite-wide checks. The suite runs against a real PostgreSQL and fails, not skips, without one."""

from __future__ import annotations

import os

import psycopg
import pytest
from sqlalchemy.engine import make_url


def pytest_sessionstart(session: pytest.Session) -> None:
    url = os.environ.get("KVPLAN_TEST_DATABASE_URL")
    if not url:
        raise pytest.UsageError(
            "KVPLAN_TEST_DATABASE_URL is not set: the suite needs a PostgreSQL database "
            "(`make test` sets postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        )
    parsed = make_url(url)
    try:
        with psycopg.connect(
            host=parsed.host,
            port=parsed.port or 5432,
            user=parsed.username,
            password=parsed.password,
            dbname=parsed.database,
            connect_timeout=5,
        ):
            pass
    except psycopg.OperationalError as exc:
        raise pytest.UsageError(f"PostgreSQL at {url} is unreachable: {exc}") from exc
