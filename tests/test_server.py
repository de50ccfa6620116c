"""`kvplan serve`'s production settings (service/kit/server.py), and the access log."""

from __future__ import annotations

import importlib.util
import logging
import socket
import time
from pathlib import Path

import pytest
import uvicorn
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import sessionmaker
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.app import create_app
from service.kit.db import Database
from service.kit.deadlines import AutoDeadlines, ServerConfig
from service.kit.server import APP, listening_socket, options
from service.kit.settings import Settings
from tests.catalog.test_stale_reads import cut
from tests.conftest import make_settings
from tests.helpers import problem

CHART = Path(__file__).resolve().parents[1] / "helm" / "kvplan" / "values.yaml"
QUESTION = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}


def test_httptools_and_uvloop_are_installed_so_auto_picks_them() -> None:
    # uvicorn[standard]: `auto` is httptools and uvloop where they import
    # (uvicorn/protocols/http/auto.py, uvicorn/loops/auto.py); kvplan's `auto` is httptools
    # with the request deadlines (service/kit/deadlines.py)
    assert options(Settings())["loop"] == "auto"
    assert importlib.util.find_spec("uvloop") is not None
    assert AutoHTTPProtocol is HttpToolsProtocol
    assert issubclass(AutoDeadlines, HttpToolsProtocol)
    config = ServerConfig(APP, factory=True, **options(Settings()))
    config.load()
    assert config.http_protocol_class is AutoDeadlines
    assert (config.timeout_request_head, config.timeout_request_body) == (10.0, 30.0)


def test_the_defaults_are_production_ones() -> None:
    got = options(Settings())
    assert got["workers"] == 1
    assert got["access_log"] is False  # middleware.AccessLog writes errors and a sample
    assert got["timeout_keep_alive"] == 5
    assert got["limit_concurrency"] == 1024
    assert got["h11_max_incomplete_event_size"] == 16384
    assert got["server_header"] is False
    assert options(Settings(workers=3))["workers"] == 3
    assert options(Settings(workers=3), workers=2)["workers"] == 2  # --workers wins
    assert options(Settings(limit_concurrency=0))["limit_concurrency"] is None


def test_shutdown_finishes_within_the_charts_grace_period() -> None:
    values = yaml.safe_load(CHART.read_text())
    budget = values["terminationGracePeriodSeconds"] - values["preStopSleepSeconds"]
    assert Settings().timeout_graceful_shutdown_seconds < budget


def test_connections_the_shared_socket_accepts_have_tcp_nodelay() -> None:
    # Several workers share one socket; accepted connections inherit TCP_NODELAY from it
    # (Linux), so no answer waits for the client's delayed ACK, whatever the loop.
    config = uvicorn.Config("service.app:create_app", host="127.0.0.1", port=0, workers=2)
    with listening_socket(config) as listening:
        assert listening.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        listening.listen()  # as each worker's server does
        with socket.create_connection(listening.getsockname()[:2]):
            accepted, _ = listening.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


# ---- the access log ----------------------------------------------------------------------------


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kvplan.access"]


def test_errors_are_always_logged_and_successes_not_by_default(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kvplan.access")
    assert client.get("/v1/capacity", params=QUESTION).status_code == 200
    assert _lines(caplog) == []
    problem(client.get("/v1/capacity", params={**QUESTION, "model": "nope", "api_key": "s3"}), 404)
    (line,) = _lines(caplog)
    assert line.levelno == logging.WARNING
    message = line.getMessage()
    assert '"GET /v1/capacity?model=nope' in message
    assert "404" in message
    assert "s3" not in message  # the read key is masked
    assert "api_key=***" in message


def test_a_sample_of_successes_is_logged(
    app: FastAPI, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kvplan.access")
    logged = create_app(make_settings(database_url, access_log_sample=1.0), app.state.db)
    with TestClient(logged) as client:
        client.get("/v1/capacity", params=QUESTION)
        client.get("/v1/capacity", params=QUESTION)  # the hot path's answers too
    assert [r.levelno for r in _lines(caplog)] == [logging.INFO, logging.INFO]
    assert all(" 200 " in r.getMessage() for r in _lines(caplog))


# ---- ready only with the catalog loaded --------------------------------------------------------


@pytest.fixture
def replica(engine: Engine, connection: Connection, database_url: str) -> FastAPI:
    """An app that trusts its catalog for a while (it loads it at start), on this test's
    transaction."""
    database = Database(engine)
    database.sessions = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    return create_app(make_settings(database_url, catalog_ttl_seconds=60), database)


def test_a_replica_loads_its_catalog_before_it_takes_requests(replica: FastAPI) -> None:
    with TestClient(replica) as client:
        assert replica.state.catalog.loaded  # before the first request
        assert client.get("/readyz").status_code == 200


def test_a_replica_whose_load_failed_at_start_is_not_ready_until_it_has_one(
    replica: FastAPI,
) -> None:
    real = cut(replica.state.db)
    with TestClient(replica) as client:
        assert not replica.state.catalog.loaded
        replica.state.db.sessions = real  # the database is back; the catalog is not loaded
        replica.state.db.health.answered()
        first = client.get("/readyz")
        if first.status_code == 503:  # the load it started may already have finished
            assert "catalog" in first.json()["detail"]
        for _ in range(100):
            if client.get("/readyz").status_code == 200:
                break
            time.sleep(0.05)
        assert replica.state.catalog.loaded
        assert client.get("/readyz").status_code == 200
