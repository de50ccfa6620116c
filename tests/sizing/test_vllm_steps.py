"""Each step of vLLM's KV-cache grouping on its own, from the examples vLLM documents.

Sources (vllm-project/vllm, cited by file and function next to each number):
  kv_cache_utils  = vllm/v1/core/kv_cache_utils.py
  kv_interface    = vllm/v1/kv_cache_interface.py
  hybrid_align    = vllm/platforms/interface.py `_align_hybrid_block_size` (before it,
                    vllm/model_executor/models/config.py `HybridAttentionMambaModelConfig`)
Release milestones are in service/sizing/engines/calibration.py. B = block size in tokens,
P = page bytes, G = layers per KV-cache group. cdiv(a, b) = ceil(a / b).
"""

from __future__ import annotations

import pytest

from service.sizing.engines.common import CacheLayout
from service.sizing.engines.vllm import (
    NO_HYBRID_MANAGER_NOTE,
    VllmRelease,
    _align_hybrid_blocks,
    _group_layers,
    _is_uniform_type,
    _merge_windows_as_full,
    _RequestUsage,
    _Spec,
    _specs_by_layer,
    _stage_widths,
    _uniform_type_layout,
    _unify_page_sizes,
    longest_context,
    parse_vllm_version,
    profile_peak,
    vllm_blocks,
    vllm_release,
)
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
)
from service.sizing.units import GiB, MiB, cdiv

FULL = FullAttention(num_kv_heads=8, head_dim=128)  # 2 x 8 x 128 x 2 B = 4,096 B per token
SLIDING = SlidingWindowAttention(num_kv_heads=8, head_dim=128, sliding_window=128)
USAGE = _RequestUsage(max_model_len=8192, in_flight_tokens=8192, mamba_blocks=1)


def release(version: str) -> VllmRelease:
    return vllm_release(parse_vllm_version(version))


def specs(*buckets: tuple[FullAttention | SlidingWindowAttention, tuple[int, ...]]) -> list[_Spec]:
    """Buckets of bf16 layers at B = 16, in the order given."""
    return _specs_by_layer(
        dict(buckets),
        block_size=16,
        kv_element_bytes=2,
        conv_element_bytes=2,
        ssm_element_bytes=2,
        tensor_parallel_size=1,
        packed_mla=False,
    )


# --- unify_hybrid_kv_cache_specs ------------------------------------------------------------


def test_without_the_hybrid_manager_sliding_and_chunked_layers_become_full_attention() -> None:
    # kv_cache_utils unify_hybrid_kv_cache_specs: a SlidingWindowSpec (or ChunkedLocalAttention
    # spec) beside full attention is rewritten as a FullAttentionSpec with the same heads and
    # head size, so the three buckets below are one full-attention bucket of layers 0..4.
    chunked = ChunkedLocalAttention(num_kv_heads=8, head_dim=128, attention_chunk_size=8192)
    merged = _merge_windows_as_full({SLIDING: (0, 2), FULL: (1, 4), chunked: (3,)})
    assert merged == {FULL: (0, 1, 2, 3, 4)}
    assert "keep the context" in NO_HYBRID_MANAGER_NOTE


# --- per-layer specs ------------------------------------------------------------------------


def test_attention_page_is_block_size_tokens_and_state_page_is_one_request() -> None:
    gdn = GatedDeltaNet(
        num_key_heads=16, num_value_heads=48, key_head_dim=128, value_head_dim=128, conv_kernel=4
    )
    full, state = _specs_by_layer(
        {FULL: (3,), gdn: (0, 1, 2)},
        block_size=16,
        kv_element_bytes=2,
        conv_element_bytes=2,
        ssm_element_bytes=2,
        tensor_parallel_size=1,
        packed_mla=False,
    )
    # kv_interface AttentionSpec.page_size_bytes: B x 2 x kv_heads x head_size x dtype bytes
    # = 16 x 2 x 8 x 128 x 2 = 65,536 B
    assert (full.page_bytes, full.per_token_bytes, full.count) == (65_536, 4096, 1)
    # kv_interface MambaSpec.page_size_bytes over Qwen3.5-27B's gated-delta-net state
    # (vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
    # .gated_delta_net_state_shape): conv (3, 2 x 16 x 128 + 48 x 128)
    # = 30,720 x 2 B = 61,440 B; recurrent (48, 128, 128) = 786,432 x 2 B = 1,572,864 B
    assert (state.page_bytes, state.per_token_bytes, state.count) == (61_440 + 1_572_864, 0, 3)


