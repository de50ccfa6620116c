"""A calibration is keyed by the weights' format: a bf16 run's pool never answers fp8 weights.

The two logs are one benchmark's paired runs (sapir-pirski/h100-fp8-quantization-benchmark,
results/q2/vllm_bf16.log and vllm_fp8.log, in engine_logs.json): vLLM 0.25.1, Qwen2.5-7B-Instruct
on one H100, the same flags (utilization 0.85, max_model_len 4096), the second with
`'quantization': 'fp8'` in its non-default args. Each figure below is the log's own line,
checked against the log text before it is used.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import ADMIN
from tests.engine_logs.calibration import entry
from tests.helpers import problem

RUNS = "github:sapir-pirski/h100-fp8-quantization-benchmark results/q2/"
BF16 = entry(RUNS + "vllm_bf16.log")["quote"]
FP8 = entry(RUNS + "vllm_fp8.log")["quote"]
# The logs name Qwen/Qwen2.5-7B-Instruct (the catalog holds its base model, the same geometry)
# and print no total memory: the hints name both.
HINTS = {"model": "qwen2.5-7b", "gpu": "h100-sxm-80gb"}
QUESTION = {
    "model": "qwen2.5-7b",
    "gpu": "h100-sxm-80gb",
    "engine": "vllm",
    "engine_version": "0.25.1",
    "max_model_len": 4096,
    "gpu_memory_utilization": 0.85,
}


def _calibrate(client: TestClient, log: str) -> dict[str, Any]:
    response = client.post(
        "/v1/calibrations",
        content=log,
        headers={**ADMIN, "content-type": "text/plain"},
        params=HINTS,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _capacity(client: TestClient, **changes: Any) -> dict[str, Any]:
    response = client.get("/v1/capacity", params={**QUESTION, **changes})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_bf16_and_fp8_runs_of_one_deployment_are_two_calibrations(
    client: TestClient,
) -> None:
    bf16 = _calibrate(client, BF16)
    fp8 = _calibrate(client, FP8)  # was 409: the key had no weight format
    assert bf16["id"] != fp8["id"]
    # the bf16 run has no flag: the catalog entry's own format; the fp8 run says 'fp8'
    assert (bf16["weight_format"], fp8["weight_format"]) == ("bfloat16", "fp8")
    assert bf16["settings"].get("quantization") is None
    assert fp8["settings"]["quantization"] == "fp8"
    # a third log of either run is still the same deployment
    again = client.post(
        "/v1/calibrations",
        content=FP8,
        headers={**ADMIN, "content-type": "text/plain"},
        params=HINTS,
    )
    assert problem(again, 409)["calibration_id"] == fp8["id"]


def test_each_weight_format_answers_its_own_runs_figures(client: TestClient) -> None:
    bf16 = _calibrate(client, BF16)
    fp8 = _calibrate(client, FP8)
    assert "GPU KV cache size: 968,496 tokens" in BF16
    assert "Maximum concurrency for 4,096 tokens per request: 236.45x" in BF16
    assert "GPU KV cache size: 1,084,320 tokens" in FP8
    assert "Maximum concurrency for 4,096 tokens per request: 264.73x" in FP8

    # no weight_format: the model's own (bfloat16 in the catalog), so the bf16 run
    plain = _capacity(client)
    assert plain["calibrated_from"]["calibration_id"] == bf16["id"]
    assert plain["calibrated_from"]["weight_format"] == "bfloat16"
    assert (plain["kv_cache_tokens"], plain["max_concurrency"]) == (968_496, 236.45)
    # bf16 said outright is the same format
    said = _capacity(client, weight_format="bf16")["calibrated_from"]
    assert said["calibration_id"] == bf16["id"]

    for asked in ("fp8", "fp8_e4m3"):  # one format under two names (sizing/model/dtypes.py)
        quantized = _capacity(client, weight_format=asked)
        assert quantized["calibrated_from"]["calibration_id"] == fp8["id"]
        assert quantized["calibrated_from"]["weight_format"] == "fp8"
        assert (quantized["kv_cache_tokens"], quantized["max_concurrency"]) == (1_084_320, 264.73)


def test_a_weight_format_neither_run_measured_is_not_calibrated(client: TestClient) -> None:
    _calibrate(client, BF16)
    _calibrate(client, FP8)
    for asked in ("awq", "int8", "nvfp4"):
        answer = _capacity(client, weight_format=asked)
        assert answer["calibrated_from"] is None, asked
        assert answer["kv_cache_tokens"] not in (968_496, 1_084_320), asked


def test_a_plan_takes_the_calibration_of_its_weight_format(client: TestClient) -> None:
    _calibrate(client, BF16)
    fp8 = _calibrate(client, FP8)
    body = {
        "model": "qwen2.5-7b",
        "gpus": ["h100-sxm-80gb"],
        "engine": "vllm",
        "engine_version": "0.25.1",
        "max_model_len": 4096,
        "gpu_memory_utilization": 0.85,
        "peak_concurrency": 200,
        "weight_format": "fp8",
    }
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    best = response.json()["recommendation"]
    assert best["calibrated_from"]["calibration_id"] == fp8["id"]
    # 1,084,320 tokens / 4,096 = 264.73 sequences a replica: one holds the 200
    assert best["replicas"] == 1


def _predicted_weights(client: TestClient, log: str) -> int:
    response = client.post(
        "/v1/engine-logs", content=log, headers={"content-type": "text/plain"}, params=HINTS
    )
    assert response.status_code == 200, response.text
    rows = {row["line"]: row for row in response.json()["differences"]}
    predicted: int = rows["weights"]["predicted"]
    return predicted


def test_the_fp8_logs_prediction_prices_the_weights_at_fp8(client: TestClient) -> None:
    # 7,615,616,512 parameters (the catalog's qwen2.5-7b) at 2 bytes, then at 1: the fp8 run's
    # weights are one byte a parameter fewer; what vLLM loads besides them (the rotary cache,
    # padding) is the same in both. (The log's 14.29 -> 8.2 GiB is less than halved: vLLM's
    # online fp8 keeps the embeddings and lm_head at bf16.)
    saved = _predicted_weights(client, BF16) - _predicted_weights(client, FP8)
    assert saved == 7_615_616_512


def test_a_quantization_kvplan_cannot_price_is_not_calibrated(client: TestClient) -> None:
    # The fp8 run's log with another method in its flag: kvplan has no format for
    # bitsandbytes, so the run cannot be keyed, and must not be keyed as bf16.
    log = FP8.replace("'quantization': 'fp8'", "'quantization': 'bitsandbytes'")
    response = client.post(
        "/v1/calibrations",
        content=log,
        headers={**ADMIN, "content-type": "text/plain"},
        params=HINTS,
    )
    body = problem(response, 422)
    assert body["field"] == "log"
    assert "bitsandbytes" in body["detail"]
