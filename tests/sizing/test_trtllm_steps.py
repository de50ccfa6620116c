"""Each step of TensorRT-LLM's hybrid pools on its own, against its rules worked by hand.

Sources (NVIDIA/TensorRT-LLM, cited next to each number; milestones in
service/sizing/engines/calibration.py):
  kv size   tensorrt_llm/_torch/pyexecutor/_util.py `KvCacheCreator._get_kv_size_per_token`
            (attention layers only from 1.0.0rc3, PR #5371; every hidden layer before)
  blocks    tensorrt_llm/_torch/pyexecutor/resource_manager.py
            `KVCacheManager.calculate_max_num_blocks` (every rank keeps the MIN of max_tokens)
  VSWA      cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
            `BaseKVCacheManager::calculateMaxNumBlocks`, `BlockManager::calculateWindowSizeToShare`
The end-to-end numbers of the same models are in test_trtllm_hybrid.py.
"""

from __future__ import annotations

import pytest

from service.sizing.capacity import Gpu, Parallelism, SizingInputs, Workload, model_facts
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.parallel import pipeline_stages
from service.sizing.engines.trtllm import (
    WindowPool,
    _tightest_stage_mamba,
    _tightest_stage_windows,
    _window_log,
    trtllm_kv_size,
    trtllm_release,
    trtllm_window_shares,
)
from service.sizing.model.architecture import FullAttention, Mamba2, ModelArchitecture
from service.sizing.units import GiB

H100 = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3")
M2 = Mamba2(num_heads=128, head_dim=64, state_size=128, n_groups=8, conv_kernel=4)
FULL = FullAttention(8, 128)  # 8 x (128 + 128) x 2 B = 4,096 B per token per layer
WIDE = FullAttention(8, 256)  # 8,192 B per token per layer


def inputs(arch: ModelArchitecture, pp: int, m: int, **options: object) -> SizingInputs:
    engine = EngineOptions(engine=Engine.TRTLLM, **options)  # type: ignore[arg-type]
    parallel, workload = Parallelism(pipeline_parallel_size=pp), Workload(m)
    stages = tuple(pipeline_stages(arch, pp))
    return SizingInputs(
        arch=arch,
        stages=stages,
        gpu=H100,
        workload=workload,
        parallel=parallel,
        engine=engine,
        facts=model_facts(arch, stages, workload, parallel, engine),
        warnings=(),
    )


# --- kv size per token ----------------------------------------------------------------------

# (Mamba-2, attention) x 2 and two more Mamba-2 layers: 6 hidden layers, 2 of them attention.
HYBRID = ModelArchitecture(layers=(M2, FULL, M2, FULL, M2, M2), num_attention_heads=32)


@pytest.mark.parametrize(
    ("version", "kv_size", "notes"),
    [
        # kv size 1.0.0rc3+: 2 attention layers x 4,096 B = 8,192 B
        ("1.0.0rc3", 8192, 0),
        # before: every hidden layer counted, 6 x 4,096 B = 24,576 B (and a note)
        ("1.0.0rc2", 24_576, 1),
    ],
)
def test_kv_size_counts_attention_layers_from_1_0_0rc3(
    version: str, kv_size: int, notes: int
) -> None:
    size = trtllm_kv_size(
        trtllm_release(version),
        stage=HYBRID,
        model=HYBRID,
        kv_element_bytes=2,
        tensor_parallel_size=1,
    )
    assert size.kv_size_per_token == kv_size
    # the blocks hold only the attention layers either way: 2 x 4,096 B
    assert (size.attention_layers, size.attention_bytes_per_token) == (2, 8192)
    assert len(size.notes) == notes


def test_kv_size_takes_the_first_attention_layer_for_every_layer() -> None:
    mixed = ModelArchitecture(layers=(M2, FULL, M2, WIDE), num_attention_heads=32)
    size = trtllm_kv_size(
        trtllm_release("1.2.0"),
        stage=mixed,
        model=mixed,
        kv_element_bytes=2,
        tensor_parallel_size=1,
    )
    # the config has one head_dim: 2 layers x the first layer's 4,096 B = 8,192 B, though the
    # blocks store 4,096 + 8,192 = 12,288 B per token
    assert size.kv_size_per_token == 8192
    assert size.attention_bytes_per_token == 12_288
    assert any("different geometry" in note for note in size.notes)


