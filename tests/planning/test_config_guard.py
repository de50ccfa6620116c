"""A config kvplan cannot read in full is refused by name, or answered saying what was read.

Issue 19 item 2, over HTTP as a user pastes a config.json (POST /v1/capacity). The configs are
the published files of tests/fixtures/hf_configs/ (SOURCES.md); where a test adds a key to one,
the key and value are the ones a published config of another model carries (named beside it),
so the question is the one a user asking about that model would send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import problem

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"


def _config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CONFIGS / name).read_text())
    return loaded


def _ask(client: TestClient, config: dict[str, Any]) -> Any:
    return client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": config},
            "gpu": "h100-sxm-80gb",
            "max_model_len": 8192,
            "kv_pool_bytes": 10 * 2**30,
        },
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # stepfun-ai Step-3.5-Flash config.json: the KV head count.
        ("num_attention_groups", 8),
        # inclusionAI Ring-mini-linear-2.0 config.json: one softmax layer in each group of 5.
        ("layer_group_size", 5),
        # XiaomiMiMo MiMo-V2-Flash config.json: the sliding layers' own KV heads.
        ("swa_num_key_value_heads", 8),
    ],
)
def test_a_cache_key_no_reader_uses_is_refused_by_name(
    client: TestClient, key: str, value: int
) -> None:
    # Llama-3.1-8B's reader reads none of these: the config is refused, naming the key, not
    # sized as 32 plain GQA layers.
    config = {**_config("meta-llama--Meta-Llama-3.1-8B.json"), key: value}
    body = problem(_ask(client, config), 422)
    assert body["type"] == "/problems/unknown-layer-kind"
    assert body["field"] == f"model.hf_config.{key}"


def test_a_model_type_without_a_reader_is_answered_with_the_keys_it_was_read_from(
    client: TestClient,
) -> None:
    # allenai Molmo-7B-D (model_type molmo, reubzdubz/Molmo7B_D_NF4Quant config.json): no reader
    # of its own, no unknown cache key: 28 layers x 4 KV heads x (3584 / 28 = 128) x 2 (K, V) x
    # 2 B (bf16) = 57,344 B per token, and the warning lists the keys that gave it.
    answer = _ask(client, _config("reubzdubz--Molmo7B_D_NF4Quant.json"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kv_bytes_per_token"] == 2 * 28 * 4 * 128 * 2
    (note,) = [w for w in body["warnings"] if "no reader of its own" in w]
    for key in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size"):
        assert key in note


def test_a_model_type_with_a_reader_carries_no_such_warning(client: TestClient) -> None:
    answer = _ask(client, _config("meta-llama--Meta-Llama-3.1-8B.json"))
    assert answer.status_code == 200, answer.text
    assert not [w for w in answer.json()["warnings"] if "no reader of its own" in w]
