"""An NVFP4 checkpoint whose quantization is in `hf_quant_config.json` beside config.json (issue
21 item 6), on every door that takes a config.json: POST /v1/capacity, the plans, the CLI
`--hf-quant-config`, the model import.

The pair is nvidia/Qwen3-235B-A22B-NVFP4's, as github:ai-dynamo/aiconfigurator keeps them
(tests/fixtures/hf_quant_configs/SOURCES.md): config.json has no quantization_config, so vLLM
reads hf_quant_config.json as the config's quantization_config (transformers_utils/config.py
get_config): ModelOpt NVFP4, group 16, kv_cache_quant_algo FP8, the 94 routers and lm_head
excluded (model_executor/layers/quantization/modelopt.py ModelOptQuantConfigBase.from_config).

Weights by hand, per layer: the NVFP4 linears q 4,096 x 8,192, k and v 4,096 x 512, o 8,192 x
4,096 and 128 experts x 3 x 4,096 x 1,536: 71,303,168 + 2,415,919,104 = 2,487,222,272 values
at 4 bits plus one FP8 scale per 16 (9/16 B each) = 1,399,062,528 B, and two fp32 scalars
(weight_scale_2, input_scale) on each of the 388 linears = 3,104 B; in bf16 the router 128 x
4,096 (1,048,576 B) and the norms 2 x 4,096 + 2 x 128 (16,896 B): 1,400,131,104 B a layer, x 94
= 131,612,323,776 B; embeddings and lm_head 2 x 151,936 x 4,096 x 2 B = 2,489,319,424 B and the
final norm 8,192 B: 134,101,651,392 B. Without the file: 235,093,634,560 parameters x 2 B =
470,187,269,120 B. KV: 94 layers x 2 x 4 heads x 128 = 96,256 elements a token, at FP8 (vLLM
0.14+ gives `auto` the checkpoint's FP8) 96,256 B, at bf16 192,512 B.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.conftest import ADMIN
from tests.helpers import problem

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG_PATH = FIXTURES / "hf_configs" / "nvidia--Qwen3-235B-A22B-NVFP4.json"
QUANT_PATH = FIXTURES / "hf_quant_configs" / "nvidia--Qwen3-235B-A22B-NVFP4.json"
CONFIG: dict[str, Any] = json.loads(CONFIG_PATH.read_text())
QUANT: dict[str, Any] = json.loads(QUANT_PATH.read_text())
NVFP4_BYTES = 134_101_651_392
BF16_BYTES = 470_187_269_120
QUESTION = {"gpu": "b200", "max_model_len": 8192, "tensor_parallel_size": 4}


def _post(client: TestClient, model: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/v1/capacity", json={**QUESTION, "model": model})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _weights(body: dict[str, Any]) -> int:
    total: int = body["explanation"]["per_gpu"]["weights_bytes_total"]
    return total


def test_post_reads_the_pair_as_vllm_does(client: TestClient) -> None:
    paired = _post(client, {"hf_config": CONFIG, "hf_quant_config": QUANT})
    alone = _post(client, {"hf_config": CONFIG})
    assert _weights(paired) == NVFP4_BYTES
    assert _weights(alone) == BF16_BYTES
    assert paired["kv_bytes_per_token"] == 96_256
    assert paired["kv_cache_dtype"] == "fp8_e4m3"
    assert any("declares an FP8 KV cache (modelopt)" in w for w in paired["warnings"])
    assert alone["kv_bytes_per_token"] == 192_512
    # the same section written into config.json answers the same (what vLLM does with the file)
    merged = _post(client, {"hf_config": {**CONFIG, "quantization_config": QUANT}})
    assert merged["kv_pool_bytes"] == paired["kv_pool_bytes"]


def test_a_config_with_its_own_quantization_config_keeps_it_and_says_so(
    client: TestClient,
) -> None:
    fp8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}
    own = {**CONFIG, "quantization_config": fp8}
    body = _post(client, {"hf_config": own, "hf_quant_config": QUANT})
    assert _weights(body) == _weights(_post(client, {"hf_config": own}))
    assert any("hf_quant_config.json not read" in w for w in body["warnings"])


def test_a_file_that_is_no_hf_quant_config_is_refused_by_name(client: TestClient) -> None:
    model = {"hf_config": CONFIG, "hf_quant_config": {"producer": {"name": "modelopt"}}}
    body = problem(client.post("/v1/capacity", json={**QUESTION, "model": model}), 422)
    assert body["field"] == "model.hf_quant_config.quantization.quant_algo"


def test_plans_take_the_pair(client: TestClient) -> None:
    model = {"hf_config": CONFIG, "hf_quant_config": QUANT}
    question = {"model": model, "max_model_len": 8192, "peak_concurrency": 8, "gpus": ["b200"]}
    answer = client.post("/v1/plans", json=question)
    assert answer.status_code == 200, answer.text
    best = answer.json()["recommendation"]
    assert "--kv-cache-dtype fp8_e4m3" in best["engine_flags"]["vllm"]


def test_the_model_import_takes_the_pair(client: TestClient) -> None:
    body = {"hf_config": CONFIG, "hf_quant_config": QUANT, "slug": "qwen3-235b-nvfp4"}
    answer = client.post("/v1/models/import", json={**body, "dry_run": True}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert answer.json()["weight_bytes"] == NVFP4_BYTES
    bad = {**body, "hf_quant_config": {"quantization": {}}, "dry_run": True}
    refused = problem(client.post("/v1/models/import", json=bad, headers=ADMIN), 422)
    assert refused["field"] == "hf_quant_config.quantization.quant_algo"


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_the_cli_reads_the_file_beside_the_config(
    client: TestClient, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = ["capacity", "--offline", "--config", str(CONFIG_PATH), "--gpu", "b200"]
    shell += ["--max-model-len", "8192", "--tensor-parallel-size", "4", "--explain"]
    assert main([*shell, "--hf-quant-config", str(QUANT_PATH)]) == 0
    printed = json.loads(capsys.readouterr().out)
    asked = _post(client, {"hf_config": CONFIG, "hf_quant_config": QUANT})
    assert printed["kv_pool_bytes"] == asked["kv_pool_bytes"]
    assert _weights(printed) == NVFP4_BYTES
    # without --config it has nothing to sit beside
    alone = ["capacity", "--offline", "--model", "llama-3.1-8b", "--gpu", "b200"]
    assert main([*alone, "--hf-quant-config", str(QUANT_PATH)]) == 2
    assert json.loads(capsys.readouterr().err)["field"] == "hf_quant_config"
