"""vLLM's KV-cache layout, log lines and defaults, release by release, against hand arithmetic.

Sources, cited next to each number:
  docs/engines/vllm.md#<section>  what each vLLM release does, with the vLLM file and function
  design = ../shared/design/engine-memory.md (the shared design note next to the repository)
"design §" refers to a section of the design note. B = block size in tokens, M = max_model_len,
mnbt = max_num_batched_tokens, G = layers per KV-cache group. cdiv(a, b) = ceil(a / b).
"""

from __future__ import annotations

import pytest

from service.sizing.engines.common import CacheLayout
from service.sizing.engines.vllm import (
    VllmRelease,
    batch_defaults,
    mla_block_size,
    parse_vllm_version,
    vllm_layout,
    vllm_release,
    vllm_report,
)
from service.sizing.model.architecture import (
    FullAttention,
    ModelArchitecture,
    SlidingWindowAttention,
)
from service.sizing.units import GiB, MiB, cdiv
from tests.sizing.models import (
    A100_80GB_TORCH,
    B200_TORCH,
    GEMMA_3_27B,
    GPT_OSS_120B,
    H100_TORCH,
    H200_TORCH,
    L40S_TORCH,
    LLAMA_31_8B,
    NEMOTRON_H_56B,
    QWEN3_NEXT_80B,
    QWEN35_27B,
)

# Total memory as torch reports it, and the device names vLLM matches on (tests/sizing/models.py).
H100_BYTES, H100 = H100_TORCH.memory_bytes, H100_TORCH.name
A100_80GB_BYTES, A100 = A100_80GB_TORCH.memory_bytes, A100_80GB_TORCH.name
H200_BYTES, H200 = H200_TORCH.memory_bytes, H200_TORCH.name
B200_BYTES, B200 = B200_TORCH.memory_bytes, B200_TORCH.name
L40S_BYTES, L40S = L40S_TORCH.memory_bytes, L40S_TORCH.name


def behaviour(version: str) -> VllmRelease:
    return vllm_release(parse_vllm_version(version))


def layout(
    arch: ModelArchitecture,
    version: str,
    max_model_len: int,
    *,
    mnbt: int = 8192,
    prefix_caching: bool = False,
    kv_bytes: int = 2,
    conv_bytes: int = 2,
    ssm_bytes: int = 2,
    tp: int = 1,
    pp: int = 1,
    block_size: int = 16,
) -> CacheLayout:
    return vllm_layout(
        arch,
        release=behaviour(version),
        kv_element_bytes=kv_bytes,
        conv_element_bytes=conv_bytes,
        ssm_element_bytes=ssm_bytes,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        max_model_len=max_model_len,
        block_size=block_size,
        block_size_given=False,
        max_num_batched_tokens=mnbt,
        prefix_caching=prefix_caching,
        hybrid_manager=True,
    )


# --- uniform ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.8.0", "0.9.2", "0.11.0", "0.21.0", "0.33.0"])
def test_llama_31_8b_page_is_64_kib_and_one_block_across_32_layers_is_2_mib(version: str) -> None:
    lay = layout(LLAMA_31_8B, version, 131_072)
    # design §1.7: per token per layer 2 x 8 x 128 x 2 B = 4,096 B; page (B = 16) 65,536 B
    assert len(lay.groups) == 1
    assert lay.groups[0].page_bytes == 16 * 4096 == 65_536
    assert lay.groups[0].layers == 32
    # one block across 32 layers = 32 x 65,536 B = 2 MiB
    assert lay.bytes_per_block == 32 * 65_536 == 2 * MiB
    # M = 131,072: blocks/request = 131,072 / 16 = 8,192 (design §1.7)
    assert lay.blocks_per_request == 8192
    assert lay.block_size == 16
    assert lay.padding_layers == 0


# --- sliding-window hybrids -----------------------------------------------------------------


