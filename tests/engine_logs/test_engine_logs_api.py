"""POST /v1/engine-logs: a pasted start-up log, its figures, and kvplan's differences.

The log is a real one: vLLM 0.19.0 serving Llama-3.1-8B-Instruct on one H100 at
`--gpu-memory-utilization 0.95` (engine_logs.json, the jgchn/llm-d-planner
...tp1pp1dp1--8192.log entry).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.engine_logs.schemas import MAX_LOG_BYTES
from service.kit.db import Database
from tests.conftest import make_settings
from tests.engine_logs.calibration import GIB, bytes_of, entry
from tests.helpers import problem

V019_LOGS = "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
LLAMA_TP1 = entry(V019_LOGS + "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
LOG: str = LLAMA_TP1["quote"]
TEXT = {"content-type": "text/plain"}
# The same deployment asked of POST /v1/capacity: the settings the log's non-default args and
# config lines print, copied by name.
SAME_SETTINGS: dict[str, Any] = {
    "model": "llama-3.1-8b-instruct",
    "gpu": "h100-sxm-80gb",
    "engine": "vllm",
    "engine_version": "0.19.0",
    "max_model_len": 8192,
    "gpu_memory_utilization": 0.95,
    "max_num_batched_tokens": 8192,
    "enable_prefix_caching": False,
}


def _explain(client: TestClient, **params: str) -> dict[str, Any]:
    response = client.post("/v1/engine-logs", content=LOG, headers=TEXT, params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    return body


def test_a_pasted_log_answers_its_engine_settings_and_figures(client: TestClient) -> None:
    body = _explain(client)
    assert body["engine"] == "vllm"
    assert body["engine_version"] == "0.19.0"  # the banner's "version 0.19.0"
    # the non-default args line and the scheduler line
    assert body["settings"] == {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "max_model_len": 8192,
        "gpu_memory_utilization": 0.95,
        "max_num_batched_tokens": 8192,
        "enable_prefix_caching": False,
    }
    reported = body["reported"]
    assert reported["kv_cache_tokens"] == 476_016  # "GPU KV cache size: 476,016 tokens"
    assert reported["num_gpu_blocks"] == 29_751  # "after num_gpu_blocks is: 29751"
    assert reported["max_concurrency"] == 58.11
    assert reported["kv_pool_bytes"] == bytes_of("58.11", GIB)  # "Available KV cache memory"
    assert reported["total_memory_bytes"] == bytes_of("79.19", GIB)
    # exact bytes where vLLM prints bytes: "--kv-cache-memory=61258029056"
    assert reported["kv_cache_memory_to_fit_requested_bytes"] == 61_258_029_056
    # absent, never null or guessed, when the log does not print it (SGLang's K size)
    assert "k_cache_bytes" not in reported
    assert all(value is not None for value in reported.values())
    lines = {line["line_number"]: line for line in body["recognised_lines"]}
    assert "Available KV cache memory: 58.11 GiB" in lines[12]["text"]
    assert lines[12]["patterns"]


def test_the_prediction_is_kvplans_capacity_for_the_same_settings(client: TestClient) -> None:
    body = _explain(client)
    # model by the catalog's hf_id, GPU by the total the log prints (79.19 GiB is the H100 SXM)
    assert body["model"] == "llama-3.1-8b-instruct"
    assert body["gpu"] == "h100-sxm-80gb"
    asked = client.post("/v1/capacity", json=SAME_SETTINGS)
    assert asked.status_code == 200, asked.text
    expected = asked.json()
    prediction = body["prediction"]
    for name in ("kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens", "max_concurrency"):
        assert prediction[name] == expected[name], name
    assert prediction["explanation"]["memory_budget"] == expected["explanation"]["memory_budget"]


def test_the_differences_line_by_line(client: TestClient) -> None:
    body = _explain(client)
    prediction = body["prediction"]
    budget_lines = {
        line["name"]: -line["bytes"] for line in prediction["explanation"]["memory_budget"]["lines"]
    }
    rows = {row["line"]: row for row in body["differences"]}
    # the shares are of what vLLM requested: "Requested memory: 0.950000 (util), 75.23 GiB"
    requested = bytes_of("75.23", GIB)
    assert body["budget_bytes"] == requested

    pool = rows["kv_pool"]
    assert pool["unit"] == "bytes"
    assert pool["predicted"] == prediction["kv_pool_bytes"]
    assert pool["reported"] == bytes_of("58.11", GIB)
    assert pool["difference"] == prediction["kv_pool_bytes"] - bytes_of("58.11", GIB)
    assert pool["share_of_budget"] == round(pool["difference"] / requested, 6)
    assert pool["share_of_reported"] == round(pool["difference"] / bytes_of("58.11", GIB), 6)

    # "non-torch forward increase memory: 0.25GiB": kvplan's vLLM constant is 256 MiB too
    assert rows["non_torch"]["predicted"] == budget_lines["non_torch"] == 256 * 2**20
    assert rows["non_torch"]["reported"] == bytes_of("0.25", GIB)
    assert rows["non_torch"]["difference"] == 0

    assert rows["weights"]["reported"] == bytes_of("14.99", GIB)  # "weights memory: 14.99GiB"
    assert rows["weights"]["predicted"] == budget_lines["weights"]
    assert rows["activation_peak"]["reported"] == bytes_of("1.89", GIB)
    # vLLM 0.19 prints the graphs (0.91 GiB) but does not subtract them from the pool
    assert rows["cudagraph"]["predicted"] is None
    assert rows["cudagraph"]["reported"] == bytes_of("0.91", GIB)
    assert rows["cudagraph"]["difference"] is None

    tokens = rows["kv_cache_tokens"]
    assert tokens["unit"] == "tokens"
    assert tokens["difference"] == prediction["kv_cache_tokens"] - 476_016
    assert tokens["share_of_budget"] is None  # counts are shares of the reported only
    assert rows["num_gpu_blocks"]["reported"] == 29_751
    assert rows["max_concurrency"]["reported"] == 58.11


def test_json_and_text_bodies_give_one_answer(client: TestClient) -> None:
    as_text = _explain(client)
    as_json = client.post("/v1/engine-logs", json={"log": LOG})
    assert as_json.status_code == 200, as_json.text
    assert as_json.json() == as_text


def test_hints_name_the_model_and_gpu_as_query_parameters_or_json_fields(
    client: TestClient,
) -> None:
    # the base model's catalog entry and another GPU, named by the caller
    by_query = _explain(client, model="llama-3.1-8b", gpu="h200-141gb")
    assert (by_query["model"], by_query["gpu"]) == ("llama-3.1-8b", "h200-141gb")
    assert by_query["prediction"]["gpu_memory_bytes"] > by_query["reported"]["total_memory_bytes"]
    by_body = client.post(
        "/v1/engine-logs", json={"log": LOG, "model": "llama-3.1-8b", "gpu": "h200-141gb"}
    )
    assert by_body.json() == by_query


def test_an_attached_config_json_gives_the_prediction(client: TestClient) -> None:
    config = client.get("/v1/models/llama-3.1-8b-instruct").json()
    assert config["hf_id"] == "meta-llama/Llama-3.1-8B-Instruct"
    text = LOG.replace("meta-llama/Llama-3.1-8B-Instruct", "my-finetune")
    hf_config = {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    no_model = client.post("/v1/engine-logs", json={"log": text}).json()
    assert no_model["prediction"] is None
    assert "'my-finetune'" in no_model["prediction_unavailable"]
    assert "hf_config" in no_model["prediction_unavailable"]
    assert no_model["differences"] == []
    body = client.post("/v1/engine-logs", json={"log": text, "hf_config": hf_config}).json()
    assert body["model"] == "hf_config"
    # the same geometry as the catalog's Llama-3.1-8B: the same KV bytes per token
    catalog_body = _explain(client)
    assert (
        body["prediction"]["kv_bytes_per_token"]
        == catalog_body["prediction"]["kv_bytes_per_token"]
        == 32 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head_dim x bf16 bytes
    )


def test_a_log_without_a_gpu_total_needs_the_gpu_named(client: TestClient) -> None:
    lines = [line for line in LOG.split("\n") if "total_memory" not in line]
    lines = [line for line in lines if "Free memory on device" not in line]
    body = client.post("/v1/engine-logs", content="\n".join(lines), headers=TEXT).json()
    assert "total_memory_bytes" not in body["reported"]
    assert body["prediction"] is None
    assert "give gpu" in body["prediction_unavailable"]
    named = client.post(
        "/v1/engine-logs", content="\n".join(lines), headers=TEXT, params={"gpu": "h100-sxm-80gb"}
    ).json()
    assert named["prediction"]["gpu"] == "h100-sxm-80gb"


def test_a_log_with_nothing_recognised_is_a_422_listing_what_was_looked_for(
    client: TestClient,
) -> None:
    response = client.post(
        "/v1/engine-logs", content="hello\nINFO: Uvicorn running on port 8000\n", headers=TEXT
    )
    body = problem(response, 422)
    assert body["type"] == "/problems/log-not-recognised"
    assert body["field"] == "log"
    assert any("Available KV cache memory" in line for line in body["looked_for"])
    assert any("KV Cache is allocated" in line for line in body["looked_for"])
    assert any("[MemUsageChange]" in line for line in body["looked_for"])


def test_an_empty_body_says_so(client: TestClient) -> None:
    body = problem(client.post("/v1/engine-logs", content="", headers=TEXT), 422)
    assert body["field"] == "log"
    assert "empty" in body["detail"]


def test_a_log_over_the_body_limit_is_a_413_before_it_is_read(client: TestClient) -> None:
    # The app's body limit (KVPLAN_MAX_BODY_BYTES, 1 MiB by default) comes first.
    huge = LOG + "\n" + "x" * MAX_LOG_BYTES
    body = problem(client.post("/v1/engine-logs", content=huge, headers=TEXT), 413)
    assert body["field"] == "body"


def test_a_log_over_its_own_limit_is_refused_where_bodies_may_be_larger(
    engine: Engine, connection: Connection, database_url: str
) -> None:
    database = Database(engine)
    database.sessions = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    # An operator who raises the body limit still meets the log's own 1 MiB bound
    # (service/engine_logs/schemas.py MAX_LOG_BYTES; start-up logs are under 200 KiB).
    settings = make_settings(database_url, max_body_bytes=3 * MAX_LOG_BYTES)
    huge = LOG + "\n" + "x" * MAX_LOG_BYTES
    with TestClient(create_app(settings, database)) as roomy:
        body = problem(roomy.post("/v1/engine-logs", content=huge, headers=TEXT), 422)
        assert body["field"] == "log"
        assert "1 MiB" in body["detail"]
        body = problem(roomy.post("/v1/engine-logs", json={"log": huge}), 422)
        assert body["field"] == "log"


@pytest.mark.parametrize(
    ("params", "json_body", "field"),
    [
        ({"model": "llama-9"}, None, "model"),
        # h100 and h200 are short names the catalog resolves (docs/names.md#gpus-by-name)
        ({"gpu": "h100-80gb"}, None, "gpu"),
        ({}, {"log": LOG, "gpu": "h300"}, "gpu"),
    ],
)
def test_an_unknown_slug_the_caller_names_is_a_404(
    client: TestClient, params: dict[str, str], json_body: dict[str, Any] | None, field: str
) -> None:
    if json_body is None:
        response = client.post("/v1/engine-logs", content=LOG, headers=TEXT, params=params)
    else:
        response = client.post("/v1/engine-logs", json=json_body)
    body = problem(response, 404)
    assert body["field"] == field
    assert body["suggestions"]


def test_bad_hints_and_bodies_are_422_naming_the_field(client: TestClient) -> None:
    body = problem(
        client.post("/v1/engine-logs", content=LOG, headers=TEXT, params={"engine": "ollama"}),
        422,
    )
    assert body["field"] == "engine"
    # a near-miss of a declared parameter is refused, not ignored
    body = problem(
        client.post(
            "/v1/engine-logs", content=LOG, headers=TEXT, params={"engine_versio": "0.19.0"}
        ),
        422,
    )
    assert body["field"] == "engine_versio"
    body = problem(client.post("/v1/engine-logs", json={"log": LOG, "extra": 1}), 422)
    assert body["field"] == "extra"
    body = problem(client.post("/v1/engine-logs", json={"engine": "vllm"}), 422)
    assert body["field"] == "log"


def test_a_non_utf8_byte_does_not_stop_the_log_being_read(client: TestClient) -> None:
    raw = b"\xff\xfe garbage\n" + LOG.encode()
    response = client.post("/v1/engine-logs", content=raw, headers=TEXT)
    assert response.status_code == 200, response.text
    assert response.json()["reported"]["kv_cache_tokens"] == 476_016


def test_reads_need_a_key_where_keys_are_set(
    engine: Engine, connection: Connection, database_url: str
) -> None:
    database = Database(engine)
    database.sessions = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    app = create_app(make_settings(database_url, read_keys="k-engine-logs"), database)
    with TestClient(app) as keyed:
        problem(keyed.post("/v1/engine-logs", content=LOG, headers=TEXT), 401)
        answered = keyed.post(
            "/v1/engine-logs", content=LOG, headers={**TEXT, "X-API-KEY": "k-engine-logs"}
        )
        assert answered.status_code == 200
