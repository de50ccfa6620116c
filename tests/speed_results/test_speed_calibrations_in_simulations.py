"""Speed calibrations in simulations and plans for a rate (issue 22 item 2), and on every door
of a capacity answer.

The calibration is kept from guidellm's report (tests/fixtures/bench_results/SOURCES.md,
test_guidellm.py): one synchronous benchmark, its mean inter-token latency 4.941609043733832 ms
(`benchmarks[0].metrics.inter_token_latency_ms.successful.mean`), at batch 1, for the deployment
llama-3.1-8b-instruct on one H100 at max_model_len 8192 (the file's model is stripped: the
deployment is the tests' own). Scale = 4.941609043733832 / kvplan's decode step at batch 1
and that run's context, as POST /v1/speed-results estimates it.

A simulation puts the scale on every step's decode part and keeps the prefill kvplan's
(service/simulation/deployment.py). With one client at a time (max_concurrency 1) every step
after a request's first decodes that one sequence alone, so its TPOT is kvplan's times the
scale exactly, and its TTFT (one prefill on an idle engine) is unchanged.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.catalog.seed import offline_snapshot
from service.cli import main
from service.planning.schemas import CapacityRequest
from service.planning.service import CapacityQuestion, sized_deployment
from service.simulation import SimulationError, engine_config, step_table
from tests.conftest import ADMIN
from tests.speed_results.test_guidellm import GUIDELLM, ITL_MS

QUESTION = {"model": "llama-3.1-8b-instruct", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
# One client at a time, 20 requests of 256 tokens in and 128 out (the fixture's shape).
ONE_AT_A_TIME = {
    "max_concurrency": 1,
    "input_tokens": 256,
    "output_tokens": 128,
    "num_requests": 20,
}


def _store(client: TestClient) -> dict[str, Any]:
    response = client.post(
        "/v1/speed-calibrations",
        json={"result": GUIDELLM, "deployment": QUESTION, "notes": "guidellm fixture"},
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _simulate(client: TestClient) -> dict[str, Any]:
    response = client.post("/v1/simulations", json={**QUESTION, "workload": ONE_AT_A_TIME})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_guidellm_run_is_kept_as_its_measured_scale(client: TestClient) -> None:
    compared = client.post("/v1/speed-results", json={"result": GUIDELLM, "deployment": QUESTION})
    estimated = compared.json()["figures"][0]["estimated"]  # kvplan's decode step at batch 1
    stored = _store(client)
    assert (stored["tool"], stored["batch"]) == ("guidellm", 1)  # synchronous: one in flight
    assert stored["measured_tpot_ms"] == pytest.approx(ITL_MS)
    assert stored["estimated_tpot_ms"] == pytest.approx(estimated)
    assert stored["step_time_scale"] == pytest.approx(ITL_MS / estimated)


def test_a_simulation_scales_its_decode_steps(client: TestClient) -> None:
    before = _simulate(client)
    assert before["speed_calibrated_from"] is None
    stored = _store(client)
    scale = stored["step_time_scale"]
    after = _simulate(client)
    used = after["speed_calibrated_from"]
    assert (used["calibration_id"], used["tool"]) == (stored["id"], "guidellm")
    assert used["step_time_scale"] == pytest.approx(scale)
    assert any("decode steps are kvplan's times" in w for w in after["warnings"])
    # One sequence decoding alone at every step: TPOT is kvplan's times the scale; the prefill
    # on an idle engine (TTFT) stays kvplan's.
    for name in ("mean", "p50", "p99"):
        assert after["tpot_ms"][name] == pytest.approx(before["tpot_ms"][name] * scale, rel=1e-9)
        assert after["ttft_ms"][name] == pytest.approx(before["ttft_ms"][name], rel=1e-9)


def test_the_step_table_scales_decode_alone() -> None:
    body = CapacityRequest.model_validate({**QUESTION, "max_model_len": 2048})
    deployment = sized_deployment(CapacityQuestion.from_body(body), offline_snapshot())
    config = engine_config(deployment.capacity)
    args = (deployment.arch, deployment.gpu, deployment.capacity, config)
    plain = step_table(*args)
    doubled = step_table(*args, decode_scale=2.0)
    assert doubled.prefill_ms == plain.prefill_ms
    for row, twice in zip(plain.decode_ms, doubled.decode_ms, strict=True):
        assert twice == pytest.approx([2 * ms for ms in row], rel=1e-12)
    with pytest.raises(SimulationError) as refused:
        step_table(*args, decode_scale=0.0)
    assert refused.value.field == "step_time_scale"


def test_a_plan_for_a_rate_says_which_option_was_calibrated(client: TestClient) -> None:
    body = {key: value for key, value in QUESTION.items() if key != "gpu"} | {
        "gpus": ["h100-sxm-80gb"],
        "workload": {"request_rate": 4, "input_tokens": 256, "output_tokens": 128},
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 50,
        # single pools only: each option is then one layout, keyed by its TP size below
        "disaggregated": "never",
    }
    before = client.post("/v1/plans", json=body).json()
    assert before["recommendation"]["speed_calibrated_from"] is None
    stored = _store(client)
    after = client.post("/v1/plans", json=body).json()
    options = [after["recommendation"], *after["alternatives"]]
    # The calibration's key has tensor_parallel_size 1: that option alone takes its scale.
    for option in options:
        used = option["speed_calibrated_from"]
        if option["tensor_parallel_size"] == 1:
            assert used["calibration_id"] == stored["id"]
        else:
            assert used is None
    # The others are simulated as before; the calibrated one at its measured step (a scale of
    # 0.60 at batch 1 with the shipped fit: faster; slower were it above 1), same replicas.
    was = {
        o["tensor_parallel_size"]: o for o in [before["recommendation"], *before["alternatives"]]
    }
    for option in options:
        old = was[option["tensor_parallel_size"]]
        assert option["replicas"] == old["replicas"]
        if option["tensor_parallel_size"] == 1:
            faster = option["tpot_ms"]["mean"] < old["tpot_ms"]["mean"]
            assert faster == (stored["step_time_scale"] < 1)
        else:
            assert option["tpot_ms"] == old["tpot_ms"]
    assert any(option["tensor_parallel_size"] == 1 for option in options)


def test_every_capacity_door_names_the_calibration(
    client: TestClient,
    app: FastAPI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stored = _store(client)
    get = client.get("/v1/capacity", params=QUESTION).json()
    post = client.post("/v1/capacity", json=QUESTION).json()
    assert get["speed_calibrated_from"] == post["speed_calibrated_from"]
    assert get["speed_calibrated_from"]["calibration_id"] == stored["id"]
    text = client.get("/v1/capacity", params={**QUESTION, "format": "csv"}).text
    assert next(csv.DictReader(io.StringIO(text)))["speed_calibration_id"] == str(stored["id"])
    # The shell reads the same catalog (the test's database, through the app's snapshot).
    monkeypatch.setattr("service.cli._snapshot", lambda settings, args: app.state.catalog.get())
    shell = ["--model", QUESTION["model"], "--gpu", QUESTION["gpu"], "--max-model-len", "8192"]
    assert main(["capacity", *shell, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["speed_calibrated_from"] == get["speed_calibrated_from"]
    assert main(["capacity", *shell, "--format", "csv"]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["speed_calibration_id"] == str(stored["id"])
    # And a simulation from the shell, as POST /v1/simulations answers it.
    traffic = ["--max-concurrency", "1", "--input-tokens", "256", "--output-tokens", "128"]
    assert main(["simulate", *shell, *traffic, "--num-requests", "20", "--format", "csv"]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["speed_calibration_id"] == str(stored["id"])
    assert float(row["tpot_mean_ms"]) == pytest.approx(_simulate(client)["tpot_ms"]["mean"])