def test_pipeline_ranks_keep_the_smallest_max_tokens() -> None:
    arch = ModelArchitecture(
        layers=(M2, FULL, M2, FULL, FULL), num_attention_heads=32, weight_bytes=GiB
    )
    # vLLM-style stage split (parallel.py): 3 + 2 layers, (M2, FULL, M2) and (FULL, FULL).
    # With a given 1 GiB pool: stage 0 max_tokens = 1,073,741,824 // 4,096 = 262,144;
    # stage 1: // 8,192 = 131,072, the MIN (blocks: KVCacheManager.calculate_max_num_blocks)
    sized = inputs(arch, 2, 4096, kv_pool_bytes=GiB)
    budget, pools = _tightest_stage_mamba(
        sized,
        trtllm_release("1.2.0"),
        max_num_tokens=8192,
        tokens_per_block=32,
        slots=64,
        conv_element_bytes=2,
        ssm_element_bytes=2,
    )
    assert budget.pool_bytes == GiB
    assert (pools.max_tokens, pools.attention_layers, pools.kv_size_per_token) == (
        131_072,
        2,
        8192,
    )
    # stage 1 holds no Mamba layer: its slots hold no state
    assert pools.conv_bytes_per_slot + pools.ssm_bytes_per_slot == 0


# --- VSWA shares ----------------------------------------------------------------------------

# gpt-oss's two windows after clamping to max_seq_len, 18 layers x 2,048 B each (as in
# test_trtllm_hybrid.py)
PER_WINDOW = {128: 36_864, 16_384: 36_864}


def test_every_window_gets_an_equal_share_from_1_2_0rc0() -> None:
    shares = trtllm_window_shares(trtllm_release("1.2.0rc0"), PER_WINDOW, 8 * GiB)
    # calculateMaxNumBlocks (PR #7923): 1 / 2 each; 8,589,934,592 x 0.5 / 36,864 = 116,508.4
    assert shares.shares == {128: 0.5, 16_384: 0.5}
    assert shares.tokens == {128: 116_508, 16_384: 116_508}
    assert shares.notes == ()


def test_shares_follow_bytes_times_window_from_1_1_0rc2() -> None:
    per_window = {128: 36_864, 3_968: 36_864}
    shares = trtllm_window_shares(trtllm_release("1.1.0rc2"), per_window, 8 * GiB)
    # calculateWindowSizeToShare: weights 0.5 x 128 = 64 and 0.5 x 3,968 = 1,984, normalised
    # over 2,048: 1/32 and 31/32; 268,435,456 / 36,864 = 7,281.8 and 8,321,499,136 / 36,864
    # = 225,735.1
    assert shares.shares == {128: 1 / 32, 3_968: 31 / 32}
    assert shares.tokens == {128: 7_281, 3_968: 225_735}


def test_before_1_1_0rc2_every_window_is_capped_at_max_tokens() -> None:
    shares = trtllm_window_shares(trtllm_release("1.0.0rc2"), PER_WINDOW, 8 * GiB)
    # KvCacheCreator's max_tokens = 8,589,934,592 // (36,864 + 36,864) = 116,508 for each
    assert shares.tokens == {128: 116_508, 16_384: 116_508}
    assert shares.shares == {128: 0.5, 16_384: 0.5}
    assert len(shares.notes) == 1


def test_one_window_takes_the_whole_pool() -> None:
    shares = trtllm_window_shares(trtllm_release("1.2.0"), {4_000: 8_192}, GiB)
    # 1,073,741,824 // 8,192 = 131,072 tokens (the standard pool)
    assert (shares.shares, shares.tokens) == ({4_000: 1.0}, {4_000: 131_072})


def test_the_window_log_lists_each_window_s_blocks() -> None:
    pool = WindowPool(
        window=128,
        layers=18,
        bytes_per_token=36_864,
        share=0.5,
        tokens=116_508,
        blocks=3_641,
        blocks_per_request=4,
    )
    # kvCacheManager.cpp logs "Blocks per window size:" then one line per window (sic)
    assert _window_log([pool]) == (
        "Blocks per window size:",
        "[windowSize=128] {.primaryBlocks=3641, .secondayBlocks=0}",
    )


def test_the_window_list_continues_across_pipeline_stages() -> None:
    arch = ModelArchitecture(layers=(FULL,) * 4, num_attention_heads=32, weight_bytes=GiB)
    # KvCacheConfig.max_attention_window [128, 4096, 8192] repeats over the decoder layers:
    # layers 0..3 get 128, 4,096, 8,192, 128. Stage 0 (layers 0, 1) has windows 128 and 4,096;
    # stage 1 (layers 2, 3) 8,192 and 128.
    sized = inputs(arch, 2, 8192, kv_pool_bytes=GiB, max_attention_window=(128, 4096, 8192))
    best = _tightest_stage_windows(sized, (128, 4096, 8192), GiB, 32)
    # equal shares (1.2.0): 1,073,741,824 x 0.5 / 4,096 = 131,072 tokens = 4,096 blocks per
    # window; stage 0: 4,096 // ceil(4,096 / 32) = 32 sequences; stage 1: 4,096 // (8,192 /
    # 32 = 256) = 16, the fewer, so stage 1 is reported
    assert [p.window for p in best.pools] == [128, 8192]
    assert best.sequences == 16
