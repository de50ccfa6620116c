"""Catalog records onto rows: the shipped seed's JSON and a request's values, one mapping.

The seed (`catalog.seed`) and the API's writes (`catalog.service`) both fill rows through these,
so a field is copied the same way whichever way it arrives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..sizing import LayerKind, ModelArchitecture, architecture_from_dict, architecture_to_dict
from .models import GpuRow, ModelRow

GPU_FIELDS = (
    "name",
    "vendor",
    "memory_bytes",
    "memory_source",
    "nvidia_smi_memory_mib",
    "memory_marketed_gb",
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
    "price_examples",
    "sources",
    "notes",
)
MODEL_FIELDS = ("name", "hf_id", "family", "sources", "notes")


def layer_kinds(arch: ModelArchitecture) -> str:
    """Comma-separated kinds, sorted, without the state-free blocks (for list filters)."""
    return ",".join(sorted(k.value for k in arch.kinds if k is not LayerKind.NO_CACHE))


def apply_architecture(row: ModelRow, arch: ModelArchitecture) -> None:
    """Store an architecture and the columns denormalised from it."""
    row.architecture = architecture_to_dict(arch)
    row.num_layers = arch.num_layers
    row.layer_kinds = layer_kinds(arch)
    row.max_position_embeddings = arch.max_position_embeddings
    row.num_parameters = arch.num_parameters
    row.weight_bytes = arch.weight_bytes


def model_row_from_record(record: Mapping[str, Any], origin: str = "user") -> ModelRow:
    arch = architecture_from_dict(record["architecture"])
    row = ModelRow(
        slug=record["slug"],
        name=record.get("name") or record["slug"],
        hf_id=record.get("hf_id"),
        family=record.get("family"),
        sources=list(record.get("sources") or []),
        notes=record.get("notes"),
        origin=origin,
        architecture={},
        num_layers=0,
        layer_kinds="",
    )
    apply_architecture(row, arch)
    return row


def gpu_row_from_record(record: Mapping[str, Any], origin: str = "user") -> GpuRow:
    row = GpuRow(slug=record["slug"], name=record["slug"], memory_bytes=0, origin=origin)
    copy_gpu_record(row, record)
    return row


def copy_model_record(row: ModelRow, record: Mapping[str, Any]) -> None:
    for key in MODEL_FIELDS:
        setattr(row, key, record.get(key) if key != "sources" else list(record.get(key) or []))
    if not row.name:
        row.name = row.slug
    apply_architecture(row, architecture_from_dict(record["architecture"]))


def copy_gpu_record(row: GpuRow, record: Mapping[str, Any]) -> None:
    for key in GPU_FIELDS:
        value = record.get(key)
        if key == "name" and not value:
            value = row.slug
        if key == "sources":
            value = list(value or [])
        elif key == "max_gpus_per_node" and value is None:
            value = 8
        setattr(row, key, value)


def new_model_row(slug: str) -> ModelRow:
    """An empty user entry, to be filled by `apply_architecture` and the request's fields."""
    return ModelRow(
        slug=slug, name=slug, origin="user", architecture={}, num_layers=0, layer_kinds=""
    )
