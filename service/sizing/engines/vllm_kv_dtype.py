"""vLLM's cache dtype step: what --kv-cache-dtype becomes for a checkpoint that declares one.

Before any page is sized, vLLM turns `auto` into the KV cache the checkpoint's quantization
config declares, so an fp8-KV checkpoint gets a 1-byte cache with no flag. Two rules, by release
(read in the released wheels; docs/engines/vllm.md#kv-cache-dtype-auto):

* modelopt (`kv_cache_quant_algo` / `kv_cache_scheme`): `resolve_kv_cache_dtype_string`
  (vllm/utils/torch_utils.py, called by `EngineArgs.create_engine_config`), first in 0.14.0:
  `auto` becomes fp8_e4m3; from 0.20.0 an NVFP4 declaration becomes nvfp4 (before it vLLM warns
  and keeps `auto`). An explicit flag is kept.
* compressed-tensors (`kv_cache_scheme`): `Attention.__init__` (vllm/attention/layer.py in 0.15,
  vllm/model_executor/layers/attention/attention.py later), first in 0.15.0, sets fp8 whatever
  the flag; from 0.22.0 only when the flag is `auto`. MLA layers (`MLAAttention`) have no such
  step, so an MLA model keeps its flag.

Before 0.14.0 (modelopt) and 0.15.0 (compressed-tensors) `auto` is the model dtype: the
checkpoint's KV scales are loaded and left unused.
"""

from __future__ import annotations

from ..frozen import frozen
from ..model.architecture import ModelArchitecture
from ..model.dtypes import KvCacheDtype
from . import calibration as cal
from .common import EngineOptions
from .vllm import VllmRelease, cuda_major, parse_vllm_version, vllm_release, vllm_rules_text

_FP8_KV_DTYPES = frozenset({KvCacheDtype.FP8, KvCacheDtype.FP8_E4M3, KvCacheDtype.FP8_E5M2})


@frozen
class ResolvedKvDtype:
    """The cache dtype vLLM sizes, and what the answer says about how it came to be."""

    kv_cache_dtype: KvCacheDtype
    note: str | None = None


def vllm_kv_cache_dtype(
    requested: KvCacheDtype, checkpoint_kv_cache: str | None, release: VllmRelease, mla: bool
) -> ResolvedKvDtype:
    """The cache dtype vLLM `release` allocates for `--kv-cache-dtype requested`."""
    version, label = release.version, release.label
    if checkpoint_kv_cache is None:
        return ResolvedKvDtype(requested)
    if checkpoint_kv_cache.startswith("modelopt_"):
        return _modelopt(requested, checkpoint_kv_cache, version, label)
    if mla:
        return ResolvedKvDtype(requested)
    return _compressed_tensors(requested, version, label)


def _modelopt(
    requested: KvCacheDtype, declared: str, version: tuple[int, int, int], label: str
) -> ResolvedKvDtype:
    if requested is not KvCacheDtype.AUTO:
        return ResolvedKvDtype(requested)
    if version < cal.VLLM_MODELOPT_KV_AUTO:
        return ResolvedKvDtype(
            requested,
            f"the checkpoint declares an fp8 KV cache (modelopt), but vLLM {label} keeps "
            "kv_cache_dtype auto at the model dtype; from 0.14.0 auto resolves to fp8_e4m3",
        )
    if declared == "modelopt_nvfp4":
        if version < cal.VLLM_MODELOPT_NVFP4_KV:
            return ResolvedKvDtype(requested)
        return ResolvedKvDtype(
            requested,
            f"the checkpoint declares an NVFP4 KV cache (modelopt) and vLLM {label} resolves "
            "kv_cache_dtype auto to nvfp4; kvplan does not size nvfp4 pages, so this answer "
            "sizes the model dtype (a larger cache than vLLM allocates)",
        )
    return ResolvedKvDtype(
        KvCacheDtype.FP8_E4M3,
        f"kv_cache_dtype auto resolved to fp8_e4m3: the checkpoint's quantization_config "
        f"declares an FP8 KV cache (modelopt), which vLLM {label} takes for auto "
        "(resolve_kv_cache_dtype_string); pass kv_cache_dtype bfloat16 to keep the model dtype",
    )


def _compressed_tensors(
    requested: KvCacheDtype, version: tuple[int, int, int], label: str
) -> ResolvedKvDtype:
    if version < cal.VLLM_COMPRESSED_TENSORS_KV_FP8 or requested in _FP8_KV_DTYPES:
        return ResolvedKvDtype(requested)
    if requested is KvCacheDtype.AUTO:
        return ResolvedKvDtype(
            KvCacheDtype.FP8,
            f"kv_cache_dtype auto resolved to fp8: the checkpoint's quantization_config "
            f"declares an FP8 KV cache (compressed-tensors kv_cache_scheme), which vLLM {label} "
            "takes for auto (Attention.__init__)",
        )
    if version < cal.VLLM_COMPRESSED_TENSORS_KV_AUTO_ONLY:
        return ResolvedKvDtype(
            KvCacheDtype.FP8,
            f"kv_cache_dtype {requested} replaced by fp8: vLLM {label} sets the cache of a "
            "checkpoint that declares a compressed-tensors kv_cache_scheme to fp8 whatever the "
            "flag (Attention.__init__); from 0.22.0 an explicit flag wins",
        )
    return ResolvedKvDtype(requested)


