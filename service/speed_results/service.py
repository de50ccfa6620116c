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

A guidellm report holds several runs (a sweep: one benchmark per strategy): each is compared
at its own shape (`benchmarks` in the answer), and the one `benchmark` names (or the only one)
is the answer's `run`, `figures` and `step_time_scale`, and what a speed calibration keeps. A
benchmark that cannot be compared (no request completed, an inter-token latency of 0) is
listed with the reason and the field, unless it is the one asked, which is then a 422.
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
from .parser import BenchRun, NotCompared, Report, choose, parse_report
from .schemas import BenchmarkOut, ComparedOut, RunOut, SpeedResultAnswer


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


def _run_out(run: BenchRun, shape: RunShape) -> RunOut:
    return RunOut(
        tool=run.tool,
        strategy=run.strategy,
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
    )


def _benchmark_out(index: int, compared: BenchComparison | NotCompared) -> BenchmarkOut:
    if isinstance(compared, NotCompared):
        return BenchmarkOut(
            index=index,
            strategy=compared.strategy,
            run=None,
            figures=[],
            step_time_scale=None,
            estimate_unavailable=None,
            not_compared=(
                compared.reason
                if compared.field in compared.reason
                else f"{compared.field}: {compared.reason}"
            ),
        )
    return BenchmarkOut(
        index=index,
        strategy=compared.run.strategy,
        run=_run_out(compared.run, compared.shape),
        figures=[
            ComparedOut(name=f.name, measured=f.measured, estimated=f.estimated, ratio=f.ratio)
            for f in compared.figures
        ],
        step_time_scale=compared.step_time_scale,
        estimate_unavailable=compared.unavailable,
        not_compared=None,
    )


def compare_report(
    report: Report, question: CapacityQuestion, catalog: CatalogSnapshot, benchmark: int | None
) -> tuple[int | None, list[BenchComparison | NotCompared]]:
    """Each run of the file beside kvplan's estimate; the index of the one asked (or of the
    only one), None for several when none was asked. The run asked must compare (else its 422);
    another that cannot is `NotCompared`, the reason named."""
    chosen = None
    if benchmark is not None or len(report) == 1:
        choose(report, benchmark)  # 422 naming `benchmark` or the run's field
        chosen = benchmark or 0
    compared: list[BenchComparison | NotCompared] = []
    for index, run in enumerate(report):
        if isinstance(run, NotCompared):
            compared.append(run)
            continue
        try:
            compared.append(compare(run, question, catalog))
        except InvalidRequest as exc:
            if index == chosen:
                raise
            compared.append(NotCompared(run.strategy, exc.detail, exc.field or "result"))
    return chosen, compared


def answer(
    chosen: int | None, compared: list[BenchComparison | NotCompared], detail: CapacityDetail
) -> SpeedResultAnswer:
    benchmarks = [_benchmark_out(index, c) for index, c in enumerate(compared)]
    one = None if chosen is None else benchmarks[chosen]
    return SpeedResultAnswer(
        benchmark=chosen,
        run=None if one is None else one.run,
        figures=[] if one is None else one.figures,
        step_time_scale=None if one is None else one.step_time_scale,
        estimate_unavailable=None if one is None else one.estimate_unavailable,
        benchmarks=benchmarks,
        capacity=detail,
    )


def explain_result(
    result: object,
    question: CapacityQuestion,
    catalog: CatalogSnapshot,
    benchmark: int | None = None,
) -> SpeedResultAnswer:
    """Parse the file, compare each run, answer: every door's one use case."""
    chosen, compared = compare_report(parse_report(result), question, catalog, benchmark)
    done = [c for c in compared if isinstance(c, BenchComparison)]
    if done:
        detail = done[0].detail
    else:  # no run of the report compares: the deployment's answer alone
        detail = planning.capacity(dataclasses.replace(question, explain=False), catalog)
    return answer(chosen, compared, detail)