def test_gpt_oss_120b_is_two_groups_of_18_layers() -> None:
    lay = layout(GPT_OSS_120B, "0.33.0", 131_072)
    # design §1.4: 18 full + 18 sliding, G = 18, two groups
    assert sorted((g.kind, g.layers) for g in lay.groups) == [
        ("full_attention", 18),
        ("sliding_attention", 18),
    ]
    assert lay.padding_layers == 0
    # page = 16 x (8 x (64 + 64) x 2 B) = 32,768 B; one block = 18 x 32,768 = 589,824 B
    assert lay.bytes_per_block == 18 * 32_768 == 589_824


@pytest.mark.parametrize("version", ["0.9.2", "0.20.0", "0.25.0"])
def test_gpt_oss_sliding_group_keeps_window_plus_one_batch_up_to_0_25(version: str) -> None:
    lay = layout(GPT_OSS_120B, version, 131_072, mnbt=8192)
    blocks = {g.kind: g.blocks_per_request for g in lay.groups}
    # docs/engines/vllm.md#blocks-per-request (v0.8.3 ... v0.25): cdiv(min(W - 1 + mnbt, M), B) + 1
    #   = cdiv(127 + 8,192, 16) + 1 = cdiv(8,319, 16) + 1 = 520 + 1 = 521
    assert blocks["sliding_attention"] == cdiv(127 + 8192, 16) + 1 == 521
    # full attention: cdiv(131,072, 16) = 8,192
    assert blocks["full_attention"] == 8192
    assert lay.blocks_per_request == 521 + 8192


@pytest.mark.parametrize("version", ["0.26.0", "0.28.0", "0.33.0"])
def test_gpt_oss_sliding_group_keeps_two_batches_in_flight_from_0_26(version: str) -> None:
    lay = layout(GPT_OSS_120B, version, 131_072, mnbt=8192)
    blocks = {g.kind: g.blocks_per_request for g in lay.groups}
    # docs/engines/vllm.md#blocks-per-request: from v0.26 the token term is W - 1 + 2 x mnbt at
    # PP = 1 (async scheduling)
    #   = cdiv(127 + 16,384, 16) + 1 = cdiv(16,511, 16) + 1 = 1,032 + 1 = 1,033
    assert blocks["sliding_attention"] == cdiv(127 + 2 * 8192, 16) + 1 == 1033
    assert blocks["full_attention"] == 8192


def test_sliding_window_blocks_are_capped_by_max_model_len() -> None:
    lay = layout(GPT_OSS_120B, "0.25.0", 4096, mnbt=8192)
    blocks = {g.kind: g.blocks_per_request for g in lay.groups}
    # docs/engines/vllm.md#blocks-per-request:
    # min(W - 1 + mnbt, M) = min(8,319, 4,096) = 4,096 -> cdiv(4,096, 16) + 1 = 257
    assert blocks["sliding_attention"] == 4096 // 16 + 1 == 257
    assert blocks["full_attention"] == 256


def test_one_models_groups_serve_every_context_each_with_its_own_blocks() -> None:
    # The groups and pages are memoised without max_model_len (vllm._vllm_groups); asked at
    # 131,072, then 4,096, then 131,072 again, each answer has its own blocks per request.
    long = layout(GPT_OSS_120B, "0.25.0", 131_072, mnbt=8192)
    short = layout(GPT_OSS_120B, "0.25.0", 4096, mnbt=8192)
    # the layout at 131,072 computed again, from the shared groups
    again = layout(GPT_OSS_120B, "0.25.0", 131_072, mnbt=8192)
    assert again == long
    assert (short.groups[0].page_bytes, short.bytes_per_block) == (
        long.groups[0].page_bytes,
        long.bytes_per_block,
    )
    # docs/engines/vllm.md#blocks-per-request: full attention cdiv(M, 16), 131,072 / 16 = 8,192
    # and 4,096 / 16 = 256; sliding min(W - 1 + mnbt, M) = min(128 - 1 + 8,192, M) tokens,
    # cdiv(8,319, 16) + 1 = 521 at 131,072 and cdiv(4,096, 16) + 1 = 257 at 4,096
    by_kind = {g.kind: g.blocks_per_request for g in long.groups}
    assert by_kind == {"full_attention": 8192, "sliding_attention": 521}
    assert {g.kind: g.blocks_per_request for g in short.groups} == {
        "full_attention": 256,
        "sliding_attention": 257,
    }
    # a request holds a table in each of the two groups (18 layers of each kind, test above)
    assert (long.blocks_per_request, short.blocks_per_request) == (8192 + 521, 256 + 257)


