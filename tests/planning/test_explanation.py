"""The explanation the API shows is the sizing core's typed steps, in their order."""

from __future__ import annotations

import dataclasses

from fastapi.testclient import TestClient

from service.sizing.planning.explain import REPLICAS_RULE, Explanation

MiB = 1 << 20
# Worked example A of ../shared/design/engine-memory.md: Llama-3.1-8B, a 16-token block across
# 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B is 2 MiB; the pool holds 28,006 blocks.
POOL = 28_006 * 2 * MiB
GPU = "h100-sxm-80gb"
BASE = {
    "model": "llama-3.1-8b",
    "max_model_len": 8192,
    "kv_pool_bytes": POOL,
    "engine_version": "0.20.0",
}
STEPS = [field.name for field in dataclasses.fields(Explanation)]


def test_the_capacity_explanation_has_every_step_in_order(client: TestClient) -> None:
    response = client.post("/v1/capacity", json={**BASE, "gpu": GPU})
    assert response.status_code == 200, response.text
    explanation = response.json()["explanation"]
    assert list(explanation) == STEPS
    # 28,006 x 2,097,152 B = 58,732,838,912 B; divided by 2,097,152 B per block gives it back
    assert explanation["blocks"]["formula"] == (
        "58732838912 B // 2097152 B per block = 28006 blocks"
    )


def test_the_plan_explanation_ends_with_the_replicas(client: TestClient) -> None:
    # no headroom kept (the default keeps 10%), so the worked pool is the plan's
    body = {**BASE, "gpus": [GPU], "peak_concurrency": 50, "headroom_fraction": 0.0}
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    explanation = result["explanation"]
    assert list(explanation) == [*STEPS, "replicas"]
    # 8,192 tokens / 16 per block = 512 blocks a sequence; (28,006 - 1) // 512 = 54 >= 50
    assert explanation["replicas"] == {
        "replicas": 1,
        "rule": REPLICAS_RULE,
        "headroom_fraction": result["recommendation"]["headroom_fraction"],
    }
