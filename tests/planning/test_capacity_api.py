"""GET and POST /v1/capacity: what autoscalers and spreadsheets read."""

from __future__ import annotations

import csv
import io

from fastapi.testclient import TestClient

from tests.conftest import ADMIN

MiB = 1 << 20
GiB = 1 << 30
# Worked example A of ../shared/design/engine-memory.md: Llama-3.1-8B, 32 layers x 8 KV heads x
# 128 x 2 (K, V) x 2 B = 131,072 B per token; a 16-token block across 32 layers is 2 MiB; a pool
# of 28,006 blocks holds 448,096 tokens.
POOL = 28_006 * 2 * MiB
BASE = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 131_072,
    "kv_pool_bytes": POOL,
    "engine_version": "0.20.0",
}


def test_capacity_from_a_known_pool_matches_worked_example_a(client: TestClient) -> None:
    response = client.get("/v1/capacity", params=BASE)
    assert response.status_code == 200
    body = response.json()
    assert body["kv_bytes_per_token"] == 131_072
    # one 131,072-token sequence: 131,072 x 131,072 B = 16 GiB
    assert body["kv_bytes_per_sequence"] == 16 * GiB
    assert body["num_gpu_blocks"] == 28_006
    assert body["kv_cache_tokens"] == 448_096  # 28,006 x 16 (0.20 prints blocks x block size)
    # 28,006 blocks / cdiv(131,072, 16) = 8,192 blocks per request = 3.4187 -> 3.42
    assert body["max_concurrency"] == 3.42
    # whole sequences: (28,006 - 1 null block) // 8,192 = 3
    assert body["max_num_seqs"] == 3
    assert body["fits"] is True


def test_capacity_at_8k_context_is_54_70x(client: TestClient) -> None:
    # worked example A: M = 8,192 -> 28,006 / 512 = 54.699 -> 54.70x; (28,006 - 1) // 512 = 54
    body = client.get("/v1/capacity", params={**BASE, "max_model_len": 8192}).json()
    assert body["max_concurrency"] == 54.70
    assert body["max_num_seqs"] == 54


def test_data_parallel_replicas_multiply_capacity(client: TestClient) -> None:
    body = client.get(
        "/v1/capacity", params={**BASE, "max_model_len": 8192, "data_parallel_size": 4}
    ).json()
    assert body["total_max_num_seqs"] == 4 * 54


def test_capacity_is_cacheable_with_an_etag(client: TestClient) -> None:
    first = client.get("/v1/capacity", params=BASE)
    etag = first.headers["etag"]
    assert first.headers["cache-control"].startswith("public, max-age=")
    again = client.get("/v1/capacity", params=BASE, headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""


def test_capacity_etag_changes_when_the_catalog_changes(client: TestClient) -> None:
    before = client.get("/v1/capacity", params=BASE).headers["etag"]
    created = client.post(
        "/v1/gpus",
        json={"slug": "test-gpu-etag", "name": "Test GPU", "memory_bytes": 24 * GiB},
        headers=ADMIN,
    )
    assert created.status_code == 201
    after = client.get("/v1/capacity", params=BASE)
    assert after.headers["etag"] != before
    # an If-None-Match with the old tag is no longer a match
    stale = client.get("/v1/capacity", params=BASE, headers={"If-None-Match": before})
    assert stale.status_code == 200


def test_capacity_as_csv_has_a_header_and_one_row(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "format": "csv"})
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 1
    assert rows[0]["max_num_seqs"] == "3"
    assert rows[0]["kv_cache_tokens"] == "448096"


def test_capacity_negotiates_csv_from_the_accept_header(client: TestClient) -> None:
    response = client.get("/v1/capacity", params=BASE, headers={"Accept": "text/csv"})
    assert response.headers["content-type"].startswith("text/csv")
    assert response.text.splitlines()[0].startswith("model,gpu,")


def test_one_field_as_a_bare_value_for_spreadsheets(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "field": "max_num_seqs"})
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "3"


def test_an_accept_kvplan_cannot_answer_is_406(client: TestClient) -> None:
    response = client.get("/v1/capacity", params=BASE, headers={"Accept": "application/xml"})
    assert response.status_code == 406
    assert response.headers["content-type"] == "application/problem+json"


def test_unknown_model_is_404_with_the_closest_slugs(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "model": "llama-3.1-8bb"})
    assert response.status_code == 404
    problem = response.json()
    assert problem["field"] == "model"
    assert "llama-3.1-8b" in problem["suggestions"]


def test_out_of_bounds_context_names_the_field_and_the_bound(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "max_model_len": 20_000_000})
    assert response.status_code == 422
    problem = response.json()
    assert problem["field"] == "max_model_len"
    assert problem["errors"][0]["constraint"] == {"le": 10_000_000}


