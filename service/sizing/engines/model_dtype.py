"""The dtype weights and activations run at (`--dtype`), as the engine resolves it.

vLLM reads the checkpoint's dtype (`torch_dtype` / `dtype` in config.json) and resolves
`--dtype auto` by release and GPU (docs/engines/vllm.md#dtype):

* before 0.9.1 (`_get_and_verify_dtype`, vllm/config.py): a float32 checkpoint runs as float16
  ("Following the common practice, we use float16 for float32 models"); a bfloat16 checkpoint
  on a GPU without bfloat16 is refused when the worker starts (`_check_if_gpu_supports_dtype`,
  "Bfloat16 is only supported on GPUs with compute capability of at least 8.0").
* from 0.9.1 (vllm-project/vllm#18751, `_resolve_auto_dtype` in vllm/config.py, later
  vllm/config/model.py): a float32 checkpoint runs as the platform's first supported dtype,
  bfloat16 where the GPU has it (`CudaPlatformBase.supported_dtypes`, vllm/platforms/cuda.py:
  compute capability >= 8.0), else float16; a bfloat16 checkpoint on a GPU without it falls
  back to float16 with a warning.

An explicit dtype is taken as given, except bfloat16 on a GPU without it, which vLLM refuses
(`Platform.check_if_supports_dtype`). The KV cache's `auto` follows the resolved dtype, and the
weights of an unquantized checkpoint are loaded at it: the question's architecture is the
checkpoint's at that dtype (`served_architecture`). Not modelled: the model types vLLM keeps off
float16 (`_FLOAT16_NOT_SUPPORTED_MODELS`: gemma2, gemma3, plamo2, glm4), and pooling models'
float16 preference. SGLang and TensorRT-LLM take an explicit dtype; their `auto` keeps the
checkpoint's.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ..errors import InvalidDtype
from ..frozen import frozen
from ..model.architecture import ModelArchitecture
from ..model.dtypes import FloatDtype, ModelDtype, WeightFormat
from ..units import cdiv
from ..versions import release_label
from . import calibration as cal
from .common import Engine, EngineOptions, Gpu
from .vllm import parse_vllm_version, vllm_rules_text

_WHERE_OLD = "vllm/config.py _get_and_verify_dtype"
_WHERE_NEW = "vllm/config/model.py _resolve_auto_dtype"
# Unquantized weight formats: loaded at the dtype the engine runs (a quantized checkpoint keeps
# its own format whatever --dtype says; --dtype then sets the activations and the KV cache).
_UNQUANTIZED = frozenset({WeightFormat.FLOAT32, WeightFormat.BFLOAT16, WeightFormat.FLOAT16})


@frozen
class ResolvedDtype:
    """The dtype the engine runs the model at, and the warning saying why where it is not the
    checkpoint's."""

    dtype: FloatDtype
    note: str | None = None


def resolve_model_dtype(checkpoint: FloatDtype, engine: EngineOptions, gpu: Gpu) -> ResolvedDtype:
    """The dtype `engine` runs a `checkpoint`-dtype model at on `gpu`."""
    return _resolve(
        checkpoint,
        engine.dtype,
        engine.engine,
        vllm_rules_text(engine) if engine.engine is Engine.VLLM else "",
        bf16=gpu.bf16_support,
        gpu_label=gpu.slug or gpu.name or "this GPU",
    )


