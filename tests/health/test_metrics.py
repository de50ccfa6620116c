"""/metrics: the instrumentator's HTTP metrics plus kvplan's catalog gauges."""

from __future__ import annotations

from fastapi.testclient import TestClient

from service.catalog.seed import load_seed
from tests.conftest import ADMIN


def test_catalog_size_is_a_gauge_per_kind(client: TestClient) -> None:
    client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"})
    metrics = client.get("/metrics").text
    # the shipped seed (service/catalog/data): every entry is in the snapshot
    assert (
        f'kvplan_catalog_entries{{kind="model"}} {float(len(load_seed("models.json")))}' in metrics
    )
    assert f'kvplan_catalog_entries{{kind="gpu"}} {float(len(load_seed("gpus.json")))}' in metrics


def test_a_write_moves_the_catalog_gauges(client: TestClient) -> None:
    client.get("/v1/gpus/h100-sxm-80gb")
    client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"})
    before = client.get("/metrics").text
    created = client.post(
        "/v1/gpus", json={"slug": "metric-gpu", "name": "M", "memory_bytes": 1 << 30}, headers=ADMIN
    )
    assert created.status_code == 201
    client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "metric-gpu"})
    after = client.get("/metrics").text
    gpus = float(len(load_seed("gpus.json")))
    assert f'kvplan_catalog_entries{{kind="gpu"}} {gpus}' in before
    assert f'kvplan_catalog_entries{{kind="gpu"}} {gpus + 1}' in after


def test_http_requests_are_counted_by_handler_not_by_raw_path(client: TestClient) -> None:
    client.get("/v1/models/llama-3.1-8b")
    metrics = client.get("/metrics").text
    # the route template keeps the label set bounded however many slugs are asked for
    assert 'handler="/v1/models/{slug}"' in metrics
    assert "llama-3.1-8b" not in metrics
