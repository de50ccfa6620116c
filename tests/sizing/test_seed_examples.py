"""The worked examples of ../shared/design/seed-examples.md, reproduced exactly.

Each test names the example number it checks. Hand arithmetic sits next to each assertion.
"""

from __future__ import annotations

from service.sizing.engines.kv import kv_bytes_per_sequence, kv_bytes_per_token
from service.sizing.model.architecture import (
    FullAttention,
    GatedDeltaNet,
    ModelArchitecture,
    MultiHeadLatentAttention,
)
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.units import GB, GiB, KiB, MiB


def dense(layers: int, kv_heads: int, head_dim: int, dtype: str = "float16") -> ModelArchitecture:
    return ModelArchitecture(
        layers=(FullAttention(num_kv_heads=kv_heads, head_dim=head_dim),) * layers,
        num_attention_heads=max(kv_heads, 32),
        dtype=dtype,
    )


LLAMA2_7B = dense(32, 32, 128)  # seed-examples 1-3
LLAMA3_8B = dense(32, 8, 128)  # seed-examples 4, 5, 14
QWEN25_7B = dense(28, 4, 128)  # seed-examples 6-8
LLAMA31_70B = dense(80, 8, 128, dtype="bfloat16")  # seed-examples 9-12


def test_example_1_llama2_7b_mha_is_half_a_mebibyte_per_token() -> None:
    # 2 x 32 layers x 32 kv heads x 128 x 2 B = 524,288 B = 0.5 MiB
    assert kv_bytes_per_token(LLAMA2_7B, KvCacheDtype.AUTO) == 524_288 == MiB // 2


def test_example_2_llama2_7b_4k_sequence_and_batch_of_8() -> None:
    # 524,288 B x 4,096 tokens = 2 GiB; x 8 sequences = 16 GiB
    one = kv_bytes_per_sequence(LLAMA2_7B, KvCacheDtype.AUTO, 4096)
    assert one == 2 * GiB
    assert 8 * one == 16 * GiB


def test_example_3_thirty_three_4k_sequences_fit_in_66_gib() -> None:
    # 80 GiB - ~14 GiB weights = 66 GiB; 66 GiB // 2 GiB per sequence = 33
    left = 80 * GiB - 14 * GiB
    assert left // kv_bytes_per_sequence(LLAMA2_7B, KvCacheDtype.AUTO, 4096) == 33


def test_example_4_gqa_llama3_8b_is_four_times_smaller_than_mha() -> None:
    # 2 x 32 x 8 x 128 x 2 B = 131,072 B = 128 KiB; MHA with 32 heads is 4x that
    assert kv_bytes_per_token(LLAMA3_8B, KvCacheDtype.AUTO) == 131_072 == 128 * KiB
    assert kv_bytes_per_token(LLAMA2_7B, KvCacheDtype.AUTO) == 4 * kv_bytes_per_token(
        LLAMA3_8B, KvCacheDtype.AUTO
    )


def test_example_5_llama3_8b_128k_is_16_gib_and_2k_is_256_mib() -> None:
    # 131,072 B x 131,072 tokens = 17,179,869,184 B = 16 GiB = 17.18 GB
    long = kv_bytes_per_sequence(LLAMA3_8B, KvCacheDtype.AUTO, 131_072)
    assert long == 16 * GiB
    assert round(long / GB, 2) == 17.18
    # 131,072 B x 2,048 tokens = 256 MiB
    assert kv_bytes_per_sequence(LLAMA3_8B, KvCacheDtype.AUTO, 2048) == 256 * MiB


def test_example_6_qwen25_7b_is_56_kib_per_token() -> None:
    # 2 x 28 x 4 x 128 x 2 B = 57,344 B = 56 KiB
    assert kv_bytes_per_token(QWEN25_7B, KvCacheDtype.AUTO) == 57_344 == 56 * KiB


def test_example_7_qwen25_7b_sequences_from_128_to_128k_tokens() -> None:
    # 57,344 B x {128, 1,024, 4,096, 16,384, 131,072} = 7 MiB, 56 MiB, 224 MiB, 896 MiB, 7 GiB
    expected = {128: 7 * MiB, 1024: 56 * MiB, 4096: 224 * MiB, 16_384: 896 * MiB, 131_072: 7 * GiB}
    for tokens, size in expected.items():
        assert kv_bytes_per_sequence(QWEN25_7B, KvCacheDtype.AUTO, tokens) == size


def test_example_8_qwen25_7b_concurrency_in_a_59_25_gb_pool() -> None:
    # 59.25 GB = 59,250,000,000 B; // (57,344 B x tokens):
    # 2K: 59.25e9 / 117,440,512 = 504.5 -> 504; 8K: / 469,762,048 = 126.1 -> 126;
    # 32K: / 1,879,048,192 = 31.5 -> 31; 128K: / 7,516,192,768 = 7.9 -> 7
    pool = 59_250_000_000
    answers = {2048: 504, 8192: 126, 32_768: 31, 131_072: 7}
    for tokens, fits in answers.items():
        assert pool // kv_bytes_per_sequence(QWEN25_7B, KvCacheDtype.AUTO, tokens) == fits


def test_example_9_llama31_70b_fp8_is_160_kib_per_token() -> None:
    # 2 x 80 x 8 x 128 x 1 B = 163,840 B = 160 KiB
    assert kv_bytes_per_token(LLAMA31_70B, KvCacheDtype.FP8) == 163_840 == 160 * KiB


