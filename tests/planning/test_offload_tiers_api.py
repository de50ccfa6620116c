"""KV tiers beyond HBM and weights in host memory on every door: GET /v1/capacity (both the hot
path and FastAPI's route), POST (the tier table and the explanation), the CSV row, the CLI, a
plan (its flags to paste, its CSV table of questions) and a deployment profile.

The worked example is tests/sizing/test_offload_tiers.py's: Llama-3.1-70B (catalog
llama-3.1-70b: 80 layers, 8 KV heads x 128) at TP 4, fp8 KV, 32,768 tokens, vLLM 0.33.0, a
given pool of 40 GiB per GPU (so only the arithmetic under test moves the numbers). One
worker's GPU block: 80 x 2 x 2 heads x 128 x 1 B x 16 tokens = 655,360 B; a host block one of
each of 4 ranks = 2,621,440 B (640 pages of 4,096 B); 100 GiB = 107,374,182,400 B // 2,621,440
= 40,960 host blocks, x 16 = 655,360 tokens, // 2,048 blocks a sequence = 20 sequences.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.conftest import ADMIN
from tests.helpers import problem

GiB = 1 << 30
EXAMPLE: dict[str, Any] = {
    "model": "llama-3.1-70b",
    "gpu": "h100-sxm-80gb",
    "tensor_parallel_size": 4,
    "kv_cache_dtype": "fp8",
    "max_model_len": 32768,
    "engine_version": "0.33.0",
    "kv_pool_bytes": 40 * GiB,
    "kv_offloading_size": 100,
}
HOST = {
    "host_kv_cache_bytes": 100 * GiB,
    "host_kv_cache_blocks": 40_960,
    "host_kv_cache_tokens": 655_360,
    "host_max_num_seqs": 20,
    "host_memory_bytes_per_replica": 100 * GiB,
}


def _host(body: dict[str, Any]) -> dict[str, Any]:
    return {name: body[name] for name in HOST}


def test_get_answers_the_host_tier_on_the_hot_path_and_the_route_alike(
    client: TestClient, fastapi_only: TestClient
) -> None:
    for door in (client, fastapi_only):
        answer = door.get("/v1/capacity", params=EXAMPLE)
        assert answer.status_code == 200, answer.text
        assert _host(answer.json()) == HOST
        # the GPU side: 42,949,672,960 // 655,360 = 65,536 blocks
        assert answer.json()["num_gpu_blocks"] == 65_536


def test_post_gives_the_tier_table_and_the_explanation_shows_it(client: TestClient) -> None:
    answer = client.post("/v1/capacity", json={**EXAMPLE, "explain": True})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert _host(body) == HOST
    hbm, host = body["kv_tiers"]
    # HBM: 4 GPUs x 40 GiB; 65,536 blocks x 16 = 1,048,576 tokens; (65,536 - 1) // 2,048 = 31
    assert (hbm["tier"], hbm["bytes"], hbm["tokens"], hbm["sequences"]) == (
        "hbm",
        160 * GiB,
        1_048_576,
        31,
    )
    assert (host["tier"], host["bytes"], host["bytes_per_rank"]) == ("host", 100 * GiB, 25 * GiB)
    assert body["explanation"]["kv_tiers"] == body["kv_tiers"]


def test_csv_row_carries_the_host_tier(client: TestClient) -> None:
    answer = client.get("/v1/capacity", params={**EXAMPLE, "format": "csv"})
    (row,) = list(csv.DictReader(io.StringIO(answer.text)))
    assert row["host_kv_cache_bytes"] == str(100 * GiB)
    assert row["host_max_num_seqs"] == "20"


def test_cpu_offload_gb_is_a_line_of_the_budget_and_host_memory(client: TestClient) -> None:
    # Llama-3.1-8B (16,060,522,496 B of weights) on one H100, vLLM: 4 GiB of them in host
    # memory; the pool grows by exactly 4 GiB = 4,294,967,296 B.
    question = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    plain = client.post("/v1/capacity", json=question).json()
    moved = client.post("/v1/capacity", json={**question, "cpu_offload_gb": 4, "explain": True})
    body = moved.json()
    assert body["kv_pool_bytes"] - plain["kv_pool_bytes"] == 4 * GiB
    assert body["host_memory_bytes_per_replica"] == 4 * GiB
    assert body["host_kv_cache_bytes"] is None  # no KV tier asked
    lines = {line["name"]: line["bytes"] for line in body["explanation"]["memory_budget"]["lines"]}
    assert lines["cpu_offload_gb"] == 4 * GiB


def test_sglang_hicache_on_get(client: TestClient) -> None:
    # Llama-3.1-8B, bf16 KV, one rank: 131,072 B a token; hicache_size 100 GB:
    # 100 x 10^9 // 131,072 = 762,939 tokens, + one padding page (page_size 1) = 762,940,
    # x 131,072 B = 100,000,071,680 B.
    params = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "max_model_len": 8192,
        "engine": "sglang",
        "enable_hierarchical_cache": "true",
        "hicache_size": 100,
    }
    body = client.get("/v1/capacity", params=params).json()
    assert body["host_kv_cache_tokens"] == 762_940
    assert body["host_kv_cache_bytes"] == 100_000_071_680


def test_flags_of_the_wrong_engine_and_contradictions_are_refused_by_name(
    client: TestClient,
) -> None:
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    for extra, field in (
        ({"engine": "sglang", "kv_offloading_size": 10}, "kv_offloading_size"),
        ({"hicache_ratio": 2}, "hicache_ratio"),
        (
            {"kv_offloading_size": 10, "kv_offloading_backend": "lmcache", "max_local_cpu_size": 5},
            "lmcache_max_local_cpu_size",
        ),
        ({"kv_offloading_size": 10, "engine_version": "0.13.0"}, "kv_offloading_size"),
    ):
        body = problem(client.get("/v1/capacity", params={**base, **extra}), 422)
        assert body["field"] == field, body


def test_a_plan_pastes_the_flags_and_takes_the_columns(client: TestClient) -> None:
    question = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 10}
    question |= {"gpus": ["h100-sxm-80gb"], "kv_offloading_size": 64, "cpu_offload_gb": 2}
    best = client.post("/v1/plans", json=question).json()["recommendation"]
    assert "--kv-offloading-size 64" in best["engine_flags"]["vllm"]
    assert "--cpu-offload-gb 2" in best["engine_flags"]["vllm"]
    header = "model,max_model_len,peak_concurrency,gpus,kv_offloading_size,cpu_offload_gb"
    row = "llama-3.1-8b,8192,10,h100-sxm-80gb,64,2"
    rows = client.post(
        "/v1/plans", content=f"{header}\n{row}\n", headers={"Content-Type": "text/csv"}
    )
    (cells,) = list(csv.DictReader(io.StringIO(rows.text)))
    assert cells["status"] == "ok", cells
    assert cells["kv_pool_bytes"] == str(best["kv_pool_bytes"])


def test_a_deployment_profile_keeps_the_tier(client: TestClient) -> None:
    profile = {"name": "llama-70b-offload", **EXAMPLE}
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    sized = client.get("/v1/deployments/llama-70b-offload/capacity").json()
    assert _host(sized) == HOST


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_the_cli_answers_the_same(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--offline", "--no-explain"]
    for name, value in EXAMPLE.items():
        args += ["--" + name.replace("_", "-"), str(value)]
    assert main(args) == 0
    assert _host(json.loads(capsys.readouterr().out)) == HOST
