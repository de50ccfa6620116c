"""The planning use cases: one capacity question and one plan question, each answered whole.

GET and POST /v1/capacity and `kvplan capacity` call `capacity`; GET and POST /v1/plans and
`kvplan plan` call `plan`; a table of plan questions (POST /v1/plans with a CSV body) calls
`plan_scenarios`, which answers each row with `plan`. The routers around them only negotiate,
cache and render; no HTTP here.
"""

from __future__ import annotations

import dataclasses
import difflib
import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import ValidationError

from ..catalog import names
from ..catalog.snapshot import CALLERS_PRICE, CalibrationKey, CatalogSnapshot
from ..kit.engine_flags import kvplan_name, with_kvplan_names
from ..kit.errors import (
    InvalidRequest,
    NotFound,
    Problem,
    SequenceDoesNotFit,
    WeightsDoNotFit,
)
from ..kit.metrics import Metrics
from ..sizing import (
    MAX_CONTEXT_TOKENS,
    PIPELINE_NOTE,
    BatchSpeed,
    Capacity,
    Engine,
    EngineOptions,
    ExpertParallel,
    Gpu,
    LatencyTargets,
    ModelArchitecture,
    NoEstimate,
    Paced,
    Parallelism,
    PerformanceEstimate,
    Plan,
    PlanOption,
    PlanRequest,
    Replicas,
    SglangParallel,
    SizingError,
    Speculation,
    SpeculativeConfig,
    Speed,
    SpeedQuestion,
    WeightFormat,
    Workload,
    architecture_from_dict,
    architecture_from_hf_config,
    as_plain,
    batch_curve,
    batch_sizes,
    capacity_speed,
    compute_capacity,
    config_assumptions,
    explain,
    frozen,
    max_model_len_limit,
    pace,
    parse_engine_version,
    parse_kv_cache_dtype,
    parse_speculative_config,
    performance_steps,
    replica_speed,
    served_model,
    sglang_speculative_config,
    target_steps,
    with_expert_layout,
    with_given_pool,
    with_hf_quant_config,
)
from ..sizing import plan as search_plans
from . import calibrated
from .schemas import (
    MAX_SCENARIOS,
    SCENARIO_FACTS,
    SCENARIO_LABEL,
    CalibratedFrom,
    CapacityAnswer,
    CapacityDetail,
    CapacityFields,
    CapacityQuery,
    CapacityRequest,
    EngineFields,
    GpuRef,
    HfConfigModel,
    InlineGpu,
    InlineModel,
    ModelRef,
    PlanAnswer,
    PlanFields,
    PlanOptionOut,
    PlanQuery,
    PlanRequestBody,
    RejectedOut,
    SpeedCalibratedFrom,
    plan_body_from_row,
)


@frozen
class CapacityQuestion:
    """One deployment to size, however it was asked (GET or POST /v1/capacity, the CLI)."""

    model: ModelRef
    gpu: GpuRef | None
    fields: CapacityFields
    gpu_memory_bytes: int | None = None
    explain: bool = False
    # A stored calibration with the question's key replaces kvplan's non-KV estimate
    # (calibrated.py); False answers with kvplan's own arithmetic (POST /v1/engine-logs).
    calibrations: bool = True
    # The calibration the caller names (a deployment profile's `calibration_id`).
    calibration_id: int | None = None
    # The newest release kvplan models, for a question pinned to an older one (a deployment
    # profile's): its answer warns when that release would answer otherwise.
    newest_release: str | None = None

    @classmethod
    def from_query(cls, query: CapacityQuery) -> CapacityQuestion:
        return cls(query.model, query.gpu, query, gpu_memory_bytes=query.gpu_memory_bytes)

    @classmethod
    def from_body(cls, body: CapacityRequest) -> CapacityQuestion:
        return cls(body.model, body.gpu, body, explain=body.explain)


@dataclass(frozen=True, slots=True)
class PlanQuestion:
    """The three sizing questions and the search options, however they were asked."""

    model: ModelRef
    gpus: Sequence[GpuRef] | None
    fields: PlanFields
    explain: bool = False

    @classmethod
    def from_query(cls, query: PlanQuery) -> PlanQuestion:
        slugs = [s.strip() for s in (query.gpus or "").split(",") if s.strip()]
        return cls(query.model, slugs or None, query, explain=query.explain)

    @classmethod
    def from_body(cls, body: PlanRequestBody) -> PlanQuestion:
        return cls(body.model, body.gpus, body, explain=body.explain)


AnswerT = TypeVar("AnswerT", bound=CapacityAnswer)


@frozen
class _Sized:
    """A capacity question worked out: what its detail and GET's leaner answer are made of."""

    result: Capacity
    model: str  # the model's label in the answer
    gpu: Gpu
    speed: Speed
    peak_concurrency: int | None
    calibrated_from: CalibratedFrom | None
    # For a GPU given by bytes alone: the catalog slug it is (or None) and the note saying so.
    recognised: tuple[str | None, str] | None
    speed_calibrated_from: SpeedCalibratedFrom | None = None


