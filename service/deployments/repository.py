"""Deployment profile SQL. Nothing else queries the table; callers own the transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

from ..catalog.models import utcnow
from .models import DeploymentRow


def get_by_name(session: Session, name: str) -> DeploymentRow | None:
    statement = select(DeploymentRow).where(col(DeploymentRow.name) == name)
    return session.scalars(statement).one_or_none()


def all_names(session: Session) -> list[str]:
    return list(session.scalars(select(col(DeploymentRow.name))).all())


def all_rows(session: Session) -> Sequence[DeploymentRow]:
    return session.scalars(select(DeploymentRow).order_by(_name_order(session))).all()


def names_pointing_at(session: Session, calibration_id: int) -> list[str]:
    """The profiles that point at the calibration, in name order."""
    statement = (
        select(col(DeploymentRow.name))
        .where(col(DeploymentRow.calibration_id) == calibration_id)
        .order_by(_name_order(session))
    )
    return list(session.scalars(statement).all())


def current_revision(session: Session, name: str) -> int | None:
    """The revision the database holds now (None once deleted), past the session's cache."""
    revision = session.execute(
        select(col(DeploymentRow.revision)).where(col(DeploymentRow.name) == name)
    ).scalar_one_or_none()
    return None if revision is None else int(revision)


def add(session: Session, row: DeploymentRow) -> DeploymentRow:
    session.add(row)
    session.flush()
    return row


def update_if_revision(session: Session, row: DeploymentRow, expected_revision: int) -> bool:
    """Write `row`'s values only if nobody moved it past `expected_revision` meanwhile."""
    result = session.execute(
        update(DeploymentRow)
        .where(col(DeploymentRow.id) == row.id, col(DeploymentRow.revision) == expected_revision)
        .values(
            model=row.model,
            gpu=row.gpu,
            namespace=row.namespace,
            workload=row.workload,
            replicas=row.replicas,
            calibration_id=row.calibration_id,
            settings=row.settings,
            revision=expected_revision + 1,
            updated_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]


def delete_if_revision(session: Session, name: str, expected: int) -> bool:
    """Delete the profile only if it is still at revision `expected` (one statement, no race)."""
    result = session.execute(
        delete(DeploymentRow).where(
            col(DeploymentRow.name) == name, col(DeploymentRow.revision) == expected
        )
    )
    return result.rowcount == 1  # type: ignore[attr-defined,no-any-return]


def refresh(session: Session, row: DeploymentRow) -> DeploymentRow:
    session.refresh(row)
    return row


def _name_order(session: Session) -> ColumnElement[str]:
    # byte order on every database, so a cursor means the same everywhere (as the catalog's)
    collation = "C" if session.get_bind().dialect.name == "postgresql" else "BINARY"
    return col(DeploymentRow.name).collate(collation)


def list_page(
    session: Session,
    *,
    model: str | None = None,
    gpu: str | None = None,
    namespace: str | None = None,
    start: str | None = None,
    limit: int = 50,
) -> list[DeploymentRow]:
    """Profiles from name `start` on (inclusive), at most `limit`, filtered."""
    order = _name_order(session)
    conditions: list[ColumnElement[bool]] = []
    if model is not None:
        conditions.append(col(DeploymentRow.model) == model)
    if gpu is not None:
        conditions.append(col(DeploymentRow.gpu) == gpu)
    if namespace is not None:
        conditions.append(col(DeploymentRow.namespace) == namespace)
    if start is not None:
        conditions.append(order >= start)
    statement = select(DeploymentRow).where(*conditions).order_by(order).limit(limit)
    return list(session.scalars(statement).all())
