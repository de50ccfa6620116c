"""Plans across nodes: a replica of pipeline stages, one per node, TP within each node."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

QUESTION = {
    "model": "llama-3.1-405b",
    "max_model_len": 131072,
    "peak_concurrency": 1,
    "gpus": ["h100-sxm-80gb"],
    "engine_version": "0.20.0",
}


def _plan(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/plans", json={**QUESTION, **overrides})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_llama_405b_at_full_context_on_h100_spans_two_nodes(client: TestClient) -> None:
    answer = _plan(client)
    best = answer["recommendation"]
    print(best)
    print(answer["rejected"])
    assert best is not None
