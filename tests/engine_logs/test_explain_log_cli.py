"""`kvplan explain-log FILE`: the API's use case from the shell, as a table or as its JSON.

The log is the vLLM 0.19.0 Llama-3.1-8B-Instruct one the API tests use (engine_logs.json).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from service.catalog.seed import offline_snapshot
from service.cli import main
from service.engine_logs.service import LogQuestion, answer_json, explain_log
from tests.engine_logs.calibration import entry

LOG: str = entry(
    "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
)["quote"]


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "vllm.log"
    path.write_text(LOG, encoding="utf-8")
    return path


def test_json_is_the_apis_body(log_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain-log", str(log_file), "--offline", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == answer_json(explain_log(LogQuestion(LOG), offline_snapshot()))
    assert printed["reported"]["kv_cache_tokens"] == 476_016


def test_the_table_shows_the_figures_and_the_differences(
    log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain-log", str(log_file), "--offline"]) == 0
    out = capsys.readouterr().out
    answer = explain_log(LogQuestion(LOG), offline_snapshot())
    assert out.startswith("vllm 0.19.0  model llama-3.1-8b-instruct  gpu h100-sxm-80gb\n")
    # every figure printed, bytes in GiB with the exact count beside
    assert "  kv_pool_bytes " in out
    assert "58.11 GiB (62,395,137,393 B)" in out  # "Available KV cache memory: 58.11 GiB"
    # one row per budget line: kvplan's figure, the engine's, the difference
    assert answer.prediction is not None
    predicted = answer.prediction.kv_cache_tokens
    row = next(line for line in out.splitlines() if line.startswith("kv_cache_tokens "))
    assert row.split()[:4] == [
        "kv_cache_tokens",
        f"{predicted:,}",
        "476,016",
        f"{predicted - 476_016:+,}",
    ]
    assert "budget (utilization x total): 75.23 GiB" in out  # "Requested memory: ... 75.23 GiB"


def test_a_dash_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(LOG))
    assert main(["explain-log", "-", "--offline", "--json", "--gpu", "h200-141gb"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == "h200-141gb"


def test_problems_exit_2_with_the_problem_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    noise = tmp_path / "noise.log"
    noise.write_text("hello\n", encoding="utf-8")
    assert main(["explain-log", str(noise), "--offline"]) == 2
    problem = json.loads(capsys.readouterr().err)
    assert problem["type"] == "/problems/log-not-recognised"
    assert problem["looked_for"]
    assert main(["explain-log", str(tmp_path / "absent.log"), "--offline"]) == 2
    assert json.loads(capsys.readouterr().err)["field"] == "file"


def _as_kubectl_prints_it(log: str) -> str:
    """`kubectl logs --prefix --timestamps deploy/vllm` of a pod whose engine logs in colour:
    the pod/container prefix, an RFC 3339 timestamp with nanoseconds, then the line with its
    ANSI codes (vLLM colours its level and its process prefix on a TTY)."""
    out = []
    for number, line in enumerate(log.split("\n")):
        coloured = line.replace("INFO", "\x1b[32mINFO\x1b[0m", 1)
        if coloured.startswith("("):
            coloured = "\x1b[36m" + coloured.replace(")", ")\x1b[0m", 1)
        stamp = f"2026-01-02T03:04:{number % 60:02d}.123456789Z"
        out.append(f"[pod/vllm-7d9f8b6c5d-x2kq4/vllm] {stamp} {coloured}")
    return "\n".join(out) + "\n"


def test_a_log_as_kubectl_prints_it_reads_as_the_plain_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kubectl.log"
    path.write_text(_as_kubectl_prints_it(LOG), encoding="utf-8")
    assert "\x1b[32m" in path.read_text(encoding="utf-8")
    assert main(["explain-log", str(path), "--offline", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    plain = answer_json(explain_log(LogQuestion(LOG), offline_snapshot()))
    # the same engine, settings, figures and prediction, and the same lines: the prefix, the
    # timestamp and the colours are taken off before a line is read or shown
    for key in ("engine", "engine_version", "settings", "reported", "model", "gpu", "prediction"):
        assert printed[key] == plain[key], key
    assert printed["recognised_lines"] == plain["recognised_lines"]
    # "GPU KV cache size: 476,016 tokens", "Maximum concurrency for 8,192 tokens per request:
    # 58.11x"
    assert (printed["reported"]["kv_cache_tokens"], printed["reported"]["max_concurrency"]) == (
        476_016,
        58.11,
    )
    assert main(["explain-log", str(path), "--offline"]) == 0
    table = capsys.readouterr().out
    assert table.startswith("vllm 0.19.0  model llama-3.1-8b-instruct  gpu h100-sxm-80gb\n")
    assert "58.11 GiB (62,395,137,393 B)" in table
    assert "\x1b[" not in table
