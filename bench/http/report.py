"""The benchmark's tables: medians of the runs, ratios to the baseline, issue 9's targets."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

from service.kit import server
from service.kit.settings import Settings

from .stats import Summary, summarize

if TYPE_CHECKING:
    from .in_process import InProcess
    from .run import Bench, Target

MiB = 1 << 20
# Issue 9's targets: measured here, never asserted in tests.
REPEATED_RATIO, REPEATED_P99_MS = 1.0, 10.0
VARIED_RATIO = 0.5
PLAN_P99_MS = 50.0
START_S = 1.0
RSS_FLAT_SHARE = 0.05  # "flat": grew by less than this share across the soak

WHAT = {
    "repeated": "GET /v1/capacity, one question repeated",
    "varied": "GET /v1/capacity, a question not asked recently each time (cache misses)",
    "plans": "POST /v1/plans, whole catalog (llama-3.1-70b, 32768, 256, fp8)",
    "plans-multinode": "POST /v1/plans, whole catalog with multi-node layouts "
    "(llama-3.1-405b, 131072, 16)",
}


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _target(name: str, s: Summary, ratio: float) -> str:
    if name == "repeated":
        ok = ratio >= REPEATED_RATIO and s.p99_ms < REPEATED_P99_MS
        return f">= {REPEATED_RATIO:.1f}x, p99 < {REPEATED_P99_MS:.0f} ms: {_met(ok)}"
    if name == "varied":
        return f">= {VARIED_RATIO:.1f}x: {_met(ratio >= VARIED_RATIO)}"
    return f"p99 < {PLAN_P99_MS:.0f} ms: {_met(s.p99_ms < PLAN_P99_MS)}"


def _row(server_name: str, what: str, conns: int, s: Summary, *, ratio: str, target: str) -> str:
    return (
        f"| {server_name} | {what} | {conns} | {s.per_second:,.0f} | {s.p50_ms:.2f} ms | "
        f"{s.p99_ms:.2f} ms | {s.failed} | {ratio} | {target} |"
    )


def loadgen_name(kind: str) -> str:
    if kind != "wrk":
        return "the Python load generator (bench/http/loadgen.py, asyncio streams)"
    done = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    version = (done.stdout or done.stderr).split("\n", 1)[0].split(" [", 1)[0].strip()
    return f"{version or 'wrk'} (one thread)"


def print_report(bench: Bench, misses: InProcess) -> None:
    o = bench.options
    settings = server.options(Settings(), workers=o.workers)
    print("## HTTP: kvplan beside a bare FastAPI route (issue 9's targets, never asserted)\n")
    print(
        f"Load generator: {loadgen_name(bench.loadgen)}. {o.rounds} rounds of {o.seconds:g} s per "
        "workload, in turns (baseline, then each kvplan workload, each round); medians of "
        f"the runs. Both servers: `kvplan serve`'s settings (workers {settings['workers']}, "
        f"loop {settings['loop']}, http {settings['http']}), this venv; {os.cpu_count()} CPUs "
        "shared with the load generator.\n"
    )
    print("| server | workload | conns | req/s | p50 | p99 | failed | x baseline | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = summarize(bench.baseline_runs)
    print(
        _row(
            "bare FastAPI",
            "GET /v1/capacity, `async def` -> constant dict",
            32,
            base,
            ratio="1.00",
            target="",
        )
    )
    for target in bench.targets:
        for workload in bench.workloads:
            s = summarize(target.runs[workload.name])
            ratio = s.per_second / base.per_second if base.per_second else 0.0
            print(
                _row(
                    f"kvplan, {target.database}",
                    WHAT[workload.name],
                    workload.connections,
                    s,
                    ratio=f"{ratio:.2f}",
                    target=_target(workload.name, s, ratio),
                )
            )
    _print_in_process(misses)
    _print_memory_and_start(bench)
    for note in bench.notes:
        print(f"- {note}")
    print()


def _print_in_process(misses: InProcess) -> None:
    rounds = ", ".join(f"{us:.1f}" for us in misses.rounds_us)
    print(
        f"\nIn process, the same {misses.questions:,} new questions read and answered as the hot "
        "path does for a miss (`hot_path.canonical`, `router.capacity_answer`), no server: "
        f"median {misses.median_us:.1f} us per question (rounds: {rounds} us)."
    )


def _rss_row(target: Target) -> str:
    change = target.rss_soaked - target.rss_rounds
    flat = change < RSS_FLAT_SHARE * target.rss_rounds
    return (
        f"| kvplan, {target.database} | {target.rss_warm / MiB:.1f} MiB | "
        f"{target.rss_rounds / MiB:.1f} MiB | "
        f"{target.rss_soaked / MiB:.1f} MiB ({target.soaked:,} requests) | "
        f"{change / MiB:+.1f} MiB | < {RSS_FLAT_SHARE:.0%}: {_met(flat)} |"
    )


def _print_memory_and_start(bench: Bench) -> None:
    print(
        "\nMemory: RSS of the server process (and its workers) after the warm-up; after the "
        "rounds, by when the answer cache is full (it holds 2048 questions); and after a "
        "soak of the repeated question, new questions and a plan in every 65 requests. Flat: "
        "the soak's change.\n"
    )
    print("| server | after warm-up | after the rounds | after the soak | change | flat |")
    print("|---|---|---|---|---|---|")
    for target in bench.targets:
        print(_rss_row(target))
    print(
        "\nStart-up: from starting the process (`kvplan serve`, database migrated and seeded "
        "before; kvplan's modules, the baseline's too, compiled to bytecode as the image's pip "
        "install leaves them) to the first 200 of /readyz, and to the first capacity answer.\n"
    )
    print("| server | to /readyz 200 | to the first answer | target |")
    print("|---|---|---|---|")
    b = bench.baseline
    print(f"| bare FastAPI | - | {b.first_answer_s or 0:.2f} s | |")
    for target in bench.targets:
        s = target.served
        first = s.first_answer_s or 0.0
        print(
            f"| kvplan, {target.database} | {s.ready_s or 0:.2f} s | {first:.2f} s | "
            f"< {START_S:.0f} s: {_met(first < START_S)} |"
        )
    print()
