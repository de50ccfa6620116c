"""KV tiers beyond HBM, and weights kept in host memory (issue 21, item 5).

Two things an engine keeps off the GPU, read from each engine's code:

- **A host-memory KV tier.** vLLM's native offloading (`--kv-offloading-size` GiB, summed
  over the tensor x pipeline parallel ranks of one engine: vllm/config/cache.py `CacheConfig`)
  hands `cpu_bytes_to_use` = size x 2^30 to its OffloadingConnector
  (vllm/config/vllm.py `VllmConfig._post_init_kv_transfer_config`), whose CPU spec cuts it into
  host blocks, each holding one GPU block of every rank (`vllm_host_tier`). SGLang's HiCache
  (`--enable-hierarchical-cache`) gives each rank a host pool of `--hicache-ratio` x the
  device pool's tokens, or `--hicache-size` GB (10^9 B) per rank (`sglang_host_tier`).
- **Weights in host memory.** vLLM and SGLang `--cpu-offload-gb`: GiB (2^30 B, both engines
  multiply by 1024**3) of weights per GPU moved to pinned host memory as the model loads, so
  the profiled weights and the budget's weights line are that much smaller
  (`offloaded_weight_bytes`).

Each capacity answer with a tier carries a `KvTiers`: one row per tier (HBM, host memory) with
its bytes, blocks, tokens and sequences at max_model_len, and the host memory one replica
(tensor x pipeline parallel GPUs) needs for its KV tier and offloaded weights.

vLLM `kv_offloading_backend=lmcache` and LMCache's own sizes are engines/lmcache.py's (its CPU
and disk tiers). Not modelled (refused by name): HiCache on SGLang's hybrid pools.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import SizingError
from ..units import GiB
from . import calibration as cal
from .common import BudgetLine, Capacity, EngineOptions, MemoryBudget

# vLLM's milestones: calibration.py VLLM_OFFLOAD_SIZED, VLLM_OFFLOAD_ALIGNED. A host page is
# mmap.PAGESIZE, 4096 B on x86-64 Linux.
HOST_PAGE_BYTES = 4096
# SGLang python/sglang/srt/arg_groups/hicache_hook.py handle_hicache_ratio_default (0.5.23):
# --hicache-ratio defaults to 2.0 (cache mode).
SGLANG_HICACHE_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class KvTier:
    """One tier of one replica's KV cache. `blocks` are the tier's own units (vLLM: host blocks
    of one GPU block per rank each; SGLang: pages); `sequences` whole ones at max_model_len."""

    tier: str  # "hbm" | "host" | "disk" (LMCache's local disk)
    bytes: int  # the whole replica (every rank)
    bytes_per_rank: int
    blocks: int
    tokens: int
    sequences: int
    note: str


@dataclass(frozen=True, slots=True)
class KvTiers:
    tiers: tuple[KvTier, ...]
    offloaded_weight_bytes_per_gpu: int
    host_memory_bytes_per_replica: int  # host KV tier + offloaded weights, every rank


def offloaded_weight_bytes(options: EngineOptions, weights_per_gpu: int) -> int:
    """Weights `--cpu-offload-gb` moves to host memory on one GPU: vLLM
    vllm/model_executor/offloader/uva.py (0.33.0; model_executor/models/utils.py
    maybe_offload_to_cpu before it) and SGLang python/sglang/srt/utils/offloader.py move whole
    parameters until cpu_offload_gb x 1024**3 bytes are moved, so the engine moves at least
    this (up to one parameter more); never more than the weights."""
    gib = options.cpu_offload_gb
    if not gib:
        return 0
    return min(int(gib * GiB), weights_per_gpu)


def with_weight_offload(budget: MemoryBudget, offloaded: int) -> MemoryBudget:
    """The budget's lines with the offloaded weights said after the weights line (the weights
    line already holds only what stays on the GPU)."""
    if offloaded <= 0:
        return budget
    describe = budget.describe
    line = BudgetLine(
        "cpu_offload_gb",
        offloaded,
        f"weights kept in host memory (--cpu-offload-gb: {offloaded:,} B of whole parameters, "
        "at least; not on the GPU, so not in the weights line)",
    )

    def lines() -> tuple[BudgetLine, ...]:
        out = list(describe())
        at = next((i + 1 for i, x in enumerate(out) if x.name == "weights"), len(out) - 1)
        out.insert(at, line)
        return tuple(out)

    return dataclasses.replace(budget, describe=lines)


def check_offload_flags(options: EngineOptions) -> None:
    """Refuse, by name, the offload flags an engine does not read or kvplan does not size."""
    engine = options.engine.value
    if engine != "vllm":
        for name in ("kv_offloading_size", "kv_offloading_backend"):
            if getattr(options, name) is not None:
                raise SizingError(name, f"applies to engine=vllm, not {engine}")
    if engine != "sglang":
        for name in ("hicache_ratio", "hicache_size"):
            if getattr(options, name) is not None:
                raise SizingError(name, f"applies to engine=sglang, not {engine}")
        if options.enable_hierarchical_cache:
            raise SizingError(
                "enable_hierarchical_cache", f"applies to engine=sglang, not {engine}"
            )
    if engine == "trtllm" and options.cpu_offload_gb:
        raise SizingError("cpu_offload_gb", "applies to engine=vllm or sglang, not trtllm")
    if engine == "sglang" and not options.enable_hierarchical_cache:
        for name in ("hicache_ratio", "hicache_size"):
            if getattr(options, name) is not None:
                raise SizingError(name, "needs enable_hierarchical_cache=true (SGLang ignores it)")


def hbm_tier(capacity: Capacity) -> KvTier:
    """The GPU pool's row of the tier table."""
    ranks = capacity.parallel.gpus_per_replica
    return KvTier(
        tier="hbm",
        bytes=capacity.kv_pool_bytes * ranks,
        bytes_per_rank=capacity.kv_pool_bytes,
        blocks=capacity.num_gpu_blocks,
        tokens=capacity.kv_cache_tokens,
        sequences=capacity.max_num_seqs,
        note="the GPU pool: kv_pool_bytes on each of the replica's GPUs",
    )


