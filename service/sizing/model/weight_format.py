"""How a checkpoint stores its weights, from what its `config.json` declares.

Two questions, one reading of `quantization_config` (config.json), `compression_config` (older
compressed-tensors) or `quantization` (modelopt `hf_quant_config.json`):

* `detect_weight_format`: the one format name kvplan prices a parameter count with when nothing
  finer is known (`dtypes.WEIGHT_FORMAT_BITS`);
* `checkpoint_size`: the bytes of every tensor `param_count` lists, stored as the quantization
  method stores it (values, scales, zero points, group indexes), with every tensor the method
  leaves alone (embeddings, norms, biases, the modules its ignore list names) at the model dtype.

Each storage rule names the code that writes those tensors. A method or scheme with no rule here
raises `SizingError` naming the config key.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from fnmatch import translate as fnmatch_translate
from typing import Any, Final

from ..errors import SizingError
from ..units import cdiv
from .config_view import HFConfig
from .dtypes import MODEL_DTYPE_BYTES, FloatDtype, WeightFormat, parse_float_dtype
from .tensors import ParameterCount, Tensor, TensorClass, TensorRole

# ---------------------------------------------------------------------------------------------
# the model dtype


def model_dtype(cfg: HFConfig) -> FloatDtype:
    # transformers >= 4.56 writes `dtype`, older `torch_dtype`; multimodal configs may carry it
    # only at the top level. Missing -> bfloat16 (gpt-oss ships none).
    for key in ("torch_dtype", "dtype"):
        found = cfg.top_or_lm(key)
        if found is None:
            continue
        where, value = found
        if not isinstance(value, str):
            raise SizingError(where, f"must be a dtype name, got {value!r}")
        return parse_float_dtype(value, where)
    return FloatDtype.BFLOAT16


# ---------------------------------------------------------------------------------------------
# the format name (one per checkpoint)


def detect_weight_format(config: Mapping[str, Any]) -> WeightFormat:
    """The storage format of the checkpoint's (bulk of) weights, a `dtypes.WEIGHT_FORMAT_BITS` key.

    From `quantization_config` (config.json), `compression_config` (older compressed-tensors) or
    `quantization` (modelopt `hf_quant_config.json`); without one, the model dtype. Mixed
    checkpoints report the format of their MLP / expert weights, which hold most parameters.
    """
    cfg = HFConfig(config)
    found = quantization_section(cfg)
    if found is not None:
        where, section = found
        fmt = _format_from_quantization(section, where)
        if fmt is not None:
            return WeightFormat(fmt)
    return WeightFormat(model_dtype(cfg))


def declared_kv_cache(config: Mapping[str, Any]) -> str | None:
    """The KV cache the checkpoint's quantization config declares (dtypes.CHECKPOINT_KV_CACHES).

    Read as vLLM reads it: modelopt from `kv_cache_scheme` or `kv_cache_quant_algo`, at the top
    of the section or inside its `quantization` object (hf_quant_config.json), the first found
    (vllm/utils/torch_utils.py `get_kv_cache_quant_algo_string`, v0.14.0+; a section with no
    `quant_method` but a modelopt `producer` is modelopt,
    vllm/transformers_utils/model_arch_config_convertor.py `_normalize_quantization_config`);
    compressed-tensors from `kv_cache_scheme`, which vLLM accepts only as 8-bit float
    (compressed_tensors.py `CompressedTensorsKVCacheMethod.validate_kv_cache_scheme`). A
    declaration vLLM does not recognise is none: vLLM warns and keeps `auto`.
    """
    found = quantization_section(HFConfig(config))
    if found is None:
        return None
    where, section = found
    if where == "quantization" or where.endswith(".quantization"):
        # a bare hf_quant_config.json body, as quantization_section reads it: modelopt's own
        section = {"quant_method": "modelopt", "quantization": section}
    inner = section.get("quantization")
    inner = inner if isinstance(inner, Mapping) else section
    method = section.get("quant_method")
    producer = section.get("producer")
    if method is None and isinstance(producer, Mapping) and producer.get("name") == "modelopt":
        method = "modelopt"
    if not isinstance(method, str):
        return None
    method = method.lower().replace("_", "-")
    if method.startswith("modelopt"):
        declared = (
            inner.get("kv_cache_scheme")
            or section.get("kv_cache_scheme")
            or inner.get("kv_cache_quant_algo")
            or section.get("kv_cache_quant_algo")
        )
        return _modelopt_kv_cache(declared)
    scheme = section.get("kv_cache_scheme")
    if (
        method == "compressed-tensors"
        and isinstance(scheme, Mapping)
        and scheme.get("type") == "float"
        and scheme.get("num_bits") == 8
    ):
        return "compressed_tensors_fp8"
    return None


def _modelopt_kv_cache(declared: Any) -> str | None:
    # get_kv_cache_quant_algo_string: a static 8-bit float scheme is fp8, a 4-bit float one
    # nvfp4 (v0.20.0+); a name is looked up case-blind in MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP.
    if isinstance(declared, Mapping):
        if (
            declared.get("dynamic") is False
            and declared.get("num_bits") == 8
            and declared.get("type") == "float"
        ):
            return "modelopt_fp8"
        if declared.get("num_bits") == 4 and declared.get("type") == "float":
            return "modelopt_nvfp4"
        return None
    if isinstance(declared, str) and declared.lower() in ("fp8", "nvfp4"):
        return f"modelopt_{declared.lower()}"
    return None


def quantization_section(cfg: HFConfig) -> tuple[str, Mapping[str, Any]] | None:
    # config.json `quantization_config`; compressed-tensors before 0.7 `compression_config`;
    # modelopt hf_quant_config.json `{"producer": ..., "quantization": {...}}`.
    for key in ("quantization_config", "compression_config"):
        found = cfg.top_or_lm(key)
        if found is None:
            continue
        where, section = found
        if not isinstance(section, Mapping):
            raise SizingError(where, "must be an object")
        inner = section.get("quantization")
        if "quant_algo" not in section and isinstance(inner, Mapping) and "quant_algo" in inner:
            # an hf_quant_config.json body as the config's quantization_config (vLLM
            # transformers_utils/config.py get_config sets it so, `with_hf_quant_config`):
            # ModelOpt's own `quantization` object holds the algorithm.
            return f"{where}.quantization", inner
        return where, section
    modelopt = cfg.top.get("quantization")
    if isinstance(modelopt, Mapping) and "quant_algo" in modelopt:
        return "quantization", modelopt
    return None


def with_hf_quant_config(
    config: Mapping[str, Any], hf_quant_config: Any, field: str = "hf_quant_config"
) -> tuple[dict[str, Any], str | None]:
    """config.json with the `hf_quant_config.json` published beside it, as vLLM reads the pair,
    and a note where the file changes nothing.

    ModelOpt up to 0.29 saved its quantization in hf_quant_config.json beside config.json; vLLM
    (transformers_utils/config.py `get_config`, 0.33.0 as earlier) reads that file only when
    config.json has no top-level `quantization_config`, and then sets it as the config's
    `quantization_config`; the ModelOpt classes read its `quantization` object
    (model_executor/layers/quantization/modelopt.py `ModelOptQuantConfigBase.from_config`:
    quant_algo, kv_cache_quant_algo, group_size, exclude_modules).
    """
    if not isinstance(hf_quant_config, Mapping):
        raise SizingError(field, "must be an object (the hf_quant_config.json file)")
    inner = hf_quant_config.get("quantization")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("quant_algo"), str):
        raise SizingError(
            f"{field}.quantization.quant_algo",
            "an hf_quant_config.json names its algorithm there (ModelOpt: NVFP4, FP8, ...)",
        )
    if config.get("quantization_config") is not None:
        return dict(config), (
            "hf_quant_config.json not read: config.json has its own quantization_config, "
            "which vLLM reads instead (transformers_utils/config.py get_config)"
        )
    return {**config, "quantization_config": dict(hf_quant_config)}, None


_MLP_HINTS: Final = ("mlp", "expert", "ffn", "moe", "feed_forward")


def _is_mlp(name: str) -> bool:
    lowered = name.lower()
    return lowered == "linear" or any(hint in lowered for hint in _MLP_HINTS)


def _format_from_algo(algo: str, where: str) -> str:
    # NVIDIA modelopt / TensorRT-LLM QuantAlgo names (FP8, NVFP4, W4A16_NVFP4, MXFP8, W4A8_AWQ,
    # W8A8_SQ_PER_CHANNEL, ...): the weight format is what the name says of the weights.
    name = algo.upper()
    if "NVFP4" in name or name == "FP4":
        return "nvfp4"
    if "MXFP4" in name:
        return "mxfp4"
    if "AWQ" in name:
        return "awq"
    if "FP8" in name:
        return "fp8"
    if name.startswith(("W8A", "INT8")):
        return "int8"
    if name.startswith(("W4A", "INT4")):
        return "int4"
    raise SizingError(where, f"unknown quantization algorithm {algo!r}")


def _kv_cache_only(q: Mapping[str, Any]) -> bool:
    """Only the KV cache is quantized (modelopt kv_cache_quant_algo / compressed-tensors
    kv_cache_scheme): the weights stay in the model dtype."""
    return q.get("kv_cache_scheme") is not None or q.get("kv_cache_quant_algo") is not None


def _most_common(values: Sequence[str]) -> str:
    return Counter(values).most_common(1)[0][0]


def _method(q: Mapping[str, Any], where: str) -> str | None:
    method = q.get("quant_method")
    if method is None and isinstance(q.get("config_groups"), Mapping):
        method = "compressed-tensors"
    if method is None and ("load_in_4bit" in q or "load_in_8bit" in q):
        method = "bitsandbytes"
    if method is None and _kv_cache_only(q):
        return None
    if not isinstance(method, str):
        raise SizingError(f"{where}.quant_method", f"missing or not a string: {method!r}")
    return method.lower()


def _format_from_quantization(q: Mapping[str, Any], where: str) -> str | None:
    algo = q.get("quant_algo")
    if isinstance(algo, str) and algo:
        if algo.upper() != "MIXED_PRECISION":
            return _format_from_algo(algo, f"{where}.quant_algo")
        return _mixed_precision_format(q, where)
    method = _method(q, where)
    if method is None:
        return None
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8"):
        return "fp8"
    if method in ("mxfp4", "modelopt_mxfp4"):
        return "mxfp4"
    if method in ("modelopt_fp4", "nvfp4"):
        return "nvfp4"
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        # AutoAWQ `w_bit`/`bits`, AutoGPTQ `bits`; 4 bits is what the awq/gptq formats price.
        bits = q.get("bits", q.get("w_bit", 4))
        if bits == 8:
            return "int8"
        if bits != 4:
            raise SizingError(f"{where}.bits", f"{bits!r}-bit {method} weights are not priced")
        return "awq" if method.startswith("awq") else "gptq"
    if method == "bitsandbytes":
        if q.get("load_in_4bit") is True:
            return "int4"
        if q.get("load_in_8bit") is True:
            return "int8"
        raise SizingError(f"{where}.load_in_4bit", "bitsandbytes config loads neither 4 nor 8 bit")
    if method in ("compressed-tensors", "modelopt"):
        return _compressed_tensors_format(q, where)
    raise SizingError(f"{where}.quant_method", f"unknown quantization method {method!r}")


def _mixed_precision_format(q: Mapping[str, Any], where: str) -> str | None:
    # modelopt MIXED_PRECISION: DeepSeek-V4-NVFP4 names moe_quant_algo; Qwen3.6-27B-NVFP4 lists
    # quantized_layers (FP8 on linear-attention projections, W4A16_NVFP4 on the MLP). Report the
    # MLP/expert format, which covers most parameters; pass weight_bytes for the exact figure.
    moe_algo = q.get("moe_quant_algo")
    if isinstance(moe_algo, str) and moe_algo:
        return _format_from_algo(moe_algo, f"{where}.moe_quant_algo")
    layers = q.get("quantized_layers")
    if isinstance(layers, Mapping) and layers:
        algos: list[tuple[str, str]] = []
        for module, spec in layers.items():
            algo = spec.get("quant_algo") if isinstance(spec, Mapping) else None
            if isinstance(algo, str):
                algos.append((str(module), algo))
        if algos:
            mlp = [a for m, a in algos if _is_mlp(m)] or [a for _, a in algos]
            return _format_from_algo(_most_common(mlp), f"{where}.quantized_layers")
    return _compressed_tensors_format(q, where)


def _scheme_format(weights: Mapping[str, Any], where: str) -> str:
    # compressed-tensors QuantizationArgs: type float/int, num_bits, group_size.
    bits, kind, group = weights.get("num_bits"), weights.get("type"), weights.get("group_size")
    if kind == "float" and bits == 8:
        return "fp8"
    if kind == "float" and bits == 4 and group == 16:
        return "nvfp4"  # NVFP4: E2M1 with one FP8 scale per 16
    if kind == "float" and bits == 4 and group == 32:
        return "mxfp4"  # MXFP4: E2M1 with one E8M0 scale per 32
    if kind == "int" and bits == 8:
        return "int8"
    if kind == "int" and bits == 4:
        return "int4"
    raise SizingError(where, f"unpriced weight scheme {kind!r} {bits!r}-bit group {group!r}")


def _compressed_tensors_format(q: Mapping[str, Any], where: str) -> str | None:
    groups = q.get("config_groups")
    if isinstance(groups, Mapping) and groups:
        scored: list[tuple[int, str]] = []
        for name, group in groups.items():
            if not isinstance(group, Mapping) or not isinstance(group.get("weights"), Mapping):
                continue
            fmt = _scheme_format(group["weights"], f"{where}.config_groups.{name}.weights")
            targets = group.get("targets") or []
            score = sum(1 for t in targets if isinstance(t, str) and _is_mlp(t))
            scored.append((score, fmt))
        if scored:
            best = max(score for score, _ in scored)
            return _most_common([fmt for score, fmt in scored if score == best])
    # compressed-tensors CompressionFormat names, when no groups are listed.
    formats = {
        "float-quantized": "fp8",
        "naive-quantized": None,
        "int-quantized": "int8",
        "pack-quantized": "int4",
        "nvfp4-pack-quantized": "nvfp4",
        "mxfp4-pack-quantized": "mxfp4",
    }
    fmt_name = q.get("format")
    if isinstance(fmt_name, str) and formats.get(fmt_name):
        return formats[fmt_name]
    if _kv_cache_only(q):
        return None
    raise SizingError(f"{where}.config_groups", "no weight quantization scheme found")


# ---------------------------------------------------------------------------------------------
# how one quantized linear weight is stored


class Storage(StrEnum):
    FP8_BLOCK = "fp8-block"
    FP8_CHANNEL = "fp8-channel"
    FP8_TENSOR = "fp8-tensor"
    INT8_CHANNEL = "int8-channel"
    INT_PACKED = "int-packed"
    AWQ = "awq"
    GPTQ = "gptq"
    BNB_4BIT = "bitsandbytes-4bit"
    BNB_8BIT = "bitsandbytes-8bit"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"


# Storages that pack integer values into int32 words, and four-bit ones (LinearStorage.bytes).
_INT32_PACKED: Final = frozenset({Storage.INT_PACKED, Storage.AWQ, Storage.GPTQ})
_FOUR_BIT: Final = frozenset({Storage.BNB_4BIT, Storage.MXFP4, Storage.NVFP4})


@dataclass(frozen=True, slots=True)
class LinearStorage:
    """The tensors one (out_features x in_features) weight becomes in the checkpoint."""

    storage: Storage
    bits: int = 8
    group_size: int = 0
    block: tuple[int, int] = (128, 128)
    scale_bytes: int = 4
    zero_points: bool = False
    input_scale: bool = False
    double_quant: bool = False

    def bytes(self, out: int, inp: int) -> int:
        """The checkpoint bytes of one (out x in) weight, by how its values are held: a byte
        each with scales, packed into int32 words by group, or four-bit floats."""
        if self.storage in _INT32_PACKED:
            return self._int32_packed_bytes(out, inp)
        if self.storage in _FOUR_BIT:
            return self._four_bit_bytes(out, inp)
        return self._byte_bytes(out, inp)

    def _byte_bytes(self, out: int, inp: int) -> int:
        """One byte a value (FP8, INT8, bitsandbytes 8-bit) plus its scales."""
        n = out * inp
        s = self.scale_bytes
        # One input-activation scale per tensor when activations are statically quantized.
        extra = s if self.input_scale else 0
        match self.storage:
            case Storage.FP8_BLOCK:
                # DeepSeek-V3 / Qwen3-FP8 (transformers FineGrainedFP8, vLLM Fp8LinearMethod
                # with weight_block_size): e4m3 values and one float32 weight_scale_inv per
                # block; compressed-tensors block strategy the same with its scale dtype.
                bo, bi = self.block
                return n + cdiv(out, bo) * cdiv(inp, bi) * s + extra
            case Storage.FP8_CHANNEL | Storage.INT8_CHANNEL:
                # compressed-tensors strategy "channel" (w8a8 int8, fp8-dynamic): 8-bit values,
                # one weight_scale (and zero point when asymmetric) per output row.
                zero = out * s if self.zero_points else 0
                return n + out * s + zero + extra
            case Storage.FP8_TENSOR:
                # modelopt FP8 / compressed-tensors strategy "tensor": one weight_scale.
                return n + s + extra
            case Storage.BNB_8BIT:
                # bitsandbytes Int8Params (LLM.int8): int8 values, an SCB float32 scale per
                # output row and a one-byte weight_format tensor.
                return n + out * 4 + 1
        raise AssertionError(self.storage)  # pragma: no cover - `bytes` sends only these here

    def _int32_packed_bytes(self, out: int, inp: int) -> int:
        """Integer values packed into int32 words, with scales (and zeros) per group."""
        s = self.scale_bytes
        extra = s if self.input_scale else 0
        match self.storage:
            case Storage.INT_PACKED:
                # compressed-tensors pack-quantized (w4a16): weight_packed int32
                # [out, in x bits / 32], weight_scale [out, in / group], weight_shape int64[2],
                # weight_zero_point packed int32 [out x bits / 32, in / group] if asymmetric.
                groups = cdiv(inp, self.group_size) if self.group_size else 1
                packed = out * cdiv(inp * self.bits, 32) * 4
                zero = cdiv(out * self.bits, 32) * groups * 4 if self.zero_points else 0
                return packed + out * groups * s + 16 + zero + extra
            case Storage.AWQ:
                # AutoAWQ WQLinear_GEMM: qweight int32 [in, out x bits / 32], qzeros int32
                # [in / group, out x bits / 32] (with zero_point), scales fp16 [in / group, out].
                groups = cdiv(inp, self.group_size)
                cols = cdiv(out * self.bits, 32)
                zero = groups * cols * 4 if self.zero_points else 0
                return inp * cols * 4 + zero + groups * out * 2
            case Storage.GPTQ:
                # AutoGPTQ / GPTQModel QuantLinear: qweight int32 [in x bits / 32, out], qzeros
                # int32 [in / group, out x bits / 32], scales fp16 [in / group, out] and g_idx
                # int32 [in] (written whether or not desc_act reorders it).
                groups = cdiv(inp, self.group_size)
                rows = cdiv(inp * self.bits, 32)
                return (
                    rows * out * 4
                    + groups * cdiv(out * self.bits, 32) * 4
                    + groups * out * 2
                    + inp * 4
                )
        raise AssertionError(self.storage)  # pragma: no cover - `bytes` sends only these here

    def _four_bit_bytes(self, out: int, inp: int) -> int:
        """Four-bit values two per byte (bitsandbytes NF4/FP4, MXFP4, NVFP4) plus scales."""
        n = out * inp
        match self.storage:
            case Storage.BNB_4BIT:
                # bitsandbytes Params4bit (nf4/fp4): two values per byte, absmax per block of 64
                # as float32, or with bnb_4bit_use_double_quant as uint8 plus a float32
                # nested_absmax per 256 blocks and a 256-entry nested_quant_map; a 16-entry
                # float32 quant_map. (The packed quant_state JSON, ~170 B, is not counted.)
                blocks = cdiv(n, 64)
                if self.double_quant:
                    absmax = blocks + cdiv(blocks, 256) * 4 + 256 * 4
                else:
                    absmax = blocks * 4
                return cdiv(n, 2) + absmax + 16 * 4
            case Storage.MXFP4:
                # OCP MXFP4 (gpt-oss *_blocks / *_scales): E2M1 values two per byte, one uint8
                # E8M0 scale per 32 values.
                return cdiv(n, 2) + cdiv(n, 32)
            case Storage.NVFP4:
                # NVFP4 (modelopt weight / weight_scale / weight_scale_2 / input_scale;
                # compressed-tensors weight_packed / weight_scale / weight_global_scale /
                # input_global_scale): E2M1 values two per byte, one FP8 scale per 16, a float32
                # global scale, and a float32 input scale when activations are FP4 too.
                return cdiv(n, 2) + cdiv(n, 16) + 4 + (4 if self.input_scale else 0)
        raise AssertionError(self.storage)  # pragma: no cover - `bytes` sends only these here


# ---------------------------------------------------------------------------------------------
# which tensors a method quantizes


# Classes that are decoder-layer projections: what AWQ, GPTQ and FP8 checkpoints quantize.
_DECODER: Final = frozenset(
    {
        TensorClass.ATTENTION,
        TensorClass.MLP,
        TensorClass.ROUTED_EXPERTS,
        TensorClass.SHARED_EXPERTS,
        TensorClass.LINEAR_ATTENTION,
        TensorClass.MAMBA,
    }
)


def _aliases(module: str) -> tuple[str, ...]:
    """The module's name in the layouts checkpoints use: with and without the `model.` prefix,
    and multimodal language models under `model.language_model.` or `language_model.model.`."""
    names = [module, module.removeprefix("model.")]
    for new, old in (
        ("language_model.model.", "model.language_model."),
        ("model.language_model.", "language_model.model."),
    ):
        if module.startswith(old):
            names.append(new + module.removeprefix(old))
    return tuple(names)


def _runs(name: str) -> Iterator[str]:
    """Every run of consecutive dotted components of a module name."""
    parts = name.split(".")
    for start in range(len(parts)):
        for end in range(start + 1, len(parts) + 1):
            yield ".".join(parts[start:end])


@dataclass(frozen=True, slots=True)
class ModuleSet:
    """Ignore / exclude / skip / target entries, compiled once, matched against module names.

    compressed-tensors `re:` entries are regular expressions matched from the start
    (compressed_tensors.utils.match); entries with `*` or `?` are shell patterns (modelopt
    exclude_modules, gpt-oss modules_to_not_convert); any other entry names a module, or a run
    of its dotted components (AutoAWQ / bitsandbytes / FP8 modules_to_not_convert: "lm_head",
    "visual", "gate" -- which does not reach "gate_proj").
    """

    runs: frozenset[str]
    pattern: re.Pattern[str] | None

    @classmethod
    def of(cls, entries: Sequence[str]) -> ModuleSet:
        runs: set[str] = set()
        regexes: list[str] = []
        for entry in entries:
            if entry.startswith("re:"):
                regexes.append(f"(?:{entry[3:]})")
            elif "*" in entry or "?" in entry:
                regexes.append(f"(?:{fnmatch_translate(entry)})")
            else:
                runs.add(entry)
        try:
            pattern = re.compile("|".join(regexes)) if regexes else None
        except re.error as exc:
            raise SizingError("quantization_config.ignore", f"bad pattern: {exc}") from None
        return cls(frozenset(runs), pattern)

    def __contains__(self, module: object) -> bool:
        if not isinstance(module, str):
            return False
        for name in _aliases(module):
            if self.pattern is not None and self.pattern.match(name):
                return True
            if self.runs and any(run in self.runs for run in _runs(name)):
                return True
        return False


def matches(pattern: str, module: str) -> bool:
    """Whether one ignore / exclude / skip entry names this module (see `ModuleSet`)."""
    return module in ModuleSet.of([pattern])


def _module(t: Tensor) -> str:
    return t.name.removesuffix(".weight")


def _cls(t: Tensor) -> TensorClass:
    return t.inner if t.tensor_class is TensorClass.MTP and t.inner is not None else t.tensor_class


@dataclass(frozen=True, slots=True)
class _Group:
    """A compressed-tensors / modelopt config group: a storage and the modules it targets."""

    storage: LinearStorage
    targets: ModuleSet
    every_linear: bool


_NOTHING: Final = ModuleSet(frozenset(), None)


@dataclass(frozen=True, slots=True)
class QuantPlan:
    """Which linear weights a checkpoint quantizes, and how each is stored."""

    method: str
    default: LinearStorage | None = None
    # the classes `default` applies to; empty means every linear weight
    scope: frozenset[TensorClass] = frozenset()
    ignore: ModuleSet = _NOTHING
    groups: tuple[_Group, ...] = ()
    # modelopt MIXED_PRECISION: module name (every alias) -> its storage; others unquantized
    per_module: Mapping[str, LinearStorage] | None = None
    # a class stored otherwise than `default` (DeepSeek-V4's fp4 experts)
    by_class: tuple[tuple[TensorClass, LinearStorage], ...] = ()

    def storage_for(self, t: Tensor) -> LinearStorage | None:
        if t.role is not TensorRole.LINEAR:
            return None
        for cls, storage in self.by_class:
            if _cls(t) is cls:
                return storage
        module = _module(t)
        if module in self.ignore:
            return None
        if self.per_module is not None:
            for name in _aliases(module):
                if name in self.per_module:
                    return self.per_module[name]
            return None
        if self.groups:
            for group in self.groups:
                if group.every_linear or module in group.targets:
                    return group.storage
            return None
        if self.scope and _cls(t) not in self.scope:
            return None
        return self.default


@dataclass(frozen=True, slots=True)
class CheckpointSize:
    """Bytes of the checkpoint the config describes, per tensor class."""

    method: str
    dtype: str
    total_bytes: int
    served_bytes: int
    by_class: tuple[tuple[TensorClass, int], ...]
    # The multi-token-prediction tensors a vLLM drafter loads: the MTP layers less their
    # embeddings and head, which vLLM shares with the target (v1/spec_decode/
    # llm_base_proposer.py _maybe_share_embeddings, _maybe_share_lm_head: "Detected MTP model").
    mtp_loaded_bytes: int = 0

    def of(self, tensor_class: TensorClass) -> int:
        return sum(n for c, n in self.by_class if c == tensor_class)


def checkpoint_size(config: Mapping[str, Any], count: ParameterCount) -> CheckpointSize:
    """The checkpoint's bytes: each tensor of `count` at the storage the config declares."""
    cfg = HFConfig(config)
    dtype = model_dtype(cfg)
    plan = quantization_plan(cfg, dtype)
    by_class: dict[TensorClass, int] = {}
    total = served = mtp = 0
    for t, size in zip(count.tensors, _tensor_bytes(plan, dtype, count), strict=True):
        by_class[t.tensor_class] = by_class.get(t.tensor_class, 0) + size
        total += size
        if t.served:
            served += size
        elif t.tensor_class is TensorClass.MTP and t.inner not in _SHARED_WITH_DRAFT:
            mtp += size
    return CheckpointSize(plan.method, dtype, total, served, tuple(by_class.items()), mtp)


