"""Alembic driven from code: `kvplan migrate`, the readiness check and the tests use this."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

import migrations

from .db import normalize_url


def context_options(dialect_name: str) -> dict[str, Any]:
    """What migrations/env.py hands Alembic; the schema-drift test compares with the same."""
    return {
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        "render_as_batch": dialect_name == "sqlite",
        "compare_type": True,
    }


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


@cache
def head_revision() -> str | None:
    """The newest migration shipped (read once: the files do not change under a process)."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
