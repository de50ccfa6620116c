"""Fitting the performance model's efficiencies on published measurements.

A measured point is one published run: a static batch of `batch` prompts of `input_tokens`
decoded to `output_tokens` (throughput), or one prompt alone (time to first token). The model
predicts it from the same formulas the answers use (service/sizing/speed/performance.py):

    static run  T = prefill(batch prompts of input_tokens)
                    + (output_tokens - 1) x decode step(batch, input_tokens + output_tokens // 2)
                tokens/s = batch x output_tokens / T  (per GPU: / tp)
    ttft        T = prefill(one prompt of input_tokens)

    closed loop  TPOT = decode step(batch, input + output // 2)
                        + batch / output x (prefill(one prompt) - step overhead)
                 tokens/s per GPU = batch x output / (prefill + (output - 1) x TPOT) / tp

(the first output token comes out of the prefill; the decode steps are taken at the run's mean
context, which is exact while a step is linear in the context and slightly low where the bound
changes during the run). The fit minimises the sum of squared log errors, ln(predicted /
measured)^2, over the points kept for fitting: a coarse grid over all seven efficiencies, then
golden-section line searches one efficiency at a time (the
overlap included: 1 is the roofline's max, 0 the sum). Deterministic: the same points give the
same efficiencies, which tests/calibration/test_performance_fit.py checks against `FITTED`.

`leave_one_source_out` (issue 22) predicts each source's points with efficiencies fitted on the
other sources, per GPU vendor (`vendor_fit`): the error `make bench` reports and each answer's
band is taken from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import product
from typing import Final

from ..errors import SizingError
from ..model.architecture import ModelArchitecture
from ..model.dtypes import KvCacheDtype, WeightFormat
from .performance import (
    Efficiency,
    GpuPerformance,
    StepCost,
    decode_cost,
    prefill_cost,
    step_time,
)
from .performance import closed_loop_tpot_ms as performance_closed_loop_tpot_ms


class Metric(StrEnum):
    OUTPUT_TOKENS_PER_SECOND = "output_tokens_per_second"  # a static run, whole replica
    OUTPUT_TOKENS_PER_SECOND_PER_GPU = "output_tokens_per_second_per_gpu"  # the same, / tp
    TTFT_MS = "ttft_ms"  # one prompt at batch 1
    # Closed loop at a fixed concurrency `batch` (vllm bench serve --max-concurrency, SGLang's
    # bench_serving, InferenceX): each finished request is replaced by a new one.
    TPOT_MS = "tpot_ms"  # time per output token after the first
    CLOSED_LOOP_OUTPUT_TOKENS_PER_SECOND_PER_GPU = "closed_loop_output_tokens_per_second_per_gpu"


CLOSED_LOOP: Final = frozenset(
    {Metric.TPOT_MS, Metric.CLOSED_LOOP_OUTPUT_TOKENS_PER_SECOND_PER_GPU}
)


@dataclass(frozen=True, slots=True)
class MeasuredPoint:
    id: str
    model: str  # catalog slug
    gpu: str  # catalog slug
    engine: str
    tensor_parallel_size: int
    batch: int
    input_tokens: int
    output_tokens: int
    weight_format: WeightFormat
    kv_cache_dtype: KvCacheDtype
    metric: Metric
    measured: float
    source: str
    source_id: str = ""  # the key of the source in the data file
    vendor: str = "NVIDIA"  # the GPU's vendor, as the catalog names it
    # The experts spread over this many of the TP group's ranks (SGLang's --ep-size), as the
    # source states its layout; 1: experts sharded by TP like every other weight.
    expert_parallel_size: int = 1


@dataclass(frozen=True, slots=True)
class PointCosts:
    """A point with the model's efficiency-free costs for it, computed once per fit."""

    point: MeasuredPoint
    prefill: StepCost
    decode: StepCost | None  # None for a time-to-first-token point
    decode_steps: int


