"""LMCache's local CPU and disk tiers on every door: GET /v1/capacity (the hot path and
FastAPI's route), POST (the tier table), the CSV row, the CLI and a plan's flags to paste.

The worked example is tests/sizing/test_lmcache_tiers.py's: Llama-3.1-70B (catalog
llama-3.1-70b: 80 layers, 8 KV heads x 128) at TP 4, fp8 KV, 32,768 tokens, vLLM 0.33.0, a given
pool of 40 GiB per GPU; `--kv-offloading-backend lmcache --kv-offloading-size 100` gives
LMCache 25 GiB a rank (vllm/config/vllm.py VllmConfig._post_init_kv_transfer_config: size /
(TP x PP)), and max_local_disk_size 256 GiB a rank is 1 TiB of disk. One rank's chunk: 80 x 2 x
256 tokens x 2 heads x 128 x 1 B = 10,485,760 B. CPU: 26,843,545,600 // 10,485,760 = 2,560
chunks, 655,360 tokens, 2,560 // 128 = 20 sequences, x 4 ranks = 100 GiB. Disk:
274,877,906,944 // 10,485,760 = 26,214 chunks, 6,710,784 tokens, 204 sequences,
26,214 x 10,485,760 x 4 = 1,099,494,850,560 B.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
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
    "kv_offloading_backend": "lmcache",
    "kv_offloading_size": 100,
    "lmcache_max_local_disk_size": 256,
    "lmcache_version": "0.5.6",
}
TIERS = {
    "host_kv_cache_bytes": 100 * GiB,
    "host_kv_cache_blocks": 2_560,
    "host_kv_cache_tokens": 655_360,
    "host_max_num_seqs": 20,
    "disk_kv_cache_bytes": 1_099_494_850_560,
    "disk_kv_cache_blocks": 26_214,
    "disk_kv_cache_tokens": 6_710_784,
    "disk_max_num_seqs": 204,
    "host_memory_bytes_per_replica": 100 * GiB,  # 4 ranks x 25 GiB pinned
}


def _tiers(body: dict[str, Any]) -> dict[str, Any]:
    return {name: body[name] for name in TIERS}


def test_get_answers_lmcache_tiers_on_the_hot_path_and_the_route_alike(
    client: TestClient, fastapi_only: TestClient
) -> None:
    for door in (client, fastapi_only):
        answer = door.get("/v1/capacity", params=EXAMPLE)
        assert answer.status_code == 200, answer.text
        assert _tiers(answer.json()) == TIERS


def test_post_gives_the_three_row_tier_table(client: TestClient) -> None:
    answer = client.post("/v1/capacity", json={**EXAMPLE, "explain": True})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert _tiers(body) == TIERS
    hbm, host, disk = body["kv_tiers"]
    assert [row["tier"] for row in (hbm, host, disk)] == ["hbm", "host", "disk"]
    assert (host["bytes_per_rank"], disk["bytes_per_rank"]) == (25 * GiB, 274_873_712_640)
    assert body["explanation"]["kv_tiers"] == body["kv_tiers"]


def test_lmcache_own_names_are_aliases_and_the_csv_row_carries_the_disk(
    client: TestClient,
) -> None:
    # LMCache's max_local_cpu_size (25 GiB a rank) instead of vLLM's kv_offloading_size: the
    # same buffer, the same answer.
    own = {k: v for k, v in EXAMPLE.items() if not k.startswith("kv_offloading")}
    own |= {"max_local_cpu_size": 25, "format": "csv"}
    (row,) = list(csv.DictReader(io.StringIO(client.get("/v1/capacity", params=own).text)))
    assert {name: int(row[name]) for name in TIERS} == TIERS


def test_the_chunk_and_the_buffers_public_logs_show(client: TestClient) -> None:
    # LMCache-Ascend#184 (LMCache 0.3.13.dev0, vLLM 0.11.0, Qwen3-8B at world_size 2) logs
    # "kv_dtype=torch.bfloat16, kv_shape=(36, 2, 256, 4, 128)": a chunk of 36 x 2 x 256 x 4 x
    # 128 x 2 B = 18,874,368 B a rank. LMCache#2901 (TP 2, LMCACHE_MAX_LOCAL_CPU_SIZE=50) shows
    # ~50 GB RSS in each worker: 2 x 50 x 2^30 = 107,374,182,400 B of host memory. 50 GiB
    # = 53,687,091,200 B // 18,874,368 = 2,844 chunks (2,844.4), x 256 = 728,064 tokens.
    question = {"model": "qwen3-8b", "gpu": "h100-sxm-80gb", "tensor_parallel_size": 2}
    question |= {"max_model_len": 8192, "max_local_cpu_size": 50, "lmcache_version": "0.3.13"}
    body = client.post("/v1/capacity", json=question).json()
    _, host = body["kv_tiers"]
    assert "18,874,368 B a chunk" in host["note"]
    assert (host["blocks"], host["tokens"]) == (2_844, 728_064)
    assert body["host_memory_bytes_per_replica"] == 107_374_182_400


def test_what_lmcache_does_not_take_is_refused_by_name(client: TestClient) -> None:
    base = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    for extra, field in (
        ({"engine": "sglang", "lmcache_max_local_cpu_size": 5}, "lmcache_max_local_cpu_size"),
        ({"lmcache_max_local_cpu_size": 5, "lmcache_version": "0.2.0"}, "lmcache_version"),
        (
            {
                "kv_offloading_backend": "lmcache",
                "kv_offloading_size": 8,
                "lmcache_version": "0.3.5",
            },
            "kv_offloading_backend",
        ),
        ({"lmcache_chunk_size": 0}, "lmcache_chunk_size"),
    ):
        body = problem(client.get("/v1/capacity", params={**base, **extra}), 422)
        assert body["field"] == field, body


def test_a_plan_pastes_lmcache_kv_transfer_config(client: TestClient) -> None:
    # Llama-3.1-8B on one H100 (TP 1): kv_offloading_size 64 GiB is max_local_cpu_size 64.0.
    question = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 10}
    question |= {"gpus": ["h100-sxm-80gb"], "kv_offloading_backend": "lmcache"}
    question |= {"kv_offloading_size": 64, "lmcache_chunk_size": 512}
    best = client.post("/v1/plans", json=question).json()["recommendation"]
    words = shlex.split(best["engine_flags"]["vllm"])  # the command line, as a shell reads it
    config = json.loads(words[words.index("--kv-transfer-config") + 1])
    assert config == {
        "kv_connector": "LMCacheConnectorV1",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "lmcache.max_local_cpu_size": 64.0,
            "lmcache.chunk_size": 512,
        },
    }
    assert not any(word.startswith("--kv-offloading") for word in words)


def test_a_deployment_profile_keeps_lmcache_tiers(client: TestClient) -> None:
    profile = {"name": "llama-70b-lmcache", **EXAMPLE}
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    sized = client.get("/v1/deployments/llama-70b-lmcache/capacity").json()
    assert _tiers(sized) == TIERS


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
    assert _tiers(json.loads(capsys.readouterr().out)) == TIERS
