"""The calibration table: an engine's start-up log, kept as what it measured.

The schema changes only through Alembic (migrations/). One calibration per key (`key_digest`,
the sha256 of the key's canonical JSON): the model, the GPU, the engine and its release, the
layout, the KV dtype, the weights' format, and the flags that change the non-KV memory. The
fraction the engine was given (utilization, memory fraction) is not in the key: a question at
another fraction scales the measured pool (`catalog.snapshot.CalibrationEntry.pool_for`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, String, Text
from sqlmodel import Field, SQLModel

from ..catalog.models import UtcDateTime, utcnow


class CalibrationRow(SQLModel, table=True):
    __tablename__ = "calibration"

    id: int | None = Field(default=None, primary_key=True)
    key_digest: str = Field(sa_type=String(64), unique=True, index=True, nullable=False)
    # The key. `model`: a catalog slug, or `sha256:<hex>` of a config.json's canonical JSON;
    # `gpu`: a catalog slug, or `<bytes>B` for an unnamed GPU of that runtime total.
    model: str = Field(sa_type=String(100), index=True, nullable=False)
    gpu: str = Field(sa_type=String(100), nullable=False)
    engine: str = Field(sa_type=String(10), nullable=False)
    engine_version: str | None = Field(default=None, sa_type=String(40))
    tensor_parallel_size: int = Field(nullable=False)
    pipeline_parallel_size: int = Field(nullable=False)
    kv_cache_dtype: str = Field(sa_type=String(20), nullable=False)
    max_num_batched_tokens: int | None = Field(default=None)
    enforce_eager: bool = Field(nullable=False)
    # The weights' storage format (a sizing.model.dtypes.WEIGHT_FORMAT_BITS name); null only for a
    # calibration stored before 0006 whose format could not be told (it matches no question).
    weight_format: str | None = Field(default=None, sa_type=String(32))
    # How the pool moves with the question's fraction: pool + (fraction' - fraction) x base.
    fraction_name: str = Field(sa_type=String(40), nullable=False)
    fraction: float | None = Field(default=None)
    fraction_base_bytes: int | None = Field(default=None, sa_type=BigInteger)
    gpu_memory_bytes: int = Field(sa_type=BigInteger, nullable=False)
    # The pool in bytes that gives the engine's own blocks and tokens by kvplan's arithmetic
    # (within the printed figure's rounding), and whether one does.
    kv_pool_bytes: int = Field(sa_type=BigInteger, nullable=False)
    reproduces: bool = Field(nullable=False)
    # What the log measured, as printed (bytes, counts); null where it does not print it.
    weights_bytes: int | None = Field(default=None, sa_type=BigInteger)
    activation_peak_bytes: int | None = Field(default=None, sa_type=BigInteger)
    non_torch_bytes: int | None = Field(default=None, sa_type=BigInteger)
    cudagraph_bytes: int | None = Field(default=None, sa_type=BigInteger)
    reported_kv_pool_bytes: int | None = Field(default=None, sa_type=BigInteger)
    num_gpu_blocks: int | None = Field(default=None, sa_type=BigInteger)
    kv_cache_tokens: int | None = Field(default=None, sa_type=BigInteger)
    max_concurrency: float | None = Field(default=None)
    max_model_len: int | None = Field(default=None, sa_type=BigInteger)
    # The budget lines of kvplan's own prediction that the measurement replaces.
    replaced: list[str] = Field(default_factory=list, sa_type=JSON, nullable=False)
    # Every setting the log revealed (service.engine_logs.model.Settings, nulls left out).
    settings: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, nullable=False)
    log_sha256: str = Field(sa_type=String(64), nullable=False)
    notes: str | None = Field(default=None, sa_type=Text)
    revision: int = Field(default=1, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
