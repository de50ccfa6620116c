"""The weights' format joins a calibration's key (a bf16 run's pool never answers fp8 weights).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

Rows stored before it are given the format they ran: the `quantization` flag their log
revealed (kept in `settings`), else, for a catalog model, that model's own format; a config.json
model without the flag is left null, which matches no question (its key cannot be told
without the config). Each row's `key_digest` is worked again over the key with the format, as
`catalog.snapshot.CalibrationKey.digest` works it, so a new log of the same deployment is
refused as before.

Downgrading drops the column and works the digests again without it; it stops, naming them,
where two calibrations differ only in their weights' format (delete one first), since the
older schema holds one calibration per key.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# The key's columns, in CalibrationKey's field order (the digest is over sorted keys anyway).
_KEY = (
    "model",
    "gpu",
    "engine",
    "engine_version",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "kv_cache_dtype",
    "max_num_batched_tokens",
    "enforce_eager",
)
# As service/engine_logs/service.py `weight_format_of_quantization` read the flag when this
# migration was written (a migration keeps its own copy: later edits must not change it).
_QUANTIZATION_FORMATS = {
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "ptpc_fp8": "fp8",
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "mxfp4": "mxfp4",
    "modelopt_fp4": "nvfp4",
}
_WEIGHT_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}

_calibration = sa.table(
    "calibration",
    sa.column("id", sa.Integer()),
    sa.column("key_digest", sa.String()),
    sa.column("settings", sa.JSON()),
    sa.column("weight_format", sa.String()),
    *(sa.column(name) for name in _KEY),
)
_model = sa.table("model", sa.column("slug", sa.String()), sa.column("architecture", sa.JSON()))


def _digest(row: Any, with_format: bool, weight_format: str | None = None) -> str:
    key = {name: getattr(row, name) for name in _KEY}
    key["enforce_eager"] = bool(key["enforce_eager"])
    if with_format:
        key["weight_format"] = weight_format
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _format_of(row: Any, model_formats: dict[str, str]) -> str | None:
    settings = row.settings if isinstance(row.settings, dict) else {}
    flag = settings.get("quantization")
    if isinstance(flag, str) and flag.strip().lower() not in ("compressed-tensors", "modelopt"):
        return _QUANTIZATION_FORMATS.get(flag.strip().lower(), flag.strip().lower())
    found = model_formats.get(row.model)
    return None if found is None else _WEIGHT_ALIASES.get(found.lower(), found.lower())


def upgrade() -> None:
    op.add_column("calibration", sa.Column("weight_format", sa.String(length=32), nullable=True))
    bind = op.get_bind()
    model_formats = {
        slug: str(arch.get("weight_format") or "bfloat16")
        for slug, arch in bind.execute(sa.select(_model.c.slug, _model.c.architecture))
        if isinstance(arch, dict)
    }
    for row in bind.execute(sa.select(_calibration)).all():
        weight_format = _format_of(row, model_formats)
        bind.execute(
            _calibration.update()
            .where(_calibration.c.id == row.id)
            .values(weight_format=weight_format, key_digest=_digest(row, True, weight_format))
        )


def downgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.select(_calibration)).all()
    by_digest: dict[str, list[int]] = {}
    for row in rows:
        by_digest.setdefault(_digest(row, False), []).append(row.id)
    clashes = [ids for ids in by_digest.values() if len(ids) > 1]
    if clashes:
        shown = "; ".join(", ".join(str(i) for i in sorted(ids)) for ids in clashes)
        raise RuntimeError(
            f"calibrations {shown} differ only in their weights' format, which revision 0005 "
            "cannot tell apart: delete all but one of each before downgrading"
        )
    for row in rows:
        bind.execute(
            _calibration.update()
            .where(_calibration.c.id == row.id)
            .values(key_digest=_digest(row, False))
        )
    with op.batch_alter_table("calibration") as batch:
        batch.drop_column("weight_format")
