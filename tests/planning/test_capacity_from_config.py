"""POST /v1/capacity with a config.json exactly as published, and nothing else about the model.

The config is tests/fixtures/hf_configs/Qwen--Qwen2.5-7B.json (source in SOURCES.md there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

CONFIG = (
    Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs" / "Qwen--Qwen2.5-7B.json"
)


def published_config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CONFIG.read_text(encoding="utf-8"))
    return data


def test_a_published_config_alone_sizes_the_weights(client: TestClient) -> None:
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": published_config()},
            "gpu": "h100-sxm-80gb",
            "max_model_len": 8192,
            "engine_version": "0.20.0",
        },
    )
    assert response.status_code == 200, response.text
    per_gpu = response.json()["explanation"]["per_gpu"]
    # Qwen2.5-7B, bf16: 28 layers of q/o 3584 x 3584, k/v 512 x 3584 with q/k/v biases
    # (3584 + 512 + 512), gated MLP 3 x 3584 x 18944, two norms; embeddings and an untied
    # lm_head of 152064 x 3584; a final norm.
    layer = 2 * 3584 * 3584 + 2 * 512 * 3584 + (3584 + 512 + 512) + 3 * 3584 * 18944 + 2 * 3584
    parameters = 28 * layer + 2 * 152_064 * 3584 + 3584
    assert parameters == 7_615_616_512
    assert per_gpu["weights_bytes_total"] == 2 * parameters


def test_given_weights_still_win(client: TestClient) -> None:
    response = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": published_config(), "weight_bytes": 16_000_000_000},
            "gpu": "h100-sxm-80gb",
            "max_model_len": 8192,
            "engine_version": "0.20.0",
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["explanation"]["per_gpu"]["weights_bytes_total"] == 16_000_000_000
