"""Issue 19: sparse MLA (DeepSeek-V3.2, GLM-5) with an fp8 cache, in the format of the backend
vLLM runs on the GPU, worked by hand from the published DeepSeek-V3.2 config.json.

Read in the vLLM 0.24.0, 0.26.0, 0.30.0 and 0.33.0 wheels: platforms/cuda.py
`_get_backend_priorities` (use_mla; SM100 with a quantized cache: FLASHINFER_MLA_SPARSE, then
FLASHMLA_SPARSE; SM120: FLASHINFER_MLA_SPARSE_SM120; otherwise FLASH_ATTN_MLA_SPARSE,
FLASHMLA_SPARSE, and FLASHINFER_MLA_SPARSE_SM90 last for a 576-wide head), each backend's
`supported_kv_cache_dtypes` / `supports_compute_capability` (FLASH_ATTN_MLA_SPARSE: auto,
float16, bfloat16 only), and layers/attention/mla_attention.py
`_canonicalize_sparse_mla_kv_cache_dtype` (FLASHMLA_SPARSE: any quantized dtype ->
fp8_ds_mla; FLASHINFER_MLA_SPARSE_SM120: auto, fp8, fp8_e4m3 -> fp8_ds_mla).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing.capacity import Gpu, Parallelism, Workload, compute_capacity
from service.sizing.engines.common import EngineOptions
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.hf_config import architecture_from_hf_config

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GiB = 2**30

# DeepSeek-V3.2: 61 MLA layers of kv_lora_rank 512 + qk_rope_head_dim 64, each with a
# lightning-indexer key of 128 fp8 + 128 / 128 x 4 B = 132 B.
FP8_DS_MLA = 61 * (512 + 512 // 128 * 4 + 64 * 2 + 132)  # 656-B rows: 61 x 788 = 48,068
PLAIN_FP8 = 61 * ((512 + 64) * 1 + 132)  # 576 fp8 values: 61 x 708 = 43,188


def per_token(gpu_name: str, dtype: KvCacheDtype, version: str = "0.33.0") -> tuple[int, str]:
    arch = architecture_from_hf_config(
        json.loads((FIXTURES / "deepseek-ai--DeepSeek-V3.2.json").read_text("utf-8"))
    )
    capacity = compute_capacity(
        arch,
        Gpu(memory_bytes=141 * GiB, name=gpu_name),
        Workload(max_model_len=8192, kv_cache_dtype=dtype),
        Parallelism(tensor_parallel_size=8),
        EngineOptions(engine_version=version, kv_pool_bytes=40 * GiB),
    )
    return capacity.facts.kv_bytes_per_token, " | ".join(capacity.warnings)


def test_the_row_sizes() -> None:
    assert FP8_DS_MLA == 48_068
    assert PLAIN_FP8 == 43_188


@pytest.mark.parametrize("version", ["0.24.0", "0.33.0"])
def test_hopper_runs_flashmla_sparse_which_stores_fp8_ds_mla(version: str) -> None:
    size, warnings = per_token("NVIDIA H200 141GB", KvCacheDtype.FP8, version)
    assert size == FP8_DS_MLA
    assert "FLASHMLA_SPARSE" in warnings
    assert "sparse MLA with a plain fp8 cache" not in warnings


def test_b200_runs_flashinfer_mla_sparse_which_keeps_plain_fp8() -> None:
    size, warnings = per_token("NVIDIA B200", KvCacheDtype.FP8)
    assert size == PLAIN_FP8
    assert "FLASHINFER_MLA_SPARSE" in warnings
    # asked by name, FLASHMLA_SPARSE's rows are sized
    assert per_token("NVIDIA B200", KvCacheDtype.FP8_DS_MLA)[0] == FP8_DS_MLA


def test_sm120_stores_fp8_ds_mla_even_for_auto() -> None:
    for dtype in (KvCacheDtype.AUTO, KvCacheDtype.FP8):
        size, warnings = per_token("NVIDIA RTX PRO 6000 Blackwell Server Edition", dtype)
        assert size == FP8_DS_MLA
        assert "FLASHINFER_MLA_SPARSE_SM120" in warnings


def test_a_gpu_or_release_whose_backend_kvplan_does_not_know_keeps_the_warning() -> None:
    # A100: no sparse-MLA backend's choice is modelled for compute capability 8.x; vLLM 0.23
    # and older: the priorities were not read. Plain fp8 with the warning, as before.
    for gpu, version in (("NVIDIA A100 80GB SXM", "0.33.0"), ("NVIDIA H200 141GB", "0.23.0")):
        size, warnings = per_token(gpu, KvCacheDtype.FP8, version)
        assert size == PLAIN_FP8
        assert "sparse MLA with a plain fp8 cache" in warnings
