"""Config readers for hybrids whose layers keep a state beside attention (issue 19, the
architectures once refused for want of a published config).

LFM2 / LFM2.5 (`model_type` lfm2), as vLLM 0.33.0 builds it (models/lfm2.py):

- `Lfm2Model.__init__` `get_layer`: layer i attends when `config.layer_types[i] ==
  "full_attention"`, else it is a short-convolution layer. transformers
  `Lfm2Config.__init__` (configuration_lfm2.py) fills `layer_types` from `full_attn_idxs` when
  the config has none: "full_attention" if i is in `full_attn_idxs` (all layers when that is
  null too), else "conv".
- `Lfm2Attention.__init__`: `num_key_value_heads` KV heads of `hidden_size //
  num_attention_heads` (a `head_dim` key is not read).
- `Lfm2ForCausalLM.get_mamba_state_shape_from_config`: each conv layer keeps
  `MambaStateShapeCalculator.short_conv_state_shape(intermediate_size=conv_dim,
  conv_kernel=conv_L_cache)`, one (conv_L_cache - 1) x conv_dim / tp tensor per sequence, in
  the model dtype (`short_conv_state_dtype` with mamba_cache_dtype auto).

docs/engines/vllm.md#lfm2-short-convolution-layers has the worked numbers.
"""

from __future__ import annotations

from typing import Final

from ..errors import SizingError, UnknownLayerKind
from .architecture import FullAttention, Layer, ShortConv
from .config_view import HFConfig

LFM2_TYPES: Final = frozenset({"lfm2"})

_LFM2_ATTENTION = "full_attention"
_LFM2_CONV = "conv"


def lfm2_layers(cfg: HFConfig) -> list[Layer]:
    """LFM2: attention layers and short-convolution layers in model order (module docstring)."""
    n = cfg.layer_count("num_hidden_layers")
    kinds = _lfm2_layer_types(cfg, n)
    heads = cfg.get_int("num_attention_heads")
    hidden = cfg.get_int("hidden_size")
    if hidden % heads:
        raise SizingError(
            cfg.where("hidden_size"),
            f"{hidden} is not a multiple of {heads} attention heads (vLLM Lfm2Attention: "
            "head_dim = hidden_size // num_attention_heads)",
        )
    # Consulted and set aside: vLLM Lfm2Attention never reads head_dim.
    cfg.raw("head_dim")
    attention = FullAttention(
        num_kv_heads=cfg.get_int("num_key_value_heads"), head_dim=hidden // heads
    )
    conv: Layer = attention
    if _LFM2_CONV in kinds:
        conv = ShortConv(
            intermediate_size=cfg.get_int("conv_dim"),
            conv_kernel=cfg.get_int("conv_L_cache", minimum=2),
        )
    return [attention if kind == _LFM2_ATTENTION else conv for kind in kinds]


def _lfm2_layer_types(cfg: HFConfig, n: int) -> list[str]:
    kinds = cfg.str_list("layer_types")
    if kinds is None:
        attends = cfg.int_list("full_attn_idxs")
        indexes = set(range(n)) if attends is None else set(attends)
        if any(i >= n for i in indexes):
            raise SizingError(
                cfg.where("full_attn_idxs"), f"names a layer past num_hidden_layers {n}"
            )
        return [_LFM2_ATTENTION if i in indexes else _LFM2_CONV for i in range(n)]
    # full_attn_idxs is not read when layer_types is given (transformers Lfm2Config).
    cfg.raw("full_attn_idxs")
    if len(kinds) != n:
        raise SizingError(
            cfg.where("layer_types"), f"has {len(kinds)} entries, num_hidden_layers is {n}"
        )
    for index, kind in enumerate(kinds):
        if kind not in (_LFM2_ATTENTION, _LFM2_CONV):
            raise UnknownLayerKind(
                cfg.where(f"layer_types[{index}]"),
                f"{kind!r} is not an LFM2 layer (full_attention or conv)",
            )
    return kinds


__all__ = ["LFM2_TYPES", "lfm2_layers"]
