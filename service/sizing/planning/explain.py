"""The explanation a person can check by hand: every number with the factors that made it.

Per-token bytes -> per-sequence bytes -> per-GPU share -> memory budget -> blocks ->
concurrency -> speed, one frozen step each; `as_plain` (what `dataclasses.asdict` answers)
gives the JSON the API shows.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..capacity import Capacity
from ..model.architecture import CompressedSparseAttention
from ..speed.performance import FITTED, FITTED_AMD, PerformanceEstimate, StepTime
from ..speed.replica import LatencyTargets
from ..units import GiB

KV_BYTES_RULE = (
    "2 (K and V) x kv_heads x head_dim x bytes per attention layer; MLA: "
    "(kv_lora_rank + qk_rope_head_dim) x bytes (fp8_ds_mla: 656-B packed rows), plus "
    "132 B of sparse-attention indexer key where the model has one; linear/Mamba layers "
    "keep a fixed state instead"
)
COMPRESSED_BYTES_RULE = (
    "DeepSeek-V4: each compressing layer keeps one row (the latent, plus the indexer key on C4 "
    "layers) per 4 or 128 tokens; per token is that row spread over the tokens it covers, "
    "rounded up; the 128-token window and the compressor states are per sequence"
)
PER_GPU_RULE = (
    "KV heads per GPU = max(1, kv_heads // tp) (replicated past tp = kv_heads); "
    "MLA latents are not split; weights divide by tp x pp"
)
PERFORMANCE_RULE = (
    "one forward pass on each GPU of the tensor-parallel group: memory = bytes read / (peak "
    "bandwidth x efficiency.bandwidth), compute = linear FLOPs / (peak FLOPS at the weights' "
    "precision x efficiency.compute, or efficiency.compute_low_precision on an FP8/FP4 peak) + "
    "attention FLOPs / (BF16 peak x efficiency.compute), "
    "time = the larger + (1 - efficiency.overlap) x the smaller + all-reduces over the link + "
    "efficiency.step_overhead_ms + layers x efficiency.layer_overhead_us; a decode step gives "
    "each running sequence one token, so decode_ms_per_token is one step and "
    "output_tokens_per_second is batch x 1000 / step ms (service/sizing/speed/performance.py)"
)
EFFICIENCY_SOURCE = (
    "fitted on published measurements (service/calibration/performance_points.json; "
    "service/sizing/speed/performance.py FITTED, FITTED_AMD on AMD GPUs; `make bench` prints "
    "the fit and the error on sources held out)"
)
TARGETS_RULE = (
    "each replica serves ceil(peak_concurrency / replicas) sequences; when the decode step at "
    "that batch misses max_tpot_ms or min_output_tokens_per_second_per_user, max_num_seqs "
    "becomes the largest batch that meets both and the replicas grow to hold the peak at it; "
    "a layout whose prefill misses max_ttft_ms, or whose single sequence misses, is rejected"
)
REPLICAS_RULE = (
    "fewest replicas whose usable blocks, less the headroom asked for, hold "
    "peak_concurrency sequences (at avg_context_tokens when given)"
)


@dataclass(frozen=True, slots=True)
class TokenBytes:
    """One layer kind's bytes per token (kinds that store K/V per token only)."""

    kind: str
    layers: int
    bytes_per_token_per_layer: int
    bytes_per_token: int


@dataclass(frozen=True, slots=True)
class KvBytesPerToken:
    value: int
    kv_cache_dtype: str
    element_bytes: int
    by_layer_kind: tuple[TokenBytes, ...]
    rule: str


@dataclass(frozen=True, slots=True)
class SequenceBytes:
    """One layer kind's bytes for one sequence at max_model_len."""

    kind: str
    layers: int
    tokens_held: int | None
    state_bytes_per_layer: int | None
    bytes: int
    formula: str


@dataclass(frozen=True, slots=True)
class KvBytesPerSequence:
    value: int
    context_tokens: int
    by_layer_kind: tuple[SequenceBytes, ...]


@dataclass(frozen=True, slots=True)
class PerGpu:
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_bytes_per_token_per_gpu: int
    weights_bytes_total: int
    weights_bytes_per_gpu: int
    rule: str


