"""How fast a sized deployment serves: the performance model (performance.py) asked at the
batch that a capacity answer or a plan gives one replica, and the latency targets a plan meets.

Where each figure is taken:

* a capacity answer: the decode step at its running batch, max_num_seqs sequences (the
  engine's own max_num_seqs setting where that is lower), each at max_model_len tokens of
  context: the full cache that max_num_seqs describes, so the slowest step that batch takes;
  at the peak, ceil(peak_concurrency / replicas_for_peak_concurrency) sequences per replica;
* a plan's option: ceil(peak_concurrency / replicas) sequences per replica, each at
  avg_context_tokens (max_model_len without it);
* the prefill: one prompt of avg_prompt_tokens (max_model_len without it) alone on the
  replica, which is also the time to first token of a prompt that does not queue.

Pipeline stages are timed as one tensor-parallel group holding the whole model: a token
crosses every stage in turn, so its step is the sum of the stages' (each reads its share of the
bytes on its tp GPUs), which is the whole model's bytes and FLOPs over tp GPUs. The sends
between stages and the overlap of micro-batches are not counted.

Expert parallelism is timed as the engine lays it out (`expert_layout`): vLLM's
enable_expert_parallel places whole experts on DP x TP ranks, SGLang's ep_size on ep_size of
its tp_size GPUs; with data parallelism (vLLM's data_parallel_size on an MoE model, SGLang's DP
attention) the "replica" timed is one DP rank: its own batch, its attention and dense weights
over its own TP group, the busiest expert shard that the DP ranks' tokens touch together, and
its tokens' all-to-all to the other ranks' experts (performance.all_to_all_bytes). SGLang
shares its dense MLPs over the whole tp_size (moe_dense_tp_size 1: whole); the step reads them
over the attention TP group, which overstates them under DP attention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from ..engines.common import Capacity, Engine, Gpu
from ..engines.multinode import pipeline_hops_ms, with_pipeline_hops
from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import ModelArchitecture
from ..model.dtypes import KvCacheDtype, WeightFormat
from ..units import cdiv
from .performance import (
    GpuPerformance,
    PerformanceEstimate,
    PrefillChunk,
    Speculation,
    decode_cost,
    estimate_performance,
    fitted_efficiency,
    mixed_cost,
    prefill_cost,
    step_time,
)

# What an answer's speed figures are named, for the warning that says why they are null.
SPEED_FIELDS = "decode_ms_per_token, output_tokens_per_second and prefill_ms"
PIPELINE_NOTE = (
    "pipeline_parallel_size {pp}: the speed figures take the stages one after another (a token "
    "crosses every stage), without the sends between stages or overlapping micro-batches"
)


@dataclass(frozen=True, slots=True)
class NoEstimate:
    """Why a deployment's speed cannot be estimated: its speed figures are null."""

    reason: str

    @property
    def warning(self) -> str:
        return f"{SPEED_FIELDS} are null: {self.reason}"


Speed = PerformanceEstimate | NoEstimate


# Memoised per GPU and TP size: one object per GPU, so the estimate's own memos (keyed by it)
# stop at identity, and its checks run once per catalog GPU rather than once per answer.
@lru_cache(maxsize=1024)
def gpu_performance(gpu: Gpu, tensor_parallel_size: int) -> GpuPerformance | NoEstimate:
    """The GPU's figures as the model takes them, or which of them the GPU lacks."""
    missing = [] if gpu.memory_bandwidth_tb_s is not None else ["memory_bandwidth_tb_s"]
    if gpu.dense_bf16_tflops is None:
        missing.append("dense_bf16_tflops")
    if tensor_parallel_size > 1 and gpu.interconnect_gb_s is None:
        missing.append("interconnect_gb_s")
    if missing or gpu.memory_bandwidth_tb_s is None or gpu.dense_bf16_tflops is None:
        which = " and no ".join(missing)
        return NoEstimate(
            f"{gpu.slug or gpu.name or 'the GPU'} has no {which} figure (none in the catalog, "
            "or none given inline: an inline GPU takes memory_bandwidth_tb_s, "
            "dense_bf16_tflops, dense_fp8_tflops, dense_fp4_tflops and interconnect_gb_s)"
        )
    return GpuPerformance(
        memory_bandwidth_tb_s=gpu.memory_bandwidth_tb_s,
        dense_bf16_tflops=gpu.dense_bf16_tflops,
        dense_fp8_tflops=gpu.dense_fp8_tflops,
        interconnect_gb_s=gpu.interconnect_gb_s,
        name=gpu.name,
        dense_fp4_tflops=gpu.dense_fp4_tflops,
    )


