"""The HTTP benchmark's arithmetic (bench/http/stats.py): percentiles, medians of runs,
and wrk's report read back."""

from __future__ import annotations

import pytest

from bench.http.stats import Run, parse_wrk, percentile, run_of, summarize

# What wrk 4.1.0 (Debian's package) printed with --latency against a local kvplan, verbatim.
WRK_REPORT = """\
Running 6s test @ http://127.0.0.1:34567/v1/plans
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    46.34ms   19.52ms 165.23ms   78.83%
    Req/Sec   175.50     34.06   232.00     73.33%
  Latency Distribution
     50%   42.72ms
     75%   54.04ms
     90%   68.23ms
     99%  118.43ms
  1052 requests in 6.02s, 20.94MB read
Requests/sec:    174.77
Transfer/sec:      3.48MB
"""


def test_nearest_rank_percentiles_of_one_to_a_hundred_are_the_rank_itself() -> None:
    samples = [float(n) for n in range(100, 0, -1)]  # order does not matter
    # nearest rank: ceil(0.5 * 100) = 50th smallest, ceil(0.99 * 100) = 99th smallest
    assert percentile(samples, 0.5) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile(samples, 1.0) == 100.0


def test_the_p99_of_few_samples_is_the_largest_not_an_interpolation() -> None:
    # ceil(0.99 * 10) = 10: with ten samples p99 is the slowest one
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 250.0], 0.99) == 250.0
    assert percentile([7.0], 0.5) == 7.0


@pytest.mark.parametrize("share", [0.0, 1.5, -0.1])
def test_a_share_outside_zero_to_one_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        percentile([1.0], share)


def test_no_samples_have_no_percentile() -> None:
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)


def test_a_run_from_latencies_in_seconds_reports_milliseconds_and_rate() -> None:
    run = run_of([0.001] * 98 + [0.002, 0.050], seconds=2.0, failed=1)
    # 100 answers in 2 s; p50 the 50th smallest (1 ms), p99 the 99th (2 ms)
    assert run.requests == 100
    assert run.per_second == 50.0
    assert run.p50_ms == pytest.approx(1.0)
    assert run.p99_ms == pytest.approx(2.0)
    assert run.failed == 1


def test_runs_are_summarised_by_their_medians_and_failures_added() -> None:
    runs = [
        Run(requests=1000, seconds=1.0, p50_ms=2.0, p99_ms=9.0, failed=0),
        Run(requests=3000, seconds=1.0, p50_ms=1.0, p99_ms=30.0, failed=2),
        Run(requests=2000, seconds=1.0, p50_ms=3.0, p99_ms=5.0, failed=1),
    ]
    summary = summarize(runs)
    # medians of (1000, 3000, 2000) req/s, (2, 1, 3) ms and (9, 30, 5) ms; 0 + 2 + 1 failed
    assert (summary.per_second, summary.p50_ms, summary.p99_ms) == (2000.0, 2.0, 9.0)
    assert summary.failed == 3
    assert summary.runs == 3


def test_wrks_report_is_read_as_a_run() -> None:
    run = parse_wrk(WRK_REPORT)
    assert run.requests == 1052
    assert run.seconds == pytest.approx(6.02)
    assert run.p50_ms == pytest.approx(42.72)
    assert run.p99_ms == pytest.approx(118.43)
    assert run.failed == 0


def test_wrks_errors_and_other_units_are_read() -> None:
    report = (
        WRK_REPORT.replace("50%   42.72ms", "50%  812.00us")
        .replace("99%  118.43ms", "99%    1.20s")
        .replace("Requests/sec:", "  Non-2xx or 3xx responses: 7\nRequests/sec:")
        .replace(
            "  1052 requests",
            "  Socket errors: connect 0, read 2, write 0, timeout 3\n  1052 requests",
        )
    )
    run = parse_wrk(report)
    assert run.p50_ms == pytest.approx(0.812)  # 812 us
    assert run.p99_ms == pytest.approx(1200.0)  # 1.2 s
    assert run.failed == 7 + 2 + 3


def test_a_report_without_the_latency_distribution_is_refused() -> None:
    without = "\n".join(line for line in WRK_REPORT.splitlines() if "%  " not in line)
    with pytest.raises(ValueError, match="--latency"):
        parse_wrk(without)