def _size(question: CapacityQuestion, catalog: CatalogSnapshot) -> _Sized:
    """One model on one GPU type with one layout: the pool, the blocks, max_num_seqs, speed."""
    label, arch = _resolve_model(question.model, catalog)
    gpu = _resolve_gpu(question.gpu, catalog, memory_bytes=question.gpu_memory_bytes)
    recognised = _recognised_gpu(question.gpu, gpu, catalog)
    fields = question.fields
    max_model_len = _default_context(arch, fields.max_model_len, fields.engine)
    workload = Workload(max_model_len, parse_kv_cache_dtype(fields.kv_cache_dtype))
    parallel = Parallelism(
        fields.tensor_parallel_size, fields.pipeline_parallel_size, fields.data_parallel_size
    )
    options = engine_options(fields, catalog)
    result = compute_capacity(arch, gpu, workload, parallel, options)
    hook = calibrated.CalibrationHook(
        catalog,
        calibrated.model_key(question.model, label),
        arch,
        fields.weight_format,
        question.calibration_id,
    )
    if question.calibrations and fields.kv_pool_bytes is None:
        pool = hook(result, gpu)
        if pool is not None:
            result = with_given_pool(
                result, pool, arch=arch, gpu=gpu, workload=workload, options=options
            )
    # Once per answer: GET keeps the encoded answer, estimate included. The weights are read
    # at the dtype the engine runs (a float32 checkpoint at 16 bits under dtype=auto).
    served, _ = served_model(arch, gpu, options)
    speed = capacity_speed(
        served,
        gpu,
        result,
        weight_format=options.weight_format,
        peak_concurrency=fields.peak_concurrency,
        prompt_tokens=fields.avg_prompt_tokens,
        speculation=_speculation(fields.acceptance_length, options),
    )
    speed_from = None
    if question.calibrations and isinstance(speed, PerformanceEstimate):
        measured = calibrated.speed_calibration(
            catalog,
            model=hook.model,
            arch=arch,
            weight_format=fields.weight_format,
            capacity=result,
            gpu=gpu,
        )
        if measured is not None:
            speed = calibrated.scaled_speed(speed, measured.step_time_scale)
            speed_from = calibrated.speed_calibrated_from(measured)
    return _Sized(
        result,
        label,
        gpu,
        speed,
        fields.peak_concurrency,
        hook.calibrated_from(result, gpu),
        recognised,
        speed_from,
    )


@frozen
class SizedDeployment:
    """A capacity question worked out for what runs it: the model as served (weights at
    --dtype), the GPU, the capacity and the weights' format (the traffic simulator's input)."""

    arch: ModelArchitecture
    gpu: Gpu
    capacity: Capacity
    weight_format: WeightFormat | None
    detail: CapacityDetail


def sized_deployment(question: CapacityQuestion, catalog: CatalogSnapshot) -> SizedDeployment:
    """One deployment sized as `capacity` sizes it, with what the simulator needs beside the
    answer (POST /v1/simulations, `kvplan simulate`)."""
    sized = _size(question, catalog)
    options = engine_options(question.fields)
    served, _ = served_model(_resolve_model(question.model, catalog)[1], sized.gpu, options)
    detail = _capacity_detail(
        sized, catalog.version, with_explanation=False, notes=_notes(question.model)
    )
    return SizedDeployment(served, sized.gpu, sized.result, options.weight_format, detail)


def capacity(question: CapacityQuestion, catalog: CatalogSnapshot) -> CapacityDetail:
    """One model on one GPU type with one layout, with the warnings, the engine's settings and
    log lines, and the explanation when asked (POST /v1/capacity, the CLI, the profiles)."""
    sized = _size(question, catalog)
    newer = _newer_release_warnings(question, sized, catalog)
    return _capacity_detail(
        sized,
        catalog.version,
        with_explanation=question.explain,
        notes=_notes(question.model),
        also=newer,
    )


def _notes(ref: ModelRef) -> tuple[str, ...]:
    """What was assumed for keys a config.json leaves out, and whether an hf_quant_config.json
    given beside it was read (a slug or inline model: nothing)."""
    if not isinstance(ref, HfConfigModel):
        return ()
    config, note = _read_config(ref)
    return (*config_assumptions(config), *((note,) if note else ()))


def _read_config(ref: HfConfigModel) -> tuple[dict[str, Any], str | None]:
    """config.json as vLLM reads it with the hf_quant_config.json given beside it (if any)."""
    if ref.hf_quant_config is None:
        return ref.hf_config, None
    try:
        return with_hf_quant_config(ref.hf_config, ref.hf_quant_config)
    except SizingError as exc:
        raise _prefixed(exc, "model") from exc


def _newer_release_warnings(
    question: CapacityQuestion, sized: _Sized, catalog: CatalogSnapshot
) -> list[str]:
    """For a question pinned to a release older than the newest modelled one: what the newest
    would answer, where its max_num_seqs or pool differ (both numbers). A calibrated answer is
    the pinned release's own measurement: no other release's estimate is set against it."""
    newest, pinned = question.newest_release, question.fields.engine_version
    if newest is None or pinned is None or sized.calibrated_from is not None:
        return []
    engine = question.fields.engine
    if parse_engine_version(pinned) >= parse_engine_version(newest):
        return []
    fields = question.fields.model_copy(update={"engine_version": newest})
    try:
        newer = dataclasses.replace(
            question, fields=fields, newest_release=None, calibrations=False, calibration_id=None
        )
        then = _size(newer, catalog)
    except SizingError as exc:
        return [
            f"engine_version: {engine} {newest}, the newest release kvplan models, refuses this "
            f"question ({exc.field}: {exc.reason}); it is sized as the pinned {pinned}"
        ]
    now, later = sized.result, then.result
    if (now.max_num_seqs, now.kv_pool_bytes) == (later.max_num_seqs, later.kv_pool_bytes):
        return []
    return [
        f"engine_version: sized as {engine} {pinned}, the release this question is pinned to; "
        f"{newest}, the newest release kvplan models, would answer max_num_seqs "
        f"{later.max_num_seqs} (pinned: {now.max_num_seqs}) and kv_pool_bytes "
        f"{later.kv_pool_bytes:,} (pinned: {now.kv_pool_bytes:,}): set engine_version to "
        f"{newest} to size it as that release"
    ]


def capacity_answer(question: CapacityQuestion, catalog: CatalogSnapshot) -> CapacityAnswer:
    """GET /v1/capacity's answer: the numbers and warnings of `capacity`, without the settings,
    log lines and explanation its answer leaves out (an autoscaler asks this many times a
    minute; a question not asked before is built in full every time)."""
    sized = _size(question, catalog)
    return CapacityAnswer(**_answer_fields(sized, catalog.version), warnings=_warnings(sized))


@dataclass(frozen=True, slots=True)
class SpeedCurve:
    """A capacity answer, and its replica's decode at batches from 1 up to what memory holds."""

    detail: CapacityDetail
    points: tuple[BatchSpeed, ...]
    unavailable: str | None  # why there is no curve
    max_tpot_ms: float | None = None
    # The largest batch whose decode step meets max_tpot_ms (0: not even one sequence).
    within_target: int | None = None