def test_a_request_holds_window_plus_in_flight_tokens_plus_one_block_in_a_sliding_layer() -> None:
    usage = _RequestUsage(max_model_len=131_072, in_flight_tokens=8192, mamba_blocks=2)
    # kv_interface SlidingWindowSpec.max_memory_usage_bytes: min(window - 1 + batched tokens, M)
    # tokens, one more block since the window may start mid-block: cdiv(127 + 8,192, 16) + 1
    assert usage.blocks(SLIDING, 16) == cdiv(8319, 16) + 1 == 521
    # FullAttentionSpec: cdiv(M, B) = 131,072 / 16 = 8,192
    assert usage.blocks(FULL, 16) == 8192
    # ChunkedLocalAttentionSpec: min(chunk + batched tokens, M) = 16,384 tokens, no extra block
    chunked = ChunkedLocalAttention(num_kv_heads=8, head_dim=128, attention_chunk_size=8192)
    assert usage.blocks(chunked, 16) == 1024


# --- UniformTypeKVCacheSpecs ----------------------------------------------------------------


def test_full_attention_of_two_sizes_is_one_group_whose_page_is_the_sum() -> None:
    wide = FullAttention(num_kv_heads=8, head_dim=256)  # 8,192 B per token, P = 131,072 B
    both = specs((FULL, (0, 2)), (wide, (1, 3)))
    # kv_interface UniformTypeKVCacheSpecs: "same type" means the same token slots, so full
    # attention of any size is one type; page_size_bytes is the sum of the layers' pages:
    # 2 x 65,536 + 2 x 131,072 = 393,216 B
    assert _is_uniform_type(both)
    lay = _uniform_type_layout(both, [(0, 2), (2, 4)], ()).at(USAGE)
    assert lay.bytes_per_block == 393_216
    assert [(g.kind, g.layers, g.page_bytes) for g in lay.groups] == [
        ("full_attention", 4, 393_216)
    ]
    # kv_cache_utils _project_kv_cache_groups_to_worker: each stage keeps its own layers'
    # pages, here one of each size per stage: 65,536 + 131,072 = 196,608 B
    assert lay.stage_bytes_per_block == (196_608, 196_608)
    assert lay.blocks_per_request == 8192 // 16


def test_sliding_windows_of_different_sizes_are_not_one_type() -> None:
    # kv_interface UniformTypeKVCacheSpecs docstring: "sliding window attentions with different
    # window sizes are not the same type"
    longer = SlidingWindowAttention(num_kv_heads=8, head_dim=128, sliding_window=4096)
    assert not _is_uniform_type(specs((SLIDING, (0,)), (longer, (1,))))
    assert not _is_uniform_type(specs((FULL, (0, 1, 2))))  # one spec is the uniform-spec case


# --- hybrid block alignment -----------------------------------------------------------------


def test_qwen35_attention_block_grows_to_400_tokens_to_cover_the_state_page() -> None:
    gdn = GatedDeltaNet(
        num_key_heads=16, num_value_heads=48, key_head_dim=128, value_head_dim=128, conv_kernel=4
    )
    four_heads = FullAttention(num_kv_heads=4, head_dim=256)  # 2 x 4 x 256 x 2 = 4,096 B/token
    before = _specs_by_layer(
        {gdn: (0, 1, 2), four_heads: (3,)},
        block_size=16,
        kv_element_bytes=2,
        conv_element_bytes=2,
        ssm_element_bytes=2,
        tensor_parallel_size=1,
        packed_mla=False,
    )
    aligned, notes = _align_hybrid_blocks(before)
    # hybrid_align: B = 16 x cdiv(mamba page, 16 x attention bytes per token)
    # = 16 x cdiv(1,634,304, 65,536) = 16 x 25 = 400; attention page 400 x 4,096 = 1,638,400 B
    assert [(s.block_size, s.page_bytes) for s in aligned] == [(400, 1_638_400)] * 2
    # the state page is padded up to the attention page: 4,096 B over 1,634,304 B = 0.25%
    assert notes == (
        "attention block size set to 400 tokens so one page (1638400 B) covers the 1634304 B "
        "recurrent state (state page padded 0.25%)",
    )


