"""TensorRT-LLM's hybrid pools (PyTorch backend): Mamba / gated-delta-net state slots and
variable sliding window (VSWA) pools.

Sources, cited next to each number (TensorRT-LLM repository, release by release; milestones
in service/sizing/engines/calibration.py):
  state     _torch/pyexecutor/mamba_cache_manager.py `MambaCacheManager.__init__`
            (conv (conv_dim / tp, d_conv - 1), SSM (heads / tp, head_dim, d_state),
            max_batch_size slots); model_loader.py `validate_and_set_mamba_ssm_cache_dtype`
  budget    _util.py `KvCacheCreator.configure_kv_cache_capacity` / `_cal_max_memory`:
            kv = (total - peak) x fraction, the state being part of the peak
  tokens    `_get_kv_size_per_token` -> `get_cache_size_per_token` (attention layers from
            1.0.0rc3, PR #5371; every hidden layer before); resource_manager.py
            `KVCacheManager.calculate_max_num_blocks`: blocks = ceil(max_tokens / 32)
  VSWA      kvCacheManager.cpp `BaseKVCacheManager::calculateMaxNumBlocks`,
            `BlockManager::calculateWindowSizeToShare`, `calculateMaxBlockRequirementsPerBeam`
Pools are given (kv_pool_bytes = the "Estimated max memory in KV cache" figure) so
that only the cut is under test, except where the budget itself is.
"""

from __future__ import annotations

import re

import pytest

from service.sizing.capacity import Capacity, Parallelism, Workload, compute_capacity
from service.sizing.engines import calibration as cal
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.trtllm import (
    WINDOWED_DEFAULT_NOTE,
    parse_trtllm_version,
    trtllm_release,
    trtllm_window_pools,
)
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    FullAttention,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    NoCache,
)
from service.sizing.units import GiB
from tests.sizing.models import GPT_OSS_120B_60_GIB as GPT_OSS
from tests.sizing.models import H100_80_GIB as H100
from tests.sizing.models import QWEN35_35B_A3B_60_GIB as QWEN3_NEXT

OLD_WARNING = "TensorRT-LLM variable-window and Mamba pools are not modelled"

# Nemotron-H-like: 24 blocks, (Mamba-2, MLP, Mamba-2, MLP, attention, MLP) x 4 -> 8 Mamba-2,
# 12 MLP (no cache) and 4 attention layers; bf16; no hidden_size, so the warm-up activation
# estimate is 0 and budgets stay exact.
M2 = Mamba2(num_heads=128, head_dim=64, state_size=128, n_groups=8, conv_kernel=4)
NEMOTRON_H = ModelArchitecture(
    layers=(M2, NoCache(), M2, NoCache(), FullAttention(8, 128), NoCache()) * 4,
    num_attention_heads=32,
    weight_bytes=16 * GiB,
)
# One Mamba-2 layer, one slot, tp 1 (MambaCacheManager):
#   conv_dim = 64 x 128 + 2 x 8 x 128 = 10,240; conv = 10,240 x (4 - 1) = 30,720 x 2 B = 61,440 B
#   SSM = 128 heads x 64 x 128 = 1,048,576 x 2 B (auto = bf16) = 2,097,152 B
#   8 layers: conv 491,520 B + SSM 16,777,216 B = 17,268,736 B per slot
NEMOTRON_SLOT = 17_268_736
# Attention per token: 4 layers x 8 heads x (128 + 128) x 2 B = 4 x 4,096 = 16,384 B

# Qwen3-Next / Qwen3.5 geometry (QWEN35_35B_A3B_60_GIB in tests/sizing/models.py):
# (GDN, GDN, GDN, full attention 2 x 256) x 10, bf16.
# Qwen3-Next passes d_state = key dim 128, heads = 32 value heads, groups = 16 key heads,
# head_dim = value dim 128 (_util.py `_create_kv_cache_manager`):
#   conv_dim = 128 x 32 + 2 x 16 x 128 = 8,192; conv = 8,192 x 3 = 24,576 x 2 B = 49,152 B
#   SSM = 32 x 128 x 128 = 524,288 x 2 B = 1,048,576 B; 30 layers x 1,097,728 = 32,931,840 B
# Attention per token: 10 layers x 2 heads x (256 + 256) x 2 B = 20,480 B