def deepseek_v4_kv_cache_dtype(requested: KvCacheDtype, release: VllmRelease) -> ResolvedKvDtype:
    """models/deepseek_v4/attention.py `_resolve_dsv4_kv_cache_dtype` on the FlashMLA backends
    (`use_fp8_ds_mla_layout`): any fp8 flag becomes fp8_ds_mla ("Using DeepSeek's fp8_ds_mla KV
    cache format."); `auto` becomes fp8 first from 0.33.0 (0.26.0 asserts an fp8 flag)."""
    if requested is KvCacheDtype.FP8_DS_MLA:
        return ResolvedKvDtype(requested)
    if requested in _FP8_KV_DTYPES or (
        requested is KvCacheDtype.AUTO and release.version >= cal.VLLM_DEEPSEEK_V4_PLANNED
    ):
        return ResolvedKvDtype(
            KvCacheDtype.FP8_DS_MLA,
            f"kv_cache_dtype {requested.value} becomes fp8_ds_mla: vLLM {release.label} stores "
            "DeepSeek-V4's cache as DeepSeek's fp8_ds_mla rows (584 B: 448 fp8 + 64 bf16 rope "
            "+ 8 B scales; attention.py _resolve_dsv4_kv_cache_dtype)",
        )
    return ResolvedKvDtype(requested)


def sparse_mla_kv_cache_dtype(
    requested: KvCacheDtype, gpu_name: str, release: VllmRelease
) -> ResolvedKvDtype | None:
    """DeepSeek sparse-attention MLA (V3.2, GLM-5) with an fp8 cache, as vLLM 0.24.0+ picks
    its backend on the GPU (platforms/cuda.py `_get_backend_priorities`, the first backend
    whose `supported_kv_cache_dtypes` and `supports_compute_capability` take the question)
    and then its format (layers/attention/mla_attention.py
    `_canonicalize_sparse_mla_kv_cache_dtype`); None where kvplan does not know the GPU's
    compute capability or the release (0.11-0.23: not read), or the flag is 16-bit.

    - SM90 (Hopper): FLASH_ATTN_MLA_SPARSE takes no fp8, so FLASHMLA_SPARSE: any fp8 flag
      becomes fp8_ds_mla (656-B rows).
    - SM100 (B200 / B300): FLASHINFER_MLA_SPARSE comes first for an fp8 cache and keeps the
      standard fp8 format (576 B; "Using standard fp8 KV cache format").
    - SM120 (RTX 50, RTX PRO Blackwell): FLASHINFER_MLA_SPARSE_SM120, which turns auto, fp8
      and fp8_e4m3 into fp8_ds_mla.
    """
    major = cuda_major(gpu_name)
    if major is None or release.version < cal.VLLM_SPARSE_MLA_BACKENDS:
        return None
    label = release.label
    fp8 = requested in _FP8_KV_DTYPES
    if major == 9 and fp8:
        return ResolvedKvDtype(
            KvCacheDtype.FP8_DS_MLA,
            f"kv_cache_dtype {requested.value} becomes fp8_ds_mla (656-B rows): on compute "
            f"capability 9.x vLLM {label} runs sparse MLA with an fp8 cache on FLASHMLA_SPARSE "
            "(platforms/cuda.py _get_backend_priorities), which stores DeepSeek's fp8_ds_mla "
            "format (mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype)",
        )
    if major == 10 and fp8:
        return ResolvedKvDtype(
            requested,
            f"kv_cache_dtype {requested.value} stays plain fp8 (576 B a token a layer): on "
            f"compute capability 10.x vLLM {label} prefers FLASHINFER_MLA_SPARSE for an fp8 "
            "cache (platforms/cuda.py _get_backend_priorities), which keeps the standard fp8 "
            "format; kv_cache_dtype fp8_ds_mla sizes FLASHMLA_SPARSE's 656-B rows",
        )
    if major == 12 and (requested in (KvCacheDtype.AUTO, KvCacheDtype.FP8, KvCacheDtype.FP8_E4M3)):
        return ResolvedKvDtype(
            KvCacheDtype.FP8_DS_MLA,
            f"kv_cache_dtype {requested.value} becomes fp8_ds_mla (656-B rows): on compute "
            f"capability 12.x vLLM {label} runs sparse MLA on FLASHINFER_MLA_SPARSE_SM120, "
            "which stores DeepSeek's fp8_ds_mla format for auto, fp8 and fp8_e4m3 "
            "(mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype)",
        )
    return None


@frozen
class VllmKvCache:
    """The cache dtype vLLM allocates for the one asked, the note saying how it came to be,
    and whether the attention backend the GPU runs decided a sparse-MLA cache's format."""

    kv_cache_dtype: KvCacheDtype
    note: str | None
    backend_decided: bool


def vllm_kv_cache(
    arch: ModelArchitecture, asked: KvCacheDtype, engine: EngineOptions, gpu_name: str = ""
) -> VllmKvCache:
    """The cache dtype the asked vLLM release allocates for the question's: the checkpoint's
    declaration first (`EngineArgs`), then, for sparse MLA, the format of the backend the GPU
    runs (`MLAAttention.__init__`)."""
    release = vllm_release(parse_vllm_version(vllm_rules_text(engine)))
    if arch.has_compressed_attention:
        resolved = deepseek_v4_kv_cache_dtype(asked, release)
    else:
        resolved = vllm_kv_cache_dtype(asked, arch.checkpoint_kv_cache, release, arch.has_mla)
    backend = None
    if arch.has_sparse_mla and not arch.has_compressed_attention:
        backend = sparse_mla_kv_cache_dtype(resolved.kv_cache_dtype, gpu_name, release)
    note = resolved.note
    if backend is not None:
        note = backend.note if note is None else f"{note}; then {backend.note}"
        resolved = ResolvedKvDtype(backend.kv_cache_dtype, note)
    return VllmKvCache(resolved.kv_cache_dtype, note, backend is not None)