@dataclass(frozen=True, slots=True)
class BudgetStep:
    name: str
    bytes: int
    gib: float
    note: str


@dataclass(frozen=True, slots=True)
class MemoryBudgetSteps:
    lines: tuple[BudgetStep, ...]
    kv_pool_bytes: int
    given: bool


@dataclass(frozen=True, slots=True)
class GroupBlocks:
    kind: str
    layers: int
    block_size: int
    page_bytes: int
    blocks_per_request: int


@dataclass(frozen=True, slots=True)
class Blocks:
    groups: tuple[GroupBlocks, ...]
    bytes_per_block: int
    num_gpu_blocks: int
    formula: str
    blocks_per_request: int


@dataclass(frozen=True, slots=True)
class Concurrency:
    kv_cache_tokens: int
    max_concurrency: float
    max_num_seqs: int
    formula: str


@dataclass(frozen=True, slots=True)
class PassTerms:
    """One forward pass on one GPU of the tensor-parallel group, term by term."""

    tokens: int
    weight_bytes: int
    kv_bytes: int
    flops: int
    memory_ms: float
    compute_ms: float
    interconnect_ms: float
    overhead_ms: float
    ms: float
    bound: str


@dataclass(frozen=True, slots=True)
class Efficiencies:
    bandwidth: float
    compute: float
    step_overhead_ms: float
    allreduce_latency_us: float
    overlap: float
    layer_overhead_us: float
    compute_low_precision: float | None
    source: str = EFFICIENCY_SOURCE


@dataclass(frozen=True, slots=True)
class TargetSteps:
    """A plan's latency targets, and what they made of the recommendation's batch."""

    max_tpot_ms: float | None
    max_ttft_ms: float | None
    min_output_tokens_per_second_per_user: float | None
    sequences_per_replica: int
    outcome: str
    rule: str = TARGETS_RULE


@dataclass(frozen=True, slots=True)
class PerformanceSteps:
    """How fast one replica decodes and prefills, with every term of each pass."""

    context_tokens: int
    decode: PassTerms
    decode_at_peak: PassTerms | None
    prefill: PassTerms
    decode_ms_per_token: float
    decode_ms_per_token_at_peak: float | None
    output_tokens_per_second: float
    output_tokens_per_second_per_user: float
    prefill_ms: float
    performance_bound: str
    performance_error_band: float
    efficiency: Efficiencies
    arithmetic: tuple[str, ...]
    rule: str
    latency_targets: TargetSteps | None = None


@dataclass(frozen=True, slots=True)
class Explanation:
    """One capacity, step by step."""

    kv_bytes_per_token: KvBytesPerToken
    kv_bytes_per_sequence: KvBytesPerSequence
    per_gpu: PerGpu
    memory_budget: MemoryBudgetSteps
    blocks: Blocks
    concurrency: Concurrency
    performance: PerformanceSteps | None
    engine_log: tuple[str, ...]
    engine_settings: Mapping[str, Any]
    fits: bool
    reason: str | None
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Replicas:
    """A plan's last step: how many replicas of the recommendation hold the peak, and why."""

    replicas: int
    rule: str = field(default=REPLICAS_RULE, init=False)
    headroom_fraction: float


# Values `dataclasses.asdict` copies with `copy.deepcopy`, which gives these back as they are.
_ATOMIC = (str, int, float, bool, type(None))
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def as_plain(value: Any) -> Any:
    """What `dataclasses.asdict` answers for an explanation (dicts for dataclasses, lists,
    tuples and dicts rebuilt, other values deep-copied), a few times faster: the field names
    are read once per class, and strings and numbers are returned rather than deep-copied
    (a deep copy of one is the value itself). An explained plan builds two of these."""
    if isinstance(value, _ATOMIC):
        return value
    kind = type(value)
    names = _FIELD_NAMES.get(kind)
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        return {name: as_plain(getattr(value, name)) for name in names}
    if kind is list or kind is tuple:
        return kind(as_plain(item) for item in value)
    if kind is dict:
        return {as_plain(k): as_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, dict)) or dataclasses.is_dataclass(value):
        return dataclasses.asdict(_Holder(value))["value"]  # the standard library's own way
    return copy.deepcopy(value)


