"""A run's statistics: latency percentiles, throughput, goodput, the engine's load.

Definitions (as `vllm bench serve` reports them, vllm/benchmarks/serve.py `calculate_metrics`):
time to first token (TTFT) from arrival to the first token; time per output token (TPOT)
(e2e - TTFT) / (output_tokens - 1), for requests of more than one output token; end-to-end
latency from arrival to the last token. Percentiles are linear between order statistics (the
"linear" method of numpy.percentile, which vllm bench uses). Throughput is over the run, from
time 0 to the last token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .engine import Run, Sample


@dataclass(frozen=True, slots=True)
class Distribution:
    mean: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True, slots=True)
class Throughput:
    requests_per_second: float
    output_tokens_per_second: float


@dataclass(frozen=True, slots=True)
class Targets:
    """Service-level targets a request must meet to count as goodput (None: no target)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_latency_ms: float | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2e_latency_ms))


@dataclass(frozen=True, slots=True)
class Goodput:
    requests_per_second: float
    fraction: float  # of completed requests meeting every target


@dataclass(frozen=True, slots=True)
class Summary:
    completed_requests: int
    rejected_requests: int
    duration_s: float
    ttft_ms: Distribution
    tpot_ms: Distribution
    e2e_latency_ms: Distribution
    queue_time_ms: Distribution
    throughput: Throughput
    goodput: Goodput | None
    mean_running: float
    mean_waiting: float
    mean_kv_usage: float
    peak_kv_usage: float
    preemptions: int
    steps: int
    samples: tuple[Sample, ...]


def percentile(ordered: Sequence[float], q: float) -> float:
    """numpy.percentile's linear method on sorted values."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def distribution(values: Sequence[float]) -> Distribution:
    ordered = sorted(values)
    mean = math.fsum(ordered) / len(ordered) if ordered else math.nan
    return Distribution(
        mean, percentile(ordered, 50), percentile(ordered, 90), percentile(ordered, 99)
    )


def summarise(run: Run, num_gpu_blocks: int, targets: Targets | None = None) -> Summary:
    done = run.finished
    ttft = [(f.first_token_s - f.arrival_s) * 1e3 for f in done]
    e2e = [(f.finished_s - f.arrival_s) * 1e3 for f in done]
    tpot = [
        (f.finished_s - f.first_token_s) * 1e3 / (f.output_tokens - 1)
        for f in done
        if f.output_tokens > 1
    ]
    queue = [(f.scheduled_s - f.arrival_s) * 1e3 for f in done]
    duration = run.end_s
    per_s = 1 / duration if duration > 0 else 0.0
    goodput = None
    if targets is not None and targets.given:
        good = sum(
            1
            for f, t, e in zip(done, ttft, e2e, strict=True)
            if (targets.ttft_ms is None or t <= targets.ttft_ms)
            and (targets.e2e_latency_ms is None or e <= targets.e2e_latency_ms)
            and (
                targets.tpot_ms is None
                or f.output_tokens == 1
                or (e - t) / (f.output_tokens - 1) <= targets.tpot_ms
            )
        )
        goodput = Goodput(good * per_s, good / len(done) if done else 0.0)
    return Summary(
        completed_requests=len(done),
        rejected_requests=run.rejected,
        duration_s=duration,
        ttft_ms=distribution(ttft),
        tpot_ms=distribution(tpot),
        e2e_latency_ms=distribution(e2e),
        queue_time_ms=distribution(queue),
        throughput=Throughput(len(done) * per_s, sum(f.output_tokens for f in done) * per_s),
        goodput=goodput,
        mean_running=run.running_time_integral * per_s,
        mean_waiting=run.waiting_time_integral * per_s,
        mean_kv_usage=run.kv_time_integral * per_s / num_gpu_blocks,
        peak_kv_usage=run.peak_kv_blocks / num_gpu_blocks,
        preemptions=run.preemptions,
        steps=run.steps,
        samples=run.samples,
    )
