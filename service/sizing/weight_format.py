"""How a checkpoint stores its weights, from what its `config.json` declares.

`detect_weight_format` reads `quantization_config` (config.json), `compression_config` (older
compressed-tensors) or `quantization` (modelopt `hf_quant_config.json`) for the one format name
kvplan prices a parameter count with (`dtypes.WEIGHT_FORMAT_BITS`). A method or scheme with no
rule here raises `SizingError` naming the config key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .config_view import HFConfig
from .dtypes import normalize_model_dtype
from .errors import SizingError

# ---------------------------------------------------------------------------------------------
# the model dtype


def model_dtype(cfg: HFConfig) -> str:
    # transformers >= 4.56 writes `dtype`, older `torch_dtype`; multimodal configs may carry it
    # only at the top level. Missing -> bfloat16 (gpt-oss ships none).
    for key in ("torch_dtype", "dtype"):
        found = cfg.top_or_lm(key)
        if found is None:
            continue
        where, value = found
        if not isinstance(value, str):
            raise SizingError(where, f"must be a dtype name, got {value!r}")
        return normalize_model_dtype(value, where)
    return "bfloat16"


# ---------------------------------------------------------------------------------------------
# the format name (one per checkpoint)


def detect_weight_format(config: Mapping[str, Any]) -> str:
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
            return fmt
    return model_dtype(cfg)


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
        return where, section
    modelopt = cfg.top.get("quantization")
    if isinstance(modelopt, Mapping) and "quant_algo" in modelopt:
        return "quantization", modelopt
    return None


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


__all__ = ["detect_weight_format", "model_dtype", "quantization_section"]
