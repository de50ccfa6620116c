"""vLLM's all-to-all backend on every door (issue 21, item 1: engines/all2all.py).

The catalog's deepseek-v3 (hidden_size 7168, 256 routed experts) on the catalog's h200-141gb at
DP 8 + EP, as `vllm serve --data-parallel-size 8 --enable-expert-parallel --all2all-backend
deepep_low_latency`: GET (the hot path and the FastAPI route), POST, a plan table's CSV column
and the CLI give the same pool, each explanation an `all2all_buffers` line of 4,924,115,232 B
(worked in tests/sizing/test_all2all.py: DeepEP's 1 GiB + 160 B NVLink buffer, 32 MiB
workspace and get_low_latency_rdma_size_hint(256, 7168, 8, 256) = 3,816,818,816 B).
SGLang's `--moe-a2a-backend deepep` likewise (its buffer cut out of the reserve).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.helpers import problem
from tests.planning.test_plan_table import CSV, table

CAPACITY = "/v1/capacity"
V3 = "model=deepseek-v3&gpu=h200-141gb&max_model_len=32768"
LL = f"{V3}&data_parallel_size=8&enable_expert_parallel=true&all2all_backend=deepep_low_latency"
BUFFERS = 1024 * 1024 * 1024 + 160 + 32 * 1024 * 1024 + 3_816_818_816


def test_get_and_post_give_the_same_pool_and_the_buffers_line(
    client: TestClient, fastapi_only: TestClient
) -> None:
    answers = [door.get(f"{CAPACITY}?{LL}") for door in (client, fastapi_only)]
    for answer in answers:
        assert answer.status_code == 200, answer.text
    assert answers[0].content == answers[1].content
    post = client.post(
        CAPACITY,
        json={
            "model": "deepseek-v3",
            "gpu": "h200-141gb",
            "max_model_len": 32768,
            "data_parallel_size": 8,
            "enable_expert_parallel": True,
            "all2all_backend": "deepep_low_latency",
        },
    )
    assert post.status_code == 200, post.text
    body = post.json()
    assert body["kv_pool_bytes"] == answers[0].json()["kv_pool_bytes"]
    assert body["engine_settings"]["all2all_backend"] == "deepep_low_latency"
    lines = {line["name"]: line for line in body["explanation"]["memory_budget"]["lines"]}
    assert lines["all2all_buffers"]["bytes"] == -BUFFERS == -4_924_115_232
    # without the backend (allgather_reducescatter) the pool differs by the lines' difference
    plain = client.get(f"{CAPACITY}?{V3}&data_parallel_size=8&enable_expert_parallel=true")
    assert plain.json()["kv_pool_bytes"] != body["kv_pool_bytes"]


def test_a_plan_tables_column_and_the_cli_ask_the_same_question(
    client: TestClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = "model,max_model_len,peak_concurrency,gpus,enable_expert_parallel,all2all_backend\n"
    body += "deepseek-v3,32768,64,h200-141gb,true,deepep_low_latency\n"
    rows = table(client.post("/v1/plans", content=body, headers=CSV))
    assert rows[0]["status"] == "ok", rows
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    args = ["capacity", "--offline", "--model", "deepseek-v3", "--gpu", "h200-141gb"]
    args += ["--max-model-len", "32768", "--no-explain", "--data-parallel-size", "8"]
    args += ["--enable-expert-parallel", "--all2all-backend", "deepep_low_latency"]
    assert main(args) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["kv_pool_bytes"] == client.get(f"{CAPACITY}?{LL}").json()["kv_pool_bytes"]


def test_what_kvplan_does_not_size_is_a_422_naming_the_flag(client: TestClient) -> None:
    body = problem(client.get(f"{CAPACITY}?{V3}&data_parallel_size=8&all2all_backend=nixl_ep"), 422)
    assert body["field"] == "all2all_backend"
    body = problem(client.get(f"{CAPACITY}?{V3}&engine=sglang&moe_a2a_backend=mooncake"), 422)
    assert body["field"] == "moe_a2a_backend"
    # SGLang's flag for vLLM, and vLLM's for SGLang, are refused by name
    body = problem(client.get(f"{CAPACITY}?{V3}&moe_a2a_backend=deepep"), 422)
    assert body["field"] == "moe_a2a_backend"
    body = problem(client.get(f"{CAPACITY}?{V3}&engine=sglang&all2all_backend=naive"), 422)
    assert body["field"] == "all2all_backend"


def test_sglang_deepep_on_get_post_and_the_cli(
    client: TestClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # SGLang 0.5.23 --tp 8 --dp 8 --enable-dp-attention --moe-a2a-backend deepep: DeepEP's
    # auto-mode buffer of 2,277,674,912 B (tests/sizing/test_all2all.py) cut out of the reserve
    query = f"{V3}&engine=sglang&engine_version=0.5.23&tp_size=8&dp_size=8"
    query += "&enable_dp_attention=true&moe_a2a_backend=deepep"
    get = client.get(f"{CAPACITY}?{query}")
    assert get.status_code == 200, get.text
    post = client.post(
        CAPACITY,
        json={
            "model": "deepseek-v3",
            "gpu": "h200-141gb",
            "max_model_len": 32768,
            "engine": "sglang",
            "engine_version": "0.5.23",
            "tensor_parallel_size": 8,
            "data_parallel_size": 8,
            "enable_dp_attention": True,
            "moe_a2a_backend": "deepep",
        },
    )
    assert post.status_code == 200, post.text
    body = post.json()
    assert body["kv_pool_bytes"] == get.json()["kv_pool_bytes"]
    lines = {line["name"]: line for line in body["explanation"]["memory_budget"]["lines"]}
    assert lines["all2all_buffers"]["bytes"] == -2_277_674_912
    assert body["engine_settings"]["ep_size"] == 8
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    args = ["capacity", "--offline", "--model", "deepseek-v3", "--gpu", "h200-141gb"]
    args += ["--max-model-len", "32768", "--no-explain", "--engine", "sglang"]
    args += ["--engine-version", "0.5.23", "--tensor-parallel-size", "8"]
    args += ["--data-parallel-size", "8", "--enable-dp-attention", "--moe-a2a-backend", "deepep"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["kv_pool_bytes"] == body["kv_pool_bytes"]


def test_sglang_deepep_warnings_name_sglangs_own_flags(client: TestClient) -> None:
    # a user who asked --moe-a2a-backend deepep reads of moe_a2a_backend, never of vLLM's
    # all2all_backend (the RDMA part of auto mode's buffer is NVSHMEM's, engines/all2all.py)
    query = f"{V3}&engine=sglang&engine_version=0.5.23&tp_size=8&dp_size=8"
    query += "&enable_dp_attention=true&moe_a2a_backend=deepep"
    warnings = client.get(f"{CAPACITY}?{query}").json()["warnings"]
    assert any(w.startswith("moe_a2a_backend deepep: NVSHMEM holds") for w in warnings)
    assert not any("all2all_backend" in w for w in warnings)


def test_sglang_deepep_mode_without_deepep_says_it_changes_nothing(client: TestClient) -> None:
    # --deepep-mode picks the DeepEP buffer's mode; with no --moe-a2a-backend deepep SGLang
    # makes no buffer, so the pool is the plain TP 8 one and the answer says so
    plain = client.get(f"{CAPACITY}?{V3}&engine=sglang&tp_size=8").json()
    asked = client.get(f"{CAPACITY}?{V3}&engine=sglang&tp_size=8&deepep_mode=low_latency")
    assert asked.status_code == 200, asked.text
    assert asked.json()["kv_pool_bytes"] == plain["kv_pool_bytes"]
    said = [w for w in asked.json()["warnings"] if w.startswith("deepep_mode low_latency")]
    assert len(said) == 1
    assert "only with moe_a2a_backend deepep" in said[0]
