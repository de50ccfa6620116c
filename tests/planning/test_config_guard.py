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


def _ask(client: TestClient, config: dict[str, Any], max_model_len: int = 8192) -> Any:
    return client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": config},
            "gpu": "h100-sxm-80gb",
            "max_model_len": max_model_len,
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
        # tiiuae Falcon-H1-7B config.json: the Mamba-2 mixer beside attention in every layer.
        ("mamba_d_ssm", 3072),
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


def test_a_layer_count_under_num_layers_is_refused_by_name(client: TestClient) -> None:
    # meituan-longcat LongCat-Flash spells the layer count num_layers (each layer two MLA
    # blocks, vLLM longcat_flash.py): the Llama config with its count spelled so is refused.
    config = _config("meta-llama--Meta-Llama-3.1-8B.json")
    config["num_layers"] = config.pop("num_hidden_layers")
    body = problem(_ask(client, config), 422)
    assert body["type"] == "/problems/unknown-layer-kind"
    assert body["field"] == "model.hf_config.num_layers"


def test_a_model_type_without_a_reader_is_answered_with_the_keys_it_was_read_from(
    client: TestClient,
) -> None:
    # allenai Molmo-7B-D (model_type molmo, reubzdubz/Molmo7B_D_NF4Quant config.json): no reader
    # of its own, no unknown cache key: 28 layers x 4 KV heads x (3584 / 28 = 128) x 2 (K, V) x
    # 2 B (bf16) = 57,344 B per token, and the warning lists the keys that gave it. Asked at
    # its max_position_embeddings, 4,096: vLLM derives that limit from the config and refuses a
    # longer max_model_len by design (docs/engines/vllm.md#max-model-len), which is not this
    # test's question.
    answer = _ask(client, _config("reubzdubz--Molmo7B_D_NF4Quant.json"), max_model_len=4096)
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


def test_a_per_layer_mlp_width_never_blocks_the_cache(client: TestClient) -> None:
    # Issue 19 item 3: Gemma-3n writes intermediate_size per layer, a list. Llama-3.1-8B's
    # config with its 14,336 written the same way (32 entries) still sizes the cache:
    # 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token, as with the integer.
    config = _config("meta-llama--Meta-Llama-3.1-8B.json")
    config["intermediate_size"] = [config["intermediate_size"]] * config["num_hidden_layers"]
    answer = _ask(client, config)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    # the weights, which need each layer's width, are what the answer says it cannot count
    assert any("intermediate_size" in w for w in body["warnings"]), body["warnings"]


def test_a_per_layer_expert_count_never_blocks_the_cache(client: TestClient) -> None:
    # Hunyuan-A13B writes moe_topk per layer. Qwen3-30B-A3B's config with its
    # num_experts_per_tok (8) written per layer (48 entries) sizes as before:
    # 2 x 48 layers x 4 KV heads x 128 x 2 B = 98,304 B per token.
    config = _config("Qwen--Qwen3-30B-A3B.json")
    config["num_experts_per_tok"] = [config["num_experts_per_tok"]] * config["num_hidden_layers"]
    answer = _ask(client, config)
    assert answer.status_code == 200, answer.text
    assert answer.json()["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2
