"""SGLang: a fixed static fraction of the memory free at start-up, cut into token slots.

Source: python/sglang/srt/model_executor/model_runner.py `profile_max_num_token`,
`init_memory_pool` (restated in ../shared/design/engine-memory.md section 2).
"""

from __future__ import annotations

from ..units import cdiv
from . import calibration
from .common import BudgetLine, EngineOptions, MemoryBudget, PoolReport


def default_mem_fraction_static(total_bytes: int, tensor_parallel_size: int) -> float:
    """SGLang picks mem_fraction_static from GPU memory and TP when it is not given.

    server_args.py (pre-2025 table): under 20 GiB 0.85 ... an 80 GiB GPU at TP1-2 0.88,
    TP4+ 0.85 (inferred ranges; read the value from the server log when you have one).
    """
    gib = total_bytes / (1 << 30)
    if gib < 20:
        return 0.80
    if gib < 35:
        return 0.85
    if gib < 90:
        return 0.88 if tensor_parallel_size < 4 else 0.85
    return 0.9


def sglang_budget(
    *, total_bytes: int, weights_per_gpu: int, tensor_parallel_size: int, options: EngineOptions
) -> MemoryBudget:
    if options.kv_cache_memory_bytes is not None:
        pool = options.kv_cache_memory_bytes
        return MemoryBudget(
            total_bytes,
            None,
            "mem_fraction_static",
            0,
            weights_per_gpu,
            0,
            0,
            0,
            pool,
            True,
            (BudgetLine("kv_cache_memory", pool, "given"),),
        )
    fraction = options.mem_fraction_static or default_mem_fraction_static(
        total_bytes, tensor_parallel_size
    )
    free_at_start = total_bytes - calibration.SGLANG_STARTUP_RESERVED
    free_after_load = free_at_start - weights_per_gpu - calibration.SGLANG_LOAD_OVERHEAD
    reserved = int(free_at_start * (1 - fraction))
    pool = free_after_load - reserved
    lines = (
        BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports it"),
        BudgetLine(
            "free_at_start", free_at_start, "free before loading (CUDA context and NCCL taken)"
        ),
        BudgetLine("weights", -weights_per_gpu, "model weights on this GPU"),
        BudgetLine(
            "reserved",
            -reserved,
            f"(1 - mem_fraction_static {fraction}) x free_at_start, left for activations/graphs",
        ),
        BudgetLine("kv_cache_memory", pool, "rest_memory: what is left for the KV cache"),
    )
    return MemoryBudget(
        total_bytes,
        fraction,
        "mem_fraction_static",
        int(free_at_start * fraction),
        weights_per_gpu,
        reserved,
        calibration.SGLANG_STARTUP_RESERVED,
        0,
        pool,
        False,
        lines,
    )


def sglang_report(
    pool_bytes: int, cell_bytes: int, page_size: int, max_model_len: int
) -> PoolReport:
    """max_total_num_tokens = rest_memory // cell_size, rounded down to whole pages."""
    tokens = max(0, pool_bytes) // cell_bytes // page_size * page_size
    pages_per_request = cdiv(max_model_len, page_size)
    blocks = tokens // page_size
    concurrency = blocks / pages_per_request
    # ModelRunner: max_num_reqs = min(max(int(tokens / context_len * 512), 2048), 4096).
    running = min(max(int(tokens / max_model_len * 512), 2048), 4096)
    lines = (
        f"KV Cache is allocated. #tokens: {tokens}",
        f"max_total_num_tokens={tokens}, max_running_requests={running}, "
        f"context_len={max_model_len}",
    )
    return PoolReport(blocks, tokens, concurrency, blocks // pages_per_request, lines)
