"""GET /v1/capacity for the catalog entries whose weights issue 19 taught kvplan to count
(service/catalog/data/models.json: kimi-k3, lfm2-350m; counts worked in
tests/sizing/test_param_count_2026.py). The per-token and per-sequence bytes are worked here by
hand; that the plans answer at all is the point: before the counts they could not be in the
catalog, whose every model must price its weights.
"""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def test_lfm2_350m_from_the_catalog(client: TestClient) -> None:
    response = client.get(
        "/v1/capacity?model=lfm2-350m&gpu=h100-sxm-80gb&engine_version=0.33.0&max_model_len=32768"
    )
    assert response.status_code == 200, response.text
    body = response.json()
    # 6 attention layers x 2 x 8 KV heads x 64 x 2 B (bf16) = 12,288 B per token.
    assert body["kv_bytes_per_token"] == 12_288
    # 32,768 tokens x 12,288 = 402,653,184 plus 10 conv layers' state of (conv_L_cache 3 - 1)
    # x conv_dim 1024 x 2 B = 40,960.
    assert body["kv_bytes_per_sequence"] == 32_768 * 12_288 + 10 * 2 * 1024 * 2 == 402_694_144
    assert body["fits"] is True


def test_kimi_k3_from_the_catalog(client: TestClient) -> None:
    # 1,553,000,604,864 B of weights do not fit 8 B200s (8 x 180 GB x 0.92): refused by name.
    refused = client.get(
        "/v1/capacity?model=kimi-k3&gpu=b200&engine_version=0.33.0&tensor_parallel_size=8"
        "&max_model_len=131072"
    )
    assert refused.status_code == 422
    assert refused.json()["title"] == "The weights leave no room for a KV cache"
    response = client.get(
        "/v1/capacity?model=kimi-k3&gpu=b200&engine_version=0.33.0&tensor_parallel_size=8"
        "&pipeline_parallel_size=2&max_model_len=131072"
    )
    assert response.status_code == 200, response.text
    body = response.json()
    # 24 MLA layers x (512 + 64) x 2 B = 27,648 B per token.
    assert body["kv_bytes_per_token"] == 27_648
    # 131,072 x 27,648 = 3,623,878,656 plus 69 KDA layers' state: recurrent 96 heads x 128 x
    # 128 x 4 B (float32) = 6,291,456 and q/k/v convs 3 x 12,288 x (4 - 1) x 2 B = 221,184.
    per_layer = 96 * 128 * 128 * 4 + 3 * 12_288 * 3 * 2
    assert body["kv_bytes_per_sequence"] == 131_072 * 27_648 + 69 * per_layer == 4_073_250_816


def test_kimi_k3_pasted_whole_prices_its_vision_tower_too(client: TestClient) -> None:
    config = json.loads((FIXTURES / "moonshotai--Kimi-K3.json").read_text(encoding="utf-8"))
    question = "gpu=b200&engine_version=0.33.0&tensor_parallel_size=8&pipeline_parallel_size=2"
    pasted = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": config},
            "gpu": "b200",
            "engine_version": "0.33.0",
            "tensor_parallel_size": 8,
            "pipeline_parallel_size": 2,
            "max_model_len": 131072,
        },
    )
    assert pasted.status_code == 200, pasted.text
    catalog = client.get(f"/v1/capacity?model=kimi-k3&{question}&max_model_len=131072")
    assert catalog.status_code == 200, catalog.text
    p, c = pasted.json(), catalog.json()
    # Same cache either way (27,648 B per token; per sequence worked above) ...
    assert (p["kv_bytes_per_token"], p["kv_bytes_per_sequence"]) == (27_648, 4_073_250_816)
    assert (c["kv_bytes_per_token"], c["kv_bytes_per_sequence"]) == (27_648, 4_073_250_816)
    # ... but the pasted checkpoint also holds the vision tower and projector (894,717,952 B
    # in bf16), which the catalog leaves out: less room for the cache.
    assert p["kv_pool_bytes"] < c["kv_pool_bytes"]
