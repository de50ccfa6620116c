"""Issue 17's smaller defects, each asked over HTTP as a client sends it.

A bare carriage return in a CSV cell, a JSON body sent as text/plain, a JSON syntax error, an
impossible plan asked as `format=text`, a config.json without `num_key_value_heads`, and the 431
`kvplan serve` answers on GET /v1/capacity (documented in the spec).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

PROBLEM_JSON = "application/problem+json"
PYGMALION = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "hf_configs"
    / "kleberbaum--Pygmalion-7b-Merged-Safetensors.json"
)  # a Llama-1 export (transformers 4.28): no num_key_value_heads; SOURCES.md there


def test_a_bare_carriage_return_in_a_csv_cell_is_a_422_naming_the_row(client: TestClient) -> None:
    # Excel on a Mac of old ends lines with CR alone; inside an unquoted cell the csv module
    # refuses it (_csv.Error), which was a 500.
    table = "model,max_model_len,peak_concurrency\nllama-3.1-8b,8192,4\nllama-3.1-8b,81\r92,4\n"
    r = client.post("/v1/plans", content=table, headers={"content-type": "text/csv"})
    assert r.status_code == 422
    assert r.headers["content-type"] == PROBLEM_JSON
    problem = r.json()
    assert problem["field"] == "body"
    assert problem["row"] == 2  # the second question; the first was read
    assert "row 2" in problem["detail"]
    assert "quoted" in problem["detail"]


def test_a_quoted_line_break_in_a_csv_cell_is_still_read(client: TestClient) -> None:
    # RFC 4180 allows line breaks inside quotes: the label keeps its CR and the row is answered
    table = 'scenario,model,max_model_len,peak_concurrency\n"a\rb",llama-3.1-8b,8192,4\n'
    r = client.post("/v1/plans", content=table, headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    assert "ok" in r.text.splitlines()[-1]


def test_a_json_body_sent_as_text_plain_is_a_415_naming_the_accepted_types(
    client: TestClient,
) -> None:
    body = json.dumps({"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 4})
    r = client.post("/v1/plans", content=body, headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.headers["content-type"] == PROBLEM_JSON
    problem = r.json()
    assert problem["type"] == "/problems/unsupported-media-type"
    assert problem["field"] == "content-type"
    # POST /v1/plans reads JSON, and a table of questions as CSV or TSV
    assert problem["accepted"] == ["application/json", "text/csv", "text/tab-separated-values"]
    assert "text/plain" in problem["detail"]
    r = client.post("/v1/capacity", content=body, headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.json()["accepted"] == ["application/json"]


def test_the_same_body_as_json_is_answered(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 4}
    r = client.post("/v1/plans", json=body)
    assert r.status_code == 200
    assert r.json()["recommendation"] is not None


def test_malformed_json_is_a_problem_with_its_line_and_column(client: TestClient) -> None:
    # line 2 is ` "max_model_len":8192,,`: the second comma is its 23rd character (a space,
    # 15 for the quoted name, the colon, 4 digits, a comma), where json.loads expects a name
    body = '{"model":"llama-3.1-8b",\n "max_model_len":8192,,"peak_concurrency":4}'
    r = client.post("/v1/plans", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    problem = r.json()
    assert problem["field"] == "body"
    assert "line 2 column 23" in problem["detail"]
    assert "Expecting property name enclosed in double quotes" in problem["detail"]


def test_an_impossible_plan_as_text_says_why_in_the_cell(client: TestClient) -> None:
    # tests/planning/test_plan_latency_targets.py: one Llama-3.1-8B sequence of 8,192 tokens
    # decodes in 8.7 ms a token on one H100, so a 5 ms target leaves no plan. An empty 200 was
    # a blank cell in a sheet; the text says why instead, and the JSON still says null.
    query = (
        "/v1/plans?model=llama-3.1-8b&max_model_len=8192&peak_concurrency=54"
        "&gpus=h100-sxm-80gb&max_gpus_per_node=1&max_tpot_ms=5&engine_version=0.20.0"
    )
    r = client.get(query + "&format=text")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith("no plan: h100-sxm-80gb x1: decode at 1 sequence takes 8.7 ms")
    assert "5 ms max_tpot_ms target" in r.text
    r = client.get(query + "&field=gpu")
    assert r.text.startswith("no plan: ")
    assert client.get(query).json()["recommendation"] is None


def _pygmalion() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(PYGMALION.read_text(encoding="utf-8"))
    return config


def test_a_config_without_num_key_value_heads_is_answered_with_a_warning(
    client: TestClient,
) -> None:
    question = {"model": {"hf_config": _pygmalion()}, "gpu": "h100-sxm-80gb", "explain": False}
    r = client.post("/v1/capacity", json={**question, "max_model_len": 2048})
    assert r.status_code == 200
    answer = r.json()
    # multi-head attention: 32 layers x 32 KV heads x 128 (4096 / 32) x 2 (K, V) x 2 B (bf16)
    assert answer["kv_bytes_per_token"] == 32 * 32 * 128 * 2 * 2 == 524_288
    assert any(
        "no num_key_value_heads" in w and "32 KV heads" in w and "transformers" in w
        for w in answer["warnings"]
    ), answer["warnings"]
    # a plan from the same config says it too
    plan = {**question, "max_model_len": 2048, "peak_concurrency": 4}
    plan.pop("gpu")
    r = client.post("/v1/plans", json={**plan, "gpus": ["h100-sxm-80gb"]})
    assert any("no num_key_value_heads" in w for w in r.json()["warnings"])


def test_a_config_that_gives_num_key_value_heads_has_no_such_warning(client: TestClient) -> None:
    config = {**_pygmalion(), "num_key_value_heads": 8}
    question = {"model": {"hf_config": config}, "gpu": "h100-sxm-80gb", "max_model_len": 2048}
    answer = client.post("/v1/capacity", json=question).json()
    assert answer["kv_bytes_per_token"] == 32 * 8 * 128 * 2 * 2  # a quarter: 8 KV heads
    assert not any("num_key_value_heads" in w for w in answer["warnings"])


def test_the_431_on_get_capacity_is_in_the_spec(client: TestClient) -> None:
    # tests/test_deadlines.py has `kvplan serve` answer a head over 16 KiB with 431 (h11: 400)
    spec = client.get("/openapi.json").json()
    answer = spec["paths"]["/v1/capacity"]["get"]["responses"]["431"]
    assert "KVPLAN_H11_MAX_INCOMPLETE_EVENT_BYTES" in answer["description"]
    assert list(answer["content"]) == ["text/plain"]
    # every operation that reads a body documents the 415 it may answer
    assert "415" in spec["paths"]["/v1/plans"]["post"]["responses"]
