"""Types shared by the engine profiles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum


class Engine(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """The engine flags that change the arithmetic. `None` means the engine's default."""

    engine: Engine = Engine.VLLM
    engine_version: str | None = None
    # vLLM: fraction of TOTAL memory the instance may use (--gpu-memory-utilization).
    gpu_memory_utilization: float | None = None
    # SGLang: share of memory free at start-up that weights + KV may take (--mem-fraction-static).
    mem_fraction_static: float | None = None
    # TensorRT-LLM: share of memory still free after weights and warm-up given to KV.
    free_gpu_memory_fraction: float | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool = False
    # Bytes of CUDA-graph memory the engine subtracts before sizing the pool (vLLM >= 0.21);
    # None = kvplan's estimate.
    cudagraph_memory_bytes: int | None = None
    # A pool the caller already knows (vLLM --kv-cache-memory-bytes, or "Available KV cache
    # memory" read from a log): replaces the computed budget.
    kv_pool_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    mamba_ssm_cache_dtype: str | None = None
    disable_hybrid_kv_cache_manager: bool = False
    weight_format: str | None = None
    # SGLang hybrid pools: --swa-full-tokens-ratio, --mamba-full-memory-ratio,
    # --max-mamba-cache-size (None = SGLang's defaults).
    swa_full_tokens_ratio: float | None = None
    mamba_full_memory_ratio: float | None = None
    max_mamba_cache_size: int | None = None
    # TensorRT-LLM KvCacheConfig.max_attention_window: one window per layer, repeated over the
    # layers when shorter (None = max_seq_len for every layer).
    max_attention_window: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One line of the memory budget; `bytes` is what it adds (+) or takes (-)."""

    name: str
    bytes: int
    note: str


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """How one GPU's memory became the KV pool."""

    total_bytes: int
    fraction: float | None
    fraction_name: str
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    pool_bytes: int
    pool_given: bool
    # Built on demand (only explanations read the lines; plans size hundreds of budgets).
    describe: Callable[[], tuple[BudgetLine, ...]] = field(compare=False, repr=False)

    @property
    def lines(self) -> tuple[BudgetLine, ...]:
        return self.describe()


def given_pool_budget(
    *, total_bytes: int, weights_per_gpu: int, pool_bytes: int, fraction_name: str, note: str
) -> MemoryBudget:
    """A pool the caller already knows replaces the engine's budget, whatever the engine.

    vLLM's --kv-cache-memory-bytes (PR #21489: available KV memory is that value, the
    utilization ignored; ../shared/design/engine-memory.md section 1.2), or the pool an
    engine's log reports: no fraction and no profiled peak stand between it and the blocks.
    """
    total_line = BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports")
    given_line = BudgetLine("kv_cache_memory", pool_bytes, note)
    return MemoryBudget(
        total_bytes=total_bytes,
        fraction=None,
        fraction_name=fraction_name,
        requested_bytes=pool_bytes,
        weights_bytes=weights_per_gpu,
        activation_bytes=0,
        non_torch_bytes=0,
        cudagraph_bytes=0,
        pool_bytes=pool_bytes,
        pool_given=True,
        describe=lambda: (total_line, given_line),
    )


@dataclass(frozen=True, slots=True)
class CacheGroup:
    """Layers that share one block table (vLLM KV-cache group) on one GPU."""

    kind: str
    layers: int
    block_size: int
    page_bytes: int
    blocks_per_request: int


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """How a GPU's pool is cut: what one block costs and how many a request needs."""

    groups: tuple[CacheGroup, ...]
    bytes_per_block: int
    blocks_per_request: int
    block_size: int
    padding_layers: int
    notes: tuple[str, ...]
    # What one block costs on each pipeline stage (vLLM 0.11+ projects the whole model's
    # groups onto each stage); empty when the engine sizes each stage on its own.
    stage_bytes_per_block: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PoolReport:
    """What the engine logs once the pool is cut, and the whole sequences that fit."""

    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    max_num_seqs: int
    describe: Callable[[], tuple[str, ...]] = field(compare=False, repr=False)

    @property
    def log_lines(self) -> tuple[str, ...]:
        """What the engine would print, built on demand."""
        return self.describe()
