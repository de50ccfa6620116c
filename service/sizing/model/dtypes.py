"""Element sizes: KV-cache dtypes, model dtypes, recurrent-state dtypes, weight formats."""

from __future__ import annotations

from enum import StrEnum
from fractions import Fraction
from functools import lru_cache
from typing import Final

from ..errors import InvalidDtype

# Model (activation / `torch_dtype`) dtypes and their element size in bytes.
MODEL_DTYPE_BYTES: Final[dict[str, int]] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
}
_MODEL_DTYPE_ALIASES: Final[dict[str, str]] = {
    "fp32": "float32",
    "float": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
}

# KV-cache element size. vLLM `CacheConfig.cache_dtype` / `--kv-cache-dtype`
# (vllm/config/cache.py); fp8 variants store one byte per element, per-tensor scales
# are not part of the page (vllm/v1/kv_cache_interface.py).
KV_CACHE_DTYPE_BYTES: Final[dict[str, int | None]] = {
    "auto": None,  # the model's own dtype
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    # DeepSeek's packed sparse-MLA rows (vLLM FlashMLA-sparse, 0.11+): fp8 latent, fp32 scales,
    # bf16 rope; only MLA layers with a sparse-attention indexer take it (kv.mla_latent_bytes).
    "fp8_ds_mla": 1,
}
_KV_DTYPE_ALIASES: Final[dict[str, str]] = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
    "fp8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
}

# The KV cache a checkpoint declares in its quantization config, as kvplan names it: the
# quantizer and the cache dtype (weight_format.declared_kv_cache reads it from a config.json).
# What an engine does with it is the engine's rule (engines/vllm.py vllm_kv_cache_dtype).
CHECKPOINT_KV_CACHES: Final[tuple[str, ...]] = (
    "modelopt_fp8",  # modelopt kv_cache_quant_algo FP8 / kv_cache_scheme {8-bit float, static}
    "modelopt_nvfp4",  # modelopt kv_cache_quant_algo NVFP4 / kv_cache_scheme {4-bit float}
    "compressed_tensors_fp8",  # compressed-tensors kv_cache_scheme {8-bit float}
)

ACCEPTED_KV_CACHE_DTYPES: Final[tuple[str, ...]] = tuple(KV_CACHE_DTYPE_BYTES) + tuple(
    _KV_DTYPE_ALIASES
)


@lru_cache(maxsize=256)
def normalize_model_dtype(name: str, field: str = "dtype") -> str:
    key = name.strip().lower().removeprefix("torch.")
    key = _MODEL_DTYPE_ALIASES.get(key, key)
    if key not in MODEL_DTYPE_BYTES:
        accepted = ", ".join(sorted(MODEL_DTYPE_BYTES) + sorted(_MODEL_DTYPE_ALIASES))
        raise InvalidDtype(field, f"unknown dtype {name!r}; accepted: {accepted}")
    return key


class ModelDtype(StrEnum):
    """vLLM's `--dtype` (vllm/config/model.py `ModelDType`): the precision weights and
    activations run at. `auto` is resolved per engine release and GPU
    (engines/model_dtype.py `resolve_model_dtype`); the others carry their element size."""

    AUTO = "auto"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    FLOAT32 = "float32"

    @property
    def element_bytes(self) -> int | None:
        """Bytes per element; None for `auto` (the resolved dtype's)."""
        return MODEL_DTYPE_BYTES.get(self.value)


# vLLM's --dtype choices `half` and `float` (`_STR_DTYPE_TO_TORCH_DTYPE`), and the short names
# the KV-cache flag already takes.
_DTYPE_FLAG_ALIASES: Final[dict[str, ModelDtype]] = {
    "half": ModelDtype.FLOAT16,
    "fp16": ModelDtype.FLOAT16,
    "float": ModelDtype.FLOAT32,
    "fp32": ModelDtype.FLOAT32,
    "bf16": ModelDtype.BFLOAT16,
}
ACCEPTED_DTYPES: Final[tuple[str, ...]] = (*(d.value for d in ModelDtype), *_DTYPE_FLAG_ALIASES)


def parse_dtype(name: str | ModelDtype, field: str = "dtype") -> ModelDtype:
    """A `--dtype` value as vLLM spells it (or an alias) -> its `ModelDtype`; once, at the door."""
    if isinstance(name, ModelDtype):
        return name
    key = name.strip().lower().removeprefix("torch.")
    found = _DTYPE_FLAG_ALIASES.get(key)
    if found is not None:
        return found
    try:
        return ModelDtype(key)
    except ValueError:
        raise InvalidDtype(
            field, f"unknown dtype {name!r}; accepted: {', '.join(ACCEPTED_DTYPES)}"
        ) from None


def normalize_checkpoint_kv_cache(name: str, field: str = "checkpoint_kv_cache") -> str:
    if name not in CHECKPOINT_KV_CACHES:
        raise InvalidDtype(
            field,
            f"unknown checkpoint KV cache {name!r}; accepted: {', '.join(CHECKPOINT_KV_CACHES)}",
        )
    return name


