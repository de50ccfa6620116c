"""LFM2's layers as vLLM 0.33.0 builds them (models/lfm2.py; service/sizing/model/hf_hybrids.py),
from LiquidAI LFM2-350M's published config.json verbatim (tests/fixtures/hf_configs, SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.sizing.engines.kv import state_bytes_per_sequence, state_shape, token_bytes_per_layer
from service.sizing.errors import SizingError
from service.sizing.model.architecture import FullAttention, ModelArchitecture, ShortConv
from service.sizing.model.hf_config import architecture_from_hf_config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def lfm2_350m() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / "LiquidAI--LFM2-350M.json").read_text())
    return loaded


def test_lfm2_layers_follow_full_attn_idxs() -> None:
    arch = architecture_from_hf_config(lfm2_350m())
    # full_attn_idxs [2, 5, 8, 10, 12, 14] of 16 layers attend (transformers Lfm2Config fills
    # layer_types from it); head_dim = hidden_size 1,024 // 16 heads = 64, 8 KV heads.
    attention = FullAttention(num_kv_heads=8, head_dim=64)
    conv = ShortConv(intermediate_size=1024, conv_kernel=3)
    kinds = [attention if i in (2, 5, 8, 10, 12, 14) else conv for i in range(16)]
    assert list(arch.layers) == kinds


def bytes_per_token(arch: ModelArchitecture) -> int:
    # bfloat16 (torch_dtype): 2 B an element.
    return sum(token_bytes_per_layer(g, 2) for g in arch.layers if isinstance(g, FullAttention))


def test_lfm2_bytes_per_token_and_per_sequence() -> None:
    arch = architecture_from_hf_config(lfm2_350m())
    assert arch.dtype == "bfloat16"
    # 6 attention layers x 2 (K, V) x 8 KV heads x 64 x 2 B = 12,288 B per token.
    assert bytes_per_token(arch) == 12_288
    # Each of the 10 conv layers: short_conv_state_shape = (conv_L_cache 3 - 1) x conv_dim
    # 1,024 = 2,048 elements x 2 B = 4,096 B per sequence; at TP 2, 1,024 elements.
    conv = ShortConv(intermediate_size=1024, conv_kernel=3)
    assert state_shape(conv, 1).conv_elements == 2048
    assert state_shape(conv, 2).conv_elements == 1024
    assert state_shape(conv, 1).ssm_elements == 0
    states = [state_bytes_per_sequence(g, 2, 2) for g in arch.layers if isinstance(g, ShortConv)]
    assert states == [4096] * 10


def test_lfm2_layer_types_win_over_full_attn_idxs() -> None:
    # The LFM2.5 configs give layer_types and "full_attn_idxs": null; a list the same length
    # as the layers places them.
    config = lfm2_350m()
    config["layer_types"] = ["conv"] * 15 + ["full_attention"]
    arch = architecture_from_hf_config(config)
    assert bytes_per_token(arch) == 2 * 8 * 64 * 2


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("layer_types", ["conv"] * 15, "layer_types"),
        ("layer_types", ["conv"] * 15 + ["sliding_attention"], "layer_types[15]"),
        ("full_attn_idxs", [2, 16], "full_attn_idxs"),
        ("conv_L_cache", 1, "conv_L_cache"),
    ],
)
def test_a_bad_lfm2_layout_is_named(key: str, value: Any, field: str) -> None:
    config = {**lfm2_350m(), key: value}
    with pytest.raises(SizingError) as caught:
        architecture_from_hf_config(config)
    assert caught.value.field == field
