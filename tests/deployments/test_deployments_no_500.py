"""No input to /v1/deployments produces a 500: the sizing fuzz bodies, stored as profiles."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ADMIN
from tests.robustness.test_no_500 import FUZZ, HOSTILE_TEXT, NUMBERS, bodies


@FUZZ
@given(body=bodies(), name=st.one_of(st.just("fuzzed"), HOSTILE_TEXT))
def test_creating_a_profile_never_answers_500(
    client: TestClient, body: dict[str, Any], name: str
) -> None:
    response = client.post("/v1/deployments", json={**body, "name": name}, headers=ADMIN)
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/problem+json"
    if response.status_code == 201:
        capacity = client.get(f"/v1/deployments/{name}/capacity")
        assert capacity.status_code in (200, 422), capacity.text
        assert client.get("/metrics").status_code == 200


@FUZZ
@given(
    peak=st.one_of(NUMBERS, HOSTILE_TEXT),
    fmt=st.sampled_from(["json", "csv", "text", "prometheus", "xml", ""]),
    field=st.sampled_from(["max_num_seqs", "kv_cache_tokens", "nope", ""]),
    patch=st.dictionaries(
        st.sampled_from(["max_model_len", "tensor_parallel_size", "kv_cache_dtype", "gpu"]),
        st.one_of(NUMBERS, HOSTILE_TEXT, st.none()),
        max_size=2,
    ),
)
def test_asking_a_profile_never_answers_500(
    client: TestClient, peak: Any, fmt: str, field: str, patch: dict[str, Any]
) -> None:
    created = client.post(
        "/v1/deployments",
        json={"name": "asked", "model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"},
        headers=ADMIN,
    )
    assert created.status_code in (201, 409), created.text
    revision = client.get("/v1/deployments/asked").json()["revision"]
    safe = {
        k: (1e308 if isinstance(v, float) and not abs(v) < float("inf") else v)
        for k, v in patch.items()
    }
    patched = client.patch(
        "/v1/deployments/asked", json=safe, headers={**ADMIN, "If-Match": f'"{revision}"'}
    )
    assert patched.status_code < 500, (safe, patched.text)
    params = {"peak_concurrency": str(peak), "format": fmt, "field": field}
    response = client.get("/v1/deployments/asked/capacity", params=params)
    assert response.status_code < 500, (params, response.text)
