"""Tombstones: slugs deleted through the API, which `kvplan seed` must not bring back.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_tombstone",
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "slug"),
    )


def downgrade() -> None:
    op.drop_table("catalog_tombstone")
