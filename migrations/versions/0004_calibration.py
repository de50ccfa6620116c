"""Calibrations: engine start-up logs kept as what they measured, keyed by what they ran.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "calibration",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key_digest", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=100), nullable=False),
        sa.Column("gpu", sa.String(length=100), nullable=False),
        sa.Column("engine", sa.String(length=10), nullable=False),
        sa.Column("engine_version", sa.String(length=40), nullable=True),
        sa.Column("tensor_parallel_size", sa.Integer(), nullable=False),
        sa.Column("pipeline_parallel_size", sa.Integer(), nullable=False),
        sa.Column("kv_cache_dtype", sa.String(length=20), nullable=False),
        sa.Column("max_num_batched_tokens", sa.Integer(), nullable=True),
        sa.Column("enforce_eager", sa.Boolean(), nullable=False),
        sa.Column("fraction_name", sa.String(length=40), nullable=False),
        sa.Column("fraction", sa.Float(), nullable=True),
        sa.Column("fraction_base_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("kv_pool_bytes", sa.BigInteger(), nullable=False),
        sa.Column("reproduces", sa.Boolean(), nullable=False),
        sa.Column("weights_bytes", sa.BigInteger(), nullable=True),
        sa.Column("activation_peak_bytes", sa.BigInteger(), nullable=True),
        sa.Column("non_torch_bytes", sa.BigInteger(), nullable=True),
        sa.Column("cudagraph_bytes", sa.BigInteger(), nullable=True),
        sa.Column("reported_kv_pool_bytes", sa.BigInteger(), nullable=True),
        sa.Column("num_gpu_blocks", sa.BigInteger(), nullable=True),
        sa.Column("kv_cache_tokens", sa.BigInteger(), nullable=True),
        sa.Column("max_concurrency", sa.Float(), nullable=True),
        sa.Column("max_model_len", sa.BigInteger(), nullable=True),
        sa.Column("replaced", sa.JSON(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("log_sha256", sa.String(length=64), nullable=False),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_calibration_key_digest"), "calibration", ["key_digest"], unique=True)
    op.create_index(op.f("ix_calibration_model"), "calibration", ["model"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_calibration_model"), table_name="calibration")
    op.drop_index(op.f("ix_calibration_key_digest"), table_name="calibration")
    op.drop_table("calibration")