def test_pipeline_parallel_keeps_pp_batches_in_flight_from_0_26() -> None:
    # docs/engines/vllm.md#blocks-per-request: max_concurrent_batches = 2 (V1 runner, PP = 1),
    # else pp (async off with PP)
    assert behaviour("0.25.0").in_flight_tokens(8192, 4) == 8192
    assert behaviour("0.26.0").in_flight_tokens(8192, 1) == 2 * 8192
    assert behaviour("0.26.0").in_flight_tokens(8192, 4) == 4 * 8192


def test_gemma_3_27b_is_six_sliding_groups_and_one_full_with_8_padding_layers() -> None:
    assert sum(isinstance(x, SlidingWindowAttention) for x in GEMMA_3_27B.layers) == 52
    assert sum(isinstance(x, FullAttention) for x in GEMMA_3_27B.layers) == 10
    lay = layout(GEMMA_3_27B, "0.33.0", 131_072)
    kinds = [g.kind for g in lay.groups]
    # docs/engines/vllm.md#grouping: G = min(52, 10) = 10 (52 is not < 1.5 x 10);
    # cdiv(52, 10) = 6 sliding groups, 1 full group; 6 x 10 - 52 = 8 padding layers
    assert kinds.count("sliding_attention") == 6
    assert kinds.count("full_attention") == 1
    assert lay.padding_layers == 6 * 10 - 52 == 8
    # page = 16 x 16 x (128 + 128) x 2 B = 131,072 B; one block = G x page = 1,310,720 B
    assert lay.bytes_per_block == 10 * 131_072
    # per request (v0.33, mnbt 8,192): 6 sliding groups x (cdiv(1,023 + 16,384, 16) + 1 = 1,089)
    # + full cdiv(131,072, 16) = 8,192
    assert lay.blocks_per_request == 6 * 1089 + 8192


@pytest.mark.parametrize(
    ("version", "sizes"),
    [
        # docs/engines/vllm.md#grouping (v0.11+): "group i gets layers[i::num_groups]": 52 layers
        # over 6 groups -> 52 = 6 x 8 + 4, so four groups of 9 and two of 8 (the padding is
        # spread out)
        ("0.11.0", [9, 9, 9, 9, 8, 8]),
        ("0.33.0", [9, 9, 9, 9, 8, 8]),
        # v0.9.2-v0.10.2 cut the bucket in consecutive slices of G: 10, 10, 10, 10, 10, 2
        ("0.10.2", [10, 10, 10, 10, 10, 2]),
    ],
)
def test_gemma_3_27b_sliding_layers_per_group(version: str, sizes: list[int]) -> None:
    lay = layout(GEMMA_3_27B, version, 131_072)
    sliding = [g.layers for g in lay.groups if g.kind == "sliding_attention"]
    assert sorted(sliding, reverse=True) == sizes
    # either way the block is G = 10 pages: the largest group has 10 layers (the full one)
    assert lay.bytes_per_block == 10 * 131_072


def test_full_attention_layers_of_different_sizes_share_one_group_from_0_11() -> None:
    # design §1.4 item 2: "Uniform type, different sizes (UniformTypeKVCacheSpecs, e.g. layers
    # with different head counts but all full attention): one group, page = sum of per-layer
    # pages, num_blocks = available_kv // sum page_l" (docs/engines/vllm.md#grouping: checked before
    # page unification)
    arch = ModelArchitecture(
        layers=(FullAttention(8, 128),) * 16 + (FullAttention(4, 128),) * 16,
        num_attention_heads=32,
    )
    lay = layout(arch, "0.33.0", 8192)
    # pages at B = 16: 16 x 8 x 256 x 2 = 65,536 B and 16 x 4 x 256 x 2 = 32,768 B
    assert len(lay.groups) == 1
    assert lay.bytes_per_block == 16 * 65_536 + 16 * 32_768 == 1_572_864
    assert lay.block_size == 16
    # every layer needs cdiv(8,192, 16) = 512 blocks of the one table
    assert lay.blocks_per_request == 512


