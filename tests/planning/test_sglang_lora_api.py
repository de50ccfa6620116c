"""SGLang's LoRA pool (issue 21 item 3) through every door, with SGLang's own flag names:
--enable-lora, --max-loras-per-batch, --max-lora-rank, --lora-target-modules.

Four rank-16 slots on Llama-3.1-8B at TP 1, `all` targets (SGLang 0.5.23): 369,426,432 B of
A/B buffers (tests/sizing/test_sglang_lora.py works them module by module), taken from
rest_memory: the pool is that much smaller than without LoRA.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.helpers import problem

QUESTION: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "engine": "sglang",
    "engine_version": "0.5.23",
}
LORA: dict[str, Any] = {
    "enable_lora": True,
    "max_loras_per_batch": 4,
    "max_lora_rank": 16,
    "lora_target_modules": "all",
}
LORA_BYTES = 369_426_432


def _get(client: TestClient, params: dict[str, Any]) -> dict[str, Any]:
    answer = client.get("/v1/capacity", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_get_and_post_take_the_buffers_out_of_rest_memory(client: TestClient) -> None:
    plain = _get(client, QUESTION)
    got = _get(client, {**QUESTION, **LORA})
    posted = client.post("/v1/capacity", json={**QUESTION, **LORA}).json()
    assert plain["kv_pool_bytes"] - got["kv_pool_bytes"] == LORA_BYTES
    assert posted["kv_pool_bytes"] == got["kv_pool_bytes"]
    lines = posted["explanation"]["memory_budget"]["lines"]
    (line,) = [x for x in lines if x["name"] == "lora_adapters"]
    assert line["bytes"] == -LORA_BYTES
    assert "4 LoRA slot(s) of rank 16" in line["note"]


def test_the_csv_answer_and_the_plans_table_carry_them(client: TestClient) -> None:
    got = _get(client, {**QUESTION, **LORA})
    answer = client.get("/v1/capacity", params={**QUESTION, **LORA, "format": "csv"})
    (row,) = list(csv.DictReader(io.StringIO(answer.text)))
    assert row["kv_pool_bytes"] == str(got["kv_pool_bytes"])
    header = "model,max_model_len,peak_concurrency,gpus,engine,enable_lora,"
    header += "max_loras_per_batch,max_lora_rank,lora_target_modules"
    cells = "llama-3.1-8b,8192,8,h100-sxm-80gb,sglang,true,4,16,q_proj k_proj v_proj"
    table = client.post(
        "/v1/plans", content=f"{header}\n{cells}\n", headers={"Content-Type": "text/csv"}
    )
    assert table.status_code == 200, table.text
    assert ",ok," in table.text


def test_a_plan_pastes_sglangs_own_flags(client: TestClient) -> None:
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 8,
        "gpus": ["h100-sxm-80gb"],
        "engine": "sglang",
        **LORA,
    }
    answer = client.post("/v1/plans", json=body)
    assert answer.status_code == 200, answer.text
    flags = answer.json()["recommendation"]["engine_flags"]["sglang"]
    assert flags.endswith(
        "--enable-lora --max-loras-per-batch 4 --max-lora-rank 16 --lora-target-modules all"
    )


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_the_cli_asks_what_get_asks(
    client: TestClient, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = ["capacity", "--offline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]
    shell += ["--max-model-len", "8192", "--engine", "sglang", "--engine-version", "0.5.23"]
    shell += ["--enable-lora", "--max-loras-per-batch", "4", "--max-lora-rank", "16"]
    shell += ["--lora-target-modules", "all", "--no-explain"]
    assert main(shell) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["kv_pool_bytes"] == _get(client, {**QUESTION, **LORA})["kv_pool_bytes"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        # vLLM's spelling of the slots is vLLM's; SGLang's is SGLang's
        ({**QUESTION, **LORA, "max_loras": 4}, "max_loras"),
        ({**QUESTION, "engine": "vllm", **LORA}, "max_loras_per_batch"),
        # SGLang needs the rank and the modules without --lora-paths
        ({**QUESTION, "enable_lora": True, "max_lora_rank": 16}, "lora_target_modules"),
        # the flags without --enable-lora
        ({**QUESTION, "max_loras_per_batch": 4}, "max_loras_per_batch"),
        # kvplan reads no adapter
        ({**QUESTION, **LORA, "lora_paths": "a=/x"}, "lora_paths"),
    ],
)
def test_what_is_not_sized_is_refused_by_name(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    body = problem(client.get("/v1/capacity", params=params), 422)
    assert body["field"] == field


def test_the_modules_as_sglang_spells_them_and_as_a_csv_lists_them(
    client: TestClient, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # SGLang's own command line takes the modules as separate words (`--lora-target-modules
    # q_proj v_proj`, server_args.py nargs="*"), and a CSV cell lists items `;`-separated
    # (README "Spreadsheets"): both ask what GET's `q_proj,v_proj` asks, and the flags pasted
    # are SGLang's words
    targets = {**QUESTION, **LORA, "lora_target_modules": "q_proj,v_proj"}
    want = _get(client, targets)["kv_pool_bytes"]
    shell = ["capacity", "--offline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]
    shell += ["--max-model-len", "8192", "--engine", "sglang", "--engine-version", "0.5.23"]
    shell += ["--enable-lora", "--max-loras-per-batch", "4", "--max-lora-rank", "16"]
    shell += ["--lora-target-modules", "q_proj", "v_proj", "--no-explain"]
    assert main(shell) == 0
    assert json.loads(capsys.readouterr().out)["kv_pool_bytes"] == want
    header = "model,max_model_len,peak_concurrency,gpus,engine,engine_version,enable_lora,"
    header += "max_loras_per_batch,max_lora_rank,lora_target_modules"
    cells = "llama-3.1-8b,8192,8,h100-sxm-80gb,sglang,0.5.23,true,4,16,q_proj;v_proj"
    table = client.post(
        "/v1/plans", content=f"{header}\n{cells}\n", headers={"Content-Type": "text/csv"}
    )
    (row,) = list(csv.DictReader(io.StringIO(table.text)))
    assert row["status"] == "ok", row["error"]
    assert int(row["kv_pool_bytes"]) == want
    assert row["sglang_flags"].endswith("--lora-target-modules q_proj v_proj")
