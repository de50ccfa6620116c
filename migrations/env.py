"""Alembic environment: runs migrations on PostgreSQL or SQLite, online only."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool
from sqlmodel import SQLModel

# imported to register their tables on SQLModel.metadata
import service.catalog.models
import service.deployments.models
import service.engine_logs.models
import service.speed_results.models  # noqa: F401
from service.kit.db import normalize_url
from service.kit.migrate import context_options

config = context.config
target_metadata = SQLModel.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        **context_options(connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = normalize_url(config.get_main_option("sqlalchemy.url") or "")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("kvplan runs migrations online only: `kvplan migrate`")
run_migrations_online()
