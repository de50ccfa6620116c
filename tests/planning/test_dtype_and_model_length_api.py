"""--dtype as vLLM resolves it, and the model's own length limit, asked over HTTP.

Configs are files in tests/fixtures/hf_configs as published (SOURCES.md there). The rules and
their releases: docs/engines/vllm.md#dtype and docs/engines/vllm.md#max-model-len.

Reflection-Llama-3.1-70B (mattshumer--Reflection-Llama-3.1-70B.json) is a float32 checkpoint:
80 layers x 8 KV heads x head_dim 128 (8192 / 64 heads) x 2 (K, V) = 163,840 KV elements a
token, 327,680 B at 2 bytes and 655,360 B at 4. Its weights, worked from the config: embeddings
and the untied lm_head 2 x 128,262 x 8,192 = 2,101,444,608; per layer q and o 2 x 8,192^2 =
134,217,728, k and v 2 x 8,192 x 1,024 = 16,777,216, the MLP 3 x 8,192 x 28,672 = 704,643,072
and two norms 16,384: 855,654,400 x 80 = 68,452,352,000; the final norm 8,192. In all
70,553,804,800 parameters: 141,107,609,600 B at 16 bits.

Llama-3.1-8B (meta-llama--Meta-Llama-3.1-8B.json, the catalog's llama-3.1-8b): 32 layers x 8
KV heads x 128 x 2 = 65,536 elements a token, 131,072 B in bfloat16; max_position_embeddings
131,072 with llama3 rope scaling, which vLLM does not multiply: the limit is 131,072.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import ADMIN
from tests.helpers import problem

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hf_configs"
REFLECTION = json.loads((FIXTURES / "mattshumer--Reflection-Llama-3.1-70B.json").read_text())
LLAMA_8B = json.loads((FIXTURES / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
# A V100 as a caller gives it: 32 GiB, no bfloat16 (compute capability 7.0).
V100 = {"memory_bytes": 32 * 2**30, "name": "Tesla V100-SXM2-32GB", "bf16_support": False}


def _post(client: TestClient, **question: Any) -> dict[str, Any]:
    answer = client.post("/v1/capacity", json=question)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _reflection(client: TestClient, **question: Any) -> dict[str, Any]:
    return _post(
        client,
        model={"hf_config": REFLECTION},
        gpu="h100-sxm-80gb",
        tensor_parallel_size=4,
        max_model_len=8192,
        explain=True,
        **question,
    )


# --- dtype ---------------------------------------------------------------------------------


def test_a_float32_checkpoint_runs_as_bfloat16_under_auto_from_vllm_0_9_1(
    client: TestClient,
) -> None:
    body = _reflection(client)
    assert body["kv_bytes_per_token"] == 327_680  # 163,840 elements x 2 B
    assert body["explanation"]["per_gpu"]["weights_bytes_total"] == 141_107_609_600
    assert any(
        "float32 checkpoint runs as bfloat16 under dtype=auto" in w and "_resolve_auto_dtype" in w
        for w in body["warnings"]
    )


def test_before_0_9_1_auto_runs_a_float32_checkpoint_as_float16(client: TestClient) -> None:
    body = _reflection(client, engine_version="0.9.0")
    assert body["kv_bytes_per_token"] == 327_680  # float16: 2 B as well
    assert any("float32 checkpoint runs as float16" in w for w in body["warnings"])


def test_an_explicit_float32_keeps_4_bytes_and_the_aliases_are_vllms(client: TestClient) -> None:
    full = _reflection(client, dtype="float")  # vLLM's --dtype float = float32
    assert full["kv_bytes_per_token"] == 655_360  # 163,840 elements x 4 B
    assert full["explanation"]["per_gpu"]["weights_bytes_total"] == 282_215_219_200  # x 4 B
    half = _reflection(client, dtype="half")
    assert half["kv_bytes_per_token"] == 327_680
    assert any("runs as float16 (dtype=float16)" in w for w in half["warnings"])


def test_get_takes_dtype_and_its_aliases_are_one_question(client: TestClient) -> None:
    query = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    full = client.get("/v1/capacity", params={**query, "dtype": "float32"})
    assert full.status_code == 200, full.text
    assert full.json()["kv_bytes_per_token"] == 262_144  # 65,536 elements x 4 B
    half = client.get("/v1/capacity", params={**query, "dtype": "half"})
    fp16 = client.get("/v1/capacity", params={**query, "dtype": "float16"})
    assert half.json()["kv_bytes_per_token"] == 131_072
    assert half.headers["etag"] == fp16.headers["etag"]  # one canonical question
    body = problem(client.get("/v1/capacity", params={**query, "dtype": "float64"}), 422)
    assert "dtype" in json.dumps(body)


def test_a_gpu_without_bfloat16(client: TestClient) -> None:
    question = {"model": {"hf_config": LLAMA_8B}, "gpu": V100, "max_model_len": 4096}
    # from 0.9.1 a bfloat16 checkpoint falls back to float16: the same 2 bytes
    body = _post(client, **question, engine_version="0.9.1")
    assert body["kv_bytes_per_token"] == 131_072
    assert any("bfloat16 checkpoint runs as float16" in w for w in body["warnings"])
    # before, vLLM refuses to start (_check_if_gpu_supports_dtype), and any release refuses
    # an explicit bfloat16 on it
    for refused in ({"engine_version": "0.9.0"}, {"dtype": "bfloat16"}):
        answer = problem(client.post("/v1/capacity", json={**question, **refused}), 422)
        assert answer["field"] == "dtype"
        assert "dtype=float16" in answer["detail"]


def test_plans_csv_rows_and_profiles_take_dtype(client: TestClient) -> None:
    question = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 10}
    question |= {"gpus": ["h100-sxm-80gb"], "dtype": "float32"}
    best = client.post("/v1/plans", json=question).json()["recommendation"]
    assert "--dtype float32" in best["engine_flags"]["vllm"]
    # the same question as a CSV row answers the same
    header = "model,max_model_len,peak_concurrency,gpus,dtype"
    row = "llama-3.1-8b,8192,10,h100-sxm-80gb,float32"
    rows = client.post(
        "/v1/plans", content=f"{header}\n{row}\n", headers={"Content-Type": "text/csv"}
    )
    (cells,) = list(csv.DictReader(io.StringIO(rows.text)))
    assert cells["kv_pool_bytes"] == str(best["kv_pool_bytes"])
    assert cells["max_num_seqs"] == str(best["max_num_seqs"])
    profile = {"name": "llama-fp32", "model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"}
    profile |= {"max_model_len": 8192, "dtype": "float"}
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    assert created.json()["dtype"] == "float32"
    sized = client.get("/v1/deployments/llama-fp32/capacity").json()
    assert sized["kv_bytes_per_token"] == 262_144  # as GET asked with dtype=float32


# --- the model's length limit --------------------------------------------------------------


def test_300000_tokens_of_llama_3_1_8b_are_refused_as_vllm_refuses_them(
    client: TestClient,
) -> None:
    post = {"model": {"hf_config": LLAMA_8B}, "gpu": "h100-sxm-80gb", "max_model_len": 300_000}
    get = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 300_000}
    for answer in (
        client.post("/v1/capacity", json=post),
        client.get("/v1/capacity", params=get),
    ):
        body = problem(answer, 422)
        assert body["field"] == "max_model_len"
        for said in ("300000", "131072", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"):
            assert said in body["detail"]
        assert "allow_long_max_model_len" in body["detail"]


def test_the_override_sizes_it_with_a_warning(client: TestClient) -> None:
    post = {"model": {"hf_config": LLAMA_8B}, "gpu": "h100-sxm-80gb", "max_model_len": 300_000}
    body = _post(client, **post, allow_long_max_model_len=True)
    assert body["max_model_len"] == 300_000
    # 300,000 tokens x 131,072 B
    assert body["kv_bytes_per_sequence"] == 39_321_600_000
    assert any("allow_long_max_model_len=true" in w for w in body["warnings"])
    get = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 300_000}
    answer = client.get("/v1/capacity", params={**get, "allow_long_max_model_len": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["kv_bytes_per_sequence"] == body["kv_bytes_per_sequence"]


def test_the_limit_is_the_default_and_sglang_refuses_longer_too(client: TestClient) -> None:
    body = _post(client, model={"hf_config": LLAMA_8B}, gpu="h100-sxm-80gb")
    assert body["max_model_len"] == 131_072  # vLLM's default: the derived length
    sglang = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "engine": "sglang"}
    answer = client.get("/v1/capacity", params={**sglang, "max_model_len": 300_000})
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in problem(answer, 422)["detail"]


def test_a_plan_past_the_limit_is_refused_or_carries_the_override(client: TestClient) -> None:
    # Issue 20: a million tokens of Llama-3.1-8B (limit 131,072)
    question = {"model": "llama-3.1-8b", "max_model_len": 1_000_000, "peak_concurrency": 1}
    body = problem(client.post("/v1/plans", json=question), 422)
    assert body["field"] == "max_model_len"
    assert "131072" in body["detail"]
    allowed = client.post("/v1/plans", json={**question, "allow_long_max_model_len": True})
    assert allowed.status_code == 200, allowed.text
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in w for w in allowed.json()["warnings"])


def test_a_catalog_gpu_says_whether_it_has_bfloat16(client: TestClient) -> None:
    # A V100 entered in the catalog: compute capability 7.0 (https://developer.nvidia.com/
    # cuda-gpus), so no bfloat16.
    v100 = {"slug": "v100-sxm2-32gb", "name": "Tesla V100-SXM2-32GB", "bf16_support": False}
    created = client.post("/v1/gpus", json={**v100, "memory_bytes": 32 * 2**30}, headers=ADMIN)
    assert created.status_code == 201, created.text
    assert created.json()["bf16_support"] is False
    assert client.get("/v1/gpus/h100-sxm-80gb").json()["bf16_support"] is True  # the seed's
    query = {"model": "llama-3.1-8b", "gpu": "v100-sxm2-32gb", "max_model_len": 4096}
    older = problem(client.get("/v1/capacity", params={**query, "engine_version": "0.9.0"}), 422)
    assert older["field"] == "dtype"
    newer = client.get("/v1/capacity", params={**query, "engine_version": "0.9.1"})
    assert newer.status_code == 200, newer.text
    assert newer.json()["kv_bytes_per_token"] == 131_072  # float16: 2 B, as bfloat16


def test_a_profile_past_the_limit_is_refused_when_written(client: TestClient) -> None:
    profile = {"name": "llama-long", "model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"}
    profile |= {"max_model_len": 300_000}
    refused = problem(client.post("/v1/deployments", json=profile, headers=ADMIN), 422)
    assert refused["field"] == "max_model_len"
    allowed = {**profile, "allow_long_max_model_len": True}
    assert client.post("/v1/deployments", json=allowed, headers=ADMIN).status_code == 201