@dataclass(frozen=True, slots=True)
class _Holder:
    """A container `dataclasses.asdict` can be asked about any value through."""

    value: Any


def _gib(n: int) -> float:
    return round(n / GiB, 3)


def _kv_bytes_per_token(capacity: Capacity) -> KvBytesPerToken:
    lines: list[TokenBytes] = []
    compressed = False
    for line in capacity.sequence:
        per_layer, layer = line.bytes_per_token_per_layer, line.layer
        if not per_layer:
            continue
        if isinstance(layer, CompressedSparseAttention):
            compressed = True
            if layer.compress_ratio > 1:  # the window is per sequence, not per token
                spread = -(-line.layers * per_layer // layer.compress_ratio)
                lines.append(TokenBytes(line.kind, line.layers, per_layer, spread))
            continue
        lines.append(TokenBytes(line.kind, line.layers, per_layer, line.layers * per_layer))
    return KvBytesPerToken(
        value=capacity.kv_bytes_per_token,
        kv_cache_dtype=capacity.kv_cache_dtype,
        element_bytes=capacity.kv_element_bytes,
        by_layer_kind=tuple(lines),
        rule=COMPRESSED_BYTES_RULE if compressed else KV_BYTES_RULE,
    )


def _kv_bytes_per_sequence(capacity: Capacity) -> KvBytesPerSequence:
    lines = tuple(
        SequenceBytes(
            kind=line.kind,
            layers=line.layers,
            tokens_held=line.tokens_held,
            state_bytes_per_layer=line.state_bytes_per_layer or None,
            bytes=line.bytes_per_sequence,
            formula=line.formula,
        )
        for line in capacity.sequence
    )
    return KvBytesPerSequence(
        value=capacity.kv_bytes_per_sequence,
        context_tokens=capacity.max_model_len,
        by_layer_kind=lines,
    )


def _per_gpu(capacity: Capacity) -> PerGpu:
    return PerGpu(
        tensor_parallel_size=capacity.parallel.tensor_parallel_size,
        pipeline_parallel_size=capacity.parallel.pipeline_parallel_size,
        kv_bytes_per_token_per_gpu=capacity.kv_bytes_per_token_per_gpu,
        weights_bytes_total=capacity.weights_bytes,
        weights_bytes_per_gpu=capacity.weights_bytes_per_gpu,
        rule=PER_GPU_RULE,
    )


def _memory_budget(capacity: Capacity) -> MemoryBudgetSteps:
    return MemoryBudgetSteps(
        lines=tuple(
            BudgetStep(name=line.name, bytes=line.bytes, gib=_gib(line.bytes), note=line.note)
            for line in capacity.budget.lines
        ),
        kv_pool_bytes=capacity.kv_pool_bytes,
        given=capacity.budget.pool_given,
    )


def _blocks(capacity: Capacity) -> Blocks:
    layout = capacity.layout
    pool = max(0, capacity.kv_pool_bytes)
    blocks = pool // layout.bytes_per_block if layout.bytes_per_block else 0
    stages = capacity.per_stage_blocks
    weights = capacity.facts.stage_weights_bytes_per_gpu
    smallest = (
        f" (the smallest of the pipeline stages: {list(stages)}"
        + (f"; each stage's weights per GPU: {list(weights)} B" if weights else "")
        + ")"
        if len(stages) > 1
        else ""
    )
    return Blocks(
        groups=tuple(
            GroupBlocks(
                kind=group.kind,
                layers=group.layers,
                block_size=group.block_size,
                page_bytes=group.page_bytes,
                blocks_per_request=group.blocks_per_request,
            )
            for group in layout.groups
        ),
        bytes_per_block=layout.bytes_per_block,
        num_gpu_blocks=capacity.report.num_gpu_blocks,
        formula=f"{pool} B // {layout.bytes_per_block} B per block = {blocks} blocks{smallest}",
        blocks_per_request=layout.blocks_per_request,
    )


def _concurrency(capacity: Capacity) -> Concurrency:
    report = capacity.report
    return Concurrency(
        kv_cache_tokens=report.kv_cache_tokens,
        max_concurrency=capacity.max_concurrency,
        max_num_seqs=report.max_num_seqs,
        formula=f"{report.num_gpu_blocks} blocks / {capacity.layout.blocks_per_request} blocks "
        f"per request = {report.max_concurrency:.2f}; whole sequences (one block is the null "
        f"block in vLLM): {report.max_num_seqs}",
    )


def _pass_terms(step: StepTime) -> PassTerms:
    cost = step.cost
    return PassTerms(
        tokens=cost.tokens,
        weight_bytes=cost.weight_bytes,
        kv_bytes=cost.kv_bytes,
        flops=cost.flops,
        memory_ms=round(step.memory_ms, 4),
        compute_ms=round(step.compute_ms, 4),
        interconnect_ms=round(step.interconnect_ms, 4),
        overhead_ms=round(step.overhead_ms, 4),
        ms=round(step.ms, 4),
        bound=step.bound.value,
    )


def performance_steps(
    estimate: PerformanceEstimate, *, context_tokens: int, targets: TargetSteps | None = None
) -> PerformanceSteps:
    """The estimate's passes and figures as the explanation shows them (answers round less)."""
    e = estimate.efficiency
    return PerformanceSteps(
        context_tokens=context_tokens,
        decode=_pass_terms(estimate.decode),
        decode_at_peak=None if estimate.peak is None else _pass_terms(estimate.peak),
        prefill=_pass_terms(estimate.prefill),
        decode_ms_per_token=round(estimate.decode_ms_per_token, 4),
        decode_ms_per_token_at_peak=(
            None
            if estimate.decode_ms_per_token_at_peak is None
            else round(estimate.decode_ms_per_token_at_peak, 4)
        ),
        output_tokens_per_second=round(estimate.output_tokens_per_second, 2),
        output_tokens_per_second_per_user=round(estimate.output_tokens_per_second_per_user, 2),
        prefill_ms=round(estimate.prefill_ms, 4),
        performance_bound=estimate.performance_bound.value,
        performance_error_band=estimate.error_band,
        efficiency=Efficiencies(
            bandwidth=e.bandwidth,
            compute=e.compute,
            step_overhead_ms=e.step_overhead_ms,
            allreduce_latency_us=e.allreduce_latency_us,
            overlap=e.overlap,
            layer_overhead_us=e.layer_overhead_us,
            compute_low_precision=e.compute_low_precision,
            source=EFFICIENCY_SOURCE if e in (FITTED, FITTED_AMD) else "given by the caller",
        ),
        arithmetic=estimate.steps,
        rule=PERFORMANCE_RULE,
        latency_targets=targets,
    )


def target_steps(
    targets: LatencyTargets, sequences_per_replica: int, outcome: str
) -> TargetSteps | None:
    """The targets step of a plan's explanation; None when no target was given."""
    if not targets.given:
        return None
    return TargetSteps(
        max_tpot_ms=targets.max_tpot_ms,
        max_ttft_ms=targets.max_ttft_ms,
        min_output_tokens_per_second_per_user=targets.min_output_tokens_per_second_per_user,
        sequences_per_replica=sequences_per_replica,
        outcome=outcome,
    )


def explain(capacity: Capacity, performance: PerformanceSteps | None = None) -> Explanation:
    """Per-token bytes -> per-sequence bytes -> memory budget -> blocks -> max_num_seqs, and
    the speed of one replica when it was estimated."""
    return Explanation(
        kv_bytes_per_token=_kv_bytes_per_token(capacity),
        kv_bytes_per_sequence=_kv_bytes_per_sequence(capacity),
        per_gpu=_per_gpu(capacity),
        memory_budget=_memory_budget(capacity),
        blocks=_blocks(capacity),
        concurrency=_concurrency(capacity),
        performance=performance,
        engine_log=tuple(capacity.report.log_lines),
        engine_settings=dict(capacity.engine_settings),
        fits=capacity.fits,
        reason=capacity.reason,
        warnings=tuple(capacity.warnings),
    )