def speed_by_batch(
    question: CapacityQuestion, catalog: CatalogSnapshot, max_tpot_ms: float | None = None
) -> SpeedCurve:
    """The capacity question's decode time and throughput against the batch, each sequence at
    max_model_len, up to the running batch (max_num_seqs, or the engine's cap where lower)."""
    targets = LatencyTargets(max_tpot_ms=max_tpot_ms)
    detail = capacity(question, catalog)
    _, arch = _resolve_model(question.model, catalog)
    gpu = _resolve_gpu(question.gpu, catalog, memory_bytes=question.gpu_memory_bytes)
    cap = detail.engine_settings.get("max_num_seqs")
    limit = min(detail.max_num_seqs, cap) if isinstance(cap, int) else detail.max_num_seqs
    if not detail.fits or limit < 1:
        return SpeedCurve(detail, (), detail.reason or "the layout holds no sequence", max_tpot_ms)
    options = engine_options(question.fields, catalog)
    speed = SpeedQuestion(
        tensor_parallel_size=detail.tensor_parallel_size,
        batch=limit,
        context_tokens=detail.max_model_len,
        prompt_tokens=detail.max_model_len,
        kv_cache_dtype=parse_kv_cache_dtype(detail.kv_cache_dtype),
        weight_format=options.weight_format,
    )
    speed = with_expert_layout(speed, arch, _size(question, catalog).result)
    arch, _ = served_model(arch, gpu, options)  # weights at --dtype
    points = batch_curve(arch, gpu, speed, batch_sizes(limit))
    if isinstance(points, NoEstimate):
        return SpeedCurve(detail, (), points.reason, max_tpot_ms)
    within = None
    if targets.given:
        paced = pace(arch, gpu, speed, targets)
        within = paced.batch if isinstance(paced, Paced) else 0
    return SpeedCurve(detail, points, None, max_tpot_ms, within)


@dataclass(frozen=True, slots=True)
class RunEstimate:
    """A capacity answer, kvplan's own estimate at a run's shape (no speed calibration on it),
    and the calibration key of the deployment (None for an inline model)."""

    detail: CapacityDetail
    speed: Speed
    key: CalibrationKey | None


def speed_at(
    question: CapacityQuestion,
    catalog: CatalogSnapshot,
    *,
    batch: int,
    context_tokens: int,
    prompt_tokens: int,
) -> RunEstimate:
    """The capacity question's replica at `batch` sequences of `context_tokens` each, and the
    prefill of one `prompt_tokens` prompt (a benchmark run's own shape: POST
    /v1/speed-results). The weights are read at --dtype, as for a capacity answer."""
    detail = capacity(question, catalog)
    sized = _size(question, catalog)
    _, arch = _resolve_model(question.model, catalog)
    options = engine_options(question.fields)
    served, _ = served_model(arch, sized.gpu, options)
    speed = SpeedQuestion(
        tensor_parallel_size=detail.tensor_parallel_size,
        batch=batch,
        context_tokens=context_tokens,
        prompt_tokens=prompt_tokens,
        kv_cache_dtype=parse_kv_cache_dtype(detail.kv_cache_dtype),
        weight_format=options.weight_format,
        pipeline_parallel_size=detail.pipeline_parallel_size,
    )
    speed = with_expert_layout(speed, arch, sized.result)
    model_key = calibrated.model_key(question.model, sized.model)
    key = None
    if model_key is not None:
        weights = calibrated.weight_format_of(question.fields.weight_format, arch)
        gpu_key = calibrated.gpu_key(sized.gpu, catalog)
        key = calibrated.key_of(model_key, gpu_key, sized.result, weights)
    return RunEstimate(detail, replica_speed(served, sized.gpu, speed), key)


def weight_format(question: CapacityQuestion, catalog: CatalogSnapshot) -> str:
    """The weights' format a capacity question is for, as its calibration key names it."""
    _, arch = _resolve_model(question.model, catalog)
    return calibrated.weight_format_of(question.fields.weight_format, arch)


def require_fit(detail: AnswerT) -> AnswerT:
    """The answer if the layout holds a sequence; else the 422 an autoscaler can tell apart.

    A caller that acts on one number (an autoscaler, a sheet) must never read the 0 a layout
    that does not fit computes. The codes are the planner's rejection codes
    (`sizing.planning.planner._option`): no pool at all, or a pool too small for one sequence.
    """
    if detail.fits:
        return detail
    reason = detail.reason or "does not fit"
    problem: Problem
    if detail.kv_pool_bytes <= 0:
        problem = WeightsDoNotFit(reason, field="gpu")
    else:
        problem = SequenceDoesNotFit(reason, field="max_model_len")
    raise problem


def plan(
    question: PlanQuestion, catalog: CatalogSnapshot, metrics: Metrics | None = None
) -> PlanAnswer:
    """The cheapest feasible plan; each one asked is counted by outcome when `metrics` is given.
    A body with a workload is a plan for a rate (rate.py)."""
    from . import rate  # noqa: PLC0415 (rate.py builds on this module's steps)

    rate.check(question.fields)
    if question.fields.workload is not None:
        return rate.plan_for_rate(question, catalog, metrics)
    try:
        label, arch = _resolve_model(question.model, catalog)
        gpus = _candidate_gpus(question.gpus, catalog)
        hook = calibrated.CalibrationHook(
            catalog,
            calibrated.model_key(question.model, label),
            arch,
            question.fields.weight_format,
        )
        # The caller's pool wins; a hook that can match nothing is left out.
        given = question.fields.kv_pool_bytes is not None
        pool = None if given or not hook.may_match else hook
        # Speed calibrations check each candidate's latency targets at its measured decode
        # step, as capacity answers scale theirs (calibrated.scaled_speed).
        speed = hook.speed_scale if hook.may_match_speed else None
        result = search_plans(arch, gpus, _plan_request(question.fields, catalog), pool, speed)
    except SizingError:
        if metrics is not None:
            metrics.plans.labels("invalid").inc()
        raise
    if metrics is not None:
        metrics.plans.labels("feasible" if result.recommendation else "infeasible").inc()
    # The answer echoes the cache dtype as asked (an alias stays the alias, as it always has).
    answer = _plan_answer(result, label, catalog.version, question.explain, hook)
    answer.kv_cache_dtype = question.fields.kv_cache_dtype
    answer.warnings[:0] = [*_notes(question.model), *_gpu_notes(question.gpus, catalog)]
    return answer


