"""The benchmark's arithmetic: a run's result, percentiles, medians of runs, wrk's output read."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Run:
    """One load-generator run against one server."""

    requests: int  # answers received
    seconds: float
    p50_ms: float
    p99_ms: float
    failed: int  # answers not 2xx or 3xx, and socket errors

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def percentile(samples: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (`share` 0.99 for p99): the smallest sample with at least
    that share of the samples at or below it, as wrk and HdrHistogram report them."""
    if not samples:
        raise ValueError("no samples")
    if not 0 < share <= 1:
        raise ValueError(f"share {share} is not in (0, 1]")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def run_of(latencies_s: Sequence[float], seconds: float, failed: int) -> Run:
    """A run from its latencies in seconds."""
    return Run(
        requests=len(latencies_s),
        seconds=seconds,
        p50_ms=percentile(latencies_s, 0.5) * 1e3,
        p99_ms=percentile(latencies_s, 0.99) * 1e3,
        failed=failed,
    )


@dataclass(frozen=True, slots=True)
class Summary:
    """The medians of several runs of one workload."""

    runs: int
    per_second: float
    p50_ms: float
    p99_ms: float
    failed: int  # over all runs


def summarize(runs: Sequence[Run]) -> Summary:
    return Summary(
        runs=len(runs),
        per_second=statistics.median(r.per_second for r in runs),
        p50_ms=statistics.median(r.p50_ms for r in runs),
        p99_ms=statistics.median(r.p99_ms for r in runs),
        failed=sum(r.failed for r in runs),
    )


# ---- wrk's report ------------------------------------------------------------------------------

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_DURATION = re.compile(r"([0-9.]+)(us|ms|s|m|h)")
_TOTAL = re.compile(r"^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m|h),", re.MULTILINE)
_PERCENTILE = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([0-9.]+(?:us|ms|s|m|h))\s*$", re.MULTILINE)
_NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s*(\d+)")
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")


def _ms(duration: str) -> float:
    match = _DURATION.fullmatch(duration)
    if match is None:
        raise ValueError(f"not a wrk duration: {duration!r}")
    return float(match[1]) * _UNITS[match[2]]


def parse_wrk(report: str) -> Run:
    """A run from what `wrk --latency` prints (its latency distribution and totals)."""
    total = _TOTAL.search(report)
    if total is None:
        raise ValueError("wrk's report has no 'N requests in T' line")
    shares = {int(m[1]): _ms(m[2]) for m in _PERCENTILE.finditer(report)}
    if set(shares) != {50, 99}:
        raise ValueError("wrk's report has no latency distribution (run it with --latency)")
    non_2xx = _NON_2XX.search(report)
    errors = _SOCKET_ERRORS.search(report)
    failed = (int(non_2xx[1]) if non_2xx else 0) + (
        sum(int(n) for n in errors.groups()) if errors else 0
    )
    return Run(
        requests=int(total[1]),
        seconds=_ms(total[2] + total[3]) / 1e3,
        p50_ms=shares[50],
        p99_ms=shares[99],
        failed=failed,
    )
