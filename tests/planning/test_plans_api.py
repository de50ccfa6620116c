"""POST and GET /v1/plans: the three sizing questions -> the cheapest plan."""

from __future__ import annotations

import csv
import io
from typing import Any

from fastapi.testclient import TestClient

MiB = 1 << 20
GiB = 1 << 30
# Llama-3.1-8B (seed examples 4-5): 131,072 B per token, a 16-token block across 32 layers is
# 2 MiB. Every candidate gets the same known pool per GPU so the plan can be worked by hand.
POOL_BLOCKS = 28_006
GPUS = [
    {"memory_bytes": 80 * GiB, "name": "gpu-a", "price_usd_per_hour": 2.0},
    {"memory_bytes": 48 * GiB, "name": "gpu-b", "price_usd_per_hour": 1.0},
]


def plan(client: TestClient, **overrides: Any) -> dict[str, Any]:
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 50,
        "gpus": GPUS,
        "kv_pool_bytes": POOL_BLOCKS * 2 * MiB,
        "engine_version": "0.20.0",
        # No headroom kept unless a test asks (the default keeps 10%: README, Headroom), so
        # the hand-worked pool is the plan's.
        "headroom_fraction": 0.0,
        **overrides,
    }
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_the_cheapest_feasible_plan_wins(client: TestClient) -> None:
    result = plan(client)
    best = result["recommendation"]
    # At 8,192 tokens a sequence holds 512 blocks; one GPU's 28,005 usable blocks (one is the
    # null block) hold 54 sequences, so 50 fit on one GPU; gpu-b costs $1.00/h, gpu-a $2.00/h.
    assert best["gpu"] == "gpu-b"
    assert best["tensor_parallel_size"] == 1
    assert best["replicas"] == 1
    assert best["total_gpus"] == 1
    assert best["max_num_seqs"] == 54
    assert best["cost_per_hour_usd"] == 1.0
    # headroom: 1 - 50 x 512 / 28,005 = 0.08588 -> 0.0859
    assert best["headroom_fraction"] == 0.0859
    assert "--max-num-seqs 54" in best["engine_flags"]["vllm"]
    assert "--tensor-parallel-size 1" in best["engine_flags"]["vllm"]
    assert "--max-running-requests 54" in best["engine_flags"]["sglang"]
    # alternatives are ranked by cost: the next is gpu-a alone at $2.00/h
    costs = [option["cost_per_hour_usd"] for option in result["alternatives"]]
    assert costs == sorted(costs)
    assert result["alternatives"][0]["gpu"] in ("gpu-a", "gpu-b")


def test_a_headroom_target_adds_a_replica(client: TestClient) -> None:
    # keeping 20% free: 28,005 x 0.8 = 22,404 blocks per GPU < 50 x 512 = 25,600 -> 2 replicas;
    # headroom then 1 - 25,600 / (2 x 28,005) = 0.5429
    best = plan(client, headroom_fraction=0.2)["recommendation"]
    assert best["gpu"] == "gpu-b"
    assert best["replicas"] == 2
    assert best["headroom_fraction"] == 0.5429


def test_average_context_lets_paged_attention_hold_more(client: TestClient) -> None:
    # 2,048-token average: 128 blocks per sequence; 28,005 // 128 = 218 sequences per GPU,
    # under gpu-b's default max_num_seqs of 256 (a < 70 GiB GPU) -> 200 fit on one GPU.
    best = plan(client, peak_concurrency=200, avg_context_tokens=2048)["recommendation"]
    assert best["gpu"] == "gpu-b"
    assert best["total_gpus"] == 1
    assert best["sequences_per_replica"] == 218


def test_candidates_that_cannot_serve_are_rejected_with_a_reason(client: TestClient) -> None:
    # Llama-3.1-405B in bf16 is 812 GB of weights: one 22 GiB L4 cannot hold them, nor can
    # 4 nodes of 2 (8 x 22 GiB = 189 GB), the most nodes a plan searches.
    response = client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-405b",
            "max_model_len": 8192,
            "peak_concurrency": 8,
            "gpus": ["l4"],
            "max_gpus_per_node": 2,
        },
    )
    assert response.status_code == 200
    result = response.json()
    assert result["recommendation"] is None
    reasons = {r["tensor_parallel_size"]: r for r in result["rejected"]}
    assert set(reasons) == {1, 2}
    assert reasons[1]["code"] == "weights-do-not-fit"
    assert result["warnings"]


def test_a_sequence_longer_than_the_pool_is_rejected(client: TestClient) -> None:
    # A 1,048,576-token sequence needs cdiv(1,048,576, 16) = 65,536 blocks. The given pool is
    # 28,006 x 2 MiB per GPU; a block holds 2 MiB / tp of KV per GPU (8 KV heads split by tp),
    # so the pool is 28,006 x tp blocks: 28,006 (tp 1) and 56,012 (tp 2) are too few,
    # 112,024 (tp 4) is enough. (Past the model's 131,072: the engine's override is asked for.)
    result = plan(
        client,
        max_model_len=1_048_576,
        peak_concurrency=1,
        max_gpus_per_node=4,
        allow_long_max_model_len=True,
    )
    codes = {(r["gpu"], r["tensor_parallel_size"]): r["code"] for r in result["rejected"]}
    assert codes[("gpu-b", 1)] == "sequence-does-not-fit"
    assert result["recommendation"]["tensor_parallel_size"] == 4