def _prefixed(exc: SizingError, prefix: str) -> SizingError:
    return type(exc)(f"{prefix}.{exc.field}", exc.reason)


def _resolve_model(ref: ModelRef, catalog: CatalogSnapshot) -> tuple[str, ModelArchitecture]:
    """A slug from the catalog, an inline architecture, or a config.json: (label, architecture)."""
    if isinstance(ref, str):
        entry = catalog.model(ref)
        return entry.slug, entry.architecture
    if isinstance(ref, InlineModel):
        try:
            return "inline", architecture_from_dict(ref.model_dump(exclude_none=True))
        except SizingError as exc:
            raise _prefixed(exc, "model") from exc
    config, _ = _read_config(ref)  # a bad hf_quant_config.json is refused as model.hf_quant_config
    try:
        arch = architecture_from_hf_config(
            config, num_parameters=ref.num_parameters, weight_bytes=ref.weight_bytes
        )
    except SizingError as exc:
        raise _prefixed(exc, "model.hf_config") from exc
    return str(ref.hf_config.get("_name_or_path") or "hf_config"), arch


def _resolve_gpu(
    ref: GpuRef | None, catalog: CatalogSnapshot, *, memory_bytes: int | None = None
) -> Gpu:
    """A catalog slug or an inline GPU; GET /v1/capacity may give the memory alone instead."""
    if isinstance(ref, str):
        gpu = catalog.gpu(ref).gpu
        if memory_bytes is not None:
            raise SizingError("gpu_memory_bytes", "give either gpu or gpu_memory_bytes, not both")
        return gpu
    if ref is None:
        if memory_bytes is None:
            raise SizingError("gpu", "give a GPU slug or gpu_memory_bytes")
        ref = InlineGpu(memory_bytes=_a_runtime_total(memory_bytes, "gpu_memory_bytes"))
    else:
        _a_runtime_total(ref.memory_bytes, "gpu.memory_bytes")
    # An unnamed GPU takes the name of the catalog GPU its bytes are, so the engine defaults
    # that read the device name (vLLM's batch tiers keep an A100 small) are that GPU's.
    known = None if ref.name else catalog.gpu_by_memory(ref.memory_bytes)
    # Its speed figures are only what it gives: boards of one memory total differ in speed.
    return Gpu(
        memory_bytes=ref.memory_bytes,
        name=known.name if known is not None else ref.name,
        slug=ref.name or f"{ref.memory_bytes}B",
        price_usd_per_hour=ref.price_usd_per_hour,
        max_gpus_per_node=ref.max_gpus_per_node,
        memory_bandwidth_tb_s=ref.memory_bandwidth_tb_s,
        dense_bf16_tflops=ref.dense_bf16_tflops,
        dense_fp8_tflops=ref.dense_fp8_tflops,
        dense_fp4_tflops=ref.dense_fp4_tflops,
        interconnect_gb_s=ref.interconnect_gb_s,
        bf16_support=ref.bf16_support,
        fully_connected=ref.fully_connected,
        price_origin=None if ref.price_usd_per_hour is None else CALLERS_PRICE,
    )


def _a_runtime_total(memory_bytes: int, field: str) -> int:
    """A GPU's total memory in bytes: under 1 GiB is a number in other units (80 meant as
    80 GB), refused rather than sized as a GPU with no room for its weights."""
    if memory_bytes < 2**30:
        raise SizingError(
            field,
            f"{memory_bytes:,} B is under 1 GiB: give the total in bytes as the CUDA runtime "
            f"reports it (did you mean {memory_bytes:,} GB = {memory_bytes * 10**9} bytes?)",
        )
    return memory_bytes


# Flags only one engine reads: naming one for another engine is a mistake, not a no-op.
_ONE_ENGINE_FLAGS = (
    ("gpu_memory_utilization", Engine.VLLM),
    ("mem_fraction_static", Engine.SGLANG),
    ("free_gpu_memory_fraction", Engine.TRTLLM),
    ("swa_full_tokens_ratio", Engine.SGLANG),
    ("mamba_full_memory_ratio", Engine.SGLANG),
    ("max_mamba_cache_size", Engine.SGLANG),
    ("max_attention_window", Engine.TRTLLM),
    ("engine_rules_version", Engine.VLLM),
    # issue 21: speculative decoding, as each engine spells it
    ("speculative_config", Engine.VLLM),
    ("speculative_algorithm", Engine.SGLANG),
    ("speculative_draft_model_path", Engine.SGLANG),
    ("speculative_num_steps", Engine.SGLANG),
    ("speculative_eagle_topk", Engine.SGLANG),
    ("speculative_num_draft_tokens", Engine.SGLANG),
    ("limit_mm_per_prompt", Engine.VLLM),  # issue 21: multimodal encoders
    # issue 21: LoRA, each engine's own flags (max_lora_rank is both engines')
    ("max_loras", Engine.VLLM),
    ("lora_dtype", Engine.VLLM),
    ("max_cpu_loras", Engine.VLLM),
    ("max_loras_per_batch", Engine.SGLANG),
    ("lora_target_modules", Engine.SGLANG),
    # switches: given when true (false is every engine's default)
    ("skip_mm_profiling", Engine.VLLM),
    ("disable_custom_all_reduce", Engine.VLLM),
    ("fully_sharded_loras", Engine.VLLM),
)


