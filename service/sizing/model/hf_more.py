"""Config readers for 2026 layouts whose layers do not share one geometry (issue 19, part A).

Each reader turns the keys its `model_type` publishes into one layer per decoder layer, as
vLLM's model file builds that layer's attention (the file and function are named beside each
rule; docs/engines/vllm.md#mimo-v2-flash-full-and-sliding-layers-of-their-own). `hf_config`
calls them from `_mixers`; the keys they read are recorded like every other reader's, so
`config_guard` still refuses a cache key they leave alone.
"""

from __future__ import annotations

from typing import Final

from ..errors import SizingError, UnknownLayerKind
from .architecture import FullAttention, Layer, SlidingWindowAttention
from .config_view import HFConfig

MIMO_V2_TYPES: Final = frozenset({"mimo_v2_flash", "mimo_v2"})

# vLLM mimo_v2.py MiMoV2DecoderLayer.is_compressed_softmax_layer: hybrid_layer_pattern[i] == 1
# is a sliding ("SWA") layer, 0 a full-attention layer.
_MIMO_FULL = 0
_MIMO_SLIDING = 1


def mimo_v2_layers(cfg: HFConfig) -> list[Layer]:
    """XiaomiMiMo MiMo-V2-Flash: full and sliding layers, each with its own KV heads and K/V
    head sizes.

    vLLM mimo_v2.py `MiMoV2DecoderLayer.__init__`: a sliding layer is
    `MiMoV2Attention(num_kv_heads=swa_num_key_value_heads, head_dim=swa_head_dim,
    v_head_dim=swa_v_head_dim, sliding_window_size=sliding_window_size)`, a full layer
    `MiMoV2Attention(num_kv_heads=num_key_value_heads, head_dim=head_dim, v_head_dim=v_head_dim,
    sliding_window_size=-1)`; `MiMoV2Attention.__init__` hands `head_size_v` to `Attention`, so
    the page holds K of head_dim and V of v_head_dim (kv_cache_interface.py
    `AttentionSpec.real_page_size_bytes`: head_size + head_size_v). The layer sets
    `cache_config.sliding_window = None`: the top-level `sliding_window` and
    `attention_chunk_size` are not what vLLM caches by.
    """
    n = cfg.layer_count("num_hidden_layers")
    pattern = cfg.int_list("hybrid_layer_pattern")
    if pattern is None:
        raise SizingError(
            cfg.where("hybrid_layer_pattern"), "is required for MiMo-V2 (0 full, 1 sliding)"
        )
    if len(pattern) != n:
        raise SizingError(
            cfg.where("hybrid_layer_pattern"),
            f"has {len(pattern)} entries, num_hidden_layers is {n}",
        )
    for index, value in enumerate(pattern):
        if value not in (_MIMO_FULL, _MIMO_SLIDING):
            raise UnknownLayerKind(
                cfg.where(f"hybrid_layer_pattern[{index}]"),
                f"{value!r} is not 0 (full attention) or 1 (sliding attention)",
            )
    # Consulted and set aside: vLLM's MiMo-V2 layer clears cache_config.sliding_window and
    # never reads attention_chunk_size; the window is sliding_window_size.
    cfg.raw("sliding_window")
    cfg.raw("attention_chunk_size")
    full = FullAttention(
        num_kv_heads=cfg.get_int("num_key_value_heads"),
        head_dim=cfg.get_int("head_dim"),
        v_head_dim=cfg.opt_int("v_head_dim"),
    )
    sliding = _mimo_sliding(cfg) if _MIMO_SLIDING in pattern else full
    return [sliding if value == _MIMO_SLIDING else full for value in pattern]


def _mimo_sliding(cfg: HFConfig) -> Layer:
    kv_heads = cfg.get_int("swa_num_key_value_heads")
    head_dim = cfg.get_int("swa_head_dim")
    v_head_dim = cfg.opt_int("swa_v_head_dim")
    # MiMoV2Attention: sliding_window = sliding_window_size if sliding_window_size > -1 else None
    window = cfg.get_int("sliding_window_size", minimum=-1)
    if window == -1:
        return FullAttention(num_kv_heads=kv_heads, head_dim=head_dim, v_head_dim=v_head_dim)
    if window == 0:
        raise SizingError(cfg.where("sliding_window_size"), "must be -1 (off) or >= 1, got 0")
    return SlidingWindowAttention(
        num_kv_heads=kv_heads, head_dim=head_dim, sliding_window=window, v_head_dim=v_head_dim
    )


__all__ = ["MIMO_V2_TYPES", "mimo_v2_layers"]
