"""One deployment's capacity: how many sequences of `max_model_len` one engine instance holds.

per-token bytes (by layer) -> per-GPU pages and blocks (engine layout)
GPU memory -> pool (engine budget) -> blocks -> tokens, concurrency, max_num_seqs

This module checks what every engine refuses alike (the parallel layout, the cache dtype),
works out the model's own facts, and hands both to one engine's pipeline: engines/vllm.py
`vllm_capacity`, engines/sglang.py `sglang_capacity`, engines/trtllm.py `trtllm_capacity`.
The question and answer types live in engines/common.py and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import assert_never

from .engines.common import (
    MAX_CONTEXT_TOKENS,
    Capacity,
    Engine,
    EngineOptions,
    Gpu,
    ModelFacts,
    Parallelism,
    SizingInputs,
    Workload,
)
from .engines.expert_parallel import (
    ExpertParallel,
    RankWeights,
    check_vllm_expert_parallel,
    vllm_rank_weights,
)
from .engines.kv import kv_bytes_per_token, packed_mla, sequence_breakdown
from .engines.lmcache import check_lmcache_flags
from .engines.lora import refuse_lora
from .engines.model_dtype import resolve_model_dtype, served_architecture
from .engines.offload import check_offload_flags
from .engines.parallel import check_tensor_parallel, pipeline_stages
from .engines.sglang import sglang_capacity, sglang_release
from .engines.sglang_dp import (
    NO_SGLANG_PARALLEL,
    SglangLayout,
    SglangParallel,
    SglangVersion,
    check_sglang_experts,
    sglang_layout,
    sglang_rank_weights,
)
from .engines.speculative import (
    refuse_speculative,
    sglang_drafter,
    vllm_drafter,
    with_draft_layers,
)
from .engines.trtllm import trtllm_capacity
from .engines.vllm import vllm_capacity
from .engines.vllm_kv_dtype import vllm_kv_cache
from .errors import InvalidDtype, InvalidParallelism, SizingError
from .model.architecture import ModelArchitecture
from .model.context_limit import check_max_model_len
from .model.dtypes import KvCacheDtype, WeightFormat
from .model.stage_weights import stage_weight_bytes
from .model.weights import weight_bytes_per_gpu, weight_bytes_total
from .units import cdiv

__all__ = [
    "MAX_CONTEXT_TOKENS",
    "Capacity",
    "Gpu",
    "ModelFacts",
    "Parallelism",
    "SizingInputs",
    "Workload",
    "compute_capacity",
    "model_facts",
    "served_model",
]


def compute_capacity(
    arch: ModelArchitecture,
    gpu: Gpu,
    workload: Workload,
    parallel: Parallelism | None = None,
    engine: EngineOptions | None = None,
) -> Capacity:
    parallel = parallel or Parallelism()
    engine = engine or EngineOptions()
    checked = checked_layout(arch, gpu, workload.kv_cache_dtype, parallel, engine)
    arch, parallel, sglang = checked.arch, checked.parallel, checked.sglang
    if checked.kv_cache_dtype != workload.kv_cache_dtype:
        workload = Workload(workload.max_model_len, checked.kv_cache_dtype)
    warnings = list(checked.warnings)
    warnings.extend(_check_workload(arch, workload, engine, backend_said=checked.backend_decided))
    note = weights_note(arch, engine)
    if note is not None:
        warnings.append(note)
    facts = model_facts(arch, checked.stages, workload, parallel, engine, sglang=sglang)
    if facts.rank_weights is not None and facts.rank_weights.warning is not None:
        warnings.append(facts.rank_weights.warning)
    if facts.stage_weights_note is not None:
        warnings.append(facts.stage_weights_note)
    inputs = SizingInputs(
        arch=arch,
        stages=checked.stages,
        gpu=gpu,
        workload=workload,
        parallel=parallel,
        engine=engine,
        facts=facts,
        warnings=tuple(warnings),
    )
    match engine.engine:
        case Engine.VLLM:
            return vllm_capacity(inputs)
        case Engine.SGLANG:
            return sglang_capacity(inputs)
        case Engine.TRTLLM:
            return trtllm_capacity(inputs)
        case _:
            assert_never(engine.engine)


@dataclass(frozen=True, slots=True)
class CheckedLayout:
    """What a question's model, GPU, layout, cache dtype and flags decide before its context:
    the model as served (weights at --dtype, a drafter's layers added), the parallel layout
    (SGLang's DP attention normalised), the cache dtype vLLM allocates, the pipeline stages'
    layers, and the warnings said so far, in the order they are found."""

    arch: ModelArchitecture
    parallel: Parallelism
    sglang: _SglangParallelism | None
    kv_cache_dtype: KvCacheDtype
    backend_decided: bool  # the GPU's sparse-MLA backend chose the cache's format
    stages: tuple[ModelArchitecture, ...]
    warnings: tuple[str, ...]


def checked_layout(
    arch: ModelArchitecture,
    gpu: Gpu,
    kv_cache_dtype: KvCacheDtype,
    parallel: Parallelism,
    engine: EngineOptions,
) -> CheckedLayout:
    """compute_capacity's steps up to the context: the flags every engine refuses alike, the
    model as served, SGLang's widths, LoRA and speculative decoding, the tensor-parallel split,
    vLLM's cache dtype, the stages and expert parallelism."""
    # A ModelArchitecture compares without its name and weights_unknown, which the served
    # model carries on (SGLang picks its SWA pool by the name): the memo's key names both.
    return _checked_layout(
        arch,
        gpu,
        kv_cache_dtype,
        parallel,
        engine,
        name=arch.name,
        weights_unknown=arch.weights_unknown,
    )


# Memoised without the context: no step here reads max_model_len, and a new question is most
# often a known layout at another length. A refusal raises again each time (never memoised).
@lru_cache(maxsize=4096)
def _checked_layout(
    arch: ModelArchitecture,
    gpu: Gpu,
    kv_cache_dtype: KvCacheDtype,
    parallel: Parallelism,
    engine: EngineOptions,
    *,
    name: str,  # the key's only, as is weights_unknown
    weights_unknown: tuple[str, str] | None,
) -> CheckedLayout:
    check_offload_flags(engine)
    check_lmcache_flags(engine)
    arch, warnings = served_model(arch, gpu, engine)
    # SGLang's DP attention: from here on the parallel is attention TP x attention DP
    sglang = _sglang_parallel(arch, parallel, engine)
    if sglang is not None:
        parallel = normalised_parallel(parallel, sglang.layout)
        warnings.extend(sglang.notes)
    refuse_lora(engine.engine.value, engine)
    if engine.speculative_config is not None:
        # issue 21: the drafter's cache layers join the target's in the KV-cache groups
        # (engines/speculative.py); its weights are a line of the engine's budget.
        refuse_speculative(engine.engine.value, parallel.pipeline_parallel_size)
        drafter = (
            sglang_drafter(arch, engine.speculative_config)
            if engine.engine is Engine.SGLANG
            else vllm_drafter(arch, engine.speculative_config, parallel.tensor_parallel_size)
        )
        arch = with_draft_layers(arch, drafter)
        warnings.append(drafter.note)
    warnings.extend(check_tensor_parallel(arch, parallel.tensor_parallel_size))
    if arch.config_note is not None:
        warnings.append(arch.config_note)
    backend_decided = False
    if engine.engine is Engine.VLLM:
        # the engine's first step: auto becomes the KV cache the checkpoint declares
        served = vllm_kv_cache(arch, kv_cache_dtype, engine, gpu.name)
        kv_cache_dtype, backend_decided = served.kv_cache_dtype, served.backend_decided
        if served.note is not None:
            warnings.append(served.note)
    stages = _check_parallelism(arch, gpu, parallel)
    warnings.extend(_check_expert_parallel(arch, parallel, engine))
    return CheckedLayout(
        arch, parallel, sglang, kv_cache_dtype, backend_decided, stages, tuple(warnings)
    )


def served_model(
    arch: ModelArchitecture, gpu: Gpu, engine: EngineOptions
) -> tuple[ModelArchitecture, list[str]]:
    """The model at the dtype the engine runs it on `gpu` (--dtype, resolved), with the warning
    saying what was chosen where it is not the checkpoint's (engines/model_dtype.py)."""
    resolved = resolve_model_dtype(arch.dtype, engine, gpu)
    served = served_architecture(arch, resolved.dtype)
    return served, [] if resolved.note is None else [resolved.note]


def _check_parallelism(
    arch: ModelArchitecture, gpu: Gpu, parallel: Parallelism
) -> tuple[ModelArchitecture, ...]:
    """The layers of each pipeline stage, once the layout is one the engines accept."""
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
    return tuple(stages)


def _check_expert_parallel(
    arch: ModelArchitecture, parallel: Parallelism, engine: EngineOptions
) -> tuple[str, ...]:
    """vLLM's expert- and context-parallel flags (engines/expert_parallel.py); the other
    engines' own spellings are refused at the door, and vLLM's are refused for them here."""
    flags = engine.expert_parallel
    if engine.engine is not Engine.SGLANG and engine.sglang_parallel.asked:
        asked = next(
            name
            for name in (
                "enable_dp_attention",
                "attn_dp_size",
                "ep_size",
                "ep_num_redundant_experts",
                "enable_dp_lm_head",
                "moe_dense_tp_size",
                "moe_a2a_backend",
                "deepep_mode",
            )
            if getattr(engine.sglang_parallel, name) != getattr(NO_SGLANG_PARALLEL, name)
        )
        raise SizingError(
            asked,
            f"{asked} is SGLang's flag; kvplan models it for SGLang only, not for "
            f"{engine.engine.value}"
            + (" (vLLM: enable_expert_parallel)" if engine.engine is Engine.VLLM else ""),
        )
    if engine.engine is Engine.VLLM:
        return check_vllm_expert_parallel(arch, parallel, flags)
    if flags.asked:
        asked = next(
            name
            for name in (
                "enable_expert_parallel",
                "num_redundant_experts",
                "enable_eplb",
                "decode_context_parallel_size",
                "all2all_backend",
            )
            if getattr(flags, name) != getattr(ExpertParallel(), name)
        )
        raise SizingError(
            asked,
            f"{asked} is vLLM's flag; kvplan models expert and context parallelism for vLLM "
            f"only, not for {engine.engine.value}",
        )
    return ()


@dataclass(frozen=True, slots=True)
class _SglangParallelism:
    """SGLang's widths (engines/sglang_dp.py), the flags and the release that read them."""

    layout: SglangLayout
    flags: SglangParallel
    version: SglangVersion
    notes: tuple[str, ...]


def _sglang_parallel(
    arch: ModelArchitecture, parallel: Parallelism, engine: EngineOptions
) -> _SglangParallelism | None:
    """SGLang's DP-attention and EP widths, checked; None for other engines or no flags."""
    flags = engine.sglang_parallel
    if engine.engine is not Engine.SGLANG or not flags.asked:
        return None
    release = sglang_release(engine.engine_version)
    layout, notes = sglang_layout(parallel, flags, release.version, release.label)
    notes += check_sglang_experts(arch, layout, flags)
    return _SglangParallelism(layout, flags, release.version, notes)


def normalised_parallel(parallel: Parallelism, layout: SglangLayout) -> Parallelism:
    """kvplan's view of an SGLang engine with DP attention: attn_tp GPUs share one pool,
    attn_dp pools of their own sequences (the totals multiply by it), tp_size GPUs in all."""
    if layout.attn_dp_size == 1:
        return parallel
    return Parallelism(layout.attn_tp_size, parallel.pipeline_parallel_size, layout.attn_dp_size)


def _check_workload(
    arch: ModelArchitecture, workload: Workload, engine: EngineOptions, backend_said: bool = False
) -> list[str]:
    """Warnings for a context or cache dtype the model may not take; raise for one it cannot."""
    warnings: list[str] = []
    too_long = check_max_model_len(arch, workload.max_model_len, engine)
    if too_long is not None:
        warnings.append(too_long)
    kv_element_bytes = workload.kv_cache_dtype.bytes_at(arch.dtype)
    packed = packed_mla(arch, workload.kv_cache_dtype)
    if packed and engine.engine is not Engine.VLLM:
        raise InvalidDtype(
            "kv_cache_dtype", f"fp8_ds_mla is a vLLM cache format; {engine.engine.value} has none"
        )
    if arch.has_sparse_mla and kv_element_bytes == 1 and not packed and not backend_said:
        warnings.append(
            "sparse MLA with a plain fp8 cache: 576 fp8 values per token per layer. vLLM's "
            "FlashMLA-sparse backend stores fp8_ds_mla rows of 656 B instead (fp8 latent, fp32 "
            "scales, bf16 rope): ask for kv_cache_dtype=fp8_ds_mla to size those"
        )
    return warnings


def _weights_if_needed(
    arch: ModelArchitecture, *, weights_needed: bool, weight_format: WeightFormat | None
) -> int:
    """The weights of one copy of the model, or 0 where the answer does not need them.

    A given pool (`kv_pool_bytes`: vLLM's --kv-cache-memory-bytes, or a log's "Available KV
    cache memory") replaces the engine's budget, so weights play no part in the blocks or
    max_num_seqs: a config whose weights cannot be counted still answers (the warning from
    `weights_note` says the weights line is unknown). Without a pool they are needed, and the
    missing fact is the problem (weights.weight_bytes_total names it).
    """
    if weights_needed or arch.weights_known:
        return weight_bytes_total(arch, weight_format)
    return 0


def weights_note(arch: ModelArchitecture, engine: EngineOptions) -> str | None:
    if engine.kv_pool_bytes is None or arch.weights_known:
        return None
    field, reason = arch.weights_unknown or ("num_parameters", "no parameter count")
    return (
        f"weights unknown ({field}: {reason}); not needed, since kv_pool_bytes gives the pool, "
        "and shown as 0 in the budget"
    )


# Not memoised: the per-token facts are (`_per_token_facts`); the sequence is keyed by
# max_model_len, which a new question changes, and a memo of it costs more than it saves.
def model_facts(
    arch: ModelArchitecture,
    stages: tuple[ModelArchitecture, ...],
    workload: Workload,
    parallel: Parallelism,
    engine: EngineOptions,
    *,
    sglang: _SglangParallelism | None = None,
) -> ModelFacts:
    """What the model holds under this question, the same for every engine."""
    dtype = workload.kv_cache_dtype
    sequence = sequence_breakdown(
        arch, dtype, workload.max_model_len, 1, engine.mamba_ssm_cache_dtype
    )
    per_token = _per_token_facts(
        arch,
        stages,
        dtype,
        parallel,
        weights_needed=engine.kv_pool_bytes is None,
        weight_format=engine.weight_format,
        expert_parallel=engine.expert_parallel if engine.engine is Engine.VLLM else None,
        sglang=sglang,
    )
    return ModelFacts(
        kv_cache_dtype=dtype,
        kv_element_bytes=per_token.kv_element_bytes,
        max_model_len=workload.max_model_len,
        parallel=parallel,
        kv_bytes_per_token=per_token.kv_bytes_per_token,
        kv_bytes_per_token_per_gpu=per_token.kv_bytes_per_token_per_gpu,
        kv_bytes_per_sequence=sum(line.bytes_per_sequence for line in sequence),
        sequence=sequence,
        weights_bytes=per_token.weights_bytes,
        weights_bytes_per_gpu=per_token.weights_bytes_per_gpu,
        rank_weights=per_token.rank_weights,
        stage_weights_bytes_per_gpu=per_token.stage_weights_bytes_per_gpu,
        stage_weights_note=per_token.stage_weights_note,
    )


@dataclass(frozen=True, slots=True)
class _PerTokenFacts:
    """The facts of `ModelFacts` that no max_model_len changes."""

    kv_element_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    weights_bytes: int
    weights_bytes_per_gpu: int
    rank_weights: RankWeights | None
    stage_weights_bytes_per_gpu: tuple[int, ...] = ()
    stage_weights_note: str | None = None


# Memoised without the context: dashboards ask one model and layout at many max_model_len.
@lru_cache(maxsize=4096)
def _per_token_facts(
    arch: ModelArchitecture,
    stages: tuple[ModelArchitecture, ...],
    kv_cache_dtype: KvCacheDtype,
    parallel: Parallelism,
    *,
    weights_needed: bool,
    weight_format: WeightFormat | None,
    expert_parallel: ExpertParallel | None = None,
    sglang: _SglangParallelism | None = None,
) -> _PerTokenFacts:
    """`expert_parallel`: vLLM's flags (None for the other engines, whose DP is whole replicas:
    SGLang's DataParallelController without DP attention); `sglang`: SGLang's DP attention and
    EP (engines/sglang_dp.py)."""
    tp = parallel.tensor_parallel_size
    weights = _weights_if_needed(arch, weights_needed=weights_needed, weight_format=weight_format)
    rank: RankWeights | None = None
    if weights and expert_parallel is not None:
        rank = vllm_rank_weights(arch, weights, parallel, expert_parallel, weight_format)
    elif weights and sglang is not None:
        rank = sglang_rank_weights(
            arch,
            weights,
            sglang.layout,
            sglang.flags,
            pipeline_parallel_size=parallel.pipeline_parallel_size,
            weight_format=weight_format,
            version=sglang.version,
        )
    per_stage, note = (
        _stage_weights(arch, stages, weights, tp, weight_format)
        if rank is None and weights and len(stages) > 1
        else ((), None)
    )
    return _PerTokenFacts(
        kv_element_bytes=kv_cache_dtype.bytes_at(arch.dtype),
        kv_bytes_per_token=kv_bytes_per_token(arch, kv_cache_dtype),
        kv_bytes_per_token_per_gpu=max(
            kv_bytes_per_token(stage, kv_cache_dtype, tp) for stage in stages
        ),
        weights_bytes=weights,
        # Weights shard across TP ranks; over PP stages as each stage holds them (the heaviest
        # stage's GPU here, every stage's in `stage_weights_bytes_per_gpu`); a MoE's experts
        # over DP x TP in vLLM.
        weights_bytes_per_gpu=(
            rank.bytes_per_gpu
            if rank is not None
            else max(per_stage)
            if per_stage
            else weight_bytes_per_gpu(weights, tp, parallel.pipeline_parallel_size)
        ),
        rank_weights=rank,
        stage_weights_bytes_per_gpu=per_stage,
        stage_weights_note=note,
    )


def _stage_weights(
    arch: ModelArchitecture,
    stages: tuple[ModelArchitecture, ...],
    weights: int,
    tensor_parallel_size: int,
    weight_format: WeightFormat | None,
) -> tuple[tuple[int, ...], str | None]:
    """One GPU's weights on each pipeline stage (model/stage_weights.py), or even shares with
    the warning saying so where the model's tensors are not known."""
    sizes = tuple(stage.num_layers for stage in stages)
    per_stage = stage_weight_bytes(arch, weights, sizes, weight_format)
    if per_stage is None:
        even = weight_bytes_per_gpu(weights, tensor_parallel_size, len(stages))
        return (even,) * len(stages), (
            f"weights split evenly over the {len(stages)} pipeline stages ({even} B per GPU): "
            "kvplan cannot place this model's tensors on stages (a config.json with tensors it "
            "cannot place, or a catalog entry whose parameter count is not a plain decoder's), "
            "so the first stage's embeddings and the last stage's head are not counted on their "
            "own stages"
        )
    return tuple(cdiv(stage, tensor_parallel_size) for stage in per_stage), None
