"""Layer kinds an engine's pipeline in kvplan does not model: refused by name for that engine.

vLLM sizes them (engines/vllm_kinds.py says from which release); SGLang and TensorRT-LLM keep
them in pools kvplan has not read, so a capacity from their generic pools would be wrong.
"""

from __future__ import annotations

from ..errors import SizingError
from ..model.architecture import ModelArchitecture


def refuse_unmodelled(arch: ModelArchitecture, engine: str) -> None:
    """Raise naming the first layer kind `engine` ("SGLang", "TensorRT-LLM") is not sized for."""
    if arch.has_compressed_attention:
        raise SizingError(
            "engine",
            f"{engine}'s pools for DeepSeek-V4's compressed sparse attention (windows, "
            "compressed latents, indexer keys and compressor states) are not modelled by "
            "kvplan; vLLM's are (0.24.0-0.26.x and 0.33.0)",
        )
    if arch.has_kda:
        raise SizingError(
            "engine",
            f"{engine}'s pools for Kimi Delta Attention (Kimi-Linear, Kimi-K3: KDA layers "
            "beside MLA) are not modelled by kvplan; vLLM's are",
        )
    if arch.has_lightning:
        served = (
            "SGLang does not serve it: no MiniMaxText01ForCausalLM or MiniMaxM1ForCausalLM in "
            "its srt/models (0.5.9 and 0.5.23 wheels read)"
            if engine == "SGLang"
            else f"{engine}'s pools for it are not modelled by kvplan"
        )
        raise SizingError(
            "engine",
            f"MiniMax-Text-01 / MiniMax-M1 (lightning attention): {served}; vLLM 0.10.2-0.23.0 "
            "serves it",
        )
    if arch.has_short_conv:
        raise SizingError(
            "engine",
            f"{engine}'s pools for LFM2's short-convolution state are not modelled by kvplan; "
            "vLLM's are",
        )
    if arch.has_indexed_attention:
        raise SizingError(
            "engine",
            f"{engine}'s cache for MiniMax-M3's sparse-attention index keys is not modelled "
            "by kvplan; vLLM's is",
        )
