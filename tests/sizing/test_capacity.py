"""compute_capacity end to end on constructed models: budget, blocks, fit, errors, engines.

Sources, cited next to each number:
  docs/engines/vllm.md#<section>  what each vLLM release does, with the vLLM file and function
  design = ../shared/design/engine-memory.md (the shared design note next to the repository)
The memory constants the engine profiles use (non-torch, SGLang start-up, ...) are taken from
service/sizing/engines/calibration.py by name: these tests check how they are combined. The GPUs
and models come from tests/sizing/models.py, with their sources.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import pytest

from service.sizing import architecture_from_dict
from service.sizing.capacity import Gpu, Parallelism, Workload, compute_capacity
from service.sizing.engines import calibration as cal
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.errors import InvalidDtype, InvalidParallelism, SizingError, UnknownLayerKind
from service.sizing.model.architecture import (
    FullAttention,
    Mamba2,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
)
from service.sizing.model.dtypes import KV_CACHE_DTYPE_BYTES
from service.sizing.units import GiB, MiB, cdiv
from tests.sizing.models import H100_TORCH as H100
from tests.sizing.models import H200_TORCH as H200
from tests.sizing.models import LLAMA_31_8B, LLAMA_LAYER, QWEN3_NEXT_80B

PAGE = 16 * 2 * 8 * 128 * 2  # one layer's page at B = 16: 65,536 B (design §1.7)
BLOCK = 32 * PAGE  # one block across 32 layers: 2 MiB


def vllm(version: str, **options: object) -> EngineOptions:
    return EngineOptions(engine=Engine.VLLM, engine_version=version, **options)  # type: ignore[arg-type]


# --- the vLLM budget ----------------------------------------------------------------------------

BUDGET_CASES = [
    # (version, utilization default, non-torch constant, cudagraph line)
    ("0.6.4", 0.9, cal.VLLM_NON_TORCH_WITH_CONTEXT, False),
    ("0.7.3", 0.9, cal.VLLM_NON_TORCH_INCREASE, False),
    ("0.8.5", 0.9, cal.VLLM_NON_TORCH_WITH_CONTEXT, False),
    ("0.9.2", 0.9, cal.VLLM_NON_TORCH_INCREASE, False),
    ("0.19.0", 0.9, cal.VLLM_NON_TORCH_INCREASE, False),
    ("0.20.0", 0.92, cal.VLLM_NON_TORCH_INCREASE, True),
    ("0.33.0", 0.92, cal.VLLM_NON_TORCH_INCREASE, True),
]


@pytest.mark.parametrize(("version", "util", "non_torch", "cudagraph"), BUDGET_CASES)
def test_vllm_budget_lines_sum_to_the_pool_in_every_release(
    version: str, util: float, non_torch: int, cudagraph: bool
) -> None:
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(8192), engine=vllm(version))
    lines = {line.name: line.bytes for line in cap.budget.lines}
    # design §1.2: requested = util x total; docs/engines/vllm.md#requested-memory: default util 0.9
    # up to v0.19, 0.92 from v0.20
    assert cap.budget.fraction == util
    assert abs(lines["requested"] - H100.memory_bytes * util) <= 1
    # V0 before v0.6.5 and V1 before v0.9.2 charge the CUDA context as non-torch
    # (docs/engines/vllm.md#non-torch-memory)
    assert lines["non_torch"] == -non_torch
    # docs/engines/vllm.md#cuda-graph-memory: the estimate is subtracted by default from v0.20
    names = ["total_memory", "requested", "weights", "activation_peak", "non_torch"]
    names += ["cudagraph"] if cudagraph else []
    names += ["kv_cache_memory"]
    assert [line.name for line in cap.budget.lines] == names
    # requested - weights - activation - non-torch - cudagraph == pool (design §1.2)
    taken = sum(b for n, b in lines.items() if n not in ("total_memory", "kv_cache_memory"))
    assert taken == cap.budget.pool_bytes == lines["kv_cache_memory"]
    assert lines["weights"] == -16_060_522_496
    assert (
        cap.budget.requested_bytes
        - cap.budget.weights_bytes
        - cap.budget.activation_bytes
        - (cap.budget.non_torch_bytes + cap.budget.cudagraph_bytes)
        == cap.budget.pool_bytes
    )
    # design §1.4: uniform model, num_blocks = pool // (page x L) = pool // 2 MiB
    assert cap.num_gpu_blocks == cap.budget.pool_bytes // BLOCK


@pytest.mark.parametrize(
    ("version", "rounding"),
    [
        # V0 and V1 up to v0.13: util x total stays a float; blocks = int(avail // page // L),
        # the same as truncating it first
        ("0.9.2", int),
        ("0.13.0", int),
        # docs/engines/vllm.md#requested-memory: requested = ceil(total x util) (v1/worker/utils.py
        # request_memory, read in v0.33; the vLLM 0.14.0 wheel's gpu_worker.py already has
        # math.ceil)
        ("0.14.0", math.ceil),
        ("0.33.0", math.ceil),
    ],
)
def test_requested_memory_rounding(version: str, rounding: Callable[[float], int]) -> None:
    gpu = Gpu(80 * GiB + 1, "NVIDIA H100 80GB HBM3")
    util = 0.9
    cap = compute_capacity(
        LLAMA_31_8B, gpu, Workload(8192), engine=vllm(version, gpu_memory_utilization=util)
    )
    # 85,899,345,921 x 0.9 = 77,309,411,328.9 -> int 77,309,411,328, ceil 77,309,411,329
    assert cap.budget.requested_bytes == rounding(gpu.memory_bytes * util)


def test_enforce_eager_drops_the_cudagraph_line() -> None:
    # design §1.2 item 3: --enforce-eager => estimate 0
    cap = compute_capacity(
        LLAMA_31_8B, H100, Workload(8192), engine=vllm("0.20.0", enforce_eager=True)
    )
    assert "cudagraph" not in [line.name for line in cap.budget.lines]
    assert cap.budget.cudagraph_bytes == 0


def test_a_given_cudagraph_size_replaces_the_estimate() -> None:
    # design §1.2: "Estimated CUDA graph memory: X GiB total" read from a log replaces the estimate
    given = compute_capacity(
        LLAMA_31_8B, H100, Workload(8192), engine=vllm("0.21.0", cudagraph_memory_bytes=GiB)
    )
    lines = {line.name: line.bytes for line in given.budget.lines}
    assert lines["cudagraph"] == -GiB
    eager = compute_capacity(
        LLAMA_31_8B, H100, Workload(8192), engine=vllm("0.21.0", enforce_eager=True)
    )
    # everything else equal: the pool is 1 GiB smaller than without graphs
    assert eager.budget.pool_bytes - given.budget.pool_bytes == GiB


@pytest.mark.parametrize("version", ["0.7.3", "0.9.2", "0.33.0"])
def test_kv_pool_bytes_replaces_the_pool_exactly(version: str) -> None:
    pool = 10 * GiB + 12_345
    cap = compute_capacity(
        LLAMA_31_8B, H100, Workload(8192), engine=vllm(version, kv_pool_bytes=pool)
    )
    # design §1.2: --kv-cache-memory-bytes bypasses the budget: available_kv = that value
    assert cap.budget.pool_bytes == pool
    assert cap.budget.pool_given is True
    # 10 GiB + 12,345 B // 2 MiB = 5,120 blocks (the 12,345 B are less than a block)
    assert cap.num_gpu_blocks == pool // cap.layout.bytes_per_block == 5120


def test_num_gpu_blocks_override_replaces_the_block_count() -> None:
    # design §1.2: --num-gpu-blocks-override replaces the computed block count
    cap = compute_capacity(
        LLAMA_31_8B, H100, Workload(8192), engine=vllm("0.11.0", num_gpu_blocks_override=1000)
    )
    assert cap.num_gpu_blocks == 1000
    # (1,000 - 1 null block) // cdiv(8,192, 16) = 999 // 512 = 1
    assert cap.max_num_seqs == 1


# --- pipeline parallel --------------------------------------------------------------------------


def test_pipeline_parallel_takes_the_smallest_block_count_of_the_stages() -> None:
    # 5 full-attention layers over 2 stages: vLLM get_pp_indices gives the remainder to the
    # stages before the last -> 3 + 2 layers (service/sizing/engines/parallel.py)
    arch = LLAMA_31_8B.with_layers((LLAMA_LAYER,) * 5)
    pool = 3 * GiB
    cap = compute_capacity(
        arch,
        H100,
        Workload(8192),
        Parallelism(pipeline_parallel_size=2),
        vllm("0.33.0", kv_pool_bytes=pool),
    )
    # stage 0: 3 layers -> one block = 3 x 65,536 B; 3 GiB // 196,608 = 16,384 blocks
    # stage 1: 2 layers -> 131,072 B; 3 GiB // 131,072 = 24,576 blocks
    assert cap.per_stage_blocks == (pool // (3 * PAGE), pool // (2 * PAGE)) == (16_384, 24_576)
    # docs/engines/vllm.md#pipeline-parallel / design §1.4: every worker uses the minimum over
    # workers
    assert cap.num_gpu_blocks == 16_384
    assert cap.layout.bytes_per_block == 3 * PAGE


def test_pipeline_parallel_groups_a_hybrid_by_the_whole_models_layer_ratio() -> None:
    # 3 full + 1 sliding layer (window 1,024) over 2 stages of 2 layers each:
    # stage 0 = full, full; stage 1 = full, sliding.
    sliding = SlidingWindowAttention(num_kv_heads=8, head_dim=128, sliding_window=1024)
    arch = LLAMA_31_8B.with_layers((LLAMA_LAYER,) * 3 + (sliding,))
    pool = GiB
    cap = compute_capacity(
        arch,
        H100,
        Workload(8192),
        Parallelism(pipeline_parallel_size=2),
        vllm("0.33.0", kv_pool_bytes=pool, max_num_batched_tokens=2048),
    )
    # design §1.4: "groups are projected per worker (_project_kv_cache_groups_to_worker)"; the
    # vLLM get_kv_cache_configs docstring (v0.11+): "Generate the KV cache groups based on the
    # layer ratio of the whole model". Whole model: 3 full, 1 sliding -> G = min = 1
    # (3 is not < 1.5 x 1): groups (full.0), (full.1), (full.2), (sliding.3).
    # Projected: stage 0 holds (full.0), (full.1), (), () and stage 1 (), (), (full.2),
    # (sliding.3); one block = the largest projected group = 1 page = 65,536 B on each stage.
    assert cap.per_stage_blocks == (pool // PAGE, pool // PAGE) == (16_384, 16_384)
    assert cap.num_gpu_blocks == 16_384
    # The scheduler sees all 4 groups: 3 x cdiv(8,192, 16) + (cdiv(1,023 + 2 x 2,048, 16) + 1)
    #   = 3 x 512 + (320 + 1) = 1,857 blocks per request
    assert cap.layout.blocks_per_request == 3 * 512 + cdiv(1023 + 2 * 2048, 16) + 1 == 1857
    # (16,384 - 1) // 1,857 = 8 sequences
    assert cap.max_num_seqs == 8


# --- when it does not fit -----------------------------------------------------------------------


def test_one_sequence_that_does_not_fit_reports_the_longest_that_does() -> None:
    options = vllm("0.28.0", kv_pool_bytes=100 * BLOCK)
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(131_072), engine=options)
    # 100 blocks of 16 tokens; one 131,072-token sequence needs 8,192
    assert cap.num_gpu_blocks == 100
    assert cap.fits is False
    assert cap.reason is not None
    assert "8192 blocks" in cap.reason
    # design §1.5: binary search on the per-request formula: cdiv(L, 16) <= 100 -> L = 1,600
    assert cap.max_model_len_that_fits == 1600
    assert "1600" in cap.reason
    longest = cap.max_model_len_that_fits
    # recomputed: at 1,600 one sequence's 100 blocks fit, at 1,601 it needs 101
    at = compute_capacity(LLAMA_31_8B, H100, Workload(longest), engine=options)
    beyond = compute_capacity(LLAMA_31_8B, H100, Workload(longest + 1), engine=options)
    assert at.layout.blocks_per_request == 100 <= at.num_gpu_blocks
    assert at.fits is True
    assert beyond.layout.blocks_per_request == 101 > beyond.num_gpu_blocks
    assert beyond.fits is False


def test_longest_context_of_a_sliding_hybrid_counts_both_groups() -> None:
    # gpt-oss-style 2 layers: 1 sliding (window 128) + 1 full, 8 KV heads x 64; page 32,768 B,
    # G = 1, one block = 32,768 B. 300 blocks; v0.25, mnbt 2,048.
    sliding = SlidingWindowAttention(num_kv_heads=8, head_dim=64, sliding_window=128)
    full = FullAttention(num_kv_heads=8, head_dim=64)
    arch = ModelArchitecture(layers=(sliding, full), num_attention_heads=64, weight_bytes=GiB)
    options = vllm("0.25.0", kv_pool_bytes=300 * 32_768, max_num_batched_tokens=2048)
    cap = compute_capacity(arch, H100, Workload(131_072), engine=options)
    assert cap.fits is False
    longest = cap.max_model_len_that_fits
    # design §1.3 (<= v0.25): sliding needs cdiv(min(127 + 2,048, L), 16) + 1 = 136 + 1 = 137
    # once L >= 2,175; full needs cdiv(L, 16); 137 + cdiv(L, 16) <= 300 -> cdiv(L, 16) <= 163
    # -> L = 163 x 16 = 2,608
    assert longest == 163 * 16 == 2608
    assert compute_capacity(arch, H100, Workload(longest), engine=options).fits is True
    assert compute_capacity(arch, H100, Workload(longest + 1), engine=options).fits is False


def test_0_33_reserves_the_null_block_before_checking_one_sequence_fits() -> None:
    # docs/engines/vllm.md#null-block-and-the-fit-check: read in v0.33, the null block is subtracted
    # only for the fit check / auto-fit (check_memory = avail - bytes_per_block). 100 blocks
    # -> 99 usable for the check.
    options = vllm("0.33.0", kv_pool_bytes=100 * BLOCK)
    exactly = compute_capacity(LLAMA_31_8B, H100, Workload(1600), engine=options)
    # one 1,600-token sequence needs 100 blocks > 99: vLLM refuses to start
    assert exactly.layout.blocks_per_request == 100
    assert exactly.fits is False
    too_long = compute_capacity(LLAMA_31_8B, H100, Workload(131_072), engine=options)
    # the estimate searches against the same 99 blocks: 99 x 16 = 1,584 tokens
    assert too_long.max_model_len_that_fits == 99 * 16 == 1584


def test_weights_larger_than_the_gpu_do_not_fit() -> None:
    small = Gpu(16 * GiB, "NVIDIA A16")
    heavy = ModelArchitecture(
        layers=LLAMA_31_8B.layers, num_attention_heads=32, weight_bytes=20 * GiB, hidden_size=4096
    )
    cap = compute_capacity(heavy, small, Workload(8192), engine=vllm("0.9.2"))
    # requested = int(0.9 x 16 GiB) = 14.4 GiB < 20 GiB of weights: the pool is negative
    assert cap.budget.pool_bytes < 0
    assert cap.num_gpu_blocks == 0
    assert cap.fits is False
    assert cap.reason is not None
    assert cap.reason.startswith("no memory left for the KV cache")
    assert cap.max_num_seqs == 0


# --- input errors -------------------------------------------------------------------------------


def test_tensor_parallel_that_does_not_divide_the_heads_is_refused() -> None:
    # vLLM verify_with_parallel_config: attention heads must divide by tp (32 % 3 != 0)
    with pytest.raises(InvalidParallelism) as caught:
        compute_capacity(LLAMA_31_8B, H100, Workload(8192), Parallelism(tensor_parallel_size=3))
    assert caught.value.field == "tensor_parallel_size"
    # 48 attention heads divide by 6, but 8 KV heads do not (and 6 is not a multiple of 8)
    arch = ModelArchitecture(
        layers=(FullAttention(8, 128),) * 4, num_attention_heads=48, weight_bytes=GiB
    )
    with pytest.raises(InvalidParallelism) as caught:
        compute_capacity(arch, H100, Workload(8192), Parallelism(tensor_parallel_size=6))
    assert caught.value.field == "tensor_parallel_size"


def test_mamba2_groups_that_tp_does_not_divide_are_refused_unless_there_is_one() -> None:
    # vLLM mamba_mixer2.py (wheels 0.10.2 ... 0.33.0): "assert n_groups % tp_size == 0 or
    # n_groups == 1"; docs/engines/vllm.md#recurrent-state: only n_groups % tp != 0 is padded to tp
    # (the n_groups = 1 case).
    # Nemotron-H-56B geometry: 256 heads x 64, state 256, 8 groups; 64 attention heads.
    mamba = Mamba2(num_heads=256, head_dim=64, state_size=256, n_groups=8, conv_kernel=4)
    arch = ModelArchitecture(
        layers=(mamba,) * 6 + (FullAttention(8, 128),), num_attention_heads=64, weight_bytes=GiB
    )
    with pytest.raises(InvalidParallelism) as caught:
        compute_capacity(arch, H100, Workload(8192), Parallelism(tensor_parallel_size=16))
    assert caught.value.field == "tensor_parallel_size"
    # 8 groups over 8 ranks is fine
    ok = compute_capacity(arch, H100, Workload(8192), Parallelism(tensor_parallel_size=8))
    assert ok.fits is True


def test_an_unknown_layer_kind_is_refused_not_sized_as_attention() -> None:
    data = {
        "num_attention_heads": 32,
        "layer_specs": {"full_attention": {"num_kv_heads": 8, "head_dim": 128}},
        "layer_schedule": ["full_attention", "hyena"],
    }
    with pytest.raises(UnknownLayerKind) as caught:
        architecture_from_dict(data)
    assert caught.value.code == "unknown-layer-kind"
    assert caught.value.field.startswith("layer_schedule")
    assert "hyena" in caught.value.reason
    spec_data = {
        "num_attention_heads": 32,
        "layer_specs": {"retention": {"num_heads": 8}},
        "layer_schedule": ["retention"],
    }
    with pytest.raises(UnknownLayerKind):
        architecture_from_dict(spec_data)


def test_an_unknown_kv_cache_dtype_lists_the_accepted_ones() -> None:
    with pytest.raises(InvalidDtype) as caught:
        Workload(8192, kv_cache_dtype="int3")
    assert caught.value.field == "kv_cache_dtype"
    for accepted in KV_CACHE_DTYPE_BYTES:  # auto, bfloat16, float16, float32, fp8, ...
        assert accepted in caught.value.reason


# Qwen3-Next-80B's layers with 1 GiB of weights
QWEN3_NEXT_LIKE = replace(QWEN3_NEXT_80B, weight_bytes=GiB)


def test_recurrent_state_models_need_vllm_0_10_2_or_later() -> None:
    # docs/engines/vllm.md#recurrent-state: Mamba / GDN pages live in the KV pool from v0.10.2
    with pytest.raises(SizingError) as caught:
        compute_capacity(QWEN3_NEXT_LIKE, H100, Workload(8192), engine=vllm("0.9.2"))
    assert caught.value.field == "engine_version"
    cap = compute_capacity(QWEN3_NEXT_LIKE, H100, Workload(8192), engine=vllm("0.10.2"))
    # docs/engines/vllm.md#hybrid-block-size: attention block 544 for Qwen3-Next at TP1 with
    # bf16 state
    assert cap.layout.block_size == 544


def test_hybrid_prefix_caching_default_shows_in_settings_and_state_blocks() -> None:
    # docs/engines/vllm.md#prefix-caching-default: hybrids default to prefix caching (and 'align',
    # 2 state blocks) from v0.28
    before = compute_capacity(QWEN3_NEXT_LIKE, H100, Workload(8192), engine=vllm("0.27.0"))
    after = compute_capacity(QWEN3_NEXT_LIKE, H100, Workload(8192), engine=vllm("0.28.0"))
    assert before.engine_settings["enable_prefix_caching"] is False
    assert after.engine_settings["enable_prefix_caching"] is True
    # 3 linear groups x 1 or 2 blocks + cdiv(8,192, 544) = 16 full-attention blocks
    assert before.layout.blocks_per_request == 3 * 1 + 16
    assert after.layout.blocks_per_request == 3 * 2 + 16


def test_mla_models_take_the_backend_block_size() -> None:
    mla = MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64)
    arch = ModelArchitecture(layers=(mla,) * 61, num_attention_heads=128, weight_bytes=GiB)
    # docs/engines/vllm.md#mla-block-size: Hopper 64 up to v0.17, 16 from v0.18
    for version, block in (("0.17.0", 64), ("0.18.0", 16)):
        cap = compute_capacity(arch, H100, Workload(8192), engine=vllm(version))
        assert cap.engine_settings["block_size"] == block
        # design §1.8: page = B x (512 + 64) x 2 B per layer; one block = 61 pages
        assert cap.layout.bytes_per_block == 61 * block * 1152


# --- SGLang and TensorRT-LLM ----------------------------------------------------------------------


def test_sglang_tokens_are_the_pool_over_the_cell_rounded_to_pages() -> None:
    pool = 10_000_000_000
    options = EngineOptions(engine=Engine.SGLANG, kv_pool_bytes=pool, block_size=64)
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(8192), engine=options)
    # design §2: cell = 8 heads x 128 x 32 layers x 2 (K, V) x 2 B = 131,072 B;
    # 10,000,000,000 // 131,072 = 76,293 tokens; page 64: 76,293 // 64 x 64 = 76,288
    assert cap.kv_cache_tokens == 76_288
    # 76,288 / 64 = 1,192 pages; 8,192 tokens = 128 pages -> 1,192 // 128 = 9 sequences
    assert cap.num_gpu_blocks == 1192
    assert cap.max_num_seqs == 9
    page_one = compute_capacity(
        LLAMA_31_8B,
        H100,
        Workload(8192),
        engine=EngineOptions(engine=Engine.SGLANG, kv_pool_bytes=pool),
    )
    assert page_one.kv_cache_tokens == 76_293


def test_sglang_budget_is_rest_memory_after_the_static_fraction() -> None:
    gpu = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3")
    options = EngineOptions(engine=Engine.SGLANG, mem_fraction_static=0.85)
    cap = compute_capacity(LLAMA_31_8B, gpu, Workload(8192), engine=options)
    # design §2: rest = free after loading - free at start x (1 - f)
    free_at_start = 80 * GiB - cal.SGLANG_CONTEXT  # 85,899,345,920 - 536,870,912 = 85,362,475,008
    loaded = int(16_060_522_496 * (1 + cal.SGLANG_LOAD_OVERHEAD_FRACTION))  # 16,301,430,333
    reserved = int(free_at_start * (1 - 0.85))  # 12,804,371,251
    pool = free_at_start - loaded - reserved  # 56,256,673,424
    assert (free_at_start, loaded, reserved, pool) == (
        85_362_475_008,
        16_301_430_333,
        12_804_371_251,
        56_256_673_424,
    )
    assert cap.budget.pool_bytes == pool
    # 56,256,673,424 // 131,072 = 429,204 tokens (page 1)
    assert cap.kv_cache_tokens == 429_204
    # max_running_requests = min(max(int(429,204 / 8,192 x 512), 2048), 4096) = 4096
    assert cap.report.log_lines[1] == (
        "max_total_num_tokens=429204, max_running_requests=4096, context_len=8192"
    )


def test_sglang_cell_is_per_gpu_under_tensor_parallel() -> None:
    pool = 10_000_000_000
    options = EngineOptions(engine=Engine.SGLANG, kv_pool_bytes=pool)
    cap = compute_capacity(
        LLAMA_31_8B, H100, Workload(8192), Parallelism(tensor_parallel_size=2), options
    )
    # design §2: Hkv per GPU = 8 / 2 = 4 -> cell 65,536 B; 10,000,000,000 // 65,536 = 152,587
    assert cap.kv_bytes_per_token_per_gpu == 65_536
    assert cap.kv_cache_tokens == 152_587


def test_trtllm_uses_32_token_blocks() -> None:
    options = EngineOptions(engine=Engine.TRTLLM, kv_pool_bytes=GiB)
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(1000), engine=options)
    # design §3: tokens_per_block 32; one block = 32 x 131,072 B = 4 MiB; 1 GiB // 4 MiB = 256
    assert cap.engine_settings["tokens_per_block"] == 32
    assert cap.layout.block_size == 32
    assert cap.layout.bytes_per_block == 4 * MiB
    assert cap.num_gpu_blocks == 256
    assert cap.kv_cache_tokens == 256 * 32 == 8192
    # one 1,000-token request holds cdiv(1,000, 32) = 32 blocks -> 256 // 32 = 8
    assert cap.layout.blocks_per_request == 32
    assert cap.max_num_seqs == 8


def test_trtllm_fraction_applies_to_memory_free_after_warm_up() -> None:
    gpu = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3")
    options = EngineOptions(
        engine=Engine.TRTLLM, free_gpu_memory_fraction=0.5, max_num_batched_tokens=8192
    )
    cap = compute_capacity(LLAMA_31_8B, gpu, Workload(8192), engine=options)
    lines = {line.name: line.bytes for line in cap.budget.lines}
    # design §3: kv = (total - peak) x fraction; peak = weights + warm-up + non-torch
    free = 80 * GiB - 16_060_522_496 - cap.budget.activation_bytes - cal.TRTLLM_NON_TORCH
    assert lines["free_after_warmup"] == free
    assert cap.budget.pool_bytes == int(free * 0.5)


# --- DeepSeek sparse attention ---------------------------------------------------------------

SPARSE_MLA = MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64, indexer_head_dim=128)
DEEPSEEK_V32 = ModelArchitecture(
    layers=(SPARSE_MLA,) * 61, num_attention_heads=128, weight_bytes=GiB
)


def test_deepseek_v32_pool_is_cut_into_64_token_blocks_with_the_indexer() -> None:
    pool = 10 * GiB
    cap = compute_capacity(
        DEEPSEEK_V32,
        H200,
        Workload(65_536),
        Parallelism(tensor_parallel_size=8),
        vllm("0.33.0", kv_pool_bytes=pool),
    )
    # FlashMLA-sparse pages of 64 tokens; the latent (1,152 B) and the indexer key (132 B)
    # are one uniform-type group: one block = 64 x 61 x 1,284 B = 5,012,736 B on every rank
    assert cap.layout.block_size == 64
    assert cap.layout.bytes_per_block == 64 * 61 * (1152 + 132) == 5_012_736
    # 10,737,418,240 // 5,012,736 = 2,142 blocks; 65,536 / 64 = 1,024 per request
    assert cap.num_gpu_blocks == 2142
    assert cap.layout.blocks_per_request == 1024
    # (2,142 - 1 null block) // 1,024 = 2 sequences; 2,142 / 1,024 = 2.09x
    assert cap.max_num_seqs == 2
    assert cap.report.log_lines == (
        "GPU KV cache size: 137,088 tokens, Maximum concurrency for 65,536 tokens per request: "
        "2.09x",
    )


def test_sparse_attention_models_need_vllm_0_11() -> None:
    with pytest.raises(SizingError) as caught:
        compute_capacity(DEEPSEEK_V32, H200, Workload(8192), Parallelism(8), vllm("0.10.2"))
    assert caught.value.field == "engine_version"


def test_fp8_on_sparse_mla_warns_about_the_656_byte_rows() -> None:
    cap = compute_capacity(
        DEEPSEEK_V32,
        H200,
        Workload(8192, "fp8"),
        Parallelism(8),
        vllm("0.33.0", kv_pool_bytes=10 * GiB),
    )
    assert any("fp8_ds_mla" in w for w in cap.warnings)


def test_fp8_ds_mla_sizes_deepseeks_packed_656_byte_rows() -> None:
    pool = 10 * GiB
    cap = compute_capacity(
        DEEPSEEK_V32,
        H200,
        Workload(65_536, "fp8_ds_mla"),
        Parallelism(tensor_parallel_size=8),
        vllm("0.33.0", kv_pool_bytes=pool),
    )
    # flashmla_sparse.py "FP8 with scale": 512 fp8 + 512 // 128 x 4 B scales + 64 x 2 B rope
    # = 656 B, plus the 132-B indexer key: 61 x 788 = 48,068 B per token
    assert cap.kv_bytes_per_token == 61 * (656 + 132) == 48_068
    # one 64-token block: 64 x 48,068 = 3,076,352 B; 10,737,418,240 // 3,076,352 = 3,490
    assert cap.layout.bytes_per_block == 3_076_352
    assert cap.num_gpu_blocks == 3490
    # (3,490 - 1) // 1,024 blocks per 65,536-token request = 3 sequences
    assert cap.max_num_seqs == 3
    assert not any("fp8_ds_mla" in w for w in cap.warnings)


def test_fp8_ds_mla_is_refused_for_models_without_sparse_mla() -> None:
    with pytest.raises(InvalidDtype) as caught:
        compute_capacity(LLAMA_31_8B, H100, Workload(8192, "fp8_ds_mla"), engine=vllm("0.33.0"))
    assert caught.value.field == "kv_cache_dtype"


def test_fp8_ds_mla_is_a_vllm_format_only() -> None:
    engine = EngineOptions(engine=Engine.SGLANG, kv_pool_bytes=10 * GiB)
    with pytest.raises(InvalidDtype):
        compute_capacity(DEEPSEEK_V32, H200, Workload(8192, "fp8_ds_mla"), Parallelism(8), engine)


def test_trtllm_rounds_a_partial_last_block_up() -> None:
    # _util.py KvCacheCreator: max_tokens = pool // kv_size_per_token; resource_manager.py
    # KVCacheManager.calculate_max_num_blocks: blocks = ceil(max_tokens / 32).
    # pool = 1 GiB + 100 tokens: 8,292 tokens -> ceil(8,292 / 32) = 260 blocks (259.1)
    pool = GiB + 100 * 131_072
    options = EngineOptions(engine=Engine.TRTLLM, kv_pool_bytes=pool)
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(1000), engine=options)
    assert cap.kv_cache_tokens == 8292
    assert cap.num_gpu_blocks == 260
    # 260 // 32 blocks per 1,000-token request = 8 sequences
    assert cap.max_num_seqs == 8
