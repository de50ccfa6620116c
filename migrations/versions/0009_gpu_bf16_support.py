"""A catalog GPU says whether it computes in bfloat16 (what vLLM's --dtype auto resolves to).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

Null for rows written before it: the sizing reads an unknown as bfloat16-capable (every GPU the
seed holds is, compute capability >= 8.0); `kvplan seed` fills the seed rows' value.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gpu") as batch:
        batch.add_column(sa.Column("bf16_support", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gpu") as batch:
        batch.drop_column("bf16_support")
