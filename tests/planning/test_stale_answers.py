"""Sizing answers from a stale catalog say so: `KVPLAN-Catalog-Stale: true`.

Capacity and plans always read the replica's catalog snapshot; while the database is away that
snapshot cannot be refreshed, and every sizing answer (GET and POST /v1/capacity, GET and POST
/v1/plans, a table of plans, a profile's capacity) carries the header the catalog reads carry.
"""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.catalog.reads import STALE_HEADER
from service.openapi_export import openapi_spec
from tests.catalog.test_stale_reads import cut

CAPACITY = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
PLAN = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 50}


def _ask(client: TestClient) -> dict[str, dict[str, str]]:
    answers = {
        "GET /v1/capacity": client.get("/v1/capacity", params=CAPACITY),
        "POST /v1/capacity": client.post("/v1/capacity", json=CAPACITY),
        "GET /v1/plans": client.get("/v1/plans", params={**PLAN, "gpus": "l4,h100-sxm-80gb"}),
        "POST /v1/plans": client.post("/v1/plans", json=PLAN),
        "POST /v1/plans (table)": client.post(
            "/v1/plans",
            content="model,max_model_len,peak_concurrency\nllama-3.1-8b,8192,50\n",
            headers={"Content-Type": "text/csv"},
        ),
    }
    for what, response in answers.items():
        assert response.status_code == 200, (what, response.text)
    return {what: dict(response.headers) for what, response in answers.items()}


def test_sizing_answers_from_a_stale_catalog_say_so(app: FastAPI, client: TestClient) -> None:
    fresh = _ask(client)
    assert all(STALE_HEADER.lower() not in headers for headers in fresh.values())
    real = cut(app.state.db)
    try:
        stale = _ask(client)
    finally:
        app.state.db.sessions = real
    marked = {what: headers.get(STALE_HEADER.lower()) for what, headers in stale.items()}
    assert marked == dict.fromkeys(stale, "true")
    # the database back: the next answers are fresh again
    assert all(STALE_HEADER.lower() not in headers for headers in _ask(client).values())


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/v1/capacity", "get"),
        ("/v1/capacity", "post"),
        ("/v1/plans", "get"),
        ("/v1/plans", "post"),
        ("/v1/deployments/{name}/capacity", "get"),
    ],
)
def test_the_spec_documents_the_stale_header(path: str, method: str) -> None:
    ok = openapi_spec()["paths"][path][method]["responses"]["200"]
    assert STALE_HEADER in ok["headers"]