def trtllm(
    arch: ModelArchitecture,
    version: str | None,
    pool: int | None,
    m: int,
    parallel: Parallelism | None = None,
    **options: object,
) -> Capacity:
    engine = EngineOptions(
        engine=Engine.TRTLLM,
        engine_version=version,
        kv_pool_bytes=pool,
        **options,  # type: ignore[arg-type]
    )
    return compute_capacity(arch, H100, Workload(m), parallel, engine)


# --- versions --------------------------------------------------------------------------------


def test_versions_sort_release_candidates_before_the_release() -> None:
    # rc n -> (.., n); a final release sorts after every rc (TRTLLM_FINAL = 1000); .post is
    # dropped; a .dev build sorts before rc0.
    assert parse_trtllm_version("1.1.0rc1") == (1, 1, 0, 1)
    assert parse_trtllm_version("1.0.0") == (1, 0, 0, cal.TRTLLM_FINAL)
    assert parse_trtllm_version("v1.2.0rc6.post2") == (1, 2, 0, 6)
    assert parse_trtllm_version("0.19.0.dev2025031800") == (0, 19, 0, -1)
    assert parse_trtllm_version("1.0.0rc2") < parse_trtllm_version("1.0.0rc3")
    assert parse_trtllm_version("1.1.0rc5") < parse_trtllm_version("1.1.0")
    with pytest.raises(SizingError):
        parse_trtllm_version("latest")


# --- Mamba-2 hybrids ---------------------------------------------------------------------------


def test_nemotron_h_kv_pool_counts_attention_layers_only_in_the_latest_release() -> None:
    cap = trtllm(NEMOTRON_H, None, 8 * GiB, 32_768)
    # _get_kv_size_per_token (1.0.0rc3+): 4 attention layers x 4,096 B = 16,384 B
    assert cap.engine_settings["kv_size_per_token"] == 16_384
    assert cap.engine_settings["engine_version"] == cal.LATEST_TRTLLM_VERSION == "1.2.0"
    # max_tokens = 8,589,934,592 // 16,384 = 524,288; blocks = ceil(524,288 / 32) = 16,384
    assert cap.num_gpu_blocks == 16_384
    assert cap.kv_cache_tokens == 524_288
    # a block holds 32 tokens x 16,384 B = 524,288 B of the 4 attention layers
    assert cap.layout.bytes_per_block == 524_288
    assert cap.layout.groups[0].layers == 4
    # M = 32,768 needs 32,768 / 32 = 1,024 blocks -> 16,384 // 1,024 = 16 sequences, under the
    # 2,048 state slots (max_batch_size default)
    assert cap.layout.blocks_per_request == 1_024
    assert cap.max_num_seqs == 16
    assert cap.max_concurrency == 16.0
    assert cap.engine_settings["max_batch_size"] == cal.TRTLLM_DEFAULT_MAX_BATCH_SIZE == 2048
    assert cap.engine_settings["mamba_state_bytes_per_request"] == NEMOTRON_SLOT
    assert cap.engine_settings["mamba_ssm_cache_dtype"] == "bfloat16"
    assert cap.fits
    assert not any(OLD_WARNING in w for w in cap.warnings)
    # conv 2,048 x 491,520 B = 1,006,632,960 B = 0.94 GiB; SSM 2,048 x 16,777,216 B = 32 GiB
    # (MambaCacheManager's "Mamba Cache is allocated" line, GB = 2^30)
    assert cap.report.log_lines == (
        "Estimated max memory in KV cache : 8.00 GiB",
        "max_tokens=524288 (kv size per token 16384 B), blocks=16384 of 32 tokens",
        "Mamba Cache is allocated. max_mamba_cache_size: 2048, conv_state size: 0.94GB, "
        "ssm_state size: 32.00GB",
    )


