"""Public engine logs kvplan is checked against (engine_logs.json) and the comparison itself.

Facts carry over from the logs with their sources; `make bench` prints the table, and
tests/calibration checks it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..sizing import (
    Capacity,
    Engine,
    EngineOptions,
    GiB,
    Gpu,
    ModelArchitecture,
    Parallelism,
    Workload,
    compute_capacity,
)


def load_cases() -> list[dict[str, Any]]:
    text = resources.files("service.calibration").joinpath("engine_logs.json").read_text("utf-8")
    cases: list[dict[str, Any]] = json.loads(text)
    return cases


@dataclass(frozen=True)
class Comparison:
    case_id: str
    complete: bool
    predicted_pool_bytes: int
    logged_pool_bytes: int
    capacity: Capacity

    @property
    def error(self) -> float:
        return (self.predicted_pool_bytes - self.logged_pool_bytes) / self.logged_pool_bytes


def engine_options(case: dict[str, Any]) -> EngineOptions:
    return EngineOptions(
        engine=Engine(case["engine"]),
        engine_version=case.get("engine_version"),
        gpu_memory_utilization=case.get("gpu_memory_utilization"),
        mem_fraction_static=case.get("mem_fraction_static"),
        block_size=case.get("block_size"),
    )


def case_gpu(case: dict[str, Any], catalog_gpu: Gpu) -> Gpu:
    """The catalog's GPU, with the total the log itself printed when it printed one."""
    logged = case.get("gpu_total_gib_logged")
    if logged is None:
        return catalog_gpu
    return Gpu(
        memory_bytes=round(logged * GiB),
        name=catalog_gpu.name,
        slug=catalog_gpu.slug,
        price_usd_per_hour=catalog_gpu.price_usd_per_hour,
        max_gpus_per_node=catalog_gpu.max_gpus_per_node,
    )


def logged_pool_bytes(case: dict[str, Any], capacity: Capacity) -> int:
    """The pool the log shows, in bytes, in the unit the case says to compare."""
    logged = case["logged"]
    what = case["pool_to_compare"]
    if what == "available_kv_gib":
        return round(float(logged["available_kv_gib"]) * GiB)
    if what == "num_gpu_blocks":
        return int(logged["num_gpu_blocks"]) * capacity.layout.bytes_per_block
    tokens = int(logged["kv_cache_tokens"])
    if capacity.engine is Engine.SGLANG:
        return tokens * capacity.kv_bytes_per_token_per_gpu
    return tokens // capacity.layout.block_size * capacity.layout.bytes_per_block


def compare(case: dict[str, Any], arch: ModelArchitecture, gpu: Gpu) -> Comparison:
    capacity = compute_capacity(
        arch,
        case_gpu(case, gpu),
        Workload(case["max_model_len"], case.get("kv_cache_dtype") or "auto"),
        Parallelism(case.get("tensor_parallel_size") or 1),
        engine_options(case),
    )
    return Comparison(
        case_id=case["id"],
        complete=bool(case["complete"]),
        predicted_pool_bytes=capacity.kv_pool_bytes,
        logged_pool_bytes=logged_pool_bytes(case, capacity),
        capacity=capacity,
    )
