"""Issue 21 items 2 and 3 over HTTP: --speculative-config and --enable-lora on every door."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import ADMIN

HERE_CONFIGS = "tests/fixtures/hf_configs"
QUESTION: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "engine_version": "0.33.0",
}
LORA = {"enable_lora": True, "max_loras": 4, "max_lora_rank": 16}
# Four rank-16 bf16 slots on Llama-3.1-8B: 369,426,432 B of A/B buffers (tests/sizing/
# test_lora.py works them out) + 417,920 B of punica metadata at max_num_batched_tokens 8192
# and max_num_seqs 1024 (4 x 8192 x 8 + 3 x 1024 x 8 + 2 x (2 x 8192 x 4 + (3 x 4 + 4) x 4)
# = 262,144 + 24,576 + 2 x 65,600 = 417,920).
LORA_BYTES = 369_426_432 + 417_920


def _line(answer: dict[str, Any], name: str) -> dict[str, Any]:
    lines = answer["explanation"]["memory_budget"]["lines"]
    return next(line for line in lines if line["name"] == name)


def test_lora_on_get_and_post_takes_its_buffers_out_of_the_pool(client: TestClient) -> None:
    plain = client.get("/v1/capacity", params=QUESTION)
    got = client.get("/v1/capacity", params={**QUESTION, **LORA})
    posted = client.post("/v1/capacity", json={**QUESTION, **LORA})
    assert plain.status_code == got.status_code == posted.status_code == 200, got.text
    assert plain.json()["kv_pool_bytes"] - got.json()["kv_pool_bytes"] == LORA_BYTES
    assert posted.json()["kv_pool_bytes"] == got.json()["kv_pool_bytes"]
    assert _line(posted.json(), "lora_adapters")["bytes"] == -LORA_BYTES


def test_lora_flags_without_enable_lora_are_refused_by_name(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**QUESTION, "max_loras": 4})
    assert response.status_code == 422
    assert response.json()["field"] == "max_loras"


def test_lora_paths_on_sglang_stay_refused_by_name(client: TestClient) -> None:
    # SGLang's LoRA pool is sized from its own flags (test_sglang_lora_api.py); kvplan reads no
    # adapter, so --lora-paths stays refused as unmodelled
    refused = client.get("/v1/capacity", params={**QUESTION, "lora_paths": "a=/x"})
    assert refused.status_code == 422
    assert refused.json()["field"] == "lora_paths"


def _deepseek_v3() -> dict[str, Any]:
    with open(f"{HERE_CONFIGS}/deepseek-ai--DeepSeek-V3.json", encoding="utf-8") as handle:
        config: dict[str, Any] = json.load(handle)
    return config


MTP = {"method": "deepseek_mtp", "num_speculative_tokens": 1}


def test_mtp_on_post_adds_one_mla_layer_per_token_and_its_weights(client: TestClient) -> None:
    body = {
        "model": {"hf_config": _deepseek_v3()},
        "gpu": "h200-141gb",
        "tensor_parallel_size": 8,
        "max_model_len": 32768,
        "engine_version": "0.33.0",
    }
    plain = client.post("/v1/capacity", json=body)
    mtp = client.post("/v1/capacity", json={**body, "speculative_config": MTP})
    assert plain.status_code == mtp.status_code == 200, mtp.text
    # one more MLA layer: (512 + 64) x 2 B = 1,152 B per token, over 61 + 1 layers
    assert plain.json()["kv_bytes_per_token"] == 61 * 1152
    assert mtp.json()["kv_bytes_per_token"] == 62 * 1152
    # the MTP layer's loaded bytes (tests/sizing/test_speculative.py) over 8 ranks, rounded up
    assert _line(mtp.json(), "speculative_draft_weights")["bytes"] == -1_451_846_940
    assert mtp.json()["num_gpu_blocks"] < plain.json()["num_gpu_blocks"]


def test_speculative_config_as_json_text_on_get_is_the_post_object(client: TestClient) -> None:
    ngram = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    got = client.get("/v1/capacity", params={**QUESTION, "speculative_config": json.dumps(ngram)})
    posted = client.post("/v1/capacity", json={**QUESTION, "speculative_config": ngram})
    plain = client.get("/v1/capacity", params=QUESTION)
    assert got.status_code == posted.status_code == 200, got.text
    # ngram drafts on the CPU: no weights and no KV, the same pool and blocks
    assert got.json()["kv_pool_bytes"] == plain.json()["kv_pool_bytes"]
    assert got.json()["num_gpu_blocks"] == posted.json()["num_gpu_blocks"]
    assert any("ngram" in warning for warning in got.json()["warnings"])


def test_a_bad_speculative_config_is_a_422_naming_the_key(client: TestClient) -> None:
    bad_json = client.get("/v1/capacity", params={**QUESTION, "speculative_config": "{method"})
    assert bad_json.status_code == 422
    no_mtp = client.post(
        "/v1/capacity", json={**QUESTION, "speculative_config": MTP}
    )  # the catalog's llama has no MTP layers
    assert no_mtp.status_code == 422
    assert no_mtp.json()["field"] == "speculative_config.method"
    quantized = client.post(
        "/v1/capacity",
        json={**QUESTION, "speculative_config": {**MTP, "quantization": "fp8"}},
    )
    assert quantized.status_code == 422
    assert quantized.json()["field"] == "speculative_config.quantization"
    unknown_draft = client.post(
        "/v1/capacity",
        json={
            **QUESTION,
            "speculative_config": {
                "method": "eagle3",
                "model": "no-such-head",
                "num_speculative_tokens": 3,
            },
        },
    )
    assert unknown_draft.status_code == 422
    assert unknown_draft.json()["field"] == "speculative_config.model"


CSV = {"Content-Type": "text/csv"}


def test_a_table_of_plan_questions_takes_both_as_cells(client: TestClient) -> None:
    # the speculative config is a JSON cell (quoted, as CSV quotes a cell with commas)
    ngram = '"{""method"": ""ngram"", ""num_speculative_tokens"": 2}"'
    table = (
        "model,max_model_len,peak_concurrency,gpus,enable_lora,max_loras,speculative_config\n"
        f"llama-3.1-8b,8192,8,h100-sxm-80gb,true,4,{ngram}\n"
        "llama-3.1-8b,8192,8,h100-sxm-80gb,,,\n"
    )
    response = client.post("/v1/plans", content=table, headers=CSV)
    assert response.status_code == 200, response.text
    rows = response.text.strip().splitlines()
    assert len(rows) == 3
    assert all(",ok," in row for row in rows[1:]), response.text
    # the JSON body asks the same first question
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 8,
        "gpus": ["h100-sxm-80gb"],
        "enable_lora": True,
        "max_loras": 4,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 2},
    }
    posted = client.post("/v1/plans", json=body)
    assert posted.status_code == 200, posted.text
    assert posted.json()["recommendation"] is not None


def test_a_deployment_profile_stores_both_and_sizes_them(client: TestClient) -> None:
    profile = {
        **QUESTION,
        **LORA,
        "name": "llama-lora-ngram",
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 2},
    }
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    assert created.json()["speculative_config"] == profile["speculative_config"]
    sized = client.get("/v1/deployments/llama-lora-ngram/capacity")
    direct = client.post("/v1/capacity", json={**QUESTION, **LORA, "explain": False})
    assert sized.status_code == 200, sized.text
    assert sized.json()["kv_pool_bytes"] == direct.json()["kv_pool_bytes"]


def test_mtp_on_the_catalog_deepseek_v3_by_get_is_the_config_s_answer(client: TestClient) -> None:
    # the catalog's deepseek-v3 records its one MTP layer and its bytes (models.json sources)
    query = {
        "model": "deepseek-v3",
        "gpu": "h200-141gb",
        "tensor_parallel_size": 8,
        "max_model_len": 32768,
        "engine_version": "0.33.0",
        "speculative_config": json.dumps(MTP),
    }
    got = client.get("/v1/capacity", params=query)
    assert got.status_code == 200, got.text
    assert got.json()["kv_bytes_per_token"] == 62 * 1152
    posted = client.post("/v1/capacity", json={**query, "speculative_config": MTP})
    assert _line(posted.json(), "speculative_draft_weights")["bytes"] == -1_451_846_940


def test_sglang_s_own_speculative_flags_on_get_and_post(client: TestClient) -> None:
    # SGLang NEXTN on the catalog's deepseek-v3: the cell grows by one MLA layer (the target's
    # per-layer size), the pool stays (tests/sizing/test_speculative.py works it out)
    query = {
        "model": "deepseek-v3",
        "gpu": "h200-141gb",
        "tp_size": 8,
        "context_length": 32768,
        "engine": "sglang",
    }
    plain = client.get("/v1/capacity", params=query)
    got = client.get("/v1/capacity", params={**query, "speculative_algorithm": "NEXTN"})
    posted = client.post(
        "/v1/capacity",
        json={**query, "speculative_algorithm": "NEXTN", "speculative_num_steps": 3},
    )
    assert plain.status_code == got.status_code == posted.status_code == 200, got.text
    assert got.json()["kv_bytes_per_token"] == 62 * 1152
    assert got.json()["kv_pool_bytes"] == plain.json()["kv_pool_bytes"]
    assert got.json()["kv_cache_tokens"] < plain.json()["kv_cache_tokens"]
    assert posted.json()["kv_cache_tokens"] == got.json()["kv_cache_tokens"]
    # each engine's spelling on its own engine only
    crossed = client.get("/v1/capacity", params={**QUESTION, "speculative_algorithm": "NEXTN"})
    assert crossed.status_code == 422
    assert crossed.json()["field"] == "speculative_algorithm"


def test_a_plan_pastes_the_flags_it_sized(client: TestClient) -> None:
    body = {
        "model": "deepseek-v3",
        "gpus": ["h200-141gb"],
        "max_model_len": 32768,
        "peak_concurrency": 8,
        "speculative_config": MTP,
    }
    answer = client.post("/v1/plans", json=body)
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    flags = plan["recommendation"]["engine_flags"]
    # deepseek_mtp is read as vLLM reads it: mtp
    assert '--speculative-config \'{"method":"mtp","num_speculative_tokens":1}\'' in (flags["vllm"])
    # SGLang's flags come with the tensor-parallel layouts (a DP x EP option pastes vLLM's
    # alone while SGLang's DP attention is not modelled)
    options = [plan["recommendation"], *plan["alternatives"]]
    tp_only = next(o for o in options if o.get("data_parallel_size", 1) == 1)
    assert "--speculative-algorithm NEXTN" in tp_only["engine_flags"]["sglang"]
    lora = client.post(
        "/v1/plans",
        json={"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 8, **LORA},
    )
    assert lora.status_code == 200, lora.text
    # the answer pastes each engine's flags as one command line
    pasted = lora.json()["recommendation"]["engine_flags"]["vllm"]
    assert pasted.endswith("--enable-lora --max-loras 4 --max-lora-rank 16")