def test_v0_33_pads_an_attention_page_that_does_not_divide_the_largest() -> None:
    # docs/engines/vllm.md#page-unification (unify_kv_cache_spec_page_size, read in v0.33):
    # a page that divides the largest P takes block_size x P / page; else a non-MLA attention
    # page is padded. Full: 8 x 128 -> 65,536 B pages; sliding:
    # 6 x 128 -> 16 x 6 x 256 x 2 = 49,152 B; 65,536 % 49,152 != 0 -> padded to 65,536 B.
    sliding = SlidingWindowAttention(num_kv_heads=6, head_dim=128, sliding_window=1024)
    arch = ModelArchitecture(layers=(FullAttention(8, 128), sliding) * 4, num_attention_heads=48)
    lay = layout(arch, "0.33.0", 8192, mnbt=2048)
    assert {g.page_bytes for g in lay.groups} == {65_536}
    assert {g.block_size for g in lay.groups} == {16}
    # G = 4 (4 full, 4 sliding): one block = 4 x 65,536 B
    assert lay.bytes_per_block == 4 * 65_536
    # full cdiv(8,192, 16) = 512; sliding cdiv(1,023 + 2 x 2,048, 16) + 1 = 320 + 1 = 321
    assert lay.blocks_per_request == 512 + 321


# --- group size rule by release -------------------------------------------------------------

FULL = FullAttention(num_kv_heads=8, head_dim=128)
SLIDING = SlidingWindowAttention(num_kv_heads=8, head_dim=128, sliding_window=4096)


def constructed(full: int, sliding: int) -> ModelArchitecture:
    return ModelArchitecture(layers=(FULL,) * full + (SLIDING,) * sliding, num_attention_heads=32)


def group_sizes(lay: CacheLayout) -> list[tuple[str, int]]:
    return sorted((g.kind, g.layers) for g in lay.groups)


def kinds(lay: CacheLayout) -> dict[str, int]:
    """Number of groups of each kind."""
    counts: dict[str, int] = {}
    for group in lay.groups:
        counts[group.kind] = counts.get(group.kind, 0) + 1
    return counts


@pytest.mark.parametrize(
    ("version", "g", "padding"),
    [
        # docs/engines/vllm.md#grouping: <= v0.11 always G = min = 10:
        # sliding 12 -> cdiv(12, 10) = 2 groups, padding 2 x 10 - 12 = 8
        ("0.11.0", 10, 8),
        # v0.12-v0.17: 12 < 1.25 x 10 = 12.5 -> G = max = 12; the full bucket is padded by 2
        ("0.12.0", 12, 2),
        ("0.17.0", 12, 2),
        # v0.18+: 12 < 1.5 x 10 = 15 -> G = 12
        ("0.18.0", 12, 2),
    ],
)
def test_group_size_10_full_12_sliding_by_release(version: str, g: int, padding: int) -> None:
    lay = layout(constructed(10, 12), version, 8192)
    assert kinds(lay) == {"full_attention": 1, "sliding_attention": cdiv(12, g)}
    assert lay.padding_layers == padding
    # one block = G x page; page = 16 x 8 x (128 + 128) x 2 B = 65,536 B
    assert lay.bytes_per_block == g * 65_536


@pytest.mark.parametrize(
    ("version", "g", "padding"),
    [
        # <= v0.11: G = min = 10; sliding 14 -> 2 groups of 7, padding 2 x 10 - 14 = 6
        ("0.11.0", 10, 6),
        # v0.12-v0.17: 14 is not < 12.5 -> G = 10 (releases 0.17 and 0.18 disagree here)
        ("0.17.0", 10, 6),
        # v0.18+: 14 < 15 -> G = 14; full padded by 4
        ("0.18.0", 14, 4),
        ("0.33.0", 14, 4),
    ],
)
def test_group_size_10_full_14_sliding_is_where_0_17_and_0_18_disagree(
    version: str, g: int, padding: int
) -> None:
    lay = layout(constructed(10, 14), version, 8192)
    assert kinds(lay) == {"full_attention": cdiv(10, g), "sliding_attention": cdiv(14, g)}
    assert lay.padding_layers == padding
    assert lay.bytes_per_block == g * 65_536