def test_before_1_0_0rc3_every_hidden_layer_is_counted_in_the_kv_size() -> None:
    cap = trtllm(NEMOTRON_H, "1.0.0rc2", 8 * GiB, 32_768)
    # get_cache_size_per_token on num_hidden_layers: 24 layers x 4,096 B = 98,304 B per token
    assert cap.engine_settings["kv_size_per_token"] == 98_304
    # max_tokens = 8,589,934,592 // 98,304 = 87,381; blocks = ceil(87,381 / 32) = 2,731
    assert cap.num_gpu_blocks == 2_731
    assert cap.kv_cache_tokens == 2_731 * 32 == 87_392
    # 2,731 // 1,024 = 2 sequences of 32,768 tokens (16 from 1.0.0rc3 on)
    assert cap.max_num_seqs == 2
    assert any("PR #5371" in w for w in cap.warnings)
    # 1.0.0rc3 (PR #5371 merged 2025-07-09, tag cfcb97a 2025-07-14) divides by 16,384 B again
    assert trtllm(NEMOTRON_H, "1.0.0rc3", 8 * GiB, 32_768).max_num_seqs == 16


def test_state_slots_cap_running_requests() -> None:
    # M = 1,024: 32 blocks a request; 16,384 // 32 = 512 by KV, under 2,048 slots
    assert trtllm(NEMOTRON_H, None, 8 * GiB, 1_024).max_num_seqs == 512
    # max_batch_size 100 (max_num_seqs): only 100 state slots -> 100 requests at once
    cap = trtllm(NEMOTRON_H, None, 8 * GiB, 1_024, max_num_seqs=100)
    assert cap.max_num_seqs == 100
    assert cap.max_concurrency == 100.0
    assert cap.engine_settings["max_num_seqs"] == 100
    assert cap.running_sequences_per_replica == 100


def test_state_is_taken_before_the_free_memory_fraction() -> None:
    cap = trtllm(NEMOTRON_H, None, None, 32_768, max_num_seqs=64)
    lines = {line.name: line.bytes for line in cap.budget.lines}
    # 64 slots x 17,268,736 B = 1,105,199,104 B allocated with the estimation cache, so it is
    # inside the warm-up peak: kv = (total - weights - activation - non-torch - state) x 0.9
    state = 64 * NEMOTRON_SLOT
    assert state == 1_105_199_104
    assert lines["mamba_state"] == -state
    # 85,899,345,920 - 17,179,869,184 (weights) - 0 (no hidden_size: activation unknown)
    # - 536,870,912 (TRTLLM_NON_TORCH) - 1,105,199,104 = 67,077,406,720
    assert cap.budget.activation_bytes == 0
    assert lines["free_after_warmup"] == 67_077_406_720
    # int(67,077,406,720 x 0.9) = 60,369,666,048
    assert cap.kv_pool_bytes == 60_369_666_048
    # max_tokens = 60,369,666,048 // 16,384 = 3,684,672; blocks = 3,684,672 / 32 = 115,146
    assert cap.num_gpu_blocks == 115_146
    # 115,146 // 1,024 = 112 sequences, under the 64 slots -> 64
    assert cap.max_num_seqs == 64


def test_default_slots_can_leave_no_memory_for_the_kv_cache() -> None:
    big = ModelArchitecture(layers=NEMOTRON_H.layers, num_attention_heads=32, weight_bytes=50 * GiB)
    cap = trtllm(big, None, None, 32_768)
    # 2,048 slots x 17,268,736 B = 35,366,371,328 B; 85,899,345,920 - 53,687,091,200 -
    # 536,870,912 - 35,366,371,328 = -3,690,987,520 B free: nothing for the KV cache
    lines = {line.name: line.bytes for line in cap.budget.lines}
    assert lines["free_after_warmup"] == -3_690_987_520
    assert not cap.fits
    assert cap.reason is not None
    assert "no memory left" in cap.reason
    assert cap.max_num_seqs == 0


