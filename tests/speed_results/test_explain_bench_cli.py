"""`kvplan explain-bench FILE --model ... --gpu ...`: POST /v1/speed-results from the shell.

The file is the vLLM fixture (tests/fixtures/bench_results/SOURCES.md); the JSON printed is the
API's body for the same deployment, and the table shows the same figures.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.speed_results.test_speed_results_api import DEPLOYMENT, FIXTURES, VLLM_RUN

FILE = str(FIXTURES / "vllm-openai-1.0qps-qwen3-vl-8b.json")
ARGS = ["explain-bench", FILE, "--model", "qwen3-8b", "--gpu", "h100-sxm-80gb", "--offline"]


def test_json_is_the_apis_figures(client: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    api = client.post("/v1/speed-results", json={"result": VLLM_RUN, "deployment": DEPLOYMENT})
    assert printed["run"] == api.json()["run"]
    assert printed["figures"] == api.json()["figures"]
    assert printed["run"]["batch"] == 4  # 3.578 in flight, rounded (test_speed_results_api)


def test_the_table_shows_measured_estimated_and_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*ARGS, "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "vllm bench serve: 200 requests, 200 tokens in, 128 out, 3.58 in flight" in out
    assert "mean_tpot_ms              27.912" in out  # the file's mean_tpot_ms, 3 decimals


def test_a_missing_file_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain-bench", "/nonexistent.json", "--model", "qwen3-8b", "--offline"]) != 0
    assert "result" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["csv", "text"])
def test_a_format_the_api_has_no_answer_in_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    # POST /v1/speed-results answers JSON only: `--format csv` printed the table instead
    assert main([*ARGS, "--format", fmt]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    problem = json.loads(captured.err)
    assert problem["field"] == "format"
    assert fmt in problem["detail"]
