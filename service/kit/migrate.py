"""Alembic driven from code: `kvplan migrate`, the readiness check and the tests use this.

Alembic itself (about a tenth of a replica's start-up to import: every dialect's DDL, Mako,
Pygments) is imported only by the commands that change the schema. What `/readyz` asks, the
revision a database is at and the newest one shipped, is read here without it, the way Alembic
reads them (`MigrationContext.get_current_revision`: the `alembic_version` table's rows, none
when the table is missing; `ScriptDirectory.get_current_head`: the one revision no other
revision revises), and a test holds both answers to Alembic's own.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

import migrations

from .db import normalize_url

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic's defaults (MigrationContext: version_table, no schema); migrations/env.py keeps them.
VERSION_TABLE = "alembic_version"
VERSIONS = Path(migrations.__file__).parent / "versions"


def context_options(dialect_name: str) -> dict[str, Any]:
    """What migrations/env.py hands Alembic; the schema-drift test compares with the same."""
    return {
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        "render_as_batch": dialect_name == "sqlite",
        "compare_type": True,
    }


def alembic_config(url: str) -> Config:
    from alembic.config import Config  # noqa: PLC0415 (only the schema's commands need Alembic)

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command  # noqa: PLC0415 (only the schema's commands need Alembic)

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    from alembic import command  # noqa: PLC0415 (only the schema's commands need Alembic)

    command.downgrade(alembic_config(url), revision)


def _revises(node: ast.expr | None) -> tuple[str, ...]:
    """A `down_revision` as written: None, one revision, or a merge's tuple of them."""
    if node is None:
        return ()
    value = ast.literal_eval(node)
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _script_revisions() -> dict[str, tuple[str, ...]]:
    """Each migration script's `revision` and the revisions it revises (`down_revision`)."""
    found: dict[str, tuple[str, ...]] = {}
    for script in sorted(VERSIONS.glob("*.py")):
        if script.name == "__init__.py":
            continue
        assigned: dict[str, ast.expr] = {}
        for statement in ast.parse(script.read_text(encoding="utf-8")).body:
            if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                )
                for target in targets:
                    if isinstance(target, ast.Name):
                        assigned[target.id] = statement.value
        if "revision" not in assigned:
            raise RuntimeError(f"migration {script.name} names no revision")
        found[ast.literal_eval(assigned["revision"])] = _revises(assigned.get("down_revision"))
    return found


@cache
def head_revision() -> str | None:
    """The newest migration shipped (read once: the files do not change under a process)."""
    revisions = _script_revisions()
    revised = {parent for parents in revisions.values() for parent in parents}
    heads = sorted(set(revisions) - revised)
    if len(heads) > 1:
        raise RuntimeError(f"the migrations have more than one head: {', '.join(heads)}")
    return heads[0] if heads else None


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at: None before the first migration."""
    with engine.connect() as conn:
        if not conn.dialect.has_table(conn, VERSION_TABLE):
            return None
        heads = [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]
    if len(heads) > 1:
        raise RuntimeError(f"Version table '{VERSION_TABLE}' has more than one head present")
    return heads[0] if heads else None