def test_no_alignment_without_a_recurrent_layer() -> None:
    before = specs((SLIDING, (0,)), (FULL, (1,)))
    assert _align_hybrid_blocks(before) == (before, ())


# --- unify_kv_cache_spec_page_size ----------------------------------------------------------


def test_a_smaller_page_takes_a_proportionally_larger_block() -> None:
    half = SlidingWindowAttention(num_kv_heads=4, head_dim=128, sliding_window=128)
    unified, notes = _unify_page_sizes(specs((FULL, (0,)), (half, (1,))), release("0.28.0"))
    # kv_cache_utils unify_kv_cache_spec_page_size: P 65,536 and 32,768 (4 heads); ratio 2, so
    # the smaller page's block doubles: 32 tokens x 2,048 B = 65,536 B
    assert [(s.block_size, s.page_bytes) for s in unified] == [(16, 65_536), (32, 65_536)]
    assert notes == ()


def test_a_page_that_does_not_divide_is_refused_before_0_29_and_padded_from_it() -> None:
    three = SlidingWindowAttention(num_kv_heads=3, head_dim=128, sliding_window=128)
    # 16 x 2 x 3 x 128 x 2 = 24,576 B; 65,536 % 24,576 = 16,384: unify_kv_cache_spec_page_size
    # raises "not divisible by the maximum page size"
    buckets = specs((FULL, (0,)), (three, (1,)))
    with pytest.raises(SizingError, match="cannot unify page sizes of 24576 B and 65536 B"):
        _unify_page_sizes(buckets, release("0.28.0"))
    # calibration.VLLM_PAD_ATTENTION_PAGES (0.29): the attention page is padded instead,
    # (65,536 - 24,576) / 24,576 = 166.67% unused
    unified, notes = _unify_page_sizes(buckets, release("0.29.0"))
    assert [(s.block_size, s.page_bytes) for s in unified] == [(16, 65_536), (16, 65_536)]
    assert notes == ("sliding_attention page of 24576 B padded to 65536 B (166.67% unused)",)


def test_an_mla_page_that_does_not_divide_is_refused_in_every_release() -> None:
    latent = MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64)  # 576 x 2 B/token
    buckets = _specs_by_layer(
        {FULL: (0,), latent: (1,)},
        block_size=16,
        kv_element_bytes=2,
        conv_element_bytes=2,
        ssm_element_bytes=2,
        tensor_parallel_size=1,
        packed_mla=False,
    )
    # P = 16 x 1,152 = 18,432 B, which does not divide 65,536 B; MLA pages are never padded
    with pytest.raises(SizingError, match="18432 B and 65536 B"):
        _unify_page_sizes(buckets, release("0.33.0"))


# --- _get_kv_cache_groups_uniform_page_size -------------------------------------------------


@pytest.mark.parametrize(
    ("version", "group_size", "padding"),
    [
        # kv_cache_utils: "gpt-oss-20b + eagle, with 12 sw + 13 full. We pad it to (13 sw,
        # 13 full)": 13 < 1.5 x 12 = 18, so G = 13 and one sliding padding layer
        ("0.18.0", 13, 1),
        # calibration.VLLM_GROUPS_MAX_125 (0.12-0.17): 13 < 1.25 x 12 = 15, the same groups
        ("0.12.0", 13, 1),
        # before 0.12, G is the smallest bucket: 13 full layers need cdiv(13, 12) = 2 groups of
        # 12, padded with 2 x 12 - 13 = 11 layers ("(12 sw, 24 full)" in the same comment)
        ("0.11.0", 12, 11),
    ],
)
def test_12_sliding_and_13_full_layers_by_release(
    version: str, group_size: int, padding: int
) -> None:
    grouped = _group_layers(
        specs((SLIDING, tuple(range(12))), (FULL, tuple(range(12, 25)))), release(version)
    )
    assert (grouped.group_size, grouped.padding_layers) == (group_size, padding)