def _tiers(capacity: Capacity, host: KvTier | None, offloaded: int) -> Capacity:
    """The capacity with its tier table (only where a flag of this module was given)."""
    ranks = capacity.parallel.gpus_per_replica
    if host is None and offloaded == 0:
        return capacity
    rows = (hbm_tier(capacity),) + ((host,) if host is not None else ())
    host_bytes = (host.bytes if host is not None else 0) + offloaded * ranks
    return dataclasses.replace(
        capacity, kv_tiers=KvTiers(rows, offloaded, host_memory_bytes_per_replica=host_bytes)
    )


def _pure_mla(capacity: Capacity) -> bool:
    return bool(capacity.layout.groups) and all(
        group.kind == "mla" for group in capacity.layout.groups
    )


def vllm_host_tier(
    capacity: Capacity, options: EngineOptions, version: tuple[int, int, int], label: str
) -> KvTier:
    """vLLM's OffloadingConnector CPU tier: host blocks = cpu_bytes_to_use // the bytes of one
    host block, which holds one GPU block of every rank of the engine (world_size = tensor x
    pipeline parallel ranks; vllm/v1/kv_offload/cpu.py CPUOffloadingSpec.__init__, 0.14.0),
    rounded up to a host page and kept once for a pure MLA model on tensor parallelism alone
    from 0.30.0 (vllm/v1/kv_offload/cpu/spec.py, `replicated_layout`)."""
    size = options.kv_offloading_size
    assert size is not None
    if version < cal.VLLM_OFFLOAD_SIZED:
        raise SizingError(
            "kv_offloading_size",
            f"vLLM {label} passes num_cpu_blocks=0 to its OffloadingConnector, which "
            "then refuses to start ('num_cpu_blocks must be specified in "
            "kv_connector_extra_config'); vLLM 0.14.0 first sizes the host tier "
            "from kv_offloading_size",
        )
    parallel = capacity.parallel
    world = parallel.tensor_parallel_size * parallel.pipeline_parallel_size
    aligned = version >= cal.VLLM_OFFLOAD_ALIGNED
    one_copy = (
        aligned
        and _pure_mla(capacity)
        and parallel.tensor_parallel_size > 1
        and parallel.pipeline_parallel_size == 1
    )
    copies = 1 if one_copy else world
    block_bytes = capacity.layout.bytes_per_block * copies
    if aligned:
        block_bytes = -(-block_bytes // HOST_PAGE_BYTES) * HOST_PAGE_BYTES
    cpu_bytes_to_use = int(size * GiB)
    blocks = cpu_bytes_to_use // block_bytes if block_bytes > 0 else 0
    layout = capacity.layout
    return KvTier(
        tier="host",
        bytes=blocks * block_bytes,
        bytes_per_rank=blocks * block_bytes // copies,
        blocks=blocks,
        tokens=blocks * layout.block_size,
        sequences=blocks // layout.blocks_per_request,
        note=(
            f"kv_offloading_size {size} GiB = {cpu_bytes_to_use:,} B // "
            f"{block_bytes:,} B per host block ({layout.bytes_per_block:,} B GPU block x "
            f"{copies} {'copy' if copies == 1 else 'ranks'}"
            + (f", rounded up to {HOST_PAGE_BYTES} B pages" if aligned else "")
            + f"), {layout.block_size} tokens each"
        ),
    )


def sglang_host_tier(capacity: Capacity, options: EngineOptions, page_size: int) -> KvTier:
    """SGLang HiCache's host pool on each rank (python/sglang/srt/mem_cache/pool_host/base.py
    HostKVCache.__init__, 0.5.23): hicache_size GB x 10^9 // bytes per token, else
    int(device pool tokens x hicache_ratio); then one padding page more:
    page_num = size // page_size + 1, size = page_num x page_size. Bytes per token are the
    rank's own (size_per_token: its layers, its KV heads)."""
    per_token = capacity.kv_bytes_per_token_per_gpu
    if options.hicache_size:
        tokens = int(options.hicache_size * 10**9 // per_token)
        how = f"hicache_size {options.hicache_size} GB // {per_token:,} B per token"
    else:
        ratio = options.hicache_ratio or SGLANG_HICACHE_RATIO
        tokens = int(capacity.kv_cache_tokens * ratio)
        how = f"hicache_ratio {ratio} x {capacity.kv_cache_tokens:,} device tokens"
    pages = tokens // page_size + 1
    tokens = pages * page_size
    ranks = capacity.parallel.gpus_per_replica
    per_rank = tokens * per_token
    return KvTier(
        tier="host",
        bytes=per_rank * ranks,
        bytes_per_rank=per_rank,
        blocks=pages,
        tokens=tokens,
        sequences=tokens // capacity.max_model_len,
        note=f"{how}, plus one padding page: {pages:,} pages of {page_size} tokens per rank",
    )


def vllm_tiers(
    capacity: Capacity, options: EngineOptions, version: tuple[int, int, int], label: str
) -> Capacity:
    """A vLLM answer's tier table (step after the report: the host tier is cut from the GPU
    blocks the engine made)."""
    host = (
        vllm_host_tier(capacity, options, version, label)
        if options.kv_offloading_size is not None
        and options.kv_offloading_backend != "lmcache"  # engines/lmcache.py sizes that one
        and capacity.fits
        else None
    )
    if options.kv_offloading_backend is not None and options.kv_offloading_size is None:
        # vllm/config/vllm.py _post_init_kv_transfer_config: "KV offloading is only activated
        # when kv_offloading_size is set" (0.14.0 on)
        note = (
            f"kv_offloading_backend={options.kv_offloading_backend} without kv_offloading_size: "
            "vLLM offloads nothing, and no host tier is sized"
        )
        capacity = dataclasses.replace(capacity, warnings=(*capacity.warnings, note))
    return _tiers(capacity, host, offloaded_weight_bytes(options, capacity.weights_bytes_per_gpu))


def sglang_tiers(capacity: Capacity, options: EngineOptions, page_size: int) -> Capacity:
    """An SGLang answer's tier table: HiCache's host pool, and weights offloaded."""
    host = (
        sglang_host_tier(capacity, options, page_size)
        if options.enable_hierarchical_cache and capacity.fits
        else None
    )
    return _tiers(capacity, host, offloaded_weight_bytes(options, capacity.weights_bytes_per_gpu))


def offload_flags(
    options: EngineOptions, lmcache: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """The offload flags to paste, vLLM's and SGLang's, as each engine spells them. `lmcache`:
    LMCache's --kv-transfer-config (engines/lmcache.py lmcache_flags), which then stands for
    --kv-offloading-*."""
    vllm: list[str] = list(lmcache or ())
    sglang: list[str] = []
    if options.kv_offloading_size is not None and not lmcache:
        vllm.append(f"--kv-offloading-size {options.kv_offloading_size:g}")
        if options.kv_offloading_backend is not None:
            vllm.append(f"--kv-offloading-backend {options.kv_offloading_backend}")
    if options.enable_hierarchical_cache:
        sglang.append("--enable-hierarchical-cache")
        if options.hicache_ratio is not None:
            sglang.append(f"--hicache-ratio {options.hicache_ratio:g}")
        if options.hicache_size:
            sglang.append(f"--hicache-size {options.hicache_size}")
    if options.cpu_offload_gb:
        for flags in (vllm, sglang):
            flags.append(f"--cpu-offload-gb {options.cpu_offload_gb:g}")
    return vllm, sglang
