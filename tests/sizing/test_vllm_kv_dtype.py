"""vLLM's cache dtype step for a checkpoint that declares its KV cache, by release.

Each row is read from the released wheels (docs/engines/vllm.md#kv-cache-dtype-auto):
resolve_kv_cache_dtype_string (vllm/utils/torch_utils.py) from 0.14.0 for modelopt;
Attention.__init__ for compressed-tensors, over any flag in 0.15.0-0.21.x, over auto only from
0.22.0.
"""

from __future__ import annotations

import pytest

from service.sizing.engines.vllm import vllm_release
from service.sizing.engines.vllm_kv_dtype import vllm_kv_cache_dtype
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.weight_format import declared_kv_cache


@pytest.mark.parametrize(
    ("declared", "requested", "version", "expected"),
    [
        ("modelopt_fp8", "auto", (0, 13, 0), "auto"),
        ("modelopt_fp8", "auto", (0, 14, 0), "fp8_e4m3"),
        ("modelopt_fp8", "bfloat16", (0, 33, 0), "bfloat16"),
        # nvfp4 is warned about and kept at auto: 0.14-0.19 fall back, kvplan has no nvfp4 pages
        ("modelopt_nvfp4", "auto", (0, 33, 0), "auto"),
        ("compressed_tensors_fp8", "auto", (0, 14, 1), "auto"),
        ("compressed_tensors_fp8", "auto", (0, 15, 0), "fp8"),
        ("compressed_tensors_fp8", "bfloat16", (0, 21, 0), "fp8"),
        ("compressed_tensors_fp8", "bfloat16", (0, 22, 0), "bfloat16"),
        ("compressed_tensors_fp8", "auto", (0, 33, 0), "fp8"),
    ],
)
def test_the_cache_dtype_each_release_allocates(
    declared: str, requested: str, version: tuple[int, int, int], expected: str
) -> None:
    resolved = vllm_kv_cache_dtype(
        KvCacheDtype(requested), declared, vllm_release(version), mla=False
    )
    assert resolved.kv_cache_dtype == expected


def test_mla_layers_have_no_compressed_tensors_step() -> None:
    # MLAAttention.__init__ reads the flag only; the kv_cache_scheme step is Attention's.
    resolved = vllm_kv_cache_dtype(
        KvCacheDtype.AUTO, "compressed_tensors_fp8", vllm_release((0, 33, 0)), True
    )
    assert resolved.kv_cache_dtype == "auto"


@pytest.mark.parametrize(
    ("quantization_config", "expected"),
    [
        # modelopt >= 0.31 in config.json (nvidia/Qwen3.6-27B-NVFP4's own section, trimmed)
        (
            {
                "quant_method": "modelopt",
                "quant_algo": "MIXED_PRECISION",
                "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
            },
            "modelopt_fp8",
        ),
        # hf_quant_config.json body: {"producer": {"name": "modelopt"}, "quantization": {...}}
        (
            {
                "producer": {"name": "modelopt", "version": "0.29.0"},
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
            },
            "modelopt_fp8",
        ),
        ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "int8"}, None),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {},
                "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"},
            },
            "compressed_tensors_fp8",
        ),
        (
            {"quant_method": "compressed-tensors", "config_groups": {}, "kv_cache_scheme": None},
            None,
        ),
    ],
)
def test_the_declared_kv_cache_is_read_as_vllm_reads_it(
    quantization_config: dict[str, object], expected: str | None
) -> None:
    assert declared_kv_cache({"quantization_config": quantization_config}) == expected
