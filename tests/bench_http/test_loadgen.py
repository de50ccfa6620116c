"""The load generators (bench/http/loadgen.py) against a real server: the bare
baseline app served by `server.serve` as the benchmark serves it, in a process of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.http import servers
from bench.http.loadgen import WRK_SCRIPT, Load, Request, drive, wrk_lines
from bench.http.servers import Served
from bench.http.workloads import PLAN, REPEATED


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("bench")
    served = servers.start("baseline", [sys.executable, "-m", "bench.http.baseline"], {}, workdir)
    try:
        served.wait_ready(REPEATED.target, REPEATED.target)
        yield served
    finally:
        served.stop()


def test_a_request_is_encoded_as_http_1_1_with_its_body_framed() -> None:
    assert (
        REPEATED.encode("h:1") == (f"GET {REPEATED.target} HTTP/1.1\r\nHost: h:1\r\n\r\n").encode()
    )
    head, _, body = PLAN.encode("h:1").partition(b"\r\n\r\n")
    assert body == PLAN.body
    assert f"Content-Length: {len(PLAN.body)}".encode() in head.split(b"\r\n")
    assert b"Content-Type: application/json" in head.split(b"\r\n")


def test_the_python_generator_drives_the_baseline_over_keep_alive_connections(
    baseline: Served,
) -> None:
    run = drive("python", baseline.port, Load([REPEATED], connections=4, seconds=0.5))
    assert run.requests > 0
    assert run.failed == 0
    assert 0 < run.p50_ms <= run.p99_ms


def test_answers_that_are_not_2xx_are_counted_as_failed(baseline: Served) -> None:
    missing = Request("GET", "/nowhere")  # the baseline has one route: 404
    run = drive("python", baseline.port, Load([REPEATED, missing], connections=1, seconds=0.3))
    # one connection alternates the two requests, so about half the answers are 404s
    assert run.failed >= run.requests // 2 - 1
    assert run.failed > 0


def test_the_startup_times_of_the_baseline_were_taken(baseline: Served) -> None:
    assert baseline.ready_s is not None
    assert baseline.first_answer_s is not None
    assert baseline.first_answer_s >= baseline.ready_s
    assert baseline.rss_bytes() > 0


def test_wrks_request_file_holds_one_request_a_line() -> None:
    lines = wrk_lines([REPEATED, PLAN]).splitlines()
    assert lines[0] == f"GET\t{REPEATED.target}\t\t"
    assert lines[1] == f"POST\t/v1/plans\tapplication/json\t{PLAN.body.decode()}"
    with pytest.raises(ValueError, match="tabs or newlines"):
        wrk_lines([Request("POST", "/v1/plans", b'{\n"a": 1}', "application/json")])


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_wrk_drives_the_baseline_with_the_script(baseline: Served, tmp_path: Path) -> None:
    run = drive("wrk", baseline.port, Load([REPEATED], connections=2, seconds=1))
    assert run.requests > 0
    assert run.failed == 0
    # the script itself is valid Lua wrk accepts: a 404 path is sent and counted as failed
    (tmp_path / "r.tsv").write_text(wrk_lines([Request("GET", "/nowhere")]))
    (tmp_path / "s.lua").write_text(WRK_SCRIPT % (0, tmp_path / "r.tsv"))
    done = subprocess.run(
        ["wrk", "-t1", "-c1", "-d1s", "--latency", "-s", str(tmp_path / "s.lua"),
         f"http://127.0.0.1:{baseline.port}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "Non-2xx or 3xx responses" in done.stdout