_SHARED_WITH_DRAFT = (TensorClass.EMBEDDING, TensorClass.LM_HEAD)


def tensor_bytes(config: Mapping[str, Any], count: ParameterCount) -> tuple[int, ...]:
    """Each tensor of `count` (all `count` copies) at the storage the config declares."""
    cfg = HFConfig(config)
    dtype = model_dtype(cfg)
    return _tensor_bytes(quantization_plan(cfg, dtype), dtype, count)


FLOAT32_BYTES: Final = 4


def _tensor_bytes(plan: QuantPlan, dtype: str, count: ParameterCount) -> tuple[int, ...]:
    element = MODEL_DTYPE_BYTES[dtype]
    sizes: list[int] = []
    for t in count.tensors:
        storage = None if t.float32 else plan.storage_for(t)
        if storage is not None:
            one = storage.bytes(*t.shape[:2])
        else:
            one = (FLOAT32_BYTES if t.float32 else element) * t.numel
        sizes.append(one * t.count)
    return tuple(sizes)


# ---------------------------------------------------------------------------------------------
# reading the plan from the config


def quantization_plan(cfg: HFConfig, dtype: str) -> QuantPlan:
    found = quantization_section(cfg)
    if found is None:
        return QuantPlan(method=dtype)
    where, q = found
    algo = q.get("quant_algo")
    if isinstance(algo, str) and algo:
        return _modelopt_plan(q, where, dtype)
    method = _method(q, where)
    if method is None:
        return QuantPlan(method=dtype)
    if method == "fp8":
        plan = _fp8_plan(q, where)
        expert = cfg.raw("expert_dtype") or ("fp4" if cfg.model_type == "deepseek_v4" else None)
        if expert == "fp4":
            # DeepSeek-V4: the routed experts are MXFP4 (E2M1, one UE8M0 scale per 32; vLLM
            # models/deepseek_v4/quant_config.py: expert_dtype "fp4", the default when the
            # config says none), the rest the fp8 blocks.
            return replace(
                plan,
                method=f"{plan.method}, fp4 experts",
                by_class=((TensorClass.ROUTED_EXPERTS, LinearStorage(Storage.MXFP4)),),
            )
        return plan
    if method == "fbgemm_fp8":
        # transformers FbgemmFp8Config: e4m3 values with a float32 weight_scale per output row,
        # modules_to_not_convert kept.
        ignore = _str_list(q, "modules_to_not_convert", where)
        return QuantPlan(
            method="fbgemm fp8 (per-channel scales)",
            default=LinearStorage(Storage.FP8_CHANNEL),
            scope=_DECODER,
            ignore=ModuleSet.of(ignore),
        )
    if method == "mxfp4":
        # transformers Mxfp4HfQuantizer (gpt-oss): only the experts' gate_up_proj / down_proj
        # are MXFP4; attention, router, embeddings and lm_head stay in the model dtype.
        return QuantPlan(
            method="mxfp4",
            default=LinearStorage(Storage.MXFP4),
            scope=frozenset({TensorClass.ROUTED_EXPERTS}),
        )
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        return _awq_gptq_plan(q, where, method)
    if method == "bitsandbytes":
        return _bnb_plan(q, where, dtype)
    if method in ("compressed-tensors", "modelopt"):
        return _compressed_plan(q, where, dtype)
    raise SizingError(f"{where}.quant_method", f"no storage rules for method {method!r}")


