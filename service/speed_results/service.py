"""A benchmark run set against kvplan's estimate of the same run (POST /v1/speed-results, the
CLI's `explain-bench`). Stores nothing.

The run's shape is read from its own file (`parser.BenchRun`): the batch is its concurrency
(`max_concurrency` for a closed loop; otherwise requests in flight by Little's law, request
throughput x mean end-to-end latency, rounded); each sequence's context is the mean prompt
plus half the mean output (the middle of its decode); the prefill is one mean prompt. The
estimate is the capacity question's replica at that shape (`planning.service.speed_at`,
through the `service.sizing` facade), so the model, GPU, layout and engine flags are the
deployment's, named as on every other door.

Compared, each as measured / estimated (above 1: the run was slower, or for throughput
faster, than kvplan said):

* `mean_tpot_ms` and `mean_itl_ms` against the decode step at the batch
  (`decode_ms_per_token`);
* `mean_ttft_ms` against the prefill of one mean prompt alone (`prefill_ms`): no queueing,
  so a loaded run's TTFT is above it by its wait;
* `output_throughput` (closed loop only) against batch x mean output tokens over one
  request's time, TTFT + (output - 1) x TPOT; an open-loop run's throughput is its offered
  rate, which says nothing of the engine's speed, and is not compared.

`step_time_scale` is the measured TPOT over the estimated one: the factor on kvplan's decode
step that this run measured.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..catalog.snapshot import CalibrationKey, CatalogSnapshot
from ..kit.errors import InvalidRequest
from ..planning import service as planning
from ..planning.schemas import CapacityDetail
from ..planning.service import CapacityQuestion
from ..sizing import NoEstimate, PerformanceEstimate
from .parser import BenchRun, parse_result
from .schemas import ComparedOut, RunOut, SpeedResultAnswer


@dataclass(frozen=True, slots=True)
class RunShape:
    """Where the estimate is asked: the run's batch, context per sequence and prompt."""

    batch: int
    context_tokens: int
    prompt_tokens: int
    concurrency: float


@dataclass(frozen=True, slots=True)
class Compared:
    """One figure of the run beside kvplan's estimate of it."""

    name: str
    measured: float | None
    estimated: float | None

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.estimated:
            return None
        return self.measured / self.estimated


@dataclass(frozen=True, slots=True)
class BenchComparison:
    run: BenchRun
    shape: RunShape
    detail: CapacityDetail
    estimate: PerformanceEstimate | None
    unavailable: str | None  # why there is no estimate
    figures: tuple[Compared, ...]
    key: CalibrationKey | None  # the deployment's calibration key; None for an inline model

    @property
    def step_time_scale(self) -> float | None:
        tpot = next(f for f in self.figures if f.name == "mean_tpot_ms")
        return tpot.ratio


def run_shape(run: BenchRun) -> RunShape:
    concurrency = run.mean_concurrency
    if concurrency is None:
        raise InvalidRequest(
            "the result gives no concurrency: neither max_concurrency nor request_throughput "
            "with a mean latency (TTFT and TPOT, or E2E) to count requests in flight by",
            field="result",
        )
    return RunShape(
        batch=max(1, round(concurrency)),
        context_tokens=max(1, round(run.mean_input_tokens + run.mean_output_tokens / 2)),
        prompt_tokens=max(1, round(run.mean_input_tokens)),
        concurrency=concurrency,
    )


def closed_loop_throughput(
    batch: int, output_tokens: float, ttft_ms: float, tpot_ms: float
) -> float:
    """Output tokens/s of `batch` clients each waiting for its answer before the next:
    batch x output tokens per request over one request's time (TTFT + (output - 1) x TPOT)."""
    return batch * output_tokens * 1e3 / (ttft_ms + (output_tokens - 1) * tpot_ms)


def _figures(
    run: BenchRun, shape: RunShape, estimate: PerformanceEstimate | None
) -> tuple[Compared, ...]:
    tpot = None if estimate is None else estimate.decode_ms_per_token
    ttft = None if estimate is None else estimate.prefill_ms
    throughput = None
    if estimate is not None and run.max_concurrency is not None:
        throughput = closed_loop_throughput(
            shape.batch, run.mean_output_tokens, estimate.prefill_ms, estimate.decode_ms_per_token
        )
    return (
        Compared("mean_tpot_ms", run.mean_tpot_ms, tpot),
        Compared("mean_itl_ms", run.mean_itl_ms, tpot),
        Compared("mean_ttft_ms", run.mean_ttft_ms, ttft),
        Compared(
            "output_throughput",
            run.output_throughput if run.max_concurrency is not None else None,
            throughput,
        ),
    )


def compare(run: BenchRun, question: CapacityQuestion, catalog: CatalogSnapshot) -> BenchComparison:
    """The run beside kvplan's estimate for the deployment `question` names."""
    shape = run_shape(run)
    question = dataclasses.replace(question, explain=False)
    estimated = planning.speed_at(
        question,
        catalog,
        batch=shape.batch,
        context_tokens=shape.context_tokens,
        prompt_tokens=shape.prompt_tokens,
    )
    detail, speed = estimated.detail, estimated.speed
    estimate = speed if isinstance(speed, PerformanceEstimate) else None
    unavailable = speed.reason if isinstance(speed, NoEstimate) else None
    figures = _figures(run, shape, estimate)
    return BenchComparison(run, shape, detail, estimate, unavailable, figures, estimated.key)


def answer(comparison: BenchComparison) -> SpeedResultAnswer:
    run, shape = comparison.run, comparison.shape
    return SpeedResultAnswer(
        run=RunOut(
            tool=run.tool,
            model_id=run.model_id,
            completed=run.completed,
            mean_input_tokens=run.mean_input_tokens,
            mean_output_tokens=run.mean_output_tokens,
            max_concurrency=run.max_concurrency,
            request_rate=run.request_rate,
            concurrency=shape.concurrency,
            batch=shape.batch,
            context_tokens=shape.context_tokens,
            prompt_tokens=shape.prompt_tokens,
        ),
        figures=[
            ComparedOut(name=f.name, measured=f.measured, estimated=f.estimated, ratio=f.ratio)
            for f in comparison.figures
        ],
        step_time_scale=comparison.step_time_scale,
        estimate_unavailable=comparison.unavailable,
        capacity=comparison.detail,
    )


def explain_result(
    result: object, question: CapacityQuestion, catalog: CatalogSnapshot
) -> SpeedResultAnswer:
    """Parse the file, compare, answer: every door's one use case."""
    return answer(compare(parse_result(result), question, catalog))
