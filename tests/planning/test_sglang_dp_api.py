"""SGLang's DP attention and expert parallelism on every door (issue 21, item 1).

DeepSeek-V3's config.json (tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V3.json, its
SOURCES.md) on the catalog's h200-141gb, as `python -m sglang.launch_server --tp 8 --dp 8
--enable-dp-attention --ep-size 8`: POST answers per attention-DP group and for the engine
(numbers worked in tests/sizing/test_sglang_dp.py); SGLang's own spellings (`dp_size`,
`expert_parallel_size`, 0.5.23's `attn_dp_size`) ask the same question; the catalog entry
(no config.json: its attention's share of the weights is unknown) is refused by name on GET,
the CLI and tables; the plan pastes SGLang's flags.
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
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
V3_CONFIG = json.loads((FIXTURE / "deepseek-ai--DeepSeek-V3.json").read_text(encoding="utf-8"))
QUESTION: dict[str, Any] = {
    "model": {"hf_config": V3_CONFIG},
    "gpu": "h200-141gb",
    "max_model_len": 32768,
    "engine": "sglang",
    "tensor_parallel_size": 8,
}
DP8 = {"data_parallel_size": 8, "enable_dp_attention": True, "ep_size": 8}


def test_post_answers_per_group_and_for_the_engine(client: TestClient) -> None:
    answer = client.post(CAPACITY, json={**QUESTION, **DP8})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kv_cache_tokens_total"] == 8 * body["kv_cache_tokens"]
    assert body["max_concurrency_total"] == pytest.approx(8 * body["max_concurrency"], abs=0.05)
    settings = body["engine_settings"]
    assert (settings["tp_size"], settings["attn_dp_size"], settings["attn_tp_size"]) == (8, 8, 1)
    assert settings["ep_size"] == 8
    assert settings["num_local_experts"] == 32
    assert settings["mem_fraction_static"] == 0.768  # DP attention's reserve: the sizing test
    lines = {line["name"]: line for line in body["explanation"]["memory_budget"]["lines"]}
    assert "DP attention 8 x attention TP 1 over TP 8" in lines["weights"]["note"]
    tp8 = client.post(CAPACITY, json=QUESTION).json()
    assert body["kv_cache_tokens_total"] > 2.8 * tp8["kv_cache_tokens_total"]


def test_sglangs_spellings_ask_the_same_question(client: TestClient) -> None:
    ours = client.post(CAPACITY, json={**QUESTION, **DP8}).json()
    theirs = client.post(
        CAPACITY,
        json={**QUESTION, "dp_size": 8, "enable_dp_attention": True, "expert_parallel_size": 8},
    )
    assert theirs.status_code == 200, theirs.text
    assert theirs.json()["kv_cache_tokens_total"] == ours["kv_cache_tokens_total"]
    new = client.post(
        CAPACITY, json={**QUESTION, "attn_dp_size": 8, "ep_size": 8, "engine_version": "0.5.23"}
    )
    assert new.status_code == 200, new.text
    assert new.json()["kv_cache_tokens_total"] == ours["kv_cache_tokens_total"]


def test_what_sglang_refuses_is_a_422_naming_the_flag(client: TestClient) -> None:
    body = problem(client.post(CAPACITY, json={**QUESTION, **DP8, "data_parallel_size": 3}), 422)
    assert body["field"] == "data_parallel_size"
    body = problem(client.post(CAPACITY, json={**QUESTION, "ep_size": 3}), 422)
    assert body["field"] == "ep_size"
    # a catalog entry whose config.json kvplan does not hold (kimi-k2-instruct: no fixture, so
    # no stored attention_shares) has its attention's weights unknown; deepseek-v3 answers
    # (tests/planning/test_catalog_dp_attention.py)
    k2 = "model=kimi-k2-instruct&gpu=h200-141gb&max_model_len=32768&engine=sglang&tp_size=8"
    body = problem(client.get(f"{CAPACITY}?{k2}&dp_size=8&enable_dp_attention=true"), 422)
    assert body["field"] == "enable_dp_attention"
    assert "hf_config" in body["detail"]
    v3 = "model=deepseek-v3&gpu=h200-141gb&max_model_len=32768&engine=sglang&tp_size=8"
    # EP alone moves no bytes: the catalog entry answers, as TP 8 does
    ep = client.get(f"{CAPACITY}?{v3}&ep_size=8")
    assert ep.status_code == 200, ep.text
    assert ep.json()["kv_cache_tokens"] == client.get(f"{CAPACITY}?{v3}").json()["kv_cache_tokens"]


def test_the_cli_takes_sglangs_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(V3_CONFIG), encoding="utf-8")
    args = ["capacity", "--offline", "--hf-config", str(config), "--gpu", "h200-141gb"]
    args += ["--max-model-len", "32768", "--engine", "sglang", "--no-explain"]
    args += ["--tensor-parallel-size", "8"]
    assert (
        main([*args, "--data-parallel-size", "8", "--enable-dp-attention", "--ep-size", "8"]) == 0
    )
    cli = json.loads(capsys.readouterr().out)
    assert cli["kv_cache_tokens_total"] == 8 * cli["kv_cache_tokens"]
    assert cli["engine_settings"]["attn_dp_size"] == 8


def test_the_plan_pastes_sglangs_flags(client: TestClient) -> None:
    question = {
        "model": {"hf_config": V3_CONFIG},
        "gpus": ["h200-141gb"],
        "max_model_len": 32768,
        "peak_concurrency": 256,
        "engine": "sglang",
    }
    answer = client.post("/v1/plans", json=question)
    assert answer.status_code == 200, answer.text
    options = [answer.json()["recommendation"], *answer.json()["alternatives"]]
    dp8 = next(o for o in options if o["data_parallel_size"] == 8)
    flags = dp8["engine_flags"]["sglang"]
    # the default release is 0.5.23: --attn-dp-size (its server_args.py deprecates the pair)
    for flag in ("--tp 8", "--attn-dp-size 8", "--ep-size 8"):
        assert flag in flags, flags
    assert "vllm" not in dp8["engine_flags"]
    old = client.post("/v1/plans", json={**question, "engine_version": "0.5.2"})
    assert old.status_code == 200, old.text
    options = [old.json()["recommendation"], *old.json()["alternatives"]]
    dp8 = next(o for o in options if o["data_parallel_size"] == 8)
    assert "--dp-size 8 --enable-dp-attention" in dp8["engine_flags"]["sglang"]


def test_plan_tables_take_sglangs_flags_as_columns(client: TestClient) -> None:
    body = "model,max_model_len,peak_concurrency,gpus,engine,ep_size,enable_dp_attention\n"
    body += "deepseek-v3,32768,64,h200-141gb,sglang,8,false\n"
    body += "deepseek-v3,32768,64,h200-141gb,sglang,3,false\n"
    rows = table(client.post("/v1/plans", content=body, headers=CSV))
    assert rows[0]["status"] == "ok", rows
    assert rows[1]["status"] != "ok", json.dumps(rows[1])
    assert "ep_size" in json.dumps(rows[1]), rows


def test_a_profile_stores_sglangs_flags(client: TestClient) -> None:
    profile: dict[str, Any] = {
        "name": "v3-sglang-ep8",
        "model": "deepseek-v3",
        "gpu": "h200-141gb",
        "max_model_len": 32768,
        "engine": "sglang",
        "tensor_parallel_size": 8,
        "ep_size": 8,
        "namespace": "inference",
        "workload": "deepseek",
        "replicas": 1,
    }
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    assert created.json()["ep_size"] == 8
    sized = client.get("/v1/deployments/v3-sglang-ep8/capacity")
    assert sized.status_code == 200, sized.text
    v3 = "model=deepseek-v3&gpu=h200-141gb&max_model_len=32768&engine=sglang&tp_size=8"
    same = client.get(f"{CAPACITY}?{v3}&ep_size=8").json()
    assert sized.json()["kv_cache_tokens_total"] == same["kv_cache_tokens_total"]
