"""One deployment's capacity: how many sequences of `max_model_len` one engine instance holds.

per-token bytes (by layer) -> per-GPU pages and blocks (engine layout)
GPU memory -> pool (engine budget) -> blocks -> tokens, concurrency, max_num_seqs
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .architecture import ModelArchitecture, TokenLayer
from .dtypes import kv_cache_dtype_bytes, normalize_kv_cache_dtype
from .engines import calibration
from .engines.activation import forward_bytes_per_token
from .engines.common import CacheGroup, CacheLayout, Engine, EngineOptions, MemoryBudget, PoolReport
from .engines.sglang import (
    SglangHybrid,
    sglang_budget,
    sglang_hybrid,
    sglang_report,
    sglang_running_requests,
    sglang_tokens,
)
from .engines.trtllm import (
    WINDOWED_DEFAULT_NOTE,
    check_trtllm_hybrid,
    has_windowed_layers,
    trtllm_budget,
    trtllm_mamba_pools,
    trtllm_report,
    trtllm_rules,
    trtllm_state_bytes_per_slot,
    trtllm_state_dtypes,
    trtllm_window_pools,
)
from .engines.vllm import (
    batch_defaults,
    behaviour_for,
    mla_block_size,
    parse_version,
    vllm_budget,
    vllm_layout,
    vllm_report,
)
from .errors import InvalidDtype, InvalidParallelism, SizingError
from .kv import (
    LayerBytes,
    kv_bytes_per_token,
    packed_mla,
    sequence_breakdown,
    state_dtype_bytes,
    token_bytes_per_layer,
)
from .parallel import check_tensor_parallel, pipeline_stages
from .units import cdiv
from .weights import weight_bytes_per_gpu, weight_bytes_total

MAX_CONTEXT_TOKENS = 10_000_000


@dataclass(frozen=True, slots=True)
class Gpu:
    """An accelerator as the engine sees it: total memory as the CUDA runtime reports it."""

    memory_bytes: int
    name: str = ""
    slug: str = ""
    price_usd_per_hour: float | None = None
    max_gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if self.memory_bytes < 1:
            raise SizingError("gpu.memory_bytes", "must be a positive number of bytes")


@dataclass(frozen=True, slots=True)
class Workload:
    max_model_len: int
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        if not 1 <= self.max_model_len <= MAX_CONTEXT_TOKENS:
            raise SizingError("max_model_len", f"must be between 1 and {MAX_CONTEXT_TOKENS}")
        object.__setattr__(self, "kv_cache_dtype", normalize_kv_cache_dtype(self.kv_cache_dtype))


@dataclass(frozen=True, slots=True)
class Parallelism:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_replica * self.data_parallel_size


@dataclass(frozen=True)
class Capacity:
    """Everything one capacity computation found, per GPU unless the name says otherwise."""

    engine: Engine
    engine_version: str | None
    kv_cache_dtype: str
    kv_element_bytes: int
    max_model_len: int
    parallel: Parallelism
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_sequence: int
    sequence: tuple[LayerBytes, ...]
    weights_bytes: int
    weights_bytes_per_gpu: int
    budget: MemoryBudget
    layout: CacheLayout
    report: PoolReport
    engine_settings: dict[str, Any]
    warnings: tuple[str, ...]
    fits: bool
    reason: str | None
    max_model_len_that_fits: int | None = None
    per_stage_blocks: tuple[int, ...] = field(default=())

    @property
    def kv_pool_bytes(self) -> int:
        return self.budget.pool_bytes

    @property
    def num_gpu_blocks(self) -> int:
        return self.report.num_gpu_blocks

    @property
    def kv_cache_tokens(self) -> int:
        return self.report.kv_cache_tokens

    @property
    def max_concurrency(self) -> float:
        return round(self.report.max_concurrency, 2)

    @property
    def max_num_seqs(self) -> int:
        return self.report.max_num_seqs

    @property
    def total_max_num_seqs(self) -> int:
        return self.report.max_num_seqs * self.parallel.data_parallel_size

    @property
    def running_sequences_per_replica(self) -> int:
        """Sequences at max_model_len one replica runs at once: the cache or the engine's cap."""
        cap = self.engine_settings.get("max_num_seqs")
        return min(self.max_num_seqs, cap) if isinstance(cap, int) else self.max_num_seqs

    def replicas_for(self, peak_concurrency: int) -> int | None:
        """Engine replicas of this layout that run `peak_concurrency` sequences at once."""
        per_replica = self.running_sequences_per_replica
        if not self.fits or per_replica <= 0:
            return None
        return cdiv(peak_concurrency, per_replica)


