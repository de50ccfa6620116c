"""POST /v1/capacity with the published config.json of Kimi-K3, MiniMax-M3, MiniMax-M1 and
DeepSeek-V4, verbatim (tests/fixtures/hf_configs, SOURCES.md), as a user pasting them would ask.

The arithmetic is worked in tests/sizing/test_cache_kinds_2026.py; here the same numbers come
back over HTTP. The pool is given (kv_pool_bytes, as "Available KV cache memory" from a log):
the per-token facts are the point (MiniMax-M1's weights are counted, but vLLM's MiniMax
loaded terms are not modelled, so its pool must be given; MiniMax-M3's pool is sized from its
weights in one test).
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

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
PRO = "deepseek-ai--DeepSeek-V4-Pro.json"
GiB = 2**30


def ask(client: TestClient, name: str, **question: Any) -> Any:
    body = {
        "model": {"hf_config": json.loads((FIXTURES / f"{name}.json").read_text())},
        "gpu": "h200-141gb",
        "engine_version": "0.33.0",
        "max_model_len": 131_072,
        "kv_pool_bytes": 40 * GiB,
        **question,
    }
    return client.post("/v1/capacity", json=body)


def test_kimi_k3_over_http(client: TestClient) -> None:
    response = ask(client, "moonshotai--Kimi-K3", tensor_parallel_size=8)
    assert response.status_code == 200, response.text
    body = response.json()
    # 24 MLA layers x 576 x 2 B; the 69 KDA layers keep a fixed state (6,512,640 B each at
    # TP 1: conv 110,592 x 2 B + recurrent 1,572,864 x 4 B).
    assert body["kv_bytes_per_token"] == 27_648
    assert body["kv_bytes_per_sequence"] == 27_648 * 131_072 + 69 * 6_512_640
    # TP 8: 768-token blocks of 24 pages of 884,736 B; 40 GiB // 21,233,664 B = 2,022 blocks;
    # a request holds 171 MLA blocks + 3 x 2 state blocks = 177: 2,022 / 177 = 11.42x, and
    # int(11.4237... x 131,072) = 1,497,330 tokens (0.21+: tokens = int(concurrency x M)).
    assert body["num_gpu_blocks"] == 2022
    assert body["max_concurrency"] == 11.42  # as the log prints it, %.2f
    assert body["kv_cache_tokens"] == 1_497_330


def test_minimax_m3_over_http(client: TestClient) -> None:
    response = ask(client, "MiniMaxAI--MiniMax-M3", tensor_parallel_size=4)
    assert response.status_code == 200, response.text
    body = response.json()
    # 3 dense layers x 2,048 B + 57 sparse layers x (2,048 + 256 B index key) per token.
    assert body["kv_bytes_per_token"] == 137_472
    # TP 4: 128-token pages of 128 x (3 x 512 + 57 x 768) = 5,799,936 B; 40 GiB holds 7,405;
    # a request holds 1,024: 7,405 / 1,024 = 7.23x, 947,840 tokens.
    assert body["num_gpu_blocks"] == 7405
    assert body["kv_cache_tokens"] == 947_840


def test_sglang_refuses_kda_by_name(client: TestClient) -> None:
    response = ask(
        client,
        "moonshotai--Kimi-K3",
        tensor_parallel_size=8,
        engine="sglang",
        engine_version="0.5.23",
    )
    assert response.status_code == 422
    assert response.json()["field"] == "engine"


def test_minimax_m3_weights_are_counted_and_the_catalog_agrees(client: TestClient) -> None:
    # No kv_pool_bytes: the pool now comes from the GPU less the weights, which kvplan counts
    # (param_count_2026.minimax_m3: 426,174,572,928 parameters, 852,349,145,856 B in bf16;
    # tests/sizing/test_param_count_2026.py). The catalog slug and the pasted config.json give
    # the same answer.
    base = {"gpu": "h200-141gb", "engine_version": "0.33.0", "max_model_len": 131_072}
    base["tensor_parallel_size"] = 8
    config = json.loads((FIXTURES / "MiniMaxAI--MiniMax-M3.json").read_text())
    pasted = client.post("/v1/capacity", json={"model": {"hf_config": config}, **base})
    named = client.post("/v1/capacity", json={"model": "minimax-m3", **base})
    assert pasted.status_code == named.status_code == 200, pasted.text + named.text
    a, b = pasted.json(), named.json()
    assert a["kv_bytes_per_token"] == b["kv_bytes_per_token"] == 137_472
    assert a["num_gpu_blocks"] == b["num_gpu_blocks"] > 0
    assert a["kv_cache_tokens"] == b["kv_cache_tokens"]
    # 852,349,145,856 B over TP 8: 106,543,643,232 B per GPU of the weights.
    weights = [body["explanation"]["per_gpu"]["weights_bytes_per_gpu"] for body in (a, b)]
    assert weights == [852_349_145_856 // 8] * 2 == [106_543_643_232] * 2


def test_minimax_m1_over_http_on_vllm_0_20(client: TestClient) -> None:
    # github:MiniMax-AI/MiniMax-M1 config.json verbatim; worked in
    # tests/sizing/test_cache_kinds_2026.py (test_minimax_m1_on_vllm_with_tp8_by_hand).
    response = ask(client, "MiniMaxAI--MiniMax-M1", engine_version="0.20.0", tensor_parallel_size=8)
    assert response.status_code == 200, response.text
    body = response.json()
    # 10 softmax layers x 2 x 8 KV heads x 128 x 2 B per token (the whole model).
    assert body["kv_bytes_per_token"] == 40_960
    # + 70 lightning states of 64 x 128 x 128 x 2 B = 146,800,640 B:
    # 40,960 x 131,072 + 146,800,640 = 5,368,709,120 + 146,800,640.
    assert body["kv_bytes_per_sequence"] == 5_515_509_760
    # Per rank: 512-token blocks (16 x ceil(262,144 / (16 x 512))), 8 groups of 10 layers of
    # 262,144-B pages = 2,621,440 B a block: 40 GiB / 2,621,440 = 16,384 blocks; a request
    # holds 256 + 7 = 263 of them: 16,384 / 263 = 62.30x; 0.20.0 reports 16,384 // 8 x 512.
    assert body["num_gpu_blocks"] == 16_384
    assert body["max_concurrency"] == 62.3
    assert body["kv_cache_tokens"] == 1_048_576
    # The same question as a CSV row (Accept: text/csv, the spreadsheet door).
    table = client.post(
        "/v1/capacity",
        headers={"Accept": "text/csv"},
        json={
            "model": {
                "hf_config": json.loads((FIXTURES / "MiniMaxAI--MiniMax-M1.json").read_text())
            },
            "gpu": "h200-141gb",
            "engine_version": "0.20.0",
            "tensor_parallel_size": 8,
            "max_model_len": 131_072,
            "kv_pool_bytes": 40 * GiB,
        },
    )
    assert table.status_code == 200, table.text
    assert table.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert len(rows) == 1
    assert rows[0]["kv_cache_tokens"] == "1048576"
    assert rows[0]["num_gpu_blocks"] == "16384"


def test_minimax_m1_without_a_pool_is_refused_naming_it(client: TestClient) -> None:
    # Its weights are counted now (912,210,767,872 B over TP 8 = 114,026,345,984 B a GPU:
    # tests/sizing/test_param_count_2026.py), but vLLM's float32 lm_head, float32 routers on
    # every rank and max_model_len-long rope cache are not modelled (engines/vllm.py
    # _refuse_minimax_loaded_terms): a pool from GPU memory is refused naming kv_pool_bytes.
    given = ask(
        client, "MiniMaxAI--MiniMax-M1", engine_version="0.20.0", tensor_parallel_size=8
    ).json()
    assert given["explanation"]["per_gpu"]["weights_bytes_per_gpu"] == 912_210_767_872 // 8
    assert 912_210_767_872 // 8 == 114_026_345_984
    refused = ask(
        client,
        "MiniMaxAI--MiniMax-M1",
        engine_version="0.20.0",
        tensor_parallel_size=8,
        kv_pool_bytes=None,
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "kv_pool_bytes"
    assert "float32 lm_head" in refused.json()["detail"]


def test_minimax_m1_given_inline_gets_the_same_answer(client: TestClient) -> None:
    # The same 80 layers written as layer_specs / layer_schedule: 7 lightning layers, then one
    # softmax layer, ten times.
    model = {
        "num_attention_heads": 64,
        "layer_specs": {
            "lightning_attention": {
                "num_key_heads": 64,
                "num_value_heads": 64,
                "key_head_dim": 128,
                "value_head_dim": 128,
            },
            "full_attention": {"num_kv_heads": 8, "head_dim": 128},
        },
        "layer_schedule": [
            {"pattern": ["lightning_attention"] * 7 + ["full_attention"], "repeat": 10}
        ],
    }
    base = {
        "gpu": "h200-141gb",
        "engine_version": "0.20.0",
        "tensor_parallel_size": 8,
        "max_model_len": 131_072,
        "kv_pool_bytes": 40 * GiB,
    }
    inline = client.post("/v1/capacity", json={"model": model, **base})
    pasted = ask(client, "MiniMaxAI--MiniMax-M1", **base)
    assert inline.status_code == pasted.status_code == 200, inline.text + pasted.text
    keys = ("kv_bytes_per_token", "kv_bytes_per_sequence", "num_gpu_blocks", "max_concurrency")
    assert {k: inline.json()[k] for k in keys} == {k: pasted.json()[k] for k in keys}


def test_minimax_m1_is_refused_by_name_where_no_engine_serves_it(client: TestClient) -> None:
    # vLLM 0.24.0's registry lists MiniMaxText01ForCausalLM as previously supported (0.23.0).
    for version in ("0.24.0", "0.33.0"):
        response = ask(client, "MiniMaxAI--MiniMax-M1", engine_version=version)
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["field"] == "engine_version"
        assert "no longer serves MiniMaxText01ForCausalLM" in problem["detail"]
    response = ask(client, "MiniMaxAI--MiniMax-M1", engine="sglang", engine_version=None)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "engine"
    assert "SGLang does not serve it" in response.json()["detail"]


def test_minimax_m1_from_the_shell_gives_the_http_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `kvplan capacity --config` with the same published file and question as
    # test_minimax_m1_over_http_on_vllm_0_20: the same blocks and concurrency.
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    code = main(
        [
            "capacity",
            "--offline",
            "--config",
            str(FIXTURES / "MiniMaxAI--MiniMax-M1.json"),
            "--gpu",
            "h200-141gb",
            "--engine-version",
            "0.20.0",
            "--tensor-parallel-size",
            "8",
            "--max-model-len",
            "131072",
            "--kv-pool-bytes",
            str(40 * GiB),
            "--no-explain",
        ]
    )
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["kv_bytes_per_token"] == 40_960
    assert body["kv_bytes_per_sequence"] == 5_515_509_760
    assert body["num_gpu_blocks"] == 16_384
    assert body["max_concurrency"] == 62.3
    # --engine-version 0.24.0: the same refusal by name, exit 2.
    refused = [
        "capacity",
        "--offline",
        "--config",
        str(FIXTURES / "MiniMaxAI--MiniMax-M1.json"),
        "--gpu",
        "h200-141gb",
        "--engine-version",
        "0.24.0",
        "--max-model-len",
        "8192",
        "--kv-pool-bytes",
        str(GiB),
    ]
    assert main(refused) == 2
    assert "no longer serves MiniMaxText01ForCausalLM" in capsys.readouterr().err
    # No --max-model-len: vLLM would take max_position_embeddings, 10,240,000, which is past
    # what kvplan sizes (10,000,000): refused naming the field and the model's length.
    assert main(refused[:-4] + refused[-2:]) == 2
    problem = json.loads(capsys.readouterr().err)
    assert problem["field"] == "max_model_len"
    assert "10240000 tokens" in problem["detail"]


def test_deepseek_v4_pro_over_http_on_vllm_0_26(client: TestClient) -> None:
    # vLLM 0.26.0's layer tuples (tests/sizing/test_vllm_deepseek_v4_log.py works the rules).
    # V4-Pro: 30 C4 + 31 C128 layers, every layer with a 64-token window block. Pages: C4
    # latent 64 x 584 = 37,376 -> 37,440 (576-B alignment), indexer 64 x 132 -> 8,640, C128
    # latent 2 x 584 -> 1,728, window 37,440, C4 state 32,832 padded to 37,440, C4 indexer
    # state 8,640, C128 state 37,440. Tuples: MLA 31 (1,728 x 31), window 61, C4 states 30,
    # C128 states 31 -> _approximate_gcd from 31 = 31: windows split 31 + 30.
    response = ask(
        client,
        "deepseek-ai--DeepSeek-V4-Pro",
        tensor_parallel_size=8,
        engine_version="0.26.0",
        kv_cache_dtype="fp8",
        max_num_batched_tokens=4096,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    # Per token: every 128 tokens add 30 x 32 C4 rows of 716 B + 31 C128 rows of 584 B =
    # 705,464 B, / 128 = 5,511.4 -> 5,512. One sequence of 131,072: windows 61 x 128 x 584 +
    # C4 30 x 32,768 x 716 + C128 31 x 1,024 x 584 + states 30 x 81,920 + 31 x 524,288.
    assert body["kv_bytes_per_token"] == 5512
    assert body["kv_bytes_per_sequence"] == (
        61 * 128 * 584 + 30 * 32_768 * 716 + 31 * 1024 * 584 + 30 * 81_920 + 31 * 524_288
    )
    # One block: 31 x 37,440 + 30 x 8,640 + 31 x 1,728 = 1,473,408 B; 40 GiB // that = 29,149.
    assert body["num_gpu_blocks"] == 29_149
    # A request (in flight 2 x 4,096 = 8,192 tokens): MLA 512 pages x 1,435,968 + windows 131 x
    # (1,160,640 + 1,123,200) + C4 states 2,051 x 1,382,400 + C128 states 1,041 x 1,160,640
    # = 5,077,927,296 B; / the MLA group's 1,435,968 -> 3,537 blocks. 29,149 / 3,537 = 8.24x;
    # int(8.24116... x 131,072) = 1,080,185 tokens.
    assert body["max_concurrency"] == 8.24
    assert body["kv_cache_tokens"] == 1_080_185
    # The explanation spreads each compressed row over the tokens it covers: C4 30 x 716 / 4 =
    # 5,370; C128 31 x 584 / 128 = 141.4 -> 142; 5,370 + 142 = 5,512, the answer's figure.
    per_token = body["explanation"]["kv_bytes_per_token"]
    assert [line["bytes_per_token"] for line in per_token["by_layer_kind"]] == [5370, 142]
    assert "DeepSeek-V4" in per_token["rule"]


def test_deepseek_v4_is_refused_by_name_before_vllm_0_20_and_by_sglang(client: TestClient) -> None:
    response = ask(client, "deepseek-ai--DeepSeek-V4-Pro", engine_version="0.19.0")
    assert response.status_code == 422
    assert response.json()["field"] == "engine_version"
    assert "arrived in 0.20.0" in response.json()["detail"]
    response = ask(client, "deepseek-ai--DeepSeek-V4-Pro", engine="sglang", engine_version="0.5.23")
    assert response.status_code == 422
    assert response.json()["field"] == "engine"
    assert "DeepSeek-V4" in response.json()["detail"]


def test_deepseek_v4_gets_the_same_answer_at_every_door(
    client: TestClient, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    # The pasted config (POST, JSON and CSV), its layers written out inline, and the CLI with
    # --hf-config: one answer (the V4-Pro figures of test_deepseek_v4_pro_over_http_on_vllm_0_26).
    question = {
        "engine_version": "0.26.0",
        "kv_cache_dtype": "fp8",
        "max_num_batched_tokens": 4096,
        "tensor_parallel_size": 8,
    }
    pasted = ask(client, "deepseek-ai--DeepSeek-V4-Pro", **question).json()
    assert pasted["kv_cache_tokens"] == 1_080_185
    as_csv = client.post(
        "/v1/capacity",
        json={
            "model": {
                "hf_config": json.loads(
                    FIXTURES.joinpath("deepseek-ai--DeepSeek-V4-Pro.json").read_text()
                )
            },
            "gpu": "h200-141gb",
            "max_model_len": 131_072,
            "kv_pool_bytes": 40 * GiB,
            **question,
        },
        headers={"Accept": "text/csv"},
    )
    assert as_csv.status_code == 200, as_csv.text
    assert "1080185" in as_csv.text
    # V4-Pro inline: 128, 128, (4, 128) x 29, 4 as compressed_sparse_attention specs.
    spec = {"sliding_window": 128, "index_head_dim": 128}
    inline = {
        "num_attention_heads": 128,
        "layer_specs": {
            "c4": {"kind": "compressed_sparse_attention", "compress_ratio": 4, **spec},
            "c128": {"kind": "compressed_sparse_attention", "compress_ratio": 128, **spec},
        },
        "layer_schedule": ["c128", "c128", {"pattern": ["c4", "c128"], "repeat": 29}, "c4"],
    }
    spelled = client.post(
        "/v1/capacity",
        json={
            "model": inline,
            "gpu": "h200-141gb",
            "max_model_len": 131_072,
            "kv_pool_bytes": 40 * GiB,
            **question,
        },
    )
    assert spelled.status_code == 200, spelled.text
    for key in ("kv_bytes_per_token", "kv_bytes_per_sequence", "num_gpu_blocks", "kv_cache_tokens"):
        assert spelled.json()[key] == pasted[key]
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    code = main(
        [
            "capacity",
            "--offline",
            "--hf-config",
            str(FIXTURES / PRO),
            "--gpu",
            "h200-141gb",
            "--max-model-len",
            "131072",
            "--engine-version",
            "0.26.0",
            "--kv-cache-dtype",
            "fp8",
            "--max-num-batched-tokens",
            "4096",
            "--tensor-parallel-size",
            "8",
            "--kv-pool-bytes",
            str(40 * GiB),
            "--no-explain",
        ]
    )
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["kv_cache_tokens"] == 1_080_185
    assert body["num_gpu_blocks"] == 29_149