def test_plan_explains_the_recommendation(client: TestClient) -> None:
    result = plan(client)
    explanation = result["explanation"]
    assert explanation["kv_bytes_per_token"]["value"] == 131_072
    assert explanation["blocks"]["num_gpu_blocks"] == POOL_BLOCKS
    assert explanation["replicas"]["replicas"] == 1


def test_plan_as_csv_lists_every_option_ranked(client: TestClient) -> None:
    response = client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-8b",
            "max_model_len": 8192,
            "peak_concurrency": 50,
            "gpus": GPUS,
            "kv_pool_bytes": POOL_BLOCKS * 2 * MiB,
            "engine_version": "0.20.0",
        },
        headers={"Accept": "text/csv"},
    )
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert rows[0]["rank"] == "1"
    assert rows[0]["gpu"] == "gpu-b"
    assert [row["rank"] for row in rows] == [str(i) for i in range(1, len(rows) + 1)]


def test_get_plan_answers_one_value_for_a_spreadsheet(client: TestClient) -> None:
    params = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 50,
        "gpus": "h100-sxm-80gb,l4",
        "kv_pool_bytes": POOL_BLOCKS * 2 * MiB,
        "engine_version": "0.20.0",
        "field": "total_gpus",
    }
    response = client.get("/v1/plans", params=params)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    # The default keeps 10% of each replica's blocks free (README, Headroom): 28,005 usable
    # blocks x 0.9 = 25,204.5 < 50 x 512 = 25,600 blocks at the peak -> 2 replicas of 1 GPU.
    assert response.text == "2"
    # Keeping none, 25,600 <= 28,005: one GPU holds the peak.
    assert client.get("/v1/plans", params={**params, "headroom_fraction": 0}).text == "1"
    gpu = client.get("/v1/plans", params={**params, "field": "gpu"}).text
    assert gpu == "l4"  # the cheaper of the two at $0.44/h (catalog price)


def test_zero_peak_concurrency_is_422_naming_the_field(client: TestClient) -> None:
    response = client.post(
        "/v1/plans", json={"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 0}
    )
    assert response.status_code == 422
    assert response.json()["field"] == "peak_concurrency"


def test_plans_are_counted_by_outcome(client: TestClient) -> None:
    plan(client)
    client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-70b",
            "max_model_len": 8192,
            "peak_concurrency": 8,
            "gpus": ["l4"],
            "max_gpus_per_node": 1,
        },
    )
    client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-8b",
            "max_model_len": 8192,
            "peak_concurrency": 8,
            "kv_cache_dtype": "int3",
        },
    )
    metrics = client.get("/metrics").text
    assert 'kvplan_plans_total{outcome="feasible"} 1.0' in metrics
    assert 'kvplan_plans_total{outcome="infeasible"} 1.0' in metrics
    assert 'kvplan_plans_total{outcome="invalid"} 1.0' in metrics


def test_a_body_that_is_not_json_is_a_422_on_the_body(client: TestClient) -> None:
    # pydantic reports a JSON syntax error at a character offset; a client needs "body".
    response = client.post(
        "/v1/plans",
        content=b'{"model": "llama-3.1-8b",',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["field"] == "body"
    assert "not valid JSON" in problem["detail"]


def test_a_cache_dtype_the_model_cannot_take_is_422_not_all_rejected(client: TestClient) -> None:
    # fp8_ds_mla is DeepSeek's packed sparse-MLA format; Llama has no MLA layer to pack
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 8,
        "kv_cache_dtype": "fp8_ds_mla",
    }
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 422
    assert response.json()["field"] == "kv_cache_dtype"


def test_an_unknown_cache_dtype_is_one_422_naming_it_before_any_search(
    client: TestClient,
) -> None:
    body = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 8}
    response = client.post("/v1/plans", json={**body, "kv_cache_dtype": "fp4"})
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "/problems/invalid-dtype"
    assert problem["field"] == "kv_cache_dtype"
    assert "fp8" in problem["detail"]  # the accepted values are listed


def test_a_request_wrong_in_dtype_and_candidates_is_answered_on_the_dtype(
    client: TestClient,
) -> None:
    body = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 8}
    response = client.post("/v1/plans", json={**body, "kv_cache_dtype": "fp4", "gpus": []})
    assert response.status_code == 422
    assert response.json()["field"] == "kv_cache_dtype"


def test_get_and_post_plan_one_question_alike(client: TestClient) -> None:
    question = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 50}
    got = client.get("/v1/plans", params={**question, "gpus": "h100-sxm-80gb,h200-141gb"})
    posted = client.post(
        "/v1/plans", json={**question, "gpus": ["h100-sxm-80gb", "h200-141gb"], "explain": False}
    )
    assert got.status_code == posted.status_code == 200
    assert got.json() == posted.json()
