"""/v1/models: lists, reads, writes, the Hugging Face import, and what sizing sees after a write."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.catalog.seed import load_seed
from tests.catalog.helpers import all_slugs
from tests.conftest import ADMIN
from tests.helpers import problem
from tests.sizing.test_hf_config import DEEPSEEK_V3, LLAMA_3_1_8B, QWEN3_5_27B

# Llama-3.1-8B: 32 layers x 8 KV heads x 128 head_dim x 2 (K, V) x 2 B = 131,072 B per token
LLAMA_8B_KV = 131_072
ARCH: dict[str, Any] = {
    "num_attention_heads": 32,
    "dtype": "bfloat16",
    "hidden_size": 4096,
    "num_parameters": 8_030_261_248,
    "max_position_embeddings": 131072,
    "layer_specs": {"full_attention": {"num_kv_heads": 8, "head_dim": 128}},
    "layer_schedule": [{"pattern": ["full_attention"], "repeat": 32}],
}
NEW_MODEL: dict[str, Any] = {"slug": "test-model-8b", "family": "llama", "architecture": ARCH}
CAPACITY = {"gpu": "h100-sxm-80gb", "max_model_len": 8192}


def created(client: TestClient, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = client.post("/v1/models", json=body or NEW_MODEL, headers=ADMIN)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


# ---- lists ----------------------------------------------------------------------------------


def test_every_seeded_model_appears_exactly_once_across_pages(client: TestClient) -> None:
    slugs = all_slugs(client, "/v1/models?limit=7")
    expected = sorted(m["slug"] for m in load_seed("models.json"))
    assert len(expected) > 50  # more than the default page, so the default pages too
    assert slugs == expected
    assert all_slugs(client, "/v1/models") == expected


def test_default_page_is_50_with_a_next_link(client: TestClient) -> None:
    response = client.get("/v1/models")
    body = response.json()
    assert len(body["items"]) == 50
    assert body["limit"] == 50
    assert body["next"] == f"/v1/models?cursor={body['next_cursor']}"
    assert response.headers["link"] == f'<{body["next"]}>; rel="next"'


def test_pages_do_not_skip_a_model_created_between_them(client: TestClient) -> None:
    # the cursor is the next slug, not an offset: an insert before it shifts nothing
    first = client.get("/v1/models", params={"limit": 5}).json()
    created(client, {**NEW_MODEL, "slug": "aaa-test-model"})
    rest = all_slugs(client, first["next"])
    expected = sorted(m["slug"] for m in load_seed("models.json"))
    assert [item["slug"] for item in first["items"]] + rest == expected


def test_family_filter_is_case_insensitive_and_follows_pages(client: TestClient) -> None:
    slugs = all_slugs(client, "/v1/models?family=LLAMA&limit=4")
    expected = sorted(m["slug"] for m in load_seed("models.json") if m["family"] == "llama")
    assert slugs == expected
    assert "llama-3.1-8b" in slugs
    assert "llama-4-scout-17b-16e-instruct" not in slugs  # family llama4_text


def test_layer_kind_filter_matches_whole_kinds(client: TestClient) -> None:
    slugs = all_slugs(client, "/v1/models?layer_kind=mla")
    assert {"deepseek-v3", "deepseek-r1", "kimi-k2-instruct"} <= set(slugs)
    body = client.get("/v1/models/deepseek-v3").json()
    assert "mla" in body["layer_kinds"]
    for slug in slugs:
        assert "mla" in client.get(f"/v1/models/{slug}").json()["layer_kinds"]
    assert "llama-3.1-8b" not in slugs
    # "attention" is not a kind, and a substring of "full_attention" must not match it
    problem(client.get("/v1/models", params={"layer_kind": "attention"}), 422)


def test_layer_kind_filter_refuses_no_cache_rather_than_answer_nothing(
    client: TestClient,
) -> None:
    # Nemotron-H has MLP-only (no_cache) layers, but only cache-keeping kinds are indexed
    assert "no_cache" in client.get("/v1/models/nemotron-h-56b-base-8k").json()["layer_counts"]
    body = problem(client.get("/v1/models", params={"layer_kind": "no_cache"}), 422)
    assert body["field"] == "layer_kind"


def test_parameter_bounds_filter(client: TestClient) -> None:
    slugs = all_slugs(
        client, "/v1/models?min_parameters=7000000000&max_parameters=8100000000&limit=500"
    )
    expected = sorted(
        m["slug"]
        for m in load_seed("models.json")
        if m["architecture"].get("num_parameters") is not None
        and 7_000_000_000 <= m["architecture"]["num_parameters"] <= 8_100_000_000
    )
    assert slugs == expected
    assert "llama-3.1-8b" in slugs  # 8,030,261,248
    assert "qwen3-8b" not in slugs  # 8,190,735,360


def test_q_searches_slug_and_name(client: TestClient) -> None:
    slugs = all_slugs(client, "/v1/models?q=MIXTRAL")
    assert slugs == ["mixtral-8x22b-v0.1", "mixtral-8x7b-v0.1"]


def test_q_treats_like_wildcards_literally(client: TestClient) -> None:
    assert all_slugs(client, "/v1/models?q=%25") == []
    assert all_slugs(client, "/v1/models?q=_") == []


# ---- reads ----------------------------------------------------------------------------------


def test_get_one_with_derived_facts_and_etag(client: TestClient) -> None:
    response = client.get("/v1/models/llama-3.1-8b")
    assert response.status_code == 200
    assert response.headers["etag"] == '"1"'
    body = response.json()
    assert body["kv_bytes_per_token_bf16"] == LLAMA_8B_KV
    assert body["num_layers"] == 32
    assert body["layer_kinds"] == ["full_attention"]
    assert body["layer_counts"] == {"full_attention": 32}
    assert body["family"] == "llama"
    assert body["origin"] == "seed"
    assert body["revision"] == 1


def test_unknown_model_is_404_suggesting_the_closest(client: TestClient) -> None:
    body = problem(client.get("/v1/models/llama-3.1-8"), 404)
    assert "llama-3.1-8b" in body["suggestions"]
    assert body["suggestions"][0] in {"llama-3.1-8b", "llama-3.1-70b"}
    body = problem(client.get("/v1/models/qwen3-8-b"), 404)
    assert body["suggestions"][0] == "qwen3-8b"


# ---- create ---------------------------------------------------------------------------------


def test_create_derives_the_layer_facts(client: TestClient) -> None:
    response = client.post("/v1/models", json=NEW_MODEL, headers=ADMIN)
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/models/test-model-8b"
    assert response.headers["etag"] == '"1"'
    body = response.json()
    assert body["name"] == "test-model-8b"  # defaults to the slug
    assert body["kv_bytes_per_token_bf16"] == LLAMA_8B_KV
    assert body["num_layers"] == 32
    assert body["num_parameters"] == 8_030_261_248
    assert body["origin"] == "user"
    assert client.get("/v1/models/test-model-8b").json() == body


def test_duplicate_model_is_409(client: TestClient) -> None:
    created(client)
    assert problem(client.post("/v1/models", json=NEW_MODEL, headers=ADMIN), 409)["field"] == "slug"
    seeded = {**NEW_MODEL, "slug": "llama-3.1-8b"}
    problem(client.post("/v1/models", json=seeded, headers=ADMIN), 409)


def test_unknown_layer_kind_is_422_naming_it(client: TestClient) -> None:
    arch = copy.deepcopy(ARCH)
    arch["layer_specs"]["retention"] = {"num_kv_heads": 8, "head_dim": 128}
    arch["layer_schedule"] = [{"pattern": ["retention"], "repeat": 32}]
    body = problem(
        client.post("/v1/models", json={**NEW_MODEL, "architecture": arch}, headers=ADMIN), 422
    )
    assert body["field"] == "architecture.layer_specs.retention"
    assert body["type"] == "/problems/unknown-layer-kind"
    assert "retention" in body["detail"]
    problem(client.get("/v1/models/test-model-8b"), 404)


def test_unknown_kind_in_the_schedule_only_is_422(client: TestClient) -> None:
    arch = copy.deepcopy(ARCH)
    arch["layer_schedule"] = ["full_attention", "hyena"]
    body = problem(
        client.post("/v1/models", json={**NEW_MODEL, "architecture": arch}, headers=ADMIN), 422
    )
    assert body["field"].startswith("architecture.layer_schedule")
    assert body["type"] == "/problems/unknown-layer-kind"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_attention_heads": 0}, "architecture.num_attention_heads"),
        ({"num_attention_heads": "32"}, "architecture.num_attention_heads"),
        ({"num_parameters": 10**16}, "architecture.num_parameters"),
        ({"dtype": "float7"}, "architecture.dtype"),
        ({"rope_theta": 500000.0}, "architecture.rope_theta"),
        ({"layer_specs": {"full_attention": {"num_kv_heads": 0, "head_dim": 128}}}, None),
    ],
)
def test_invalid_architecture_is_422_naming_the_field(
    client: TestClient, change: dict[str, Any], field: str | None
) -> None:
    arch = {**ARCH, **change}
    body = problem(
        client.post("/v1/models", json={**NEW_MODEL, "architecture": arch}, headers=ADMIN), 422
    )
    if field is not None:
        assert body["field"] == field
    else:
        assert body["field"].startswith("architecture.layer_specs.full_attention")
    problem(client.get("/v1/models/test-model-8b"), 404)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"slug": "test-model-8b", "family": "llama"}, "architecture"),
        ({**NEW_MODEL, "slug": "-bad"}, "slug"),
        ({**NEW_MODEL, "family": "x" * 101}, "family"),
        ({**NEW_MODEL, "sources": [""]}, "sources.0"),
        ({**NEW_MODEL, "notes": "nul\u0000byte"}, "notes"),
    ],
)
def test_invalid_model_fields_are_422_naming_them(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    assert problem(client.post("/v1/models", json=body, headers=ADMIN), 422)["field"] == field


def test_invalid_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/models", content=b"[1, 2", headers={**ADMIN, "Content-Type": "application/json"}
    )
    assert problem(response, 422)["field"] == "body"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/models"),
        ("POST", "/v1/models/import"),
        ("PUT", "/v1/models/llama-3.1-8b"),
        ("PATCH", "/v1/models/llama-3.1-8b"),
        ("DELETE", "/v1/models/llama-3.1-8b"),
    ],
)
@pytest.mark.parametrize("token", [None, "Bearer wrong-token", "Bearer "])
def test_writes_need_the_admin_token_before_the_body(
    client: TestClient, method: str, path: str, token: str | None
) -> None:
    headers = {"Content-Type": "application/json", "If-Match": '"1"'}
    if token is not None:
        headers["Authorization"] = token
    body = problem(client.request(method, path, content=b"\x00{nope", headers=headers), 401)
    assert body["type"] == "/problems/unauthorized"
    assert client.get("/v1/models/llama-3.1-8b").json()["revision"] == 1


# ---- updates and deletes --------------------------------------------------------------------


def test_patch_architecture_is_merged_and_revalidated(client: TestClient) -> None:
    response = client.patch(
        "/v1/models/llama-3.1-8b",
        json={"architecture": {"max_position_embeddings": 65536}, "notes": "capped at 64k"},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"2"'
    body = response.json()
    assert body["revision"] == 2
    assert body["max_position_embeddings"] == 65536
    assert body["architecture"]["max_position_embeddings"] == 65536
    assert body["kv_bytes_per_token_bf16"] == LLAMA_8B_KV  # the geometry is untouched
    assert body["notes"] == "capped at 64k"
    assert body["origin"] == "user"
    broken = client.patch(
        "/v1/models/llama-3.1-8b",
        json={"architecture": {"layer_specs": {"full_attention": {"head_dim": -1}}}},
        headers={**ADMIN, "If-Match": '"2"'},
    )
    assert problem(broken, 422)["field"].startswith("architecture.layer_specs.full_attention")
    assert client.get("/v1/models/llama-3.1-8b").json()["revision"] == 2


def test_patch_cannot_clear_the_architecture(client: TestClient) -> None:
    body = problem(
        client.patch(
            "/v1/models/llama-3.1-8b",
            json={"architecture": None},
            headers={**ADMIN, "If-Match": '"1"'},
        ),
        422,
    )
    assert body["field"] == "architecture"


def test_put_replaces_the_model(client: TestClient) -> None:
    created(client, {**NEW_MODEL, "notes": "first", "hf_id": "acme/test"})
    arch = {**ARCH, "layer_schedule": [{"pattern": ["full_attention"], "repeat": 16}]}
    response = client.put(
        "/v1/models/test-model-8b",
        json={"name": "Half", "architecture": arch},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["revision"] == 2
    assert response.headers["etag"] == '"2"'
    assert body["num_layers"] == 16
    assert body["kv_bytes_per_token_bf16"] == LLAMA_8B_KV // 2
    # omitted optional fields are cleared by a replace
    assert (body["name"], body["notes"], body["hf_id"]) == ("Half", None, None)
    assert body["family"] is None


def test_stale_and_missing_if_match(client: TestClient) -> None:
    ok = client.patch(
        "/v1/models/llama-3.1-8b", json={"notes": "a"}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert ok.status_code == 200
    stale = client.patch(
        "/v1/models/llama-3.1-8b", json={"notes": "b"}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert problem(stale, 412)["current_revision"] == 2
    assert stale.headers["etag"] == '"2"'
    missing = client.patch("/v1/models/llama-3.1-8b", json={"notes": "c"}, headers=ADMIN)
    assert problem(missing, 428)["field"] == "If-Match"
    problem(client.delete("/v1/models/llama-3.1-8b", headers=ADMIN), 428)
    put = client.put(
        "/v1/models/llama-3.1-8b",
        json={"architecture": ARCH},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    problem(put, 412)
    assert client.get("/v1/models/llama-3.1-8b").json()["notes"] == "a"


def test_delete_with_if_match(client: TestClient) -> None:
    created(client)
    problem(client.delete("/v1/models/test-model-8b", headers={**ADMIN, "If-Match": '"3"'}), 412)
    response = client.delete("/v1/models/test-model-8b", headers={**ADMIN, "If-Match": '"1"'})
    assert response.status_code == 204
    problem(client.get("/v1/models/test-model-8b"), 404)
    assert "test-model-8b" not in all_slugs(client, "/v1/models?q=test-model")


# ---- import from a Hugging Face config.json ---------------------------------------------------


def test_import_dry_run_returns_the_spec_and_stores_nothing(client: TestClient) -> None:
    response = client.post(
        "/v1/models/import",
        json={"hf_config": LLAMA_3_1_8B, "slug": "imported-llama", "dry_run": True},
        headers=ADMIN,
    )
    assert response.status_code == 200, response.text
    assert "location" not in response.headers
    body = response.json()
    assert body["slug"] == "imported-llama"
    assert body["family"] == "llama"  # the config's model_type
    assert body["kv_bytes_per_token_bf16"] == LLAMA_8B_KV
    assert body["layer_counts"] == {"full_attention": 32}
    assert body["max_position_embeddings"] == 131072
    problem(client.get("/v1/models/imported-llama"), 404)
    # nothing stored, so the catalog did not move
    problem(client.get("/v1/capacity", params={**CAPACITY, "model": "imported-llama"}), 404)


def test_import_stores_the_model(client: TestClient) -> None:
    response = client.post(
        "/v1/models/import",
        json={"hf_config": LLAMA_3_1_8B, "hf_id": "meta-llama/Llama-3.1-8B-Copy"},
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    # the slug is made from hf_id
    assert response.headers["location"] == "/v1/models/llama-3.1-8b-copy"
    assert response.headers["etag"] == '"1"'
    stored = client.get("/v1/models/llama-3.1-8b-copy").json()
    assert stored["kv_bytes_per_token_bf16"] == LLAMA_8B_KV
    assert stored["hf_id"] == "meta-llama/Llama-3.1-8B-Copy"
    seeded = client.get("/v1/models/llama-3.1-8b").json()
    assert stored["architecture"]["layer_specs"] == seeded["architecture"]["layer_specs"]
    assert stored["architecture"]["layer_schedule"] == seeded["architecture"]["layer_schedule"]


def test_import_of_a_nested_hybrid_config(client: TestClient) -> None:
    response = client.post(
        "/v1/models/import",
        json={"hf_config": QWEN3_5_27B, "slug": "imported-qwen3.5", "dry_run": True},
        headers=ADMIN,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["family"] == "qwen3_5_text"  # the nested language model's model_type
    assert body["layer_counts"] == {"linear_attention": 48, "full_attention": 16}
    # 16 full layers x 4 KV heads x 256 x 2 (K, V) x 2 B = 65,536 B per token
    assert body["kv_bytes_per_token_bf16"] == 65_536


def test_import_keeps_layers_with_and_without_a_sparse_indexer_apart(client: TestClient) -> None:
    # GLM-5.2 style: one layer in four keeps its own indexer key (132 B per token), the rest
    # share it. Stored as one spec per kind, every layer would get the indexer.
    config = {
        **DEEPSEEK_V3,
        "num_hidden_layers": 8,
        "index_topk": 2048,
        "index_head_dim": 128,
        "indexer_types": ["full", "shared", "shared", "shared"] * 2,
    }
    response = client.post(
        "/v1/models/import",
        json={"hf_config": config, "slug": "imported-dsa", "num_parameters": 10**9},
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    stored = client.get("/v1/models/imported-dsa").json()
    assert stored["architecture"]["layer_specs"] == {
        "mla": {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "indexer_head_dim": 128},
        "mla_2": {"kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
    }
    # 2 x (1,152 + 132) + 6 x 1,152 = 9,480 B per token
    assert stored["kv_bytes_per_token_bf16"] == 9480
    capacity = client.get(
        "/v1/capacity",
        params={"model": "imported-dsa", "gpu": "h200-141gb", "max_model_len": 4096},
    ).json()
    assert capacity["kv_bytes_per_token"] == 9480


def test_a_dry_run_import_onto_a_taken_slug_is_409_as_storing_would_be(
    client: TestClient,
) -> None:
    response = client.post(
        "/v1/models/import",
        json={"hf_config": LLAMA_3_1_8B, "slug": "llama-3.1-8b", "dry_run": True},
        headers=ADMIN,
    )
    assert problem(response, 409)["field"] == "slug"


def test_import_of_an_existing_slug_is_409(client: TestClient) -> None:
    response = client.post(
        "/v1/models/import", json={"hf_config": LLAMA_3_1_8B, "slug": "llama-3.1-8b"}, headers=ADMIN
    )
    assert problem(response, 409)["field"] == "slug"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**LLAMA_3_1_8B, "num_hidden_layers": "thirty-two"}, "hf_config.num_hidden_layers"),
        ({**LLAMA_3_1_8B, "num_key_value_heads": 0}, "hf_config.num_key_value_heads"),
        (
            {k: v for k, v in LLAMA_3_1_8B.items() if k != "num_hidden_layers"},
            "hf_config.num_hidden_layers",
        ),
        ({**DEEPSEEK_V3, "kv_lora_rank": -1}, "hf_config.kv_lora_rank"),
    ],
)
def test_uninterpretable_config_is_422_naming_the_key(
    client: TestClient, config: dict[str, Any], field: str
) -> None:
    response = client.post(
        "/v1/models/import", json={"hf_config": config, "slug": "bad-import"}, headers=ADMIN
    )
    body = problem(response, 422)
    assert body["field"] == field
    problem(client.get("/v1/models/bad-import"), 404)


def test_import_of_an_unknown_layer_type_is_422(client: TestClient) -> None:
    config = {**LLAMA_3_1_8B, "layer_types": ["full_attention"] * 31 + ["hyena"]}
    response = client.post(
        "/v1/models/import", json={"hf_config": config, "slug": "bad-import"}, headers=ADMIN
    )
    body = problem(response, 422)
    assert body["type"] == "/problems/unknown-layer-kind"
    assert body["field"].startswith("hf_config.layer_types")


def test_import_needs_a_slug_to_store(client: TestClient) -> None:
    response = client.post("/v1/models/import", json={"hf_config": LLAMA_3_1_8B}, headers=ADMIN)
    assert problem(response, 422)["field"] == "slug"


# ---- writes reach the sizing endpoints --------------------------------------------------------


def test_capacity_sees_a_new_model_at_once(client: TestClient) -> None:
    params = {**CAPACITY, "model": "test-model-8b"}
    before = problem(client.get("/v1/capacity", params=params), 404)
    assert before["field"] == "model"
    created(client)
    response = client.get("/v1/capacity", params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "test-model-8b"
    assert body["kv_bytes_per_token"] == LLAMA_8B_KV


def test_capacity_sees_an_imported_model(client: TestClient) -> None:
    # config.json does not say how many parameters; capacity needs them for the weights
    body = {"hf_config": LLAMA_3_1_8B, "slug": "llama-imported", "num_parameters": 8_030_261_248}
    response = client.post("/v1/models/import", json=body, headers=ADMIN)
    assert response.status_code == 201
    capacity = client.get("/v1/capacity", params={**CAPACITY, "model": "llama-imported"})
    assert capacity.status_code == 200, capacity.text
    seeded = client.get("/v1/capacity", params={**CAPACITY, "model": "llama-3.1-8b"}).json()
    assert capacity.json()["kv_bytes_per_token"] == seeded["kv_bytes_per_token"] == LLAMA_8B_KV
    assert capacity.json()["max_num_seqs"] == seeded["max_num_seqs"]


def test_capacity_follows_a_patched_model(client: TestClient) -> None:
    params = {**CAPACITY, "model": "test-model-8b"}
    created(client)
    before = client.get("/v1/capacity", params=params).json()
    response = client.patch(
        "/v1/models/test-model-8b",
        json={"architecture": {"layer_schedule": [{"pattern": ["full_attention"], "repeat": 16}]}},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    after = client.get("/v1/capacity", params=params).json()
    assert after["kv_bytes_per_token"] == before["kv_bytes_per_token"] // 2
