"""Dtype and weight-format names over HTTP: parsed once at the door, answered by their one name.

Issue 18 item 3: the names become typed values (sizing/model/dtypes.py `KvCacheDtype`,
`WeightFormat`)
where the request enters; the answer still prints the canonical name.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

MiB = 1 << 20
# Worked example A of ../shared/design/engine-memory.md: Llama-3.1-8B, 32 layers x 8 KV heads x
# 128 x 2 (K, V); a pool of 28,006 two-MiB (bf16) blocks, given so no weights are needed.
QUESTION = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "kv_pool_bytes": 28_006 * 2 * MiB,
    "engine_version": "0.20.0",
}


def test_a_cache_dtype_alias_is_answered_as_its_canonical_name(client: TestClient) -> None:
    # torch's name float8_e4m3fn is vLLM's fp8_e4m3 (dtypes._KV_DTYPE_ALIASES)
    alias = client.get("/v1/capacity", params={**QUESTION, "kv_cache_dtype": "float8_e4m3fn"})
    canonical = client.get("/v1/capacity", params={**QUESTION, "kv_cache_dtype": "fp8_e4m3"})
    assert alias.status_code == canonical.status_code == 200
    assert alias.json()["kv_cache_dtype"] == "fp8_e4m3"
    # 32 x 8 x 128 x 2 x 1 B (fp8) = 65,536 B per token, half of bf16's 131,072
    assert alias.json()["kv_bytes_per_token"] == 65_536
    assert alias.json() == canonical.json()


def test_an_unknown_weight_format_in_a_plan_is_one_422_naming_it(client: TestClient) -> None:
    # The format is the request's fault, not each candidate's: one problem before any search
    # (before, every candidate GPU was "rejected" with the same invalid-dtype reason).
    body = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 8}
    response = client.post("/v1/plans", json={**body, "weight_format": "int3"})
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "/problems/invalid-dtype"
    assert problem["field"] == "weight_format"
    assert "awq" in problem["detail"]  # the accepted formats are listed


def test_a_known_weight_format_alias_in_a_plan_is_answered(client: TestClient) -> None:
    # modelopt_fp4 is nvfp4 (dtypes._WEIGHT_ALIASES): the plan searches as for nvfp4
    body = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 8}
    alias = client.post("/v1/plans", json={**body, "weight_format": "modelopt_fp4"})
    canonical = client.post("/v1/plans", json={**body, "weight_format": "nvfp4"})
    assert alias.status_code == canonical.status_code == 200
    assert alias.json()["recommendation"] == canonical.json()["recommendation"]
    assert alias.json()["recommendation"] is not None