def _str_list(q: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = q.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SizingError(f"{where}.{key}", "must be a list of module names")
    return tuple(value)


def _positive(q: Mapping[str, Any], key: str, where: str, default: int) -> int:
    value = q.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SizingError(f"{where}.{key}", f"must be a positive integer, got {value!r}")
    return value


def _fp8_plan(q: Mapping[str, Any], where: str) -> QuantPlan:
    # transformers FineGrainedFP8Config / vLLM Fp8Config: decoder projections in e4m3; with
    # weight_block_size a float32 weight_scale_inv per block, else one per tensor. lm_head,
    # embeddings, routers and the modules_to_not_convert (vLLM ignored_layers) keep the model
    # dtype.
    ignore = _str_list(q, "modules_to_not_convert", where) + _str_list(q, "ignored_layers", where)
    block = q.get("weight_block_size")
    static = q.get("activation_scheme") == "static"
    if block is None:
        storage = LinearStorage(Storage.FP8_TENSOR, input_scale=static)
        name = "fp8 (per-tensor scales)"
    else:
        if (
            not isinstance(block, list)
            or len(block) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
        ):
            raise SizingError(f"{where}.weight_block_size", f"must be [rows, cols], got {block!r}")
        storage = LinearStorage(Storage.FP8_BLOCK, block=(block[0], block[1]), input_scale=static)
        name = f"fp8 ({block[0]}x{block[1]} block scales)"
    return QuantPlan(method=name, default=storage, scope=_DECODER, ignore=ModuleSet.of(ignore))


def _awq_gptq_plan(q: Mapping[str, Any], where: str, method: str) -> QuantPlan:
    # AutoAWQ / AutoGPTQ quantize the decoder layers' linear projections (not the router, the
    # lm_head unless GPTQ's lm_head flag, nor a vision tower); modules_to_not_convert stay.
    bits = _positive(q, "bits", where, q.get("w_bit", 4))
    group = q.get("group_size", q.get("q_group_size", 128))
    if group == -1:
        group = 0
    if isinstance(group, bool) or not isinstance(group, int) or group < 0:
        raise SizingError(f"{where}.group_size", f"must be a positive integer or -1, got {group!r}")
    awq = method.startswith("awq")
    if awq and q.get("version", "gemm") not in ("gemm", "GEMM", "gemv_fast", "GEMV_FAST"):
        raise SizingError(f"{where}.version", f"no storage rules for AWQ {q.get('version')!r}")
    # group_size -1 (GPTQ): one group spanning the whole input
    storage = LinearStorage(
        Storage.AWQ if awq else Storage.GPTQ,
        bits=bits,
        group_size=group or 1 << 62,
        # AutoAWQ zero_point false: symmetric, no qzeros (AutoGPTQ writes qzeros either way)
        zero_points=not awq or q.get("zero_point", True) is not False,
    )
    scope = set(_DECODER)
    if q.get("lm_head") is True:
        scope.add(TensorClass.LM_HEAD)
    ignore = _str_list(q, "modules_to_not_convert", where)
    name = f"{'awq' if awq else 'gptq'} int{bits} (group {group or 'all'})"
    return QuantPlan(
        method=name, default=storage, scope=frozenset(scope), ignore=ModuleSet.of(ignore)
    )


def _bnb_plan(q: Mapping[str, Any], where: str, dtype: str) -> QuantPlan:
    # transformers Bnb4BitHfQuantizer / Bnb8BitHfQuantizer: every nn.Linear becomes bitsandbytes
    # except llm_int8_skip_modules, which defaults to the output embedding (lm_head).
    skip = q.get("llm_int8_skip_modules")
    ignore = ("lm_head",) if skip is None else _str_list(q, "llm_int8_skip_modules", where)
    if q.get("load_in_4bit") is True:
        double = q.get("bnb_4bit_use_double_quant") is True
        storage = LinearStorage(Storage.BNB_4BIT, bits=4, double_quant=double)
        kind = q.get("bnb_4bit_quant_type", "fp4")
        return QuantPlan(
            method=f"bitsandbytes {kind}", default=storage, ignore=ModuleSet.of(ignore)
        )
    if q.get("load_in_8bit") is True:
        return QuantPlan(
            method="bitsandbytes int8",
            default=LinearStorage(Storage.BNB_8BIT),
            ignore=ModuleSet.of(ignore),
        )
    raise SizingError(f"{where}.load_in_4bit", "bitsandbytes config loads neither 4 nor 8 bit")


def _scheme_storage(
    weights: Mapping[str, Any],
    activations: Mapping[str, Any] | None,
    where: str,
    scale_bytes: int,
) -> LinearStorage:
    # compressed-tensors QuantizationArgs of a config group's weights (and input activations).
    bits, kind = weights.get("num_bits"), weights.get("type", "int")
    strategy = weights.get("strategy")
    group = weights.get("group_size")
    symmetric = weights.get("symmetric", True) is not False
    static_input = activations is not None and activations.get("dynamic") is False
    if kind == "float" and bits == 4:
        if group in (None, 16):
            return LinearStorage(Storage.NVFP4, bits=4, input_scale=activations is not None)
        if group == 32:
            return LinearStorage(Storage.MXFP4, bits=4)
    if bits == 8 and kind in ("float", "int"):
        if strategy == "block" or weights.get("block_structure") is not None:
            block = weights.get("block_structure") or [128, 128]
            return LinearStorage(
                Storage.FP8_BLOCK,
                block=(int(block[0]), int(block[1])),
                scale_bytes=scale_bytes,
                input_scale=static_input,
            )
        if strategy == "channel":
            storage = Storage.FP8_CHANNEL if kind == "float" else Storage.INT8_CHANNEL
            return LinearStorage(
                storage,
                scale_bytes=scale_bytes,
                zero_points=not symmetric,
                input_scale=static_input,
            )
        # strategy "tensor", and modelopt FP8 groups that name none: one scale per tensor
        # (float32 in modelopt checkpoints).
        return LinearStorage(Storage.FP8_TENSOR, scale_bytes=4, input_scale=static_input)
    if kind == "int" and isinstance(bits, int) and bits in (2, 3, 4, 8) and group:
        return LinearStorage(
            Storage.INT_PACKED,
            bits=bits,
            group_size=int(group),
            scale_bytes=scale_bytes,
            zero_points=not symmetric,
        )
    raise SizingError(
        f"{where}.weights",
        f"no storage rules for {kind!r} {bits!r}-bit weights (strategy {strategy!r}, "
        f"group {group!r})",
    )


def _compressed_plan(q: Mapping[str, Any], where: str, dtype: str) -> QuantPlan:
    # compressed-tensors (llm-compressor; modelopt's config.json export uses the same layout):
    # config_groups each target modules ("Linear" is every linear layer, others name modules);
    # `ignore` keeps modules in the model dtype. Scales are stored in the model dtype
    # (compressed_tensors initialize_module_for_quantization), FP4 scales in FP8.
    scale_bytes = MODEL_DTYPE_BYTES[dtype]
    fmt = q.get("format", "")
    sparsity = q.get("sparsity_config")
    sparse_format = sparsity.get("format") if isinstance(sparsity, Mapping) else None
    if (isinstance(fmt, str) and "24" in fmt) or sparse_format not in (None, "dense"):
        # 2:4-sparse layouts (marlin-24, sparse-24-bitmask) store half the values plus masks
        raise SizingError(
            f"{where}.sparsity_config", "sparse compressed-tensors checkpoints are not priced"
        )
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise SizingError(f"{where}.config_groups", "no weight quantization scheme found")
    made: list[_Group] = []
    for name, group in groups.items():
        if not isinstance(group, Mapping):
            raise SizingError(f"{where}.config_groups.{name}", "must be an object")
        weights = group.get("weights")
        if not isinstance(weights, Mapping):
            continue
        activations = group.get("input_activations")
        storage = _scheme_storage(
            weights,
            activations if isinstance(activations, Mapping) else None,
            f"{where}.config_groups.{name}",
            scale_bytes,
        )
        targets = _str_list(group, "targets", f"{where}.config_groups.{name}") or ("Linear",)
        made.append(_Group(storage, ModuleSet.of(targets), "Linear" in targets))
    if not made:
        raise SizingError(f"{where}.config_groups", "no group quantizes weights")
    method = "modelopt" if q.get("quant_method") == "modelopt" else f"compressed-tensors {fmt}"
    ignore = ModuleSet.of(_str_list(q, "ignore", where))
    return QuantPlan(method=method, groups=tuple(made), ignore=ignore)


_ALGO_STORAGE: Final[dict[str, LinearStorage]] = {
    # modelopt QuantAlgo: FP8 per-tensor weight scales (+ static input scale), NVFP4 with FP4
    # activations (input_scale) or W4A16_NVFP4 without.
    "FP8": LinearStorage(Storage.FP8_TENSOR, input_scale=True),
    "NVFP4": LinearStorage(Storage.NVFP4, bits=4, input_scale=True),
    "W4A16_NVFP4": LinearStorage(Storage.NVFP4, bits=4),
    "MXFP4": LinearStorage(Storage.MXFP4, bits=4),
}


def _algo_storage(algo: str, where: str) -> LinearStorage:
    storage = _ALGO_STORAGE.get(algo.upper())
    if storage is None:
        raise SizingError(where, f"no storage rules for modelopt algorithm {algo!r}")
    return storage


def _modelopt_plan(q: Mapping[str, Any], where: str, dtype: str) -> QuantPlan:
    # modelopt (hf_quant_config.json `quantization`, or its config.json export): quant_algo for
    # every linear layer but exclude_modules / ignore, or MIXED_PRECISION with one algorithm per
    # module in quantized_layers (the rest unquantized).
    algo = str(q.get("quant_algo"))
    ignore = _str_list(q, "exclude_modules", where) + _str_list(q, "ignore", where)
    if algo.upper() == "MIXED_PRECISION":
        layers = q.get("quantized_layers")
        if not isinstance(layers, Mapping) or not layers:
            raise SizingError(f"{where}.quantized_layers", "MIXED_PRECISION lists no layers")
        per_module: dict[str, LinearStorage] = {}
        for module, spec in layers.items():
            layer_algo = spec.get("quant_algo") if isinstance(spec, Mapping) else None
            if not isinstance(layer_algo, str):
                raise SizingError(f"{where}.quantized_layers.{module}", "has no quant_algo")
            storage = _algo_storage(layer_algo, f"{where}.quantized_layers.{module}")
            per_module[str(module)] = storage
        return QuantPlan(
            method="modelopt mixed precision", ignore=ModuleSet.of(ignore), per_module=per_module
        )
    storage = _algo_storage(algo, f"{where}.quant_algo")
    return QuantPlan(
        method=f"modelopt {algo.lower()}", default=storage, ignore=ModuleSet.of(ignore)
    )


__all__ = [
    "CheckpointSize",
    "LinearStorage",
    "ModuleSet",
    "QuantPlan",
    "Storage",
    "checkpoint_size",
    "detect_weight_format",
    "matches",
    "model_dtype",
    "quantization_plan",
    "quantization_section",
    "with_hf_quant_config",
]