def test_group_size_ratio_is_strictly_below_the_limit() -> None:
    # docs/engines/vllm.md#grouping: "if max_num_layers < min_num_layers * 1.5" (strict):
    # 15 full vs 10 sliding at v0.18 -> min
    assert layout(constructed(10, 15), "0.18.0", 8192).bytes_per_block == 10 * 65_536
    # v0.12: 10 vs 8 -> 10 < 8 x 1.25 = 10 is false -> G = 8
    assert layout(constructed(8, 10), "0.12.0", 8192).bytes_per_block == 8 * 65_536


# --- attention + recurrent-state hybrids ------------------------------------------------------


def test_qwen3_next_80b_bf16_state_raises_the_attention_block_to_544() -> None:
    lay = layout(QWEN3_NEXT_80B, "0.33.0", 262_144, conv_bytes=2, ssm_bytes=2)
    # docs/engines/vllm.md#recurrent-state:
    # conv 3 x (2 x 16 x 128 + 32 x 128) = 24,576 elements x 2 B = 49,152 B;
    # ssm 32 x 128 x 128 = 524,288 x 2 B = 1,048,576 B; mamba page 1,097,728 B.
    # attention 2 KV heads x (256 + 256) x 2 B = 2,048 B per token per layer;
    # block = 16 x cdiv(1,097,728, 16 x 2,048) = 16 x 34 = 544; page 544 x 2,048 = 1,114,112 B
    assert lay.block_size == 544
    assert {g.page_bytes for g in lay.groups} == {544 * 2048} == {1_114_112}
    # docs/engines/vllm.md#grouping: 12 full + 36 GDN, G = 12 -> 1 full group and 3 linear
    # groups of 12
    assert group_sizes(lay) == [
        ("full_attention", 12),
        ("linear_attention", 12),
        ("linear_attention", 12),
        ("linear_attention", 12),
    ]
    assert lay.padding_layers == 0
    assert lay.bytes_per_block == 12 * 1_114_112
    # per request, prefix caching off: 1 state block per linear group + cdiv(262,144, 544) = 482
    assert lay.blocks_per_request == 3 * 1 + cdiv(262_144, 544) == 485
    # "Padding mamba page size by 1.49%": 100 x (1,114,112 - 1,097,728) / 1,097,728 = 1.49
    assert any("1.49%" in note for note in lay.notes)


def test_qwen35_27b_float32_state_gives_attention_block_784() -> None:
    lay = layout(QWEN35_27B, "0.33.0", 262_144, conv_bytes=2, ssm_bytes=4)
    # docs/engines/vllm.md#recurrent-state:
    # conv 3 x (2 x 16 x 128 + 48 x 128) = 30,720 x 2 B = 61,440 B;
    # ssm 48 x 128 x 128 = 786,432 x 4 B = 3,145,728 B; page 3,207,168 B; attention 4 x 512 x 2
    # = 4,096 B/token/layer; block = 16 x cdiv(3,207,168, 65,536) = 16 x 49 = 784
    assert lay.block_size == 784
    assert {g.page_bytes for g in lay.groups} == {784 * 4096}
    assert lay.bytes_per_block == 16 * 784 * 4096  # G = min(16, 48) = 16


@pytest.mark.parametrize(
    ("ssm_bytes", "block"),
    [
        # docs/engines/vllm.md#hybrid-block-size: fp32 (>= v0.20): conv 122,880
        # + ssm 256 x 64 x 256 x 4 = 16,777,216 ->
        # page 16,900,096 B; block = 16 x cdiv(16,900,096, 16 x 4,096) = 16 x 258 = 4,128
        (4, 4128),
        # fp16 (v0.13-v0.19): ssm 8,388,608 -> page 8,511,488 -> 16 x 130 = 2,080
        (2, 2080),
    ],
)
def test_nemotron_h_56b_attention_block_follows_the_state_dtype(ssm_bytes: int, block: int) -> None:
    lay = layout(NEMOTRON_H_56B, "0.33.0", 8192, conv_bytes=2, ssm_bytes=ssm_bytes)
    assert lay.block_size == block
    assert {g.page_bytes for g in lay.groups} == {block * 4096}


