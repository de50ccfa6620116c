"""A profile stored without `engine_version` keeps the release it was sized as.

Issue 17 item 6: a profile that named no release was sized by whatever release kvplan modelled
newest, so upgrading kvplan moved the `max_num_seqs` an autoscaler reads. A write now stores the
newest modelled release (`service.sizing.engines.releases.newest_release`); a later kvplan that
models a
newer one keeps sizing the profile as stored and warns with both answers. "A later kvplan" is
simulated by storing while `newest_release` answers an older release (vLLM 0.19.0, whose default
utilization is 0.9; 0.20.0 made it 0.92, docs/engines/vllm.md#requested-memory), then asking
with the release table kvplan ships.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.sizing.engines import releases
from service.sizing.engines.calibration import LATEST_SGLANG_VERSION, LATEST_VLLM_VERSION
from tests.conftest import ADMIN

PROFILE: dict[str, Any] = {
    "name": "llama-8b-unpinned",
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
}
OLDER = "0.19.0"


def _create(client: TestClient, **changes: Any) -> dict[str, Any]:
    response = client.post("/v1/deployments", json={**PROFILE, **changes}, headers=ADMIN)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _capacity(client: TestClient, name: str = PROFILE["name"]) -> dict[str, Any]:
    response = client.get(f"/v1/deployments/{name}/capacity")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _asked(client: TestClient, version: str) -> dict[str, Any]:
    params = {k: v for k, v in PROFILE.items() if k != "name"}
    response = client.get("/v1/capacity", params={**params, "engine_version": version})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_profile_without_a_release_stores_the_newest_modelled(client: TestClient) -> None:
    body = _create(client)
    assert body["engine_version"] == LATEST_VLLM_VERSION
    assert client.get(f"/v1/deployments/{PROFILE['name']}").json()["engine_version"] == (
        LATEST_VLLM_VERSION
    )
    # pinned to the newest: nothing newer to warn about
    assert not any("newest release" in w for w in _capacity(client)["warnings"])


def test_a_later_kvplan_keeps_sizing_the_profile_as_stored_and_warns(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as older_kvplan:
        older_kvplan.setattr(releases, "newest_release", lambda engine: OLDER)
        stored = _create(client)
        then = _capacity(client)
    assert stored["engine_version"] == OLDER
    assert client.get(f"/v1/deployments/{PROFILE['name']}").json()["engine_version"] == OLDER

    now = _capacity(client)  # kvplan's own release table: LATEST_VLLM_VERSION is newest
    pinned, newest = _asked(client, OLDER), _asked(client, LATEST_VLLM_VERSION)
    assert now["engine_version"] == OLDER
    for figure in ("kv_pool_bytes", "num_gpu_blocks", "max_num_seqs"):
        assert now[figure] == then[figure] == pinned[figure], figure
    # 0.92 of the total instead of 0.9: the newest release answers a bigger pool
    assert newest["kv_pool_bytes"] > pinned["kv_pool_bytes"]
    warning = next(w for w in now["warnings"] if "newest release" in w)
    assert f"{LATEST_VLLM_VERSION}, the newest release kvplan models" in warning
    assert f"max_num_seqs {newest['max_num_seqs']} (pinned: {pinned['max_num_seqs']})" in warning
    assert (
        f"kv_pool_bytes {newest['kv_pool_bytes']:,} (pinned: {pinned['kv_pool_bytes']:,})"
        in warning
    )
    assert not any("newest release" in w for w in then["warnings"])


def test_changing_the_engine_pins_that_engines_newest(client: TestClient) -> None:
    _create(client)
    response = client.patch(
        f"/v1/deployments/{PROFILE['name']}",
        json={"engine": "sglang"},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    assert response.json()["engine_version"] == LATEST_SGLANG_VERSION


def test_a_release_the_profile_names_is_kept(client: TestClient) -> None:
    assert _create(client, engine_version="0.10.1")["engine_version"] == "0.10.1"
    response = client.patch(
        f"/v1/deployments/{PROFILE['name']}",
        json={"max_model_len": 4096},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    assert response.json()["engine_version"] == "0.10.1"
    # null restores the default: the newest release modelled now
    cleared = client.patch(
        f"/v1/deployments/{PROFILE['name']}",
        json={"engine_version": None},
        headers={**ADMIN, "If-Match": '"2"'},
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["engine_version"] == LATEST_VLLM_VERSION
