"""Turns validated requests into sizing calls and sizing results into answers. No HTTP here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..catalog.snapshot import CatalogSnapshot
from ..sizing import (
    Capacity,
    Engine,
    EngineOptions,
    Gpu,
    ModelArchitecture,
    Parallelism,
    SizingError,
    Workload,
    architecture_from_dict,
    compute_capacity,
)
from ..sizing.explain import explain
from ..sizing.hf_config import architecture_from_hf_config
from ..sizing.planner import Plan, PlanOption, PlanRequest, plan
from .schemas import (
    CapacityAnswer,
    CapacityDetail,
    EngineFields,
    GpuRef,
    InlineModel,
    ModelRef,
    PlanAnswer,
    PlanOptionOut,
    PlanQuery,
    PlanRequestBody,
    RejectedOut,
)


def _prefixed(exc: SizingError, prefix: str) -> SizingError:
    return type(exc)(f"{prefix}.{exc.field}", exc.reason)


def resolve_model(ref: ModelRef, catalog: CatalogSnapshot) -> tuple[str, ModelArchitecture]:
    """A slug from the catalog, an inline architecture, or a config.json: (label, architecture)."""
    if isinstance(ref, str):
        entry = catalog.model(ref)
        return entry.slug, entry.architecture
    try:
        if isinstance(ref, InlineModel):
            return "inline", architecture_from_dict(ref.model_dump(exclude_none=True))
        arch = architecture_from_hf_config(
            ref.hf_config, num_parameters=ref.num_parameters, weight_bytes=ref.weight_bytes
        )
    except SizingError as exc:
        raise _prefixed(
            exc, "model" if isinstance(ref, InlineModel) else "model.hf_config"
        ) from exc
    return str(ref.hf_config.get("_name_or_path") or "hf_config"), arch


def resolve_gpu(ref: GpuRef, catalog: CatalogSnapshot) -> Gpu:
    if isinstance(ref, str):
        return catalog.gpu(ref).gpu
    return Gpu(
        memory_bytes=ref.memory_bytes,
        name=ref.name,
        slug=ref.name or f"{ref.memory_bytes}B",
        price_usd_per_hour=ref.price_usd_per_hour,
        max_gpus_per_node=ref.max_gpus_per_node,
    )


def engine_options(fields: EngineFields) -> EngineOptions:
    engine = Engine(fields.engine)
    for name, applies in (
        ("gpu_memory_utilization", Engine.VLLM),
        ("mem_fraction_static", Engine.SGLANG),
        ("free_gpu_memory_fraction", Engine.TRTLLM),
        ("swa_full_tokens_ratio", Engine.SGLANG),
        ("mamba_full_memory_ratio", Engine.SGLANG),
        ("max_mamba_cache_size", Engine.SGLANG),
        ("max_attention_window", Engine.TRTLLM),
    ):
        if getattr(fields, name) is not None and engine is not applies:
            raise SizingError(name, f"applies to engine={applies.value}, not {engine.value}")
    return EngineOptions(
        engine=engine,
        engine_version=fields.engine_version,
        gpu_memory_utilization=fields.gpu_memory_utilization,
        mem_fraction_static=fields.mem_fraction_static,
        free_gpu_memory_fraction=fields.free_gpu_memory_fraction,
        block_size=fields.block_size,
        max_num_batched_tokens=fields.max_num_batched_tokens,
        max_num_seqs=fields.max_num_seqs,
        enable_prefix_caching=fields.enable_prefix_caching,
        enforce_eager=fields.enforce_eager,
        cudagraph_memory_bytes=fields.cudagraph_memory_bytes,
        kv_pool_bytes=fields.kv_pool_bytes,
        num_gpu_blocks_override=fields.num_gpu_blocks_override,
        mamba_ssm_cache_dtype=fields.mamba_ssm_cache_dtype,
        disable_hybrid_kv_cache_manager=fields.disable_hybrid_kv_cache_manager,
        weight_format=fields.weight_format,
        swa_full_tokens_ratio=fields.swa_full_tokens_ratio,
        mamba_full_memory_ratio=fields.mamba_full_memory_ratio,
        max_mamba_cache_size=fields.max_mamba_cache_size,
        max_attention_window=(
            None if fields.max_attention_window is None else tuple(fields.max_attention_window)
        ),
    )


def default_context(arch: ModelArchitecture, max_model_len: int | None) -> int:
    if max_model_len is not None:
        return max_model_len
    if arch.max_position_embeddings is None:
        raise SizingError("max_model_len", "the model has no max_position_embeddings: give one")
    return arch.max_position_embeddings


def capacity_for(
    *,
    arch: ModelArchitecture,
    gpu: Gpu,
    max_model_len: int,
    kv_cache_dtype: str,
    parallel: Parallelism,
    fields: EngineFields,
) -> Capacity:
    return compute_capacity(
        arch, gpu, Workload(max_model_len, kv_cache_dtype), parallel, engine_options(fields)
    )


def capacity_answer(
    capacity: Capacity,
    model: str,
    gpu: Gpu,
    catalog_version: int,
    peak_concurrency: int | None = None,
) -> CapacityAnswer:
    return CapacityAnswer(
        model=model,
        gpu=gpu.slug,
        gpu_memory_bytes=gpu.memory_bytes,
        engine=capacity.engine.value,
        engine_version=capacity.engine_version,
        max_model_len=capacity.max_model_len,
        kv_cache_dtype=capacity.kv_cache_dtype,
        tensor_parallel_size=capacity.parallel.tensor_parallel_size,
        pipeline_parallel_size=capacity.parallel.pipeline_parallel_size,
        data_parallel_size=capacity.parallel.data_parallel_size,
        kv_bytes_per_token=capacity.kv_bytes_per_token,
        kv_bytes_per_sequence=capacity.kv_bytes_per_sequence,
        kv_pool_bytes=capacity.kv_pool_bytes,
        num_gpu_blocks=capacity.num_gpu_blocks,
        kv_cache_tokens=capacity.kv_cache_tokens,
        max_concurrency=capacity.max_concurrency,
        max_num_seqs=capacity.max_num_seqs,
        total_max_num_seqs=capacity.total_max_num_seqs,
        peak_concurrency=peak_concurrency,
        replicas_for_peak_concurrency=(
            None if peak_concurrency is None else capacity.replicas_for(peak_concurrency)
        ),
        fits=capacity.fits,
        reason=capacity.reason,
        catalog_version=catalog_version,
    )


def capacity_detail(
    capacity: Capacity,
    model: str,
    gpu: Gpu,
    catalog_version: int,
    *,
    with_explanation: bool,
    peak_concurrency: int | None = None,
) -> CapacityDetail:
    base = capacity_answer(capacity, model, gpu, catalog_version, peak_concurrency)
    return CapacityDetail(
        **base.model_dump(),
        warnings=list(capacity.warnings),
        engine_settings=dict(capacity.engine_settings),
        engine_log=list(capacity.report.log_lines),
        explanation=explain(capacity) if with_explanation else None,
    )


def candidate_gpus(refs: Sequence[GpuRef] | None, catalog: CatalogSnapshot) -> list[Gpu]:
    """The GPUs a plan searches: those named (slugs or inline), or the whole catalog."""
    if refs is None:
        return [entry.gpu for entry in catalog.gpus.values()]
    return [resolve_gpu(ref, catalog) for ref in refs]


def plan_for(
    *, arch: ModelArchitecture, gpus: Sequence[Gpu], fields: PlanRequestBody | PlanQuery
) -> Plan:
    """The three sizing questions and their options, as POST and GET /v1/plans ask them."""
    request = PlanRequest(
        max_model_len=fields.max_model_len,
        peak_concurrency=fields.peak_concurrency,
        kv_cache_dtype=fields.kv_cache_dtype,
        engine=engine_options(fields),
        max_gpus_per_node=fields.max_gpus_per_node,
        headroom_fraction=fields.headroom_fraction,
        avg_context_tokens=fields.avg_context_tokens,
        max_replicas=fields.max_replicas,
        max_alternatives=fields.max_alternatives,
    )
    Workload(fields.max_model_len, fields.kv_cache_dtype)  # validates the dtype before the search
    return plan(arch, gpus, request)


def _option_out(option: PlanOption) -> PlanOptionOut:
    capacity = option.capacity
    return PlanOptionOut(
        gpu=option.gpu.slug,
        gpu_name=option.gpu.name,
        tensor_parallel_size=option.tensor_parallel_size,
        replicas=option.replicas,
        total_gpus=option.total_gpus,
        max_num_seqs=option.max_num_seqs,
        sequences_per_replica=option.sequences_per_replica,
        headroom_fraction=option.headroom_fraction,
        headroom_bytes=option.headroom_bytes,
        headroom_tokens=option.headroom_tokens,
        kv_pool_bytes=capacity.kv_pool_bytes,
        kv_cache_tokens=capacity.kv_cache_tokens,
        num_gpu_blocks=capacity.num_gpu_blocks,
        max_concurrency=capacity.max_concurrency,
        cost_per_hour_usd=option.cost_per_hour_usd,
        engine_flags={name: " ".join(flags) for name, flags in option.engine_flags.items()},
        warnings=list(option.warnings),
    )


def plan_answer(
    result: Plan, model: str, catalog_version: int, with_explanation: bool
) -> PlanAnswer:
    request = result.request
    best = result.recommendation
    explanation: dict[str, Any] | None = None
    if with_explanation and best is not None:
        explanation = explain(best.capacity)
        explanation["replicas"] = {
            "replicas": best.replicas,
            "rule": "fewest replicas whose usable blocks, less the headroom asked for, hold "
            "peak_concurrency sequences (at avg_context_tokens when given)",
            "headroom_fraction": best.headroom_fraction,
        }
    return PlanAnswer(
        model=model,
        max_model_len=request.max_model_len,
        peak_concurrency=request.peak_concurrency,
        kv_cache_dtype=request.kv_cache_dtype,
        engine=request.engine.engine.value,
        recommendation=_option_out(best) if best is not None else None,
        alternatives=[_option_out(o) for o in result.alternatives],
        rejected=[
            RejectedOut(
                gpu=r.gpu.slug,
                tensor_parallel_size=r.tensor_parallel_size,
                code=r.code,
                reason=r.reason,
            )
            for r in result.rejected
        ],
        warnings=list(result.warnings),
        explanation=explanation,
        catalog_version=catalog_version,
    )