def test_pipeline_stages_size_their_own_layers() -> None:
    cap = trtllm(NEMOTRON_H, None, 8 * GiB, 32_768, Parallelism(pipeline_parallel_size=2))
    # 24 layers -> 12 + 12: each stage keeps 4 Mamba-2 and 2 attention layers
    # kv size = 2 x 4,096 = 8,192 B; max_tokens = 8,589,934,592 // 8,192 = 1,048,576;
    # blocks = 32,768; 32,768 // 1,024 = 32 sequences
    assert cap.engine_settings["kv_size_per_token"] == 8_192
    assert cap.num_gpu_blocks == 32_768
    assert cap.max_num_seqs == 32
    # 4 layers x (61,440 + 2,097,152) B = 8,634,368 B per slot on each stage
    assert cap.engine_settings["mamba_state_bytes_per_request"] == 8_634_368
    assert any("pipeline parallel" in w for w in cap.warnings)


# --- gated delta net (Qwen3-Next) --------------------------------------------------------------


def test_qwen3_next_arrives_in_1_2_0rc1() -> None:
    # PR #7892 merged 2025-09-29, one commit after the v1.2.0rc0 tag (560ded5)
    with pytest.raises(SizingError, match=re.escape("1.2.0rc1")):
        trtllm(QWEN3_NEXT, "1.2.0rc0", 10 * GiB, 131_072)
    cap = trtllm(QWEN3_NEXT, "1.2.0rc1", 10 * GiB, 131_072)
    # max_tokens = 10,737,418,240 // 20,480 = 524,288; blocks = 16,384
    assert cap.num_gpu_blocks == 16_384
    # M = 131,072: 4,096 blocks a request -> 16,384 // 4,096 = 4
    assert cap.max_num_seqs == 4
    assert cap.engine_settings["mamba_state_bytes_per_request"] == 32_931_840


def test_gdn_state_splits_over_tensor_parallel_ranks() -> None:
    cap = trtllm(QWEN3_NEXT, None, 10 * GiB, 131_072, Parallelism(tensor_parallel_size=2))
    # tp 2: conv 8,192 / 2 x 3 x 2 B = 24,576 B; SSM 16 x 128 x 128 x 2 B = 524,288 B;
    # 30 layers x 548,864 B = 16,465,920 B
    assert cap.engine_settings["mamba_state_bytes_per_request"] == 16_465_920
    # attention: 2 KV heads / 2 = 1 per GPU: 10 x 1 x 512 x 2 B = 10,240 B per token;
    # 10,737,418,240 // 10,240 = 1,048,576 tokens = 32,768 blocks -> 8 sequences
    assert cap.engine_settings["kv_size_per_token"] == 10_240
    assert cap.max_num_seqs == 8


def test_ssm_dtype_is_the_model_dtype_unless_given() -> None:
    fp32_state = ModelArchitecture(
        layers=QWEN3_NEXT.layers,
        num_attention_heads=16,
        weight_bytes=60 * GiB,
        state_dtype="float32",
    )
    # mamba_ssm_cache_dtype "auto" -> the model's torch_dtype (bf16) through 1.2: the
    # config's float32 state dtype is not read; 32,931,840 B as for bf16
    cap = trtllm(fp32_state, "1.2.0", 10 * GiB, 131_072)
    assert cap.engine_settings["mamba_ssm_cache_dtype"] == "bfloat16"
    assert cap.engine_settings["mamba_state_bytes_per_request"] == 32_931_840
    # given float32: SSM 524,288 x 4 B = 2,097,152 B; 30 x (49,152 + 2,097,152) = 64,389,120 B
    given = trtllm(QWEN3_NEXT, "1.2.0", 10 * GiB, 131_072, mamba_ssm_cache_dtype="float32")
    assert given.engine_settings["mamba_state_bytes_per_request"] == 64_389_120
    # newer than 1.2: sized as 1.2, but the config's mamba_ssm_dtype is read, and it warns
    newer = trtllm(fp32_state, "1.3.0rc9", 10 * GiB, 131_072)
    assert newer.engine_settings["mamba_state_bytes_per_request"] == 64_389_120
    assert any("newer than the newest release" in w for w in newer.warnings)