def test_a_misspelt_parameter_is_refused_not_ignored(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "max_model_length": 4096})
    assert response.status_code == 422
    assert response.json()["field"] == "max_model_length"


def test_tensor_parallel_size_that_does_not_divide_the_heads_is_422(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "tensor_parallel_size": 3})
    assert response.status_code == 422
    assert response.json()["field"] == "tensor_parallel_size"


def test_an_unknown_kv_dtype_lists_the_accepted_ones(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "kv_cache_dtype": "int3"})
    assert response.status_code == 422
    problem = response.json()
    assert problem["field"] == "kv_cache_dtype"
    assert "fp8" in problem["detail"]


def test_gpu_by_memory_bytes_without_a_slug(client: TestClient) -> None:
    params = {k: v for k, v in BASE.items() if k != "gpu"}
    response = client.get("/v1/capacity", params={**params, "gpu_memory_bytes": 80 * GiB})
    assert response.status_code == 200
    assert response.json()["num_gpu_blocks"] == 28_006


def test_utilization_for_another_engine_is_refused(client: TestClient) -> None:
    response = client.get(
        "/v1/capacity", params={**BASE, "engine": "sglang", "gpu_memory_utilization": 0.9}
    )
    assert response.status_code == 422
    assert response.json()["field"] == "gpu_memory_utilization"


def test_post_capacity_sizes_an_inline_hf_config_on_an_inline_gpu(client: TestClient) -> None:
    # Qwen2.5-7B config facts (seed example 6): 28 layers x 4 KV heads x 128 x 2 x 2 B = 57,344 B
    # per token; a 16-token block across 28 layers = 917,504 B.
    config = {
        "model_type": "qwen2",
        "num_hidden_layers": 28,
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "torch_dtype": "bfloat16",
    }
    pool = 59_250_000_000  # seed example 8: the measured 59.25 GB pool
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": config, "num_parameters": 7_615_616_512},
            "gpu": {"memory_bytes": 85_520_809_984, "name": "NVIDIA H100 80GB HBM3"},
            "max_model_len": 8192,
            "kv_pool_bytes": pool,
            "engine_version": "0.20.0",
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kv_bytes_per_token"] == 57_344
    # 59,250,000,000 // 917,504 = 64,577 blocks (917,504 x 64,577 = 59,249,655,808);
    # 8,192 tokens = 512 blocks per sequence
    assert body["num_gpu_blocks"] == 64_577
    # (64,577 - 1) // 512 = 126 (seed example 8: 126 at 8K)
    assert body["max_num_seqs"] == 126
    explanation = body["explanation"]
    assert explanation["blocks"]["bytes_per_block"] == 917_504
    assert explanation["memory_budget"]["given"] is True


def test_post_capacity_with_an_unknown_layer_kind_names_the_field(client: TestClient) -> None:
    response = client.post(
        "/v1/capacity",
        json={
            "model": {
                "num_attention_heads": 8,
                "layer_specs": {"full_attention": {"num_kv_heads": 8, "head_dim": 64}},
                "layer_schedule": ["full_attention", "retention"],
            },
            "gpu": {"memory_bytes": 24 * GiB},
            "max_model_len": 4096,
            "kv_pool_bytes": GiB,
        },
    )
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "/problems/unknown-layer-kind"
    assert problem["field"] == "model.layer_schedule[1]"


def test_a_body_that_is_not_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/capacity", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"


def test_capacity_requests_are_counted_in_metrics(client: TestClient) -> None:
    client.get("/v1/capacity", params=BASE)
    client.get("/v1/capacity", params={**BASE, "format": "csv"})
    metrics = client.get("/metrics").text
    assert 'kvplan_capacity_requests_total{format="json",method="GET"} 1.0' in metrics
    assert 'kvplan_capacity_requests_total{format="csv",method="GET"} 1.0' in metrics


def test_peak_concurrency_answers_the_replicas_an_autoscaler_needs(client: TestClient) -> None:
    # Worked example A at 8,192 tokens holds 54 whole sequences per replica (above), and
    # vLLM's default max_num_seqs on an H100 (256) does not cap it: 200 at once need
    # ceil(200 / 54) = 4 replicas.
    params = {**BASE, "max_model_len": 8192, "peak_concurrency": 200}
    body = client.get("/v1/capacity", params=params).json()
    assert body["peak_concurrency"] == 200
    assert body["replicas_for_peak_concurrency"] == 4
    value = client.get("/v1/capacity", params={**params, "field": "replicas_for_peak_concurrency"})
    assert value.headers["content-type"].startswith("text/plain")
    assert value.text.strip() == "4"