def test_a_larger_user_block_size_is_kept_and_the_state_page_padded_to_it() -> None:
    # docs/engines/vllm.md#hybrid-block-size: the computed block is a floor; a larger
    # --block-size is kept
    lay = layout(QWEN3_NEXT_80B, "0.33.0", 262_144, block_size=1024)
    assert lay.block_size == 1024
    assert {g.page_bytes for g in lay.groups} == {1024 * 2048}


def test_mamba_keeps_two_state_blocks_with_prefix_caching_from_0_15() -> None:
    # docs/engines/vllm.md#blocks-per-request: mode 'none' keeps 1 page; 'align' (prefix caching on,
    # v0.15+) keeps 2
    assert behaviour("0.14.0").mamba_blocks(prefix_caching=True) == 1
    assert behaviour("0.15.0").mamba_blocks(prefix_caching=True) == 2
    assert behaviour("0.33.0").mamba_blocks(prefix_caching=False) == 1
    on = layout(QWEN3_NEXT_80B, "0.28.0", 262_144, prefix_caching=True)
    linear = [g.blocks_per_request for g in on.groups if g.kind == "linear_attention"]
    assert linear == [2, 2, 2]
    assert on.blocks_per_request == 3 * 2 + cdiv(262_144, 544)


def test_hybrids_cache_prefixes_by_default_only_from_0_28() -> None:
    # docs/engines/vllm.md#prefix-caching-default: <= v0.27 no prefix caching by default for
    # attention + Mamba hybrids
    assert behaviour("0.27.0").default_prefix_caching(has_state=True) is False
    assert behaviour("0.28.0").default_prefix_caching(has_state=True) is True
    # V0 never enabled it by default
    assert behaviour("0.7.3").default_prefix_caching(has_state=False) is False


# --- batch defaults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "memory", "name", "max_model_len", "expected"),
    [
        # docs/engines/vllm.md#batch-defaults, v0.9.0-v0.27: >= 70 GiB and not A100 -> serve
        # 8192 tokens / 1024 seqs
        ("0.9.2", H100_BYTES, H100, 8192, (8192, 1024)),
        # ... an A100-80GB stays in the small tier: 2048 / 256
        ("0.9.2", A100_80GB_BYTES, A100, 8192, (2048, 256)),
        # v0.8.5: by memory only, so the A100-80GB is in the big tier: 8192 / 1024
        ("0.8.5", A100_80GB_BYTES, A100, 8192, (8192, 1024)),
        # v0.8.0-v0.8.3: by name ("h100"/"h200"), 1024 sequences for every GPU
        ("0.8.0", H100_BYTES, H100, 8192, (8192, 1024)),
        ("0.8.0", L40S_BYTES, L40S, 8192, (2048, 1024)),
        # v0.28+: >= 160 GiB tier: 16384 / 1024 (B200 178.36 GiB)
        ("0.28.0", B200_BYTES, B200, 8192, (16384, 1024)),
        ("0.27.0", B200_BYTES, B200, 8192, (8192, 1024)),
        # docs/engines/vllm.md#batch-defaults: H200 (139.8 GiB) stays in the >= 70 GiB tier
        ("0.28.0", H200_BYTES, H200, 8192, (8192, 1024)),
        # docs/engines/vllm.md#batch-defaults, V0: chunked prefill off -> max(M, 2048) tokens,
        # 256 sequences
        ("0.7.3", H100_BYTES, H100, 20_000, (20_000, 256)),
        ("0.7.3", H100_BYTES, H100, 1024, (2048, 256)),
        # M = 32,768 is not "> 32K": chunked prefill stays off
        ("0.7.3", H100_BYTES, H100, 32_768, (32_768, 256)),
        # M > 32K turns chunked prefill on: 2048 tokens (v0.6.5+), 512 (<= v0.6.4.post1)
        ("0.7.3", H100_BYTES, H100, 131_072, (2048, 256)),
        ("0.6.4", H100_BYTES, H100, 131_072, (512, 256)),
        ("0.6.4.post1", H100_BYTES, H100, 131_072, (512, 256)),
    ],
)
def test_batch_defaults_table(
    version: str, memory: int, name: str, max_model_len: int, expected: tuple[int, int]
) -> None:
    got = batch_defaults(behaviour(version), memory, name, max_model_len)
    assert (got.max_num_batched_tokens, got.max_num_seqs) == expected