# EngineOptions fields that hold one role's small dataclass, built from the request's fields
# of the same names (issue 21).
_NESTED_OPTIONS: dict[str, type[Any]] = {
    "expert_parallel": ExpertParallel,
    "sglang_parallel": SglangParallel,
}
_ENGINE_OPTIONS = tuple(
    f.name for f in dataclasses.fields(EngineOptions) if f.name not in _NESTED_OPTIONS
)
_ENGINE_VALUES = operator.attrgetter(*_ENGINE_OPTIONS)  # one C call for the twenty fields
_ENGINE_AT = _ENGINE_OPTIONS.index("engine")
_WINDOW_AT = _ENGINE_OPTIONS.index("max_attention_window")
# Each role's field names, once (a question read them with dataclasses.fields before), and one
# C call for its values: the role is then interned by the values alone.
_NESTED_VALUES = tuple(
    (name, operator.attrgetter(*(f.name for f in dataclasses.fields(role))))
    for name, role in _NESTED_OPTIONS.items()
)


def _nested_options(fields: EngineFields) -> tuple[tuple[str, Any], ...]:
    """Each role's dataclass, from the request's fields of its fields' names."""
    return tuple((name, _interned_role(name, values(fields))) for name, values in _NESTED_VALUES)


@lru_cache(maxsize=512)
def _interned_role(name: str, values: tuple[Any, ...]) -> Any:
    return _NESTED_OPTIONS[name](*values)


_SPECULATIVE_AT = _ENGINE_OPTIONS.index("speculative_config")
_ONE_ENGINE_VALUES = operator.attrgetter(*(name for name, _ in _ONE_ENGINE_FLAGS))


def _speculation(acceptance_length: float | None, options: EngineOptions) -> Speculation | None:
    """The speculative decoding the speed is timed with: vLLM's --speculative-config and the
    acceptance length the caller measured (no speed-up is claimed without one)."""
    if acceptance_length is None:
        return None
    if options.engine is not Engine.VLLM:
        raise SizingError("acceptance_length", f"applies to engine=vllm, not {options.engine}")
    spec = options.speculative_config
    if spec is None:
        raise SizingError("acceptance_length", "applies with speculative_config")
    return Speculation(spec.num_speculative_tokens, acceptance_length)


def engine_options(fields: EngineFields, catalog: CatalogSnapshot | None = None) -> EngineOptions:
    """The request's engine flags as the sizing core takes them: every field copied by name
    (`speculative_config` read into its dataclass, its draft model resolved in `catalog`)."""
    engine = Engine(fields.engine)
    for (name, applies), value in zip(_ONE_ENGINE_FLAGS, _ONE_ENGINE_VALUES(fields), strict=True):
        if value is not None and value is not False and engine is not applies:
            raise SizingError(name, f"applies to engine={applies.value}, not {engine.value}")
    values = list(_ENGINE_VALUES(fields))
    window = values[_WINDOW_AT]
    values[_ENGINE_AT] = engine
    values[_WINDOW_AT] = None if window is None else tuple(window)
    spec = values[_SPECULATIVE_AT]
    if spec is not None:
        values[_SPECULATIVE_AT] = speculative_config(spec, catalog)
    elif fields.speculative_algorithm is not None:
        values[_SPECULATIVE_AT] = _sglang_speculative(fields, catalog)
    elif fields.speculative_draft_model_path is not None:
        raise SizingError("speculative_draft_model_path", "applies with speculative_algorithm")
    return _interned_options(tuple(values), _nested_options(fields))


def _sglang_speculative(fields: EngineFields, catalog: CatalogSnapshot | None) -> SpeculativeConfig:
    """SGLang's --speculative-* flags as the config the sizing core takes (issue 21)."""
    assert fields.speculative_algorithm is not None
    path = fields.speculative_draft_model_path
    config = sglang_speculative_config(
        fields.speculative_algorithm, path, fields.speculative_num_draft_tokens
    )
    if path is None:
        return config
    if catalog is None:
        raise SizingError("speculative_draft_model_path", "a draft model needs the catalog")
    try:
        _, draft = _resolve_model(path, catalog)
    except NotFound as exc:
        raise SizingError(
            "speculative_draft_model_path", f"no draft model {path!r} in the catalog"
        ) from exc
    return dataclasses.replace(config, draft=draft)


