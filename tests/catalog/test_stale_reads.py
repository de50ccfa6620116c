"""Catalog reads while the database is unreachable: answered from the replica's snapshot.

Before, GET /v1/models and /v1/gpus answered 503 during an outage although the replica held
the whole catalog in memory (and `/readyz?allow_stale=true` kept it in the Service). Each
question here is asked twice, database up and database away: the answers must be the same
(items, order, cursors, ETags, CSV), the second marked `KVPLAN-Catalog-Stale: true`.
"""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine
from sqlalchemy.orm import Session, sessionmaker

from service.kit.db import Database
from tests.helpers import problem

STALE = "kvplan-catalog-stale"

QUESTIONS = [
    "/v1/gpus",
    "/v1/gpus?limit=3",
    "/v1/gpus?vendor=nvidia",
    "/v1/gpus?vendor=AMD&limit=2",
    "/v1/gpus?min_memory_bytes=100000000000",
    "/v1/gpus?max_price_usd_per_hour=3",
    "/v1/gpus?fp8_support=true",
    "/v1/gpus?fp8_support=false",
    "/v1/gpus?format=csv&limit=5",
    "/v1/gpus?format=csv&fp8_support=true",
    "/v1/gpus/h100-sxm-80gb",
    "/v1/models",
    "/v1/models?limit=7",
    "/v1/models?family=LLAMA",
    "/v1/models?layer_kind=sliding_attention",
    "/v1/models?layer_kind=mamba2",
    "/v1/models?layer_kind=mla&limit=3",
    "/v1/models?q=Qwen",
    "/v1/models?min_parameters=100000000000",
    "/v1/models?max_parameters=10000000000&limit=4",
    "/v1/models/llama-3.1-8b",
]


@pytest.fixture
def outage(app: FastAPI, client: TestClient) -> Database:
    """Yields the replica's database; `cut()` it to make every session fail to connect."""
    client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"})
    assert app.state.catalog.loaded
    database: Database = app.state.db
    return database


def cut(database: Database) -> sessionmaker[Session]:
    real = database.sessions
    gone = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/kvplan")
    database.sessions = sessionmaker(gone, expire_on_commit=False)
    return real


def _ask(client: TestClient, path: str) -> list[tuple[int, str, str | None, str | None]]:
    """The answer and every page after it (following `Link`)."""
    pages = []
    while path:
        response = client.get(path)
        pages.append(
            (
                response.status_code,
                response.text,
                response.headers.get("etag"),
                response.headers.get(STALE),
            )
        )
        link = response.headers.get("link")
        path = link[1 : link.index(">")] if link else ""
    return pages


def test_every_catalog_read_is_answered_alike_from_the_snapshot(
    client: TestClient, outage: Database
) -> None:
    online = {path: _ask(client, path) for path in QUESTIONS}
    real = cut(outage)
    try:
        offline = {path: _ask(client, path) for path in QUESTIONS}
    finally:
        outage.sessions = real
    for path in QUESTIONS:
        assert [p[:3] for p in offline[path]] == [p[:3] for p in online[path]], path
        assert all(p[0] == 200 for p in online[path]), path
        assert all(p[3] is None for p in online[path]), path
        assert all(p[3] == "true" for p in offline[path]), path
    # several pages were followed, so cursors were issued and read from the snapshot
    assert len(offline["/v1/gpus?limit=3"]) > 2
    assert len(offline["/v1/models?limit=7"]) > 2


def test_conditional_reads_and_misses_from_the_snapshot(
    client: TestClient, outage: Database
) -> None:
    etag = client.get("/v1/gpus/h100-sxm-80gb").headers["etag"]
    online_miss = problem(client.get("/v1/models/llama-3.1-9b"), 404)
    real = cut(outage)
    try:
        unchanged = client.get("/v1/gpus/h100-sxm-80gb", headers={"If-None-Match": etag})
        assert unchanged.status_code == 304
        assert unchanged.headers["etag"] == etag
        assert unchanged.headers[STALE] == "true"
        offline_miss = problem(client.get("/v1/models/llama-3.1-9b"), 404)
        assert offline_miss["suggestions"] == online_miss["suggestions"]
        # filters are still checked: a bad cursor is a 422, offline as online
        problem(client.get("/v1/gpus", params={"cursor": "!!"}), 422)
        problem(client.get("/v1/models", params={"layer_kind": "no_cache"}), 422)
        assert "kvplan_catalog_stale 1.0" in client.get("/metrics").text
    finally:
        outage.sessions = real


def test_without_a_snapshot_an_outage_is_still_503(app: FastAPI, client: TestClient) -> None:
    assert not app.state.catalog.loaded
    real = cut(app.state.db)
    try:
        for path in ("/v1/gpus", "/v1/models/llama-3.1-8b", "/v1/gpus?format=csv"):
            problem(client.get(path), 503)
    finally:
        app.state.db.sessions = real
