"""`make bench` workload: the traffic simulator against public request-rate runs (issue 23).

Every run of service/calibration/rate_runs.json (a `vllm bench serve` run at a finite Poisson
rate, with its source) is simulated by the use case POST /v1/simulations runs, on the shipped
catalog, and each printed figure (TTFT and TPOT: mean, median, P99) is set beside kvplan's.
Fitted on none of them: the speed model's constants come from performance_points.json's fit
sources, the scheduler from vLLM's code. Prints the error run by run, by source and by
statistic: median |error| and the share within +/-25%, and kvplan's own spread over five
seeds (one draw of a few hundred requests near saturation moves its median a lot). In process,
seconds:
`python -m bench --rate-runs`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence

from service.calibration.rate_runs import (
    METRICS,
    STATISTICS,
    RateRun,
    RunError,
    errors,
    lengths,
    load_document,
    load_runs,
    simulate,
)
from service.catalog.seed import offline_snapshot
from service.simulations.schemas import SimulationAnswer

WITHIN = 0.25
# Other draws of the same workload: kvplan's own spread at the run's sample size.
SEEDS = range(5)


def summary(found: Sequence[RunError]) -> tuple[int, float, float]:
    """(figures, median |error|, share within +/-25%)."""
    absolute = [abs(e.error) for e in found]
    return len(found), statistics.median(absolute), sum(a <= WITHIN for a in absolute) / len(found)


def _cell(found: Sequence[RunError], metric: str, statistic: str) -> str:
    for e in found:
        if e.metric == metric and e.statistic == statistic:
            return f"{e.measured:,.1f} / {e.predicted:,.1f} ({e.error:+.0%})"
    return "-"


def _run_row(run: RateRun, answer: SimulationAnswer, found: Sequence[RunError]) -> str:
    prompts, answers = lengths(run)
    cells = [
        _cell(found, metric, statistic) for metric, _ in METRICS for statistic, _ in STATISTICS
    ]
    served = (
        f"{run.measured['request_throughput']:.2f} / {answer.throughput.requests_per_second:.2f}"
    )
    return (
        f"| {run.id} | {run.request_rate:g} | {run.num_prompts} | "
        f"[{prompts[0][0]}, {prompts[0][1]}] / [{answers[0][0]}, {answers[0][1]}] | {served} | "
        + " | ".join(cells)
        + " |"
    )


def _table(
    title: str, found: Iterable[RunError], key: Callable[[RunError], str], runs: bool = True
) -> None:
    groups: dict[str, list[RunError]] = {}
    for e in found:
        groups.setdefault(key(e), []).append(e)
    print(f"\n| {title} | runs | figures | median abs error | within 25% |")
    print("|---|---:|---:|---:|---:|")
    for name in sorted(groups):
        n, median, within = summary(groups[name])
        count = len({e.run.id for e in groups[name]}) if runs else "-"
        print(f"| {name} | {count} | {n} | {median:.0%} | {within:.0%} |")


def _header() -> None:
    print("\n## The simulation against public request-rate runs (issue 23)\n")
    print(
        "Each run simulated by POST /v1/simulations' use case on the shipped catalog (seed 0, "
        "as many requests as the run sent), fitted on none of them. Lengths: uniform "
        "[4, top] tokens with the run's own mean (rate_runs.json `lengths`). Cells: measured / "
        "kvplan (error = (kvplan - measured) / measured); ms.\n"
    )
    heads = [f"{name} {word}" for _, name in METRICS for _, word in STATISTICS]
    print(
        "| run | req/s offered | prompts | prompt / answer tokens | req/s served (measured / "
        "kvplan) | " + " | ".join(heads) + " |"
    )
    print("|---|---:|---:|---|---|" + "---|" * len(heads))


def _seed_spread(runs: Sequence[RateRun]) -> None:
    """kvplan's figures over other seeds: how much of an error a 200- or 500-request draw
    alone moves (the runs themselves printed one draw each)."""
    catalog = offline_snapshot()
    print(
        f"\nkvplan's spread over seeds {SEEDS.start}-{SEEDS.stop - 1} (same rate, lengths and "
        "number of requests; min - max, ms):\n"
    )
    print("| run | TTFT median | TTFT P99 | TPOT median | TPOT P99 |")
    print("|---|---|---|---|---|")
    for rate_run in runs:
        answers = [simulate(rate_run, catalog, seed) for seed in SEEDS]
        cells = []
        for metric, _ in METRICS:
            for statistic in ("p50", "p99"):
                values = [getattr(getattr(a, metric), statistic) or math.nan for a in answers]
                cells.append(f"{min(values):,.1f} - {max(values):,.1f}")
        print(f"| {rate_run.id} | " + " | ".join(cells) + " |")


def run() -> list[RunError]:
    """Simulate every run, print the tables, return every figure's error."""
    catalog, runs = offline_snapshot(), load_runs()
    sources = load_document()["sources"]
    _header()
    found: list[RunError] = []
    for rate_run in runs:
        answer = simulate(rate_run, catalog)
        mine = errors(rate_run, answer)
        print(_run_row(rate_run, answer, mine))
        found.extend(mine)
    _seed_spread(runs)
    _table("source", found, lambda e: e.run.source)
    _table("metric", found, lambda e: dict(METRICS)[e.metric])
    _table("metric x statistic", found, lambda e: f"{e.metric} {e.statistic}")
    n, median, within = summary(found)
    print(
        f"\nAll {n} figures of {len(runs)} runs from {len(sources)} sources, fitted on none: "
        f"median |error| {median:.0%}, {within:.0%} within +/-{WITHIN:.0%}\n"
    )
    return found


if __name__ == "__main__":
    run()
