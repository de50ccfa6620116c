"""TensorRT-LLM (PyTorch backend): a fraction of what is still free after weights and warm-up.

Source: tensorrt_llm/_torch/pyexecutor/_util.py `KvCacheCreator.configure_kv_cache_capacity`
(restated in ../shared/design/engine-memory.md section 3).
"""

from __future__ import annotations

from ..units import cdiv
from . import calibration
from .common import BudgetLine, EngineOptions, MemoryBudget, PoolReport


def trtllm_budget(
    *,
    total_bytes: int,
    weights_per_gpu: int,
    activation_bytes: int,
    options: EngineOptions,
) -> MemoryBudget:
    if options.kv_cache_memory_bytes is not None:
        pool = options.kv_cache_memory_bytes
        return MemoryBudget(
            total_bytes,
            None,
            "free_gpu_memory_fraction",
            0,
            weights_per_gpu,
            0,
            0,
            0,
            pool,
            True,
            lambda: (BudgetLine("kv_cache_memory", pool, "given"),),
        )
    fraction = options.free_gpu_memory_fraction or calibration.TRTLLM_DEFAULT_FREE_FRACTION
    peak = weights_per_gpu + activation_bytes + calibration.TRTLLM_NON_TORCH
    free = total_bytes - peak
    pool = int(free * fraction)
    lines = (
        BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports it"),
        BudgetLine("weights", -weights_per_gpu, "model weights on this GPU"),
        BudgetLine("activation_peak", -activation_bytes, "warm-up peak (estimated)"),
        BudgetLine("non_torch", -calibration.TRTLLM_NON_TORCH, "context, NCCL, graphs (estimate)"),
        BudgetLine("free_after_warmup", free, "memory still free after warm-up"),
        BudgetLine("kv_cache_memory", pool, f"free_gpu_memory_fraction {fraction} x free"),
    )
    return MemoryBudget(
        total_bytes,
        fraction,
        "free_gpu_memory_fraction",
        free,
        weights_per_gpu,
        activation_bytes,
        calibration.TRTLLM_NON_TORCH,
        0,
        pool,
        False,
        lambda: lines,
    )


def trtllm_report(
    pool_bytes: int, bytes_per_token: int, tokens_per_block: int, max_model_len: int
) -> PoolReport:
    blocks = max(0, pool_bytes) // (bytes_per_token * tokens_per_block)
    tokens = blocks * tokens_per_block
    per_request = cdiv(max_model_len, tokens_per_block)
    concurrency = blocks / per_request
    lines = (
        f"Estimated max memory in KV cache : {pool_bytes / (1 << 30):.2f} GiB",
        f"max_tokens={tokens}",
    )
    return PoolReport(blocks, tokens, concurrency, blocks // per_request, lambda: lines)