def test_default_utilization_is_0_9_until_0_19_and_0_92_from_0_20() -> None:
    # docs/engines/vllm.md#requested-memory
    assert behaviour("0.19.0").default_utilization == 0.9
    assert behaviour("0.19.1").default_utilization == 0.9
    assert behaviour("0.20.0").default_utilization == 0.92


@pytest.mark.parametrize(
    ("version", "gpu", "block"),
    [
        # docs/engines/vllm.md#mla-block-size: <= v0.17 FlashMLA forces 64 on Hopper
        ("0.17.0", H100, 64),
        # v0.18+: backend preference, Hopper FLASH_ATTN_MLA -> 16, Blackwell FLASHINFER_MLA -> 32
        ("0.18.0", H100, 16),
        ("0.18.0", B200, 32),
        # Blackwell default CUTLASS_MLA (128) in v0.12-v0.14, FlashInfer-MLA forced 64 v0.15-v0.17
        ("0.12.0", B200, 128),
        ("0.15.0", B200, 64),
    ],
)
def test_mla_block_size_by_release_and_gpu(version: str, gpu: str, block: int) -> None:
    assert mla_block_size(behaviour(version), gpu) == block


# --- the log lines -----------------------------------------------------------------------------


def test_v0_log_lines_for_vllm_10517_1952_blocks_at_20000_tokens() -> None:
    lay = layout(LLAMA_31_8B, "0.6.4", 20_000)
    report = vllm_report(1952, lay, 20_000, behaviour("0.6.4"))
    # design §1.7 / docs/engines/vllm.md#public-logs: 1,952 blocks x 16 = 31,232 tokens;
    # 31,232 / 20,000 = 1.5616 -> 1.56x
    assert report.kv_cache_tokens == 1952 * 16 == 31_232
    # docs/engines/vllm.md#log-lines: V0 logs "# GPU blocks: %d, # CPU blocks: %d", M unformatted
    assert report.log_lines[0].startswith("# GPU blocks: 1952, # CPU blocks: ")
    assert report.log_lines[1] == "Maximum concurrency for 20000 tokens per request: 1.56x"
    # V0 has no null block: 1,952 // cdiv(20,000, 16) = 1,952 // 1,250 = 1 sequence
    assert report.max_num_seqs == 1


def test_v0_8_0_log_lines_for_pr_13596_127626_blocks() -> None:
    lay = layout(LLAMA_31_8B, "0.8.0", 2048)
    report = vllm_report(127_626, lay, 2048, behaviour("0.8.0"))
    # docs/engines/vllm.md#public-logs: PR #13596: 127,626 blocks -> "GPU KV cache size: 2,042,016
    # tokens" (x 16) and
    # 127,626 / 128 = 997.078 -> "997.08x" at 2,048; two lines until v0.28
    assert report.log_lines == (
        "GPU KV cache size: 2,042,016 tokens",
        "Maximum concurrency for 2,048 tokens per request: 997.08x",
    )


def test_v0_8_to_0_9_0_concurrency_is_tokens_over_max_model_len() -> None:
    # docs/engines/vllm.md#log-lines: V1 v0.8.0-v0.9.0 print tokens = blocks x B and concurrency
    # = tokens / M, so
    # for M = 1,000 with 1,000 blocks: 16,000 / 1,000 = 16.00x (not 1,000 / cdiv(1,000, 16)
    # = 1,000 / 63 = 15.87x, which is the v0.9.2+ formula)
    lay = layout(LLAMA_31_8B, "0.8.5", 1000)
    report = vllm_report(1000, lay, 1000, behaviour("0.8.5"))
    assert report.kv_cache_tokens == 16_000
    assert report.log_lines[1] == "Maximum concurrency for 1,000 tokens per request: 16.00x"


