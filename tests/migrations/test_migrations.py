"""Alembic migrations on both supported databases: up, down, up again, and no drift.

Each test gets a fresh database (PostgreSQL on the test server, or an SQLite file), because the
session's shared database is already at head and seeded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Engine, MetaData, Table, create_engine, inspect, select
from sqlmodel import SQLModel

from service.app import create_app
from service.catalog.models import CatalogState
from service.catalog.seed import load_seed, seed_catalog
from service.catalog.snapshot import calibration_entry
from service.engine_logs.models import CalibrationRow
from service.kit.db import Database
from service.kit.migrate import (
    alembic_config,
    context_options,
    current_revision,
    downgrade,
    head_revision,
    upgrade,
)
from tests.conftest import ADMIN, create_database, drop_database, make_settings
from tests.engine_logs.calibration import entry
from tests.helpers import problem

CATALOG_TABLES = {"catalog_state", "catalog_tombstone", "gpu", "model"}
# 0003 adds the deployment profiles (service/deployments/models.py), 0004 the calibrations
# (service/engine_logs/models.py); 0005 points a profile at a calibration; 0006 keys a
# calibration by its weights' format too; 0007 pins the profiles' engine releases (no table);
# 0008 gives a GPU its price's source, its FP4 peak and its link figure; 0009 records
# whether a catalog GPU has bfloat16; 0010 adds the speed calibrations
# (service/speed_results/models.py)
TABLES = CATALOG_TABLES | {"deployment", "calibration", "speed_calibration"}
HEAD = "0010"


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a database with no tables at all."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'kvplan.db'}"
        return
    url = create_database("kvplan_migrations")
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def fresh_engine(empty_database: str) -> Iterator[Engine]:
    engine = create_engine(empty_database)
    yield engine
    engine.dispose()


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def drift(engine: Engine) -> list[Any]:
    """What `alembic revision --autogenerate` would write: the models against the database."""
    with engine.connect() as conn:
        options = {"target_metadata": SQLModel.metadata, **context_options(conn.dialect.name)}
        context = MigrationContext.configure(conn, opts=options)
        return list(compare_metadata(context, SQLModel.metadata))


def test_the_models_define_exactly_the_migrated_tables() -> None:
    assert set(SQLModel.metadata.tables) == TABLES


def test_upgrade_downgrade_upgrade(empty_database: str, fresh_engine: Engine) -> None:
    assert tables(fresh_engine) == set()
    assert current_revision(fresh_engine) is None

    upgrade(empty_database)
    assert tables(fresh_engine) == TABLES | {"alembic_version"}
    assert current_revision(fresh_engine) == head_revision() == HEAD
    # the one version row every replica polls exists from the start, at version 0
    with fresh_engine.connect() as conn:
        assert conn.execute(select(CatalogState.version)).scalars().all() == [0]

    downgrade(empty_database, "base")
    assert tables(fresh_engine) == {"alembic_version"}  # Alembic keeps its (now empty) table
    assert current_revision(fresh_engine) is None

    upgrade(empty_database)
    assert tables(fresh_engine) == TABLES | {"alembic_version"}
    assert current_revision(fresh_engine) == HEAD


def test_each_revision_downgrades_one_step(empty_database: str, fresh_engine: Engine) -> None:
    upgrade(empty_database)
    downgrade(empty_database, "0009")
    assert current_revision(fresh_engine) == "0009"
    assert "speed_calibration" not in tables(fresh_engine)
    downgrade(empty_database, "0007")
    assert current_revision(fresh_engine) == "0007"
    columns = {column["name"] for column in inspect(fresh_engine).get_columns("gpu")}
    assert not columns & {"price_source", "dense_fp4_tflops", "interconnect_gb_s"}
    downgrade(empty_database, "0005")
    assert current_revision(fresh_engine) == "0005"
    columns = {column["name"] for column in inspect(fresh_engine).get_columns("calibration")}
    assert "weight_format" not in columns
    downgrade(empty_database, "0004")
    assert current_revision(fresh_engine) == "0004"
    columns = {column["name"] for column in inspect(fresh_engine).get_columns("deployment")}
    assert "calibration_id" not in columns
    assert tables(fresh_engine) == (TABLES - {"speed_calibration"}) | {"alembic_version"}
    downgrade(empty_database, "0003")
    assert current_revision(fresh_engine) == "0003"
    assert tables(fresh_engine) == CATALOG_TABLES | {"deployment", "alembic_version"}
    downgrade(empty_database, "0002")
    assert current_revision(fresh_engine) == "0002"
    assert tables(fresh_engine) == CATALOG_TABLES | {"alembic_version"}
    downgrade(empty_database, "0001")
    assert current_revision(fresh_engine) == "0001"
    assert tables(fresh_engine) == (CATALOG_TABLES - {"catalog_tombstone"}) | {"alembic_version"}
    upgrade(empty_database)
    assert current_revision(fresh_engine) == HEAD


def alembic_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def test_the_revisions_read_without_alembic_are_alembics_own(
    empty_database: str, fresh_engine: Engine
) -> None:
    # /readyz reads both without importing Alembic (service/kit/migrate.py); at every step of the
    # schema's history they must be what Alembic itself reads
    assert (
        head_revision()
        == ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    )
    assert current_revision(fresh_engine) is None is alembic_revision(fresh_engine)
    for revision in (
        "0001",
        "0002",
        "0003",
        "0004",
        "0005",
        "0006",
        "0007",
        "0008",
        "0009",
        "0010",
    ):
        upgrade(empty_database, revision)
        assert current_revision(fresh_engine) == revision == alembic_revision(fresh_engine)
    downgrade(empty_database, "base")  # the version table stays, empty
    assert current_revision(fresh_engine) is None is alembic_revision(fresh_engine)


def test_the_migrated_schema_matches_the_models(empty_database: str, fresh_engine: Engine) -> None:
    upgrade(empty_database)
    assert drift(fresh_engine) == []


def test_autogenerate_would_notice_a_missing_migration(fresh_engine: Engine) -> None:
    # guards the drift test itself: with no migration run, every table is reported missing
    added = {diff[1].name for diff in drift(fresh_engine) if diff[0] == "add_table"}
    assert added == TABLES


def test_a_migrated_database_can_be_seeded_and_read(
    empty_database: str, fresh_engine: Engine
) -> None:
    upgrade(empty_database)
    with Database(fresh_engine).session() as session:
        report = seed_catalog(session)
        session.commit()
    assert len(report.added) == len(load_seed("gpus.json")) + len(load_seed("models.json"))
    app = create_app(make_settings(empty_database), Database(fresh_engine))
    with TestClient(app) as client:
        body = client.get("/v1/gpus/h100-sxm-80gb").json()
        assert body["memory_bytes"] == 85_051_089_879
        # times are UTC on every backend (SQLite stores no offset)
        assert body["created_at"].endswith("Z")
        created = client.post(
            "/v1/gpus",
            json={"slug": "test-gpu", "name": "Test", "memory_bytes": 1 << 34},
            headers=ADMIN,
        )
        assert created.status_code == 201
        patched = client.patch(
            "/v1/gpus/test-gpu", json={"tdp_w": 300}, headers={**ADMIN, "If-Match": '"1"'}
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["updated_at"].endswith("Z")
        assert patched.json()["updated_at"] >= created.json()["updated_at"]
        assert client.get("/v1/gpus/test-gpu").json() == patched.json()


# ---- readiness follows the schema -------------------------------------------------------------


def test_readyz_is_503_until_the_database_is_migrated(
    empty_database: str, fresh_engine: Engine
) -> None:
    app = create_app(make_settings(empty_database), Database(fresh_engine))
    with TestClient(app) as client:
        response = client.get("/readyz")
        body = problem(response, 503)
        assert response.headers["retry-after"] == "5"
        assert body["type"] == "/problems/service-unavailable"
        assert "kvplan migrate" in body["detail"]
        assert client.get("/healthz").status_code == 200  # alive, just not ready

        upgrade(empty_database)
        response = client.get("/readyz")
        assert response.status_code == 200
        assert response.json() == {"status": "ready", "revision": HEAD}

        downgrade(empty_database, "0001")
        # a schema behind the code is not ready either
        assert client.get("/readyz").status_code == 503


def test_catalog_reads_on_an_unmigrated_database_are_503_not_500(
    empty_database: str, fresh_engine: Engine
) -> None:
    app = create_app(make_settings(empty_database), Database(fresh_engine))
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ("/v1/gpus", "/v1/models/llama-3.1-8b", "/v1/capacity?model=x&gpu=y"):
            assert "not migrated" in problem(client.get(path), 503)["detail"], path
        write = client.post(
            "/v1/gpus", json={"slug": "g", "name": "G", "memory_bytes": 1}, headers=ADMIN
        )
        assert write.status_code == 503


# ---- 0006: the weights' format in a calibration's key ---------------------------------------

QWEN_RUNS = "github:sapir-pirski/h100-fp8-quantization-benchmark results/q2/"
LLAMA_V019 = (
    "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
)


def _seeded_client(url: str, engine: Engine) -> TestClient:
    upgrade(url)
    with Database(engine).session() as session:
        seed_catalog(session)
        session.commit()
    return TestClient(create_app(make_settings(url), Database(engine)))


def _calibrate(client: TestClient, source: str, **hints: str) -> int:
    response = client.post(
        "/v1/calibrations",
        content=entry(source)["quote"],
        headers={**ADMIN, "content-type": "text/plain"},
        params=hints,
    )
    assert response.status_code == 201, response.text
    calibration_id: int = response.json()["id"]
    return calibration_id


def _digest_without_format(row: Any) -> str:
    # catalog.snapshot.CalibrationKey.digest as it was at 0005: sha256 of the key's canonical
    # JSON, before the key had a weight format
    key = {name: getattr(row, name) for name in (*KEY_COLUMNS, "enforce_eager")}
    key["enforce_eager"] = bool(key["enforce_eager"])
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


KEY_COLUMNS = (
    "model",
    "gpu",
    "engine",
    "engine_version",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "kv_cache_dtype",
    "max_num_batched_tokens",
)


def test_0006_gives_older_calibrations_the_format_they_ran(
    empty_database: str, fresh_engine: Engine
) -> None:
    with _seeded_client(empty_database, fresh_engine) as client:
        llama = _calibrate(client, LLAMA_V019)  # no quantization flag; the catalog's bf16
        fp8 = _calibrate(
            client, QWEN_RUNS + "vllm_fp8.log", model="qwen2.5-7b", gpu="h100-sxm-80gb"
        )  # 'quantization': 'fp8' in its non-default args
    downgrade(empty_database, "0005")
    calibration = Table("calibration", MetaData(), autoload_with=fresh_engine)
    with fresh_engine.connect() as conn:
        rows = conn.execute(select(calibration)).all()
    assert {row.key_digest for row in rows} == {_digest_without_format(row) for row in rows}

    upgrade(empty_database)
    with Database(fresh_engine).session() as session:
        stored = {row.id: row for row in session.scalars(select(CalibrationRow)).all()}
    assert {i: row.weight_format for i, row in stored.items()} == {llama: "bfloat16", fp8: "fp8"}
    for row in stored.values():  # the digest the running service works for the same key
        assert row.key_digest == calibration_entry(row).key.digest
    with TestClient(create_app(make_settings(empty_database), Database(fresh_engine))) as client:
        again = client.post(
            "/v1/calibrations",
            content=entry(QWEN_RUNS + "vllm_fp8.log")["quote"],
            headers={**ADMIN, "content-type": "text/plain"},
            params={"model": "qwen2.5-7b", "gpu": "h100-sxm-80gb"},
        )
        assert problem(again, 409)["calibration_id"] == fp8


def test_downgrading_0006_refuses_two_calibrations_that_differ_only_in_format(
    empty_database: str, fresh_engine: Engine
) -> None:
    hints = {"model": "qwen2.5-7b", "gpu": "h100-sxm-80gb"}
    with _seeded_client(empty_database, fresh_engine) as client:
        bf16 = _calibrate(client, QWEN_RUNS + "vllm_bf16.log", **hints)
        fp8 = _calibrate(client, QWEN_RUNS + "vllm_fp8.log", **hints)
    downgrade(empty_database, "0006")
    with pytest.raises(RuntimeError, match=f"calibrations {bf16}, {fp8} differ only"):
        downgrade(empty_database, "0005")
    assert current_revision(fresh_engine) == "0006"


def test_0007_pins_the_profiles_stored_without_a_release(
    empty_database: str, fresh_engine: Engine
) -> None:
    # Profiles as kvplan stored them before 0007: the sizing fields they set in `settings`,
    # engine_version left out where the caller gave none.
    upgrade(empty_database, "0006")
    deployment = Table("deployment", MetaData(), autoload_with=fresh_engine)
    stored = {
        "vllm-unpinned": {"max_model_len": 8192},
        "sglang-unpinned": {"engine": "sglang", "max_model_len": 8192},
        "vllm-named": {"engine_version": "0.10.1"},
    }
    with fresh_engine.begin() as conn:
        for name, settings in stored.items():
            conn.execute(
                deployment.insert().values(
                    name=name,
                    model="llama-3.1-8b",
                    gpu="h100-sxm-80gb",
                    settings=settings,
                    revision=1,
                    created_at=datetime.now(UTC),
                    updated_at=datetime.now(UTC),
                )
            )
    upgrade(empty_database)
    with fresh_engine.connect() as conn:
        after = {row.name: row.settings for row in conn.execute(select(deployment))}
    # The newest releases modelled when 0007 was written (its NEWEST_RELEASES, copied from
    # service/sizing/engines/calibration.py LATEST_VLLM_VERSION and LATEST_SGLANG_VERSION);
    # a release the profile named is kept.
    assert after == {
        "vllm-unpinned": {"max_model_len": 8192, "engine_version": "0.33.0"},
        "sglang-unpinned": {"engine": "sglang", "max_model_len": 8192, "engine_version": "0.5.23"},
        "vllm-named": {"engine_version": "0.10.1"},
    }
    with _seeded_client(empty_database, fresh_engine) as client:
        read = client.get("/v1/deployments/vllm-unpinned")
        assert read.status_code == 200, read.text
        assert read.json()["engine_version"] == "0.33.0"
    downgrade(empty_database, "0006")  # nothing to undo: the pinned release stays readable
    assert current_revision(fresh_engine) == "0006"