@frozen
class SpeedQuestion:
    """Where one replica's speed is asked: its layout, batch, context and prompt."""

    tensor_parallel_size: int
    batch: int
    context_tokens: int
    prompt_tokens: int
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    weight_format: WeightFormat | None = None
    peak_batch: int | None = None
    # Stages across nodes: each step adds pp - 1 inter-node hops (multinode.py).
    pipeline_parallel_size: int = 1
    # Speculative decoding at a measured acceptance length (None: plain decode steps).
    speculation: Speculation | None = None
    # Expert parallelism and the DP ranks that share the experts (`expert_layout`): 1 and 1
    # for plain tensor parallelism.
    expert_parallel_size: int = 1
    data_parallel_size: int = 1

    @property
    def link_width(self) -> int:
        """GPUs one step's traffic spans: the TP group, or every DP rank's under DP x EP."""
        return self.tensor_parallel_size * self.data_parallel_size


def expert_layout(arch: ModelArchitecture, capacity: Capacity) -> tuple[int, int]:
    """(expert_parallel_size, data_parallel_size) for the speed model, as the answer's engine
    settings say the engine lays the experts out: vLLM enable_expert_parallel, EP = DP x TP
    (vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make), and without
    it an MoE's experts tensor-sharded over DP x TP (engines/expert_parallel.py
    vllm_rank_weights); SGLang ep_size over its tp_size GPUs, attn_dp_size DP-attention groups
    (engines/sglang_dp.py). A dense model's DP ranks are whole replicas: (1, 1)."""
    if arch.moe is None:
        return 1, 1
    settings = capacity.engine_settings
    if capacity.engine is Engine.VLLM:
        dp = capacity.parallel.data_parallel_size
        tp = capacity.parallel.tensor_parallel_size
        ep = tp * dp if settings.get("enable_expert_parallel") is True else 1
        return (1 if ep == tp * dp == 1 else ep), dp
    if capacity.engine is Engine.SGLANG:
        ep_size, attn_dp = settings.get("ep_size", 1), settings.get("attn_dp_size", 1)
        if isinstance(ep_size, int) and isinstance(attn_dp, int):
            return ep_size, attn_dp
    return 1, 1


def with_expert_layout(
    question: SpeedQuestion, arch: ModelArchitecture, capacity: Capacity
) -> SpeedQuestion:
    """The question timed as `capacity`'s engine lays out the experts (`expert_layout`)."""
    ep, dp = expert_layout(arch, capacity)
    return replace(question, expert_parallel_size=ep, data_parallel_size=dp)


def replica_speed(arch: ModelArchitecture, gpu: Gpu, question: SpeedQuestion) -> Speed:
    """The estimate, or why there is none (a GPU or a model that lacks a figure it needs)."""
    figures = gpu_performance(gpu, question.link_width)
    if isinstance(figures, NoEstimate):
        return figures
    try:
        estimate = estimate_performance(
            arch,
            figures,
            batch=question.batch,
            context_tokens=question.context_tokens,
            prompt_tokens=question.prompt_tokens,
            tensor_parallel_size=question.tensor_parallel_size,
            kv_cache_dtype=question.kv_cache_dtype,
            weight_format=question.weight_format,
            peak_batch=question.peak_batch,
            speculation=question.speculation,
            expert_parallel_size=question.expert_parallel_size,
            data_parallel_size=question.data_parallel_size,
        )
    except SizingError as exc:
        return NoEstimate(f"{exc.field}: {exc.reason}")
    if question.pipeline_parallel_size > 1:
        return with_pipeline_hops(estimate, arch, gpu, question.pipeline_parallel_size)
    return estimate


def check_prompt_tokens(prompt_tokens: int | None, max_model_len: int) -> int:
    """The prefill's prompt length: avg_prompt_tokens, which must fit in max_model_len."""
    if prompt_tokens is None:
        return max_model_len
    if not 1 <= prompt_tokens <= max_model_len:
        raise SizingError(
            "avg_prompt_tokens", f"must be between 1 and max_model_len ({max_model_len})"
        )
    return prompt_tokens


