"""The Backstage proxy routes docs/backstage.md gives, replayed against the app.

Backstage's proxy plugin forwards a request header only if it is on its safe list, set by the
route's `headers`, or named in `allowedHeaders`, and filters the answer's headers the same way
(without the route's `headers`); `allowedMethods` limits the methods. Source:
backstage/backstage, plugins/proxy-backend/src/service/router.ts, `safeForwardHeaders` and
`buildMiddleware`. Each test takes a route from the guide's YAML, filters as the plugin does,
and makes the calls a Backstage plugin makes: a conditional GET, a catalog update.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient

from tests.conftest import ADMIN

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "backstage.md"
# `safeForwardHeaders` of the proxy plugin: forwarded both ways with no configuration.
SAFE = {
    "cache-control",
    "content-language",
    "content-length",
    "content-type",
    "expires",
    "last-modified",
    "pragma",
    "host",
    "accept",
    "accept-language",
    "user-agent",
}
CREDENTIALS = {"require", "forward", "dangerously-allow-unauthenticated"}
CAPACITY = "/v1/capacity?model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192"


@dataclass(frozen=True)
class Route:
    target: str
    credentials: str
    methods: frozenset[str]
    allowed: frozenset[str]

    def call(
        self, client: TestClient, method: str, path: str, headers: dict[str, str], **kw: Any
    ) -> httpx.Response | None:
        """The answer as the browser sees it through the proxy; None if the proxy refuses."""
        if method not in self.methods:
            return None
        passed = {k: v for k, v in headers.items() if k.lower() in SAFE | self.allowed}
        response = client.request(method, path, headers=passed, **kw)
        kept = [(k, v) for k, v in response.headers.items() if k.lower() in SAFE | self.allowed]
        return httpx.Response(
            response.status_code, headers=kept, content=response.content, request=response.request
        )


def routes(document: Path = GUIDE) -> list[Route]:
    """Every `/kvplan` route a document's YAML blocks configure, in the order given."""
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", document.read_text(), flags=re.S):
        config = yaml.safe_load(block)
        route = (config.get("proxy") or {}).get("endpoints", {}).get("/kvplan")
        if route is None:
            continue
        out.append(
            Route(
                target=route["target"],
                credentials=route.get("credentials", "require"),
                methods=frozenset(
                    route.get("allowedMethods") or ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
                ),
                allowed=frozenset(h.lower() for h in route.get("allowedHeaders", [])),
            )
        )
    return out


FULL, READ_ONLY = routes()


def test_the_guide_gives_the_two_routes() -> None:
    for route in (FULL, READ_ONLY):
        assert route.credentials in CREDENTIALS
        target = urlsplit(route.target)
        assert target.scheme == "http"
        assert target.port == 8000  # the chart's service.port
    assert FULL.credentials == "dangerously-allow-unauthenticated"
    assert {"authorization", "if-none-match", "if-match", "etag"} <= FULL.allowed
    assert READ_ONLY.credentials == "require"
    assert "authorization" not in READ_ONLY.allowed


def test_the_readme_gives_the_guides_full_route() -> None:
    (readme,) = routes(REPO / "README.md")
    assert readme.credentials == FULL.credentials
    assert readme.allowed == FULL.allowed
    assert readme.target == FULL.target


@pytest.mark.parametrize("route", [FULL, READ_ONLY], ids=["full", "read-only"])
def test_a_conditional_get_works_through_the_route(client: TestClient, route: Route) -> None:
    first = route.call(client, "GET", CAPACITY, {"Accept": "application/json"})
    assert first is not None
    assert first.status_code == 200
    # the tag reaches the browser only because the route names ETag: it is not a safe header
    assert "etag" not in SAFE
    etag = first.headers["etag"]
    again = route.call(client, "GET", CAPACITY, {"If-None-Match": etag})
    assert again is not None
    assert again.status_code == 304


@pytest.mark.parametrize("route", [FULL, READ_ONLY], ids=["full", "read-only"])
def test_pictures_and_plans_pass(client: TestClient, route: Route) -> None:
    picture = route.call(
        client,
        "GET",
        "/v1/pictures/memory-budget?model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192",
        {"Accept": "image/svg+xml"},
    )
    assert picture is not None
    assert picture.status_code == 200
    assert picture.headers["content-type"] == "image/svg+xml"
    assert picture.headers["cache-control"].startswith("public")
    plan = route.call(
        client,
        "POST",
        "/v1/plans",
        {"Content-Type": "application/json"},
        json={"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 10},
    )
    assert plan is not None
    assert plan.status_code == 200


def test_a_catalog_update_works_through_the_full_route(client: TestClient) -> None:
    entry = FULL.call(client, "GET", "/v1/gpus/h100-sxm-80gb", {})
    assert entry is not None
    revision = entry.headers["etag"]
    patched = FULL.call(
        client,
        "PATCH",
        "/v1/gpus/h100-sxm-80gb",
        {**ADMIN, "If-Match": revision, "Content-Type": "application/json"},
        json={"price_usd_per_hour": 2.5},
    )
    assert patched is not None
    assert patched.status_code == 200, patched.text
    assert patched.headers["etag"] != revision
    # a stale tag still gets kvplan's 412: If-Match reaches it
    stale = FULL.call(
        client,
        "PATCH",
        "/v1/gpus/h100-sxm-80gb",
        {**ADMIN, "If-Match": revision, "Content-Type": "application/json"},
        json={"price_usd_per_hour": 3.0},
    )
    assert stale is not None
    assert stale.status_code == 412


def test_the_read_only_route_lets_no_write_through(client: TestClient) -> None:
    headers = {**ADMIN, "If-Match": '"1"', "Content-Type": "application/json"}
    body = {"price_usd_per_hour": 2.5}
    assert READ_ONLY.call(client, "PATCH", "/v1/gpus/h100-sxm-80gb", headers, json=body) is None
    # and a write disguised as an allowed method still has no token: Authorization is dropped
    create = {"slug": "my-gpu", "name": "My GPU", "memory_bytes": 1 << 34, "sources": ["mine"]}
    created = READ_ONLY.call(client, "POST", "/v1/gpus", headers, json=create)
    assert created is not None
    assert created.status_code == 401
    through_full = FULL.call(client, "POST", "/v1/gpus", headers, json=create)
    assert through_full is not None
    assert through_full.status_code != 401, through_full.text
