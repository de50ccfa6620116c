"""vLLM and attention whose V heads are narrower than its K heads (MiMo-V2-Flash: K 192 / V 128).

Read in the PyPI wheels, release by release (`models/mimo_v2_flash.py` until 0.20, then
`models/mimo_v2.py`):

- before 0.14.0 vLLM has no MiMo-V2 model (`models/registry.py`);
- 0.14.0 to 0.19.x `MiMoV2Attention.forward` pads V to head_dim and builds
  `Attention(head_dim)` with no `head_size_v`: the cache holds V at 192;
- from 0.20.0 `Attention(..., head_size_v=v_head_dim)` on a DiffKV backend: V at 128;
- before 0.32.0 the full layers pass `per_layer_sliding_window=None` and `Attention` falls
  back to `cache_config.sliding_window`, which `EngineArgs.create_engine_config` sets to the
  config's `sliding_window` (128) for a config without `layer_types`: every layer kept 128
  tokens. 0.32.0 `MiMoV2DecoderLayer.__init__` clears `cache_config.sliding_window`.

kvplan sizes the layout of 0.32.0 on and refuses the earlier releases by name rather than size
a layout they did not build (docs/engines/vllm.md, "MiMo-V2-Flash: full and sliding layers of
their own").
"""

from __future__ import annotations

from typing import Final

from ..errors import SizingError
from ..model.architecture import FullAttention, ModelArchitecture, SlidingWindowAttention
from .calibration import Version

VLLM_MIMO_V2: Final[Version] = (0, 14, 0)  # models/mimo_v2_flash.py first in the 0.14.0 wheel
VLLM_DIFFKV: Final[Version] = (0, 20, 0)  # Attention(head_size_v=...) in mimo_v2_flash.py
VLLM_MIMO_V2_FULL_LAYERS: Final[Version] = (0, 32, 0)  # cache_config.sliding_window = None


def has_narrow_values(arch: ModelArchitecture) -> bool:
    """Any attention layer whose V head is narrower than its K head."""
    return any(
        isinstance(layer, FullAttention | SlidingWindowAttention)
        and layer.v_head_dim is not None
        and layer.v_head_dim != layer.head_dim
        for layer, _ in arch.layer_counts
    )


def check_diffkv_release(arch: ModelArchitecture, version: Version, label: str) -> None:
    """Refuse the releases whose MiMo-V2 cache kvplan does not size (see the module text)."""
    if not has_narrow_values(arch) or version >= VLLM_MIMO_V2_FULL_LAYERS:
        return
    if version < VLLM_MIMO_V2:
        why = "has no MiMo-V2 model (it arrived in 0.14.0)"
    elif version < VLLM_DIFFKV:
        why = (
            "padded V to the K head size in the cache and ran the full layers with the "
            "config's 128-token sliding_window"
        )
    else:
        why = "ran MiMo-V2's full layers with the config's 128-token sliding_window"
    raise SizingError(
        "engine_version",
        f"vLLM {label} {why}; kvplan sizes K and V heads of different sizes (MiMo-V2) "
        "from vLLM 0.32.0, where each layer keeps the layout its config gives it",
    )


__all__ = ["check_diffkv_release", "has_narrow_values"]