def test_models_the_pytorch_backend_does_not_run() -> None:
    with pytest.raises(SizingError, match=re.escape("0.20.0")):
        trtllm(NEMOTRON_H, "0.19.0", 8 * GiB, 4_096)
    jamba = ModelArchitecture(
        layers=(Mamba1(8192, 16, 4), FullAttention(8, 128)),
        num_attention_heads=32,
        weight_bytes=GiB,
    )
    with pytest.raises(SizingError, match="Mamba-1"):
        trtllm(jamba, None, 8 * GiB, 4_096)
    attention_free = ModelArchitecture(layers=(M2,) * 4, num_attention_heads=32, weight_bytes=GiB)
    with pytest.raises(SizingError, match="attention-free"):
        trtllm(attention_free, None, 8 * GiB, 4_096)


# --- sliding windows -------------------------------------------------------------------------

# gpt-oss-120b (GPT_OSS_120B_60_GIB in tests/sizing/models.py): 36 layers alternating sliding
# (window 128) / full, 8 KV heads of 64, bf16. One layer, one token: 8 x (64 + 64) x 2 B = 2,048 B.


def test_default_max_attention_window_sizes_every_layer_for_the_whole_context() -> None:
    cap = trtllm(GPT_OSS, None, 10 * GiB, 16_384)
    # max_attention_window None -> [max_seq_len] for all 36 layers: 36 x 2,048 = 73,728 B per
    # token; max_tokens = 10,737,418,240 // 73,728 = 145,635; blocks = ceil(145,635 / 32)
    # = 4,552 (4,551.1: calculate_max_num_blocks rounds up)
    assert cap.kv_cache_tokens == 145_635
    assert cap.num_gpu_blocks == 4_552
    # 4,552 // (16,384 / 32 = 512) = 8 sequences
    assert cap.max_num_seqs == 8
    assert WINDOWED_DEFAULT_NOTE in cap.warnings
    assert not any(OLD_WARNING in w for w in cap.warnings)


# 18 sliding layers at window 128 and 18 full layers; per window 18 x 2,048 = 36,864 B
GPT_OSS_WINDOWS = [(128, 2_048), (1 << 30, 2_048)] * 18


def test_vswa_gives_each_window_an_equal_share_from_1_2_0rc0() -> None:
    pools = trtllm_window_pools(
        trtllm_release("1.2.0"),
        pool_bytes=8 * GiB,
        layer_windows=GPT_OSS_WINDOWS,
        tokens_per_block=32,
        max_model_len=16_384,
    )
    # windows clamp to max_seq_len: {128, 16,384}; share 1 / 2 each (PR #7923)
    assert [(p.window, p.layers, p.bytes_per_token, p.share) for p in pools.pools] == [
        (128, 18, 36_864, 0.5),
        (16_384, 18, 36_864, 0.5),
    ]
    # tokens = 8,589,934,592 x 0.5 / 36,864 = 116,508.44 -> 116,508; ceil(116,508 / 32) = 3,641
    assert [(p.tokens, p.blocks) for p in pools.pools] == [(116_508, 3_641)] * 2
    # a request holds ceil(min(16,384, 128) / 32) = 4 and 16,384 / 32 = 512 blocks:
    # 3,641 // 4 = 910 and 3,641 // 512 = 7 -> the full-attention window sets 7
    assert [p.blocks_per_request for p in pools.pools] == [4, 512]
    assert pools.sequences == 7
    assert pools.concurrency == 3_641 / 512
    assert pools.describe() == (
        "Blocks per window size:",
        "[windowSize=128] {.primaryBlocks=3641, .secondayBlocks=0}",
        "[windowSize=16384] {.primaryBlocks=3641, .secondayBlocks=0}",
    )


