"""SGLang's hybrid pools: sliding-window (SWA) and Mamba / gated-delta-net models.

Sources, cited next to each number (released SGLang wheels, read with `pip download`):
  swa<0.5.9   model_runner.py / model_runner_kv_cache_mixin.py `set_num_token(s)_hybrid(_swa)`
  swa 0.5.9+  model_runner_kv_cache_mixin.py `_resolve_hybrid_swa_tokens` (memory-based split)
  swa 0.5.11+ model_executor/pool_configurator.py `HybridSWAPoolConfigurator`
  mamba       `handle_max_mamba_cache` (model_runner 0.5.2-0.5.6, mixin 0.5.7-0.5.15,
              mem_cache/kv_cache_configurator.py 0.5.16-0.5.23), `_calculate_mamba_ratio`,
              `_resolve_max_num_reqs`; configs/mamba_utils.py for the state shapes
  calibration service/sizing/engines/calibration.py (the version milestones)
Every pool is given (kv_pool_bytes = SGLang's rest_memory) so that only the split
is under test; the budget that produces rest_memory is tested in test_capacity.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.sizing.capacity import Capacity, Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.sglang import sglang_report
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    Mamba1,
    ModelArchitecture,
    SlidingWindowAttention,
)
from service.sizing.units import GiB
from tests.sizing.models import GPT_OSS_120B_60_GIB as GPT_OSS
from tests.sizing.models import H100_80_GIB as H100
from tests.sizing.models import QWEN35_35B_A3B_60_GIB as QWEN35

OLD_WARNING = "SGLang hybrid pools (sliding-window and Mamba ratios) are not modelled"

# gpt-oss-120b (tests/sizing/models.py, 60 GiB of weights): 36 layers alternating sliding
# (window 128) / full, 8 KV heads of 64, bf16. One layer, one token: 8 heads x (64 + 64) x 2 B
# = 2,048 B; 18 full + 18 sliding layers.
# Qwen3.5-35B-A3B (Qwen3-Next geometry, tests/sizing/models.py, 60 GiB of weights): 40 layers,
# every 4th full attention (2 KV heads of 256), the others gated delta net: 16 key heads,
# 32 value heads, 128 x 128, conv kernel 4.


def sglang(
    arch: ModelArchitecture,
    version: str | None,
    pool: int,
    m: int,
    **options: object,
) -> Capacity:
    engine = EngineOptions(
        engine=Engine.SGLANG,
        engine_version=version,
        kv_pool_bytes=pool,
        **options,  # type: ignore[arg-type]
    )
    return compute_capacity(arch, H100, Workload(m), engine=engine)


# --- sliding window ---------------------------------------------------------------------------


def test_gpt_oss_full_and_swa_pools_in_the_latest_release() -> None:
    cap = sglang(GPT_OSS, "0.5.23", 10 * GiB, 16_384)
    # swa 0.5.11+: full = int(rest // (F n_f + r S n_s)); F n_f = S n_s = 18 x 2,048 = 36,864;
    # coeff = 36,864 + 0.8 x 36,864 = 66,355.2 B per full-attention token;
    # 10 GiB = 10,737,418,240 B // 66,355.2 = 161,817 (161,817.28)
    assert cap.kv_cache_tokens == 161_817
    # swa = int(161,817 x 0.8) = int(129,453.6) = 129,453
    assert cap.engine_settings["full_max_total_num_tokens"] == 161_817
    assert cap.engine_settings["swa_max_total_num_tokens"] == 129_453
    assert cap.engine_settings["swa_full_tokens_ratio"] == 0.8
    # _resolve_max_num_reqs (0.5.10+): clamp(int(161,817 / 16,384 x 512) = 5,056, 2048, 4096)
    # = 4,096; min(4,096, 161,817 // 2 = 80,908) = 4,096
    assert cap.engine_settings["max_running_requests"] == 4096
    assert cap.engine_settings["max_num_seqs"] == 4096
    # full pool: 161,817 // 16,384 = 9 sequences (9 x 16,384 = 147,456; 10 x = 163,840);
    # SWA pool: 129,453 // (min(16,384, 128) + 1 page) = 1,003, so the full pool binds
    assert cap.max_num_seqs == 9
    assert cap.fits
    # a block is one token (page 1) priced at the coeff: round(66,355.2) = 66,355 B
    assert cap.layout.bytes_per_block == 66_355
    # the old SGLang profile sized all 36 layers for the whole context:
    # 10,737,418,240 // (36 x 2,048 = 73,728) = 145,635 tokens -> 145,635 // 16,384 = 8
    assert sglang_report(10 * GiB, 73_728, 1, 16_384).max_num_seqs == 8
    # K size per pool: tokens x 18 layers x 8 x 64 x 2 B / 2^30:
    # 161,817 x 18,432 / 2^30 = 2.78; 129,453 x 18,432 / 2^30 = 2.22
    assert cap.report.log_lines == (
        "Use sliding window memory pool. full_layer_tokens=161817, swa_layer_tokens=129453",
        "KV Cache is allocated. #tokens: 161817, K size: 2.78 GB, V size: 2.78 GB",
        "KV Cache is allocated. #tokens: 129453, K size: 2.22 GB, V size: 2.22 GB",
        "max_total_num_tokens=161817, max_running_requests=4096, context_len=16384",
    )
    assert not any(OLD_WARNING in w for w in cap.warnings)
    # the one remaining approximation: which architectures SGLang puts in the SWA pool
    assert any("disable_hybrid_kv_cache_manager" in w for w in cap.warnings)


@pytest.mark.parametrize("version", ["0.4.9.post3", "0.5.6", "0.5.9", "0.5.10"])
def test_gpt_oss_split_in_older_releases(version: str) -> None:
    cap = sglang(GPT_OSS, version, 10 * GiB, 16_384)
    # profile as if every layer were full: 10,737,418,240 // 73,728 = 145,635 tokens.
    # swa<0.5.9: full = int(145,635 x 36 layers / (0.8 x 18 + 18 = 32.4)) = int(161,816.67)
    # swa 0.5.9-0.5.10: int(145,635 x 73,728 B / 66,355.2) = int(10,737,377,280 / 66,355.2)
    # = int(161,816.67): the same 161,816 (one fewer than 0.5.11+, which skips the first floor)
    assert cap.kv_cache_tokens == 161_816
    # swa = int(161,816 x 0.8) = int(129,452.8) = 129,452
    assert cap.engine_settings["swa_max_total_num_tokens"] == 129_452
    # before 0.5.10 max_num_reqs comes from the profiled 145,635: int(145,635 / 16,384 x 512)
    # = 4,551 -> 4,096; tp_worker: min(161,816 // 2 = 80,908, 4,096) = 4,096
    assert cap.engine_settings["max_running_requests"] == 4096
    assert cap.max_num_seqs == 9  # 161,816 // 16,384 = 9


def test_gpt_oss_split_pools_are_page_aligned_from_0_5_7() -> None:
    before = sglang(GPT_OSS, "0.5.6", 10 * GiB, 16_384, block_size=64)
    after = sglang(GPT_OSS, "0.5.7", 10 * GiB, 16_384, block_size=64)
    # profiled 145,635 -> pages of 64: 145,635 // 64 x 64 = 2,275 x 64 = 145,600;
    # full = int(145,600 x 36 / 32.4) = int(161,777.78) = 161,777; swa = int(161,777 x 0.8)
    # = int(129,421.6) = 129,421. 0.5.6 keeps both as they are (set_num_token_hybrid) ...
    assert before.kv_cache_tokens == 161_777
    assert before.engine_settings["swa_max_total_num_tokens"] == 129_421
    # ... 0.5.7 (set_num_tokens_hybrid_swa) rounds both down to pages:
    # 161,777 // 64 x 64 = 2,527 x 64 = 161,728; 129,421 // 64 x 64 = 2,022 x 64 = 129,408
    assert after.kv_cache_tokens == 161_728
    assert after.engine_settings["swa_max_total_num_tokens"] == 129_408
    # blocks are pages of the full pool: 161,728 // 64 = 2,527; 16,384 tokens = 256 pages
    assert after.num_gpu_blocks == 2527
    assert after.layout.blocks_per_request == 256


def test_sliding_window_without_an_swa_pool_sizes_every_layer_for_the_context() -> None:
    # No SWA pool before 0.4.9.post3; --disable-hybrid-swa-memory (kvplan:
    # disable_hybrid_kv_cache_manager) turns it off in any release. Then the cell is all 36
    # layers: 10,737,418,240 // 73,728 = 145,635 tokens, as before this change.
    for cap in (
        sglang(GPT_OSS, "0.4.9", 10 * GiB, 16_384),
        sglang(GPT_OSS, "0.5.23", 10 * GiB, 16_384, disable_hybrid_kv_cache_manager=True),
    ):
        assert cap.kv_cache_tokens == 145_635
        assert cap.max_num_seqs == 8  # 145,635 // 16,384 = 8
        assert "swa_max_total_num_tokens" not in cap.engine_settings
        assert not any(OLD_WARNING in w for w in cap.warnings)
        assert any(
            "every attention layer is sized for the whole context" in w for w in cap.warnings
        )


def test_model_names_say_which_architectures_sglang_puts_in_the_swa_pool() -> None:
    # A layer schedule does not say which architecture it is; SGLang decides by name
    # (is_hybrid_swa_model allowlist; gemma2_gemma3 override -> disable_hybrid_swa_memory).
    # The same 36 layers as GPT_OSS under three names, 10 GiB, 0.5.23:
    named = sglang(replace(GPT_OSS, name="openai/gpt-oss-120b"), "0.5.23", 10 * GiB, 16_384)
    assert named.kv_cache_tokens == 161_817  # the SWA pool, as above
    assert named.warnings == ()  # a listed architecture: nothing left to guess
    gemma = replace(GPT_OSS, name="google/gemma-3-27b-it")
    # Gemma 2/3 from 0.5.1: every layer for the whole context, 10 GiB // 73,728 = 145,635
    assert sglang(gemma, "0.5.23", 10 * GiB, 16_384).kv_cache_tokens == 145_635
    assert sglang(gemma, "0.5.1", 10 * GiB, 16_384).kv_cache_tokens == 145_635
    # 0.4.9.post3 - 0.4.10.post2 still split Gemma's pools (layer rule above: 161,816)
    assert sglang(gemma, "0.4.10.post2", 10 * GiB, 16_384).kv_cache_tokens == 161_816


def test_mistral_style_all_sliding_layers_get_no_swa_pool() -> None:
    # Every layer windowed (Mistral-7B-v0.1: 32 x 8 heads x 128, window 4,096): SGLang's llama
    # model ignores the window and no release puts it in the SWA pool. One token:
    # 32 x 8 x 256 x 2 B = 131,072 B; 10 GiB // 131,072 = 81,920 tokens.
    mistral = ModelArchitecture(
        layers=(SlidingWindowAttention(8, 128, 4096),) * 32,
        num_attention_heads=32,
        weight_bytes=GiB,
    )
    cap = sglang(mistral, "0.5.23", 10 * GiB, 8192)
    assert cap.kv_cache_tokens == 81_920
    assert cap.max_num_seqs == 10  # 81,920 // 8,192


def test_llama4_chunked_layers_join_the_swa_pool_from_0_5_8() -> None:
    # Llama-4-Scout-like: 48 layers, 3 chunked (8,192) : 1 full, 8 KV heads of 128, bf16.
    # One layer, one token: 8 x 256 x 2 B = 4,096 B; all 48 layers: 196,608 B.
    scout = ModelArchitecture(
        layers=((ChunkedLocalAttention(8, 128, 8192),) * 3 + (FullAttention(8, 128),)) * 12,
        num_attention_heads=40,
        weight_bytes=GiB,
    )
    before = sglang(scout, "0.5.7", 10 * GiB, 131_072)
    after = sglang(scout, "0.5.8", 10 * GiB, 131_072)
    # 0.5.7: Llama 4 is hybrid only with --hybrid-kvcache-ratio: 10,737,418,240 // 196,608
    # = 54,613 tokens for every layer
    assert before.kv_cache_tokens == 54_613
    # 0.5.8 (is_hybrid_swa_model lists Llama4; layer rule, 12 full + 36 chunked):
    # full = int(54,613 x 48 / (0.8 x 36 + 12 = 40.8)) = int(64,250.59) = 64,250
    # swa = int(64,250 x 0.8) = 51,400
    assert after.kv_cache_tokens == 64_250
    assert after.engine_settings["swa_max_total_num_tokens"] == 51_400
    # max_num_reqs from the profiled 54,613: int(54,613 / 131,072 x 512) = 213 -> 2,048;
    # min(64,250 // 2 = 32,125, 2,048) = 2,048
    assert after.engine_settings["max_running_requests"] == 2048
    assert before.max_num_seqs == 0  # 54,613 < 131,072
    assert not before.fits
    assert after.max_num_seqs == 0  # 64,250 < 131,072 either
    assert after.reason is not None


def test_swa_pool_too_small_for_the_window_stops_sglang_from_0_5_20() -> None:
    # pool_configurator.validate_swa_pool_size (0.5.20+): window + page >= swa_tokens fails.
    # pool 66,355.2 x 150 = 9,953,280 B -> full = 150 tokens, swa = int(150 x 0.8) = 120,
    # and 128 + 1 >= 120
    cap = sglang(GPT_OSS, "0.5.23", 9_953_280, 100)
    assert cap.kv_cache_tokens == 150
    assert cap.engine_settings["swa_max_total_num_tokens"] == 120
    assert not cap.fits
    assert cap.reason is not None
    assert "refuses to start" in cap.reason


# --- Mamba / gated delta net ------------------------------------------------------------------

# mamba_utils Mamba2StateShape (GDN via qwen3_next.py / qwen3_5.py), TP 1, one GDN layer:
#   conv  (kernel - 1) x (32 x 128 + 2 x 16 x 128) = 3 x 8,192 = 24,576 x 2 B (bf16) = 49,152
#   ssm   32 x 128 x 128 = 524,288 x 4 B (float32 default) = 2,097,152
#   = 2,146,304 B per layer; 30 GDN layers: 64,389,120 B per request.
# Attention: 10 layers x 2 heads x (256 + 256) x 2 B = 20,480 B per token.
# pool = 40 GiB = 42,949,672,960 B.


def test_qwen35_mamba_slots_and_full_tokens_in_the_latest_release() -> None:
    cap = sglang(QWEN35, "0.5.23", 40 * GiB, 8192)
    # mamba: budget = rest x 0.9 / 1.9 = 20,344,581,928.42 B; 0.5.17+ charges the padding
    # slot: slots = int((budget - 64,389,120) // 64,389,120) = int(314.96) = 314
    assert cap.engine_settings["max_mamba_cache_size"] == 314
    assert cap.engine_settings["mamba_state_bytes_per_request"] == 64_389_120
    assert cap.engine_settings["mamba_full_memory_ratio"] == 0.9
    assert cap.engine_settings["mamba_ssm_dtype"] == "float32"
    # state = (314 + 1) x 64,389,120 = 20,282,572,800; rest = 42,949,672,960 - that
    # = 22,667,100,160; tokens = 22,667,100,160 // 20,480 = 1,106,792
    assert cap.kv_cache_tokens == 1_106_792
    # radix cache on, and from 0.5.14 "auto" = extra_buffer under overlap: 3 + 2 = 5 slots per
    # request -> 314 // 5 = 62; clamp(int(1,106,792 / 8,192 x 512) = 69,174) = 4,096;
    # min(4,096, 1,106,792 // 2 = 553,396, 62) = 62
    assert cap.engine_settings["radix_cache"] is True
    assert cap.engine_settings["mamba_slots_per_request"] == 5
    assert cap.engine_settings["max_running_requests"] == 62
    assert cap.engine_settings["max_num_seqs"] == 62  # the planner's batch cap
    # the token pool holds 1,106,792 // 8,192 = 135 sequences; the state slots allow 62
    assert cap.max_num_seqs == 62
    assert cap.max_concurrency == 62
    # a block is one attention token (page 1): 20,480 B
    assert cap.layout.bytes_per_block == 20_480
    # conv tensors: (314 + 1) rows x 30 layers x 49,152 B = 464,486,400 B = 0.43 GiB;
    # ssm: 315 x 30 x 2,097,152 = 19,818,086,400 B = 18.46 GiB;
    # K: 1,106,792 x 10 layers x 2 heads x 256 x 2 B = 11,333,550,080 B = 10.56 GiB
    assert cap.report.log_lines == (
        "Mamba Cache is allocated. max_mamba_cache_size: 314, conv_state size: 0.43GB, "
        "ssm_state size: 18.46GB",
        "KV Cache is allocated. #tokens: 1106792, K size: 10.56 GB, V size: 10.56 GB",
        "max_total_num_tokens=1106792, max_running_requests=62, context_len=8192",
    )
    assert cap.fits
    assert not any(OLD_WARNING in w for w in cap.warnings)
    assert cap.warnings == ()


def test_qwen35_in_0_5_10_uses_three_slots_per_request_and_no_padding_slot() -> None:
    cap = sglang(QWEN35, "0.5.10", 40 * GiB, 8192)
    # slots = int(20,344,581,928.42 // 64,389,120) = int(315.96) = 315;
    # state = 315 x 64,389,120 = 20,282,572,800 (the same bytes as 0.5.23's 314 + 1)
    assert cap.engine_settings["max_mamba_cache_size"] == 315
    assert cap.kv_cache_tokens == 1_106_792
    # no_buffer: 3 slots per request -> 315 // 3 = 105
    assert cap.engine_settings["mamba_slots_per_request"] == 3
    assert cap.engine_settings["max_running_requests"] == 105
    assert cap.max_num_seqs == 105  # min(135 by tokens, 105)


def test_qwen3_next_in_0_5_3_has_512_fixed_slots_and_no_radix_cache() -> None:
    cap = sglang(QWEN35, "0.5.3", 40 * GiB, 8192)
    # 0.5.2-0.5.3: radix cache forced off, max_mamba_cache_size = 512 (no
    # --max-running-requests): state = 512 x 64,389,120 = 32,967,229,440;
    # rest = 42,949,672,960 - 32,967,229,440 = 9,982,443,520 // 20,480 = 487,424 tokens
    assert cap.engine_settings["radix_cache"] is False
    assert cap.engine_settings["max_mamba_cache_size"] == 512
    assert cap.engine_settings["mamba_full_memory_ratio"] is None
    assert cap.kv_cache_tokens == 487_424
    # max_num_reqs = min(clamp(int(487,424 / 8,192 x 512) = 30,464) = 4,096, 512 slots / 1)
    # = 512; tp_worker: min(487,424 // 2 = 243,712, 512) = 512
    assert cap.engine_settings["max_running_requests"] == 512
    assert cap.max_num_seqs == 59  # 487,424 // 8,192 = 59 (59 x 8,192 = 483,328)


def test_mamba_ssm_dtype_follows_the_config_from_0_5_10() -> None:
    bf16_state = ModelArchitecture(
        layers=QWEN35.layers, num_attention_heads=16, state_dtype="bfloat16", weight_bytes=GiB
    )
    # mamba_utils.mamba2_state_dtype: float32 unless --mamba-ssm-dtype (< 0.5.10); from
    # 0.5.10 the config's mamba_ssm_dtype comes before the float32 default.
    old = sglang(bf16_state, "0.5.9", 40 * GiB, 8192)
    new = sglang(bf16_state, "0.5.10", 40 * GiB, 8192)
    assert old.engine_settings["mamba_ssm_dtype"] == "float32"
    assert new.engine_settings["mamba_ssm_dtype"] == "bfloat16"
    # bf16 ssm: 30 x (49,152 + 524,288 x 2 B) = 30 x 1,097,728 = 32,931,840 B per request
    assert new.engine_settings["mamba_state_bytes_per_request"] == 32_931_840
    flag = sglang(QWEN35, "0.5.9", 40 * GiB, 8192, mamba_ssm_cache_dtype="bfloat16")
    assert flag.engine_settings["mamba_state_bytes_per_request"] == 32_931_840


def test_models_sglang_does_not_run_are_refused() -> None:
    with pytest.raises(SizingError, match=r"arrived in 0\.5\.2"):
        sglang(QWEN35, "0.5.1", 40 * GiB, 8192)
    jamba = ModelArchitecture(
        layers=(Mamba1(8192, 16, 4),) * 7 + (FullAttention(8, 128),),
        num_attention_heads=32,
        weight_bytes=GiB,
    )
    with pytest.raises(SizingError, match="Jamba"):
        sglang(jamba, "0.5.23", 40 * GiB, 8192)
    with pytest.raises(SizingError, match="SGLang version"):
        sglang(QWEN35, "latest", 40 * GiB, 8192)


# --- full attention is unchanged --------------------------------------------------------------


def test_full_attention_models_keep_the_single_pool() -> None:
    llama = ModelArchitecture(
        layers=(FullAttention(8, 128),) * 32, num_attention_heads=32, weight_bytes=GiB
    )
    for version in (None, "0.4.9", "0.5.23", "0.33.0"):
        cap = sglang(llama, version, 10_000_000_000, 8192)
        # design section 2: 10,000,000,000 // (32 x 8 x 256 x 2 B = 131,072) = 76,293
        assert cap.kv_cache_tokens == 76_293
        assert cap.max_num_seqs == 9  # 76,293 // 8,192
        # clamp(int(76,293 / 8,192 x 512) = 4,768, 2048, 4096) = 4,096 running requests
        assert cap.engine_settings == {
            "mem_fraction_static": None,
            "page_size": 1,
            "max_running_requests": 4096,
            "max_num_seqs": 4096,
        }
        # 0.33.0 is newer than any SGLang release kvplan models (LATEST_SGLANG_VERSION 0.5.23):
        # sized as 0.5.23, and the answer says so (issue 7: newer releases warn).
        newer = version == "0.33.0"
        assert cap.warnings == (
            (
                "SGLang 0.33.0 is newer than the newest release kvplan models (0.5.23); "
                "it is sized as 0.5.23",
            )
            if newer
            else ()
        )


def test_max_running_requests_caps_the_batch_and_is_capped_by_half_the_tokens() -> None:
    llama = ModelArchitecture(
        layers=(FullAttention(8, 128),) * 32, num_attention_heads=32, weight_bytes=GiB
    )
    # --max-running-requests 4 (max_num_seqs): 76,293 tokens hold 9 sequences of 8,192, the
    # engine runs 4; the planner reads engine_settings["max_num_seqs"]
    capped = sglang(llama, "0.5.23", 10_000_000_000, 8192, max_num_seqs=4)
    assert capped.max_num_seqs == 9
    assert capped.engine_settings["max_running_requests"] == 4
    assert capped.running_sequences_per_replica == 4
    # resolve_max_num_reqs: min(requested, tokens // 2): 76,293 // 2 = 38,146 < 50,000
    huge = sglang(llama, "0.5.23", 10_000_000_000, 8192, max_num_seqs=50_000)
    assert huge.engine_settings["max_running_requests"] == 38_146
    assert "max_running_requests=4, context_len=8192" in capped.report.log_lines[-1]


def test_pipeline_parallel_hybrids_take_the_smallest_stage() -> None:
    # PP 2 of GPT_OSS: 18 layers per stage, 9 full + 9 sliding each:
    # coeff = 9 x 2,048 x 1.8 = 33,177.6; 10 GiB // 33,177.6 = 323,634 (323,634.57)
    cap = compute_capacity(
        GPT_OSS,
        H100,
        Workload(16_384),
        Parallelism(pipeline_parallel_size=2),
        EngineOptions(engine=Engine.SGLANG, kv_pool_bytes=10 * GiB),
    )
    assert cap.kv_cache_tokens == 323_634
    assert any("pipeline parallel" in w for w in cap.warnings)


# --- the flags that move the split ------------------------------------------------------------


def test_swa_full_tokens_ratio_moves_the_split() -> None:
    cap = sglang(GPT_OSS, "0.5.23", 10 * GiB, 16_384, swa_full_tokens_ratio=0.5)
    # --swa-full-tokens-ratio 0.5: coeff = 36,864 + 0.5 x 36,864 = 55,296 B per full token;
    # 10,737,418,240 // 55,296 = 194,180 (194,180.74); swa = int(194,180 x 0.5) = 97,090
    assert cap.kv_cache_tokens == 194_180
    assert cap.engine_settings["swa_max_total_num_tokens"] == 97_090
    assert cap.engine_settings["swa_full_tokens_ratio"] == 0.5
    # 194,180 // 16,384 = 11 sequences (the SWA pool holds 97,090 // 129 = 752)
    assert cap.max_num_seqs == 11


def test_max_mamba_cache_size_fixes_the_state_slots() -> None:
    cap = sglang(QWEN35, "0.5.23", 40 * GiB, 8192, max_mamba_cache_size=100)
    # --max-mamba-cache-size 100 (kv_cache_configurator 0.5.23): state = (100 + 1 padding) x
    # 64,389,120 = 6,503,301,120 B; tokens = (42,949,672,960 - 6,503,301,120) // 20,480
    # = 36,446,371,840 // 20,480 = 1,779,608
    assert cap.engine_settings["max_mamba_cache_size"] == 100
    assert cap.kv_cache_tokens == 1_779_608
    # 100 slots // 5 per request = 20 running; the tokens would hold 1,779,608 // 8,192 = 217
    assert cap.engine_settings["max_running_requests"] == 20
    assert cap.max_num_seqs == 20


def test_mamba_full_memory_ratio_moves_the_state_budget() -> None:
    cap = sglang(QWEN35, "0.5.23", 40 * GiB, 8192, mamba_full_memory_ratio=0.5)
    # budget = 42,949,672,960 x 0.5 / 1.5 = 14,316,557,653.33; slots = int((budget - 64,389,120)
    # // 64,389,120) = int(221.34) = 221; state = 222 x 64,389,120 = 14,294,384,640;
    # tokens = (42,949,672,960 - 14,294,384,640) // 20,480 = 1,399,184
    assert cap.engine_settings["max_mamba_cache_size"] == 221
    assert cap.engine_settings["mamba_full_memory_ratio"] == 0.5
    assert cap.kv_cache_tokens == 1_399_184
    # 221 // 5 = 44 running requests
    assert cap.max_num_seqs == 44


def test_max_running_requests_caps_a_hybrid_too() -> None:
    # gpt-oss at 0.5.23 with 10 GiB holds 9 sequences of 16,384 (first test); with
    # --max-running-requests 3 the request pool admits 3
    cap = sglang(GPT_OSS, "0.5.23", 10 * GiB, 16_384, max_num_seqs=3)
    assert cap.engine_settings["max_running_requests"] == 3
    assert cap.max_num_seqs == 3