def test_replicas_follow_the_engines_max_num_seqs_cap(client: TestClient) -> None:
    # 54 fit, but --max-num-seqs 16 runs at most 16 at once: ceil(200 / 16) = 13 replicas.
    params = {**BASE, "max_model_len": 8192, "peak_concurrency": 200, "max_num_seqs": 16}
    body = client.get("/v1/capacity", params=params).json()
    assert body["max_num_seqs"] == 54
    assert body["replicas_for_peak_concurrency"] == 13


def test_without_peak_concurrency_no_replica_count_is_invented(client: TestClient) -> None:
    body = client.get("/v1/capacity", params={**BASE, "max_model_len": 8192}).json()
    assert body["peak_concurrency"] is None
    assert body["replicas_for_peak_concurrency"] is None


def test_tensor_parallel_beyond_one_node_is_422_naming_the_field(client: TestClient) -> None:
    # The seeded h100-sxm-80gb node holds 8 GPUs; Llama-3.1-8B's 32 heads would divide by 16,
    # so only the node bound can refuse it.
    response = client.get(
        "/v1/capacity", params={**BASE, "max_model_len": 8192, "tensor_parallel_size": 16}
    )
    assert response.status_code == 422
    problem = response.json()
    assert problem["field"] == "tensor_parallel_size"
    assert "(8)" in problem["detail"]


def test_post_capacity_takes_an_inline_spec_with_two_geometries_of_one_kind(
    client: TestClient,
) -> None:
    model = {
        "num_attention_heads": 64,
        "weight_bytes": GiB,
        "layer_specs": {
            "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "indexer_head_dim": 128},
            "mla_shared": {"kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
        },
        "layer_schedule": [{"pattern": ["mla", "mla_shared"], "repeat": 4}],
    }
    response = client.post(
        "/v1/capacity",
        json={"model": model, "gpu": "h200-141gb", "max_model_len": 4096, "explain": False},
    )
    assert response.status_code == 200, response.text
    # 4 x (576 x 2 B + 132 B) + 4 x 1,152 B = 5,136 + 4,608 = 9,744
    assert response.json()["kv_bytes_per_token"] == 4 * 1284 + 4 * 1152 == 9744


def test_sglang_flags_reach_the_hybrid_split(client: TestClient) -> None:
    # gpt-oss-120b on SGLang 0.5.23 (HybridSWAPoolConfigurator): 18 full + 18 sliding layers
    # of 8 KV heads x 64 at tp 1: 36,864 B per token each; with --swa-full-tokens-ratio 0.5 a
    # full token costs 36,864 + 0.5 x 36,864 = 55,296 B: 10 GiB // 55,296 = 194,180 tokens
    params = {
        "model": "gpt-oss-120b",
        "gpu": "h200-141gb",
        "max_model_len": 16_384,
        "engine": "sglang",
        "engine_version": "0.5.23",
        "kv_pool_bytes": 10 * GiB,
        "swa_full_tokens_ratio": 0.5,
    }
    body = client.get("/v1/capacity", params=params).json()
    assert body["kv_cache_tokens"] == 194_180


def test_an_sglang_flag_on_vllm_is_422_naming_it(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "max_mamba_cache_size": 100})
    assert response.status_code == 422
    assert response.json()["field"] == "max_mamba_cache_size"


def test_trtllm_attention_windows_come_as_repeated_query_parameters(client: TestClient) -> None:
    # gpt-oss-120b on TensorRT-LLM 1.2.0 with windows [128, 16384] and an 8 GiB pool: equal
    # shares of 4 GiB per window; 18 layers x 8 KV heads x 128 x 2 B = 36,864 B per token per
    # window: 4,294,967,296 // 36,864 = 116,508 tokens, ceil(/ 32) = 3,641 blocks; a 16,384-token
    # request holds 512 blocks of the full window: 3,641 // 512 = 7
    response = client.get(
        "/v1/capacity",
        params=[
            ("model", "gpt-oss-120b"),
            ("gpu", "h200-141gb"),
            ("max_model_len", "16384"),
            ("engine", "trtllm"),
            ("engine_version", "1.2.0"),
            ("kv_pool_bytes", str(8 * GiB)),
            ("max_attention_window", "128"),
            ("max_attention_window", "16384"),
        ],
    )
    assert response.status_code == 200, response.text
    assert response.json()["max_num_seqs"] == 7


def test_get_and_post_answer_one_question_alike(client: TestClient) -> None:
    question = {**BASE, "max_model_len": 8192, "peak_concurrency": 100}
    got = client.get("/v1/capacity", params=question).json()
    posted = client.post("/v1/capacity", json=question).json()
    assert {name: posted[name] for name in got} == got
    # worked example A at 8,192 tokens: 54 sequences per replica, so 100 need ceil(100/54) = 2
    assert got["replicas_for_peak_concurrency"] == 2
