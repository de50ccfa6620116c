"""Speed calibrations in plans (issue 22 item 2): a stored `vllm bench serve` run's step-time
scale is on a plan's option (its decode figures and `speed_calibrated_from`) and on the
latency targets' check of that candidate, as it is on a capacity answer.

The run and deployment are test_speed_calibrations_api.py's: qwen3-8b on one H100 at
max_model_len 8192 (vLLM, TP 1), scale = the file's TPOT 27.9118 ms / kvplan's estimate of the
same run. A plan asked on the same GPU and layout matches its key; the targets below are chosen
around the option's own decode step, uncalibrated and scaled, so the test holds whatever the fit.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.speed_results.test_speed_calibrations_api import QUESTION, _store

PLAN = {
    **QUESTION,
    "gpus": ["h100-sxm-80gb"],
    "peak_concurrency": 8,
    "max_gpus_per_node": 1,
}


def _plan(client: TestClient, **extra: Any) -> dict[str, Any]:
    body = {key: value for key, value in PLAN.items() if key != "gpu"}
    response = client.post("/v1/plans", json={**body, **extra})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_a_plan_uses_the_stored_speed_calibration(client: TestClient) -> None:
    before = _plan(client)["recommendation"]
    assert before["speed_calibrated_from"] is None
    stored = _store(client)
    scale = stored["step_time_scale"]
    after = _plan(client)["recommendation"]
    assert after["speed_calibrated_from"]["calibration_id"] == stored["id"]
    assert after["speed_calibrated_from"]["step_time_scale"] == pytest.approx(scale)
    # The option's decode step times the scale (3 decimals as shown); the prefill kvplan's.
    assert after["decode_ms_per_token"] == pytest.approx(
        before["decode_ms_per_token"] * scale, abs=2e-3 * scale
    )
    assert after["prefill_ms"] == before["prefill_ms"]
    # A CSV table names it by its id, as a capacity table does.
    params = {key: value for key, value in PLAN.items() if key not in {"gpu", "gpus"}}
    text = client.get("/v1/plans", params={**params, "gpus": "h100-sxm-80gb", "format": "csv"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["speed_calibration_id"] == str(stored["id"])


def test_the_latency_target_is_checked_at_the_calibrated_step(client: TestClient) -> None:
    uncalibrated = _plan(client)["recommendation"]
    one = _plan(client, peak_concurrency=1)["recommendation"]["decode_ms_per_token"]
    eight = uncalibrated["decode_ms_per_token"]  # 8 sequences per replica at the peak
    stored = _store(client)
    scale = stored["step_time_scale"]
    # The run measured a slower step than kvplan's estimate (scale 3.29 with the shipped fit).
    assert scale > 1
    # A target halfway between the calibrated steps at 1 and at 8 sequences: kvplan's own step
    # at 8 meets it (eight < scale x (one + eight) / 2 since scale > 1 and one > 0), the
    # calibrated one does not, so the plan holds fewer sequences on more replicas.
    target = scale * (one + eight) / 2
    best = _plan(client, max_tpot_ms=target)["recommendation"]
    assert best["speed_calibrated_from"]["calibration_id"] == stored["id"]
    assert 1 < best["concurrency_per_replica"] < 8
    assert best["replicas"] > uncalibrated["replicas"]
    assert best["decode_ms_per_token"] <= target
    # Held to a target under the calibrated step at 1 sequence, no layout of it is left.
    none = _plan(client, max_tpot_ms=scale * one * 0.9)
    assert none["recommendation"] is None
    assert {r["code"] for r in none["rejected"]} == {"tpot-over-target"}


def test_without_a_calibration_the_same_target_is_met(client: TestClient) -> None:
    # The control for the test above: kvplan's own step meets the target at the same batch.
    step = _plan(client)["recommendation"]["decode_ms_per_token"]
    met = _plan(client, max_tpot_ms=step * 1.01)["recommendation"]
    assert met["speed_calibrated_from"] is None
    assert met["concurrency_per_replica"] == 8
