"""Catalog SQL. Nothing else in kvplan writes a query; callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from sqlalchemy import ColumnElement, delete, func, literal, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

from .models import CatalogState, CatalogTombstone, GpuRow, ModelRow, utcnow

Row = TypeVar("Row", bound=GpuRow | ModelRow)


def catalog_version(session: Session) -> tuple[int, datetime]:
    """The catalog's version and when it last moved (one indexed row)."""
    state = session.execute(select(col(CatalogState.version), col(CatalogState.changed_at))).one()
    return int(state[0]), state[1]


def bump_catalog_version(session: Session) -> None:
    """Every write calls this in its own transaction, so replicas see the change."""
    session.execute(
        update(CatalogState)
        .where(col(CatalogState.id) == 1)
        .values(version=col(CatalogState.version) + 1, changed_at=utcnow())
    )


def all_rows(session: Session, table: type[Row]) -> Sequence[Row]:
    return session.scalars(select(table).order_by(col(table.slug))).all()


def get_by_slug(session: Session, table: type[Row], slug: str) -> Row | None:
    return session.scalars(select(table).where(col(table.slug) == slug)).one_or_none()


def current_revision(session: Session, table: type[Row], slug: str) -> int | None:
    """The revision the database holds now (None once deleted), past the session's cache."""
    revision = session.execute(
        select(col(table.revision)).where(col(table.slug) == slug)
    ).scalar_one_or_none()
    return None if revision is None else int(revision)


def all_slugs(session: Session, table: type[Row]) -> list[str]:
    return list(session.scalars(select(col(table.slug))).all())


def count(session: Session, table: type[Row]) -> int:
    return int(session.scalar(select(func.count()).select_from(table)) or 0)


def add(session: Session, row: Row) -> Row:
    session.add(row)
    session.flush()
    return row


def update_if_revision(session: Session, row: Row, expected_revision: int) -> bool:
    """Write `row`'s changes only if nobody moved it past `expected_revision` meanwhile."""
    table = type(row)
    values = {
        column.name: getattr(row, column.name)
        for column in table.__table__.columns  # type: ignore[attr-defined]
        if column.name not in ("id", "created_at", "revision")
    }
    values["revision"] = expected_revision + 1
    values["updated_at"] = utcnow()
    result = session.execute(
        update(table)
        .where(col(table.id) == row.id, col(table.revision) == expected_revision)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]


def delete_if_revision(session: Session, table: type[Row], slug: str, expected: int) -> bool:
    """Delete the entry only if it is still at revision `expected` (one statement, no race)."""
    result = session.execute(
        delete(table).where(col(table.slug) == slug, col(table.revision) == expected)
    )
    return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]


def refresh(session: Session, row: Row) -> Row:
    """Reload a row after a statement-level update."""
    session.refresh(row)
    return row


# ---------------------------------------------------------------------------------------------
# tombstones: slugs deleted through the API, which the seed leaves deleted


def _kind(table: type[Row]) -> str:
    return str(table.__tablename__)


def add_tombstone(session: Session, table: type[Row], slug: str) -> None:
    if session.get(CatalogTombstone, (_kind(table), slug)) is None:
        session.add(CatalogTombstone(kind=_kind(table), slug=slug))
        session.flush()


def remove_tombstone(session: Session, table: type[Row], slug: str) -> None:
    session.execute(
        delete(CatalogTombstone).where(
            col(CatalogTombstone.kind) == _kind(table), col(CatalogTombstone.slug) == slug
        )
    )


def tombstoned_slugs(session: Session, table: type[Row]) -> set[str]:
    statement = select(col(CatalogTombstone.slug)).where(col(CatalogTombstone.kind) == _kind(table))
    return set(session.scalars(statement).all())


# ---------------------------------------------------------------------------------------------
# lists: ordered by slug in byte order on every database, so a cursor means the same everywhere


def _slug_order(session: Session, table: type[Row]) -> ColumnElement[str]:
    # byte order: PostgreSQL's "C" collation, SQLite's BINARY
    collation = "C" if session.get_bind().dialect.name == "postgresql" else "BINARY"
    return col(table.slug).collate(collation)


def _page(
    session: Session,
    table: type[Row],
    conditions: list[ColumnElement[bool]],
    start: str | None,
    limit: int,
) -> list[Row]:
    order = _slug_order(session, table)
    if start is not None:
        conditions = [*conditions, order >= start]
    statement = select(table).where(*conditions).order_by(order).limit(limit)
    return list(session.scalars(statement).all())


def list_models(
    session: Session,
    *,
    family: str | None = None,
    layer_kind: str | None = None,
    q: str | None = None,
    min_parameters: int | None = None,
    max_parameters: int | None = None,
    start: str | None = None,
    limit: int = 50,
) -> list[ModelRow]:
    """Models from slug `start` on (inclusive), at most `limit`, filtered."""
    conditions: list[ColumnElement[bool]] = []
    if family is not None:
        conditions.append(func.lower(col(ModelRow.family)) == family.lower())
    if layer_kind is not None:
        # layer_kinds is "kind,kind,...": match one whole item
        padded = literal(",") + col(ModelRow.layer_kinds) + literal(",")
        conditions.append(padded.contains(f",{layer_kind},", autoescape=True))
    if q is not None:
        needle = q.lower()
        conditions.append(
            func.lower(col(ModelRow.slug)).contains(needle, autoescape=True)
            | func.lower(col(ModelRow.name)).contains(needle, autoescape=True)
        )
    if min_parameters is not None:
        conditions.append(col(ModelRow.num_parameters) >= min_parameters)
    if max_parameters is not None:
        conditions.append(col(ModelRow.num_parameters) <= max_parameters)
    return _page(session, ModelRow, conditions, start, limit)


def list_gpus(
    session: Session,
    *,
    vendor: str | None = None,
    min_memory_bytes: int | None = None,
    max_price_usd_per_hour: float | None = None,
    fp8_support: bool | None = None,
    start: str | None = None,
    limit: int = 50,
) -> list[GpuRow]:
    """GPUs from slug `start` on (inclusive), at most `limit`, filtered."""
    conditions: list[ColumnElement[bool]] = []
    if vendor is not None:
        conditions.append(func.lower(col(GpuRow.vendor)) == vendor.lower())
    if min_memory_bytes is not None:
        conditions.append(col(GpuRow.memory_bytes) >= min_memory_bytes)
    if max_price_usd_per_hour is not None:
        conditions.append(col(GpuRow.price_usd_per_hour) <= max_price_usd_per_hour)
    if fp8_support is not None:
        conditions.append(col(GpuRow.fp8_support) == fp8_support)
    return _page(session, GpuRow, conditions, start, limit)
