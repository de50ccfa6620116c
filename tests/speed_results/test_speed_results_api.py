"""POST /v1/speed-results: a benchmark's result file beside kvplan's estimate of the same run.

Files: tests/fixtures/bench_results (SOURCES.md). The vLLM one is a Poisson 1.0 req/s run of
Qwen3-VL-8B on an Ascend NPU, which the catalog lacks: these tests check the run's shape and
the comparison's arithmetic for the deployment they name (qwen3-8b, Qwen3-VL-8B's language
model, on an H100), and that the estimate is the one POST /v1/capacity gives at that shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import problem

FIXTURES = Path(__file__).parent.parent / "fixtures" / "bench_results"
VLLM_RUN = json.loads((FIXTURES / "vllm-openai-1.0qps-qwen3-vl-8b.json").read_text())
AIPERF_RUN = json.loads((FIXTURES / "aiperf-0.10.0-profile_export_aiperf.json").read_text())
DEPLOYMENT = {"model": "qwen3-8b", "gpu": "h100-sxm-80gb"}


def _post(client: TestClient, result: Any, deployment: dict[str, Any] = DEPLOYMENT) -> Any:
    return client.post("/v1/speed-results", json={"result": result, "deployment": deployment})


def _figure(body: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in body["figures"] if f["name"] == name)
    return found


def test_a_vllm_result_is_read_and_set_against_the_estimate(client: TestClient) -> None:
    response = _post(client, VLLM_RUN)
    assert response.status_code == 200, response.text
    body = response.json()
    run = body["run"]
    assert run["tool"] == "vllm bench serve"
    assert run["completed"] == 200
    assert run["mean_input_tokens"] == 200  # total_input_tokens 40000 / completed 200
    assert run["mean_output_tokens"] == 128  # total_output_tokens 25600 / 200
    assert run["max_concurrency"] is None
    assert run["request_rate"] == 1.0
    # No mean_e2el_ms in the file: latency = mean TTFT + (128 - 1) x mean TPOT
    # = 95.6344 + 127 x 27.91183 = 3640.44 ms; in flight = 0.98275 req/s x 3.64044 s = 3.578.
    assert run["concurrency"] == pytest.approx(3.578, abs=1e-3)
    assert run["batch"] == 4  # 3.578 rounded
    assert run["context_tokens"] == 264  # 200 prompt + 128 / 2
    assert run["prompt_tokens"] == 200

    # The same deployment at the run's shape, asked of POST /v1/capacity: 4 sequences of 264
    # tokens (max_num_seqs 4 at max_model_len 264), one 200-token prompt's prefill.
    same = client.post(
        "/v1/capacity",
        json={**DEPLOYMENT, "max_model_len": 264, "max_num_seqs": 4, "avg_prompt_tokens": 200},
    )
    assert same.status_code == 200, same.text
    decode_ms = same.json()["decode_ms_per_token"]
    prefill_ms = same.json()["prefill_ms"]

    tpot = _figure(body, "mean_tpot_ms")
    assert tpot["measured"] == pytest.approx(27.911832109121164)  # the file's mean_tpot_ms
    assert tpot["estimated"] == pytest.approx(decode_ms, rel=1e-3)
    assert tpot["ratio"] == pytest.approx(27.911832109121164 / tpot["estimated"])
    assert body["step_time_scale"] == pytest.approx(tpot["ratio"])
    itl = _figure(body, "mean_itl_ms")
    assert itl["measured"] == pytest.approx(27.911833959895617)  # the file's mean_itl_ms
    ttft = _figure(body, "mean_ttft_ms")
    assert ttft["measured"] == pytest.approx(95.6344293046277)
    assert ttft["estimated"] == pytest.approx(prefill_ms, rel=1e-3)
    # An open-loop run's throughput is its offered rate: not compared.
    throughput = _figure(body, "output_throughput")
    assert throughput["measured"] is None
    assert throughput["ratio"] is None


def test_a_genai_perf_export_counts_its_concurrency_by_littles_law(client: TestClient) -> None:
    response = _post(client, AIPERF_RUN)
    assert response.status_code == 200, response.text
    run = response.json()["run"]
    assert run["tool"] == "genai-perf"
    assert run["completed"] == 10  # request_count.avg
    assert run["mean_input_tokens"] == 256
    assert run["mean_output_tokens"] == 64
    # request_throughput 0.8233 req/s x request_latency.avg 2.4135 s = 1.987 in flight.
    assert run["concurrency"] == pytest.approx(1.987, abs=1e-3)
    assert run["batch"] == 2
    assert run["context_tokens"] == 288  # 256 + 64 / 2
    tpot = _figure(response.json(), "mean_tpot_ms")
    assert tpot["measured"] == 35.2  # inter_token_latency.avg


def test_a_closed_loop_compares_its_throughput(client: TestClient) -> None:
    closed = {**VLLM_RUN, "max_concurrency": 8, "request_rate": "inf"}
    body = _post(client, closed).json()
    assert body["run"]["batch"] == 8
    assert body["run"]["request_rate"] is None
    tpot = _figure(body, "mean_tpot_ms")["estimated"]
    ttft = _figure(body, "mean_ttft_ms")["estimated"]
    throughput = _figure(body, "output_throughput")
    # 8 clients x 128 tokens over one request's time, TTFT + 127 x TPOT (ms).
    assert throughput["estimated"] == pytest.approx(8 * 128 * 1e3 / (ttft + 127 * tpot))
    assert throughput["measured"] == pytest.approx(125.79203608539055)


@pytest.mark.parametrize(
    ("result", "says"),
    [
        ({"hello": 1}, "not a result file"),
        ([1, 2], "valid dictionary"),
        ({k: v for k, v in VLLM_RUN.items() if k != "completed"}, "lacks completed"),
        ({**VLLM_RUN, "mean_tpot_ms": "fast"}, "result.mean_tpot_ms"),
        ({**VLLM_RUN, "completed": 0}, "result.completed must be positive"),
        ({**VLLM_RUN, "max_concurrency": -3}, "result.max_concurrency"),
        ({**VLLM_RUN, "request_throughput": None}, "no concurrency"),
        ({**AIPERF_RUN, "inter_token_latency": 35.2}, "result.inter_token_latency"),
    ],
)
def test_bad_files_are_refused_naming_the_field(client: TestClient, result: Any, says: str) -> None:
    body = problem(_post(client, result), 422)
    assert body["field"] == "result" or body.get("errors"), body
    assert says in json.dumps(body)


def test_an_unknown_model_is_a_404(client: TestClient) -> None:
    response = _post(client, VLLM_RUN, {"model": "no-such-model", "gpu": "h100-sxm-80gb"})
    assert problem(response, 404)["field"] == "model"
