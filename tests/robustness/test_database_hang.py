"""A database that hangs instead of stopping: every probe and every read stays bounded.

The database sits behind `FreezableProxy`; freezing it is what a SIGSTOPped server or a
network partition looks like (connections open, no byte moves). Before these fixes a frozen
database held the catalog lock across the refresh, so once the TTL passed every capacity
answer queued behind it, and /readyz and writes waited for the server to come back.
The bounds asserted here are generous (shared CI machines); the fault suite (`make faults`)
prints the real figures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import anyio.to_thread
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from service.app import create_app
from service.catalog import repository
from service.catalog.seed import seed_catalog
from service.catalog.snapshot import CatalogCache
from service.kit.db import Database, DatabaseHealth, create_db_engine
from service.kit.migrate import upgrade
from tests.conftest import ADMIN, create_database, drop_database, make_settings
from tests.helpers import problem
from tests.robustness.proxy import FreezableProxy

GiB = 1 << 30
CAPACITY = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
TTL = 0.2


@pytest.fixture(scope="module")
def hang_database() -> Iterator[str]:
    url = create_database("kvplan_hang")
    try:
        upgrade(url)
        database = Database.from_settings(make_settings(url))
        with database.session() as session:
            seed_catalog(session)
            session.commit()
        database.engine.dispose()
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def proxy(hang_database: str) -> Iterator[FreezableProxy]:
    url = make_url(hang_database)
    with FreezableProxy(url.host or "127.0.0.1", url.port or 5432) as running:
        yield running


def _through(proxy: FreezableProxy, url: str) -> str:
    return make_url(url).set(host="127.0.0.1", port=proxy.port).render_as_string(False)


@pytest.fixture
def replica(hang_database: str, proxy: FreezableProxy) -> Iterator[TestClient]:
    app: FastAPI = create_app(
        make_settings(_through(proxy, hang_database), catalog_ttl_seconds=TTL)
    )
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
    finally:
        proxy.thaw()
        app.state.db.engine.dispose()


@pytest.fixture
def cold_replica(hang_database: str, proxy: FreezableProxy) -> Iterator[TestClient]:
    """A replica started while the database hangs: a replica loads its catalog before it takes
    requests, and this one's load gave up (bounded by the connection's timeouts), so it holds
    no catalog."""
    proxy.freeze()
    app: FastAPI = create_app(
        make_settings(_through(proxy, hang_database), catalog_ttl_seconds=TTL)
    )
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            assert not app.state.catalog.loaded
            yield client
    finally:
        proxy.thaw()
        app.state.db.engine.dispose()


def timed(call: object) -> tuple[object, float]:
    start = time.monotonic()
    result = call()  # type: ignore[operator]
    return result, time.monotonic() - start


# ---- the connection's own bounds -------------------------------------------------------------


def test_a_server_that_says_nothing_is_given_up_on_after_the_answer_deadline(
    hang_database: str, proxy: FreezableProxy
) -> None:
    health = DatabaseHealth()
    settings = make_settings(_through(proxy, hang_database), db_answer_timeout_seconds=0.5)
    engine = create_db_engine(settings, health)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
            proxy.freeze()
            start = time.monotonic()
            with pytest.raises(OperationalError, match=r"did not answer within 0\.5 s"):
                conn.execute(text("SELECT 1"))
            assert time.monotonic() - start < 1.5
        assert not health.answering
        # the next connection is not even tried within the retry interval: no connect_timeout
        start = time.monotonic()
        with pytest.raises(OperationalError, match="not answering"):
            engine.connect()
        assert time.monotonic() - start < 0.5
        proxy.thaw()
        time.sleep(1.1)  # RETRY_INTERVAL_SECONDS
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        assert health.answering
    finally:
        engine.dispose()


def test_the_server_cancels_a_slow_statement_and_the_connection_lives_on(
    hang_database: str,
) -> None:
    health = DatabaseHealth()
    settings = make_settings(hang_database, db_statement_timeout_seconds=0.3)
    engine = create_db_engine(settings, health)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "300ms"
            start = time.monotonic()
            with pytest.raises(OperationalError, match="statement timeout"):
                conn.execute(text("SELECT pg_sleep(5)"))
            assert time.monotonic() - start < 1.5
        # the server answered (with an error): the database is not taken for silent
        assert health.answering
    finally:
        engine.dispose()


def test_connections_keep_tcp_keepalives(hang_database: str) -> None:
    engine = create_db_engine(make_settings(hang_database, db_keepalives_idle_seconds=12))
    try:
        with engine.connect() as conn:
            params = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
        assert params["keepalives"] == "1"
        assert params["keepalives_idle"] == "12"
        assert params["keepalives_interval"] == "4"
        assert params["keepalives_count"] == "3"
    finally:
        engine.dispose()


# ---- the snapshot: stale while revalidate ----------------------------------------------------


def test_a_hung_refresh_never_blocks_a_read(
    hang_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Database.from_settings(make_settings(hang_database))
    cache = CatalogCache(database, ttl_seconds=0.05)
    try:
        first = cache.get()
        release = threading.Event()
        entered = threading.Event()
        real = repository.catalog_version

        def hung(session: object) -> object:
            entered.set()
            release.wait(10)
            return real(session)  # type: ignore[arg-type]

        monkeypatch.setattr(repository, "catalog_version", hung)
        time.sleep(0.1)  # past the TTL
        # every read answers at once from the snapshot held, while one refresh hangs
        for _ in range(20):
            snapshot, waited = timed(cache.get)
            assert snapshot is first
            assert waited < 0.2  # the refresh hangs for 10 s
            # what the request dependency calls from the event loop: never waits either
            assert cache.get_nowait() is first
        assert entered.wait(2)
        release.set()
    finally:
        database.engine.dispose()


def test_a_read_after_a_write_waits_for_a_hung_refresh_at_most_briefly(
    hang_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Database.from_settings(make_settings(hang_database))
    cache = CatalogCache(database, ttl_seconds=60, wait_after_write_seconds=0.3)
    try:
        first = cache.get()
        release = threading.Event()
        real = repository.catalog_version

        def hung(session: object) -> object:
            release.wait(10)
            return real(session)  # type: ignore[arg-type]

        monkeypatch.setattr(repository, "catalog_version", hung)
        cache.invalidate()  # as a write through this replica does
        assert cache.get_nowait() is None  # the dependency hands this one to a worker thread
        snapshot, waited = timed(cache.get)
        assert snapshot is first
        assert 0.25 < waited < 1.0  # type: ignore[operator]
        # the refresh is still running: nobody else waits at all
        _, waited = timed(cache.get)
        assert waited < 1.0  # type: ignore[operator]
        release.set()
    finally:
        database.engine.dispose()


# ---- a warm replica while the database hangs -------------------------------------------------


def test_a_warm_replica_through_a_hang(replica: TestClient, proxy: FreezableProxy) -> None:
    assert replica.get("/v1/capacity", params=CAPACITY).status_code == 200
    assert replica.get("/readyz").status_code == 200
    proxy.freeze()
    time.sleep(TTL * 2)

    # capacity answers come from the snapshot held, never behind the hung refresh
    for _ in range(10):
        response, waited = timed(lambda: replica.get("/v1/capacity", params=CAPACITY))
        assert response.status_code == 200  # type: ignore[attr-defined]
        assert waited < 0.5
    health, waited = timed(lambda: replica.get("/healthz"))
    assert health.status_code == 200  # type: ignore[attr-defined]
    assert waited < 0.5

    # readiness answers within its own timeout (1 s), and says 503
    ready, waited = timed(lambda: replica.get("/readyz"))
    problem(ready, 503)  # type: ignore[arg-type]
    assert waited < 1.5
    stale_ok = replica.get("/readyz", params={"allow_stale": "true"})
    assert stale_ok.status_code == 200

    # writes fail fast, with Retry-After
    gpu = {"slug": "hang-gpu", "name": "Hang GPU", "memory_bytes": 48 * GiB}
    for _ in range(3):
        write, waited = timed(lambda: replica.post("/v1/gpus", json=gpu, headers=ADMIN))
        problem(write, 503)  # type: ignore[arg-type]
        assert write.headers["retry-after"]  # type: ignore[attr-defined]
        assert waited < 2.5
    assert "kvplan_catalog_stale 1.0" in replica.get("/metrics").text

    # catalog reads come from the snapshot, marked stale, at once
    for path in ("/v1/gpus", "/v1/gpus/h100-sxm-80gb", "/v1/models", "/v1/gpus?format=csv"):
        read, waited = timed(lambda path=path: replica.get(path))
        assert read.status_code == 200, path  # type: ignore[attr-defined]
        assert read.headers["kvplan-catalog-stale"] == "true"  # type: ignore[attr-defined]
        assert waited < 0.5

    # the database comes back: ready, writable and fresh again without a restart
    proxy.thaw()
    deadline = time.monotonic() + 5
    while replica.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "not ready within 5 s of the database returning"
        time.sleep(0.1)
    created = replica.post("/v1/gpus", json=gpu, headers=ADMIN)
    while created.status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
        created = replica.post("/v1/gpus", json=gpu, headers=ADMIN)
    assert created.status_code == 201, created.text
    sized = replica.get("/v1/capacity", params={**CAPACITY, "gpu": "hang-gpu"})
    assert sized.status_code == 200
    assert "kvplan_catalog_stale 0.0" in replica.get("/metrics").text
    replica.delete("/v1/gpus/hang-gpu", headers={**ADMIN, "If-Match": '"1"'})


def test_a_cold_replica_answers_503_in_time_while_the_database_hangs(
    cold_replica: TestClient, proxy: FreezableProxy
) -> None:
    replica = cold_replica
    proxy.freeze()
    ready, waited = timed(lambda: replica.get("/readyz"))
    problem(ready, 503)  # type: ignore[arg-type]
    assert waited < 1.5
    # nothing to serve from: 503 once the connection attempt times out (connect_timeout, 2 s)
    response, waited = timed(lambda: replica.get("/v1/capacity", params=CAPACITY))
    problem(response, 503)  # type: ignore[arg-type]
    assert waited < 4
    assert replica.get("/healthz").status_code == 200


def test_liveness_needs_no_worker_thread(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """/healthz answers even when every worker thread is taken (they are all stuck on a hung
    database, say): it is a coroutine that touches nothing."""

    async def no_thread(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("a worker thread was used")

    with TestClient(app, raise_server_exceptions=False) as client:
        monkeypatch.setattr(anyio.to_thread, "run_sync", no_thread)
        assert client.get("/healthz").json() == {"status": "ok"}
        # a sync endpoint does need one: the patch is in force
        assert client.get("/v1/gpus").status_code == 500
