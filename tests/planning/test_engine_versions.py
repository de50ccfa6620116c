"""Every release's version string, as released, is a version (issue 7), asked over HTTP.

The engines publish PEP 440 versions; kvplan orders them as pip does and sizes a release by the
newest release whose arithmetic it models that is not newer than the one asked
(service/sizing/versions.py). The milestones used below are in docs/engines/vllm.md
(#release-milestones): 0.9.2 changed vLLM V1's budget to per-instance memory, and 0.11.0 brought
DeepSeek sparse attention.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import problem

LLAMA_ON_H100 = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}


def _capacity(client: TestClient, **params: object) -> dict[str, object]:
    answer = client.get("/v1/capacity", params={**LLAMA_ON_H100, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_released_version_strings_are_answered_and_echoed(client: TestClient) -> None:
    for engine, version in [
        ("vllm", "0.10.1.1"),
        ("vllm", "0.11.0rc2"),
        ("vllm", "v0.6.3.post1"),
        ("vllm", "0.5.4.post2"),
        ("vllm", "0.9.2.dev123+g0123abc"),
        ("sglang", "0.5.4.post2"),
        ("sglang", "v0.4.9.post3"),
        ("trtllm", "1.0.0rc3"),
    ]:
        body = _capacity(client, engine=engine, engine_version=version)
        assert body["engine_version"] == version, (engine, version)


def test_a_four_part_release_is_sized_as_its_three_part_release(client: TestClient) -> None:
    # 0.10.1.1 is a patch of 0.10.1; no milestone sits between them.
    same = ("kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens", "max_num_seqs")
    patch = _capacity(client, engine_version="0.10.1.1")
    release = _capacity(client, engine_version="0.10.1")
    assert [patch[k] for k in same] == [release[k] for k in same]


def test_a_dev_build_is_sized_as_the_releases_before_it(client: TestClient) -> None:
    # 0.9.2.dev123 comes before 0.9.2 (PEP 440), so 0.9.2's per-instance budget is not yet in
    # it: its pool is 0.9.1's, not 0.9.2's.
    dev = _capacity(client, engine_version="0.9.2.dev123+g0123abc")
    before = _capacity(client, engine_version="0.9.1")
    after = _capacity(client, engine_version="0.9.2")
    assert dev["kv_pool_bytes"] == before["kv_pool_bytes"] != after["kv_pool_bytes"]


def test_a_release_candidate_lacks_what_its_release_brought(client: TestClient) -> None:
    # DeepSeek sparse attention arrived in vLLM 0.11.0: 0.11.0rc2 comes before it.
    ask = {"model": "deepseek-v3.2", "gpu": "h200-141gb", "tensor_parallel_size": 8}
    candidate = client.post("/v1/capacity", json={**ask, "engine_version": "0.11.0rc2"})
    problem(candidate, 422)
    assert candidate.json()["field"] == "engine_version"
    assert "0.11.0" in candidate.json()["detail"]
    release = client.post("/v1/capacity", json={**ask, "engine_version": "0.11.0"})
    assert release.status_code == 200, release.text
    notes = client.post("/v1/capacity", json={**LLAMA_ON_H100, "engine_version": "0.11.0rc2"})
    assert any("pre-release of 0.11.0" in w for w in notes.json()["warnings"])


def test_a_release_newer_than_any_modelled_is_sized_as_the_newest_and_says_so(
    client: TestClient,
) -> None:
    newer = client.post("/v1/capacity", json={**LLAMA_ON_H100, "engine_version": "0.99.0"})
    newest = client.post("/v1/capacity", json={**LLAMA_ON_H100, "engine_version": "0.33.0"})
    assert newer.json()["kv_pool_bytes"] == newest.json()["kv_pool_bytes"]
    assert any("newer than the newest release" in w for w in newer.json()["warnings"])


@pytest.mark.parametrize("engine_name", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("version", ["latest", "nightly", "0.10.x"])
def test_what_is_not_a_version_is_a_422_naming_engine_version(
    client: TestClient, engine_name: str, version: str
) -> None:
    answer = client.get(
        "/v1/capacity", params={**LLAMA_ON_H100, "engine": engine_name, "engine_version": version}
    )
    problem(answer, 422)
    assert answer.json()["field"] == "engine_version"
