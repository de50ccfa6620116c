"""Deployment profiles: one serving deployment each, sized from the catalog on demand.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("gpu", sa.String(length=100), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=True),
        sa.Column("workload", sa.String(length=253), nullable=True),
        sa.Column("replicas", sa.Integer(), nullable=True),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_deployment_name"), "deployment", ["name"], unique=True)


def downgrade() -> None:
    op.drop_index(op.f("ix_deployment_name"), table_name="deployment")
    op.drop_table("deployment")
