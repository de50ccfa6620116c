"""A plan never pastes flags for an engine kvplan did not size or simulate for the model.

Issue 20: a vLLM plan for DeepSeek-V4 offered SGLang flags (`--kv-cache-dtype fp8_ds_mla`,
vLLM's max_num_seqs) though kvplan refuses SGLang for DeepSeek-V4 (engines/unmodelled.py), and
a plan for a rate, whose replicas are vLLM's scheduler's (planning/rate.py), offered them too.
Every door (POST and GET /v1/plans, CSV, `kvplan plan`) now leaves them out by name.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.planning.test_plan_for_rate import RATE_BODY

V4 = {
    "model": "deepseek-v4-flash",
    "max_model_len": 32768,
    "peak_concurrency": 16,
    "gpus": ["b300", "h200-141gb"],
    "explain": False,
}
SGLANG_REFUSED = "no SGLang flags in any option (sglang left out of engine_flags)"


def options(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [answer["recommendation"], *answer["alternatives"]]


def test_a_deepseek_v4_plan_has_vllm_flags_only_and_says_why(client: TestClient) -> None:
    response = client.post("/v1/plans", json=V4)
    assert response.status_code == 200, response.text
    answer = response.json()
    for option in options(answer):
        assert list(option["engine_flags"]) == ["vllm"], option["engine_flags"]
        assert "--kv-cache-dtype fp8" in option["engine_flags"]["vllm"]
    (said,) = [w for w in answer["warnings"] if w.startswith(SGLANG_REFUSED)]
    assert "DeepSeek-V4's compressed sparse attention" in said
    # the same refusal a capacity question for SGLang gets
    refused = client.get(
        "/v1/capacity",
        params={"model": "deepseek-v4-flash", "gpu": "b300", "max_model_len": 32768,
                "engine": "sglang"},
    )  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["field"] == "engine"


def test_the_spreadsheet_door_leaves_the_sglang_columns_empty(client: TestClient) -> None:
    query = {**V4, "gpus": ",".join(V4["gpus"]), "format": "csv"}
    response = client.get("/v1/plans", params=query)
    assert response.status_code == 200, response.text
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert rows
    assert all(r["vllm_flags"] and r["sglang_flags"] == "" for r in rows)
    assert "no SGLang flags in any option" in response.headers["Kvplan-Warnings"]


def test_a_model_sglang_can_size_keeps_both_engines_flags(client: TestClient) -> None:
    question = {**V4, "model": "llama-3.1-8b", "max_model_len": 8192}
    answer = client.post("/v1/plans", json=question).json()
    for option in options(answer):
        assert sorted(option["engine_flags"]) == ["sglang", "vllm"]
    assert not [w for w in answer["warnings"] if "left out of engine_flags" in w]


def test_a_plan_for_a_rate_pastes_vllm_flags_only(client: TestClient) -> None:
    response = client.post("/v1/plans", json=RATE_BODY)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert all(list(o["engine_flags"]) == ["vllm"] for o in options(answer))
    (said,) = [w for w in answer["warnings"] if w.startswith(SGLANG_REFUSED)]
    assert "simulates vllm's scheduler" in said
    # asked of SGLang, its scheduler is simulated and vLLM's flags are the ones left out
    sglang = client.post("/v1/plans", json={**RATE_BODY, "engine": "sglang"}).json()
    assert all(list(o["engine_flags"]) == ["sglang"] for o in options(sglang))
    (said,) = [w for w in sglang["warnings"] if "(vllm left out of engine_flags)" in w]
    assert "simulates sglang's scheduler" in said


def test_a_dp_expert_parallel_option_says_which_engine_it_leaves_out(
    client: TestClient,
) -> None:
    question = {
        "model": "deepseek-v3",
        "gpus": ["h200-141gb"],
        "max_model_len": 32768,
        "peak_concurrency": 256,
        "explain": False,
    }
    answer = client.post("/v1/plans", json=question).json()
    dp8 = next(o for o in options(answer) if o["data_parallel_size"] == 8)
    assert list(dp8["engine_flags"]) == ["vllm"]
    assert any("no sglang flags for this layout" in w for w in dp8["warnings"])
    tp = next(o for o in options(answer) if o["data_parallel_size"] == 1)
    assert sorted(tp["engine_flags"]) == ["sglang", "vllm"]


def test_the_shell_says_the_same(client: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--offline", "--model", "deepseek-v4-flash", "--max-model-len", "32768"]
    args += ["--peak-concurrency", "16", "--gpu", "b300", "--gpu", "h200-141gb", "--no-explain"]
    assert main([*args, "--format", "json"]) == 0
    shell = json.loads(capsys.readouterr().out)
    http = client.post("/v1/plans", json=V4).json()
    assert shell["recommendation"]["engine_flags"] == http["recommendation"]["engine_flags"]
    assert [w for w in shell["warnings"] if w.startswith(SGLANG_REFUSED)]
    assert main([*args, "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "vllm flags:" in table
    assert "sglang flags" not in table
    assert f"warning: {SGLANG_REFUSED}" in table


def test_the_other_engines_flags_past_its_limit_name_its_override(client: TestClient) -> None:
    # Llama-3.1-8B's config.json: max_position_embeddings 131,072, rope_type llama3 (which
    # neither engine scales): both derive 131,072 (service/sizing/model/context_limit.py).
    question = {
        "model": "llama-3.1-8b",
        "max_model_len": 1_000_000,
        "peak_concurrency": 4,
        "gpus": ["mi300x", "h200-141gb"],
        "allow_long_max_model_len": True,
        "explain": False,
    }
    answer = client.post("/v1/plans", json=question).json()
    assert "--context-length 1000000" in answer["recommendation"]["engine_flags"]["sglang"]
    assert (
        "SGLang flags: --context-length 1000000 is above the 131072 tokens SGLang derives from "
        "the model's config; SGLang refuses it at start-up unless "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 is set"
    ) in answer["warnings"]
    # vLLM's own override is the plan's first warning
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in answer["warnings"][0]
    within = client.post("/v1/plans", json={**question, "max_model_len": 131_072}).json()
    assert not [w for w in within["warnings"] if w.startswith("SGLang flags:")]


def test_plan_level_facts_are_said_at_the_top(client: TestClient) -> None:
    # A release newer than kvplan models: every option is sized as the newest modelled one.
    question = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 16,
        "gpus": ["l4", "h100-sxm-80gb"],
        "engine_version": "0.99.0",
        "explain": False,
    }
    answer = client.post("/v1/plans", json=question).json()
    newer = [w for w in answer["warnings"] if w.startswith("vLLM 0.99.0 is newer than")]
    assert len(newer) == 1
    assert all(newer[0] in o["warnings"] for o in options(answer))
    # A GPU given by its bytes alone: the catalog GPU whose engine defaults it was sized with
    # (85,048,803,328 B is within the driver spread of h100-sxm-80gb's 85,051,089,879 B), or
    # that an unnamed GPU's were assumed (2^36 + 2^34 B = 80 GiB is no catalog total).
    for total, said in [
        (85_048_803_328, "is the runtime-reported total of h100-sxm-80gb"),
        (80 * 2**30, "the engine defaults of an unnamed GPU of that size are assumed"),
    ]:
        asked = {**question, "engine_version": None, "gpus": ["l4", {"memory_bytes": total}]}
        warnings = client.post("/v1/plans", json=asked).json()["warnings"]
        assert [w for w in warnings if w.startswith("gpus.1: ") and said in w], warnings


def test_a_table_of_questions_says_it_in_the_row(client: TestClient) -> None:
    body = "model,max_model_len,peak_concurrency,gpus\ndeepseek-v4-flash,32768,16,b300\n"
    response = client.post(
        "/v1/plans",
        content=body,
        headers={"content-type": "text/csv", "accept": "text/csv"},
    )
    assert response.status_code == 200, response.text
    (row,) = list(csv.DictReader(io.StringIO(response.text)))
    assert row["status"] == "ok"
    assert row["vllm_flags"]
    assert row["sglang_flags"] == ""
    assert SGLANG_REFUSED in row["warnings"]


def test_the_shells_csv_says_it_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--offline", "--model", "deepseek-v4-flash", "--max-model-len", "32768"]
    args += ["--peak-concurrency", "16", "--gpu", "b300", "--no-explain", "--format", "csv"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows
    assert all(r["sglang_flags"] == "" for r in rows)
    assert f"warning: {SGLANG_REFUSED}" in err


def test_a_plan_for_a_rate_across_nodes_gives_every_nodes_vllm_flags(client: TestClient) -> None:
    # Llama-3.1-405B's bf16 weights (about 810 GB) exceed 8 x 80 GB: only pipeline stages
    # across nodes hold it, so each option has node_flags; SGLang's are left out of them too.
    question = {
        "model": "llama-3.1-405b",
        "max_model_len": 8192,
        "gpus": ["h100-sxm-80gb"],
        "workload": {
            "request_rate": 0.5,
            "input_tokens": 1000,
            "output_tokens": 100,
            "num_requests": 50,
        },
        "ttft_p99_ms": 100_000,
        "tpot_p99_ms": 1000,
        "explain": False,
    }
    response = client.post("/v1/plans", json=question)
    assert response.status_code == 200, response.text
    best = response.json()["recommendation"]
    pp = best["pipeline_parallel_size"]
    assert pp >= 2
    assert list(best["node_flags"]) == ["vllm"]
    assert len(best["node_flags"]["vllm"]) == pp
    assert list(best["engine_flags"]) == ["vllm"]


def test_a_tensorrt_llm_plan_says_its_flags_are_the_other_engines_spellings(
    client: TestClient,
) -> None:
    question = {**V4, "model": "llama-3.1-8b", "max_model_len": 8192, "engine": "trtllm"}
    answer = client.post("/v1/plans", json=question).json()
    assert sorted(answer["recommendation"]["engine_flags"]) == ["sglang", "vllm"]
    (said,) = [w for w in answer["warnings"] if w.startswith("engine trtllm:")]
    assert "kvplan writes no trtllm-serve command yet" in said
