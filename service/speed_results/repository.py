"""Speed calibration SQL. Nothing else queries the table; callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.orm import Session
from sqlmodel import col

from .models import SpeedCalibrationRow


def all_rows(session: Session) -> Sequence[SpeedCalibrationRow]:
    statement = select(SpeedCalibrationRow).order_by(col(SpeedCalibrationRow.id))
    return session.scalars(statement).all()


def get(session: Session, calibration_id: int) -> SpeedCalibrationRow | None:
    return session.get(SpeedCalibrationRow, calibration_id)


def get_by_key(session: Session, key_digest: str) -> SpeedCalibrationRow | None:
    statement = select(SpeedCalibrationRow).where(col(SpeedCalibrationRow.key_digest) == key_digest)
    return session.scalars(statement).one_or_none()


def add(session: Session, row: SpeedCalibrationRow) -> SpeedCalibrationRow:
    session.add(row)
    session.flush()
    return row


def delete_if_revision(session: Session, calibration_id: int, expected: int) -> bool:
    """Delete it only if it is still at revision `expected` (one statement, no race)."""
    result = session.execute(
        delete(SpeedCalibrationRow).where(
            col(SpeedCalibrationRow.id) == calibration_id,
            col(SpeedCalibrationRow.revision) == expected,
        )
    )
    return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]


def list_page(
    session: Session, *, model: str | None = None, start: int | None = None, limit: int = 50
) -> list[SpeedCalibrationRow]:
    """Speed calibrations from id `start` on (inclusive), oldest first, at most `limit`."""
    conditions: list[ColumnElement[bool]] = []
    if model is not None:
        conditions.append(col(SpeedCalibrationRow.model) == model)
    if start is not None:
        conditions.append(col(SpeedCalibrationRow.id) >= start)
    statement = (
        select(SpeedCalibrationRow)
        .where(*conditions)
        .order_by(col(SpeedCalibrationRow.id))
        .limit(limit)
    )
    return list(session.scalars(statement).all())
