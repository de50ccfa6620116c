"""`make bench`: the sizing engine's speed (medians, never asserted), its calibration tables,
and the HTTP benchmark (bench/http: kvplan served beside a bare FastAPI route).

python -m bench [--repeat N] [--http-only | --no-http | --speed-holdout | --rate-runs]
                [HTTP options, see --help]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service import calibration
from service.calibration import fits
from service.calibration.performance import run_fit
from service.catalog.seed import offline_snapshot
from service.planning import service as planning_service
from service.sizing import (
    GiB,
    Gpu,
    ModelArchitecture,
    Parallelism,
    PlanRequest,
    Workload,
    capacity,
    compute_capacity,
    parse_kv_cache_dtype,
    plan,
)
from service.sizing.engines import activation, kv, parallel, vllm
from service.sizing.planning import planner
from service.sizing.speed import performance
from service.sizing.speed import replica as speed
from service.sizing.speed.performance import ERROR_BAND, FITTED

from . import http as bench_http
from . import rate_runs, speed_holdout
from .http import cli as http_cli
from .rate_plan import bench_rate_plan
from .simulation import bench_simulation

CAPACITY_TARGET_US = 50.0
# The config.json fixtures the calibration cases name (tests/fixtures/hf_configs/SOURCES.md).
CONFIGS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf_configs"
PLAN_TARGET_MS = 5.0
# Warm: the memoised steps (per-token bytes, layouts, TP checks) are reused, as a serving
# replica reuses them across requests; cold: every cache cleared before each run.
COLD = {False: " (warm)", True: " (cold caches)"}


def seed_catalog() -> tuple[dict[str, ModelArchitecture], dict[str, Gpu]]:
    snapshot = offline_snapshot()
    models = {slug: entry.architecture for slug, entry in snapshot.models.items()}
    return models, {slug: entry.gpu for slug, entry in snapshot.gpus.items()}


# What a first question about a model, GPU and layout pays for. A release's rules
# (vllm.vllm_release) are a constant of the engine version, resolved once per process, so they
# stay warm, as the catalog's parsed architectures do.
_CACHES: tuple[Any, ...] = (
    kv.kv_bytes_per_token,
    vllm._vllm_groups,
    vllm.profile_peak,
    vllm.model_memory_usage,
    vllm.vllm_cudagraph_estimate,
    activation.forward_bytes_per_token,
    parallel.check_tensor_parallel,
    planner.tensor_parallel_problem,
    planner.candidate_capacity,
    planner._remembered,
    capacity._per_token_facts,
    capacity._checked_layout,
    vllm._checked_release,
    vllm._flags,
    vllm._worker_budget,
    vllm.vllm_budget,
    performance._bytes_per_parameter,
    performance._attention_terms,
    performance._cache_reads,
    performance._pass_constants,
    kv._per_layer_bytes,
    speed.gpu_performance,
    planning_service._interned_options,
)


def clear_caches() -> None:
    """Forget the memoised per-request steps, so a run pays for all the arithmetic."""
    for cached in _CACHES:
        cached.cache_clear()


def timings(
    fn: Callable[[], Any], repeat: int, warmup: int = 20, cold: bool = False
) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        if cold:
            clear_caches()
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def summary(samples: list[float], scale: float) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return statistics.median(samples) * scale, p90 * scale, min(samples) * scale


def bench_speed(repeat: int) -> None:
    models, gpus = seed_catalog()
    print("## Speed (medians; targets are compared as ratios, never asserted)\n")
    print("| what | median | p90 | min | target | median / target |")
    print("|---|---|---|---|---|---|")
    cases = [
        ("llama-3.1-70b", "h100-sxm-80gb", 4, "fp8", 32768),
        ("qwen3.5-27b", "h200-141gb", 1, "fp8", 131072),
        ("gpt-oss-120b", "h100-sxm-80gb", 2, "auto", 131072),
        ("deepseek-v3", "h200-141gb", 8, "auto", 65536),
    ]
    for slug, gpu, tp, dtype, ctx in cases:
        arch, g = models[slug], gpus[gpu]
        workload, parallel = Workload(ctx, parse_kv_cache_dtype(dtype)), Parallelism(tp)

        def one(
            arch: ModelArchitecture = arch,
            g: Gpu = g,
            w: Workload = workload,
            p: Parallelism = parallel,
        ) -> None:
            compute_capacity(arch, g, w, p)

        for cold in (False, True):
            med, p90, low = summary(timings(one, repeat, cold=cold), 1e6)
            print(
                f"| capacity {slug} on {gpu} tp{tp} {dtype} {ctx}{COLD[cold]} | {med:.1f} us | "
                f"{p90:.1f} us | {low:.1f} us | {CAPACITY_TARGET_US:.0f} us | "
                f"{med / CAPACITY_TARGET_US:.2f} |"
            )
    all_gpus = list(gpus.values())
    for slug in ("llama-3.1-70b", "qwen3.5-27b", "deepseek-v3"):
        arch = models[slug]

        def full_plan(arch: ModelArchitecture = arch) -> None:
            for dtype in ("auto", "fp8"):
                plan(
                    arch,
                    all_gpus,
                    PlanRequest(
                        max_model_len=32768,
                        peak_concurrency=256,
                        kv_cache_dtype=parse_kv_cache_dtype(dtype),
                    ),
                )

        count = (
            sum(
                1
                for g in all_gpus
                for tp in range(1, g.max_gpus_per_node + 1)
                if arch.num_attention_heads % tp == 0
            )
            * 2
        )
        for cold in (False, True):
            samples = timings(full_plan, max(20, repeat // 50), warmup=3, cold=cold)
            med, p90, low = summary(samples, 1e3)
            print(
                f"| plan {slug}: {len(all_gpus)} GPUs x tp x 2 KV dtypes ({count} capacities)"
                f"{COLD[cold]} | {med:.2f} ms | {p90:.2f} ms | {low:.2f} ms | "
                f"{PLAN_TARGET_MS:.0f} ms | {med / PLAN_TARGET_MS:.2f} |"
            )
    print()


def bench_calibration(configs: Path = CONFIGS) -> None:
    """Every log: kvplan's budget from the GPU alone beside the logged one, and the summary."""
    models, gpus = seed_catalog()
    sources = calibration.Models(models, gpus, configs)
    rows = calibration.compare_all(sources)
    print("## Calibration: the budget kvplan predicts from the GPU alone vs the engine's log\n")
    print(
        "GiB per GPU, predicted / logged (- where the log prints none). Error: the pool's "
        "difference as a share of the budget (utilization x total). Role: fit = a constant of "
        "service/sizing/engines/calibration.py was fitted to this log; held-out = not used for "
        "fitting. C = complete (the log prints weights, activation peak, non-torch and pool).\n"
    )
    print(
        "| log | engine | role | C | pool | error | weights | activation | non-torch | "
        "CUDA graphs (estimate; captured) | note |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(_calibration_row(row))
    _calibration_summary(calibration.summarize(rows))
    print("\n### Fitted constants, refitted from their logs\n")
    print("| constant | shipped | refitted | fitted on | left out |")
    print("|---|---|---|---|---|")
    for fit in fits.refit(rows, sources):
        print(
            f"| {fit.constant} | {fit.shipped:.4g} {fit.unit} | {fit.refitted:.4g} {fit.unit} | "
            f"{', '.join(fit.logs)} | {fit.left_out or '-'} |"
        )
    print("\n### The log's own pool, replayed\n")
    print(
        "kvplan fed the pool the log printed (as its block or token count where it prints "
        "one): the lines it prints, and whether tokens and concurrency equal the log's.\n"
    )
    print("| log | pool GiB | kvplan prints | logged tokens; concurrency | equal |")
    print("|---|---|---|---|---|")
    for row in rows:
        replayed = calibration.replay(row, sources)
        if replayed is not None:
            print(_replay_row(row, replayed))
    print()


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GiB:.2f}"


