"""The benchmark's course: start the servers, warm them, drive them in turns, soak, report."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from . import in_process, report, servers
from .loadgen import Load, Request, drive, pick
from .servers import Served
from .stats import Run
from .workloads import PLAN, PLAN_MULTINODE, REPEATED, soak, varied

SOAK_REQUESTS = 100_000


@dataclass(frozen=True)
class Options:
    seconds: float = 4.0  # each measured run
    rounds: int = 3
    loadgen: str = "auto"
    soak_requests: int = SOAK_REQUESTS
    postgres_url: str | None = None  # a server to make a throwaway database on
    workers: int | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    requests: list[Request]
    connections: int


@dataclass
class Target:
    """One kvplan server and what was measured on it."""

    database: str
    served: Served
    runs: dict[str, list[Run]] = field(default_factory=dict)
    cursors: dict[str, int] = field(default_factory=dict)
    rss_warm: int = 0
    rss_rounds: int = 0
    rss_soaked: int = 0
    soaked: int = 0


@dataclass
class Bench:
    options: Options
    loadgen: str
    workloads: list[Workload]
    baseline: Served
    targets: list[Target]
    baseline_runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def measure(self, target: Target, workload: Workload, seconds: float) -> Run:
        """One run, each workload going on where its last run stopped in the list."""
        offset = target.cursors.get(workload.name, 0)
        load = Load(workload.requests, workload.connections, seconds, offset)
        run = drive(self.loadgen, target.served.port, load)
        target.cursors[workload.name] = offset + run.requests
        return run

    def measure_baseline(self, seconds: float) -> Run:
        return drive(self.loadgen, self.baseline.port, Load([REPEATED], 32, seconds))


def workloads() -> list[Workload]:
    return [
        Workload("repeated", [REPEATED], 32),
        Workload("varied", varied(), 32),
        Workload("plans", [PLAN], 8),
        Workload("plans-multinode", [PLAN_MULTINODE], 8),
    ]


def _env(options: Options) -> dict[str, str]:
    # The production defaults (`kvplan serve`), with the worker count asked for, if any.
    return {} if options.workers is None else {"KVPLAN_WORKERS": str(options.workers)}


def _start_kvplan(name: str, url: str, workdir: Path, options: Options) -> Served:
    env = {**servers.prepare_kvplan(url, workdir), **_env(options)}
    served = servers.start(name, servers.kvplan_command("serve"), env, workdir)
    served.wait_ready("/readyz", REPEATED.target)
    return served


@contextmanager
def _postgres(options: Options, notes: list[str]) -> Iterator[str | None]:
    """A throwaway database on the PostgreSQL server given, dropped after; None without one."""
    if options.postgres_url is None or not options.postgres_url.startswith("postgres"):
        notes.append("PostgreSQL: no server given (KVPLAN_BENCH_DATABASE_URL); SQLite only")
        yield None
        return
    try:
        url = servers.create_database(options.postgres_url)
    except psycopg.Error as exc:
        notes.append(f"PostgreSQL: unreachable ({str(exc).strip()[:120]}); SQLite only")
        yield None
        return
    try:
        yield url
    finally:
        servers.drop_database(options.postgres_url, url)


def _servers(stack: ExitStack, options: Options, workdir: Path, notes: list[str]) -> Bench:
    servers.compile_package()
    baseline_cmd = [sys.executable, "-m", "bench.http.baseline"]
    baseline = servers.start("baseline", baseline_cmd, _env(options), workdir)
    stack.callback(baseline.stop)
    baseline.wait_ready(REPEATED.target, REPEATED.target)
    sqlite = _start_kvplan("kvplan-sqlite", f"sqlite:///{workdir / 'kvplan.db'}", workdir, options)
    stack.callback(sqlite.stop)
    targets = [Target("SQLite", sqlite)]
    pg_url = stack.enter_context(_postgres(options, notes))
    if pg_url is not None:
        pg = _start_kvplan("kvplan-postgres", pg_url, workdir, options)
        stack.callback(pg.stop)
        targets.append(Target("PostgreSQL", pg))
    return Bench(options, pick(options.loadgen), workloads(), baseline, targets, notes=notes)


def _rounds(bench: Bench) -> None:
    """Baseline, then one kvplan's workloads; baseline, the next kvplan's; ... each round."""
    seconds = bench.options.seconds
    for _ in range(bench.options.rounds):
        for target in bench.targets:
            bench.baseline_runs.append(bench.measure_baseline(seconds))
            for workload in bench.workloads:
                target.runs.setdefault(workload.name, []).append(
                    bench.measure(target, workload, seconds)
                )


def _soak(bench: Bench, target: Target) -> None:
    """At least `soak_requests` more requests of the mixed workload; the RSS after them."""
    mix = Workload("soak", soak(bench.workloads[1].requests), 32)
    while target.soaked < bench.options.soak_requests:
        target.soaked += bench.measure(target, mix, 10.0).requests
    target.rss_soaked = target.served.rss_bytes()


def run(options: Options) -> None:
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kvplan-bench-") as tmp, ExitStack() as stack:
        bench = _servers(stack, options, Path(tmp), notes)
        bench.measure_baseline(1.0)  # warm-up, not counted
        for target in bench.targets:
            for workload in bench.workloads:
                bench.measure(target, workload, 1.0)
            target.rss_warm = target.served.rss_bytes()
        _rounds(bench)
        for target in bench.targets:
            target.rss_rounds = target.served.rss_bytes()
            _soak(bench, target)
        report.print_report(bench, in_process.new_questions(bench.workloads[1].requests))