def compute_capacity(
    arch: ModelArchitecture,
    gpu: Gpu,
    workload: Workload,
    parallel: Parallelism | None = None,
    engine: EngineOptions | None = None,
) -> Capacity:
    parallel = parallel or Parallelism()
    engine = engine or EngineOptions()
    warnings = list(check_tensor_parallel(arch, parallel.tensor_parallel_size))
    if parallel.tensor_parallel_size > gpu.max_gpus_per_node:
        # Tensor parallelism all-reduces every layer: engines keep it inside one NVLink node.
        raise InvalidParallelism(
            "tensor_parallel_size",
            f"{parallel.tensor_parallel_size} is more GPUs than one node of "
            f"{gpu.slug or gpu.name or 'this GPU'} holds ({gpu.max_gpus_per_node}); span nodes "
            "with pipeline_parallel_size",
        )
    stages = pipeline_stages(arch, parallel.pipeline_parallel_size)
    if parallel.data_parallel_size < 1:
        raise SizingError("data_parallel_size", "must be at least 1")
    m = workload.max_model_len
    if arch.max_position_embeddings is not None and m > arch.max_position_embeddings:
        warnings.append(
            f"max_model_len {m} is beyond the model's max_position_embeddings "
            f"{arch.max_position_embeddings}; engines refuse it unless rope scaling allows it"
        )
    kv_b = kv_cache_dtype_bytes(workload.kv_cache_dtype, arch.dtype)
    packed = packed_mla(arch, workload.kv_cache_dtype)
    if packed and engine.engine is not Engine.VLLM:
        raise InvalidDtype(
            "kv_cache_dtype", f"fp8_ds_mla is a vLLM cache format; {engine.engine.value} has none"
        )
    if arch.has_sparse_mla and kv_b == 1 and not packed:
        warnings.append(
            "sparse MLA with a plain fp8 cache: 576 fp8 values per token per layer. vLLM's "
            "FlashMLA-sparse backend stores fp8_ds_mla rows of 656 B instead (fp8 latent, fp32 "
            "scales, bf16 rope): ask for kv_cache_dtype=fp8_ds_mla to size those"
        )
    tp = parallel.tensor_parallel_size
    sequence = sequence_breakdown(arch, workload.kv_cache_dtype, m, 1, engine.mamba_ssm_cache_dtype)
    weights_total = weight_bytes_total(arch, engine.weight_format)
    weights_gpu = weight_bytes_per_gpu(
        arch, tp, parallel.pipeline_parallel_size, engine.weight_format
    )
    common = {
        "kv_cache_dtype": workload.kv_cache_dtype,
        "kv_element_bytes": kv_b,
        "max_model_len": m,
        "parallel": parallel,
        "kv_bytes_per_token": kv_bytes_per_token(arch, workload.kv_cache_dtype),
        "kv_bytes_per_token_per_gpu": max(
            kv_bytes_per_token(stage, workload.kv_cache_dtype, tp) for stage in stages
        ),
        "kv_bytes_per_sequence": sum(line.bytes_per_sequence for line in sequence),
        "sequence": sequence,
        "weights_bytes": weights_total,
        "weights_bytes_per_gpu": weights_gpu,
    }
    if engine.engine is Engine.VLLM:
        return _vllm_capacity(
            arch=arch,
            stages=stages,
            gpu=gpu,
            workload=workload,
            parallel=parallel,
            engine=engine,
            warnings=warnings,
            common=common,
        )
    if engine.engine is Engine.SGLANG:
        return _sglang_capacity(
            arch=arch,
            stages=stages,
            gpu=gpu,
            workload=workload,
            parallel=parallel,
            engine=engine,
            warnings=warnings,
            common=common,
        )
    return _trtllm_capacity(
        arch=arch,
        stages=stages,
        gpu=gpu,
        workload=workload,
        parallel=parallel,
        engine=engine,
        warnings=warnings,
        common=common,
    )


