"""A deployment profile may point at a calibration (and that calibration then stays).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_FK = "fk_deployment_calibration_id_calibration"


def upgrade() -> None:
    # batch: SQLite adds a foreign key only by copying the table (alembic's batch mode)
    with op.batch_alter_table("deployment") as batch:
        batch.add_column(sa.Column("calibration_id", sa.Integer(), nullable=True))
        batch.create_index(op.f("ix_deployment_calibration_id"), ["calibration_id"], unique=False)
        batch.create_foreign_key(
            _FK, "calibration", ["calibration_id"], ["id"], ondelete="RESTRICT"
        )


def downgrade() -> None:
    with op.batch_alter_table("deployment") as batch:
        batch.drop_constraint(_FK, type_="foreignkey")
        batch.drop_index(op.f("ix_deployment_calibration_id"))
        batch.drop_column("calibration_id")