def point_costs(point: MeasuredPoint, arch: ModelArchitecture, gpu: GpuPerformance) -> PointCosts:
    tp = point.tensor_parallel_size
    if point.metric is Metric.TTFT_MS:
        prefill = prefill_cost(
            arch,
            gpu,
            point.input_tokens,
            tensor_parallel_size=tp,
            weight_format=point.weight_format,
            expert_parallel_size=point.expert_parallel_size,
        )
        return PointCosts(point, prefill, None, 0)
    prefill = prefill_cost(
        arch,
        gpu,
        point.input_tokens,
        prompts=1 if point.metric in CLOSED_LOOP else point.batch,
        tensor_parallel_size=tp,
        weight_format=point.weight_format,
        expert_parallel_size=point.expert_parallel_size,
    )
    decode = decode_cost(
        arch,
        gpu,
        point.batch,
        point.input_tokens + point.output_tokens // 2,
        tensor_parallel_size=tp,
        kv_cache_dtype=point.kv_cache_dtype,
        weight_format=point.weight_format,
        expert_parallel_size=point.expert_parallel_size,
    )
    return PointCosts(point, prefill, decode, point.output_tokens - 1)


def closed_loop_tpot_ms(costs: PointCosts, efficiency: Efficiency) -> float:
    """Mean time per output token of a closed loop at concurrency B = `batch`.

    The engine's step (vLLM v1 Scheduler.schedule, release 0.11.0: running requests first, then
    waiting ones, chunked prefill within max_num_batched_tokens in the same step) decodes the B
    running sequences and, as requests finish and are replaced, prefills the newcomers' prompts
    in the same steps: B / output_tokens prompts per step, each at its prefill pass less the
    step's fixed overhead (performance.closed_loop_tpot_ms, the one rule the answers use too):

        TPOT = decode step(B, input + output/2) + B / output x (prefill(input) - overhead)
    """
    point = costs.point
    if costs.decode is None:
        raise SizingError("metric", "a closed-loop point needs a decode cost")
    return performance_closed_loop_tpot_ms(
        step_time(costs.decode, efficiency),
        step_time(costs.prefill, efficiency),
        point.batch / point.output_tokens,
    )


def predict(costs: PointCosts, efficiency: Efficiency) -> float:
    """The point's metric as the model predicts it with these efficiencies."""
    point = costs.point
    if point.metric is Metric.TPOT_MS:
        return closed_loop_tpot_ms(costs, efficiency)
    if point.metric is Metric.CLOSED_LOOP_OUTPUT_TOKENS_PER_SECOND_PER_GPU:
        # One request: its prefill (the first token), then output - 1 tokens at the TPOT.
        request_ms = step_time(costs.prefill, efficiency).ms + (
            point.output_tokens - 1
        ) * closed_loop_tpot_ms(costs, efficiency)
        per_replica = point.batch * point.output_tokens / (request_ms / 1e3)
        return per_replica / point.tensor_parallel_size
    seconds = step_time(costs.prefill, efficiency).ms / 1e3
    if costs.decode is None:
        return seconds * 1e3
    seconds += costs.decode_steps * step_time(costs.decode, efficiency).ms / 1e3
    rate = point.batch * point.output_tokens / seconds
    if point.metric is Metric.OUTPUT_TOKENS_PER_SECOND_PER_GPU:
        return rate / point.tensor_parallel_size
    return rate


def held_back(position: int) -> bool:
    """Every third point, from the third (positions 2, 5, 8, ... of the data file)."""
    return position % 3 == 2


def split(points: Sequence[MeasuredPoint]) -> tuple[list[MeasuredPoint], list[MeasuredPoint]]:
    """(points to fit on, points held back)."""
    fit_on = [p for i, p in enumerate(points) if not held_back(i)]
    held = [p for i, p in enumerate(points) if held_back(i)]
    return fit_on, held


# Where the fit looks: each efficiency's range, and the coarse grid over it.
BOUNDS: Final[dict[str, tuple[float, float]]] = {
    "bandwidth": (0.2, 1.0),
    "compute": (0.1, 1.0),
    "step_overhead_ms": (0.0, 10.0),
    "allreduce_latency_us": (0.0, 100.0),
    "overlap": (0.0, 1.0),
    "layer_overhead_us": (0.0, 200.0),
    "compute_low_precision": (0.1, 1.0),
}
GRID: Final[dict[str, tuple[float, ...]]] = {
    "bandwidth": tuple(round(0.3 + 0.1 * i, 1) for i in range(8)),
    "compute": tuple(round(0.2 + 0.1 * i, 1) for i in range(9)),
    "step_overhead_ms": (0.0, 2.0),
    "allreduce_latency_us": (0.0, 25.0, 50.0),
    "overlap": (0.0, 0.5, 1.0),
    "layer_overhead_us": (0.0, 50.0, 100.0),
    "compute_low_precision": (0.3, 0.6),
}
SWEEPS: Final = 40
GOLDEN: Final = (math.sqrt(5) - 1) / 2
# Rounding of the published constants (and of the fit's answer, so a test can compare them).
DECIMALS: Final[dict[str, int]] = {
    "bandwidth": 3,
    "compute": 3,
    "step_overhead_ms": 3,
    "allreduce_latency_us": 2,
    "overlap": 3,
    "layer_overhead_us": 2,
    "compute_low_precision": 3,
}


