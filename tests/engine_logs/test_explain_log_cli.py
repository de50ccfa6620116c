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
