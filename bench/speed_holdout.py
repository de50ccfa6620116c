"""`make bench` workload: the speed model's error on published runs held out by source.

Every source of service/calibration/performance_points.json is held out in turn: the
efficiencies are fitted (per GPU vendor, service/sizing/speed/performance_fit.py `vendor_fit`)
on every other source, and the held-out source's points are predicted. Split by source, never
by random rows. Prints the error by source and by class (vendor, dense/MoE/MoE+MLA, batch,
prompt length): median |error|, the share within +/-25%, and how many are optimistic (the model
promises more speed than measured). In process, seconds: `python -m bench --speed-holdout`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence

from service.calibration.performance import catalog_models, run_source_hold_out
from service.sizing import Metric, SourceHoldOut
from service.sizing.speed.performance import layer_kind

TARGET_MEDIAN = 0.15
TARGET_WITHIN = 0.80


def batch_bucket(e: SourceHoldOut) -> str:
    if e.point.metric is Metric.TTFT_MS:
        return "prefill alone"
    b = e.point.batch
    if b == 1:
        return "batch 1"
    if b <= 16:
        return "batch 2-16"
    if b <= 128:
        return "batch 17-128"
    return "batch > 128"


def prompt_bucket(e: SourceHoldOut) -> str:
    p = e.point.input_tokens
    if p <= 256:
        return "prompt <= 256"
    if p <= 2048:
        return "prompt 257-2048"
    return "prompt > 2048"


def summary(errors: Sequence[SourceHoldOut]) -> tuple[int, float, float, int]:
    """(points, median |error|, share within 25%, optimistic points)."""
    absolute = [abs(e.error) for e in errors]
    within = sum(1 for a in absolute if a <= 0.25) / len(absolute)
    return len(errors), statistics.median(absolute), within, sum(e.optimistic for e in errors)


def _table(
    title: str, errors: Iterable[SourceHoldOut], key: Callable[[SourceHoldOut], str]
) -> None:
    groups: dict[str, list[SourceHoldOut]] = {}
    for e in errors:
        groups.setdefault(key(e), []).append(e)
    print(f"\n| {title} | points | median abs error | within 25% | optimistic |")
    print("|---|---:|---:|---:|---:|")
    for name in sorted(groups):
        n, median, within, optimistic = summary(groups[name])
        print(f"| {name} | {n} | {median:.1%} | {within:.0%} | {optimistic}/{n} |")


def run() -> tuple[SourceHoldOut, ...]:
    errors = run_source_hold_out()
    models = catalog_models()
    print("\n## Speed model held out by source (issue 22)\n")
    print("| point | metric | measured | predicted | error |")
    print("|---|---|---:|---:|---:|")
    for e in errors:
        print(
            f"| {e.point.id} | {e.point.metric.value} | {e.point.measured:,.2f} | "
            f"{e.predicted:,.2f} | {e.error:+.0%} |"
        )
    _table("source", errors, lambda e: e.point.source_id)
    _table("vendor", errors, lambda e: e.point.vendor)
    _table("layers", errors, lambda e: layer_kind(models[e.point.model]))
    _table(
        "vendor x layers", errors, lambda e: f"{e.point.vendor} {layer_kind(models[e.point.model])}"
    )
    _table("batch", errors, batch_bucket)
    _table("prompt", errors, prompt_bucket)
    n, median, within, optimistic = summary(errors)
    print(
        f"\nAll {n} points, each predicted without its source: median |error| {median:.1%} "
        f"(target <= {TARGET_MEDIAN:.0%}), {within:.0%} within +/-25% (target >= "
        f"{TARGET_WITHIN:.0%}), {optimistic} optimistic\n"
    )
    return errors


if __name__ == "__main__":
    run()
