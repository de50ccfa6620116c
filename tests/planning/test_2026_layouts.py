"""Issue 19 part A: 2026 layouts sized from their config.json as published, over HTTP.

Each config is a file of tests/fixtures/hf_configs/ (SOURCES.md names the repository, path and
commit), POSTed to /v1/capacity as a user pastes it. The bytes beside each assertion are worked
by hand from the config's keys and the vLLM rule docs/engines/vllm.md names for the layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import problem

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"
GIB = 2**30


def _config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CONFIGS / name).read_text())
    return loaded


def _ask(client: TestClient, config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": config},
            "gpu": "h100-sxm-80gb",
            "engine_version": "0.33.0",
            "max_model_len": 8192,
            "kv_pool_bytes": 10 * GIB,
            **extra,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# XiaomiMiMo MiMo-V2-Flash config.json: hybrid_layer_pattern has 9 zeros (layers 0, 5, 11, 17,
# 23, 29, 35, 41, 47: full attention) and 39 ones (sliding). vLLM mimo_v2.py
# MiMoV2DecoderLayer.__init__: full layers keep num_key_value_heads 4 x (head_dim 192 +
# v_head_dim 128), sliding layers swa_num_key_value_heads 8 x (swa_head_dim 192 +
# swa_v_head_dim 128) over sliding_window_size 128 tokens; bf16 (2 B).
MIMO_FULL_TOKEN = 4 * (192 + 128) * 2  # 2,560 B per layer
MIMO_SLIDING_TOKEN = 8 * (192 + 128) * 2  # 5,120 B per layer


def test_mimo_v2_flash_full_and_sliding_layers_keep_their_own_heads(client: TestClient) -> None:
    body = _ask(client, _config("XiaomiMiMo--MiMo-V2-Flash.json"))
    assert MIMO_FULL_TOKEN == 2_560
    assert MIMO_SLIDING_TOKEN == 5_120
    # 9 x 2,560 + 39 x 5,120 = 23,040 + 199,680 = 222,720 B per token
    assert body["kv_bytes_per_token"] == 9 * MIMO_FULL_TOKEN + 39 * MIMO_SLIDING_TOKEN == 222_720
    # one 8,192-token sequence: the full layers hold all of it, the sliding ones 128 tokens:
    # 9 x 2,560 x 8,192 + 39 x 5,120 x 128 = 188,743,680 + 25,559,040 = 214,302,720 B
    assert body["kv_bytes_per_sequence"] == 9 * 2_560 * 8_192 + 39 * 5_120 * 128 == 214_302_720
    kinds = {
        row["kind"]: row for row in body["explanation"]["kv_bytes_per_sequence"]["by_layer_kind"]
    }
    assert kinds["full_attention"]["layers"] == 9
    assert kinds["sliding_attention"]["layers"] == 39
    assert kinds["sliding_attention"]["tokens_held"] == 128


def test_mimo_v2_flash_pages_are_unified_as_vllm_does(client: TestClient) -> None:
    # vLLM kv_cache_utils unify_kv_cache_spec_page_size: 16-token pages of 2,560 x 16 = 40,960
    # (full) and 5,120 x 16 = 81,920 B (sliding); the full layers take 32-token blocks so both
    # pages are 81,920 B. Groups hold 9 layers (the fewer kind's count): 1 full group and
    # ceil(39 / 9) = 5 sliding groups, 6 padding layers. A block is one page in each of the 9
    # layers of a group: 10 GiB // 81,920 // 9 = 131,072 // 9 = 14,563 blocks.
    body = _ask(client, _config("XiaomiMiMo--MiMo-V2-Flash.json"))
    assert body["num_gpu_blocks"] == 10 * GIB // 81_920 // 9 == 14_563
    assert "6 padding layers so every group has 9 layers" in body["warnings"]


def test_mimo_v2_flash_splits_each_kind_of_layer_heads_by_tensor_parallelism(
    client: TestClient,
) -> None:
    # TP 4: full layers 4 / 4 = 1 KV head, sliding layers 8 / 4 = 2 on each GPU:
    # 9 x 1 x 320 x 2 + 39 x 2 x 320 x 2 = 5,760 + 49,920 = 55,680 B per token per GPU.
    body = _ask(client, _config("XiaomiMiMo--MiMo-V2-Flash.json"), tensor_parallel_size=4)
    per_gpu = body["explanation"]["per_gpu"]["kv_bytes_per_token_per_gpu"]
    assert per_gpu == 9 * 1 * 320 * 2 + 39 * 2 * 320 * 2 == 55_680


@pytest.mark.parametrize(
    ("engine_version", "why"),
    [
        # read in each PyPI wheel (service/sizing/engines/vllm_diffkv.py)
        ("0.13.0", "has no MiMo-V2 model"),
        ("0.19.1", "padded V to the K head size"),
        ("0.31.0", "ran MiMo-V2's full layers with the config's 128-token sliding_window"),
    ],
)
def test_mimo_v2_flash_on_a_vllm_release_that_built_another_layout_is_refused(
    client: TestClient, engine_version: str, why: str
) -> None:
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": _config("XiaomiMiMo--MiMo-V2-Flash.json")},
            "gpu": "h100-sxm-80gb",
            "engine_version": engine_version,
            "max_model_len": 8192,
            "kv_pool_bytes": 10 * GIB,
        },
    )
    body = problem(response, 422)
    assert body["field"] == "engine_version"
    assert why in body["detail"]


def test_mimo_v2_flash_is_sized_from_vllm_0_32(client: TestClient) -> None:
    # 0.32.0 MiMoV2DecoderLayer clears cache_config.sliding_window: the layout worked above.
    body = _ask(client, _config("XiaomiMiMo--MiMo-V2-Flash.json"), engine_version="0.32.0")
    assert body["kv_bytes_per_sequence"] == 214_302_720


def test_mimo_v2_flash_is_refused_for_tensorrt_llm_by_name(client: TestClient) -> None:
    # TensorRT-LLM's KV cache keeps one head size for K and V; no release kvplan models runs
    # MiMo-V2 (docs/engines/vllm.md#mimo-v2-flash-full-and-sliding-layers-of-their-own).
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": _config("XiaomiMiMo--MiMo-V2-Flash.json")},
            "gpu": "h100-sxm-80gb",
            "engine": "trtllm",
            "max_model_len": 8192,
            "kv_pool_bytes": 10 * GIB,
        },
    )
    body = problem(response, 422)
    assert "K heads of 192 beside V heads of 128" in body["detail"]


def test_mimo_v2_flash_on_sglang_keeps_k_and_v_of_their_own_sizes(client: TestClient) -> None:
    # sgl-project/sglang python/sglang/srt/mem_cache/swa_memory_pool.py SWAKVPool: the SWA
    # pool is built with swa_head_num / swa_head_dim / swa_v_head_dim, the full pool with
    # head_num / head_dim / v_head_dim, so K and V keep their own sizes as in vLLM: the same
    # 222,720 B per token and 214,302,720 B per 8,192-token sequence (worked above).
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": _config("XiaomiMiMo--MiMo-V2-Flash.json")},
            "gpu": "h100-sxm-80gb",
            "engine": "sglang",
            "max_model_len": 8192,
            "kv_pool_bytes": 10 * GIB,
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["kv_bytes_per_token"] == 222_720
    assert response.json()["kv_bytes_per_sequence"] == 214_302_720


def test_step_3_7_flash_as_aiconfigurator_keeps_it(client: TestClient) -> None:
    # stepfun-ai Step-3.7-Flash (aiconfigurator's copy, SOURCES.md): 45 layers of 8 KV heads x
    # 128, layer_types: 12 full (every 4th from 0) and 33 sliding over 512 tokens; bf16.
    # 45 x 8 x (128 + 128) x 2 = 184,320 B per token: vLLM's figure issue 19 quotes (one
    # eighth of the 1,474,560 that 64 query heads would give).
    body = _ask(client, _config("stepfun-ai--Step-3.7-Flash.json"))
    assert body["kv_bytes_per_token"] == 45 * 8 * 256 * 2 == 184_320
    # 12 x 4,096 x 8,192 + 33 x 4,096 x 512 = 402,653,184 + 69,206,016 = 471,859,200 B
    assert body["kv_bytes_per_sequence"] == 12 * 4_096 * 8_192 + 33 * 4_096 * 512 == 471_859_200
    # equal pages (4,096 x 16 = 65,536 B), groups of 12: 1 full + 3 sliding groups (3 padding
    # layers); 10 GiB // 65,536 // 12 = 163,840 // 12 = 13,653 blocks.
    assert body["num_gpu_blocks"] == 10 * GIB // 65_536 // 12 == 13_653


def test_gemma_4_31b_global_layers_keep_their_own_heads_and_head_size(
    client: TestClient,
) -> None:
    # nvidia Gemma-4-31B-IT-NVFP4 config.json, text_config: 60 layers, layer_types 50 sliding
    # (num_key_value_heads 16 x head_dim 256, window 1024) and 10 full (num_global_key_value_heads
    # 4 x global_head_dim 512). Its quantization_config declares an fp8 KV cache, which vLLM
    # takes for --kv-cache-dtype auto (1 B per element):
    # 50 x 2 x 16 x 256 x 1 + 10 x 2 x 4 x 512 x 1 = 409,600 + 40,960 = 450,560 B per token.
    body = _ask(client, _config("nvidia--Gemma-4-31B-IT-NVFP4.json"))
    assert body["explanation"]["kv_bytes_per_token"]["element_bytes"] == 1
    assert body["kv_bytes_per_token"] == 50 * 2 * 16 * 256 + 10 * 2 * 4 * 512 == 450_560
    # in bf16, asked by name: twice that, 901,120 B (the catalog's gemma-4-31b-it)
    bf16 = _ask(client, _config("nvidia--Gemma-4-31B-IT-NVFP4.json"), kv_cache_dtype="bfloat16")
    assert bf16["kv_bytes_per_token"] == 2 * 450_560
