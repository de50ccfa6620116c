"""Unknown query parameters on a GET: ignored (a spreadsheet's cache-busting `_=123`, KEDA's
`api_key`), never a 422 "Extra inputs are not permitted"; a near-miss of a declared parameter
is still refused, naming it; JSON bodies stay strict."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import problem
from tests.planning.test_capacity_api import BASE

PLAN = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 50, "gpus": "l4"}
# What callers add that kvplan does not declare: a cache buster (Sheets, Excel users), KEDA's
# key parameter (read keys are not configured here), a tracking parameter pasted with a URL.
UNDECLARED = [{"_": "123"}, {"api_key": "anything"}, {"nocache": "1", "utm_source": "sheet"}]
READS = [
    ("/v1/capacity", BASE),
    ("/v1/plans", PLAN),
    ("/v1/gpus", {"vendor": "NVIDIA"}),
    ("/v1/models", {"family": "llama"}),
    ("/v1/gpus/l4", {}),
    ("/v1/models/llama-3.1-8b", {}),
]


@pytest.mark.parametrize("extra", UNDECLARED)
@pytest.mark.parametrize(("path", "params"), READS)
def test_an_undeclared_parameter_is_ignored_and_changes_nothing(
    client: TestClient, path: str, params: dict[str, object], extra: dict[str, str]
) -> None:
    plain = client.get(path, params=params)
    assert plain.status_code == 200, plain.text
    busted = client.get(path, params={**params, **extra})
    assert busted.status_code == 200, busted.text
    assert busted.content == plain.content
    assert busted.headers.get("etag") == plain.headers.get("etag")


@pytest.mark.parametrize(
    ("path", "params", "misspelt", "meant"),
    [
        ("/v1/plans", PLAN, "peak_concurency", "peak_concurrency"),
        ("/v1/capacity", BASE, "kv_cache_dtyp", "kv_cache_dtype"),
        ("/v1/capacity", BASE, "gpus", "gpu"),  # plans take `gpus`, capacity one `gpu`
        ("/v1/gpus", {}, "vendr", "vendor"),
        ("/v1/models", {}, "min_parameter", "min_parameters"),
    ],
)
def test_a_near_miss_of_a_declared_parameter_is_a_422_naming_it(
    client: TestClient, path: str, params: dict[str, object], misspelt: str, meant: str
) -> None:
    body = problem(client.get(path, params={**params, misspelt: "1"}), 422)
    assert body["field"] == misspelt
    assert body["suggestions"] == [meant]
    assert meant in body["detail"]


def test_json_bodies_still_refuse_unknown_fields(client: TestClient) -> None:
    question = {**PLAN, "gpus": ["l4"], "_": 123}
    body = problem(client.post("/v1/plans", json=question), 422)
    assert body["field"] == "_"
    body = problem(client.post("/v1/capacity", json={**BASE, "api_key": "x"}), 422)
    assert body["field"] == "api_key"
