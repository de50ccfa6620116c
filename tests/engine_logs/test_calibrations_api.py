"""/v1/calibrations: a start-up log kept as what it measured, and the capacity answers that
then use it.

The logs are real: vLLM 0.19.0 on one H100 80GB node (engine_logs.json, the
jgchn/llm-d-planner accuracy/results/v0.19.0 entries, whose models are in the catalog). A
calibrated question at the log's own settings must answer the engine's own `GPU KV cache size`
and `Maximum concurrency` exactly; one that differs in max_model_len, max_num_seqs or the
utilization follows by vLLM's arithmetic, worked by hand below.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.planning import service as planning
from service.planning.schemas import CapacityFields
from service.planning.service import CapacityQuestion
from tests.conftest import ADMIN
from tests.engine_logs.calibration import GIB, MIB, bytes_of, entry
from tests.helpers import problem

V019 = "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
# The catalog model each log ran (its hf_id is the log's model), by the log's file name.
LOGS = {
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log": "llama-3.1-8b-instruct",
    "meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log": "llama-3.1-8b-instruct",
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp2dp1--8192.log": "llama-3.1-8b-instruct",
    "meta-llama---h100-80gb--tp1pp1dp1--8192-dtbf16-kvfp8.log": "llama-3.1-8b-instruct",
    "qwen-qwen3-30b-a3b--h100-80gb--tp1pp1dp1--8192.log": "qwen3-30b-a3b",
    "google-gemma-3-27b-it--h100-80gb--tp1pp1dp1--8192.log": "gemma-3-27b-it",
    "openai-gpt-oss-20b--h100-80gb--tp2pp1dp1--8192.log": "gpt-oss-20b",
    "meta-llama-llama-4-scout--h100-80gb--tp4pp1dp1--8192.log": "llama-4-scout-17b-16e-instruct",
    "qwen-qwen3-8b--h100-80gb--tp1pp1dp1--8192.log": "qwen3-8b",
}
LLAMA = entry(V019 + "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
TEXT = {"content-type": "text/plain"}
# Llama-3.1-8B's vLLM block at bf16: 16 tokens x 32 layers x (K, V) x 8 KV heads x 128 x 2 B
# (vllm/v1/kv_cache_interface.py, FullAttentionSpec.page_size_bytes x the layers of the group)
BLOCK_BYTES = 16 * 32 * 2 * 8 * 128 * 2
assert BLOCK_BYTES == 2 * MIB


def _entry_of(name: str) -> dict[str, Any]:
    return entry(V019 + name)


def _question(case: dict[str, Any], model: str, **changes: Any) -> dict[str, Any]:
    """The capacity question a log answers, from the entry's own fields (not the parser's)."""
    return {
        "model": model,
        "gpu": "h100-sxm-80gb",
        "engine": "vllm",
        "engine_version": case["engine_version"],
        "max_model_len": case["max_model_len"],
        "kv_cache_dtype": case["kv_cache_dtype"],
        "tensor_parallel_size": case["tp"],
        "pipeline_parallel_size": case["pp"],
        "gpu_memory_utilization": case["gpu_memory_utilization"],
        **changes,
    }


def _calibrate(client: TestClient, case: dict[str, Any], **params: str) -> dict[str, Any]:
    response = client.post(
        "/v1/calibrations", content=case["quote"], headers={**ADMIN, **TEXT}, params=params
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/calibrations/{body['id']}"
    assert response.headers["etag"] == '"1"'
    return body


def _capacity(client: TestClient, question: dict[str, Any]) -> dict[str, Any]:
    response = client.get("/v1/capacity", params=question)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_calibration_keeps_what_the_log_measured(client: TestClient) -> None:
    body = _calibrate(client, LLAMA)
    assert {k: body[k] for k in ("model", "gpu", "engine", "engine_version")} == {
        "model": "llama-3.1-8b-instruct",  # the catalog entry whose hf_id the log names
        "gpu": "h100-sxm-80gb",  # recognised from "total_memory=79.19GiB"
        "engine": "vllm",
        "engine_version": "0.19.0",
    }
    assert (body["tensor_parallel_size"], body["pipeline_parallel_size"]) == (1, 1)
    assert body["kv_cache_dtype"] == "auto"
    assert body["max_num_batched_tokens"] == 8192  # "Chunked prefill ... =8192"
    assert body["enforce_eager"] is False
    assert (body["fraction_name"], body["fraction"]) == ("gpu_memory_utilization", 0.95)
    assert body["fraction_base_bytes"] == bytes_of("79.19", GIB)  # the total the log prints
    # as printed: "weights memory: 14.99GiB; torch peak memory increase: 1.89GiB; non-torch
    # forward increase memory: 0.25GiB", "Graph capturing finished ... took 0.91 GiB"
    assert body["weights_bytes"] == bytes_of("14.99", GIB)
    assert body["activation_peak_bytes"] == bytes_of("1.89", GIB)
    assert body["non_torch_bytes"] == bytes_of("0.25", GIB)
    assert body["cudagraph_bytes"] == bytes_of("0.91", GIB)
    assert body["reported_kv_pool_bytes"] == bytes_of("58.11", GIB)
    assert (body["num_gpu_blocks"], body["kv_cache_tokens"]) == (29_751, 476_016)
    # The pool: 29,751 whole blocks of 2 MiB and less than one more (vLLM divides the pool by
    # the page size and floors), and within the printed 58.11 GiB's rounding (58.105..58.115).
    pool = body["kv_pool_bytes"]
    assert 29_751 * BLOCK_BYTES <= pool < 29_752 * BLOCK_BYTES
    assert 58.105 * GIB <= pool < 58.115 * GIB
    assert body["reproduces"] is True
    # vLLM 0.19 subtracts weights, the profile's peak and the non-torch growth (not graphs)
    assert body["replaced"] == ["weights", "activation_peak", "non_torch"]
    assert body["settings"]["gpu_memory_utilization"] == 0.95
    assert len(body["log_sha256"]) == 64
    assert client.get(f"/v1/calibrations/{body['id']}").json() == body


@pytest.mark.parametrize("name", sorted(LOGS))
def test_a_calibrated_question_answers_the_engines_own_figures_exactly(
    client: TestClient, name: str
) -> None:
    case = _entry_of(name)
    question = _question(case, LOGS[name])
    before = _capacity(client, question)
    assert before["calibrated_from"] is None
    stored = _calibrate(client, case)
    after = _capacity(client, question)
    reported = case["reported"]
    # "GPU KV cache size: N tokens" and "Maximum concurrency for 8,192 tokens per request: Xx"
    assert after["kv_cache_tokens"] == reported["kv_cache_tokens"]
    assert round(after["max_concurrency"], 2) == reported["max_concurrency"]
    assert after["num_gpu_blocks"] == reported["num_gpu_blocks"]
    used = after["calibrated_from"]
    assert used["calibration_id"] == stored["id"]
    assert used["kv_pool_bytes"] == after["kv_pool_bytes"] == stored["kv_pool_bytes"]
    assert used["replaced"] == stored["replaced"]
    assert used["reproduces"] is True
    assert used["created_at"] == stored["created_at"]


def test_another_max_model_len_follows_by_vllms_arithmetic(client: TestClient) -> None:
    _calibrate(client, LLAMA)
    for max_model_len in (4096, 32768):
        answer = _capacity(
            client, _question(LLAMA, "llama-3.1-8b-instruct", max_model_len=max_model_len)
        )
        assert answer["calibrated_from"] is not None
        # vLLM V1 sizes the pool from a profile run over max_num_batched_tokens, not
        # max_model_len (vllm/v1/worker/gpu_worker.py, determine_available_memory): the blocks
        # stay 29,751 and "GPU KV cache size" stays 29,751 x 16 tokens.
        assert answer["num_gpu_blocks"] == 29_751
        assert answer["kv_cache_tokens"] == 29_751 * 16 == 476_016
        # "Maximum concurrency" is blocks over one request's blocks, cdiv(max_model_len, 16)
        # (vllm/v1/core/kv_cache_utils.py, get_max_concurrency_for_kv_cache_config)
        per_request = math.ceil(max_model_len / 16)
        assert answer["max_concurrency"] == round(29_751 / per_request, 2)  # two decimals
        # whole sequences: the null block is never handed out (vllm/v1/core/block_pool.py)
        assert answer["max_num_seqs"] == (29_751 - 1) // per_request
    short = _capacity(client, _question(LLAMA, "llama-3.1-8b-instruct", max_model_len=4096))
    assert round(short["max_concurrency"], 2) == 116.21  # 29,751 / 256
    assert short["max_num_seqs"] == 116  # 29,750 // 256


def test_another_max_num_seqs_follows_by_vllms_arithmetic(client: TestClient) -> None:
    _calibrate(client, LLAMA)
    question = _question(LLAMA, "llama-3.1-8b-instruct", peak_concurrency=200)
    default = _capacity(client, question)
    capped = _capacity(client, {**question, "max_num_seqs": 32})
    for answer in (default, capped):
        assert answer["calibrated_from"] is not None
        # the pool, the blocks and the log's two figures do not depend on max_num_seqs
        assert (answer["kv_cache_tokens"], round(answer["max_concurrency"], 2)) == (476_016, 58.11)
        assert answer["max_num_seqs"] == (29_751 - 1) // 512 == 58  # 8,192 / 16 = 512 blocks
    # replicas for 200 sequences: ceil(200 / min(58 that fit, the engine's cap)); the cap is
    # vLLM's default 1024 on an H100 (vllm/engine/arg_utils.py, _set_default_args), or 32
    assert default["replicas_for_peak_concurrency"] == math.ceil(200 / 58) == 4
    assert capped["replicas_for_peak_concurrency"] == math.ceil(200 / 32) == 7


def test_another_utilization_moves_the_measured_pool(client: TestClient) -> None:
    stored = _calibrate(client, LLAMA)
    answer = _capacity(
        client, _question(LLAMA, "llama-3.1-8b-instruct", gpu_memory_utilization=0.9)
    )
    # vLLM requests utilization x total (vllm/v1/worker/gpu_worker.py, requested_memory) and
    # keeps the rest of the measured non-KV memory: 0.05 x 79.19 GiB less than at 0.95
    total = bytes_of("79.19", GIB)
    pool = stored["kv_pool_bytes"] + round((0.9 - 0.95) * total)
    assert answer["calibrated_from"]["fraction"] == 0.9
    assert answer["calibrated_from"]["calibrated_fraction"] == 0.95
    assert answer["kv_pool_bytes"] == pool
    assert answer["num_gpu_blocks"] == pool // BLOCK_BYTES
    assert answer["kv_cache_tokens"] == pool // BLOCK_BYTES * 16


def test_a_question_with_another_key_is_not_calibrated(client: TestClient) -> None:
    _calibrate(client, LLAMA)
    question = _question(LLAMA, "llama-3.1-8b-instruct")
    for other in (
        {"engine_version": "0.18.0"},
        {"tensor_parallel_size": 2},
        {"kv_cache_dtype": "fp8"},
        {"max_num_batched_tokens": 4096},
        {"enforce_eager": True},
        {"weight_format": "fp8"},  # the log's weights are the catalog's bf16
        {"gpu": "h200-141gb"},
        {"model": "llama-3.1-8b"},
    ):
        assert _capacity(client, {**question, **other})["calibrated_from"] is None, other
    # a pool the caller gives wins over any calibration
    given = _capacity(client, {**question, "kv_pool_bytes": 40 * GIB})
    assert given["calibrated_from"] is None
    assert given["kv_pool_bytes"] == 40 * GIB


def test_the_post_answer_and_tables_say_which_calibration(client: TestClient) -> None:
    stored = _calibrate(client, LLAMA)
    question = _question(LLAMA, "llama-3.1-8b-instruct")
    posted = client.post("/v1/capacity", json=question).json()
    assert posted["calibrated_from"]["calibration_id"] == stored["id"]
    assert posted["calibrated_from"]["measured"] == {
        "weights": bytes_of("14.99", GIB),
        "activation_peak": bytes_of("1.89", GIB),
        "non_torch": bytes_of("0.25", GIB),
        "cudagraph": bytes_of("0.91", GIB),
    }
    table = client.get("/v1/capacity", params={**question, "format": "csv"}).text
    (columns,) = list(csv.DictReader(io.StringIO(table)))
    assert columns["calibration_id"] == str(stored["id"])
    assert columns["kv_cache_tokens"] == "476016"
    assert "calibrated_from" not in columns


def test_a_config_json_calibration_matches_questions_with_that_config(client: TestClient) -> None:
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
    text = LLAMA["quote"].replace("meta-llama/Llama-3.1-8B-Instruct", "my-finetune")
    created = client.post(
        "/v1/calibrations", json={"log": text, "hf_config": hf_config}, headers=ADMIN
    )
    assert created.status_code == 201, created.text
    assert created.json()["model"].startswith("sha256:")
    question = _question(LLAMA, "unused")
    question["model"] = {"hf_config": hf_config}
    answer = client.post("/v1/capacity", json=question).json()
    assert answer["calibrated_from"]["calibration_id"] == created.json()["id"]
    assert answer["kv_cache_tokens"] == 476_016
    # another config (a key added) is another model
    question["model"] = {"hf_config": {**hf_config, "rope_theta": 500000.0}}
    assert client.post("/v1/capacity", json=question).json()["calibrated_from"] is None


def test_writes_need_an_admin_token_before_the_body_is_read(client: TestClient) -> None:
    problem(client.post("/v1/calibrations", content=LLAMA["quote"], headers=TEXT), 401)
    problem(client.post("/v1/calibrations", content=b"\xff" * 10, headers=TEXT), 401)
    problem(client.delete("/v1/calibrations/1", headers={"If-Match": '"1"'}), 401)


def test_one_calibration_per_deployment(client: TestClient) -> None:
    first = _calibrate(client, LLAMA)
    again = client.post("/v1/calibrations", json={"log": LLAMA["quote"]}, headers=ADMIN)
    body = problem(again, 409)
    assert body["calibration_id"] == first["id"]
    # another utilization is the same deployment: its pool follows from the stored one
    other = LLAMA["quote"].replace("0.95", "0.9")
    problem(client.post("/v1/calibrations", json={"log": other}, headers=ADMIN), 409)


def test_a_log_kvplan_cannot_predict_is_not_calibrated(client: TestClient) -> None:
    no_model = LLAMA["quote"].replace("meta-llama/Llama-3.1-8B-Instruct", "my-finetune")
    body = problem(client.post("/v1/calibrations", json={"log": no_model}, headers=ADMIN), 422)
    assert body["field"] == "model"
    body = problem(client.post("/v1/calibrations", content="hello", headers={**ADMIN, **TEXT}), 422)
    assert body["type"] == "/problems/log-not-recognised"
    # a log that prints its settings but no pool, blocks or tokens
    settings_only = "\n".join(
        line
        for line in LLAMA["quote"].split("\n")
        if "non-default args" in line or "version" in line
    )
    body = problem(
        client.post(
            "/v1/calibrations",
            content=settings_only,
            headers={**ADMIN, **TEXT},
            params={"gpu": "h100-sxm-80gb"},
        ),
        422,
    )
    assert "nothing to calibrate" in body["detail"]


def test_list_show_and_delete_with_etags(client: TestClient) -> None:
    names = sorted(LOGS)[:3]
    ids = [_calibrate(client, _entry_of(name))["id"] for name in names]
    page = client.get("/v1/calibrations", params={"limit": 2})
    assert page.status_code == 200
    first = page.json()
    assert [item["id"] for item in first["items"]] == ids[:2]
    assert page.headers["link"] == f'<{first["next"]}>; rel="next"'
    rest = client.get(first["next"]).json()
    assert [item["id"] for item in rest["items"]] == ids[2:]
    assert rest["next"] is None
    problem(client.get("/v1/calibrations", params={"cursor": "not-a-cursor"}), 422)
    only_qwen = client.get("/v1/calibrations", params={"model": "qwen3-30b-a3b"}).json()
    assert [item["model"] for item in only_qwen["items"]] in ([], ["qwen3-30b-a3b"])

    one = client.get(f"/v1/calibrations/{ids[0]}")
    assert one.headers["etag"] == '"1"'
    assert (
        client.get(f"/v1/calibrations/{ids[0]}", headers={"If-None-Match": '"1"'}).status_code
        == 304
    )
    problem(client.get("/v1/calibrations/999999"), 404)

    path = f"/v1/calibrations/{ids[0]}"
    problem(client.delete(path, headers=ADMIN), 428)
    problem(client.delete(path, headers={**ADMIN, "If-Match": '"2"'}), 412)
    assert client.delete(path, headers={**ADMIN, "If-Match": '"1"'}).status_code == 204
    problem(client.get(path), 404)
    problem(client.delete(path, headers={**ADMIN, "If-Match": '"1"'}), 404)


def test_a_deleted_calibration_no_longer_answers(client: TestClient) -> None:
    stored = _calibrate(client, LLAMA)
    question = _question(LLAMA, "llama-3.1-8b-instruct")
    assert _capacity(client, question)["calibrated_from"] is not None
    client.delete(f"/v1/calibrations/{stored['id']}", headers={**ADMIN, "If-Match": '"1"'})
    assert _capacity(client, question)["calibrated_from"] is None


def test_a_question_may_name_its_calibration(client: TestClient) -> None:
    # the hook a deployment profile can use: `calibration_id` on the capacity question
    stored = _calibrate(client, LLAMA)
    catalog = client.app.state.catalog.get()  # type: ignore[attr-defined]
    fields = CapacityFields.model_validate(
        {k: v for k, v in _question(LLAMA, "x").items() if k not in ("model", "gpu")}
    )
    named = planning.capacity(
        CapacityQuestion(
            "llama-3.1-8b-instruct", "h100-sxm-80gb", fields, calibration_id=stored["id"]
        ),
        catalog,
    )
    assert named.calibrated_from is not None
    assert named.kv_cache_tokens == 476_016
    other = fields.model_copy(update={"tensor_parallel_size": 2})
    with pytest.raises(Exception, match="tensor_parallel_size 1, the question 2") as raised:
        planning.capacity(
            CapacityQuestion(
                "llama-3.1-8b-instruct", "h100-sxm-80gb", other, calibration_id=stored["id"]
            ),
            catalog,
        )
    assert getattr(raised.value, "field", None) == "calibration_id"


def test_a_plan_sizes_the_calibrated_layout_with_its_measured_pool(client: TestClient) -> None:
    stored = _calibrate(client, LLAMA)
    body = {
        "model": "llama-3.1-8b-instruct",
        "gpus": ["h100-sxm-80gb"],
        "max_model_len": 8192,
        "peak_concurrency": 200,
        "engine_version": "0.19.0",
        "gpu_memory_utilization": 0.95,
        "max_alternatives": 8,
    }
    answer = client.post("/v1/plans", json=body)
    assert answer.status_code == 200, answer.text
    options = [answer.json()["recommendation"], *answer.json()["alternatives"]]
    by_tp = {option["tensor_parallel_size"]: option for option in options}
    one = by_tp[1]
    assert one["calibrated_from"]["calibration_id"] == stored["id"]
    assert (one["kv_cache_tokens"], one["num_gpu_blocks"]) == (476_016, 29_751)
    # 200 sequences of 512 blocks in 29,750 usable blocks (the null block is never handed
    # out): ceil(200 x 512 / 29,750) = 4 replicas, 58 sequences each
    assert one["replicas"] == math.ceil(200 * 512 / 29_750) == 4
    assert one["sequences_per_replica"] == 29_750 // 512 == 58
    # the flags to paste keep the utilization the pool was measured for
    assert "--gpu-memory-utilization 0.95" in one["engine_flags"]["vllm"]
    # no log measured two GPUs per replica: kvplan's own estimate there
    assert by_tp[2]["calibrated_from"] is None
    table = client.post("/v1/plans", json=body, headers={"accept": "text/csv"}).text
    rows = list(csv.DictReader(io.StringIO(table)))
    assert "calibrated_from" not in rows[0]
    ids = {row["tensor_parallel_size"]: row["calibration_id"] for row in rows}
    assert ids["1"] == str(stored["id"])
    assert ids["2"] == ""
