"""Calibration SQL. Nothing else queries the table; callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.orm import Session
from sqlmodel import col

from .models import CalibrationRow


def all_rows(session: Session) -> Sequence[CalibrationRow]:
    return session.scalars(select(CalibrationRow).order_by(col(CalibrationRow.id))).all()


def get(session: Session, calibration_id: int) -> CalibrationRow | None:
    return session.get(CalibrationRow, calibration_id)


def get_by_key(session: Session, key_digest: str) -> CalibrationRow | None:
    statement = select(CalibrationRow).where(col(CalibrationRow.key_digest) == key_digest)
    return session.scalars(statement).one_or_none()


def add(session: Session, row: CalibrationRow) -> CalibrationRow:
    session.add(row)
    session.flush()
    return row


def delete_if_revision(session: Session, calibration_id: int, expected: int) -> bool:
    """Delete it only if it is still at revision `expected` (one statement, no race)."""
    result = session.execute(
        delete(CalibrationRow).where(
            col(CalibrationRow.id) == calibration_id, col(CalibrationRow.revision) == expected
        )
    )
    return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]


def list_page(
    session: Session,
    *,
    model: str | None = None,
    gpu: str | None = None,
    engine: str | None = None,
    start: int | None = None,
    limit: int = 50,
) -> list[CalibrationRow]:
    """Calibrations from id `start` on (inclusive), oldest first, at most `limit`, filtered."""
    conditions: list[ColumnElement[bool]] = []
    if model is not None:
        conditions.append(col(CalibrationRow.model) == model)
    if gpu is not None:
        conditions.append(col(CalibrationRow.gpu) == gpu)
    if engine is not None:
        conditions.append(col(CalibrationRow.engine) == engine)
    if start is not None:
        conditions.append(col(CalibrationRow.id) >= start)
    statement = (
        select(CalibrationRow).where(*conditions).order_by(col(CalibrationRow.id)).limit(limit)
    )
    return list(session.scalars(statement).all())
