"""Replicas share nothing but the database: a write through one is seen through every other.

Two apps, each with its own engine and in-memory catalog snapshot, on one PostgreSQL database,
stand in for two pods behind a load balancer. Nothing here is rolled back, so the database is
this module's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.catalog import repository
from service.catalog import service as catalog_service
from service.catalog.models import GpuRow
from service.catalog.seed import seed_catalog
from service.kit.db import Database, create_db_engine
from service.kit.errors import PreconditionFailed
from service.kit.migrate import upgrade
from tests.conftest import ADMIN, create_database, drop_database, make_settings
from tests.helpers import problem

GiB = 1 << 30
# B's snapshot is trusted for this long; the write must show within a few of these
TTL_B = 1.0
DEADLINE = 10.0
CAPACITY = {"model": "llama-3.1-8b", "max_model_len": 8192}


@pytest.fixture(scope="module")
def shared_database() -> Iterator[str]:
    url = create_database("kvplan_replicas")
    try:
        upgrade(url)
        settings = make_settings(url)
        database = Database(create_db_engine(settings))
        with database.session() as session:
            seed_catalog(session)
            session.commit()
        database.engine.dispose()
        yield url
    finally:
        drop_database(url)


def replica(url: str, ttl: float) -> Iterator[TestClient]:
    app: FastAPI = create_app(make_settings(url, catalog_ttl_seconds=ttl))
    try:
        with TestClient(app) as client:
            yield client
    finally:
        app.state.db.engine.dispose()


@pytest.fixture
def replica_a(shared_database: str) -> Iterator[TestClient]:
    yield from replica(shared_database, 0)


@pytest.fixture
def replica_b(shared_database: str) -> Iterator[TestClient]:
    yield from replica(shared_database, TTL_B)


def eventually(
    read: Callable[[], httpx.Response], ok: Callable[[httpx.Response], bool]
) -> tuple[httpx.Response, float]:
    """Poll `read` until `ok`; the last answer and how long it took. Fails at the deadline."""
    start = time.monotonic()
    while True:
        response = read()
        elapsed = time.monotonic() - start
        if ok(response):
            return response, elapsed
        if elapsed > DEADLINE:
            raise AssertionError(f"not seen within {DEADLINE} s: {response.text}")
        time.sleep(0.05)


def test_the_replicas_have_separate_engines_and_snapshots(
    replica_a: TestClient, replica_b: TestClient
) -> None:
    app_a, app_b = replica_a.app, replica_b.app
    assert isinstance(app_a, FastAPI)
    assert isinstance(app_b, FastAPI)
    assert app_a.state.db.engine is not app_b.state.db.engine
    assert app_a.state.catalog is not app_b.state.catalog


def test_a_gpu_created_through_a_is_sized_through_b(
    replica_a: TestClient, replica_b: TestClient
) -> None:
    params = {**CAPACITY, "gpu": "replica-gpu-48gb"}
    # B loads its snapshot now, before the write, so it has something stale to refresh
    assert replica_b.get("/v1/capacity", params=params).status_code == 404
    created = replica_a.post(
        "/v1/gpus",
        json={"slug": "replica-gpu-48gb", "name": "Replica GPU", "memory_bytes": 48 * GiB},
        headers=ADMIN,
    )
    assert created.status_code == 201, created.text

    # a read of the entry itself goes to the database: no wait at all
    direct = replica_b.get("/v1/gpus/replica-gpu-48gb")
    assert direct.status_code == 200
    assert direct.json()["memory_bytes"] == 48 * GiB

    # sizing reads B's snapshot: seen once B's TTL has run out, not much later
    response, waited = eventually(
        lambda: replica_b.get("/v1/capacity", params=params), lambda r: r.status_code == 200
    )
    assert waited < TTL_B + 2
    assert response.json()["gpu"] == "replica-gpu-48gb"
    assert response.json()["gpu_memory_bytes"] == 48 * GiB


def test_a_patch_through_a_changes_b_answers(replica_a: TestClient, replica_b: TestClient) -> None:
    replica_a.post(
        "/v1/gpus",
        json={"slug": "patched-gpu", "name": "Patched GPU", "memory_bytes": 24 * GiB},
        headers=ADMIN,
    )
    params = {**CAPACITY, "gpu": "patched-gpu"}
    before, _ = eventually(
        lambda: replica_b.get("/v1/capacity", params=params), lambda r: r.status_code == 200
    )
    etag_before = before.headers["etag"]
    patched = replica_a.patch(
        "/v1/gpus/patched-gpu",
        json={"memory_bytes": 80 * GiB},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert patched.status_code == 200, patched.text

    after, _ = eventually(
        lambda: replica_b.get("/v1/capacity", params=params),
        lambda r: r.json()["gpu_memory_bytes"] == 80 * GiB,
    )
    assert after.json()["max_num_seqs"] > before.json()["max_num_seqs"]
    assert after.headers["etag"] != etag_before
    # B's own read of the entry, and its revision, agree with A's write
    assert replica_b.get("/v1/gpus/patched-gpu").headers["etag"] == '"2"'


def test_a_write_through_b_is_seen_by_a_at_once(
    replica_a: TestClient, replica_b: TestClient
) -> None:
    # A trusts its snapshot for 0 s: it asks the database for the catalog version every time
    params = {**CAPACITY, "gpu": "from-b-gpu"}
    assert replica_a.get("/v1/capacity", params=params).status_code == 404
    created = replica_b.post(
        "/v1/gpus",
        json={"slug": "from-b-gpu", "name": "From B", "memory_bytes": 32 * GiB},
        headers=ADMIN,
    )
    assert created.status_code == 201
    assert replica_a.get("/v1/capacity", params=params).status_code == 200


def test_concurrent_edits_through_two_replicas_conflict(
    replica_a: TestClient, replica_b: TestClient
) -> None:
    replica_a.post(
        "/v1/gpus",
        json={"slug": "contended-gpu", "name": "Contended", "memory_bytes": 16 * GiB},
        headers=ADMIN,
    )
    # both read revision 1; A writes first; B's write must not silently overwrite A's
    assert replica_b.get("/v1/gpus/contended-gpu").headers["etag"] == '"1"'
    first = replica_a.patch(
        "/v1/gpus/contended-gpu", json={"tdp_w": 300}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert first.status_code == 200
    second = replica_b.patch(
        "/v1/gpus/contended-gpu", json={"tdp_w": 350}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert second.status_code == 412
    assert second.headers["etag"] == '"2"'
    assert replica_b.get("/v1/gpus/contended-gpu").json()["tdp_w"] == 300


def test_the_guarded_update_loses_a_race_it_could_not_see(
    shared_database: str, replica_a: TestClient
) -> None:
    # B has checked If-Match against revision 1; A commits revision 2 before B's UPDATE runs
    replica_a.post(
        "/v1/gpus",
        json={"slug": "raced-gpu", "name": "Raced", "memory_bytes": 8 * GiB},
        headers=ADMIN,
    )
    database_b = Database(create_db_engine(make_settings(shared_database)))
    try:
        with database_b.session() as session_b:
            row_b = repository.get_by_slug(session_b, GpuRow, "raced-gpu")
            assert row_b is not None
            assert row_b.revision == 1
            won = replica_a.patch(
                "/v1/gpus/raced-gpu", json={"tdp_w": 100}, headers={**ADMIN, "If-Match": '"1"'}
            )
            assert won.status_code == 200
            assert repository.update_if_revision(session_b, row_b, 1) is False
            assert repository.delete_if_revision(session_b, GpuRow, "raced-gpu", 1) is False
            session_b.rollback()
    finally:
        database_b.engine.dispose()
    final = replica_a.get("/v1/gpus/raced-gpu").json()
    assert (final["tdp_w"], final["revision"]) == (100, 2)


def test_a_lost_race_names_the_revision_to_retry_from(
    shared_database: str, replica_a: TestClient
) -> None:
    # The loser passed its If-Match check on a row it had read at revision 1; the 412 must say
    # where the entry is now, like the ordinary stale-If-Match answer does.
    replica_a.post(
        "/v1/gpus",
        json={"slug": "raced-gpu-2", "name": "Raced", "memory_bytes": 8 * GiB},
        headers=ADMIN,
    )
    database_b = Database(create_db_engine(make_settings(shared_database)))
    try:
        with database_b.session() as session_b:
            read = repository.get_by_slug(session_b, GpuRow, "raced-gpu-2")
            assert read is not None
            assert read.revision == 1
            won = replica_a.patch(
                "/v1/gpus/raced-gpu-2", json={"tdp_w": 100}, headers={**ADMIN, "If-Match": '"1"'}
            )
            assert won.status_code == 200
            # B's write of what it read at revision 1, after its If-Match check passed
            draft = catalog_service._clone(read)
            draft.tdp_w = 5
            with pytest.raises(PreconditionFailed) as caught:
                catalog_service._update(session_b, "raced-gpu-2", draft, read)
            session_b.rollback()
    finally:
        database_b.engine.dispose()
    # the guarded UPDATE, not the If-Match check, refused it
    assert "changed while this update was applied" in caught.value.detail
    assert caught.value.headers == {"ETag": '"2"'}
    assert caught.value.extra["current_revision"] == 2


# ---- an unreachable database ----------------------------------------------------------------


@pytest.fixture
def unreachable() -> Iterator[TestClient]:
    # port 1 on localhost: nothing listens, so the connection is refused at once
    url = "postgresql+psycopg://postgres@127.0.0.1:1/kvplan"
    app = create_app(make_settings(url, db_connect_timeout_seconds=2))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
    finally:
        app.state.db.engine.dispose()


@pytest.mark.parametrize(
    "path",
    [
        "/v1/gpus",
        "/v1/gpus/h100-sxm-80gb",
        "/v1/models",
        "/v1/models/llama-3.1-8b",
        "/v1/capacity?model=llama-3.1-8b&gpu=h100-sxm-80gb",
        "/readyz",
    ],
)
def test_an_unreachable_database_is_503_not_500(unreachable: TestClient, path: str) -> None:
    response = unreachable.get(path)
    body = problem(response, 503)
    assert response.headers["retry-after"] == "5"
    assert body["type"] == "/problems/service-unavailable"
    assert body["instance"] == path.partition("?")[0]


def test_writes_to_an_unreachable_database_are_503(unreachable: TestClient) -> None:
    response = unreachable.post(
        "/v1/gpus", json={"slug": "g", "name": "G", "memory_bytes": 1}, headers=ADMIN
    )
    problem(response, 503)
    # the token is still checked first, database or not
    assert unreachable.post("/v1/gpus", json={}).status_code == 401


def test_liveness_does_not_need_the_database(unreachable: TestClient) -> None:
    assert unreachable.get("/healthz").json() == {"status": "ok"}


def test_a_replica_keeps_answering_from_its_snapshot_while_the_database_is_away(
    shared_database: str,
) -> None:
    # Autoscalers poll /v1/capacity many times a minute; a database blip must not turn every
    # answer into a 503 when the replica already holds the catalog (it rarely changes).
    app: FastAPI = create_app(make_settings(shared_database, catalog_ttl_seconds=0))
    params = {**CAPACITY, "gpu": "h100-sxm-80gb"}
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            before = client.get("/v1/capacity", params=params)
            assert before.status_code == 200
            database: Database = app.state.db
            gone = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/kvplan")
            real = database.engine
            database.engine, database.sessions = gone, sessionmaker(gone, expire_on_commit=False)
            during = client.get("/v1/capacity", params=params)
            assert during.status_code == 200
            assert during.json()["max_num_seqs"] == before.json()["max_num_seqs"]
            assert "kvplan_catalog_stale 1.0" in client.get("/metrics").text
            # strict readiness says the database is away; the chart's probe keeps the pod in
            assert client.get("/readyz").status_code == 503
            assert client.get("/readyz", params={"allow_stale": "true"}).status_code == 200
            # writes still need the database
            created = client.post(
                "/v1/gpus", json={"slug": "g", "name": "G", "memory_bytes": GiB}, headers=ADMIN
            )
            assert created.status_code == 503
            database.engine, database.sessions = real, sessionmaker(real, expire_on_commit=False)
            assert client.get("/v1/capacity", params=params).status_code == 200
            assert "kvplan_catalog_stale 0.0" in client.get("/metrics").text
            gone.dispose()
    finally:
        app.state.db.engine.dispose()