def test_2_full_and_3_sliding_layers_are_three_groups_of_two() -> None:
    # kv_cache_utils _get_kv_cache_groups_uniform_page_size: "(full.0, full.1), (sw.0, sw.1,
    # sw.2) split to 3 groups with 2 layers each: (full.0, full.1), (sw.0, sw.2), (sw.1,
    # padding)"; 3 < 1.5 x 2 is false, so G = 2
    grouped = _group_layers(specs((FULL, (0, 1)), (SLIDING, (2, 3, 4))), release("0.33.0"))
    assert grouped.members == ((0, 1), (2, 4), (3,))
    assert (grouped.group_size, grouped.padding_layers) == (2, 1)
    # kv_cache_utils get_kv_cache_config_from_groups: every group shares one page size
    assert {g.page_bytes for g in grouped.groups} == {65_536}


@pytest.mark.parametrize(
    ("full", "sliding", "groups", "padding"),
    [
        # kv_cache_utils: "10 full attention layers and 20 sliding window attention layers ...
        # 3 kv_cache_groups, each of which contains 10 layers" (20 is not below 1.5 x 10)
        (10, 20, 3, 0),
        # kv_cache_utils _max_memory_usage_bytes_from_groups: "8 full attention layers and 9
        # sliding window layers ... padded to 9 full + 9 sliding window"
        (8, 9, 2, 1),
    ],
)
def test_group_counts_from_the_kv_cache_utils_examples(
    full: int, sliding: int, groups: int, padding: int
) -> None:
    buckets = specs((FULL, tuple(range(full))), (SLIDING, tuple(range(full, full + sliding))))
    grouped = _group_layers(buckets, release("0.33.0"))
    assert (len(grouped.groups), grouped.padding_layers) == (groups, padding)


def test_pipeline_stages_take_every_nth_layer_from_0_11() -> None:
    # kv_cache_utils: "stage 0: full.0, sw.0, sw.1; stage 1: full.1, sw.2, sw.3 -> 3 groups:
    # (full.0, full.1), (sw.0, sw.2), (sw.1, sw.3)", i.e. layers[i::num_groups]
    buckets = specs((FULL, (0, 3)), (SLIDING, (1, 2, 4, 5)))
    grouped = _group_layers(buckets, release("0.11.0"))
    assert grouped.members == ((0, 3), (1, 4), (2, 5))
    # _project_kv_cache_groups_to_worker: each stage holds one layer of every group, so a
    # block costs one page per stage
    assert _stage_widths(65_536, grouped.members, [(0, 3), (3, 6)]) == (65_536, 65_536)
    # before 0.11 the groups were consecutive slices, "(sw.0, sw.1), (sw.2, sw.3)", which the
    # same comment says pads each stage to two layers per group
    consecutive = _group_layers(buckets, release("0.10.2"))
    assert consecutive.members == ((0, 3), (1, 2), (4, 5))
    assert _stage_widths(65_536, consecutive.members, [(0, 3), (3, 6)]) == (131_072, 131_072)


def test_one_stage_block_is_as_wide_as_the_largest_group() -> None:
    # get_kv_cache_config_from_groups: "full.0, sw.0, sw.1: share a Tensor ... full.1, sw.2:
    # share another": group_size tensors of one page each
    assert _stage_widths(65_536, ((0, 1), (2, 4), (3,)), [(0, 5)]) == (2 * 65_536,)


# --- blocks, fit and profile ----------------------------------------------------------------


def test_every_worker_takes_the_smallest_block_count() -> None:
    narrow = CacheLayout((), 2 * MiB, 10, 16, 0, ())
    wide = CacheLayout((), 4 * MiB, 10, 16, 0, ())
    # kv_cache_utils get_kv_cache_configs: "Change the num_blocks of each worker to the
    # smallest among all workers": 10 GiB / 2 MiB = 5,120 and 10 GiB / 4 MiB = 2,560
    blocks = vllm_blocks(10 * GiB, [narrow, wide], projected=False)
    assert (blocks.per_stage, blocks.num_blocks, blocks.worker) == ((5120, 2560), 2560, 1)
    # --num-gpu-blocks-override replaces the count (kv_cache_utils may_override_num_blocks)
    assert vllm_blocks(10 * GiB, [narrow, wide], False, 100).num_blocks == 100


