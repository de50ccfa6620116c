"""The speed calibration table: a benchmark run kept as the step-time scale it measured.

One per key (`key_digest`, the same key as a memory calibration's: `catalog.snapshot.
CalibrationKey`, model, GPU, engine and release, layout, KV dtype, weights' format, the flags
that change the memory). The schema changes only through Alembic (migrations/0010).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text
from sqlmodel import Field, SQLModel

from ..catalog.models import UtcDateTime, utcnow


class SpeedCalibrationRow(SQLModel, table=True):
    __tablename__ = "speed_calibration"

    id: int | None = Field(default=None, primary_key=True)
    key_digest: str = Field(sa_type=String(64), unique=True, index=True, nullable=False)
    model: str = Field(sa_type=String(100), index=True, nullable=False)
    gpu: str = Field(sa_type=String(100), nullable=False)
    engine: str = Field(sa_type=String(10), nullable=False)
    engine_version: str | None = Field(default=None, sa_type=String(40))
    tensor_parallel_size: int = Field(nullable=False)
    pipeline_parallel_size: int = Field(nullable=False)
    kv_cache_dtype: str = Field(sa_type=String(20), nullable=False)
    max_num_batched_tokens: int | None = Field(default=None)
    enforce_eager: bool = Field(nullable=False)
    weight_format: str | None = Field(default=None, sa_type=String(32))
    # The run: which tool, at what shape (batch, context per sequence, prompt), what it measured.
    tool: str = Field(sa_type=String(40), nullable=False)
    batch: int = Field(nullable=False)
    context_tokens: int = Field(nullable=False)
    prompt_tokens: int = Field(nullable=False)
    measured_tpot_ms: float = Field(nullable=False)
    measured_ttft_ms: float | None = Field(default=None)
    estimated_tpot_ms: float = Field(nullable=False)
    # measured_tpot_ms / estimated_tpot_ms: the factor capacity answers put on the decode step.
    step_time_scale: float = Field(nullable=False)
    result_sha256: str = Field(sa_type=String(64), nullable=False)
    notes: str | None = Field(default=None, sa_type=Text)
    revision: int = Field(default=1, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
