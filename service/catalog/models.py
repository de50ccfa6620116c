"""Catalog tables. The schema changes only through Alembic migrations (migrations/)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Numeric, String, Text
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """`DateTime(timezone=True)` that reads back as an aware UTC datetime on every backend.

    SQLite keeps no offset, so without this a row read back from SQLite has a naive time (and
    the API would answer `2026-06-14T12:00:00` there but `...Z` on PostgreSQL).
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("catalog times must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:  # SQLite: stored from an aware UTC value (see above)
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class _Entry(SQLModel):
    """Columns every catalog entry has: identity, provenance and optimistic concurrency."""

    slug: str = Field(sa_type=String(100), unique=True, index=True, nullable=False)
    name: str = Field(sa_type=String(200), nullable=False)
    sources: list[str] = Field(default_factory=list, sa_type=JSON, nullable=False)
    notes: str | None = Field(default=None, sa_type=Text)
    # "seed": written by `kvplan seed` and not edited since; "user": created or edited via the API.
    origin: str = Field(default="user", sa_type=String(10), nullable=False)
    # Digest of the seed record this row was last written from (None for user entries).
    seed_digest: str | None = Field(default=None, sa_type=String(64))
    revision: int = Field(default=1, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)


class GpuRow(_Entry, table=True):
    __tablename__ = "gpu"

    id: int | None = Field(default=None, primary_key=True)
    vendor: str | None = Field(default=None, sa_type=String(100))
    # Total memory as the CUDA runtime / PyTorch reports it (what engines size from).
    memory_bytes: int = Field(sa_type=BigInteger, nullable=False)
    memory_source: str | None = Field(default=None, sa_type=Text)
    nvidia_smi_memory_mib: int | None = Field(default=None)
    memory_marketed_gb: float | None = Field(default=None)
    memory_type: str | None = Field(default=None, sa_type=String(100))
    memory_bandwidth_tb_s: float | None = Field(default=None)
    dense_bf16_tflops: float | None = Field(default=None)
    dense_fp8_tflops: float | None = Field(default=None)
    dense_fp4_tflops: float | None = Field(default=None)
    fp8_support: bool | None = Field(default=None)
    # Whether it computes in bfloat16 (NVIDIA compute capability >= 8.0): vLLM's --dtype auto
    # (sizing/engines/model_dtype.py); None = not recorded, sized as bfloat16-capable.
    bf16_support: bool | None = Field(default=None)
    interconnect: str | None = Field(default=None, sa_type=Text)
    # GB/s (10^9 B/s) per GPU and direction: what the speed estimate's all-reduces take.
    interconnect_gb_s: float | None = Field(default=None)
    max_gpus_per_node: int = Field(default=8, nullable=False)
    tdp_w: int | None = Field(default=None)
    price_usd_per_hour: float | None = Field(default=None, sa_type=Numeric(12, 4, asdecimal=False))
    price_date: str | None = Field(default=None, sa_type=String(10))
    # The provider and offer the price was read from, or "unpriced: <reason>".
    price_source: str | None = Field(default=None, sa_type=Text)
    price_examples: dict[str, Any] | None = Field(default=None, sa_type=JSON)


class ModelRow(_Entry, table=True):
    __tablename__ = "model"

    id: int | None = Field(default=None, primary_key=True)
    hf_id: str | None = Field(default=None, sa_type=String(200))
    family: str | None = Field(default=None, sa_type=String(100), index=True)
    # The architecture in its plain-dict form (service.sizing.model.schedule.architecture_to_dict).
    architecture: dict[str, Any] = Field(sa_type=JSON, nullable=False)
    # Denormalised from `architecture` so lists can filter without parsing JSON.
    num_layers: int = Field(nullable=False)
    layer_kinds: str = Field(sa_type=String(200), nullable=False)
    max_position_embeddings: int | None = Field(default=None, sa_type=BigInteger)
    num_parameters: int | None = Field(default=None, sa_type=BigInteger)
    weight_bytes: int | None = Field(default=None, sa_type=BigInteger)


class CatalogState(SQLModel, table=True):
    """One row whose version moves on every catalog write: replicas compare it to their cache."""

    __tablename__ = "catalog_state"

    id: int = Field(default=1, primary_key=True)
    version: int = Field(default=0, sa_type=BigInteger, nullable=False)
    changed_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)


class CatalogTombstone(SQLModel, table=True):
    """A slug deleted through the API: `kvplan seed` does not bring it back.

    Creating an entry with the slug again (POST) removes the tombstone.
    """

    __tablename__ = "catalog_tombstone"

    # the entry's table: "gpu" or "model"
    kind: str = Field(sa_type=String(10), primary_key=True)
    slug: str = Field(sa_type=String(100), primary_key=True)
    deleted_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
