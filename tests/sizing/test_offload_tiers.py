"""KV tiers beyond HBM and weights in host memory (engines/offload.py), worked by hand from the
engines' code: vLLM vllm/v1/kv_offload/cpu/spec.py CPUOffloadingSpec.__init__ (0.33.0) and
vllm/v1/kv_offload/cpu.py (0.14.0), SGLang python/sglang/srt/mem_cache/pool_host/base.py
HostKVCache.__init__ (0.5.23), vLLM vllm/model_executor/offloader/uva.py and SGLang
python/sglang/srt/utils/offloader.py (cpu_offload_gb x 1024**3)."""

from __future__ import annotations

import pytest

from service.sizing.capacity import Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    FullAttention,
    ModelArchitecture,
    MultiHeadLatentAttention,
)
from service.sizing.units import GiB

from .models import H100_80_GIB, H100_TORCH, LLAMA_31_8B

# Llama-3.1-70B (catalog llama-3.1-70b): 80 layers, 8 KV heads x 128, 64 heads, hidden 8192,
# intermediate 28672, vocab 128256; 70,553,706,496 parameters at bf16 (2 B each).
LLAMA_70B = ModelArchitecture(
    layers=(FullAttention(8, 128),) * 80,
    num_attention_heads=64,
    hidden_size=8192,
    intermediate_size=28672,
    vocab_size=128_256,
    weight_bytes=2 * 70_553_706_496,
)
FP8_32K = Workload(max_model_len=32768, kv_cache_dtype="fp8")
TP4 = Parallelism(tensor_parallel_size=4)


def _vllm(version: str, **flags: object) -> EngineOptions:
    # A given pool of 40 GiB per GPU keeps the GPU side fixed: 40 x 2^30 = 42,949,672,960 B.
    return EngineOptions(engine_version=version, kv_pool_bytes=40 * GiB, **flags)  # type: ignore[arg-type]


def test_100_gib_of_host_kv_for_llama_70b_tp4_fp8_on_h100() -> None:
    capacity = compute_capacity(
        LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.33.0", kv_offloading_size=100.0)
    )
    # One worker's GPU block: 80 layers x 2 (K, V) x 2 KV heads (8 / TP 4) x 128 x 1 B (fp8)
    # = 40,960 B per token; x 16 tokens = 655,360 B. GPU: 42,949,672,960 // 655,360 = 65,536
    # blocks, 65,536 x 16 = 1,048,576 tokens; a 32,768-token sequence takes 2,048 blocks and
    # the null block is never handed out: (65,536 - 1) // 2,048 = 31 sequences.
    assert capacity.num_gpu_blocks == 65_536
    assert capacity.kv_cache_tokens == 1_048_576
    tiers = capacity.kv_tiers
    assert tiers is not None
    hbm, host = tiers.tiers
    assert (hbm.tier, hbm.bytes, hbm.blocks, hbm.tokens, hbm.sequences) == (
        "hbm",
        4 * 40 * GiB,  # every GPU of the replica
        65_536,
        1_048_576,
        31,
    )
    # Host block: one GPU block of each of the 4 ranks = 2,621,440 B, already a multiple of
    # 4,096 (640 pages). cpu_bytes_to_use = 100 x 2^30 = 107,374,182,400 B
    # // 2,621,440 = 40,960 host blocks (no remainder), x 16 = 655,360 tokens,
    # 40,960 // 2,048 = 20 sequences of 32,768 tokens; 40,960 x 2,621,440 = 100 GiB.
    assert (host.tier, host.blocks, host.tokens, host.sequences) == ("host", 40_960, 655_360, 20)
    assert host.bytes == 100 * GiB == 107_374_182_400
    assert host.bytes_per_rank == 25 * GiB
    assert tiers.host_memory_bytes_per_replica == 100 * GiB


def test_host_blocks_are_rounded_up_to_pages_from_0_30_only() -> None:
    # One layer, one KV head of 96, bf16: 2 x 1 x 96 x 2 B = 384 B per token, x 16 = 6,144 B
    # a block (1.5 pages). kv_offloading_size 1 GiB = 1,073,741,824 B:
    # 0.26.0 (BLOCK_SIZE_ALIGNMENT = 1): // 6,144 = 174,762 host blocks;
    # 0.33.0 (rounded up to 8,192 B, 2 pages): // 8,192 = 131,072 host blocks.
    tiny = ModelArchitecture(
        layers=(FullAttention(1, 96),), num_attention_heads=1, weight_bytes=GiB
    )
    blocks = {}
    for version in ("0.26.0", "0.33.0"):
        capacity = compute_capacity(
            tiny, H100_80_GIB, Workload(4096), engine=_vllm(version, kv_offloading_size=1.0)
        )
        assert capacity.layout.bytes_per_block == 6_144
        assert capacity.kv_tiers is not None
        blocks[version] = capacity.kv_tiers.tiers[1].blocks
    assert blocks == {"0.26.0": 174_762, "0.33.0": 131_072}


def test_native_offloading_before_0_14_is_refused_as_the_engine_refuses_to_start() -> None:
    # vLLM 0.11.1 - 0.13.x VllmConfig passes num_cpu_blocks=0: the CPU spec raises.
    with pytest.raises(SizingError) as error:
        compute_capacity(
            LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.13.0", kv_offloading_size=100.0)
        )
    assert error.value.field == "kv_offloading_size"


