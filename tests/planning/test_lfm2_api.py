"""POST /v1/capacity with LiquidAI LFM2-350M's published config.json, verbatim
(tests/fixtures/hf_configs/LiquidAI--LFM2-350M.json, SOURCES.md), as a user pasting it asks.

The layers are worked in tests/sizing/test_hf_hybrids.py (vLLM 0.33.0 models/lfm2.py); here the
same numbers come back over HTTP. The pool is given (kv_pool_bytes, as "Available KV cache
memory" from a log), so these numbers do not move with the memory model; LFM2's weights are
counted in tests/sizing/test_param_count_2026.py (354,483,968, LiquidAI's figure).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GiB = 2**30


def ask(client: TestClient, **question: Any) -> Any:
    body = {
        "model": {"hf_config": json.loads((FIXTURES / "LiquidAI--LFM2-350M.json").read_text())},
        "gpu": "h100-sxm-80gb",
        "engine_version": "0.33.0",
        "max_model_len": 8192,
        "kv_pool_bytes": 10 * GiB,
        **question,
    }
    return client.post("/v1/capacity", json=body)


def test_lfm2_over_http(client: TestClient) -> None:
    response = ask(client)
    assert response.status_code == 200, response.text
    body = response.json()
    # 6 attention layers (full_attn_idxs 2, 5, 8, 10, 12, 14) x 2 x 64 (1,024 / 16 heads)
    # x 8 KV heads x 2 B (bfloat16) per token.
    assert body["kv_bytes_per_token"] == 12_288
    # + the 10 conv layers' state: (conv_L_cache 3 - 1) x conv_dim 1,024 x 2 B = 4,096 B each.
    assert body["kv_bytes_per_sequence"] == 12_288 * 8192 + 10 * 4096
    # vLLM 0.33.0 pages (docs/engines/vllm.md#lfm2-short-convolution-layers): an attention
    # page is 16 tokens x 2,048 B = 32,768 B, the conv state's 4,096 B is padded to it; layers
    # are grouped by 6 (the attention layers; the 10 conv layers make 2 groups of 5 + 1
    # padding), so a block is 6 x 32,768 = 196,608 B and 10 GiB holds 10,737,418,240 //
    # 196,608 = 54,613 blocks. A request holds 8,192 / 16 = 512 attention blocks + 2 state
    # blocks per conv group (prefix caching's "align" mode) = 516: 54,613 / 516 = 105.84x and
    # int(105.8391... x 8,192) = 867,034 tokens.
    assert body["num_gpu_blocks"] == 54_613
    assert body["max_concurrency"] == 105.84
    assert body["kv_cache_tokens"] == 867_034


@pytest.mark.parametrize("engine_name", ["sglang", "trtllm"])
def test_sglang_and_trtllm_refuse_lfm2_by_name(client: TestClient, engine_name: str) -> None:
    # Their newest modelled release (engine_version null): kvplan has not read their pools for
    # the conv state.
    response = ask(client, engine=engine_name, engine_version=None)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["field"] == "engine"
    assert "short-convolution" in problem["detail"]


def test_a_vllm_release_before_lfm2_is_refused_by_name(client: TestClient) -> None:
    # 0.11.1 is the oldest vLLM wheel read whose models/registry.py lists Lfm2ForCausalLM.
    response = ask(client, engine_version="0.10.2")
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["field"] == "engine_version"
    assert "LFM2" in problem["detail"]


def test_the_same_layers_given_inline_get_the_same_answer(client: TestClient) -> None:
    # LFM2-350M's layers written out as layer_specs / layer_schedule (conv, conv, attention,
    # ... as full_attn_idxs 2, 5, 8, 10, 12, 14 place them): the same pool and plan.
    model = {
        "num_attention_heads": 16,
        "layer_specs": {
            "short_conv": {"intermediate_size": 1024, "conv_kernel": 3},
            "full_attention": {"num_kv_heads": 8, "head_dim": 64},
        },
        "layer_schedule": [
            {"pattern": ["short_conv", "short_conv", "full_attention"], "repeat": 3},
            {"pattern": ["short_conv", "full_attention"], "repeat": 3},
            "short_conv",
        ],
    }
    inline = client.post(
        "/v1/capacity",
        json={
            "model": model,
            "gpu": "h100-sxm-80gb",
            "engine_version": "0.33.0",
            "max_model_len": 8192,
            "kv_pool_bytes": 10 * GiB,
        },
    )
    assert inline.status_code == 200, inline.text
    pasted = ask(client).json()
    for key in ("kv_bytes_per_token", "kv_bytes_per_sequence", "num_gpu_blocks"):
        assert inline.json()[key] == pasted[key]
    assert inline.json()["kv_cache_tokens"] == 867_034