class FloatDtype(StrEnum):
    """A floating-point element a model stores at: its `torch_dtype`, a recurrent state's dtype,
    `--mamba-ssm-cache-dtype`. Parsed once from its name (`parse_float_dtype`)."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"

    @property
    def element_bytes(self) -> int:
        return _FLOAT_BYTES[self]


_FLOAT_BYTES: Final[dict[FloatDtype, int]] = {d: MODEL_DTYPE_BYTES[d.value] for d in FloatDtype}


def parse_float_dtype(name: str | FloatDtype, field: str = "dtype") -> FloatDtype:
    """A model / state dtype name (`torch.bfloat16`, `bf16`, `half`, ...) -> its `FloatDtype`."""
    if isinstance(name, FloatDtype):
        return name
    return FloatDtype(normalize_model_dtype(name, field))


class KvCacheDtype(StrEnum):
    """vLLM's `--kv-cache-dtype` (vllm/config/cache.py `CacheDType`), canonical names only;
    `parse_kv_cache_dtype` maps the aliases. `auto` takes the model's dtype."""

    AUTO = "auto"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    FLOAT32 = "float32"
    FP8 = "fp8"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    FP8_DS_MLA = "fp8_ds_mla"

    @property
    def element_bytes(self) -> int | None:
        """Bytes per element; None for `auto` (the model dtype's)."""
        return _KV_BYTES[self]

    def bytes_at(self, model_dtype: FloatDtype) -> int:
        """Bytes per KV element; `auto` follows the model dtype (vLLM
        `STR_DTYPE_TO_TORCH_DTYPE`)."""
        size = _KV_BYTES[self]
        return model_dtype.element_bytes if size is None else size

    @property
    def packed_mla(self) -> bool:
        """DeepSeek's packed sparse-MLA rows (kv.packed_mla says which models take them)."""
        return self is KvCacheDtype.FP8_DS_MLA


_KV_BYTES: Final[dict[KvCacheDtype, int | None]] = {
    d: KV_CACHE_DTYPE_BYTES[d.value] for d in KvCacheDtype
}
PACKED_MLA_KV_DTYPE: Final = KvCacheDtype.FP8_DS_MLA


@lru_cache(maxsize=256)
def _kv_cache_dtype_name(name: str, field: str) -> KvCacheDtype:
    key = name.strip().lower()
    key = _KV_DTYPE_ALIASES.get(key, key)
    if key not in KV_CACHE_DTYPE_BYTES:
        accepted = ", ".join(ACCEPTED_KV_CACHE_DTYPES)
        raise InvalidDtype(field, f"unknown KV-cache dtype {name!r}; accepted: {accepted}")
    return KvCacheDtype(key)


def parse_kv_cache_dtype(name: str | KvCacheDtype, field: str = "kv_cache_dtype") -> KvCacheDtype:
    """A `--kv-cache-dtype` value as vLLM spells it (or an alias) -> its `KvCacheDtype`; once,
    at the door. A typed value passes through."""
    if isinstance(name, KvCacheDtype):
        return name
    return _kv_cache_dtype_name(name, field)


# Weight storage formats as bits per parameter, including their block scales.
WEIGHT_FORMAT_BITS: Final[dict[str, Fraction]] = {
    "float32": Fraction(32),
    "bfloat16": Fraction(16),
    "float16": Fraction(16),
    "fp8": Fraction(8),  # e4m3; 128x128 block scales add 4 B per 16384 weights, ignored
    "int8": Fraction(8),  # w8a8 per-channel scales, negligible
    "int4": Fraction(4),
    # AWQ / GPTQ: 4-bit weights, group size 128 with an fp16 scale and a packed 4-bit zero
    # per group (AutoAWQ / AutoGPTQ defaults, q_group_size=128).
    "awq": Fraction(4) + Fraction(16 + 4, 128),
    "gptq": Fraction(4) + Fraction(16 + 4, 128),
    # NVFP4: E2M1 values with one FP8 (E4M3) scale per 16 (NVIDIA "Introducing NVFP4").
    "nvfp4": Fraction(4) + Fraction(8, 16),
    # MXFP4: E2M1 values with one E8M0 scale per 32 (OCP Microscaling spec v1.0).
    "mxfp4": Fraction(4) + Fraction(8, 32),
}
_WEIGHT_ALIASES: Final[dict[str, str]] = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "auto": "bfloat16",
    "fp8_e4m3": "fp8",
    "w8a8": "int8",
    "compressed-tensors": "int8",
    "w4a16": "int4",
    "modelopt_fp4": "nvfp4",
    "fp4": "nvfp4",
}


class WeightFormat(StrEnum):
    """How a checkpoint stores its weights (`WEIGHT_FORMAT_BITS`), canonical names only;
    `parse_weight_format` maps the aliases (`bf16`, `w8a8`, `modelopt_fp4`, ...)."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    AWQ = "awq"
    GPTQ = "gptq"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"

    @property
    def bits(self) -> Fraction:
        """Bits per parameter, block scales included."""
        return _WEIGHT_BITS[self]


_WEIGHT_BITS: Final[dict[WeightFormat, Fraction]] = {
    f: WEIGHT_FORMAT_BITS[f.value] for f in WeightFormat
}


@lru_cache(maxsize=256)
def _weight_format_name(name: str, field: str) -> WeightFormat:
    key = name.strip().lower()
    key = _WEIGHT_ALIASES.get(key, key)
    if key not in WEIGHT_FORMAT_BITS:
        accepted = ", ".join(sorted(WEIGHT_FORMAT_BITS) + sorted(_WEIGHT_ALIASES))
        raise InvalidDtype(field, f"unknown weight format {name!r}; accepted: {accepted}")
    return WeightFormat(key)


def parse_weight_format(name: str | WeightFormat, field: str = "weight_format") -> WeightFormat:
    """A weight format name (or alias) -> its `WeightFormat`; once, at the door."""
    if isinstance(name, WeightFormat):
        return name
    return _weight_format_name(name, field)
