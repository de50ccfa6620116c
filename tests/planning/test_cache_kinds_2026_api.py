"""POST /v1/capacity with the published config.json of Kimi-K3, MiniMax-M3 and DeepSeek-V4,
verbatim (tests/fixtures/hf_configs, SOURCES.md), as a user pasting them would ask.

The arithmetic is worked in tests/sizing/test_cache_kinds_2026.py; here the same numbers come
back over HTTP. The pool is given (kv_pool_bytes, as "Available KV cache memory" from a log):
MiniMax-M3's and DeepSeek-V4's weights have no parameter-count rules yet (Kimi-K3's are counted
in tests/sizing/test_param_count_2026.py), and the per-token facts are the point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
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


def test_deepseek_v4_is_refused_by_name_with_its_bytes(client: TestClient) -> None:
    response = ask(client, "deepseek-ai--DeepSeek-V4-Pro", tensor_parallel_size=8)
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "/problems/unknown-layer-kind"
    assert problem["field"].endswith("compress_ratios")
    # V4-Pro at 2^20 tokens in fp8_ds_mla (584-B rows, 132-B indexer keys): windows 61 x 128
    # x 584, C4 30 x 262,144 x 716, C128 31 x 8,192 x 584, compressor states 30 x 81,920 +
    # 31 x 524,288 B.
    fp8 = 61 * 128 * 584 + 30 * 262_144 * 716 + 31 * 8192 * 584 + 30 * 81_920 + 31 * 524_288
    assert f"holds {fp8} B as vLLM stores it" in problem["detail"]


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