def speculative_config(
    value: Mapping[str, Any], catalog: CatalogSnapshot | None
) -> SpeculativeConfig:
    """vLLM's --speculative-config object, its draft model (eagle, eagle3, draft_model) read
    as a model is anywhere: a catalog slug, an inline model or {hf_config} (issue 21)."""
    model = value.get("model")
    config = parse_speculative_config(
        {**value, "model": None} if isinstance(model, Mapping) else value
    )
    if model is None:
        return config
    try:
        ref: ModelRef = (
            model
            if isinstance(model, str)
            else (HfConfigModel if "hf_config" in model else InlineModel).model_validate(model)
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise SizingError(f"speculative_config.model.{where}", first["msg"]) from None
    if catalog is None:
        raise SizingError("speculative_config.model", "a draft model needs the catalog")
    try:
        label, draft = _resolve_model(ref, catalog)
    except SizingError as exc:
        raise _prefixed(exc, "speculative_config") from exc
    except NotFound as exc:
        raise SizingError(
            "speculative_config.model",
            f"no draft model {model!r} in the catalog: give a catalog slug, or on POST the "
            "draft inline or as {hf_config: ...}",
        ) from exc
    return dataclasses.replace(parse_speculative_config({**value, "model": label}), draft=draft)


# One EngineOptions per set of flags: building one sets 20 frozen fields, and the sizing core's
# memos keyed by it compare a shared one by identity instead of field by field.
@lru_cache(maxsize=512)
def _interned_options(
    values: tuple[Any, ...], nested: tuple[tuple[str, Any], ...] = ()
) -> EngineOptions:
    return EngineOptions(**dict(zip(_ENGINE_OPTIONS, values, strict=True)), **dict(nested))


def _default_context(
    arch: ModelArchitecture, max_model_len: int | None, engine: str = "vllm"
) -> int:
    if max_model_len is not None:
        return max_model_len
    # the engine's default: the length it derives from the model (sizing/model/context_limit.py)
    limit = max_model_len_limit(arch, Engine(engine))
    if limit is None:
        raise SizingError("max_model_len", "the model has no max_position_embeddings: give one")
    if limit > MAX_CONTEXT_TOKENS:
        # MiniMax-M1: max_position_embeddings 10,240,000, which the engine would take.
        raise SizingError(
            "max_model_len",
            f"the model's own length, {limit} tokens, is the engine's default but beyond the "
            f"{MAX_CONTEXT_TOKENS} kvplan sizes: give max_model_len",
        )
    return limit


def _capacity_detail(
    sized: _Sized,
    catalog_version: int,
    *,
    with_explanation: bool,
    notes: tuple[str, ...] = (),
    also: Sequence[str] = (),
) -> CapacityDetail:
    capacity, speed = sized.result, sized.speed
    explanation = None
    if with_explanation:
        steps = None
        if isinstance(speed, PerformanceEstimate):
            steps = performance_steps(speed, context_tokens=capacity.max_model_len)
        explanation = as_plain(explain(capacity, steps))
    tiers = (
        None
        if capacity.kv_tiers is None
        else [dataclasses.asdict(tier) for tier in capacity.kv_tiers.tiers]
    )
    if explanation is not None and tiers is not None:
        explanation["kv_tiers"] = tiers  # issue 21: the tier table, beside the budget
    return CapacityDetail(
        **_answer_fields(sized, catalog_version),
        warnings=[*notes, *_warnings(sized), *also],
        engine_settings=dict(capacity.engine_settings),
        engine_log=list(capacity.report.log_lines),
        explanation=explanation,
        kv_tiers=tiers,
    )


def _tier_fields(capacity: Capacity) -> dict[str, Any]:
    """The answer's host tier and host memory (issue 21: KV tiers beyond HBM); none without."""
    tiers = capacity.kv_tiers
    if tiers is None:
        return {}
    fields: dict[str, Any] = {"host_memory_bytes_per_replica": tiers.host_memory_bytes_per_replica}
    for row in tiers.tiers[1:]:  # the host row, and LMCache's disk row
        fields |= {
            f"{row.tier}_kv_cache_bytes": row.bytes,
            f"{row.tier}_kv_cache_blocks": row.blocks,
            f"{row.tier}_kv_cache_tokens": row.tokens,
            f"{row.tier}_max_num_seqs": row.sequences,
        }
    return fields


def _warnings(sized: _Sized) -> list[str]:
    """A capacity answer's warnings, the detail's and GET's alike: the GPU recognised by its
    bytes, the arithmetic's (an engine release newer than kvplan models, a context past the
    model's positions, ...), and the speed figures'."""
    capacity = sized.result
    return [
        *([] if sized.recognised is None else [sized.recognised[1]]),
        *capacity.warnings,
        *_speed_warnings(capacity, sized.speed),
    ]


def _answer_fields(sized: _Sized, catalog_version: int) -> dict[str, Any]:
    """The CapacityAnswer fields, which the detail shares."""
    capacity, gpu, peak_concurrency = sized.result, sized.gpu, sized.peak_concurrency
    estimate = sized.speed if isinstance(sized.speed, PerformanceEstimate) else None
    return {
        "model": sized.model,
        "gpu": gpu.slug,
        "gpu_memory_bytes": gpu.memory_bytes,
        "gpu_recognised_as": None if sized.recognised is None else sized.recognised[0],
        "engine": capacity.engine.value,
        "engine_version": capacity.engine_version,
        "max_model_len": capacity.max_model_len,
        "kv_cache_dtype": capacity.kv_cache_dtype,
        "tensor_parallel_size": capacity.parallel.tensor_parallel_size,
        "pipeline_parallel_size": capacity.parallel.pipeline_parallel_size,
        "data_parallel_size": capacity.parallel.data_parallel_size,
        "kv_bytes_per_token": capacity.kv_bytes_per_token,
        "kv_bytes_per_sequence": capacity.kv_bytes_per_sequence,
        "kv_pool_bytes": capacity.kv_pool_bytes,
        "num_gpu_blocks": capacity.num_gpu_blocks,
        "kv_cache_tokens": capacity.kv_cache_tokens,
        "max_concurrency": capacity.max_concurrency,
        "max_num_seqs": capacity.max_num_seqs,
        "total_max_num_seqs": capacity.total_max_num_seqs,
        "kv_cache_tokens_total": capacity.kv_cache_tokens_total,
        "max_concurrency_total": capacity.max_concurrency_total,
        "peak_concurrency": peak_concurrency,
        "replicas_for_peak_concurrency": (
            None if peak_concurrency is None else capacity.replicas_for(peak_concurrency)
        ),
        **speed_fields(estimate),
        **_tier_fields(capacity),
        "fits": capacity.fits,
        "reason": capacity.reason,
        "catalog_version": catalog_version,
        "calibrated_from": sized.calibrated_from,
        "speed_calibrated_from": sized.speed_calibrated_from,
    }


def speed_fields(estimate: PerformanceEstimate | None) -> dict[str, Any]:
    """A capacity answer's speed figures, rounded as the answers show them (null without)."""
    if estimate is None:
        return {}
    peak = estimate.decode_ms_per_token_at_peak
    return {
        "decode_ms_per_token": round(estimate.decode_ms_per_token, 3),
        "decode_ms_per_token_at_peak": None if peak is None else round(peak, 3),
        "output_tokens_per_second": round(estimate.output_tokens_per_second, 1),
        "prefill_ms": round(estimate.prefill_ms, 3),
        "performance_bound": estimate.performance_bound.value,
        "performance_error_band": estimate.error_band,
    }


def _speed_warnings(capacity: Capacity, speed: Speed | None) -> list[str]:
    """Why the speed figures are null (a layout that fits only), or what they leave out."""
    if isinstance(speed, NoEstimate):
        return [speed.warning] if capacity.fits else []
    pp = capacity.parallel.pipeline_parallel_size
    return [PIPELINE_NOTE.format(pp=pp)] if speed is not None and pp > 1 else []


def _recognised_gpu(
    ref: GpuRef | None, gpu: Gpu, catalog: CatalogSnapshot
) -> tuple[str | None, str] | None:
    """For a GPU given by bytes alone: which catalog GPU it is, and the note that says so, how
    far its total is from that GPU's, and which other GPU it was as near to
    (catalog.names.match_memory)."""
    if isinstance(ref, str) or (ref is not None and ref.name):
        return None
    total = gpu.memory_bytes
    match = catalog.gpu_memory_match(total)
    tolerance = f"{names.MEMORY_TOLERANCE_BYTES:,} B (0.105 GiB)"
    if match is not None:
        known = catalog.gpus[match.slug]
        off = match.off_bytes(total)
        logged = (
            ""
            if match.known_total_bytes == match.catalog_total_bytes
            else f", and {abs(total - match.known_total_bytes):,} B from "
            f"{match.known_total_bytes:,} B, a total its logs print"
        )
        note = (
            f"gpu: {total:,} B is the runtime-reported total of {known.slug} ({known.name}): "
            f"{abs(off):,} B ({abs(off) / match.catalog_total_bytes:.3%}) "
            f"{'under' if off < 0 else 'over'} the catalog's {match.catalog_total_bytes:,} B"
            f"{logged}, within the {tolerance} a GPU's total moves with its driver; that "
            "GPU's engine defaults apply"
        )
        if match.others:
            note += (
                f"; {', '.join(match.others)} also report(s) a total within {tolerance}: "
                f"{known.slug} is the nearest, name the GPU (gpu=<slug>) if it is another"
            )
        return known.slug, note
    return None, (
        f"gpu: no catalog GPU reports {total:,} B (within {tolerance}); the engine defaults of "
        "an unnamed GPU of that size are assumed (batch defaults by memory, no Hopper or "
        "Blackwell kernels); name the GPU (gpu=<slug>, or an inline name) to use its own"
    )


def _candidate_gpus(refs: Sequence[GpuRef] | None, catalog: CatalogSnapshot) -> list[Gpu]:
    """The GPUs a plan searches: those named (slugs or inline), or the whole catalog."""
    if refs is None:
        return [entry.gpu for entry in catalog.gpus.values()]
    gpus = []
    for index, ref in enumerate(refs):
        try:
            gpus.append(_resolve_gpu(ref, catalog))
        except SizingError as exc:  # the field of the list's item
            raise SizingError(exc.field.replace("gpu", f"gpus.{index}", 1), exc.reason) from exc
    return gpus


def _gpu_notes(refs: Sequence[GpuRef] | None, catalog: CatalogSnapshot) -> list[str]:
    """For each GPU a plan was given by its bytes alone: which catalog GPU's engine defaults it
    was sized with, or that an unnamed GPU's were assumed (issue 20: a plan-level fact), as a
    capacity answer says it for its one GPU (`_recognised_gpu`)."""
    notes = []
    for index, ref in enumerate(refs or ()):
        if isinstance(ref, str) or ref.name:
            continue
        recognised = _recognised_gpu(ref, _resolve_gpu(ref, catalog), catalog)
        if recognised is not None:
            note = recognised[1].replace("gpu:", f"gpus.{index}:", 1)
            notes.append(note.replace("(gpu=<slug>", "(its slug in gpus"))
    return notes


def _plan_request(fields: PlanFields, catalog: CatalogSnapshot) -> PlanRequest:
    """The three sizing questions and the search options, copied by name."""
    values = {f.name: getattr(fields, f.name) for f in dataclasses.fields(PlanRequest)}
    values["engine"] = engine_options(fields, catalog)
    # PlanRequest parses the cache dtype: sizing.plan checks the candidate list after it, so a
    # request wrong in both ways is answered on the dtype, as it always was.
    return PlanRequest(**values)


# The speed figures a plan's option carries (a capacity answer's, less the peak's).
_OPTION_SPEED = (
    "decode_ms_per_token",
    "output_tokens_per_second",
    "prefill_ms",
    "performance_bound",
    "performance_error_band",
)


def _option_out(
    option: PlanOption, hook: calibrated.CalibrationHook | None = None
) -> PlanOptionOut:
    capacity = option.capacity
    estimate = option.speed if isinstance(option.speed, PerformanceEstimate) else None
    measured = None if hook is None else hook.speed_calibration_for(capacity, option.gpu)
    if estimate is not None and measured is not None:
        estimate = calibrated.scaled_speed(estimate, measured.step_time_scale)
    figures = speed_fields(estimate)
    return PlanOptionOut(
        gpu=option.gpu.slug,
        gpu_name=option.gpu.name,
        tensor_parallel_size=option.tensor_parallel_size,
        pipeline_parallel_size=option.pipeline_parallel_size,
        nodes_per_replica=option.nodes_per_replica,
        gpus_per_node=option.gpus_per_node,
        data_parallel_size=option.data_parallel_size,
        replicas=option.replicas,
        total_gpus=option.total_gpus,
        max_num_seqs=option.max_num_seqs,
        sequences_per_replica=option.sequences_per_replica,
        concurrency_per_replica=option.concurrency_per_replica,
        headroom_fraction=option.headroom_fraction,
        headroom_bytes=option.headroom_bytes,
        headroom_tokens=option.headroom_tokens,
        kv_pool_bytes=capacity.kv_pool_bytes,
        kv_cache_tokens=capacity.kv_cache_tokens,
        num_gpu_blocks=capacity.num_gpu_blocks,
        max_concurrency=capacity.max_concurrency,
        cost_per_hour_usd=option.cost_per_hour_usd,
        price_usd_per_hour=option.gpu.price_usd_per_hour,
        price_source=option.gpu.price_source,
        price_origin=option.gpu.price_origin,
        tokens_per_dollar=_rounded(option.tokens_per_dollar),
        **{name: figures.get(name) for name in _OPTION_SPEED},
        engine_flags={name: " ".join(flags) for name, flags in option.engine_flags.items()},
        node_flags={
            name: [" ".join(flags) for flags in nodes] for name, nodes in option.node_flags.items()
        },
        warnings=list(option.warnings),
        calibrated_from=None if hook is None else hook.calibrated_from(capacity, option.gpu),
        speed_calibrated_from=(
            None if measured is None else calibrated.speed_calibrated_from(measured)
        ),
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _plan_explanation(best: PlanOption, request: PlanRequest) -> dict[str, Any]:
    """The recommendation's capacity step by step, with its speed at the peak's share and
    the latency targets, then its replicas, as the API shows them."""
    replicas = Replicas(best.replicas, headroom_fraction=best.headroom_fraction)
    steps = None
    if isinstance(best.speed, PerformanceEstimate):
        targets = target_steps(
            request.targets, best.sequences_per_replica, best.latency_outcome or ""
        )
        steps = performance_steps(
            best.speed, context_tokens=request.context_tokens, targets=targets
        )
    return {
        **as_plain(explain(best.capacity, steps)),
        "replicas": as_plain(replicas),
    }


def _plan_answer(
    result: Plan,
    model: str,
    catalog_version: int,
    with_explanation: bool,
    hook: calibrated.CalibrationHook | None = None,
) -> PlanAnswer:
    request = result.request
    best = result.recommendation
    explanation = None
    if with_explanation and best is not None:
        explanation = _plan_explanation(best, request)
    return PlanAnswer(
        model=model,
        max_model_len=request.max_model_len,
        peak_concurrency=request.peak_concurrency,
        kv_cache_dtype=request.kv_cache_dtype,
        engine=request.engine.engine.value,
        recommendation=_option_out(best, hook) if best is not None else None,
        alternatives=[_option_out(o, hook) for o in result.alternatives],
        rank_by=request.rank_by,
        alternatives_omitted=result.alternatives_omitted,
        rejected=[
            RejectedOut(
                gpu=r.gpu.slug,
                tensor_parallel_size=r.tensor_parallel_size,
                pipeline_parallel_size=r.pipeline_parallel_size,
                code=r.code,
                reason=r.reason,
            )
            for r in result.rejected
        ],
        warnings=list(result.warnings),
        explanation=explanation,
        catalog_version=catalog_version,
    )


@dataclass(frozen=True, slots=True)
class ScenarioOutcome:
    """One row of a table of questions: what it asked, and its plan or why there is none."""

    asked: Mapping[str, str]
    answer: PlanAnswer | None
    status: str  # ok, infeasible, error
    error: str | None = None


def _table_columns(header: Sequence[str]) -> None:
    """A table of questions names its columns as the JSON body names its fields (or as the
    engines spell them, `engine_flags`): two spellings of one field, or an engine flag kvplan
    does not model, refuse the table whole, as an unknown column does."""
    known = {*PlanRequestBody.model_fields, SCENARIO_LABEL}
    with_kvplan_names(dict.fromkeys(header), known)
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InvalidRequest(f"column {name!r} appears twice", field=name)
        seen.add(name)
        if kvplan_name(name, known) is None:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InvalidRequest(
                f"column {name!r} is not a field of a plan question{hint}",
                field=name,
                suggestions=close,
            )


def _why_infeasible(answer: PlanAnswer) -> str:
    """The most common reason the candidates were turned down, with one example."""
    if not answer.rejected:
        return "no candidate GPU"
    code, _ = Counter(r.code for r in answer.rejected).most_common(1)[0]
    first = next(r for r in answer.rejected if r.code == code)
    where = (
        first.gpu
        if first.tensor_parallel_size is None
        else (f"{first.gpu} at tensor_parallel_size {first.tensor_parallel_size}")
    )
    if first.pipeline_parallel_size > 1:
        where += f", pipeline_parallel_size {first.pipeline_parallel_size}"
    return f"no GPU and layout fits ({code}), e.g. {where}: {first.reason}"


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'row'}: {error['msg']}"
            for error in exc.errors()
        )
    if isinstance(exc, SizingError):
        return f"{exc.field}: {exc.reason}"
    if isinstance(exc, Problem):
        closest = exc.extra.get("suggestions")
        hint = f" (closest: {', '.join(closest)})" if closest else ""
        return f"{exc.field}: {exc.detail}{hint}" if exc.field else exc.detail + hint
    raise exc


