"""Catalog rows as answers: the JSON entries (`GpuRead`, `ModelRead`) and the table rows."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from ..kit.formats import gib_twins
from ..sizing import KvCacheDtype, SizingError, architecture_from_dict, kv_bytes_per_token
from .models import GpuRow, ModelRow
from .schemas import GpuRead, ModelRead

log = logging.getLogger("kvplan.catalog")


def gpu_read(row: GpuRow) -> GpuRead:
    values = {name: getattr(row, name) for name in GpuRead.model_fields}
    return GpuRead.model_validate(values)


def model_read(row: ModelRow) -> ModelRead:
    kv_bytes: int | None = None
    counts: dict[str, int] = {}
    try:
        arch = architecture_from_dict(row.architecture)
        kv_bytes = kv_bytes_per_token(arch, KvCacheDtype.BFLOAT16)
        counts = dict(Counter(layer.kind.value for layer in arch.layers))
    except SizingError as exc:  # a stored row the arithmetic cannot read: show it, loudly
        log.error("model %s has an unreadable architecture: %s", row.slug, exc)
    return ModelRead(
        slug=row.slug,
        name=row.name,
        hf_id=row.hf_id,
        family=row.family,
        architecture=row.architecture,
        num_layers=row.num_layers,
        layer_kinds=[k for k in row.layer_kinds.split(",") if k],
        layer_counts=counts,
        kv_bytes_per_token_bf16=kv_bytes,
        max_position_embeddings=row.max_position_embeddings,
        num_parameters=row.num_parameters,
        weight_bytes=row.weight_bytes,
        sources=list(row.sources),
        notes=row.notes,
        origin=row.origin,
        revision=row.revision,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


# The lists as spreadsheet columns: scalars only; bytes also in GiB (2^30 B), as formats.py says.
_GPU_CSV_FIELDS = (
    "slug",
    "name",
    "vendor",
    "memory_bytes",
    "memory_type",
    "memory_bandwidth_tb_s",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "dense_fp4_tflops",
    "fp8_support",
    "bf16_support",
    "interconnect",
    "interconnect_gb_s",
    "max_gpus_per_node",
    "tdp_w",
    "price_usd_per_hour",
    "price_date",
    "price_source",
)
_GPU_GIB = ("memory_bytes",)
GPU_CSV_COLUMNS = tuple(gib_twins(dict.fromkeys(_GPU_CSV_FIELDS, 0), _GPU_GIB))


def gpu_csv_row(row: GpuRow | GpuRead) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(row, name) for name in _GPU_CSV_FIELDS}
    return gib_twins(values, _GPU_GIB)


_MODEL_CSV_FIELDS = (
    "slug",
    "name",
    "hf_id",
    "family",
    "num_layers",
    "layer_kinds",
    "kv_bytes_per_token_bf16",
    "max_position_embeddings",
    "num_parameters",
    "weight_bytes",
    "origin",
    "revision",
)
_MODEL_GIB = ("weight_bytes",)
MODEL_CSV_COLUMNS = tuple(gib_twins(dict.fromkeys(_MODEL_CSV_FIELDS, 0), _MODEL_GIB))


def model_csv_row(row: ModelRow | ModelRead) -> dict[str, Any]:
    """A model as one table row: the layer kinds `;`-separated, the weights also in GiB."""
    read = row if isinstance(row, ModelRead) else model_read(row)
    values: dict[str, Any] = {name: getattr(read, name) for name in _MODEL_CSV_FIELDS}
    values["layer_kinds"] = ";".join(read.layer_kinds)
    return gib_twins(values, _MODEL_GIB)
