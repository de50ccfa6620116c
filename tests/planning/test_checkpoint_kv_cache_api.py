"""--kv-cache-dtype auto on a checkpoint that declares its KV cache, asked over HTTP.

The config is nvidia/Qwen3.6-27B-NVFP4's config.json verbatim (tests/fixtures/hf_configs,
SOURCES.md): quantization_config quant_method modelopt with kv_cache_scheme {dynamic false,
num_bits 8, type float}. Its 16 full-attention layers hold 4 KV heads x head_dim 256, so a token
is 2 (K, V) x 16 x 4 x 256 = 32,768 elements: 32,768 B in fp8, 65,536 B in bfloat16. The rules
and their releases: docs/engines/vllm.md#kv-cache-dtype-auto.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

CONFIG = Path(__file__).parent.parent / "fixtures" / "hf_configs" / "nvidia--Qwen3.6-27B-NVFP4.json"
POOL_BYTES = 43 * 2**30  # a given pool: the per-token figure is the point, not the budget


def _ask(client: TestClient, engine_version: str, **question: Any) -> dict[str, Any]:
    body = {
        "model": {"hf_config": json.loads(CONFIG.read_text())},
        "gpu": "h100-sxm-80gb",
        "engine_version": engine_version,
        "max_model_len": 131_072,
        "kv_pool_bytes": POOL_BYTES,
        **question,
    }
    answer = client.post("/v1/capacity", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_auto_is_the_declared_fp8_cache_from_vllm_0_14_and_the_answer_says_why(
    client: TestClient,
) -> None:
    # resolve_kv_cache_dtype_string (vllm/utils/torch_utils.py) is first in the 0.14.0 wheel.
    for version in ("0.14.0", "0.33.0"):
        body = _ask(client, version)
        assert body["kv_bytes_per_token"] == 32_768  # 32,768 elements x 1 B
        assert body["kv_cache_dtype"] == "fp8_e4m3"
        assert any("auto resolved to fp8_e4m3" in w for w in body["warnings"])


def test_auto_is_the_model_dtype_before_vllm_0_14(client: TestClient) -> None:
    # 0.13.0 has no resolve step: the modelopt KV scales load, the cache stays bfloat16.
    body = _ask(client, "0.13.0")
    assert body["kv_bytes_per_token"] == 65_536  # 32,768 elements x 2 B
    assert body["kv_cache_dtype"] == "auto"
    assert any("from 0.14.0 auto resolves to fp8_e4m3" in w for w in body["warnings"])


def test_an_explicit_bfloat16_flag_keeps_the_model_dtype(client: TestClient) -> None:
    # resolve_kv_cache_dtype_string returns any value but "auto" unchanged.
    body = _ask(client, "0.33.0", kv_cache_dtype="bfloat16")
    assert body["kv_bytes_per_token"] == 65_536
    assert not any("resolved to" in w for w in body["warnings"])


def test_the_catalog_model_takes_the_same_rule(client: TestClient) -> None:
    # The catalog record says checkpoint_kv_cache modelopt_fp8 for the same checkpoint.
    query = {
        "model": "qwen3.6-27b-nvfp4",
        "gpu": "h100-sxm-80gb",
        "engine_version": "0.33.0",
        "max_model_len": 131_072,
        "kv_pool_bytes": POOL_BYTES,
    }
    auto = client.get("/v1/capacity", params=query).json()
    older = client.get("/v1/capacity", params={**query, "engine_version": "0.13.0"}).json()
    assert auto["kv_bytes_per_token"] == 32_768
    assert older["kv_bytes_per_token"] == 65_536
