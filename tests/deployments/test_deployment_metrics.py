"""/metrics exports one gauge per deployment profile, read here with Prometheus's text parser.

Numbers: worked example A at 8,192 tokens (tests/deployments/test_deployments_api.py): 54
sequences per replica, 28,006 blocks x 16 = 448,096 tokens.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.kit.db import Database
from tests.conftest import ADMIN, make_settings
from tests.deployments.test_deployments_api import PROFILE, create


def scrape(client: TestClient) -> dict[str, Any]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {family.name: family for family in text_string_to_metric_families(response.text)}


def samples(families: dict[str, Any], name: str) -> dict[str, Sample]:
    return {sample.labels["deployment"]: sample for sample in families[name].samples}


def test_each_profile_is_a_gauge_with_its_labels(client: TestClient) -> None:
    create(client)
    families = scrape(client)
    for name in ("kvplan_deployment_max_num_seqs", "kvplan_deployment_kv_cache_tokens"):
        assert families[name].type == "gauge"
    seqs = samples(families, "kvplan_deployment_max_num_seqs")["llama-8b-h100"]
    assert seqs.value == 54
    assert seqs.labels == {
        "deployment": "llama-8b-h100",
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "workload_namespace": PROFILE["namespace"],
        "workload": PROFILE["workload"],
    }
    tokens = samples(families, "kvplan_deployment_kv_cache_tokens")["llama-8b-h100"]
    assert tokens.value == 448_096
    (errors,) = families["kvplan_deployment_errors"].samples
    assert errors.value == 0


def test_the_gauge_equals_the_capacity_endpoint(client: TestClient) -> None:
    create(client, name="qwen-l40s", model="qwen3-8b", gpu="l40s", kv_pool_bytes=None)
    answer = client.get("/v1/deployments/qwen-l40s/capacity").json()
    families = scrape(client)
    assert (
        samples(families, "kvplan_deployment_max_num_seqs")["qwen-l40s"].value
        == (answer["max_num_seqs"])
    )
    assert (
        samples(families, "kvplan_deployment_kv_cache_tokens")["qwen-l40s"].value
        == (answer["kv_cache_tokens"])
    )


def test_a_profile_that_cannot_be_sized_has_no_sample_and_is_counted(client: TestClient) -> None:
    create(client)
    # about 141 GB of bf16 weights on a 24 GB L4: no pool at all
    create(client, name="too-big", model="llama-3.1-70b", gpu="l4", kv_pool_bytes=None)
    families = scrape(client)
    assert set(samples(families, "kvplan_deployment_max_num_seqs")) == {"llama-8b-h100"}
    assert set(samples(families, "kvplan_deployment_kv_cache_tokens")) == {"llama-8b-h100"}
    (errors,) = families["kvplan_deployment_errors"].samples
    assert errors.value == 1


def test_a_change_shows_at_the_next_scrape(client: TestClient) -> None:
    create(client)
    assert samples(scrape(client), "kvplan_deployment_max_num_seqs")["llama-8b-h100"].value == 54
    client.patch(
        "/v1/deployments/llama-8b-h100",
        json={"max_model_len": 4096},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    # 4,096 tokens = 256 blocks: (28,006 - 1) // 256 = 109
    assert samples(scrape(client), "kvplan_deployment_max_num_seqs")["llama-8b-h100"].value == 109
    client.delete("/v1/deployments/llama-8b-h100", headers={**ADMIN, "If-Match": '"2"'})
    assert samples(scrape(client), "kvplan_deployment_max_num_seqs") == {}


# ---- the database away -------------------------------------------------------------------------

GONE = "postgresql+psycopg://postgres@127.0.0.1:1/kvplan"  # nothing listens on port 1


def test_the_last_profiles_stay_exported_while_the_database_is_away(
    app: FastAPI, client: TestClient
) -> None:
    create(client)
    assert "llama-8b-h100" in samples(scrape(client), "kvplan_deployment_max_num_seqs")
    database: Database = app.state.db
    gone = create_engine(GONE)
    real_sessions = database.sessions
    database.sessions = sessionmaker(gone, expire_on_commit=False)
    try:
        during = scrape(client)
        assert samples(during, "kvplan_deployment_max_num_seqs")["llama-8b-h100"].value == 54
    finally:
        database.sessions = real_sessions
        gone.dispose()


def test_metrics_answer_without_any_database(database_url: str) -> None:
    app = create_app(make_settings(GONE, db_connect_timeout_seconds=2))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            families = scrape(client)
            assert families["kvplan_deployment_max_num_seqs"].samples == []
    finally:
        app.state.db.engine.dispose()
