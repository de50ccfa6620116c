"""vLLM expert parallelism and decode context parallelism on every door (issue 21, item 1).

The catalog's deepseek-v3 on the catalog's h200-141gb at DP 8 + EP, as `vllm serve
--data-parallel-size 8 --enable-expert-parallel`: the same answer on GET (the hot path and the
FastAPI route), POST, a deployment profile and the CLI, the flags under vLLM's own names (`-dp`,
`-ep`, `-dcp`), and SGLang's DP attention still refused by name. The numbers are worked in
tests/sizing/test_expert_parallel.py; here the catalog entry (no config.json: its experts are
priced from moe.num_moe_layers 58 x 256 experts x 3 x 2048 x 7168 parameters at fp8's 1 B =
653,908,770,816 B) gives 32 of 256 experts per rank.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.conftest import ADMIN
from tests.helpers import problem
from tests.planning.test_plan_table import CSV, table

CAPACITY = "/v1/capacity"
V3 = "model=deepseek-v3&gpu=h200-141gb&max_model_len=32768"
DP8_EP = f"{V3}&data_parallel_size=8&enable_expert_parallel=true"
# one expert over the 58 MoE layers at 1 B a parameter: 3 x 2048 x 7168 x 58 = 2,554,331,136 B
PER_EXPERT = 3 * 2048 * 7168 * 58


def test_get_answers_per_rank_and_for_the_deployment(
    client: TestClient, fastapi_only: TestClient
) -> None:
    answers = [door.get(f"{CAPACITY}?{DP8_EP}") for door in (client, fastapi_only)]
    for answer in answers:
        assert answer.status_code == 200, answer.text
    assert answers[0].content == answers[1].content
    body = answers[0].json()
    assert body["data_parallel_size"] == 8
    assert body["kv_cache_tokens_total"] == 8 * body["kv_cache_tokens"]
    assert body["max_concurrency_total"] == pytest.approx(8 * body["max_concurrency"], abs=0.05)
    assert body["total_max_num_seqs"] == 8 * body["max_num_seqs"]


def test_vllms_short_flags_ask_the_same_question(client: TestClient) -> None:
    ours = client.get(f"{CAPACITY}?{DP8_EP}")
    theirs = client.get(f"{CAPACITY}?{V3}&dp=8&ep=true")
    pasted = client.get(f"{CAPACITY}?{V3}&--data-parallel-size=8&--enable-expert-parallel=true")
    assert theirs.status_code == 200, theirs.text
    assert theirs.content == ours.content
    assert pasted.content == ours.content


def test_post_explains_the_weights_line_and_agrees_with_get(client: TestClient) -> None:
    get = client.get(f"{CAPACITY}?{DP8_EP}").json()
    post = client.post(
        CAPACITY,
        json={
            "model": "deepseek-v3",
            "gpu": "h200-141gb",
            "max_model_len": 32768,
            "data_parallel_size": 8,
            "enable_expert_parallel": True,
        },
    )
    assert post.status_code == 200, post.text
    body = post.json()
    for name in ("kv_cache_tokens", "kv_cache_tokens_total", "max_concurrency_total"):
        assert body[name] == get[name], name
    assert body["engine_settings"]["expert_parallel_size"] == 8
    assert body["engine_settings"]["local_num_experts"] == 32
    lines = {line["name"]: line for line in body["explanation"]["memory_budget"]["lines"]}
    assert "32 of 256 experts" in lines["weights"]["note"]
    # the catalog's 672,986,192,896 B less the experts' 256 x 2,554,331,136 = 653,908,770,816 B
    # leaves 19,077,422,080 B whole on the rank; 32 experts are 81,738,596,352 B; vLLM adds the
    # rotary cache, 163,840 positions x 64 x 2 B = 20,971,520 B
    rest = 672_986_192_896 - 256 * PER_EXPERT
    assert rest == 19_077_422_080
    assert lines["weights"]["bytes"] == -(32 * PER_EXPERT + rest + 20_971_520)
    assert lines["weights"]["bytes"] == -100_836_989_952


def test_dp8_ep_holds_more_sequences_than_tp8(client: TestClient) -> None:
    dp8 = client.get(f"{CAPACITY}?{DP8_EP}").json()
    tp8 = client.get(f"{CAPACITY}?{V3}&tensor_parallel_size=8").json()
    assert dp8["kv_pool_bytes"] < tp8["kv_pool_bytes"]  # whole attention on every rank
    assert dp8["kv_cache_tokens_total"] > 5 * tp8["kv_cache_tokens_total"]


def test_dcp_on_get_and_its_short_flag(client: TestClient) -> None:
    tp8 = client.get(f"{CAPACITY}?{V3}&tensor_parallel_size=8").json()
    dcp = client.get(f"{CAPACITY}?{V3}&tensor_parallel_size=8&dcp=8")
    assert dcp.status_code == 200, dcp.text
    body = dcp.json()
    assert body["num_gpu_blocks"] == tp8["num_gpu_blocks"]
    # cdiv(cdiv(32768, 8), 16) = 256 blocks a request per rank, against 2048
    assert body["max_concurrency"] == round(body["num_gpu_blocks"] / 256, 2)
    refused = problem(client.get(f"{CAPACITY}?{V3}&tensor_parallel_size=4&dcp=8"), 422)
    assert refused["field"] == "decode_context_parallel_size"


def test_what_vllm_refuses_is_a_422_naming_the_flag(client: TestClient) -> None:
    body = problem(client.get(f"{CAPACITY}?{V3}&data_parallel_size=8&enable_eplb=true"), 422)
    assert body["field"] == "enable_eplb"
    body = problem(
        client.post(
            CAPACITY,
            json={
                "model": "deepseek-v3",
                "gpu": "h200-141gb",
                "engine": "sglang",
                "enable_expert_parallel": True,
            },
        ),
        422,
    )
    assert body["field"] == "enable_expert_parallel"
    # SGLang's DP attention is SGLang's flag: refused by name for vLLM (its answers for SGLang:
    # tests/planning/test_sglang_dp_api.py)
    body = problem(client.get(f"{CAPACITY}?{V3}&enable_dp_attention=true&dp_size=8"), 422)
    assert body["field"] == "enable_dp_attention"
    assert "SGLang's flag" in body["detail"]


def test_plan_tables_take_the_flag_as_a_column(client: TestClient) -> None:
    body = "model,max_model_len,peak_concurrency,gpus,enable_expert_parallel\n"
    body += "deepseek-v3,32768,64,h200-141gb,true\n"
    rows = table(client.post("/v1/plans", content=body, headers=CSV))
    assert rows[0]["status"] == "ok", rows


def test_a_profile_stores_the_flags_and_sizes_them(client: TestClient) -> None:
    profile: dict[str, Any] = {
        "name": "v3-dp8-ep",
        "model": "deepseek-v3",
        "gpu": "h200-141gb",
        "max_model_len": 32768,
        "data_parallel_size": 8,
        "enable_expert_parallel": True,
        "namespace": "inference",
        "workload": "deepseek",
        "replicas": 1,
    }
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    assert created.json()["enable_expert_parallel"] is True
    sized = client.get("/v1/deployments/v3-dp8-ep/capacity").json()
    same = client.get(f"{CAPACITY}?{DP8_EP}").json()
    assert sized["kv_cache_tokens_total"] == same["kv_cache_tokens_total"]


def test_the_cli_asks_the_same_question(
    client: TestClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    args = ["capacity", "--offline", "--model", "deepseek-v3", "--gpu", "h200-141gb"]
    args += ["--max-model-len", "32768", "--no-explain"]
    assert main([*args, "--data-parallel-size", "8", "--enable-expert-parallel"]) == 0
    cli = json.loads(capsys.readouterr().out)
    # vLLM's short spellings as the CLI takes them
    assert main([*args, "--dp", "8", "--ep"]) == 0
    assert json.loads(capsys.readouterr().out) == cli
    same = client.get(f"{CAPACITY}?{DP8_EP}").json()
    for name in ("kv_cache_tokens", "kv_cache_tokens_total", "max_concurrency_total"):
        assert cli[name] == same[name], name


def test_post_plans_recommends_dp8_ep_with_its_flags(client: TestClient) -> None:
    question = {
        "model": "deepseek-v3",
        "gpus": ["h200-141gb"],
        "max_model_len": 32768,
        "peak_concurrency": 256,
    }
    answer = client.post("/v1/plans", json=question)
    assert answer.status_code == 200, answer.text
    options = [answer.json()["recommendation"], *answer.json()["alternatives"]]
    dp8 = next(o for o in options if o["data_parallel_size"] == 8)
    assert dp8["gpus_per_node"] == 8
    assert "--data-parallel-size 8 --enable-expert-parallel" in dp8["engine_flags"]["vllm"]


def test_the_memory_picture_draws_one_dp_rank(client: TestClient) -> None:
    picture = client.get(f"/v1/pictures/memory-budget?{DP8_EP}&format=svg")
    assert picture.status_code == 200, picture.text
    refused = client.get(f"/v1/pictures/memory-budget?{V3}&data_parallel_size=8&enable_eplb=true")
    assert problem(refused, 422)["field"] == "enable_eplb"