def _pair(predicted: int | None, logged: int | None) -> str:
    return f"{_gib(predicted)} / {_gib(logged)}"


def _calibration_row(row: calibration.Row) -> str:
    item, logged, p = row.item, row.logged, row.predicted
    version = item.case.get("engine_version") or "?"
    error = "-" if row.error is None else f"{row.error:+.2%}"
    if p is None:
        cells = [
            "- / " + _gib(logged.pool),
            error,
            *("- / " + _gib(v) for v in (logged.weights, logged.activation, logged.non_torch)),
        ]
        graphs = f"- / {_gib(logged.cudagraph_estimate)}; {_gib(logged.cudagraph_captured)}"
        note = row.why_not or ""
    else:
        cells = [
            _pair(p.pool, logged.pool),
            error,
            _pair(p.weights, logged.weights),
            _pair(p.activation, logged.activation),
            _pair(p.non_torch, logged.non_torch),
        ]
        graphs = (
            f"{_pair(p.cudagraph_estimate, logged.cudagraph_estimate)}; "
            f"{_gib(logged.cudagraph_captured)}"
            + (" (subtracted)" if p.cudagraph_subtracted else "")
        )
        note = _model_source(item.case.get("model") or {})
    complete = "C" if item.complete else ""
    return (
        f"| {item.id} | {item.engine.value} {version} | {item.role} | {complete} | "
        + " | ".join(cells)
        + f" | {graphs} | {note} |"
    )