def test_other_engines_flags_are_refused_by_name() -> None:
    cases = [
        (EngineOptions(engine=Engine.SGLANG, kv_offloading_size=10.0), "kv_offloading_size"),
        (EngineOptions(enable_hierarchical_cache=True), "enable_hierarchical_cache"),
        (EngineOptions(engine=Engine.SGLANG, hicache_ratio=2.0), "hicache_ratio"),
        (EngineOptions(engine=Engine.TRTLLM, cpu_offload_gb=4.0), "cpu_offload_gb"),
    ]
    for options, field in cases:
        with pytest.raises(SizingError) as error:
            compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), engine=options)
        assert error.value.field == field


@pytest.mark.parametrize(
    ("engine", "grows_by"),
    [
        # vLLM: no other term of the budget reads the weights: the pool grows by 4 GiB.
        (Engine.VLLM, 4_294_967_296),
        # SGLang: kvplan charges the weights x 1.015 (calibration.py
        # SGLANG_LOAD_OVERHEAD_FRACTION): int(16,060,522,496 x 1.015) - int(11,765,555,200 x
        # 1.015) = 16,301,430,333 - 11,942,038,527 = 4,359,391,806.
        (Engine.SGLANG, 4_359_391_806),
    ],
)
def test_cpu_offload_gb_moves_its_gib_of_weights_out_of_the_gpu_budget(
    engine: Engine, grows_by: int
) -> None:
    # Llama-3.1-8B's 16,060,522,496 B of weights on one H100: 4 GiB = 4,294,967,296 B of them
    # go to host memory.
    plain = compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), engine=EngineOptions(engine))
    moved = compute_capacity(
        LLAMA_31_8B,
        H100_TORCH,
        Workload(8192),
        engine=EngineOptions(engine, cpu_offload_gb=4.0),
    )
    assert moved.kv_pool_bytes - plain.kv_pool_bytes == grows_by
    assert moved.kv_tiers is not None
    assert moved.kv_tiers.offloaded_weight_bytes_per_gpu == 4 * GiB
    assert moved.kv_tiers.host_memory_bytes_per_replica == 4 * GiB  # TP 1: one GPU
    line = [x for x in moved.budget.lines if x.name == "cpu_offload_gb"]
    assert [x.bytes for x in line] == [4 * GiB]


def test_sglang_hicache_size_is_gb_per_rank_plus_a_padding_page() -> None:
    # Llama-3.1-8B, bf16 KV: 32 x 2 x 8 x 128 x 2 B = 131,072 B per token on its one rank.
    # hicache_size 100 GB: 100 x 10^9 // 131,072 = 762,939 tokens; page_size 1: 762,939 // 1
    # + 1 = 762,940 pages = 762,940 tokens, x 131,072 = 100,000,071,680 B; sequences of 8,192
    # tokens: 762,940 // 8,192 = 93.
    capacity = compute_capacity(
        LLAMA_31_8B,
        H100_TORCH,
        Workload(8192),
        engine=EngineOptions(Engine.SGLANG, enable_hierarchical_cache=True, hicache_size=100),
    )
    assert capacity.kv_tiers is not None
    host = capacity.kv_tiers.tiers[1]
    assert (host.blocks, host.tokens, host.sequences) == (762_940, 762_940, 93)
    assert host.bytes == 100_000_071_680


def test_sglang_hicache_ratio_defaults_to_twice_the_device_pool() -> None:
    # int(T x 2.0) tokens, one padding page of 1 token more: 2T + 1 on each rank.
    capacity = compute_capacity(
        LLAMA_31_8B,
        H100_TORCH,
        Workload(8192),
        engine=EngineOptions(Engine.SGLANG, enable_hierarchical_cache=True),
    )
    assert capacity.kv_tiers is not None
    host = capacity.kv_tiers.tiers[1]
    assert host.tokens == 2 * capacity.kv_cache_tokens + 1
    assert host.bytes == host.tokens * 131_072


def test_a_pure_mla_model_on_tensor_parallelism_keeps_one_host_copy_from_0_30() -> None:
    # Four MLA layers (kv_lora_rank 512 + rope 64 = 576 elements, bf16): 4 x 576 x 2 B =
    # 4,608 B a token, the same latent on every rank; block_size 64: 294,912 B a GPU block
    # (72 pages of 4,096 B). kv_offloading_size 1 GiB = 1,073,741,824 B at TP 8:
    # 0.33.0 (replicated_layout, one copy): // 294,912 = 3,640 host blocks;
    # 0.26.0 (a copy per rank): // (8 x 294,912 = 2,359,296) = 455.
    mla = ModelArchitecture(
        layers=(MultiHeadLatentAttention(512, 64),) * 4, num_attention_heads=128, weight_bytes=GiB
    )
    blocks = {}
    for version in ("0.26.0", "0.33.0"):
        capacity = compute_capacity(
            mla,
            H100_80_GIB,
            Workload(4096),
            Parallelism(tensor_parallel_size=8),
            _vllm(version, kv_offloading_size=1.0, block_size=64),
        )
        assert capacity.layout.bytes_per_block == 294_912
        assert capacity.kv_tiers is not None
        blocks[version] = capacity.kv_tiers.tiers[1].blocks
    assert blocks == {"0.26.0": 455, "0.33.0": 3_640}


def test_a_backend_without_a_size_offloads_nothing_and_says_so() -> None:
    # vLLM activates offloading only when kv_offloading_size is set (0.14.0 on).
    capacity = compute_capacity(
        LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.33.0", kv_offloading_backend="native")
    )
    assert capacity.kv_tiers is None
    assert any("kv_offloading_backend=native without" in w for w in capacity.warnings)
