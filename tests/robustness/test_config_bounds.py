"""A config.json cannot make kvplan do unbounded work: every count it claims has an upper bound.

Before: `num_hidden_layers` = 10^400 in an `hf_config` answered 500 (an OverflowError), and heads,
widths, vocabularies and windows of any size were carried into the arithmetic. Now a value over
its bound (`sizing.model.config_view.bound`) is a 422 naming the key, through every path that
reads a config: POST /v1/capacity (and /v1/plans) with `{"hf_config": ...}` and POST
/v1/models/import.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.sizing import SizingError
from service.sizing.model.config_view import (
    MAX_EXPERTS,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    MAX_WIDTH,
    bound,
)
from service.sizing.model.hf_config import architecture_from_hf_config
from tests.conftest import ADMIN
from tests.helpers import problem
from tests.sizing.test_hf_config import DEEPSEEK_V3, LLAMA_3_1_8B

# 10^400 written out as a JSON integer (json.dumps of the Python int), and 10^7: both far past
# MAX_LAYERS (4096); the first overflows a float, the second was 5 s of work and +556 MiB.
HUGE = 10**400
LARGE = 10**7


def _body_with(config: dict[str, Any], wrapper: dict[str, Any]) -> bytes:
    """A JSON body whose integers are written out whole, as a client would send them."""
    return json.dumps({**wrapper, "hf_config": config}).encode()


@pytest.mark.parametrize("layers", [HUGE, LARGE], ids=["10^400", "10^7"])
def test_capacity_from_a_config_with_too_many_layers_is_422(
    client: TestClient, layers: int
) -> None:
    config = {**LLAMA_3_1_8B, "num_hidden_layers": layers}
    body = json.dumps(
        {"model": {"hf_config": config}, "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    )
    assert str(layers) in body  # sent as a JSON number, every digit
    response = client.post(
        "/v1/capacity", content=body, headers={"Content-Type": "application/json"}
    )
    answer = problem(response, 422)
    assert answer["field"] == "model.hf_config.num_hidden_layers"
    assert str(MAX_LAYERS) in answer["detail"]
    assert len(response.content) < 2000  # the 401 digits are not echoed back


@pytest.mark.parametrize("layers", [HUGE, LARGE], ids=["10^400", "10^7"])
def test_importing_a_config_with_too_many_layers_is_422(client: TestClient, layers: int) -> None:
    config = {**LLAMA_3_1_8B, "num_hidden_layers": layers}
    response = client.post(
        "/v1/models/import",
        content=_body_with(config, {"slug": "too-deep", "dry_run": True}),
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    answer = problem(response, 422)
    assert answer["field"] == "hf_config.num_hidden_layers"


def test_a_plan_for_a_config_with_too_many_kv_heads_is_422(client: TestClient) -> None:
    config = {**LLAMA_3_1_8B, "num_key_value_heads": HUGE}
    response = client.post(
        "/v1/plans",
        json={
            "model": {"hf_config": config},
            "max_model_len": 8192,
            "peak_concurrency": 10,
            "gpus": ["h100-sxm-80gb"],
        },
    )
    assert problem(response, 422)["field"] == "model.hf_config.num_key_value_heads"


# Each kind of count, with the bound it has and a config that reads it (key -> bound).
COUNTS: list[tuple[dict[str, Any], str, int]] = [
    (LLAMA_3_1_8B, "num_hidden_layers", MAX_LAYERS),
    (LLAMA_3_1_8B, "num_attention_heads", MAX_HEADS),
    (LLAMA_3_1_8B, "num_key_value_heads", MAX_HEADS),
    (LLAMA_3_1_8B, "hidden_size", MAX_WIDTH),
    (LLAMA_3_1_8B, "intermediate_size", MAX_WIDTH),
    (LLAMA_3_1_8B, "vocab_size", MAX_VOCAB),
    (LLAMA_3_1_8B, "max_position_embeddings", MAX_POSITIONS),
    (DEEPSEEK_V3, "n_routed_experts", MAX_EXPERTS),
    (DEEPSEEK_V3, "kv_lora_rank", MAX_WIDTH),
    ({**LLAMA_3_1_8B, "head_dim": 128}, "head_dim", MAX_WIDTH),
    (
        {**LLAMA_3_1_8B, "model_type": "mistral", "sliding_window": 4096},
        "sliding_window",
        MAX_POSITIONS,
    ),
]


@pytest.mark.parametrize(("config", "key", "limit"), COUNTS, ids=[c[1] for c in COUNTS])
def test_every_count_has_a_bound(config: dict[str, Any], key: str, limit: int) -> None:
    assert bound(key) == limit
    over = copy.deepcopy(config)
    over[key] = limit + 1
    with pytest.raises(SizingError) as refused:
        architecture_from_hf_config(over, num_parameters=10**9)
    assert refused.value.field == key
    assert str(limit) in refused.value.reason


def test_a_count_at_its_bound_is_read() -> None:
    # vocab_size at 2^24 rows is read (only the parameter count grows): the bound is inclusive
    arch = architecture_from_hf_config({**LLAMA_3_1_8B, "vocab_size": MAX_VOCAB})
    assert arch.vocab_size == MAX_VOCAB


@pytest.mark.parametrize("key", ["layer_types", "hybrid_override_pattern"])
def test_a_per_layer_list_longer_than_the_layer_bound_is_422(key: str) -> None:
    if key == "layer_types":
        config = {**LLAMA_3_1_8B, "layer_types": ["full_attention"] * (MAX_LAYERS + 1)}
    else:
        config = {**LLAMA_3_1_8B, "model_type": "nemotron_h", key: "M" * (MAX_LAYERS + 1)}
    with pytest.raises(SizingError) as refused:
        architecture_from_hf_config(config, num_parameters=10**9)
    assert refused.value.field == key
    assert str(MAX_LAYERS) in refused.value.reason


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300])
def test_a_count_that_is_no_integer_is_422(value: float) -> None:
    # json.loads reads 1e400 as inf and NaN as nan: neither is a count
    with pytest.raises(SizingError) as refused:
        architecture_from_hf_config({**LLAMA_3_1_8B, "num_key_value_heads": value})
    assert refused.value.field == "num_key_value_heads"
