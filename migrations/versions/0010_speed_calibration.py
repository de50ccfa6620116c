"""Speed calibrations: a benchmark run (vllm bench serve, genai-perf) kept as the step-time
scale it measured, keyed as memory calibrations are.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "speed_calibration",
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
        sa.Column("weight_format", sa.String(length=32), nullable=True),
        sa.Column("tool", sa.String(length=40), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("context_tokens", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("measured_tpot_ms", sa.Float(), nullable=False),
        sa.Column("measured_ttft_ms", sa.Float(), nullable=True),
        sa.Column("estimated_tpot_ms", sa.Float(), nullable=False),
        sa.Column("step_time_scale", sa.Float(), nullable=False),
        sa.Column("result_sha256", sa.String(length=64), nullable=False),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_speed_calibration_key_digest"), "speed_calibration", ["key_digest"], unique=True
    )
    op.create_index(
        op.f("ix_speed_calibration_model"), "speed_calibration", ["model"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_speed_calibration_model"), table_name="speed_calibration")
    op.drop_index(op.f("ix_speed_calibration_key_digest"), table_name="speed_calibration")
    op.drop_table("speed_calibration")