def loss(costs: Iterable[PointCosts], efficiency: Efficiency) -> float:
    """Sum of squared log errors: a factor of 2 too high costs as much as 2 too low."""
    return sum(math.log(predict(c, efficiency) / c.point.measured) ** 2 for c in costs)


def fit(costs: Sequence[PointCosts]) -> Efficiency:
    """The efficiencies that minimise `loss` over `costs`, rounded to `DECIMALS`."""
    if not costs:
        raise SizingError("points", "the fit needs at least one measured point")
    names = tuple(GRID)
    best = min(
        (Efficiency(*values) for values in product(*(GRID[name] for name in names))),
        key=lambda e: loss(costs, e),
    )
    for _ in range(SWEEPS):
        before = best
        for name in names:
            best = _line_search(costs, best, name)
        if before == best:
            break
    return Efficiency(**{name: round(getattr(best, name), DECIMALS[name]) for name in names})


def _line_search(costs: Sequence[PointCosts], start: Efficiency, name: str) -> Efficiency:
    """Golden-section search of one efficiency over its whole range, the others held."""
    low, high = BOUNDS[name]

    def at(value: float) -> Efficiency:
        return replace(start, **{name: value})

    def f(value: float) -> float:
        return loss(costs, at(value))

    a, b = low, high
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    while b - a > 1e-6 * (high - low):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = f(d)
    found = (a + b) / 2
    return at(found) if f(found) < f(getattr(start, name)) else start


@dataclass(frozen=True, slots=True)
class PointError:
    point: MeasuredPoint
    predicted: float
    held_back: bool

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.point.measured - 1


@dataclass(frozen=True, slots=True)
class FitReport:
    efficiency: Efficiency
    errors: tuple[PointError, ...]

    @property
    def fitted_on(self) -> tuple[str, ...]:
        return tuple(e.point.id for e in self.errors if not e.held_back)

    @property
    def held_back(self) -> tuple[PointError, ...]:
        return tuple(e for e in self.errors if e.held_back)

    def within(self, fraction: float) -> float:
        """Share of the held-back points predicted within +/- fraction."""
        held = self.held_back
        return sum(1 for e in held if abs(e.error) <= fraction) / len(held)

    @property
    def median_abs_error(self) -> float:
        return percentile([abs(e.error) for e in self.held_back], 0.5)

    @property
    def error_band(self) -> float:
        """80th percentile (nearest rank) of |error| over the held-back points, to 0.01."""
        return round(percentile([abs(e.error) for e in self.held_back], 0.8), 2)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q of the values at or below."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def fit_report(
    points: Sequence[MeasuredPoint],
    models: Mapping[str, ModelArchitecture],
    gpus: Mapping[str, GpuPerformance],
    fitter: Callable[[Sequence[PointCosts]], Efficiency] = fit,
) -> FitReport:
    """Fit on the kept points and measure every point, held-back ones flagged."""
    costs = [point_costs(p, models[p.model], gpus[p.gpu]) for p in points]
    kept = [c for i, c in enumerate(costs) if not held_back(i)]
    efficiency = fitter(kept)
    errors = tuple(
        PointError(c.point, predict(c, efficiency), held_back(i)) for i, c in enumerate(costs)
    )
    return FitReport(efficiency, errors)


# --- held out by source (issue 22): fit on some sources, measure the others -------------------

# The sources FITTED (the NVIDIA efficiencies every answer uses) is fitted on; the data file's
# other sources are never fitted on by it.
FIT_SOURCES: Final = frozenset(
    {"trtllm-0.9.0-perf", "trtllm-falcon180b-h200-blog", "lmdeploy-a100-fp16", "gpt-fast-readme"}
)


