"""A deployment profile pointing at a calibration: its answers and gauges are the engine's own.

The log is real: vLLM 0.19.0 serving Llama-3.1-8B-Instruct on one H100 80GB at
max_model_len 8192 and utilization 0.95 (engine_logs.json, the jgchn/llm-d-planner
accuracy/results/v0.19.0 entry, tests/engine_logs/test_calibrations_api.py). It prints
"GPU KV cache size: 476,016 tokens" (29,751 blocks of 16) and "Maximum concurrency for 8,192
tokens per request: 58.11x"; whole sequences: (29,751 - 1) // 512 = 58 (the null block is never
handed out, vllm/v1/core/block_pool.py).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from tests.conftest import ADMIN
from tests.deployments.test_deployment_metrics import samples, scrape
from tests.engine_logs.calibration import entry
from tests.helpers import problem

LLAMA = entry(
    "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
)
# The deployment the log measured, as a profile describes it.
PROFILE: dict[str, Any] = {
    "name": "llama-8b-instruct-h100",
    "model": "llama-3.1-8b-instruct",
    "gpu": "h100-sxm-80gb",
    "engine": "vllm",
    "engine_version": "0.19.0",
    "max_model_len": 8192,
    "gpu_memory_utilization": 0.95,
    "peak_concurrency": 200,
    "namespace": "inference",
    "workload": "llama-8b-vllm",
}
TOKENS, SEQUENCES = 476_016, 58


def calibrate(client: TestClient) -> int:
    response = client.post(
        "/v1/calibrations",
        content=LLAMA["quote"],
        headers={**ADMIN, "content-type": "text/plain"},
    )
    assert response.status_code == 201, response.text
    calibration_id: int = response.json()["id"]
    return calibration_id


def create(client: TestClient, **changes: Any) -> dict[str, Any]:
    response = client.post("/v1/deployments", json={**PROFILE, **changes}, headers=ADMIN)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def capacity(client: TestClient, name: str = PROFILE["name"]) -> dict[str, Any]:
    response = client.get(f"/v1/deployments/{name}/capacity")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def if_match(revision: int) -> dict[str, str]:
    return {**ADMIN, "If-Match": f'"{revision}"'}


def test_a_profile_pointing_at_a_calibration_answers_the_engines_own_figures(
    client: TestClient,
) -> None:
    calibration_id = calibrate(client)
    body = create(client, calibration_id=calibration_id)
    assert body["calibration_id"] == calibration_id
    assert client.get(f"/v1/deployments/{PROFILE['name']}").json()["calibration_id"] == (
        calibration_id
    )
    answer = capacity(client)
    assert answer["calibrated_from"]["calibration_id"] == calibration_id
    assert answer["kv_cache_tokens"] == TOKENS
    assert round(answer["max_concurrency"], 2) == 58.11
    assert answer["max_num_seqs"] == SEQUENCES
    # 200 planned sequences at 58 a replica
    assert answer["replicas_for_peak_concurrency"] == math.ceil(200 / SEQUENCES) == 4


def test_the_prometheus_answer_and_the_gauges_say_which_calibration(client: TestClient) -> None:
    calibration_id = calibrate(client)
    create(client, calibration_id=calibration_id)
    text_answer = client.get(
        f"/v1/deployments/{PROFILE['name']}/capacity", params={"format": "prometheus"}
    ).text
    families = {f.name: f for f in text_string_to_metric_families(text_answer)}
    (tokens,) = families["kvplan_capacity_kv_cache_tokens"].samples
    assert tokens.value == TOKENS
    (used,) = families["kvplan_capacity_calibrated"].samples
    assert (used.value, used.labels["calibration_id"]) == (1, str(calibration_id))

    scraped = scrape(client)
    name = PROFILE["name"]
    assert samples(scraped, "kvplan_deployment_max_num_seqs")[name].value == SEQUENCES
    assert samples(scraped, "kvplan_deployment_kv_cache_tokens")[name].value == TOKENS
    calibrated = samples(scraped, "kvplan_deployment_calibrated")[name]
    assert calibrated.value == 1
    assert calibrated.labels["calibration_id"] == str(calibration_id)


def test_an_uncalibrated_profile_has_no_calibrated_sample(client: TestClient) -> None:
    create(client, name="no-log", engine_version="0.18.0")  # no calibration has this key
    assert capacity(client, "no-log")["calibrated_from"] is None
    assert "no-log" not in samples(scrape(client), "kvplan_deployment_calibrated")


def test_a_calibration_that_does_not_exist_is_a_422_naming_calibration_id(
    client: TestClient,
) -> None:
    for missing in (999_999, 2**31 - 1):
        response = client.post(
            "/v1/deployments", json={**PROFILE, "calibration_id": missing}, headers=ADMIN
        )
        assert problem(response, 422)["field"] == "calibration_id"
    # past the id column's range, or not a positive id: the schema refuses it
    for bad in (2**31, 0, -1, "seven", 1.5):
        response = client.post(
            "/v1/deployments", json={**PROFILE, "calibration_id": bad}, headers=ADMIN
        )
        assert "calibration_id" in str(problem(response, 422)["field"])
    create(client)
    response = client.patch(
        f"/v1/deployments/{PROFILE['name']}", json={"calibration_id": 999_999}, headers=if_match(1)
    )
    assert problem(response, 422)["field"] == "calibration_id"


def test_a_calibration_of_another_deployment_is_a_422_naming_calibration_id(
    client: TestClient,
) -> None:
    calibration_id = calibrate(client)
    # the log ran one GPU per replica at vLLM 0.19.0 with bf16 KV: each change is another key
    for other in (
        {"tensor_parallel_size": 2},
        {"engine_version": "0.18.0"},
        {"kv_cache_dtype": "fp8"},
        {"model": "llama-3.1-8b"},
    ):
        response = client.post(
            "/v1/deployments",
            json={**PROFILE, **other, "calibration_id": calibration_id},
            headers=ADMIN,
        )
        body = problem(response, 422)
        assert body["field"] == "calibration_id", other
        assert f"calibration {calibration_id} measured another deployment" in body["detail"]
    # the same for a change to a profile that points at it
    create(client, calibration_id=calibration_id)
    response = client.patch(
        f"/v1/deployments/{PROFILE['name']}",
        json={"tensor_parallel_size": 2},
        headers=if_match(1),
    )
    assert problem(response, 422)["field"] == "calibration_id"
    assert client.get(f"/v1/deployments/{PROFILE['name']}").json()["revision"] == 1


def test_a_profile_cannot_give_its_own_pool_and_point_at_a_calibration(
    client: TestClient,
) -> None:
    calibration_id = calibrate(client)
    response = client.post(
        "/v1/deployments",
        json={**PROFILE, "calibration_id": calibration_id, "kv_pool_bytes": 40 << 30},
        headers=ADMIN,
    )
    assert problem(response, 422)["field"] == "calibration_id"


def test_the_link_is_set_and_cleared_by_patch_with_the_usual_etags(client: TestClient) -> None:
    calibration_id = calibrate(client)
    create(client, engine_version="0.18.0")  # a release no log measured: kvplan's estimate
    path = f"/v1/deployments/{PROFILE['name']}"
    estimate = capacity(client)
    assert estimate["calibrated_from"] is None
    # pointing it at the 0.19.0 log needs the profile to be that deployment, and If-Match
    problem(client.patch(path, json={"calibration_id": calibration_id}, headers=ADMIN), 428)
    changed = client.patch(
        path,
        json={"calibration_id": calibration_id, "engine_version": "0.19.0"},
        headers=if_match(1),
    )
    assert changed.status_code == 200, changed.text
    assert changed.headers["etag"] == '"2"'
    assert changed.json()["calibration_id"] == calibration_id
    assert capacity(client)["kv_cache_tokens"] == TOKENS
    problem(client.patch(path, json={"calibration_id": None}, headers=if_match(1)), 412)
    cleared = client.patch(path, json={"calibration_id": None}, headers=if_match(2))
    assert cleared.status_code == 200, cleared.text
    assert (cleared.json()["calibration_id"], cleared.headers["etag"]) == (None, '"3"')
    # unpinned, the profile is still this calibration's key: GET /v1/capacity's rule applies
    assert capacity(client)["calibrated_from"]["calibration_id"] == calibration_id
    # PUT sets it as any field, and a PUT that leaves it out clears it (defaults)
    body = {k: v for k, v in PROFILE.items() if k != "name"}
    put = client.put(path, json={**body, "calibration_id": calibration_id}, headers=if_match(3))
    assert (put.status_code, put.json()["calibration_id"]) == (200, calibration_id)
    put = client.put(path, json=body, headers=if_match(4))
    assert (put.status_code, put.json()["calibration_id"]) == (200, None)


def test_deleting_a_calibration_a_profile_points_at_is_409_naming_the_profiles(
    client: TestClient,
) -> None:
    calibration_id = calibrate(client)
    create(client, calibration_id=calibration_id)
    create(client, name="llama-8b-canary", calibration_id=calibration_id, replicas=1)
    path = f"/v1/calibrations/{calibration_id}"
    body = problem(client.delete(path, headers=if_match(1)), 409)
    assert body["field"] == "calibration_id"
    assert body["deployments"] == ["llama-8b-canary", PROFILE["name"]]  # in name order
    assert "llama-8b-canary" in body["detail"]
    # nothing changed: the calibration is there, the profiles still answer with it
    assert client.get(path).status_code == 200
    assert capacity(client)["calibrated_from"]["calibration_id"] == calibration_id
    # once no profile points at it, the delete goes through, and questions with its key go back
    # to kvplan's estimate
    for name in ("llama-8b-canary", PROFILE["name"]):
        unpinned = client.patch(
            f"/v1/deployments/{name}", json={"calibration_id": None}, headers=if_match(1)
        )
        assert unpinned.status_code == 200, unpinned.text
    assert client.delete(path, headers=if_match(1)).status_code == 204
    assert capacity(client)["calibrated_from"] is None
    assert PROFILE["name"] not in samples(scrape(client), "kvplan_deployment_calibrated")


def test_deleting_the_profile_frees_the_calibration(client: TestClient) -> None:
    calibration_id = calibrate(client)
    create(client, calibration_id=calibration_id)
    assert (
        client.delete(f"/v1/deployments/{PROFILE['name']}", headers=if_match(1)).status_code == 204
    )
    response = client.delete(f"/v1/calibrations/{calibration_id}", headers=if_match(1))
    assert response.status_code == 204


def test_the_database_itself_refuses_to_delete_a_calibration_in_use(
    client: TestClient, connection: Connection
) -> None:
    # the foreign key (RESTRICT, migration 0005) holds where the service's check is raced: a
    # profile pointed at the calibration between the check and the delete
    calibration_id = calibrate(client)
    create(client, calibration_id=calibration_id)
    with pytest.raises(IntegrityError), connection.begin_nested():
        connection.execute(text("DELETE FROM calibration WHERE id = :id"), {"id": calibration_id})
