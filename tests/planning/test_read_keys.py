"""Read keys (KVPLAN_READ_KEYS), as KEDA's metrics-api scaler sends them: the X-API-KEY header,
the `api_key` query parameter, or a bearer token (kedacore/keda
pkg/scalers/metrics_api_scaler.go, getMetricAPIServerRequest). Spreadsheets send `api_key`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.openapi_export import openapi_spec
from tests.conftest import ADMIN
from tests.helpers import problem
from tests.planning.conftest import KeyedClient
from tests.planning.test_capacity_api import BASE

READ_KEY = "read-key-7f3a9c0e51"
OTHER_KEY = "read-key-second-0b6d"
PLAN = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 50, "gpus": "l4"}
GETS = [
    ("/v1/capacity", BASE),
    ("/v1/plans", PLAN),
    ("/v1/gpus", {}),
    ("/v1/models", {}),
    ("/v1/gpus/l4", {}),
    ("/v1/models/llama-3.1-8b", {}),
]
# Every way a caller may present a key: KEDA's three auth modes (a bearer admin token too).
PRESENTED = {
    "header": ({"X-API-KEY": READ_KEY}, {}),
    "query": ({}, {"api_key": READ_KEY}),
    "bearer": ({"Authorization": f"Bearer {READ_KEY}"}, {}),
    "second key": ({"X-API-KEY": OTHER_KEY}, {}),
    "admin token": (ADMIN, {}),
}


@pytest.fixture
def keyed(keyed_client: KeyedClient) -> Iterator[TestClient]:
    with keyed_client(f"{READ_KEY}, {OTHER_KEY}") as client:
        yield client


@pytest.mark.parametrize(("path", "params"), GETS)
def test_a_read_without_a_key_is_401(keyed: TestClient, path: str, params: dict[str, Any]) -> None:
    body = problem(keyed.get(path, params=params), 401)
    assert "api_key" in body["detail"]


@pytest.mark.parametrize("how", sorted(PRESENTED))
@pytest.mark.parametrize(("path", "params"), GETS)
def test_a_read_with_a_key_is_answered(
    keyed: TestClient, path: str, params: dict[str, Any], how: str
) -> None:
    headers, query = PRESENTED[how]
    response = keyed.get(path, params={**params, **query}, headers=headers)
    assert response.status_code == 200, response.text


def test_the_sizing_posts_need_a_key_too(keyed: TestClient) -> None:
    question = {**PLAN, "gpus": ["l4"]}
    problem(keyed.post("/v1/plans", json=question), 401)
    problem(keyed.post("/v1/capacity", json=BASE), 401)
    ok = keyed.post("/v1/plans", json=question, headers={"X-API-KEY": READ_KEY})
    assert ok.status_code == 200, ok.text
    table = "model,max_model_len,peak_concurrency\nllama-3.1-8b,8192,50\n"
    csv_headers = {"Content-Type": "text/csv"}
    problem(keyed.post("/v1/plans", content=table, headers=csv_headers), 401)
    ok = keyed.post("/v1/plans", content=table, params={"api_key": READ_KEY}, headers=csv_headers)
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    "headers",
    [
        {"X-API-KEY": "wrong-key-1d2c"},
        {"Authorization": "Bearer wrong-key-1d2c"},
        {"Authorization": "Basic d3Jvbmcta2V5LTFkMmM="},
        {"X-API-KEY": ADMIN["Authorization"].split()[1]},  # admin tokens pass as bearer only
    ],
)
def test_a_wrong_key_is_401(keyed: TestClient, headers: dict[str, str]) -> None:
    problem(keyed.get("/v1/capacity", params=BASE, headers=headers), 401)


def test_a_write_still_needs_an_admin_token_not_a_read_key(keyed: TestClient) -> None:
    response = keyed.post(
        "/v1/gpus",
        json={"slug": "x-gpu", "name": "X", "memory_bytes": 1},
        headers={"Authorization": f"Bearer {READ_KEY}"},
    )
    problem(response, 401)


def test_probes_and_metrics_stay_open(keyed: TestClient) -> None:
    assert keyed.get("/healthz").status_code == 200
    assert keyed.get("/metrics").status_code == 200


def test_the_key_never_changes_the_answer_nor_its_etag(keyed: TestClient) -> None:
    by_header = keyed.get("/v1/capacity", params=BASE, headers={"X-API-KEY": READ_KEY})
    by_query = keyed.get("/v1/capacity", params={**BASE, "api_key": READ_KEY})
    by_other = keyed.get("/v1/capacity", params={**BASE, "api_key": OTHER_KEY})
    assert by_header.content == by_query.content == by_other.content
    assert by_header.headers["etag"] == by_query.headers["etag"] == by_other.headers["etag"]
    # one question, one cached answer, whichever key asked
    assert len(keyed.app.state.capacity_encoded) == 1
    revalidated = keyed.get(
        "/v1/capacity",
        params={**BASE, "api_key": OTHER_KEY},
        headers={"If-None-Match": by_header.headers["etag"]},
    )
    assert revalidated.status_code == 304


def test_answers_to_keyed_reads_are_private_to_the_caller(
    keyed: TestClient, client: TestClient
) -> None:
    # a shared cache must not hand a keyed answer to a caller without the key
    keyed_answer = keyed.get("/v1/capacity", params={**BASE, "api_key": READ_KEY})
    assert keyed_answer.headers["cache-control"].startswith("private, max-age=")
    open_answer = client.get("/v1/capacity", params=BASE)
    assert open_answer.headers["cache-control"].startswith("public, max-age=")


def test_a_key_never_travels_in_a_next_link(keyed: TestClient) -> None:
    body = keyed.get("/v1/gpus", params={"limit": 2, "api_key": READ_KEY}).json()
    assert body["next"] is not None
    assert READ_KEY not in body["next"]
    assert "api_key" not in body["next"]


def test_a_key_never_travels_in_a_deployment_pages_next_link(keyed: TestClient) -> None:
    # the deployment list builds its link with the catalog's routes.next_page_url (it kept the
    # key before)
    for name in ("profile-a", "profile-b"):
        body = {"name": name, "model": "llama-3.1-8b", "gpu": "l4", "max_model_len": 4096}
        assert keyed.post("/v1/deployments", json=body, headers=ADMIN).status_code == 201
    answer = keyed.get("/v1/deployments", params={"limit": 1, "api_key": READ_KEY})
    assert answer.json()["next"] is not None
    assert "api_key" not in answer.json()["next"]
    assert READ_KEY not in answer.headers["Link"]


def test_keys_never_reach_a_log(keyed: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    wrong = "wrong-read-key-5e8f"
    keyed.get("/v1/capacity", params={**BASE, "api_key": wrong})
    keyed.get("/v1/capacity", params=BASE, headers={"X-API-KEY": wrong})
    keyed.get("/v1/capacity", params={**BASE, "api_key": READ_KEY})
    # uvicorn's access log line, as uvicorn.protocols.http logs it: the URL is an argument
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d',
        "10.0.0.7:51234",
        "GET",
        f"/v1/capacity?model=llama-3.1-8b&api_key={READ_KEY}&_=1",
        "1.1",
        200,
    )
    # what the server logged: the test client's own request log (httpx) is the caller's
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("httpx"))
    assert READ_KEY not in logged
    assert wrong not in logged
    assert "api_key=***&_=1" in logged
    assert READ_KEY not in repr(keyed.app.state.settings)  # type: ignore[attr-defined]


def test_the_spec_documents_the_three_ways_and_that_reads_may_be_open() -> None:
    spec = openapi_spec()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["ReadKeyHeader"] == schemes["ReadKeyHeader"] | {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-KEY",
    }
    assert schemes["ReadKeyQuery"] == schemes["ReadKeyQuery"] | {
        "type": "apiKey",
        "in": "query",
        "name": "api_key",
    }
    assert schemes["ReadKeyBearer"] == schemes["ReadKeyBearer"] | {
        "type": "http",
        "scheme": "bearer",
    }
    reads = [
        (path, method, operation)
        for path, methods in spec["paths"].items()
        if path.startswith("/v1/")
        for method, operation in methods.items()
        if method == "get" or (method, path) in {("post", "/v1/plans"), ("post", "/v1/capacity")}
    ]
    assert len(reads) >= len(GETS) + 2
    for path, method, operation in reads:
        assert operation["security"] == [
            {"ReadKeyHeader": []},
            {"ReadKeyQuery": []},
            {"ReadKeyBearer": []},
            {},
        ], (method, path)
        assert "401" in operation["responses"], (method, path)