def test_0_21_tokens_come_from_concurrency_times_max_model_len() -> None:
    # docs/engines/vllm.md#log-lines: M = 29,000, B = 16: cdiv = 1,813 blocks/request;
    # 1,478 blocks ->
    # int(1,478 / 1,813 x 29,000) = int(23,641.48) = 23,641 tokens (v0.21+),
    # vs 1,478 x 16 = 23,648 (<= v0.20)
    lay = layout(LLAMA_31_8B, "0.21.0", 29_000)
    assert lay.blocks_per_request == 1813
    new = vllm_report(1478, lay, 29_000, behaviour("0.21.0"))
    old = vllm_report(1478, layout(LLAMA_31_8B, "0.20.0", 29_000), 29_000, behaviour("0.20.0"))
    assert new.kv_cache_tokens == 23_641
    assert old.kv_cache_tokens == 23_648
    assert new.log_lines[0] == "GPU KV cache size: 23,641 tokens"
    # 1,478 / 1,813 = 0.8152 -> "0.82x"
    assert new.log_lines[1] == "Maximum concurrency for 29,000 tokens per request: 0.82x"


def test_0_28_prints_one_combined_line() -> None:
    lay = layout(LLAMA_31_8B, "0.28.0", 2048)
    report = vllm_report(127_626, lay, 2048, behaviour("0.28.0"))
    # docs/engines/vllm.md#log-lines: one line from v0.28;
    # tokens int(997.078125 x 2,048) = 2,042,016
    assert report.log_lines == (
        "GPU KV cache size: 2,042,016 tokens, "
        "Maximum concurrency for 2,048 tokens per request: 997.08x",
    )


def test_hybrid_tokens_before_0_21_are_blocks_per_group_times_min_block() -> None:
    lay = layout(GPT_OSS_120B, "0.20.0", 131_072, mnbt=8192)
    report = vllm_report(10_000, lay, 131_072, behaviour("0.20.0"))
    # docs/engines/vllm.md#log-lines (v0.9.2-v0.20, hybrid):
    # num_blocks // num_groups x min_block_size
    #   = 10,000 // 2 x 16 = 80,000 tokens
    assert report.kv_cache_tokens == 10_000 // 2 * 16 == 80_000
    # concurrency: 10,000 / (521 + 8,192) = 1.1477 -> "1.15x"
    assert report.log_lines[1] == "Maximum concurrency for 131,072 tokens per request: 1.15x"


def test_the_null_block_costs_one_sequence_on_0_11() -> None:
    lay = layout(LLAMA_31_8B, "0.11.0", 8192)
    per_request = lay.blocks_per_request
    assert per_request == 512  # cdiv(8,192, 16)
    for k in (1, 2, 7):
        report = vllm_report(k * per_request, lay, 8192, behaviour("0.11.0"))
        # design §1.5 / docs/engines/vllm.md#null-block-and-the-fit-check: block 0 is the
        # null block, so k x 512 blocks hold k - 1 whole sequences, although concurrency
        # prints k.00x
        assert report.max_num_seqs == k - 1
        assert report.max_concurrency == k


def test_kv_cache_sizes_in_the_gib_examples_of_the_design_note() -> None:
    # design §1.7: 54.7 GiB / 2 MiB = 28,006 blocks -> 448,096 tokens; M = 131,072 -> 3.42x
    blocks = int(54.7 * GiB) // (2 * MiB)
    assert blocks == 28_006
    lay = layout(LLAMA_31_8B, "0.20.0", 131_072)
    report = vllm_report(blocks, lay, 131_072, behaviour("0.20.0"))
    assert report.kv_cache_tokens == 448_096
    assert round(report.max_concurrency, 2) == 3.42
