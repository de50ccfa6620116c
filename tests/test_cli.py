"""The `kvplan` console command: the same answers as the API, from the shell."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from service.cli import main

MiB = 1 << 20
# Worked example A (../shared/design/engine-memory.md §1.7): Llama-3.1-8B, a pool of 28,006
# blocks of 2 MiB (16 tokens x 32 layers x 8 KV heads x 128 x 2 x 2 B).
POOL = 28_006 * 2 * MiB


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_migrate_then_seed_fills_an_empty_sqlite_file(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    assert main(["seed"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert "model:llama-3.1-8b" in first["added"]
    assert "gpu:h100-sxm-80gb" in first["added"]
    # idempotent: a second seed adds nothing and changes nothing
    assert main(["seed"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["added"] == []
    assert second["refreshed"] == []
    assert second["unchanged"] == len(first["added"])


def test_capacity_from_the_shell_matches_worked_example_a(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "capacity",
            "--offline",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm-80gb",
            "--max-model-len",
            "8192",
            "--engine-version",
            "0.20.0",
            "--kv-pool-bytes",
            str(POOL),
            "--no-explain",
        ]
    )
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    # 28,006 blocks; 28,006 / cdiv(8,192, 16) = 54.70x; (28,006 - 1) // 512 = 54 sequences
    assert body["num_gpu_blocks"] == 28_006
    assert body["max_concurrency"] == 54.70
    assert body["max_num_seqs"] == 54


def test_plan_from_the_shell_recommends_and_exits_0(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "plan",
            "--offline",
            "--model",
            "llama-3.1-8b",
            "--max-model-len",
            "8192",
            "--peak-concurrency",
            "32",
            "--gpu",
            "h100-sxm-80gb",
            "--no-explain",
        ]
    )
    assert code == 0
    best = json.loads(capsys.readouterr().out)["recommendation"]
    assert best["gpu"] == "h100-sxm-80gb"
    assert best["replicas"] * best["sequences_per_replica"] >= 32
    assert "--max-model-len 8192" in best["engine_flags"]["vllm"]


def test_plan_from_the_shell_takes_latency_targets(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # tests/planning/test_plan_latency_targets.py: with worked example A's pool an H100 holds 54
    # sequences of 8,192 tokens, and 41 decode within 25 ms a token: 2 replicas for 54
    args = ["plan", "--offline", "--model", "llama-3.1-8b", "--max-model-len", "8192"]
    args += ["--peak-concurrency", "54", "--gpu", "h100-sxm-80gb", "--max-gpus-per-node", "1"]
    args += ["--kv-pool-bytes", str(POOL), "--engine-version", "0.20.0", "--no-explain"]
    args += ["--headroom-fraction", "0"]  # the worked pool, none kept free
    assert main([*args, "--max-tpot-ms", "25", "--avg-prompt-tokens", "2048"]) == 0
    best = json.loads(capsys.readouterr().out)["recommendation"]
    assert (best["replicas"], best["max_num_seqs"]) == (2, 41)
    # one sequence takes 8.7 ms: a 5 ms target leaves no plan, exit 1
    assert main([*args, "--max-tpot-ms", "5", "--format", "json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["rejected"][0]["code"] == "tpot-over-target"


def test_bad_input_is_a_problem_on_stderr_and_exit_2(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "capacity",
            "--offline",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm-80gb",
            "--kv-cache-dtype",
            "fp4",
        ]
    )
    assert code == 2
    problem = json.loads(capsys.readouterr().err)
    assert problem["field"] == "kv_cache_dtype"
    assert "fp8" in problem["detail"]  # the accepted values are listed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_stays_in_the_foreground_and_answers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    env = {**os.environ, "DATABASE_URL": url}
    kvplan = [sys.executable, "-m", "service"]
    subprocess.run([*kvplan, "migrate"], env=env, check=True, capture_output=True)
    subprocess.run([*kvplan, "seed"], env=env, check=True, capture_output=True)
    port = _free_port()
    server = subprocess.Popen(
        [*kvplan, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                    assert json.load(r)["status"] == "ready"
                    break
            except OSError:
                assert server.poll() is None, "kvplan serve exited"
                assert time.monotonic() < deadline, "kvplan serve did not answer in 30 s"
                time.sleep(0.2)
        query = "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&field=max_num_seqs"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/capacity?{query}") as r:
            assert int(r.read()) > 0
        # still running: serve does not daemonize
        assert server.poll() is None
    finally:
        server.terminate()
        server.wait(timeout=10)