@lru_cache(maxsize=256)
def _resolve(
    checkpoint: FloatDtype,
    requested: ModelDtype,
    engine: Engine,
    version_text: str,
    *,
    bf16: bool,
    gpu_label: str,
) -> ResolvedDtype:
    if requested is not ModelDtype.AUTO:
        if requested is ModelDtype.BFLOAT16 and not bf16:
            raise InvalidDtype(
                "dtype",
                f"{gpu_label} has no bfloat16 (compute capability below 8.0): the engine refuses "
                "dtype bfloat16 at start-up (vLLM Platform.check_if_supports_dtype); ask "
                "dtype=float16",
            )
        if requested.value == checkpoint:
            return ResolvedDtype(checkpoint)
        return ResolvedDtype(
            FloatDtype(requested.value),
            f"the {checkpoint} checkpoint runs as {requested.value} (dtype={requested.value}): "
            f"weights and an auto KV cache at {requested.element_bytes} bytes per "
            "element",
        )
    if engine is not Engine.VLLM:
        if checkpoint is FloatDtype.FLOAT32:
            return ResolvedDtype(
                checkpoint,
                f"float32 checkpoint sized at 4 bytes per element under dtype=auto: kvplan "
                f"does not model how {engine.value} resolves auto; pass dtype to choose",
            )
        return ResolvedDtype(checkpoint)
    version = parse_vllm_version(version_text)
    label = release_label(version)
    if version < cal.VLLM_AUTO_DTYPE_PLATFORM_PREFERRED:
        return _vllm_before_091(checkpoint, bf16, gpu_label, label)
    preferred = FloatDtype.BFLOAT16 if bf16 else FloatDtype.FLOAT16
    if checkpoint is FloatDtype.FLOAT32:
        why = "the GPU has bfloat16" if bf16 else f"{gpu_label} has no bfloat16"
        return ResolvedDtype(
            preferred,
            f"float32 checkpoint runs as {preferred} under dtype=auto ({why}; vLLM {label} "
            f"{_WHERE_NEW}): weights and an auto KV cache at 2 bytes per element",
        )
    if checkpoint is FloatDtype.BFLOAT16 and not bf16:
        return ResolvedDtype(
            FloatDtype.FLOAT16,
            f"bfloat16 checkpoint runs as float16 under dtype=auto: {gpu_label} has no "
            f"bfloat16 (vLLM {label} {_WHERE_NEW} falls back to float16)",
        )
    return ResolvedDtype(checkpoint)


def _vllm_before_091(
    checkpoint: FloatDtype, bf16: bool, gpu_label: str, label: str
) -> ResolvedDtype:
    if checkpoint is FloatDtype.FLOAT32:
        return ResolvedDtype(
            FloatDtype.FLOAT16,
            f"float32 checkpoint runs as float16 under dtype=auto (vLLM {label} {_WHERE_OLD}; "
            "from 0.9.1 bfloat16 where the GPU has it): weights and an auto KV cache at 2 "
            "bytes per element",
        )
    if checkpoint is FloatDtype.BFLOAT16 and not bf16:
        raise InvalidDtype(
            "dtype",
            f"{gpu_label} has no bfloat16 (compute capability below 8.0) and vLLM {label} "
            "refuses a bfloat16 checkpoint under dtype=auto at start-up "
            "(_check_if_gpu_supports_dtype; from 0.9.1 it falls back to float16); ask "
            "dtype=float16",
        )
    return ResolvedDtype(checkpoint)


def served_architecture(arch: ModelArchitecture, dtype: FloatDtype) -> ModelArchitecture:
    """The architecture as the engine runs it at `dtype`: its model dtype (which an auto KV
    cache and the recurrent state follow) and, for an unquantized checkpoint, its weights."""
    if dtype == arch.dtype:
        return arch
    # keyed by the name too: architectures compare without it, and engines read it (SGLang)
    return _served(arch, arch.name, dtype)


@lru_cache(maxsize=1024)
def _served(arch: ModelArchitecture, name: str, dtype: FloatDtype) -> ModelArchitecture:
    if arch.weight_format not in _UNQUANTIZED:
        return replace(arch, dtype=dtype)
    weight_bytes = arch.weight_bytes
    if weight_bytes is not None:
        # the checkpoint's bytes at the new element size (every tensor is at weight_format)
        old = arch.weight_format.bits
        new = WeightFormat(dtype).bits
        weight_bytes = cdiv(weight_bytes * int(new), int(old))
    return replace(arch, dtype=dtype, weight_format=WeightFormat(dtype), weight_bytes=weight_bytes)
