"""POST /v1/pictures/simulation and /v1/pictures/latency-vs-rate: a simulation drawn, and
TTFT/TPOT percentiles against the request rate.

Each picture is checked against the answer POST /v1/simulations gives for the same body (a
seeded workload: the same seed, the same run), so a point drawn is the figure the API answers.
The deployment and the loads are tests/simulations/test_simulations_api.py's: Llama-3.1-8B on
one H100 SXM at max_model_len 8,192, 2,000 + 300-token requests, which one replica serves up
to about 6 per second (README, "Traffic: simulating a deployment").
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from tests.pictures.svg import SVG, parse, texts

README = Path(__file__).resolve().parents[2] / "README.md"
DEPLOYMENT = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
WORKLOAD = {"input_tokens": 2000, "output_tokens": 300, "num_requests": 200}
# The panels (service/pictures/traffic.py): requests from 285 (0) up to 95 px, KV usage from
# 515 (0%) up to 345 px (100%).
TOP_BOTTOM, LOW_BOTTOM, LOW_HEIGHT = 285.0, 515.0, 170.0


def _svg(client: TestClient, path: str, body: dict[str, Any]) -> ET.Element:
    response = client.post(path, json=body, params={"format": "svg"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.headers["cache-control"] == "no-store"
    return parse(response.content)


def _polyline(root: ET.Element, series: str) -> list[tuple[float, float]]:
    (line,) = [p for p in root.iter(f"{SVG}polyline") if p.get("data-series") == series]
    pairs = (point.split(",") for point in (line.get("points") or "").split())
    return [(float(x), float(y)) for x, y in pairs]


def _simulation(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/simulations", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_simulation_picture_draws_the_answers_time_series(client: TestClient) -> None:
    body = {**DEPLOYMENT, "workload": {**WORKLOAD, "request_rate": 8}}
    samples = _simulation(client, body)["time_series"]
    root = _svg(client, "/v1/pictures/simulation", body)
    kv = _polyline(root, "kv_usage")
    assert len(kv) == len(samples)
    # KV usage: y = 515 - 170 x share (0% at 515 px, 100% at 345 px), e.g. 0.5 -> 430 px.
    for (_, y), sample in zip(kv, samples, strict=True):
        assert y == pytest.approx(LOW_BOTTOM - LOW_HEIGHT * sample["kv_usage"], abs=0.01)
    # Running requests on a linear axis from 285 px: heights above it in the answer's ratios.
    running = _polyline(root, "running")
    top = max(range(len(samples)), key=lambda i: samples[i]["running"])
    assert samples[top]["running"] > 0
    scale = (TOP_BOTTOM - running[top][1]) / samples[top]["running"]
    for (_, y), sample in zip(running, samples, strict=True):
        assert TOP_BOTTOM - y == pytest.approx(scale * sample["running"], abs=0.02)
    # Time runs left to right, the samples in order.
    xs = [x for x, _ in running]
    assert xs == sorted(xs)
    assert [x for x, _ in _polyline(root, "waiting")] == xs
    (peak,) = [e for e in root.iter(f"{SVG}line") if e.get("data-marker") == "peak_kv_usage"]
    answer = _simulation(client, body)
    assert float(peak.get("y1", "0")) == pytest.approx(
        LOW_BOTTOM - LOW_HEIGHT * answer["peak_kv_usage"], abs=0.01
    )


def test_the_simulation_picture_is_a_png_too(client: TestClient) -> None:
    body = {**DEPLOYMENT, "workload": {**WORKLOAD, "num_requests": 50, "request_rate": 2}}
    response = client.post("/v1/pictures/simulation", json=body, params={"format": "png"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(response.content)).size == (760, 600)


def test_each_rate_is_the_simulation_at_that_rate(client: TestClient) -> None:
    rates = [1, 4, 30]
    body = {
        **DEPLOYMENT,
        "workload": WORKLOAD,
        "request_rates": rates,
        "targets": {"max_ttft_ms": 2000, "max_tpot_ms": 50},
    }
    root = _svg(client, "/v1/pictures/latency-vs-rate", body)
    circles = [c for c in root.iter(f"{SVG}circle") if c.get("data-series")]
    for rate in rates:
        answer = _simulation(client, {**DEPLOYMENT, "workload": {**WORKLOAD, "request_rate": rate}})
        for metric in ("ttft", "tpot"):
            for quantile in ("p50", "p99"):
                (point,) = [
                    c
                    for c in circles
                    if c.get("data-series") == f"{metric}_{quantile}"
                    and c.get("data-rate") == f"{rate:g}"
                ]
                expected = answer[f"{metric}_ms"][quantile]
                assert float(point.get("data-ms", "0")) == pytest.approx(expected, abs=1e-3)
    # 30/s is past the ~10.4/s one replica serves (its throughput at 30 and 40/s): requests
    # queue for room (mean_waiting 8.3 over 200 requests), the first rate marked saturated;
    # at 1/s and 4/s none waits (mean_waiting 0.0).
    assert answer["mean_waiting"] >= 1  # the last answer: at 30/s
    (saturation,) = [e for e in root.iter(f"{SVG}line") if e.get("data-marker") == "saturation"]
    assert saturation.get("data-rate") == "30"
    markers = {e.get("data-marker") for e in root.iter(f"{SVG}line")}
    assert {"max_ttft_ms", "max_tpot_ms"} <= markers
    assert any(t.startswith("saturated:") for t in texts(root))


def test_a_light_sweep_marks_no_saturation(client: TestClient) -> None:
    body = {**DEPLOYMENT, "workload": {**WORKLOAD, "num_requests": 50}, "request_rates": [0.5, 1]}
    root = _svg(client, "/v1/pictures/latency-vs-rate", body)
    assert not [e for e in root.iter(f"{SVG}line") if e.get("data-marker") == "saturation"]
    response = client.post(
        "/v1/pictures/latency-vs-rate", json=body, headers={"Accept": "image/png"}
    )
    assert response.status_code == 200
    assert Image.open(io.BytesIO(response.content)).size == (760, 600)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"workload": None, "trace": [{"arrival_s": 0, "input_tokens": 5, "output_tokens": 5}]},
         "workload"),
        ({"workload": {**WORKLOAD, "max_concurrency": 4}}, "workload.max_concurrency"),
        ({"workload": {"input_tokens": 10, "output_tokens": 10}}, "workload.num_requests"),
        # 12 rates x 20,000 requests = 240,000 > 200,000
        ({"workload": {**WORKLOAD, "num_requests": 20_000}, "request_rates": list(range(1, 13))},
         "request_rates"),
        ({"request_rates": []}, "request_rates"),
        ({"request_rates": [0]}, "request_rates"),
    ],
)  # fmt: skip
def test_a_sweep_it_cannot_run_is_a_problem_naming_the_field(
    client: TestClient, change: dict[str, Any], field: str
) -> None:
    body = {**DEPLOYMENT, "workload": WORKLOAD, "request_rates": [1, 2], **change}
    response = client.post("/v1/pictures/latency-vs-rate", json=body, params={"format": "svg"})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"].startswith(field)


def test_the_readme_latency_example_answers_a_png(client: TestClient) -> None:
    # The curl example of README "The pictures and the page's traffic mode", its body as it is
    # (fewer requests per rate here: the figures the README quotes are from 1,000 each).
    text = README.read_text()
    start = text.index("curl -s -X POST localhost:8000/v1/pictures/latency-vs-rate")
    example = text[start : text.index("```", start)]
    body = json.loads(example[example.index("-d '") + 4 : example.rindex("'")])
    assert body["request_rates"] == [1, 2, 3, 4, 5, 6, 7, 8]
    body["workload"]["num_requests"] = 100
    response = client.post(
        "/v1/pictures/latency-vs-rate", json=body, headers={"Accept": "image/png"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"


def test_an_sglang_simulation_picture_names_sglangs_scheduler_and_limits(
    client: TestClient,
) -> None:
    # The subtitle says whose scheduler ran, with SGLang's own limits (traffic_subtitle).
    body = {**DEPLOYMENT, "engine": "sglang", "workload": {**WORKLOAD, "request_rate": 8}}
    engine = _simulation(client, body)["engine"]
    words = " ".join(texts(_svg(client, "/v1/pictures/simulation", body)))
    assert "SGLang" in words
    assert f"max_running_requests {engine['max_num_seqs']:,}" in words
    assert f"chunked_prefill_size {engine['chunked_prefill_size']:,}" in words
