"""GET /v1/capacity as KEDA's metrics-api scaler calls it: a number at a JSON path, or a gauge.

Numbers are worked example A (tests/planning/test_capacity_api.py): Llama-3.1-8B, 131,072 B per
token, 2 MiB blocks, a 28,006-block pool (448,096 tokens); at 8,192 tokens a sequence takes 512
blocks, so (28,006 - 1) // 512 = 54 sequences and 28,006 / 512 = 54.70x concurrency.
"""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.planning.exposition import FIGURES
from tests.helpers import problem
from tests.keda import KedaError, metrics_api_value

MiB = 1 << 20
POOL = 28_006 * 2 * MiB
QUERY = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "kv_pool_bytes": POOL,
    "engine_version": "0.20.0",
}


def test_the_number_sits_at_a_top_level_json_path(client: TestClient) -> None:
    response = client.get("/v1/capacity", params=QUERY)
    value = metrics_api_value(response.status_code, response.content, "max_num_seqs", "json")
    assert value == 54
    with_peak = client.get("/v1/capacity", params={**QUERY, "peak_concurrency": 200})
    # 200 sequences at 54 per replica: ceil(200 / 54) = 4 replicas
    replicas = metrics_api_value(200, with_peak.content, "replicas_for_peak_concurrency", "json")
    assert replicas == 4


def test_without_peak_concurrency_the_replica_path_is_an_error_not_zero(
    client: TestClient,
) -> None:
    response = client.get("/v1/capacity", params=QUERY)
    try:
        metrics_api_value(200, response.content, "replicas_for_peak_concurrency", "json")
    except KedaError:
        pass
    else:
        raise AssertionError("a null replica count must not read as a number")


def test_format_prometheus_is_text_exposition_with_one_typed_gauge_per_figure(
    client: TestClient,
) -> None:
    as_json = client.get("/v1/capacity", params=QUERY).json()
    response = client.get("/v1/capacity", params={**QUERY, "format": "prometheus"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE kvplan_capacity_max_num_seqs gauge" in response.text.splitlines()
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    # replicas_for_peak_concurrency is null without peak_concurrency: left out, not 0
    assert set(families) == {
        f"kvplan_capacity_{figure}" for figure in FIGURES if as_json[figure] is not None
    }
    assert "kvplan_capacity_replicas_for_peak_concurrency" not in families
    for figure in FIGURES:
        family = families.get(f"kvplan_capacity_{figure}")
        if family is None:
            continue
        assert family.type == "gauge"
        (sample,) = family.samples
        assert sample.value == as_json[figure]
        assert sample.labels == {
            "model": "llama-3.1-8b",
            "gpu": "h100-sxm-80gb",
            "engine": "vllm",
            "kv_cache_dtype": "auto",
        }
    assert families["kvplan_capacity_max_num_seqs"].samples[0].value == 54
    assert families["kvplan_capacity_kv_cache_tokens"].samples[0].value == 448_096
    assert families["kvplan_capacity_max_concurrency"].samples[0].value == 54.70
    assert families["kvplan_capacity_kv_pool_bytes"].samples[0].value == POOL


def test_keda_reads_the_gauge_by_name_and_by_labels(client: TestClient) -> None:
    response = client.get(
        "/v1/capacity", params={**QUERY, "format": "prometheus", "peak_concurrency": 200}
    )
    read = metrics_api_value
    assert read(200, response.content, "kvplan_capacity_max_num_seqs", "prometheus") == 54
    selector = 'kvplan_capacity_replicas_for_peak_concurrency{gpu="h100-sxm-80gb"}'
    assert read(200, response.content, selector, "prometheus") == 4


def test_prometheus_answers_are_cacheable_like_json(client: TestClient) -> None:
    params = {**QUERY, "format": "prometheus"}
    first = client.get("/v1/capacity", params=params)
    assert first.headers["cache-control"].startswith("public, max-age=")
    assert first.headers["etag"] != client.get("/v1/capacity", params=QUERY).headers["etag"]
    again = client.get(
        "/v1/capacity", params=params, headers={"If-None-Match": first.headers["etag"]}
    )
    assert again.status_code == 304
    assert again.content == b""


def test_prometheus_requests_are_counted_by_format(client: TestClient) -> None:
    client.get("/v1/capacity", params={**QUERY, "format": "prometheus"})
    metrics = client.get("/metrics").text
    assert 'kvplan_capacity_requests_total{format="prometheus",method="GET"} 1.0' in metrics


# ---- a layout that does not fit is a 422 of its own type, never a 200 with 0 ----------------


def test_weights_that_leave_no_pool_are_422_weights_do_not_fit(client: TestClient) -> None:
    # Llama-3.1-70B's bf16 weights alone are about 141 GB (70.6e9 x 2 B); an L4 has 24 GB.
    params = {"model": "llama-3.1-70b", "gpu": "l4", "max_model_len": 8192}
    for extra in ({}, {"format": "prometheus"}, {"field": "max_num_seqs"}, {"format": "csv"}):
        body = problem(client.get("/v1/capacity", params={**params, **extra}), 422)
        assert body["type"] == "/problems/weights-do-not-fit", extra
        assert body["field"] == "gpu"
    assert client.get("/problems/weights-do-not-fit").status_code == 200


def test_a_context_longer_than_the_pool_is_422_sequence_does_not_fit(client: TestClient) -> None:
    # 10,000,000 tokens need 10,000,000 / 16 = 625,000 blocks; the pool has 28,006. (Past the
    # model's 131,072, so the engine's override is asked for: the pool is the point here.)
    params = {**QUERY, "max_model_len": 10_000_000, "allow_long_max_model_len": True}
    response = client.get("/v1/capacity", params=params)
    body = problem(response, 422)
    assert body["type"] == "/problems/sequence-does-not-fit"
    assert body["field"] == "max_model_len"
    assert "longest max_model_len that fits" in body["detail"]
    try:
        metrics_api_value(response.status_code, response.content, "max_num_seqs", "json")
    except KedaError:
        pass
    else:
        raise AssertionError("KEDA must fall back, not read a number")


def test_post_capacity_still_explains_a_layout_that_does_not_fit(client: TestClient) -> None:
    # POST is for people: it answers why, with the explanation, instead of refusing
    long = {**QUERY, "max_model_len": 10_000_000, "allow_long_max_model_len": True}
    body = client.post("/v1/capacity", json=long).json()
    assert body["fits"] is False
    assert "longest max_model_len that fits" in body["reason"]