def test_example_10_llama31_70b_fp8_in_gigabytes_and_the_40_gb_trap() -> None:
    # 163,840 B x {1,000, 6,000, 10,000, 128,000} = 0.164 / 0.983 / 1.64 / 20.97 GB
    in_gb = {1000: 0.164, 6000: 0.983, 10_000: 1.64, 128_000: 20.97}
    for tokens, gb in in_gb.items():
        size = kv_bytes_per_sequence(LLAMA31_70B, KvCacheDtype.FP8, tokens)
        assert round(size / GB, len(str(gb).split(".")[1])) == gb
    # The "roughly 40 GB" of the material is the bf16 figure: 327,680 B x 128,000 = 41.94 GB
    assert (
        round(kv_bytes_per_sequence(LLAMA31_70B, KvCacheDtype.BFLOAT16, 128_000) / GB, 2) == 41.94
    )


def test_example_11_llama31_70b_fp8_64_concurrent_sequences() -> None:
    # 64 x 163,840 B x {6,000, 3,000, 12,000} = 62.9 / 31.5 / 125.8 GB
    for tokens, gb in {6000: 62.9, 3000: 31.5, 12_000: 125.8}.items():
        assert (
            round(64 * kv_bytes_per_sequence(LLAMA31_70B, KvCacheDtype.FP8, tokens) / GB, 1) == gb
        )


def test_example_12_70b_bf16_8k_sequence_is_2_5_gib() -> None:
    # 2 x 80 x 8 x 128 x 2 B x 8,192 = 2,684,354,560 B = 2.5 GiB; x8 = 20 GiB; x16 = 40 GiB
    one = kv_bytes_per_sequence(LLAMA31_70B, KvCacheDtype.BFLOAT16, 8192)
    assert one == 2_684_354_560 == 5 * GiB // 2
    assert 8 * one == 20 * GiB
    assert 16 * one == 40 * GiB


def test_example_13_batch_of_4_at_4k_is_2_gib_and_doubles_with_the_batch() -> None:
    # 131,072 B x 4,096 x 4 = 2,147,483,648 B = 2 GiB; batch 8 = 4 GiB
    per_sequence = kv_bytes_per_sequence(LLAMA3_8B, KvCacheDtype.FLOAT16, 4096)
    assert 4 * per_sequence == 2_147_483_648 == 2 * GiB
    assert 8 * per_sequence == 4 * GiB


def test_example_14_one_user_on_llama3_8b_not_the_calculator_overestimate() -> None:
    # 2K: 256 MiB (not 1.20 GB); 128K: 16 GiB (not 76.72 GB)
    assert kv_bytes_per_sequence(LLAMA3_8B, KvCacheDtype.FLOAT16, 2048) == 256 * MiB
    assert kv_bytes_per_sequence(LLAMA3_8B, KvCacheDtype.FLOAT16, 131_072) == 16 * GiB


def _qwen36() -> ModelArchitecture:
    linear = GatedDeltaNet(
        num_key_heads=16, num_value_heads=48, key_head_dim=128, value_head_dim=128, conv_kernel=4
    )
    full = FullAttention(num_kv_heads=4, head_dim=256)
    return ModelArchitecture(layers=(linear, linear, linear, full) * 16, num_attention_heads=24)


def test_example_15_qwen36_27b_counts_only_its_16_attention_layers() -> None:
    arch = _qwen36()
    # 2 x 16 full layers x 4 kv heads x 256 x 1 B (fp8) = 32,768 B = 32 KiB
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) == 32_768 == 32 * KiB
    # Per 131,072-token sequence: 32 KiB x 131,072 = 4 GiB of attention KV, plus the fixed
    # linear-attention state, which fp8 KV does not shrink (bf16 state):
    # conv 3 x (2 x 16 x 128 + 48 x 128) = 30,720 elements, recurrent 48 x 128 x 128 = 786,432;
    # (30,720 + 786,432) x 2 B = 1,634,304 B per layer x 48 layers = 78,446,592 B.
    state = 48 * (30_720 + 786_432) * 2
    assert state == 78_446_592
    assert kv_bytes_per_sequence(arch, KvCacheDtype.FP8, 131_072) == 4 * GiB + state
    # The trap: counting all 64 layers gives 128 KiB/token and 16 GiB per sequence, and
    # "2.7 requests in a 43 GiB pool". The layer schedule gives about 10.
    fits = 43 * GiB / kv_bytes_per_sequence(arch, KvCacheDtype.FP8, 131_072)
    assert 10 <= fits < 11


def test_example_16_deepseek_v3_mla_ignores_the_128_listed_kv_heads() -> None:
    mla = MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64)
    arch = ModelArchitecture(layers=(mla,) * 61, num_attention_heads=128)
    # (512 + 64) x 2 B x 61 layers = 70,272 B; fp8: 35,136 B
    assert kv_bytes_per_token(arch, KvCacheDtype.BFLOAT16) == 70_272
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) == 35_136
    # The latent is not split by tensor parallelism: the same on every rank.
    for tp in (1, 2, 4, 8, 16):
        assert kv_bytes_per_token(arch, KvCacheDtype.BFLOAT16, tensor_parallel_size=tp) == 70_272
    # Using the 128 "KV heads" of the config would overstate it ~70x: 2 x 61 x 128 x 192 x 2
    assert 2 * 61 * 128 * 192 * 2 / 70_272 > 70
