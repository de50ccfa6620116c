"""Which vLLM releases run and size the 2026 layer kinds kvplan reads (Kimi's KDA beside MLA,
MiniMax-M3's indexed GQA, MiniMax-Text-01 / M1's lightning attention: 0.10.2 to 0.23.0), and
the block sizes they force. Milestones in calibration.py.

docs/engines/vllm.md#kda and #minimax-m3-index-keys say what each rule was read from.
"""

from __future__ import annotations

from ..errors import SizingError
from ..model.architecture import ModelArchitecture
from ..model.dtypes import FloatDtype
from ..model.hf_kimi_minimax import MINIMAX_M3_SPARSE_BLOCK
from . import calibration as cal
from .calibration import Version
from .common import EngineOptions

DEEPSEEK_V4_BLOCK = 256

# mamba_utils.py kda_state_dtype (0.30.0+): "KDA recurrent state supports only auto, float32,
# and bfloat16".
_KDA_SSM_DTYPES = frozenset({FloatDtype.FLOAT32, FloatDtype.BFLOAT16})


def check_vllm_kinds(
    arch: ModelArchitecture, version: Version, label: str, options: EngineOptions
) -> None:
    """Raise for a KDA or MiniMax-M3 model, or a flag on one, this release does not take."""
    if arch.has_kda:
        _check_kda(version, label, options.mamba_ssm_cache_dtype)
    if arch.has_short_conv:
        _check_lfm2(version, label)
    if arch.has_lightning and version >= cal.VLLM_MINIMAX_LIGHTNING_GONE:
        raise SizingError(
            "engine_version",
            f"vLLM {label} no longer serves MiniMaxText01ForCausalLM (MiniMax-Text-01, "
            "MiniMax-M1: lightning attention); 0.24.0's models/registry.py lists it under "
            "_PREVIOUSLY_SUPPORTED_MODELS, last served in 0.23.0",
        )
    if arch.has_indexed_attention:
        if version < cal.VLLM_MINIMAX_M3:
            raise SizingError(
                "engine_version",
                f"vLLM {label} does not run MiniMax-M3 (sparse attention with index keys); "
                "it arrived in 0.33.0",
            )
        block = options.block_size
        if block is not None and block % MINIMAX_M3_SPARSE_BLOCK:
            raise SizingError(
                "block_size",
                f"{block} is not a multiple of {MINIMAX_M3_SPARSE_BLOCK}: MiniMax-M3's sparse "
                "attention and indexer kernels read 128-token pages "
                "(get_supported_kernel_block_sizes)",
            )


def _check_kda(version: Version, label: str, ssm_dtype: FloatDtype | None) -> None:
    if version < cal.VLLM_KDA:
        raise SizingError(
            "engine_version",
            f"kvplan sizes Kimi's MLA + KDA hybrids from vLLM 0.27.0 (Kimi-K3's release, "
            f"whose hybrid block alignment it models); {label} is older",
        )
    if ssm_dtype is None:  # "auto" (EngineOptions)
        return
    if version < cal.VLLM_KDA_SSM_DTYPE and ssm_dtype is not FloatDtype.FLOAT32:
        raise SizingError(
            "mamba_ssm_cache_dtype",
            f"vLLM {label} keeps the KDA recurrent state in float32 whatever "
            "mamba_ssm_cache_dtype says (mamba_utils.py kda_state_dtype); it takes "
            "bfloat16 from 0.30.0",
        )
    if ssm_dtype not in _KDA_SSM_DTYPES:
        raise SizingError(
            "mamba_ssm_cache_dtype",
            f"{ssm_dtype.value!r}: vLLM keeps the KDA recurrent state in float32 or bfloat16 only",
        )


def default_block_size(arch: ModelArchitecture) -> int | None:
    """The block size a model's backends force when none is given, or None for the usual
    choice: MiniMax-M3's backends share only 128 (platforms/interface.py
    `_preferred_block_size_for_backends`: the smallest size every backend supports), and
    DeepSeek-V4's 256 (v1/attention/backends/mla/sparse_swa.py
    `DeepseekSparseSWABackend.get_preferred_block_size`: "Setting kv cache block size to 256
    for DEEPSEEK_SPARSE_SWA backend")."""
    if arch.has_compressed_attention:
        return DEEPSEEK_V4_BLOCK
    return MINIMAX_M3_SPARSE_BLOCK if arch.has_indexed_attention else None


def hybrid_block_alignment(mla: bool, version: Version, block_size: int) -> int:
    """The token multiple an MLA hybrid's attention block grows in (0.27.0+ platforms/
    interface.py `_align_hybrid_block_size`: max(kernel block, block_size), at least 128 with
    MLA); other hybrids keep kvplan's earlier alignment."""
    if mla and version >= cal.VLLM_KDA:
        return max(block_size, cal.VLLM_MLA_HYBRID_ALIGNMENT)
    return cal.VLLM_MAMBA_BLOCK_ALIGNMENT


# models/registry.py lists Lfm2ForCausalLM in 0.11.1, the oldest wheel read; the conv state's
# shape (mamba_utils.py short_conv_state_shape) is the same there and in 0.26.0-0.33.0.
_VLLM_LFM2: Version = (0, 11, 1)


def _check_lfm2(version: Version, label: str) -> None:
    if version < _VLLM_LFM2:
        raise SizingError(
            "engine_version",
            f"kvplan sizes LFM2's short-convolution layers from vLLM 0.11.1 (the first release "
            f"whose Lfm2ForCausalLM it read); {label} is older",
        )


__all__ = ["check_vllm_kinds", "default_block_size", "hybrid_block_alignment"]
