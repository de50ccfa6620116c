"""A config.json as published is enough: a missing fact blocks only the answers that need it.

The config is alibaba/Logics-Thinking's `model/config.json`, verbatim
(tests/fixtures/hf_configs/SOURCES.md): a Qwen-style language model (36 layers, 8 KV heads of
128, bf16) inside a vision model whose parameter count kvplan has no rules for
(model_type `logics`). Its KV cache is sizable; its weights are not.
"""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from tests.helpers import problem

CONFIG = json.loads(
    (Path(__file__).parent.parent / "fixtures/hf_configs/alibaba--Logics-Thinking.json").read_text()
)
GiB = 2**30
ASK = {"model": {"hf_config": CONFIG}, "gpu": "h100-sxm-80gb", "max_model_len": 8192}


def test_a_given_pool_is_answered_without_the_weights(client: TestClient) -> None:
    answer = client.post("/v1/capacity", json={**ASK, "kv_pool_bytes": 20 * GiB})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    # 2 (K and V) x 36 layers x 8 KV heads x 128 x 2 B (bf16) = 147,456 B per token.
    assert body["kv_bytes_per_token"] == 147_456
    # ... x 8,192 tokens = 1,207,959,552 B per sequence.
    assert body["kv_bytes_per_sequence"] == 1_207_959_552
    # vLLM 0.33 (docs/engines/vllm.md#null-block-and-the-fit-check): blocks of 16 tokens =
    # 2,359,296 B; 21,474,836,480 // 2,359,296 = 9,102 blocks, one kept as the null block;
    # 8,192 / 16 = 512 blocks a sequence: 9,101 // 512 = 17.
    assert body["num_gpu_blocks"] == 9_102
    assert body["max_num_seqs"] == 17
    assert any("weights unknown" in w and "model_type" in w for w in body["warnings"])


def test_without_a_pool_the_problem_names_what_the_weights_needed(client: TestClient) -> None:
    answer = client.post("/v1/capacity", json=ASK)
    problem(answer, 422)
    assert answer.json()["field"] == "model.hf_config.model_type"
    assert "kv_pool_bytes" in answer.json()["detail"]
