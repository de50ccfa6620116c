"""Security headers on every answer; CORS only for the configured origins."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.app import create_app
from service.kit.middleware import API_POLICY, DOCS_POLICY
from tests.conftest import ADMIN, make_settings

ORIGIN = "https://backstage.example"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/healthz", 200),
        ("GET", "/v1/capacity?model=llama-3.1-8b&gpu=h100-sxm-80gb", 200),
        ("GET", "/v1/gpus?format=csv", 200),
        ("GET", "/v1/gpus/nope", 404),
        ("POST", "/v1/gpus", 401),
        ("DELETE", "/healthz", 405),
        ("GET", "/metrics", 200),
        ("GET", "/openapi.json", 200),
        ("GET", "/problems/not-found", 200),
    ],
)
def test_every_answer_carries_the_security_headers(
    client: TestClient, method: str, path: str, status: int
) -> None:
    response = client.request(method, path)
    assert response.status_code == status
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["content-security-policy"] == API_POLICY


def test_a_413_and_a_500_carry_them_too(app: FastAPI, client: TestClient) -> None:
    too_large = client.post("/v1/plans", content=b" " * (2 << 20))
    assert too_large.status_code == 413
    assert too_large.headers["x-content-type-options"] == "nosniff"

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("boom")

    with TestClient(app, raise_server_exceptions=False) as raw:
        crashed = raw.get("/boom")
    assert crashed.status_code == 500
    assert crashed.headers["content-security-policy"] == API_POLICY


def test_the_docs_load_everything_from_this_host_under_their_policy(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        response = client.get(page)
        assert response.status_code == 200
        assert response.headers["content-security-policy"] == DOCS_POLICY
        assert "frame-ancestors 'none'" in DOCS_POLICY
        # every script, style and icon is a path on this host ('self'), never another origin
        urls = re.findall(r'(?:src|href)="([^"]+)"', response.text)
        assert urls, page
        for url in urls:
            assert url.startswith("/"), url
            assert client.get(url).status_code == 200, url
    asset = client.get("/docs/assets/swagger-ui-bundle.js")
    assert asset.headers["content-security-policy"] == DOCS_POLICY


# ---- CORS -------------------------------------------------------------------------------------


def test_without_configured_origins_there_is_no_cors(client: TestClient) -> None:
    response = client.get("/v1/gpus", headers={"Origin": ORIGIN})
    assert "access-control-allow-origin" not in response.headers
    preflight = client.options(
        "/v1/gpus/h100-sxm-80gb",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "PATCH"},
    )
    assert "access-control-allow-origin" not in preflight.headers


@pytest.fixture
def cors(app: FastAPI, database_url: str) -> TestClient:
    settings = make_settings(database_url, cors_origins=f"{ORIGIN}, https://other.example")
    return TestClient(create_app(settings, app.state.db))


def test_a_configured_origin_may_read_and_write(cors: TestClient) -> None:
    preflight = cors.options(
        "/v1/gpus/h100-sxm-80gb",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "PATCH",
            "Access-Control-Request-Headers": "authorization, if-match, content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    allowed = {
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    }
    assert {"authorization", "if-match", "if-none-match", "content-type"} <= allowed
    read = cors.get("/v1/gpus/h100-sxm-80gb", headers={"Origin": ORIGIN})
    assert read.headers["access-control-allow-origin"] == ORIGIN
    exposed = {h.strip().lower() for h in read.headers["access-control-expose-headers"].split(",")}
    assert {"etag", "link", "location", "retry-after", "kvplan-catalog-stale"} <= exposed
    # credentials (cookies) are never involved: the admin token travels in Authorization
    assert "access-control-allow-credentials" not in read.headers


def test_another_origin_gets_no_cors_headers(cors: TestClient) -> None:
    read = cors.get("/v1/gpus", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in read.headers
    preflight = cors.options(
        "/v1/gpus",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert (
        cors.post(
            "/v1/gpus", json={}, headers={**ADMIN, "Origin": "https://evil.example"}
        ).headers.get("access-control-allow-origin")
        is None
    )
