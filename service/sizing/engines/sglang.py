"""SGLang: a fixed static fraction of the memory free at start-up, cut into token slots.

Source: python/sglang/srt/model_executor/model_runner.py `profile_max_num_token`,
`init_memory_pool`; server_args.py for the default `mem_fraction_static` (read in the released
wheels 0.4.3 ... 0.5.23; restated in ../shared/design/engine-memory.md section 2).
"""

from __future__ import annotations

from ..units import GiB, MiB, cdiv
from . import calibration as cal
from .common import BudgetLine, EngineOptions, MemoryBudget, PoolReport


def default_mem_fraction_static(total_bytes: int, tensor_parallel_size: int) -> float:
    """server_args.py (0.5.x): reserve MiB for activations and graphs, keep the rest static.

    reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs
               + tp/8 x 1024, at least 10240 above 60 GB; the chunked-prefill size and the
    largest graph batch grow with the GPU's memory.
    """
    gpu_mib = total_bytes / MiB
    tp = tensor_parallel_size
    if gpu_mib < 20 * 1024:
        chunked, graph_bs = 2048, 8
    elif gpu_mib < 35 * 1024:
        chunked, graph_bs = 2048, (80 if tp >= 4 else 16)
    elif gpu_mib < 60 * 1024:
        chunked, graph_bs = 4096, (160 if tp >= 4 else 32)
    elif gpu_mib < 160 * 1024:
        chunked, graph_bs = 8192, (512 if tp >= 4 else 256)
    else:
        chunked, graph_bs = 16384, 512
    reserved = 512 + 1.5 * max(chunked, 2048) + 2 * graph_bs + tp / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


def sglang_budget(
    *, total_bytes: int, weights_per_gpu: int, tensor_parallel_size: int, options: EngineOptions
) -> MemoryBudget:
    total_line = BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports")
    if options.kv_cache_memory_bytes is not None:
        pool = options.kv_cache_memory_bytes
        return MemoryBudget(
            total_bytes=total_bytes,
            fraction=None,
            fraction_name="mem_fraction_static",
            requested_bytes=pool,
            weights_bytes=weights_per_gpu,
            activation_bytes=0,
            non_torch_bytes=0,
            cudagraph_bytes=0,
            pool_bytes=pool,
            pool_given=True,
            describe=lambda: (total_line, BudgetLine("kv_cache_memory", pool, "given")),
        )
    fraction = options.mem_fraction_static or default_mem_fraction_static(
        total_bytes, tensor_parallel_size
    )
    startup = cal.SGLANG_CONTEXT + (cal.SGLANG_NCCL if tensor_parallel_size > 1 else 0)
    # total_gpu_memory in SGLang's formula: free memory after distributed init (min over ranks).
    free_at_start = total_bytes - startup
    loaded = int(weights_per_gpu * (1 + cal.SGLANG_LOAD_OVERHEAD_FRACTION))
    reserved = int(free_at_start * (1 - fraction))
    # rest_memory = free after loading - free_at_start x (1 - mem_fraction_static)
    pool = free_at_start - loaded - reserved
    lines = (
        total_line,
        BudgetLine("startup", -startup, "CUDA context and NCCL before SGLang reads free memory"),
        BudgetLine("weights", -loaded, "model weights on this GPU, with loading slack"),
        BudgetLine(
            "reserved",
            -reserved,
            f"(1 - mem_fraction_static {fraction}) x free memory at start, kept for "
            "activations and CUDA graphs",
        ),
        BudgetLine("kv_cache_memory", pool, "rest_memory: what is left for the KV cache"),
    )
    return MemoryBudget(
        total_bytes=total_bytes,
        fraction=fraction,
        fraction_name="mem_fraction_static",
        requested_bytes=int(free_at_start * fraction),
        weights_bytes=loaded,
        activation_bytes=reserved,
        non_torch_bytes=startup,
        cudagraph_bytes=0,
        pool_bytes=pool,
        pool_given=False,
        describe=lambda: lines,
    )


def sglang_report(
    pool_bytes: int, cell_bytes: int, page_size: int, max_model_len: int
) -> PoolReport:
    """max_total_num_tokens = rest_memory // cell_size, rounded down to whole pages."""
    tokens = max(0, pool_bytes) // cell_bytes // page_size * page_size
    pages_per_request = cdiv(max_model_len, page_size)
    pages = tokens // page_size
    concurrency = pages / pages_per_request
    # ModelRunner: max_running_requests = min(max(int(tokens / context_len * 512), 2048), 4096).
    running = min(max(int(tokens / max_model_len * 512), 2048), 4096)
    lines = (
        f"KV Cache is allocated. #tokens: {tokens}, K size: "
        f"{tokens * cell_bytes / 2 / GiB:.2f} GB, V size: {tokens * cell_bytes / 2 / GiB:.2f} GB",
        f"max_total_num_tokens={tokens}, max_running_requests={running}, "
        f"context_len={max_model_len}",
    )
    return PoolReport(pages, tokens, concurrency, pages // pages_per_request, lambda: lines)
