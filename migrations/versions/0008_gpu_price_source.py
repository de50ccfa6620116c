"""A catalog GPU says where its price was read, and carries its FP4 peak and its link figure.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27

Three nullable columns on `gpu`:

* `price_source`: the provider and offer `price_usd_per_hour` was read from (docs/
  catalog-sources.md#gpu-prices), or "unpriced: <reason>" where no published price was found;
* `dense_fp4_tflops`: peak dense FP4 tensor throughput, where the GPU has FP4 tensor cores;
* `interconnect_gb_s`: the GPU-to-GPU link within a node, GB/s (10^9 B/s) per GPU and
  direction, the figure the speed estimate's all-reduces take (until now a table in
  service/sizing/speed/performance.py `LINK_GB_S`, by slug, so a GPU written through the API had none).

Rows stored before it keep null in all three until `kvplan seed` writes the seed's values (a seed
entry not edited since) or a caller writes them. Downgrading drops the columns.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gpu") as batch:
        batch.add_column(sa.Column("price_source", sa.Text(), nullable=True))
        batch.add_column(sa.Column("dense_fp4_tflops", sa.Float(), nullable=True))
        batch.add_column(sa.Column("interconnect_gb_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gpu") as batch:
        batch.drop_column("interconnect_gb_s")
        batch.drop_column("dense_fp4_tflops")
        batch.drop_column("price_source")