def test_projected_stages_cut_one_pool_by_each_stage_width() -> None:
    whole = CacheLayout((), 3 * MiB, 10, 16, 0, (), stage_bytes_per_block=(2 * MiB, 4 * MiB))
    blocks = vllm_blocks(10 * GiB, [whole], projected=True)
    # 10 GiB / 2 MiB = 5,120 and / 4 MiB = 2,560; the block is reported at the wider stage's
    # 4 MiB (the stage that runs out first)
    assert (blocks.per_stage, blocks.num_blocks) == ((5120, 2560), 2560)
    assert blocks.layout.bytes_per_block == 4 * MiB


def test_longest_context_is_the_largest_whose_blocks_fit() -> None:
    # kv_cache_utils _estimate_max_model_len_from_groups: binary search on max_model_len;
    # 100 blocks of 16 tokens hold 1,600 tokens, and 1,601 needs a 101st block
    def at(context: int) -> CacheLayout:
        return CacheLayout((), MiB, cdiv(context, 16), 16, 0, ())

    assert longest_context(at, 100, 131_072) == 1600


# Llama-3.1-8B with its shape (config.json): hidden 4,096, intermediate 14,336, vocab 128,256.
LLAMA_31_8B = ModelArchitecture(
    layers=(FULL,) * 32,
    num_attention_heads=32,
    hidden_size=4096,
    intermediate_size=14_336,
    vocab_size=128_256,
)


@pytest.mark.parametrize(
    ("max_num_seqs", "peak", "note"),
    [
        # vllm/v1/worker/gpu_model_runner.py profile_run (0.17+, docs/engines/vllm.md#profile-run):
        # the dummy sampler on min(max_num_seqs, max_num_batched_tokens) = 1,024 rows holds the
        # bf16 logits and fp32 logits, probs and draws, 1,024 x 128,256 x (2 + 12) B =
        # 1,838,678,016 B, and 132 fp32 Triton scratch rows, 132 x 128,256 x 4 B = 67,719,168 B;
        # the forward pass keeps its (8,192 + 2 x 1,024) x 4,096 x 2 B = 83,886,080 B of hidden
        # states: 1,990,283,264 B, above the forward pass (8,192 x 110,592 B x 1.26 =
        # 1,141,521,776 B); plus the 34 MiB (35,651,584 B) the run leaves: 2,025,934,848 B =
        # 1.887 GiB, the "torch peak memory increase: 1.89GiB" of llm-d-planner's
        # Llama-3.1-8B TP1 log (vLLM 0.19.0, service/calibration/engine_logs.json)
        (
            1024,
            2_025_934_848,
            "sampler peak: 1024 rows x 128256 vocab, 2 B logits + fp32 copy, probs and draws, "
            "and min(rows, 132) fp32 Triton scratch rows, with 83886080 B the forward pass "
            "keeps, 35651584 B left by the run (the forward pass peaks at 1141521776 B)",
        ),
        # 256 rows: 256 x 1,795,584 + 67,719,168 + (8,192 + 512) x 8,192 = 598,691,840 B, below
        # the forward pass: 35,651,584 + 1,141,521,776 = 1,177,173,360 B
        (
            256,
            1_177_173_360,
            "forward peak: 8192 batched tokens x 110592 B/token x 1.26 (torch.compile), "
            "35651584 B left by the run",
        ),
    ],
)
def test_the_profile_peak_is_the_larger_of_forward_pass_and_sampler(
    max_num_seqs: int, peak: int, note: str
) -> None:
    profiled = profile_peak(LLAMA_31_8B, release("0.33.0"), 1, 8192, max_num_seqs)
    # engines/activation.py: 110,592 B/token for Llama-3.1-8B (checked against vllm#10517's
    # eager V0 slope), x 1.26 under torch.compile (calibration.VLLM_V1_FORWARD_FACTOR)
    assert profiled.forward_bytes == int(8192 * 110_592 * 1.26) == 1_141_521_776
    assert profiled.bytes == peak
    assert profiled.note == note