def _model_source(model: Any) -> str:
    """Where the case's model comes from, in a few words (cases.json says more)."""
    source = f"config {model['config']}" if "config" in model else f"catalog {model['catalog']}"
    if "quantization_config" in model:
        source += " + the quantization the log states"
    if "weight_format" in model:
        source += f" at {model['weight_format']}"
    return source


def _calibration_summary(summary: calibration.Summary) -> None:
    c = summary.complete
    print(
        f"\nComplete logs: {c.logs}; kvplan sizes {c.sized} of them (no model for: "
        f"{', '.join(summary.not_sized) or 'none'})."
    )
    for name, part in (
        ("complete", c),
        ("complete, fitted", summary.complete_fitted),
        ("complete, held out", summary.complete_held_out),
        ("every log with a logged pool", summary.every_log),
    ):
        median = "-" if part.median is None else f"{part.median:.2%}"
        print(
            f"- {name}: within {calibration.WITHIN:.0%} of the budget {part.within} of "
            f"{part.sized} sized ({part.share:.0%}; {part.within} of {part.logs} = "
            f"{part.share_of_all:.0%} counting the unsized as misses), median |error| {median}"
        )
    print(
        f"\nTargets (issue 7): at least {calibration.TARGET_SHARE:.0%} of the complete logs "
        f"kvplan sizes within {calibration.WITHIN:.0%}, median at most "
        f"{calibration.TARGET_MEDIAN:.1%}: {'met' if summary.meets_targets else 'NOT met'}."
    )


def _replay_row(row: calibration.Row, replayed: calibration.Replay) -> str:
    r = row.item.parsed.reported
    logged = f"{r.kv_cache_tokens or r.max_total_num_tokens or '-'}; {r.max_concurrency or '-'}"
    equal = {True: "yes", False: "NO", None: "-"}[replayed.exact]
    return (
        f"| {row.item.id} | {replayed.pool_bytes / GiB:.2f} | {'; '.join(replayed.lines)} | "
        f"{logged} | {equal} |"
    )


def bench_performance() -> None:
    """The performance model's calibration points, the fit, and the held-back error."""
    report = run_fit()
    print("## Performance model: published measurements, the fit, the held-back error\n")
    print(
        "| point | engine | model | GPU | tp | batch | in/out | metric | measured | "
        "predicted | error | fit/held |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e in report.errors:
        p = e.point
        print(
            f"| {p.id} | {p.engine} | {p.model} | {p.gpu} | {p.tensor_parallel_size} | "
            f"{p.batch} | {p.input_tokens}/{p.output_tokens} | {p.metric.value} | "
            f"{p.measured:,.1f} | {e.predicted:,.1f} | {e.error:+.1%} | "
            f"{'held back' if e.held_back else 'fit'} |"
        )
    sources = sorted({e.point.source for e in report.errors})
    print(f"\n{len(report.errors)} points from {len(sources)} sources:")
    for source in sources:
        count = sum(1 for e in report.errors if e.point.source == source)
        print(f"- {count} from {source}")
    held = report.held_back
    print(
        f"\nFitted on {len(report.fitted_on)} points: {report.efficiency}\n"
        f"Shipped (service/sizing/speed/performance.py FITTED): {FITTED}"
        f"{'' if report.efficiency == FITTED else '  <- differs: re-run the fit'}\n"
        f"Held back {len(held)} points: {report.within(0.25):.0%} within +/-25% "
        f"(target 70%), median |error| {report.median_abs_error:.1%}, error band (80th "
        f"percentile of |error|) {report.error_band:.0%} (shipped ERROR_BAND {ERROR_BAND:.0%})\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument(
        "--simulated-requests", type=int, default=100_000, help="the traffic simulator's run"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--http-only", action="store_true", help="the HTTP benchmark alone")
    which.add_argument("--no-http", action="store_true", help="everything but the HTTP one")
    which.add_argument(
        "--speed-holdout",
        action="store_true",
        help="the speed model's error on published runs held out by source, alone (seconds)",
    )
    which.add_argument(
        "--rate-runs",
        action="store_true",
        help="the traffic simulator against public request-rate runs, alone (seconds)",
    )
    http_cli.add_arguments(parser)
    args = parser.parse_args()
    if args.speed_holdout:
        speed_holdout.run()
        return
    if args.rate_runs:
        rate_runs.run()
        return
    if not args.http_only:
        bench_speed(args.repeat)
        bench_calibration()
        bench_performance()
        speed_holdout.run()
        bench_simulation(args.simulated_requests)
        rate_runs.run()
        bench_rate_plan()
    if not args.no_http:
        bench_http.run(http_cli.from_arguments(args))


if __name__ == "__main__":
    main()
