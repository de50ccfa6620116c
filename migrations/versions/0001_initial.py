"""Initial catalog schema: GPUs, models and the catalog version row.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "gpu",
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(length=10), nullable=False),
        sa.Column("seed_digest", sa.String(length=64), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("vendor", sa.String(length=100), nullable=True),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("memory_source", sa.Text(), nullable=True),
        sa.Column("nvidia_smi_memory_mib", sa.Integer(), nullable=True),
        sa.Column("memory_marketed_gb", sa.Float(), nullable=True),
        sa.Column("memory_type", sa.String(length=100), nullable=True),
        sa.Column("memory_bandwidth_tb_s", sa.Float(), nullable=True),
        sa.Column("dense_bf16_tflops", sa.Float(), nullable=True),
        sa.Column("dense_fp8_tflops", sa.Float(), nullable=True),
        sa.Column("fp8_support", sa.Boolean(), nullable=True),
        sa.Column("interconnect", sa.Text(), nullable=True),
        sa.Column("max_gpus_per_node", sa.Integer(), nullable=False),
        sa.Column("tdp_w", sa.Integer(), nullable=True),
        sa.Column(
            "price_usd_per_hour", sa.Numeric(precision=12, scale=4, asdecimal=False), nullable=True
        ),
        sa.Column("price_date", sa.String(length=10), nullable=True),
        sa.Column("price_examples", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_gpu_slug"), "gpu", ["slug"], unique=True)
    op.create_table(
        "model",
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(length=10), nullable=False),
        sa.Column("seed_digest", sa.String(length=64), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hf_id", sa.String(length=200), nullable=True),
        sa.Column("family", sa.String(length=100), nullable=True),
        sa.Column("architecture", sa.JSON(), nullable=False),
        sa.Column("num_layers", sa.Integer(), nullable=False),
        sa.Column("layer_kinds", sa.String(length=200), nullable=False),
        sa.Column("max_position_embeddings", sa.BigInteger(), nullable=True),
        sa.Column("num_parameters", sa.BigInteger(), nullable=True),
        sa.Column("weight_bytes", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_model_family"), "model", ["family"], unique=False)
    op.create_index(op.f("ix_model_slug"), "model", ["slug"], unique=True)
    # The single catalog-version row every write bumps (replicas compare it to their cache).
    catalog_state = sa.table(
        "catalog_state",
        sa.column("id", sa.Integer),
        sa.column("version", sa.BigInteger),
        sa.column("changed_at", sa.DateTime(timezone=True)),
    )
    op.bulk_insert(catalog_state, [{"id": 1, "version": 0, "changed_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_index(op.f("ix_model_slug"), table_name="model")
    op.drop_index(op.f("ix_model_family"), table_name="model")
    op.drop_table("model")
    op.drop_index(op.f("ix_gpu_slug"), table_name="gpu")
    op.drop_table("gpu")
    op.drop_table("catalog_state")
