"""Dtype and weight-format names are parsed once, at the doors, into typed values.

Issue 18 item 3: a capacity question used to turn the same names into bytes at every step
(`normalize_kv_cache_dtype` / `normalize_weight_format` called from eight modules). Now the
doors parse a name into `KvCacheDtype`, `FloatDtype` or `WeightFormat` (each carrying its
element size) and every step reads the typed value.
"""

from __future__ import annotations

import ast
import json
from fractions import Fraction
from pathlib import Path

import pytest

from service.sizing.engines.common import EngineOptions, Workload
from service.sizing.errors import InvalidDtype
from service.sizing.model import dtypes
from service.sizing.model.dtypes import (
    FloatDtype,
    KvCacheDtype,
    WeightFormat,
    parse_float_dtype,
    parse_kv_cache_dtype,
    parse_weight_format,
)

SIZING = Path(__file__).resolve().parents[2] / "service" / "sizing"
PARSERS = frozenset(
    {"parse_kv_cache_dtype", "parse_weight_format", "parse_float_dtype", "normalize_model_dtype"}
)
# The doors of the sizing core: the parse functions themselves, the constructors that take a
# name from a caller (and hand on the typed value), and the config.json readers.
DOORS = frozenset(
    {
        ("model/dtypes.py", "parse_float_dtype"),
        ("model/dtypes.py", "normalize_model_dtype"),
        ("model/architecture.py", "__post_init__"),  # ModelArchitecture
        ("engines/common.py", "__post_init__"),  # Workload, EngineOptions
        ("planning/planner.py", "__post_init__"),  # PlanRequest
        ("model/weight_format.py", "model_dtype"),  # config.json torch_dtype / dtype
        ("model/hf_config.py", "_state_dtype"),  # config.json mamba_ssm_dtype
    }
)


def _calls_outside_doors(path: Path) -> list[str]:
    where = path.relative_to(SIZING).as_posix()
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = child.name
            if isinstance(child, ast.Call):
                func = child.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in PARSERS and (where, function) not in DOORS:
                    found.append(f"{where}:{child.lineno} {function} calls {name}")
            visit(child, inner)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_no_step_of_the_sizing_core_parses_a_dtype_name() -> None:
    modules = sorted(SIZING.rglob("*.py"))
    assert len(modules) > 20  # the walk found the package
    offenders = [line for path in modules for line in _calls_outside_doors(path)]
    assert offenders == []


def test_the_old_per_step_normalisers_are_gone() -> None:
    for name in ("normalize_kv_cache_dtype", "normalize_weight_format", "kv_cache_dtype_bytes"):
        assert not hasattr(dtypes, name), name


@pytest.mark.parametrize(
    ("asked", "parsed"),
    [
        # vLLM --kv-cache-dtype choices (vllm/config/cache.py CacheDType) and the aliases
        # kvplan has always taken (dtypes._KV_DTYPE_ALIASES)
        ("auto", KvCacheDtype.AUTO),
        ("FP8", KvCacheDtype.FP8),
        ("fp8_e5m2", KvCacheDtype.FP8_E5M2),
        ("float8_e4m3fn", KvCacheDtype.FP8_E4M3),
        (" bf16 ", KvCacheDtype.BFLOAT16),
        ("half", KvCacheDtype.FLOAT16),
        ("fp8_ds_mla", KvCacheDtype.FP8_DS_MLA),
    ],
)
def test_a_cache_dtype_name_parses_to_its_canonical_value(asked: str, parsed: KvCacheDtype) -> None:
    assert parse_kv_cache_dtype(asked) is parsed
    assert Workload(1024, asked).kv_cache_dtype is parsed  # the core's door parses it too


def test_the_typed_value_prints_as_the_canonical_name() -> None:
    # The wire format is unchanged: JSON, f-strings and str() give the canonical string.
    value = parse_kv_cache_dtype("float8_e4m3fn")
    assert json.dumps({"kv_cache_dtype": value}) == '{"kv_cache_dtype": "fp8_e4m3"}'
    assert f"{value}" == str(value) == "fp8_e4m3"
    assert json.dumps(parse_weight_format("modelopt_fp4")) == '"nvfp4"'


def test_a_cache_element_follows_the_model_dtype_only_under_auto() -> None:
    # vLLM STR_DTYPE_TO_TORCH_DTYPE: fp8 variants are 1 byte, bfloat16 2, float32 4; `auto`
    # is the model's torch_dtype (2 bytes for bfloat16, 4 for float32).
    assert KvCacheDtype.AUTO.bytes_at(FloatDtype.BFLOAT16) == 2
    assert KvCacheDtype.AUTO.bytes_at(FloatDtype.FLOAT32) == 4
    assert KvCacheDtype.FP8.bytes_at(FloatDtype.FLOAT32) == 1
    assert KvCacheDtype.FP8_E5M2.bytes_at(FloatDtype.BFLOAT16) == 1
    assert KvCacheDtype.FLOAT32.bytes_at(FloatDtype.BFLOAT16) == 4
    assert KvCacheDtype.FP8_DS_MLA.packed_mla
    assert not KvCacheDtype.FP8.packed_mla


def test_a_weight_format_carries_its_bits_per_parameter() -> None:
    # AWQ/GPTQ: 4-bit values, one fp16 scale and one packed 4-bit zero per group of 128
    # (AutoAWQ q_group_size=128): 4 + (16 + 4) / 128 = 4.15625 bits.
    assert parse_weight_format("awq").bits == Fraction(4) + Fraction(20, 128) == 4.15625
    # NVFP4: E2M1 values, one E4M3 scale per 16 (NVIDIA "Introducing NVFP4"): 4 + 8/16 = 4.5.
    assert parse_weight_format("modelopt_fp4").bits == Fraction(9, 2)
    # MXFP4: one E8M0 scale per 32 (OCP Microscaling v1.0): 4 + 8/32 = 4.25.
    assert WeightFormat.MXFP4.bits == Fraction(17, 4)
    assert parse_weight_format("w8a8") is WeightFormat.INT8
    assert parse_weight_format("fp8_e4m3") is WeightFormat.FP8  # one format, two names


def test_a_model_dtype_name_parses_with_its_torch_prefix() -> None:
    assert parse_float_dtype("torch.bfloat16") is FloatDtype.BFLOAT16
    assert parse_float_dtype("fp32").element_bytes == 4  # torch.float32 is 4 bytes


def test_engine_options_parse_their_names_once() -> None:
    options = EngineOptions(weight_format="W4A16", mamba_ssm_cache_dtype="bf16")
    assert options.weight_format is WeightFormat.INT4
    assert options.mamba_ssm_cache_dtype is FloatDtype.BFLOAT16
    # vLLM's --mamba-ssm-cache-dtype auto is no override: the model's own dtype
    assert EngineOptions(mamba_ssm_cache_dtype="auto").mamba_ssm_cache_dtype is None


@pytest.mark.parametrize(
    ("parse", "field"),
    [
        (parse_kv_cache_dtype, "kv_cache_dtype"),
        (parse_weight_format, "weight_format"),
        (parse_float_dtype, "dtype"),
    ],
)
def test_an_unknown_name_is_refused_naming_its_field(parse: object, field: str) -> None:
    with pytest.raises(InvalidDtype) as refused:
        parse("int3")
    assert refused.value.field == field
    assert "int3" in refused.value.reason
