"""`make bench`: the sizing engine's speed (medians, never asserted) and its calibration table.

python -m service.bench [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from .calibration import compare, engine_options, load_cases, logged_pool_bytes
from .calibration.performance import run_fit
from .catalog.seed import offline_snapshot
from .sizing import (
    EngineOptions,
    GiB,
    Gpu,
    ModelArchitecture,
    Parallelism,
    PlanRequest,
    Workload,
    compute_capacity,
    kv,
    parallel,
    plan,
    planner,
)
from .sizing.engines import activation, vllm
from .sizing.performance import ERROR_BAND, FITTED

CAPACITY_TARGET_US = 50.0
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
    kv.sequence_breakdown,
    vllm.vllm_layout,
    activation.forward_bytes_per_token,
    parallel.check_tensor_parallel,
    planner.tensor_parallel_problem,
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
        workload, parallel = Workload(ctx, dtype), Parallelism(tp)

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
                    PlanRequest(max_model_len=32768, peak_concurrency=256, kv_cache_dtype=dtype),
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


def bench_calibration() -> None:
    models, gpus = seed_catalog()
    print("## Calibration: predicted KV pool per GPU vs the engine's log\n")
    print(
        "| case | engine | complete | predicted GiB | logged GiB | error | blocks/tokens "
        "from the log's own pool |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in load_cases():
        if not case.get("model") or not case.get("gpu"):
            why = case.get("why_incomplete", "")
            print(f"| {case['id']} | {case['engine']} | no | - | - | - | {why} |")
            continue
        result = compare(case, models[case["model"]], gpus[case["gpu"]])
        exact = _log_arithmetic(case, models[case["model"]], gpus[case["gpu"]])
        print(
            f"| {case['id']} | {case['engine']} {case['engine_version']} | "
            f"{'yes' if result.complete else 'no'} | "
            f"{result.predicted_pool_bytes / GiB:.3f} | {result.logged_pool_bytes / GiB:.3f} | "
            f"{result.error:+.2%} | {exact} |"
        )
    print(
        "\nComplete cases must stay within 5%; incomplete ones are shown with the reason in "
        "service/calibration/engine_logs.json.\n"
    )


def _log_arithmetic(case: dict[str, Any], arch: ModelArchitecture, gpu: Gpu) -> str:
    """Feed the log's own pool back in and show what the engine would print."""
    options = engine_options(case)
    workload = Workload(case["max_model_len"], case.get("kv_cache_dtype") or "auto")
    parallel = Parallelism(case.get("tensor_parallel_size") or 1)
    probe = compute_capacity(arch, gpu, workload, parallel, options)
    pool = logged_pool_bytes(case, probe)
    given = EngineOptions(**{**_fields(options), "kv_pool_bytes": pool})
    again = compute_capacity(arch, gpu, workload, parallel, given)
    return "; ".join(again.report.log_lines)


def _fields(options: EngineOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in options.__slots__}


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
        f"Shipped (service/sizing/performance.py FITTED): {FITTED}"
        f"{'' if report.efficiency == FITTED else '  <- differs: re-run the fit'}\n"
        f"Held back {len(held)} points: {report.within(0.25):.0%} within +/-25% "
        f"(target 70%), median |error| {report.median_abs_error:.1%}, error band (80th "
        f"percentile of |error|) {report.error_band:.0%} (shipped ERROR_BAND {ERROR_BAND:.0%})\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    bench_speed(args.repeat)
    bench_calibration()
    bench_performance()


if __name__ == "__main__":
    main()
