"""/v1/speed-calibrations: a benchmark run kept as the factor it measured on kvplan's decode
step, and the capacity answers that then use it.

The run is the vLLM fixture (tests/fixtures/bench_results/SOURCES.md) posted with the
deployment qwen3-8b on one H100 (see test_speed_results_api.py for why). The scale is worked
from the file and the estimate POST /v1/speed-results answers; the calibrated capacity answer
is the uncalibrated one times it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import ADMIN
from tests.helpers import problem
from tests.speed_results.test_speed_results_api import DEPLOYMENT, VLLM_RUN

QUESTION = {**DEPLOYMENT, "max_model_len": 8192}


def _store(client: TestClient, deployment: dict[str, Any] = QUESTION) -> dict[str, Any]:
    response = client.post(
        "/v1/speed-calibrations",
        json={"result": VLLM_RUN, "deployment": deployment, "notes": "fixture"},
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    assert response.headers["etag"] == '"1"'
    body: dict[str, Any] = response.json()
    assert response.headers["location"].endswith(f"/v1/speed-calibrations/{body['id']}")
    return body


def _capacity(client: TestClient) -> dict[str, Any]:
    response = client.get("/v1/capacity", params=QUESTION)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_stored_run_scales_the_capacity_answers_decode_step(client: TestClient) -> None:
    before = _capacity(client)
    assert before["speed_calibrated_from"] is None
    compared = client.post(
        "/v1/speed-results", json={"result": VLLM_RUN, "deployment": QUESTION}
    ).json()
    estimated_tpot = compared["figures"][0]["estimated"]

    stored = _store(client)
    assert stored["model"] == "qwen3-8b"
    assert stored["gpu"] == "h100-sxm-80gb"
    assert stored["engine"] == "vllm"
    assert stored["tensor_parallel_size"] == 1
    assert stored["batch"] == 4  # 3.578 in flight (Little's law), rounded
    assert stored["measured_tpot_ms"] == pytest.approx(27.911832109121164)  # the file's
    assert stored["estimated_tpot_ms"] == pytest.approx(estimated_tpot)
    scale = 27.911832109121164 / estimated_tpot
    assert stored["step_time_scale"] == pytest.approx(scale)
    canonical = json.dumps(VLLM_RUN, sort_keys=True, separators=(",", ":")).encode()
    assert stored["result_sha256"] == hashlib.sha256(canonical).hexdigest()

    after = _capacity(client)
    used = after["speed_calibrated_from"]
    assert used["calibration_id"] == stored["id"]
    assert used["tool"] == "vllm bench serve"
    assert used["step_time_scale"] == pytest.approx(scale)
    # The decode step times the scale, the throughput over it (rounded to 3 and 1 decimals as
    # the answers show them); the prefill stays kvplan's.
    assert after["decode_ms_per_token"] == pytest.approx(
        before["decode_ms_per_token"] * scale, abs=2e-3 * scale
    )
    assert after["output_tokens_per_second"] == pytest.approx(
        before["output_tokens_per_second"] / scale, abs=0.1
    )
    assert after["prefill_ms"] == before["prefill_ms"]
    # Another key (tensor_parallel_size 2) is not calibrated.
    other = client.get("/v1/capacity", params={**QUESTION, "tensor_parallel_size": 2}).json()
    assert other["speed_calibrated_from"] is None


def test_one_per_deployment_and_writes_need_an_admin(client: TestClient) -> None:
    body = {"result": VLLM_RUN, "deployment": QUESTION}
    problem(client.post("/v1/speed-calibrations", json=body), 401)
    stored = _store(client)
    again = problem(client.post("/v1/speed-calibrations", json=body, headers=ADMIN), 409)
    assert again["calibration_id"] == stored["id"]
    bad = {"result": {"mean_tpot_ms": 1}, "deployment": QUESTION}
    assert (
        problem(client.post("/v1/speed-calibrations", json=bad, headers=ADMIN), 422)["field"]
        == "result"
    )


def test_list_show_and_delete_with_etags(client: TestClient) -> None:
    stored = _store(client)
    page = client.get("/v1/speed-calibrations", params={"model": "qwen3-8b"}).json()
    assert [item["id"] for item in page["items"]] == [stored["id"]]
    path = f"/v1/speed-calibrations/{stored['id']}"
    one = client.get(path)
    assert one.headers["etag"] == '"1"'
    assert client.get(path, headers={"If-None-Match": '"1"'}).status_code == 304
    problem(client.get("/v1/speed-calibrations/999999"), 404)
    problem(client.delete(path, headers=ADMIN), 428)
    problem(client.delete(path, headers={**ADMIN, "If-Match": '"2"'}), 412)
    assert client.delete(path, headers={**ADMIN, "If-Match": '"1"'}).status_code == 204
    problem(client.get(path), 404)
    assert _capacity(client)["speed_calibrated_from"] is None