@dataclass(frozen=True, slots=True)
class SourceHoldOut:
    """One point predicted by efficiencies fitted without any point of its source."""

    point: MeasuredPoint
    predicted: float
    efficiency: Efficiency

    @property
    def error(self) -> float:
        """predicted / measured - 1, as the metric reads (for a time, > 0 is too slow)."""
        return self.predicted / self.point.measured - 1

    @property
    def optimistic(self) -> bool:
        """The model promises more speed than measured: a shorter time, a higher rate."""
        slower_is_larger = self.point.metric in (Metric.TPOT_MS, Metric.TTFT_MS)
        return (self.error < 0) if slower_is_larger else (self.error > 0)


REFERENCE_VENDOR: Final = "NVIDIA"


def _refit(costs: Sequence[PointCosts], start: Efficiency, names: Sequence[str]) -> Efficiency:
    """Golden-section sweeps over `names` only, the other efficiencies held, rounded."""
    best = start
    for _ in range(SWEEPS):
        before = best
        for name in names:
            best = _line_search(costs, best, name)
        if before == best:
            break
    return replace(best, **{n: round(getattr(best, n), DECIMALS[n]) for n in names})


def vendor_fit(costs: Sequence[PointCosts], vendor: str) -> Efficiency:
    """Efficiencies for `vendor`'s GPUs: NVIDIA's fitted on the NVIDIA points (all seven);
    another vendor's (AMD) start from them and refit only the achievable bandwidth on its own
    points (`vendor_efficiency`). A vendor without points of
    its own gets NVIDIA's."""
    reference = [c for c in costs if c.point.vendor == REFERENCE_VENDOR] or list(costs)
    base = fit(reference)
    own = [c for c in costs if c.point.vendor == vendor]
    if vendor == REFERENCE_VENDOR or not own:
        return base
    return vendor_efficiency(own, base)


def vendor_efficiency(own: Sequence[PointCosts], base: Efficiency) -> Efficiency:
    """`base` (NVIDIA's) with the achievable memory bandwidth refitted on a vendor's own points:
    on ROCm the weights and the cache are streamed by other kernels (hipBLASLt, AITER, Triton)
    out of other memory (MI300X's HBM3 behind its Infinity Cache), and the fraction of the
    peak they reach is the vendor's, not NVIDIA's. The other efficiencies are kept: refitted
    on the AMD sources too they predict the held-out AMD sources worse than the bandwidth alone
    (median held-out error, AMD dense and AMD MoE: bandwidth alone 25.9% and 11.8%; with
    compute 29.2% and 14.7%; with the per-layer overhead 33.9% and 12.5%; with both 39.3% and
    15.8%; with expert parallelism timed, bandwidth alone still predicts them best: AMD median
    21.1% and 11 of 17 within 25%, against 21.5% and 9 with the per-layer overhead, 29.6-29.7%
    and 5 with either compute efficiency, 24.5-24.6% and 9 with the overlap or the all-reduce
    latency): the AMD runs mix expert parallelism, Triton attention and vLLM's and SGLang's
    schedulers, which those terms absorb and do not carry over."""
    return _refit(own, base, ["bandwidth"])


def leave_one_source_out(
    points: Sequence[MeasuredPoint],
    models: Mapping[str, ModelArchitecture],
    gpus: Mapping[str, GpuPerformance],
    fitter: Callable[[Sequence[PointCosts], str], Efficiency] = vendor_fit,
) -> tuple[SourceHoldOut, ...]:
    """Each source's points predicted by a fit on every other source (never by random rows:
    points of one source share an engine, a harness and a reading of the lengths)."""
    costs = [point_costs(p, models[p.model], gpus[p.gpu]) for p in points]
    sources = sorted({p.source_id for p in points})
    out: list[SourceHoldOut] = []
    for source in sources:
        rest = [c for c in costs if c.point.source_id != source]
        held = [c for c in costs if c.point.source_id == source]
        fitted: dict[str, Efficiency] = {}
        for c in held:
            vendor = c.point.vendor
            if vendor not in fitted:
                fitted[vendor] = fitter(rest, vendor)
            out.append(SourceHoldOut(c.point, predict(c, fitted[vendor]), fitted[vendor]))
    return tuple(out)