def capacity_speed(
    arch: ModelArchitecture,
    gpu: Gpu,
    capacity: Capacity,
    *,
    weight_format: WeightFormat | None = None,
    peak_concurrency: int | None = None,
    prompt_tokens: int | None = None,
    speculation: Speculation | None = None,
) -> Speed:
    """One capacity answer's speed: at its running batch, at the peak per replica, and the
    prefill of one prompt (see the module docstring); with `speculation`, each decode step a
    verify step that emits its acceptance_length tokens per sequence."""
    prompt = check_prompt_tokens(prompt_tokens, capacity.max_model_len)
    if speculation is not None and capacity.parallel.pipeline_parallel_size > 1:
        raise SizingError(
            "acceptance_length",
            "speculative decoding's speed is not modelled across pipeline stages",
        )
    batch = capacity.running_sequences_per_replica
    if not capacity.fits or batch < 1:
        return NoEstimate("the layout holds no sequence, so it has no batch to time")
    peak_batch = None
    if peak_concurrency is not None:
        replicas = capacity.replicas_for(peak_concurrency)
        peak_batch = None if replicas is None else cdiv(peak_concurrency, replicas)
    question = SpeedQuestion(
        tensor_parallel_size=capacity.parallel.tensor_parallel_size,
        batch=batch,
        context_tokens=capacity.max_model_len,
        prompt_tokens=prompt,
        kv_cache_dtype=capacity.kv_cache_dtype,
        weight_format=weight_format,
        peak_batch=peak_batch,
        pipeline_parallel_size=capacity.parallel.pipeline_parallel_size,
        speculation=speculation,
    )
    return replica_speed(arch, gpu, with_expert_layout(question, arch, capacity))


def mixed_step_ms(
    arch: ModelArchitecture,
    gpu: Gpu,
    question: SpeedQuestion,
    decodes: int,
    chunks: tuple[PrefillChunk, ...],
) -> float | NoEstimate:
    """One engine step that decodes `decodes` sequences at `question.context_tokens` and
    computes the prefill `chunks` in the same pass (performance.mixed_cost: the weights read
    once, the FLOPs and cache reads of both), plus the pipeline stages' hops, ms."""
    figures = gpu_performance(gpu, question.link_width)
    if isinstance(figures, NoEstimate):
        return figures
    try:
        cost = mixed_cost(
            arch,
            figures,
            decodes,
            question.context_tokens,
            chunks,
            tensor_parallel_size=question.tensor_parallel_size,
            kv_cache_dtype=question.kv_cache_dtype,
            weight_format=question.weight_format,
            expert_parallel_size=question.expert_parallel_size,
            data_parallel_size=question.data_parallel_size,
        )
    except SizingError as exc:
        return NoEstimate(f"{exc.field}: {exc.reason}")
    hops = pipeline_hops_ms(arch, gpu, question.pipeline_parallel_size, cost.tokens)
    return step_time(cost, fitted_efficiency(figures)).ms + hops


# --- latency targets -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyTargets:
    """What a plan's every replica must meet at the peak (None: no target)."""

    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None
    min_output_tokens_per_second_per_user: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_tpot_ms", "max_ttft_ms", "min_output_tokens_per_second_per_user"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise SizingError(name, f"must be a positive number, got {value}")

    @property
    def given(self) -> bool:
        return any(
            value is not None
            for value in (
                self.max_tpot_ms,
                self.max_ttft_ms,
                self.min_output_tokens_per_second_per_user,
            )
        )

    def decode_miss(self, batch: int, ms: float) -> TargetMiss | None:
        """Why a decode step of `ms` at `batch` sequences misses a target, or None. A user gets
        one token per step: 1000 / ms tokens per second."""
        sequences = f"{batch:,} sequence{'s' if batch != 1 else ''}"
        if self.max_tpot_ms is not None and ms > self.max_tpot_ms:
            return TargetMiss(
                "tpot-over-target",
                f"decode at {sequences} takes {ms:.1f} ms per token, over the "
                f"{self.max_tpot_ms:g} ms max_tpot_ms target",
            )
        rate = self.min_output_tokens_per_second_per_user
        if rate is not None and 1e3 / ms < rate:
            return TargetMiss(
                "tokens-per-second-under-target",
                f"decode at {sequences} gives {1e3 / ms:.1f} output tokens/s per user, under the "
                f"{rate:g} min_output_tokens_per_second_per_user target",
            )
        return None

    def prefill_miss(self, prompt_tokens: int, ms: float) -> TargetMiss | None:
        if self.max_ttft_ms is not None and ms > self.max_ttft_ms:
            return TargetMiss(
                "ttft-over-target",
                f"the prefill of one {prompt_tokens:,}-token prompt takes {ms:.1f} ms, over the "
                f"{self.max_ttft_ms:g} ms max_ttft_ms target",
            )
        return None


