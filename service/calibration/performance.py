"""Published speed measurements (performance_points.json) and the fit of the performance model.

The points carry their sources in the file; the models and GPUs are the shipped catalog's, with
each GPU's link bandwidth from service/sizing/speed/performance.py `LINK_GB_S`. `make bench` prints
the table; tests/calibration/test_performance_fit.py checks the fit against `FITTED`.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..catalog.seed import load_seed
from ..sizing import (
    FIT_SOURCES,
    LINK_GB_S,
    FitReport,
    GpuPerformance,
    MeasuredPoint,
    Metric,
    ModelArchitecture,
    SourceHoldOut,
    architecture_from_dict,
    fit_report,
    leave_one_source_out,
    parse_kv_cache_dtype,
    parse_weight_format,
)


def load_document() -> dict[str, Any]:
    text = (
        resources.files("service.calibration")
        .joinpath("performance_points.json")
        .read_text("utf-8")
    )
    document: dict[str, Any] = json.loads(text)
    return document


def load_points() -> list[MeasuredPoint]:
    document = load_document()
    sources = document["sources"]
    vendors = {g["slug"]: g["vendor"] for g in load_seed("gpus.json")}
    return [
        MeasuredPoint(
            id=p["id"],
            model=p["model"],
            gpu=p["gpu"],
            engine=p["engine"],
            tensor_parallel_size=p["tensor_parallel_size"],
            batch=p["batch"],
            input_tokens=p["input_tokens"],
            output_tokens=p["output_tokens"],
            weight_format=parse_weight_format(p["weight_format"]),
            kv_cache_dtype=parse_kv_cache_dtype(p["kv_cache_dtype"]),
            metric=Metric(p["metric"]),
            measured=float(p["measured"]),
            source=sources[p["source"]]["cite"],
            source_id=p["source"],
            vendor=vendors[p["gpu"]],
            expert_parallel_size=p.get("expert_parallel_size", 1),
        )
        for p in document["points"]
    ]


def catalog_models() -> dict[str, ModelArchitecture]:
    return {m["slug"]: architecture_from_dict(m["architecture"]) for m in load_seed("models.json")}


def catalog_gpus() -> dict[str, GpuPerformance]:
    """Every catalog GPU with a bandwidth and a BF16 figure, as the performance model sees it."""
    return {
        g["slug"]: GpuPerformance(
            memory_bandwidth_tb_s=g["memory_bandwidth_tb_s"],
            dense_bf16_tflops=g["dense_bf16_tflops"],
            dense_fp8_tflops=g.get("dense_fp8_tflops"),
            interconnect_gb_s=LINK_GB_S.get(g["slug"]),
            name=g["name"],
            dense_fp4_tflops=g.get("dense_fp4_tflops"),
        )
        for g in load_seed("gpus.json")
        if g.get("memory_bandwidth_tb_s") and g.get("dense_bf16_tflops")
    }


def run_fit() -> FitReport:
    """Fit on the shipped points, models and GPUs (what `make bench` prints)."""
    fitted_sources = [p for p in load_points() if p.source_id in FIT_SOURCES]
    return fit_report(fitted_sources, catalog_models(), catalog_gpus())


def run_source_hold_out() -> tuple[SourceHoldOut, ...]:
    """Every source held out in turn (what `make bench` prints as the held-out table)."""
    return leave_one_source_out(load_points(), catalog_models(), catalog_gpus())