def test_vswa_shares_follow_bytes_times_window_from_1_1_0rc2() -> None:
    pools = trtllm_window_pools(
        trtllm_release("1.1.0rc2"),
        pool_bytes=8 * GiB,
        layer_windows=GPT_OSS_WINDOWS,
        tokens_per_block=32,
        max_model_len=3_968,
    )
    # calculateWindowSizeToShare: weight 36,864 / 73,728 = 0.5 each; x window -> 64 and
    # 1,984; shares 64 / 2,048 = 1/32 and 1,984 / 2,048 = 31/32 (exact in float32)
    assert [p.share for p in pools.pools] == [1 / 32, 31 / 32]
    # 8,589,934,592 / 32 = 268,435,456 / 36,864 = 7,281.8 -> 7,281 tokens, ceil(/32) = 228
    # 8,589,934,592 x 31/32 = 8,321,499,136 / 36,864 = 225,735.1 -> 225,735, ceil(/32) = 7,055
    assert [(p.tokens, p.blocks) for p in pools.pools] == [(7_281, 228), (225_735, 7_055)]
    # 228 // 4 = 57; 7,055 // (3,968 / 32 = 124) = 56 -> 56
    assert pools.sequences == 56


def test_vswa_before_1_1_0rc2_is_capped_at_max_tokens() -> None:
    pools = trtllm_window_pools(
        trtllm_release("1.0.0rc2"),
        pool_bytes=8 * GiB,
        layer_windows=GPT_OSS_WINDOWS,
        tokens_per_block=32,
        max_model_len=16_384,
    )
    # KvCacheCreator's max_tokens = 8,589,934,592 // 73,728 = 116,508 caps every window
    assert [p.tokens for p in pools.pools] == [116_508, 116_508]
    assert any("cap binds" in n for n in pools.notes)
    # 1.0.0rc1 and before: no VSWA pools in the PyTorch backend (PR #5151 -> 1.0.0rc2)
    with pytest.raises(SizingError, match=re.escape("1.0.0rc2")):
        trtllm_window_pools(
            trtllm_release("0.21.0"),
            pool_bytes=8 * GiB,
            layer_windows=GPT_OSS_WINDOWS,
            tokens_per_block=32,
            max_model_len=16_384,
        )


def test_one_window_is_the_standard_pool() -> None:
    # a window at or above max_seq_len clamps to it: one pool, tokens = pool // bytes, blocks up
    pools = trtllm_window_pools(
        trtllm_release(None),
        pool_bytes=GiB,
        layer_windows=[(8_192, 4_096), (4_096, 4_096)],
        tokens_per_block=32,
        max_model_len=4_000,
    )
    # windows min(8,192, 4,000) = min(4,096, 4,000) = 4,000; 8,192 B per token;
    # 1,073,741,824 // 8,192 = 131,072 tokens = 4,096 blocks; 4,096 // 125 = 32
    assert [(p.window, p.tokens, p.blocks) for p in pools.pools] == [(4_000, 131_072, 4_096)]
    assert pools.sequences == 32


def test_max_attention_window_reaches_the_window_pools_from_compute_capacity() -> None:
    # KvCacheConfig.max_attention_window=[128, 16384]: repeated over gpt-oss's 36 layers it
    # gives the sliding layers (even) 128 and the full layers (odd) the whole context, the
    # same pools as test_vswa_gives_each_window_an_equal_share_from_1_2_0rc0 at 8 GiB
    cap = trtllm(GPT_OSS, "1.2.0", 8 * GiB, 16_384, max_attention_window=(128, 16_384))
    assert cap.engine_settings["pools"] == {"128": 3_641, "16384": 3_641}
    # the full-attention pool binds: 3,641 // 512 = 7 sequences
    assert cap.max_num_seqs == 7
    assert cap.num_gpu_blocks == 3_641
    assert cap.layout.blocks_per_request == 512
    assert WINDOWED_DEFAULT_NOTE not in cap.warnings
    # the 128-token pool holds 116,508 tokens; the largest window's pool is what is reported
    assert cap.kv_cache_tokens == 116_508
    assert cap.report.log_lines[0] == "Blocks per window size:"
