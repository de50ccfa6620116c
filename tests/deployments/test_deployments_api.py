"""/v1/deployments: deployment profiles, stored like catalog entries and sized like /v1/capacity.

The sizing numbers are worked example A (tests/planning/test_capacity_api.py): Llama-3.1-8B,
131,072 B per token, 2 MiB blocks of 16 tokens, a 28,006-block pool holding 448,096 tokens. At
8,192 tokens a sequence takes 512 blocks: (28,006 - 1) // 512 = 54 sequences, 28,006 / 512 =
54.70x concurrency.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ADMIN
from tests.helpers import problem
from tests.keda import metrics_api_value

MiB = 1 << 20
GiB = 1 << 30
POOL = 28_006 * 2 * MiB
PROFILE: dict[str, Any] = {
    "name": "llama-8b-h100",
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "kv_pool_bytes": POOL,
    "engine_version": "0.20.0",
    "peak_concurrency": 200,
    "namespace": "inference",
    "workload": "llama-3-1-8b-vllm",
    "replicas": 2,
}


def create(client: TestClient, **changes: Any) -> dict[str, Any]:
    response = client.post("/v1/deployments", json={**PROFILE, **changes}, headers=ADMIN)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def if_match(revision: int) -> dict[str, str]:
    return {**ADMIN, "If-Match": f'"{revision}"'}


# ---- create and read --------------------------------------------------------------------------


def test_create_answers_201_with_location_etag_and_the_defaults(client: TestClient) -> None:
    response = client.post(
        "/v1/deployments",
        json={"name": "qwen3-8b-l40s", "model": "qwen3-8b", "gpu": "l40s"},
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/deployments/qwen3-8b-l40s"
    assert response.headers["etag"] == '"1"'
    body = response.json()
    assert body["revision"] == 1
    # the planning slice's defaults, field by field
    assert body["engine"] == "vllm"
    assert body["tensor_parallel_size"] == 1
    assert body["pipeline_parallel_size"] == 1
    assert body["kv_cache_dtype"] == "auto"
    assert body["max_model_len"] is None
    assert body["namespace"] is None
    got = client.get("/v1/deployments/qwen3-8b-l40s")
    assert got.status_code == 200
    assert got.json() == body
    assert got.headers["etag"] == '"1"'


def test_every_field_sent_is_read_back(client: TestClient) -> None:
    body = create(client, gpu_memory_utilization=0.85, enforce_eager=True)
    for name, value in {**PROFILE, "gpu_memory_utilization": 0.85, "enforce_eager": True}.items():
        assert body[name] == value, name


def test_writes_need_the_admin_token_before_the_body_is_read(client: TestClient) -> None:
    response = client.post("/v1/deployments", content=b"{not json")
    assert problem(response, 401)["type"] == "/problems/unauthorized"
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_name_is_unique(client: TestClient) -> None:
    create(client)
    response = client.post("/v1/deployments", json=PROFILE, headers=ADMIN)
    assert problem(response, 409)["field"] == "name"


def test_a_misspelt_field_is_refused(client: TestClient) -> None:
    response = client.post(
        "/v1/deployments", json={**PROFILE, "tensor_paralel_size": 2}, headers=ADMIN
    )
    assert problem(response, 422)["field"] == "tensor_paralel_size"


def test_a_model_not_in_the_catalog_is_422_with_the_closest_slugs(client: TestClient) -> None:
    response = client.post(
        "/v1/deployments", json={**PROFILE, "model": "llama-3.1-8"}, headers=ADMIN
    )
    body = problem(response, 422)
    assert body["field"] == "model"
    assert "llama-3.1-8b" in body["suggestions"]


def test_inputs_the_arithmetic_refuses_are_refused_at_write_with_their_type(
    client: TestClient,
) -> None:
    # Llama-3.1-8B has 32 attention heads: 3 does not divide them
    response = client.post(
        "/v1/deployments", json={**PROFILE, "tensor_parallel_size": 3}, headers=ADMIN
    )
    body = problem(response, 422)
    assert body["type"] == "/problems/invalid-parallelism"
    assert body["field"] == "tensor_parallel_size"
    # a flag of another engine is refused as GET /v1/capacity refuses it
    response = client.post(
        "/v1/deployments", json={**PROFILE, "mem_fraction_static": 0.8}, headers=ADMIN
    )
    assert problem(response, 422)["field"] == "mem_fraction_static"


def test_an_unknown_name_is_404_with_the_closest_names(client: TestClient) -> None:
    create(client)
    body = problem(client.get("/v1/deployments/llama-8b-h10"), 404)
    assert body["field"] == "name"
    assert body["suggestions"] == ["llama-8b-h100"]
    assert problem(client.get("/v1/deployments/llama-8b-h10/capacity"), 404)["field"] == "name"


def test_a_conditional_get_of_the_current_revision_is_304(client: TestClient) -> None:
    create(client)
    response = client.get("/v1/deployments/llama-8b-h100", headers={"If-None-Match": '"1"'})
    assert response.status_code == 304
    assert response.headers["etag"] == '"1"'


def test_the_list_pages_in_name_order_and_filters(client: TestClient) -> None:
    names = ["dep-c", "dep-a", "dep-b"]
    for name in names:
        create(client, name=name)
    create(client, name="dep-qwen", model="qwen3-8b", max_model_len=4096)
    first = client.get("/v1/deployments", params={"limit": 2})
    assert first.status_code == 200
    page = first.json()
    assert [item["name"] for item in page["items"]] == ["dep-a", "dep-b"]
    assert first.headers["link"] == f'<{page["next"]}>; rel="next"'
    second = client.get(page["next"]).json()
    assert [item["name"] for item in second["items"]] == ["dep-c", "dep-qwen"]
    assert second["next"] is None
    only = client.get("/v1/deployments", params={"model": "qwen3-8b"}).json()["items"]
    assert [item["name"] for item in only] == ["dep-qwen"]
    nowhere = client.get("/v1/deployments", params={"namespace": "elsewhere"}).json()["items"]
    assert nowhere == []
    assert problem(client.get("/v1/deployments", params={"cursor": "!!"}), 422)["field"] == (
        "cursor"
    )


# ---- updates -----------------------------------------------------------------------------------


def test_updates_need_if_match_and_a_stale_one_is_412(client: TestClient) -> None:
    create(client)
    url = "/v1/deployments/llama-8b-h100"
    assert problem(client.patch(url, json={"replicas": 3}, headers=ADMIN), 428)
    stale = client.patch(url, json={"replicas": 3}, headers=if_match(7))
    assert problem(stale, 412)["field"] == "If-Match"
    assert stale.headers["etag"] == '"1"'
    patched = client.patch(url, json={"replicas": 3}, headers=if_match(1))
    assert patched.status_code == 200, patched.text
    assert patched.headers["etag"] == '"2"'
    assert patched.json()["replicas"] == 3
    assert patched.json()["max_model_len"] == 8192  # untouched
    assert problem(client.delete(url, headers=if_match(1)), 412)


def test_a_patch_null_restores_the_default_and_cannot_clear_the_model(client: TestClient) -> None:
    create(client, tensor_parallel_size=2)
    url = "/v1/deployments/llama-8b-h100"
    body = client.patch(
        url, json={"tensor_parallel_size": None, "namespace": None}, headers=if_match(1)
    ).json()
    assert body["tensor_parallel_size"] == 1
    assert body["namespace"] is None
    assert body["revision"] == 2
    assert problem(client.patch(url, json={"model": None}, headers=if_match(2)), 422)["field"] == (
        "model"
    )
    # bounds are the body's bounds
    bad = client.patch(url, json={"tensor_parallel_size": 0}, headers=if_match(2))
    assert problem(bad, 422)["field"] == "tensor_parallel_size"
    # an empty patch changes nothing, not even the revision
    assert client.patch(url, json={}, headers=if_match(2)).json()["revision"] == 2


def test_put_replaces_every_field(client: TestClient) -> None:
    create(client, enforce_eager=True)
    replaced = client.put(
        "/v1/deployments/llama-8b-h100",
        json={"model": "qwen3-8b", "gpu": "l40s", "max_model_len": 4096},
        headers=if_match(1),
    )
    assert replaced.status_code == 200, replaced.text
    body = replaced.json()
    assert (body["model"], body["gpu"], body["max_model_len"]) == ("qwen3-8b", "l40s", 4096)
    assert body["enforce_eager"] is False
    assert body["namespace"] is None
    assert body["revision"] == 2


def test_delete_removes_it(client: TestClient) -> None:
    create(client)
    url = "/v1/deployments/llama-8b-h100"
    assert problem(client.delete(url, headers=ADMIN), 428)
    response = client.delete(url, headers=if_match(1))
    assert response.status_code == 204
    problem(client.get(url), 404)
    problem(client.get(f"{url}/capacity"), 404)


# ---- capacity ----------------------------------------------------------------------------------

CAPACITY = "/v1/deployments/llama-8b-h100/capacity"


def test_capacity_is_the_capacity_of_its_fields(client: TestClient) -> None:
    create(client)
    response = client.get(CAPACITY)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["deployment"] == "llama-8b-h100"
    assert body["revision"] == 1
    assert body["max_num_seqs"] == 54
    assert body["kv_cache_tokens"] == 448_096
    assert body["max_concurrency"] == 54.70
    assert body["kv_pool_bytes"] == POOL
    # the planned peak of 200 at 54 per replica: ceil(200 / 54) = 4
    assert body["replicas_for_peak_concurrency"] == 4
    # the same question asked of GET /v1/capacity answers the same numbers
    fields = {k: v for k, v in PROFILE.items() if k not in ("name", "namespace", "workload")}
    fields.pop("replicas")
    same = client.get("/v1/capacity", params=fields).json()
    assert {name: body[name] for name in same} == same


def test_peak_concurrency_in_the_query_replaces_the_planned_one(client: TestClient) -> None:
    create(client)
    # ceil(100 / 54) = 2
    body = client.get(CAPACITY, params={"peak_concurrency": 100}).json()
    assert body["replicas_for_peak_concurrency"] == 2
    assert body["peak_concurrency"] == 100


def test_capacity_is_cacheable_and_moves_with_the_profile(client: TestClient) -> None:
    create(client)
    first = client.get(CAPACITY)
    assert first.headers["cache-control"].startswith("public, max-age=")
    etag = first.headers["etag"]
    assert client.get(CAPACITY, headers={"If-None-Match": etag}).status_code == 304
    client.patch("/v1/deployments/llama-8b-h100", json={"max_model_len": 4096}, headers=if_match(1))
    after = client.get(CAPACITY, headers={"If-None-Match": etag})
    assert after.status_code == 200
    assert after.headers["etag"] != etag
    # 4,096 tokens = 256 blocks: (28,006 - 1) // 256 = 109
    assert after.json()["max_num_seqs"] == 109


def test_keda_reads_capacity_as_json_and_as_prometheus(client: TestClient) -> None:
    create(client)
    as_json = client.get(CAPACITY)
    assert metrics_api_value(200, as_json.content, "max_num_seqs", "json") == 54
    replicas = metrics_api_value(200, as_json.content, "replicas_for_peak_concurrency", "json")
    assert replicas == 4
    text = client.get(CAPACITY, params={"format": "prometheus"})
    assert text.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    selector = 'kvplan_capacity_max_num_seqs{deployment="llama-8b-h100"}'
    assert metrics_api_value(200, text.content, selector, "prometheus") == 54
    families = {f.name: f for f in text_string_to_metric_families(text.text)}
    (sample,) = families["kvplan_capacity_kv_cache_tokens"].samples
    assert sample.value == 448_096
    assert sample.labels["deployment"] == "llama-8b-h100"
    assert sample.labels["model"] == "llama-3.1-8b"
    assert all(family.type == "gauge" for family in families.values())


def test_keda_api_key_in_the_query_string_is_ignored_by_this_open_read(
    client: TestClient,
) -> None:
    # KEDA's apiKey auth with method=query appends api_key=<key> (metrics_api_scaler.go)
    create(client)
    response = client.get(CAPACITY, params={"api_key": "from-a-trigger-authentication"})
    assert response.status_code == 200, response.text


def test_capacity_as_one_value_and_as_csv(client: TestClient) -> None:
    create(client)
    value = client.get(CAPACITY, params={"field": "max_num_seqs"})
    assert value.headers["content-type"].startswith("text/plain")
    assert value.text == "54"
    table = client.get(CAPACITY, params={"format": "csv"})
    assert table.headers["content-type"].startswith("text/csv")
    header, row = table.text.splitlines()
    assert dict(zip(header.split(","), row.split(","), strict=True))["max_num_seqs"] == "54"


def test_a_profile_that_does_not_fit_is_stored_and_its_capacity_is_422(client: TestClient) -> None:
    # Llama-3.1-70B's bf16 weights alone are about 141 GB (70.6e9 x 2 B); an L4 has 24 GB
    create(client, name="too-big", model="llama-3.1-70b", gpu="l4", kv_pool_bytes=None)
    for params in ({}, {"format": "prometheus"}, {"field": "max_num_seqs"}):
        response = client.get("/v1/deployments/too-big/capacity", params=params)
        assert problem(response, 422)["type"] == "/problems/weights-do-not-fit", params


def test_a_context_beyond_the_pool_is_422_sequence_does_not_fit(client: TestClient) -> None:
    create(client)
    # 10,000,000 tokens need 625,000 blocks of 16; the pool has 28,006. (Past the model's
    # 131,072, so the engine's override is asked for: the pool is the point here.)
    patched = client.patch(
        "/v1/deployments/llama-8b-h100",
        json={"max_model_len": 10_000_000, "allow_long_max_model_len": True},
        headers=if_match(1),
    )
    assert patched.status_code == 200, patched.text
    body = problem(client.get(CAPACITY), 422)
    assert body["type"] == "/problems/sequence-does-not-fit"
    assert body["field"] == "max_model_len"


def test_a_gpu_that_left_the_catalog_is_422_missing_catalog_entry(client: TestClient) -> None:
    created = client.post(
        "/v1/gpus",
        json={"slug": "leaving-gpu", "name": "Leaving", "memory_bytes": 80 * GiB},
        headers=ADMIN,
    )
    assert created.status_code == 201
    create(client, gpu="leaving-gpu")
    assert client.get(CAPACITY).status_code == 200
    assert client.delete("/v1/gpus/leaving-gpu", headers=if_match(1)).status_code == 204
    body = problem(client.get(CAPACITY), 422)
    assert body["type"] == "/problems/missing-catalog-entry"
    assert body["field"] == "gpu"
    # the profile itself is still there to be fixed
    assert client.get("/v1/deployments/llama-8b-h100").status_code == 200
