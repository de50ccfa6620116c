"""The calibration logs the parser is checked against, and how their figures map to it.

service/calibration/engine_logs.json (the one copy; `make bench` compares kvplan's budgets with
the same file) is the project's shared calibration set: 46 public engine start-up logs, each
with its `source`, the `quote` of its lines, and the figures those lines print (`reported`, in
the units named by each key). One edit: the reporters' own file-system paths (a model
directory, a compile cache) read `<model-dir>` and `<cache-dir>`, there and in logs/, since no
machine's path belongs in this repository; no figure or recognised line changed. Every entry
is a test case: parsing the `quote` must give the `reported` figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ENGINE_LOGS = HERE.parent.parent / "service" / "calibration" / "engine_logs.json"
GIB = 1 << 30
MIB = 1 << 20


def bytes_of(printed: Any, unit: int) -> int:
    """The printed decimal times the unit, rounded to the byte (what the parser must answer)."""
    exact = Decimal(str(printed)) * unit
    return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))


def load_entries() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(ENGINE_LOGS.read_text("utf-8"))
    return entries


def entry(source_prefix: str) -> dict[str, Any]:
    """The one entry whose source starts with `source_prefix`."""
    found = [e for e in load_entries() if e["source"].startswith(source_prefix)]
    assert len(found) == 1, f"{len(found)} entries start with {source_prefix!r}"
    return found[0]


def read_log(name: str) -> str:
    """A whole log kept in logs/, bytes as published (its \\r and ANSI codes kept)."""
    with (HERE / "logs" / name).open(encoding="utf-8", newline="") as handle:
        return handle.read()


@dataclass(frozen=True)
class Maps:
    """Where a fixture key's figure lands: `target` "reported" or "settings", the field, and
    how it was printed: "gib"/"mib" (a decimal of 2^30 / 2^20 bytes), "bytes" (an exact byte
    count), or "exact" (a count or a number compared as printed)."""

    target: str
    field: str
    unit: str


R, S = "reported", "settings"

# Every key the fixture's `reported` uses. Several keys are the same quantity printed by
# different lines of one log (vLLM 0.19 prints the weights three times); they map to one field.
FIELD_OF: dict[str, Maps] = {
    # vLLM: device, request, weights
    "total_memory_gib": Maps(R, "total_memory_bytes", "gib"),
    "startup_total_memory_gib": Maps(R, "total_memory_bytes", "gib"),
    "init_snapshot_free_memory_gib": Maps(R, "free_memory_at_start_bytes", "gib"),
    "initial_free_memory_gib": Maps(R, "free_memory_at_start_bytes", "gib"),
    "startup_free_memory_gib": Maps(R, "free_memory_at_start_bytes", "gib"),
    "init_snapshot_cuda_memory_gib": Maps(R, "startup_cuda_memory_bytes", "gib"),
    "init_snapshot_non_torch_memory_gib": Maps(R, "startup_non_torch_bytes", "gib"),
    "requested_memory_gib": Maps(R, "requested_memory_bytes", "gib"),
    "model_loading_gib": Maps(R, "model_loading_bytes", "gib"),
    "weights_memory_gib": Maps(R, "weights_bytes", "gib"),
    "summary_weight_gib": Maps(R, "weights_bytes", "gib"),
    # vLLM: the profile
    "torch_peak_increase_gib": Maps(R, "activation_peak_bytes", "gib"),
    "summary_peak_activation_gib": Maps(R, "activation_peak_bytes", "gib"),
    "torch_peak_activation_gib": Maps(R, "activation_peak_bytes", "gib"),
    "non_torch_increase_gib": Maps(R, "non_torch_bytes", "gib"),
    "summary_non_torch_gib": Maps(R, "non_torch_bytes", "gib"),
    "non_torch_memory_gib": Maps(R, "non_torch_bytes", "gib"),
    "non_kv_total_gib": Maps(R, "non_kv_cache_bytes", "gib"),
    "free_after_profiling_total_gib": Maps(R, "free_after_profiling_bytes", "gib"),
    "free_after_profiling_within_requested_gib": Maps(
        R, "free_after_profiling_within_requested_bytes", "gib"
    ),
    "profiling_seconds": Maps(R, "profiling_seconds", "exact"),
    # vLLM: CUDA graphs
    "cudagraph_estimated_gib": Maps(R, "cudagraph_estimate_bytes", "gib"),
    "cudagraph_pool_estimated_gib": Maps(R, "cudagraph_estimate_bytes", "gib"),
    "cudagraph_capture_took_gib": Maps(R, "cudagraph_bytes", "gib"),
    "cudagraph_pool_actual_gib": Maps(R, "cudagraph_bytes", "gib"),
    "summary_cudagraph_gib": Maps(R, "cudagraph_bytes", "gib"),
    "suggested_util_with_cudagraph_estimate_from": Maps(S, "gpu_memory_utilization", "exact"),
    "suggested_util_with_cudagraph_estimate_to": Maps(
        R, "gpu_memory_utilization_suggested", "exact"
    ),
    "util_set": Maps(S, "gpu_memory_utilization", "exact"),
    "util_equivalent_without_cudagraph_profiling": Maps(
        R, "gpu_memory_utilization_without_cudagraph_estimate", "exact"
    ),
    # vLLM: the pool
    "available_kv_gib": Maps(R, "kv_pool_bytes", "gib"),
    "kv_cache_memory_to_fit_requested_bytes": Maps(
        R, "kv_cache_memory_to_fit_requested_bytes", "bytes"
    ),
    "kv_cache_memory_to_fully_utilize_bytes": Maps(
        R, "kv_cache_memory_to_fully_utilize_bytes", "bytes"
    ),
    "kv_cache_memory_in_use_bytes": Maps(R, "kv_cache_in_use_bytes", "bytes"),
    "num_gpu_blocks": Maps(R, "num_gpu_blocks", "exact"),
    "num_cpu_blocks": Maps(R, "num_cpu_blocks", "exact"),
    "kv_cache_tokens": Maps(R, "kv_cache_tokens", "exact"),
    "concurrency_tokens": Maps(R, "max_concurrency_tokens", "exact"),
    "max_concurrency": Maps(R, "max_concurrency", "exact"),
    "kv_padding_layers": Maps(R, "kv_padding_layers", "exact"),
    "kv_padding_max_waste_pct": Maps(R, "kv_padding_max_waste_pct", "exact"),
    "attention_block_size_tokens": Maps(R, "attention_block_size_tokens", "exact"),
    "mamba_page_padding_pct": Maps(R, "mamba_page_padding_pct", "exact"),
    "max_num_scheduled_tokens": Maps(R, "max_num_scheduled_tokens", "exact"),
    # SGLang: its "GB" is GiB (get_available_gpu_memory and memory_pool.py divide by 2^30)
    "init_torch_distributed_mem_usage_gb": Maps(R, "distributed_init_bytes", "gib"),
    "avail_mem_before_weights_gb": Maps(R, "free_memory_at_start_bytes", "gib"),
    "avail_mem_after_weights_gb": Maps(R, "free_after_weights_bytes", "gib"),
    "weights_mem_usage_gb": Maps(R, "model_loading_bytes", "gib"),
    "k_size_gb": Maps(R, "k_cache_bytes", "gib"),
    "v_size_gb": Maps(R, "v_cache_bytes", "gib"),
    "avail_mem_after_memory_pool_gb": Maps(R, "free_after_kv_cache_bytes", "gib"),
    "avail_mem_before_cuda_graph_gb": Maps(R, "free_before_cudagraph_bytes", "gib"),
    "avail_mem_after_cuda_graph_gb": Maps(R, "free_after_cudagraph_bytes", "gib"),
    "cuda_graph_mem_usage_gb": Maps(R, "cudagraph_bytes", "gib"),
    "max_total_num_tokens_tokens": Maps(R, "max_total_num_tokens", "exact"),
    "max_running_requests_count": Maps(R, "max_running_requests", "exact"),
    "chunked_prefill_size_tokens": Maps(S, "chunked_prefill_size", "exact"),
    "max_prefill_tokens": Maps(S, "max_prefill_tokens", "exact"),
    "context_len_tokens": Maps(S, "max_model_len", "exact"),
    # TensorRT-LLM: "MB" from MemoryCounters::bytesToString is MiB; TensorRT prints MiB
    "engine_trt_allocation_mib": Maps(R, "engine_allocation_bytes", "mib"),
    "runtime_buffers_mb": Maps(R, "runtime_buffers_bytes", "mib"),
    "decoder_mb": Maps(R, "decoder_bytes", "mib"),
    "available_memory_gib": Maps(R, "free_memory_before_kv_cache_bytes", "gib"),
    "kv_cache_gib": Maps(R, "kv_pool_bytes", "gib"),
    "kv_cache_bytes": Maps(R, "kv_pool_bytes", "bytes"),
    "num_blocks_primary": Maps(R, "num_gpu_blocks", "exact"),
    "num_blocks_secondary": Maps(R, "num_cpu_blocks", "exact"),
    "max_kv_pages_per_sequence": Maps(R, "max_blocks_per_sequence", "exact"),
    "tokens_per_block": Maps(R, "tokens_per_block", "exact"),
}

# Keys whose figure is one rank's, or one of two launches, rather than the log's answer.
# The PP2 run (jgchn/llm-d-planner ...tp1pp2dp1...8192.log): the last stage's profile line,
# printed by (Worker_PP1 pid=...).
PER_RANK: dict[str, tuple[str, str]] = {
    "pp1_non_kv_total_gib": ("PP1", "non_kv_cache_bytes"),
    "pp1_torch_peak_increase_gib": ("PP1", "activation_peak_bytes"),
    "pp1_non_torch_increase_gib": ("PP1", "non_torch_bytes"),
    "pp1_weights_memory_gib": ("PP1", "weights_bytes"),
}
# vllm PR #2031: a maintainer's before/after pair of "# GPU blocks" lines; the later wins.
FIRST_AND_LAST: dict[str, tuple[str, int]] = {
    "num_gpu_blocks_before_pr": ("num_gpu_blocks", 0),
    "num_gpu_blocks_after_pr": ("num_gpu_blocks", -1),
}

# Figures an entry's `reported` holds that its quote does not print: the parser must leave
# them absent. The reason is the entry's own note.
NOT_PRINTED: dict[tuple[str, str], str] = {
    (
        "github:vllm-project/vllm#10517 (comment by kaspersiminski, 2024-12-02, '20k - OK')",
        "kv_cache_tokens",
    ): "notes: 'kv_cache_tokens derived = 1952*16'; the quote prints blocks, not tokens",
    (
        "github:vllm-project/vllm PR #12569 (2025-01-30)",
        "kv_cache_tokens",
    ): "notes: 'kv tokens derived 1381*16'; the quote prints '# GPU blocks: 1381'",
    (
        "github:vllm-project/vllm#13061 (2025-02-11)",
        "available_kv_gib",
    ): "notes: 'reporter's text: ... KV 8.69 GiB per GPU'; no quoted line prints it",
}

# Entries whose quote is prose about a run, not lines the engine printed: nothing to read.
NOT_ENGINE_LINES: dict[str, str] = {
    "github:vllm-project/recipes PR #273 (description by andyluo7, 2026-03-11)": (
        "notes: 'PR summary text, not raw log lines'"
    ),
}

# Where the parser's settings can be checked against the entry's own fields.
SETTING_OF_FIXTURE: dict[str, str] = {
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "gpu_memory_utilization": "gpu_memory_utilization",
    # The fixture keeps SGLang's --mem-fraction-static and TensorRT-LLM's fraction there too.
    "mem_fraction_static": "gpu_memory_utilization",
    "free_gpu_memory_fraction": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "block_size": "block_size",
    "max_num_batched_tokens": "max_num_batched_tokens",
    # The fixture keeps SGLang's chunked_prefill_size as max_num_batched_tokens (entry notes).
    "chunked_prefill_size": "max_num_batched_tokens",
    "enable_prefix_caching": "enable_prefix_caching",
}

ENGINE_OF_FIXTURE = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}