def _vllm_capacity(
    *,
    arch: ModelArchitecture,
    stages: list[ModelArchitecture],
    gpu: Gpu,
    workload: Workload,
    parallel: Parallelism,
    engine: EngineOptions,
    warnings: list[str],
    common: dict[str, Any],
) -> Capacity:
    behaviour = behaviour_for(
        parse_version(engine.engine_version or calibration.LATEST_VLLM_VERSION)
    )
    m = workload.max_model_len
    has_state = arch.has_state_layers
    if has_state and not behaviour.state_in_pool:
        raise SizingError(
            "engine_version",
            f"vLLM {behaviour.label} kept Mamba / linear-attention state outside the KV pool; "
            "kvplan sizes recurrent-state models from vLLM 0.10.2 on",
        )
    if arch.has_sparse_mla and behaviour.version < calibration.VLLM_SPARSE_MLA:
        raise SizingError(
            "engine_version",
            f"vLLM {behaviour.label} does not run DeepSeek sparse attention (indexer) models; "
            "they arrived in 0.11.0",
        )
    defaults = batch_defaults(behaviour, gpu.memory_bytes, gpu.name, m)
    mnbt = engine.max_num_batched_tokens or defaults.max_num_batched_tokens
    max_num_seqs = min(engine.max_num_seqs or defaults.max_num_seqs, mnbt)
    prefix_caching = (
        engine.enable_prefix_caching
        if engine.enable_prefix_caching is not None
        else behaviour.default_prefix_caching(has_state)
    )
    block_size = engine.block_size or (
        mla_block_size(behaviour, gpu.name, arch.has_sparse_mla)
        if arch.has_mla
        else calibration.VLLM_DEFAULT_BLOCK_SIZE
    )
    conv_b, ssm_b = state_dtype_bytes(arch, engine.mamba_ssm_cache_dtype)
    packed_cache = packed_mla(arch, workload.kv_cache_dtype)

    def layout_for(
        stage: ModelArchitecture, context: int, stage_sizes: tuple[int, ...] = ()
    ) -> CacheLayout:
        return vllm_layout(
            stage,
            behaviour=behaviour,
            kv_bytes=common["kv_element_bytes"],
            conv_bytes=conv_b,
            ssm_bytes=ssm_b,
            tensor_parallel_size=parallel.tensor_parallel_size,
            pipeline_parallel_size=parallel.pipeline_parallel_size,
            max_model_len=context,
            block_size=block_size,
            block_size_given=engine.block_size is not None,
            max_num_batched_tokens=mnbt,
            prefix_caching=prefix_caching,
            hybrid_manager=behaviour.hybrid_allocator
            and behaviour.v1_engine
            and not engine.disable_hybrid_kv_cache_manager,
            stage_sizes=stage_sizes,
            packed_mla=packed_cache,
        )

    whole_model = behaviour.whole_model_groups and len(stages) > 1
    sizes = tuple(stage.num_layers for stage in stages)
    if whole_model:
        # get_kv_cache_configs (0.11+): groups on the whole model, projected on each stage.
        stages = [arch]

    def layout_at(stage: ModelArchitecture, context: int) -> CacheLayout:
        return layout_for(stage, context, sizes if whole_model else ())

    layouts = [layout_at(stage, m) for stage in stages]
    budget = vllm_budget(
        arch,
        behaviour=behaviour,
        total_bytes=gpu.memory_bytes,
        weights_per_gpu=common["weights_bytes_per_gpu"],
        tensor_parallel_size=parallel.tensor_parallel_size,
        options=engine,
        max_num_batched_tokens=mnbt,
        max_num_seqs=max_num_seqs,
    )
    pool = max(0, budget.pool_bytes)
    if whole_model:
        widths = layouts[0].stage_bytes_per_block
        per_stage = tuple(pool // width for width in widths)
        worst = 0
        # Report the block as the narrowest stage's worker sees it.
        widest = max(range(len(widths)), key=lambda i: widths[i])
        layouts = [replace(layouts[0], bytes_per_block=widths[widest])]
    else:
        per_stage = tuple(pool // lay.bytes_per_block for lay in layouts)
        worst = min(range(len(layouts)), key=lambda i: per_stage[i])
    # get_kv_cache_configs: every worker takes the smallest block count of all workers.
    num_blocks = min(per_stage)
    if engine.num_gpu_blocks_override is not None:
        num_blocks = engine.num_gpu_blocks_override
    layout = layouts[worst]
    # 0.33 checks one request against the blocks left after the null block.
    usable = num_blocks - 1 if behaviour.fit_check_reserves_null_block else num_blocks
    report = vllm_report(num_blocks, layout, m, behaviour)
    fits, reason, longest = True, None, None
    if budget.pool_bytes <= 0:
        fits = False
        reason = (
            f"no memory left for the KV cache: weights, activation and overheads take "
            f"{budget.requested_bytes - budget.pool_bytes} B of the {budget.requested_bytes} B "
            "the engine may use"
        )
    elif usable < layout.blocks_per_request:
        fits = False
        longest = _longest_context(lambda c: layout_at(stages[worst], c), usable, m)
        reason = (
            f"one sequence of {m} tokens needs {layout.blocks_per_request} blocks but the pool "
            f"holds {num_blocks}"
            + (" (one is the null block)" if usable != num_blocks else "")
            + f"; the longest max_model_len that fits is {longest}"
        )
    settings: dict[str, Any] = {
        "engine_version": behaviour.label,
        "gpu_memory_utilization": budget.fraction,
        "block_size": layout.block_size,
        "max_num_batched_tokens": mnbt,
        "max_num_seqs": max_num_seqs,
        "enable_prefix_caching": prefix_caching,
        "enforce_eager": engine.enforce_eager,
        "defaults_from": defaults.source,
    }
    return Capacity(
        engine=Engine.VLLM,
        engine_version=behaviour.label,
        budget=budget,
        layout=layout,
        report=report,
        engine_settings=settings,
        warnings=tuple(warnings) + layout.notes,
        fits=fits,
        reason=reason,
        max_model_len_that_fits=longest,
        per_stage_blocks=per_stage,
        **common,
    )


def _longest_context(layout_at: Any, num_blocks: int, upper: int) -> int:
    """Binary search for the longest context whose per-request blocks fit (vLLM does the same)."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout_at(mid).blocks_per_request <= num_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _single_group_layout(bytes_per_token: int, block: int, m: int) -> CacheLayout:
    per_request = cdiv(m, block)
    return CacheLayout(
        groups=(CacheGroup("all_layers", 0, block, block * bytes_per_token, per_request),),
        bytes_per_block=block * bytes_per_token,
        blocks_per_request=per_request,
        block_size=block,
        padding_layers=0,
        notes=(),
    )


def _trtllm_window_capacity(
    *,
    arch: ModelArchitecture,
    stages: list[ModelArchitecture],
    workload: Workload,
    parallel: Parallelism,
    engine: EngineOptions,
    budget: MemoryBudget,
    block: int,
    mnbt: int,
    warnings: list[str],
    common: dict[str, Any],
) -> Capacity:
    """KvCacheConfig.max_attention_window given: one pool per distinct window (VSWA)."""
    windows = engine.max_attention_window or ()
    tp, m = parallel.tensor_parallel_size, workload.max_model_len
    kv_b = common["kv_element_bytes"]
    packed = packed_mla(arch, workload.kv_cache_dtype)
    best = None
    offset = 0
    for stage in stages:
        # The window list is per decoder layer, repeated over the layers when shorter.
        layer_windows = [
            (windows[(offset + i) % len(windows)], token_bytes_per_layer(g, kv_b, tp, packed))
            for i, g in enumerate(stage.layers)
            if isinstance(g, TokenLayer)
        ]
        offset += stage.num_layers
        if not layer_windows:
            continue
        pools = trtllm_window_pools(
            trtllm_rules(engine.engine_version),
            pool_bytes=budget.pool_bytes,
            layer_windows=layer_windows,
            tokens_per_block=block,
            max_model_len=m,
        )
        if best is None or pools.sequences < best.sequences:
            best = pools
    if best is None:
        raise SizingError("max_attention_window", "the model has no attention layer to window")
    # The pool that runs out first sets the batch; the planner reads its blocks.
    binding = min(best.pools, key=lambda p: p.sequences)
    largest = max(best.pools, key=lambda p: p.window)
    windows_of = best.describe
    report = PoolReport(
        binding.blocks,
        largest.tokens,
        best.concurrency,
        best.sequences,
        windows_of,
    )
    layout = CacheLayout(
        groups=tuple(
            CacheGroup(
                "full_attention" if p.window >= m else "sliding_attention",
                p.layers,
                block,
                block * p.bytes_per_token,
                p.blocks_per_request,
            )
            for p in best.pools
        ),
        bytes_per_block=block * binding.bytes_per_token,
        blocks_per_request=binding.blocks_per_request,
        block_size=block,
        padding_layers=0,
        notes=best.notes,
    )
    fits = best.sequences >= 1
    reason = (
        None
        if fits
        else (
            f"the window-{binding.window} pool's {binding.blocks} blocks cannot hold one "
            f"sequence of {m} tokens ({binding.blocks_per_request} blocks)"
        )
    )
    return Capacity(
        engine=Engine.TRTLLM,
        engine_version=engine.engine_version,
        budget=budget,
        layout=layout,
        report=report,
        engine_settings={
            "free_gpu_memory_fraction": budget.fraction,
            "tokens_per_block": block,
            "max_num_tokens": mnbt,
            "max_attention_window": list(windows),
            "pools": {str(p.window): p.blocks for p in best.pools},
        },
        warnings=tuple(warnings) + best.notes,
        fits=fits,
        reason=reason,
        **common,
    )


def _sglang_capacity(
    *,
    arch: ModelArchitecture,
    stages: list[ModelArchitecture],
    gpu: Gpu,
    workload: Workload,
    parallel: Parallelism,
    engine: EngineOptions,
    warnings: list[str],
    common: dict[str, Any],
) -> Capacity:
    page = engine.block_size or 1
    m = workload.max_model_len
    budget = sglang_budget(
        total_bytes=gpu.memory_bytes,
        weights_per_gpu=common["weights_bytes_per_gpu"],
        tensor_parallel_size=parallel.tensor_parallel_size,
        options=engine,
    )
    hybrid, notes = sglang_hybrid(
        arch,
        stages=stages,
        pool_bytes=budget.pool_bytes,
        kv_bytes=common["kv_element_bytes"],
        tensor_parallel_size=parallel.tensor_parallel_size,
        page_size=page,
        max_model_len=m,
        options=engine,
    )
    warnings.extend(notes)
    settings: dict[str, Any] = {"mem_fraction_static": budget.fraction, "page_size": page}
    if hybrid is not None:
        return _sglang_hybrid_capacity(
            hybrid,
            engine_version=engine.engine_version,
            budget=budget,
            settings=settings,
            page=page,
            m=m,
            warnings=warnings,
            common=common,
        )
    # Every attention layer holds the whole context (design section 2).
    cell = common["kv_bytes_per_token_per_gpu"]
    report = sglang_report(budget.pool_bytes, cell, page, m, engine.max_num_seqs)
    # --max-running-requests sizes the request pool: the batch never grows past it.
    running = sglang_running_requests(
        sglang_tokens(budget.pool_bytes, cell, page), m, engine.max_num_seqs
    )
    settings["max_running_requests"] = settings["max_num_seqs"] = running
    fits = report.max_num_seqs >= 1
    reason = (
        None
        if fits
        else f"{report.kv_cache_tokens} KV tokens cannot hold one sequence of {m} tokens"
    )
    return Capacity(
        engine=Engine.SGLANG,
        engine_version=engine.engine_version,
        budget=budget,
        layout=_single_group_layout(cell, page, m),
        report=report,
        engine_settings=settings,
        warnings=tuple(warnings),
        fits=fits,
        reason=reason,
        **common,
    )


def _sglang_hybrid_capacity(
    hybrid: SglangHybrid,
    *,
    engine_version: str | None,
    budget: MemoryBudget,
    settings: dict[str, Any],
    page: int,
    m: int,
    warnings: list[str],
    common: dict[str, Any],
) -> Capacity:
    """SWA / Mamba pools: a block is one page of the full-attention token pool, priced with
    what it takes of rest_memory (its share of the SWA pool included)."""
    per_request = cdiv(m, page)
    block_bytes = round(page * hybrid.pool_bytes_per_token)
    layout = CacheLayout(
        groups=(CacheGroup("full_attention", hybrid.full_layers, page, block_bytes, per_request),),
        bytes_per_block=block_bytes,
        blocks_per_request=per_request,
        block_size=page,
        padding_layers=0,
        notes=(),
    )
    report = PoolReport(
        hybrid.tokens // page,
        hybrid.tokens,
        hybrid.concurrency,
        hybrid.sequences,
        hybrid.describe,
    )
    problem = hybrid.problem
    if budget.pool_bytes <= 0:
        problem = "no memory left for the KV cache after the weights and the static reserve"
    return Capacity(
        engine=Engine.SGLANG,
        engine_version=engine_version,
        budget=budget,
        layout=layout,
        report=report,
        engine_settings={**settings, **hybrid.settings},
        warnings=tuple(warnings),
        fits=problem is None,
        reason=problem,
        **common,
    )


def _trtllm_capacity(
    *,
    arch: ModelArchitecture,
    stages: list[ModelArchitecture],
    gpu: Gpu,
    workload: Workload,
    parallel: Parallelism,
    engine: EngineOptions,
    warnings: list[str],
    common: dict[str, Any],
) -> Capacity:
    if arch.has_state_layers:
        return _trtllm_mamba_capacity(
            arch=arch,
            stages=stages,
            gpu=gpu,
            workload=workload,
            parallel=parallel,
            engine=engine,
            warnings=warnings,
            common=common,
        )
    if has_windowed_layers(arch) and engine.max_attention_window is None:
        # resource_manager.py KVCacheManager: no max_attention_window -> [max_seq_len] for all.
        warnings.append(WINDOWED_DEFAULT_NOTE)
    per_token = forward_bytes_per_token(arch, parallel.tensor_parallel_size) or 0
    mnbt = engine.max_num_batched_tokens or 8192
    budget = trtllm_budget(
        total_bytes=gpu.memory_bytes,
        weights_per_gpu=common["weights_bytes_per_gpu"],
        activation_bytes=per_token * mnbt,
        options=engine,
    )
    block = engine.block_size or calibration.TRTLLM_TOKENS_PER_BLOCK
    if engine.max_attention_window is not None:
        return _trtllm_window_capacity(
            arch=arch,
            stages=stages,
            workload=workload,
            parallel=parallel,
            engine=engine,
            budget=budget,
            block=block,
            mnbt=mnbt,
            warnings=warnings,
            common=common,
        )
    cell = common["kv_bytes_per_token_per_gpu"]
    report = trtllm_report(budget.pool_bytes, cell, block, workload.max_model_len)
    fits = report.max_num_seqs >= 1
    reason = (
        None
        if fits
        else (
            f"{report.kv_cache_tokens} KV tokens cannot hold one sequence of "
            f"{workload.max_model_len} tokens"
        )
    )
    return Capacity(
        engine=Engine.TRTLLM,
        engine_version=engine.engine_version,
        budget=budget,
        layout=_single_group_layout(cell, block, workload.max_model_len),
        report=report,
        engine_settings={
            "free_gpu_memory_fraction": budget.fraction,
            "tokens_per_block": block,
            "max_num_tokens": mnbt,
        },
        warnings=tuple(warnings),
        fits=fits,
        reason=reason,
        **common,
    )


def _trtllm_mamba_capacity(
    *,
    arch: ModelArchitecture,
    stages: list[ModelArchitecture],
    gpu: Gpu,
    workload: Workload,
    parallel: Parallelism,
    engine: EngineOptions,
    warnings: list[str],
    common: dict[str, Any],
) -> Capacity:
    """MambaHybridCacheManager: max_batch_size state slots taken before the fraction, then a
    paged KV pool for the attention layers (engines/trtllm.py `trtllm_mamba_pools`)."""
    rules = trtllm_rules(engine.engine_version)
    check_trtllm_hybrid(arch, rules)
    m = workload.max_model_len
    tp = parallel.tensor_parallel_size
    mnbt = engine.max_num_batched_tokens or 8192
    activation = (forward_bytes_per_token(arch, tp) or 0) * mnbt
    block = engine.block_size or calibration.TRTLLM_TOKENS_PER_BLOCK
    slots = engine.max_num_seqs or calibration.TRTLLM_DEFAULT_MAX_BATCH_SIZE
    conv_b, ssm_b, ssm_name = trtllm_state_dtypes(arch, rules, engine)
    chosen = None
    for stage in stages:
        conv, ssm = trtllm_state_bytes_per_slot(stage, tp, conv_b, ssm_b)
        budget = trtllm_budget(
            total_bytes=gpu.memory_bytes,
            weights_per_gpu=common["weights_bytes_per_gpu"],
            activation_bytes=activation,
            options=engine,
            state_bytes=slots * (conv + ssm),
        )
        pools = trtllm_mamba_pools(
            rules,
            stage=stage,
            model=arch,
            pool_bytes=budget.pool_bytes,
            kv_bytes=common["kv_element_bytes"],
            conv_bytes=conv_b,
            ssm_bytes=ssm_b,
            tensor_parallel_size=tp,
            tokens_per_block=block,
            max_model_len=m,
            max_batch_size=slots,
        )
        # KVCacheManager.calculate_max_num_blocks: every rank takes the MIN of max_tokens.
        if chosen is None or pools.max_tokens < chosen[1].max_tokens:
            chosen = (budget, pools)
    assert chosen is not None
    budget, pools = chosen
    warnings.extend(pools.notes)
    if has_windowed_layers(arch):
        warnings.append(WINDOWED_DEFAULT_NOTE)
    if len(stages) > 1:
        warnings.append(
            "pipeline parallel: each stage holds its own layers' state and KV; TensorRT-LLM "
            "keeps the smallest max_tokens of all ranks and kvplan reports that stage"
        )
    block_bytes = block * pools.attention_bytes_per_token
    layout = CacheLayout(
        groups=(
            CacheGroup(
                "full_attention",
                pools.attention_layers,
                block,
                block_bytes,
                pools.blocks_per_request,
            ),
        ),
        bytes_per_block=block_bytes,
        blocks_per_request=pools.blocks_per_request,
        block_size=block,
        padding_layers=0,
        notes=(),
    )
    report = PoolReport(
        pools.blocks, pools.blocks * block, pools.concurrency, pools.sequences, pools.describe
    )
    return Capacity(
        engine=Engine.TRTLLM,
        engine_version=engine.engine_version,
        budget=budget,
        layout=layout,
        report=report,
        engine_settings={
            "engine_version": rules.label,
            "free_gpu_memory_fraction": budget.fraction,
            "tokens_per_block": block,
            "max_num_tokens": mnbt,
            "max_batch_size": slots,
            "max_num_seqs": slots,
            "mamba_ssm_cache_dtype": ssm_name,
            "mamba_state_bytes_per_request": pools.conv_bytes_per_slot + pools.ssm_bytes_per_slot,
            "kv_size_per_token": pools.kv_size_per_token,
        },
        warnings=tuple(warnings),
        fits=pools.problem is None,
        reason=pools.problem,
        **common,
    )
