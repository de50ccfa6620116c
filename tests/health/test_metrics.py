"""/metrics: the HTTP metrics (prometheus-fastapi-instrumentator's, measured by a lean layer of
kvplan's own) plus kvplan's catalog gauges."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from prometheus_fastapi_instrumentator import Instrumentator

from service.catalog.seed import load_seed
from service.kit.metrics import Metrics
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


# ---- the HTTP metrics: prometheus-fastapi-instrumentator's names, labels and buckets ----------


def _samples(text: str) -> set[str]:
    """Each sample's name and labels, without its value (durations differ from run to run)."""
    return {
        line.rsplit(" ", 1)[0]
        for line in text.splitlines()
        if line.startswith(("http_request", "http_response"))
    }


def _small_app(instrument: Callable[[FastAPI], None]) -> FastAPI:
    app = FastAPI()

    @app.get("/items/{slug}")
    async def item(slug: str) -> dict[str, str]:
        if slug == "missing":
            raise HTTPException(404)
        return {"slug": slug}

    @app.post("/items")
    async def create(body: dict[str, int]) -> dict[str, int]:
        return body

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    instrument(app)
    return app


def _drive(app: FastAPI) -> str:
    with TestClient(app) as client:
        client.get("/items/a")
        client.get("/items/b")
        client.get("/items/missing")
        client.post("/items", json={"n": 1})
        client.put("/items/a")  # 405: a partial match counts under the route's template
        client.get("/nowhere")  # no route: handler "none"
        client.get("/healthz")  # left out, as /metrics and /readyz
        return client.get("/metrics").text


def test_the_http_metrics_are_the_instrumentators(client: TestClient) -> None:
    def theirs(app: FastAPI) -> None:
        Instrumentator(
            registry=CollectorRegistry(), excluded_handlers=["/metrics", "/healthz", "/readyz"]
        ).instrument(app).expose(app, endpoint="/metrics", include_in_schema=False)

    def ours(app: FastAPI) -> None:
        Metrics().install(app)

    expected = _samples(_drive(_small_app(theirs)))
    assert _samples(_drive(_small_app(ours))) == expected
    assert 'http_requests_total{handler="/items/{slug}",method="GET",status="2xx"}' in expected
    assert 'http_requests_total{handler="none",method="GET",status="4xx"}' in expected


def test_kvplan_counts_its_routes_by_template(client: TestClient) -> None:
    client.get("/v1/gpus/h100-sxm-80gb")
    client.get("/v1/gpus/no-such-gpu")
    client.get("/healthz")
    text = client.get("/metrics", headers={"Accept-Encoding": "identity"}).text
    assert 'http_requests_total{handler="/v1/gpus/{slug}",method="GET",status="2xx"} 1.0' in text
    assert 'http_requests_total{handler="/v1/gpus/{slug}",method="GET",status="4xx"} 1.0' in text
    assert 'http_request_duration_seconds_count{handler="/v1/gpus/{slug}",method="GET"} 2.0' in text
    assert "http_request_duration_highr_seconds_count 2.0" in text
    assert 'handler="/healthz"' not in text


def test_metrics_are_gzipped_for_prometheus(client: TestClient) -> None:
    response = client.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert "kvplan_catalog_entries" in response.text  # httpx decodes it