def plan_scenarios(
    header: Sequence[str],
    rows: Sequence[Mapping[str, str | None]],
    catalog: CatalogSnapshot,
    metrics: Metrics | None = None,
) -> list[ScenarioOutcome]:
    """A table of plan questions, each row answered on its own: a row that cannot be answered
    gets its message and never stops the others. A header that is not a plan question's fields,
    or more than MAX_SCENARIOS rows, is refused whole."""
    _table_columns(header)
    if len(rows) > MAX_SCENARIOS:
        raise InvalidRequest(
            f"the table has {len(rows)} rows; at most {MAX_SCENARIOS} per request", field="body"
        )
    outcomes = []
    for cells in rows:
        asked = {
            name: (cells.get(name) or "").strip()
            for name in (SCENARIO_LABEL, *SCENARIO_FACTS)
            if cells.get(name)
        }
        extra = cells.get("")  # csv.DictReader's restkey: more cells than the header names
        if extra:
            error = f"the row has more cells than the header names ({len(header)})"
            outcomes.append(ScenarioOutcome(asked, None, "error", error))
            continue
        try:
            body = plan_body_from_row({k: v for k, v in cells.items() if k})
            answer = plan(PlanQuestion(body.model, body.gpus, body), catalog, metrics)
        except (ValidationError, SizingError, Problem) as exc:
            outcomes.append(ScenarioOutcome(asked, None, "error", _message(exc)))
            continue
        if answer.recommendation is None:
            outcomes.append(ScenarioOutcome(asked, answer, "infeasible", _why_infeasible(answer)))
        else:
            outcomes.append(ScenarioOutcome(asked, answer, "ok"))
    return outcomes