@dataclass(frozen=True, slots=True)
class TargetMiss:
    """A target missed: the rejection's code and reason when no batch meets it."""

    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class Paced:
    """The largest batch, up to the one asked, whose decode step meets every target."""

    batch: int
    miss: TargetMiss | None  # why the batch asked misses, when `batch` is smaller than it


def largest_batch(meets: Callable[[int], bool], upper: int) -> int:
    """The largest b in 1..upper with meets(b), for a `meets` that holds up to some batch and
    fails beyond it (a decode step only grows with the batch); 0 when even 1 fails."""
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        if meets(middle):
            low = middle
        else:
            high = middle - 1
    return low


def pace(
    arch: ModelArchitecture,
    gpu: Gpu,
    question: SpeedQuestion,
    targets: LatencyTargets,
    *,
    speed_scale: float = 1.0,
) -> Paced | TargetMiss | NoEstimate:
    """Hold `question.batch` sequences per replica to the targets: the batch itself when its
    decode step meets them, a smaller one when that does, or why none can. `speed_scale` is a
    speed calibration's measured / estimated decode step (1: kvplan's own estimate); it scales
    the decode step as a capacity answer's calibrated TPOT is scaled, not the prefill."""
    if not speed_scale > 0:
        raise SizingError("speed_scale", f"must be a positive number, got {speed_scale}")
    tp = question.tensor_parallel_size
    pp = question.pipeline_parallel_size
    ep, dp = question.expert_parallel_size, question.data_parallel_size
    figures = gpu_performance(gpu, question.link_width)
    if isinstance(figures, NoEstimate):
        return figures

    def decode_ms(batch: int) -> float:
        cost = decode_cost(
            arch,
            figures,
            batch,
            question.context_tokens,
            tensor_parallel_size=tp,
            kv_cache_dtype=question.kv_cache_dtype,
            weight_format=question.weight_format,
            expert_parallel_size=ep,
            data_parallel_size=dp,
        )
        ms = step_time(cost, fitted_efficiency(figures)).ms
        return (ms + pipeline_hops_ms(arch, gpu, pp, batch)) * speed_scale

    try:
        prefill = prefill_cost(
            arch,
            figures,
            question.prompt_tokens,
            tensor_parallel_size=tp,
            weight_format=question.weight_format,
            expert_parallel_size=ep,
            data_parallel_size=dp,
        )
        prefill_ms = step_time(prefill, fitted_efficiency(figures)).ms + pipeline_hops_ms(
            arch, gpu, pp, question.prompt_tokens
        )
        slow = targets.prefill_miss(question.prompt_tokens, prefill_ms)
        if slow is not None:
            return slow
        miss = targets.decode_miss(question.batch, decode_ms(question.batch))
    except SizingError as exc:
        return NoEstimate(f"{exc.field}: {exc.reason}")
    if miss is None:
        return Paced(question.batch, None)
    batch = largest_batch(
        lambda b: targets.decode_miss(b, decode_ms(b)) is None, question.batch - 1
    )
    if batch == 0:
        return targets.decode_miss(1, decode_ms(1)) or miss
    return Paced(batch, miss)


# --- speed against batch (the picture) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchSpeed:
    """One replica's decode at one batch."""

    batch: int
    decode_ms_per_token: float
    output_tokens_per_second: float


def batch_sizes(limit: int) -> tuple[int, ...]:
    """1, 2, 4, ... below `limit`, then `limit` itself: where the curve is drawn."""
    sizes = []
    batch = 1
    while batch < limit:
        sizes.append(batch)
        batch *= 2
    return (*sizes, limit)


def batch_curve(
    arch: ModelArchitecture, gpu: Gpu, question: SpeedQuestion, batches: tuple[int, ...]
) -> tuple[BatchSpeed, ...] | NoEstimate:
    """The decode step at each batch, every sequence at `question.context_tokens`."""
    figures = gpu_performance(gpu, question.link_width)
    if isinstance(figures, NoEstimate):
        return figures
    points = []
    try:
        for batch in batches:
            cost = decode_cost(
                arch,
                figures,
                batch,
                question.context_tokens,
                tensor_parallel_size=question.tensor_parallel_size,
                kv_cache_dtype=question.kv_cache_dtype,
                weight_format=question.weight_format,
                expert_parallel_size=question.expert_parallel_size,
                data_parallel_size=question.data_parallel_size,
            )
            ms = step_time(cost, fitted_efficiency(figures)).ms
            points.append(BatchSpeed(batch, ms, batch * 1e3 / ms))
    except SizingError as exc:
        return NoEstimate(f"{exc.field}: {exc.reason}")
    return tuple(points)
