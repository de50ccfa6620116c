"""The MiMo-V2 reader (service/sizing/model/hf_more.py) on its published config, and what it
refuses.

The config is tests/fixtures/hf_configs/XiaomiMiMo--MiMo-V2-Flash.json (SOURCES.md); a test that
changes a key says to what and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.sizing.errors import SizingError, UnknownLayerKind
from service.sizing.model.architecture import FullAttention, SlidingWindowAttention
from service.sizing.model.hf_config import architecture_from_hf_config

CONFIG = Path(__file__).parent.parent / "fixtures" / "hf_configs" / "XiaomiMiMo--MiMo-V2-Flash.json"


def _mimo() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(CONFIG.read_text())
    return loaded


def test_each_layer_follows_hybrid_layer_pattern() -> None:
    arch = architecture_from_hf_config(_mimo())
    full = FullAttention(num_kv_heads=4, head_dim=192, v_head_dim=128)
    sliding = SlidingWindowAttention(
        num_kv_heads=8, head_dim=192, sliding_window=128, v_head_dim=128
    )
    # the published pattern: 0 at layers 0, 5, 11, 17, 23, 29, 35, 41, 47
    full_at = (0, 5, 11, 17, 23, 29, 35, 41, 47)
    assert arch.layers == tuple(full if i in full_at else sliding for i in range(48))


def test_a_sliding_window_size_of_minus_one_attends_to_everything() -> None:
    # vLLM MiMoV2Attention: sliding_window_size -1 -> no window; the sliding layers keep their
    # own heads (8 x (192 + 128)) for the whole context.
    config = {**_mimo(), "sliding_window_size": -1}
    arch = architecture_from_hf_config(config)
    assert FullAttention(num_kv_heads=8, head_dim=192, v_head_dim=128) in arch.layers
    assert not any(isinstance(layer, SlidingWindowAttention) for layer in arch.layers)


def test_an_unknown_pattern_entry_is_refused_by_name() -> None:
    config = _mimo()
    config["hybrid_layer_pattern"] = [0, 2, *config["hybrid_layer_pattern"][2:]]
    with pytest.raises(UnknownLayerKind) as raised:
        architecture_from_hf_config(config)
    assert raised.value.field == "hybrid_layer_pattern[1]"


def test_a_pattern_of_the_wrong_length_is_refused() -> None:
    config = _mimo()
    config["hybrid_layer_pattern"] = config["hybrid_layer_pattern"][:47]
    with pytest.raises(SizingError) as raised:
        architecture_from_hf_config(config)
    assert raised.value.field == "hybrid_layer_pattern"
