"""Issue 19: the page of each DeepSeek-V4 cache kind on vLLM 0.33.0, worked by hand.

Sources (vLLM 0.33.0 wheel): models/deepseek_v4/attention.py
`DeepseekV4MLAAttention.get_kv_cache_spec` (584-B rows, alignment 576) and
`DeepseekV4Indexer.__init__` (k_cache_head_dim 132 or 68); models/deepseek_v4/compressor.py
`CompressorStateCache` (float32, 2 x coff x head_dim, block 4 on C4 / 8 on C128);
v1/attention/backends/mla/sparse_swa.py `DeepseekV4SWACache` (block 64);
v1/kv_cache_interface.py `_apply_alignment_padding`, `SlidingWindowSpec.
max_admission_blocks_per_request`, `FullAttentionSpec.max_memory_usage_bytes`.
"""

from __future__ import annotations

import json
from pathlib import Path

from service.sizing.engines.vllm_deepseek_v4 import layer_pages, packed_pool
from service.sizing.model.config_view import HFConfig
from service.sizing.model.hf_deepseek_v4 import CompressedLayer, deepseek_v4_layers

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
ONE_MILLION = 1_048_576  # max_position_embeddings of the V4 configs, 2^20


def flash_layers() -> dict[int, CompressedLayer]:
    config = json.loads((FIXTURES / "deepseek-ai--DeepSeek-V4-Flash.json").read_text("utf-8"))
    layers = deepseek_v4_layers(HFConfig(config))
    return {layer.compress_ratio: layer for layer in layers}


def pages_by_kind(ratio: int, *, fp4_indexer: bool = False) -> dict[str, tuple[int, int]]:
    layer = flash_layers()[ratio]
    pages = layer_pages(layer, 256, fp4_indexer=fp4_indexer)
    return {page.kind: (page.block_tokens, page.page_bytes) for page in pages}


def test_a_c4_layer_hands_vllm_five_pages_of_its_own_sizes() -> None:
    # --block-size 256 (every published V4 recipe), V4-Flash index_head_dim 128:
    # window: 64 tokens x 584 B = 37,376 -> 65 x 576 = 37,440 (64 x 576 = 36,864 is short)
    # compressed: 256 / 4 = 64 states x 584 B = 37,376 -> 37,440
    # compressor state: 4 tokens x (2 x coff 2 x 512) x 4 B = 32,768 -> 57 x 576 = 32,832
    # indexer: 64 states x (128 + 128 / 128 x 4 = 132 B) = 8,448 -> 15 x 576 = 8,640
    # indexer state: 4 x (2 x 2 x 128) x 4 B = 8,192 -> 15 x 576 = 8,640
    assert pages_by_kind(4) == {
        "window": (64, 37_440),
        "compressed": (256, 37_440),
        "compressor_state": (4, 32_832),
        "indexer": (256, 8_640),
        "indexer_state": (4, 8_640),
    }


def test_a_c128_layer_and_a_window_only_layer() -> None:
    # compressed: 256 / 128 = 2 states x 584 B = 1,168 -> 3 x 576 = 1,728
    # compressor state: 8 tokens x (2 x coff 1 x 512) x 4 B = 32,768 -> 32,832
    assert pages_by_kind(128) == {
        "window": (64, 37_440),
        "compressed": (256, 1_728),
        "compressor_state": (8, 32_832),
    }
    # V4-Flash's two ratio-0 layers keep the window only.
    assert pages_by_kind(1) == {"window": (64, 37_440)}


def test_the_fp4_indexer_cache_packs_68_byte_keys() -> None:
    # use_fp4_indexer_cache: 128 / 2 + 128 / 32 = 68 B; 64 x 68 = 4,352 -> 8 x 576 = 4,608
    assert pages_by_kind(4, fp4_indexer=True)["indexer"] == (256, 4_608)


def test_what_one_request_reserves_per_kind() -> None:
    pages = {page.kind: page for page in layer_pages(flash_layers()[4], 256)}
    # compressed, whole context: 1,048,576 / 256 = 4,096 pages x 37,440 = 153,354,240 B
    assert pages["compressed"].request_bytes(ONE_MILLION, 8192) == 153_354_240
    # window 128 with 8,192 in-flight tokens: min(127 + 8,192, 2^20) = 8,319 tokens,
    # cdiv(8,319, 64) = 130 (+1 for a window not starting on a page) = 131 x 37,440 = 4,904,640
    assert pages["window"].request_bytes(ONE_MILLION, 8192) == 4_904_640
    # a 100-token request: min(127 + 8,192, 100) = 100 -> cdiv(100, 64) + 1 = 3 x 37,440
    assert pages["window"].request_bytes(100, 8192) == 112_320
    # C4 compressor state, window coff 2 x 4 = 8: min(7 + 8,192, 2^20) = 8,199 ->
    # cdiv(8,199, 4) = 2,050 + 1 = 2,051 x 32,832 = 67,338,432
    assert pages["compressor_state"].request_bytes(ONE_MILLION, 8192) == 67_338_432


def load_layers(name: str) -> tuple[CompressedLayer, ...]:
    config = json.loads((FIXTURES / f"deepseek-ai--DeepSeek-V4-{name}.json").read_text("utf-8"))
    return deepseek_v4_layers(HFConfig(config))


def test_v4_flash_packs_into_five_groups_of_one_block_on_vllm_0_33() -> None:
    # V4-Flash: 43 layers, 21 C4, 20 C128, 2 window-only (compress_ratios[:43]).
    # Buckets (block size, window): MLA 256/none {37,440 x 21, 1,728 x 20, 8,640 x 21}
    # (unbalanced: stays one group), window 64/128 {37,440 x 43}, C4 state 4/8
    # {32,832 x 21, 8,640 x 21} (balanced, two sizes: floor 21), C128 state 8/128 {32,832 x 20}.
    # _approximate_gcd([43, 21, 20], lower 21): d=21 pads 20+0+1=21, d=22 pads 1+1+2=4,
    # d=23 pads 3+2+3=8 ... -> 22 repeats; the window bucket splits into cdiv(43, 22) = 2.
    pool = packed_pool(
        load_layers("Flash"),
        block_size=256,
        max_model_len=ONE_MILLION,
        max_in_flight_tokens=16_384,  # 2 async batches x --max-num-batched-tokens 8192
        available_bytes=100 * 2**30,
    )
    assert pool.group_bytes == (
        22 * 37_440,  # window, layers 0, 2, 4, ...: 823,680
        21 * 37_440,  # window, the other 21: 786,240
        21 * 37_440 + 20 * 1_728 + 21 * 8_640,  # MLA + indexer: 1,002,240
        21 * (32_832 + 8_640),  # C4 states: 870,912
        20 * 32_832,  # C128 states: 656,640
    )
    assert pool.bytes_per_block == 1_002_240
    # 100 GiB = 107,374,182,400 B // 1,002,240 = 107,134 blocks (x 1,002,240 = 107,373,980,160)
    assert pool.num_gpu_blocks == 107_134
    # One 2^20-token request: window cdiv(127 + 16,384, 64) + 1 = 259 (each window group),
    # MLA 2^20 / 256 = 4,096, C4 state cdiv(7 + 16,384, 4) + 1 = 4,099,
    # C128 state cdiv(127 + 16,384, 8) + 1 = 2,065: 259 + 259 + 4,096 + 4,099 + 2,065 = 10,778
    assert pool.group_pages_per_request == (259, 259, 4_096, 4_099, 2_065)
    assert pool.blocks_per_request == 10_778
    # 107,134 / 10,778 = 9.94x; int(107,134 / 10,778 x 1,048,576) tokens
    assert f"{pool.max_concurrency:.2f}" == "9.94"
    assert pool.kv_cache_tokens == 107_134 * ONE_MILLION // 10_778


def test_v4_pro_splits_its_61_windows_by_31_repeats() -> None:
    # V4-Pro: 61 layers, 30 C4 and 31 C128. Balanced bucket counts [61 window, 31 C128
    # state, 30 C4 state (two sizes: floor 30)]: d=30 pads 29+29+0=58, d=31 pads 1+0+1=2,
    # d=32 pads 3+1+2=6 -> 31 repeats; windows split cdiv(61, 31) = 2 (31 and 30 layers).
    pool = packed_pool(
        load_layers("Pro"),
        block_size=256,
        max_model_len=ONE_MILLION,
        max_in_flight_tokens=16_384,
        available_bytes=100 * 2**30,
    )
    assert sorted(pool.group_bytes) == sorted(
        (
            31 * 37_440,  # 1,160,640
            30 * 37_440,  # 1,123,200
            30 * 37_440 + 31 * 1_728 + 30 * 8_640,  # 1,435,968
            30 * (32_832 + 8_640),  # 1,244,160
            31 * 32_832,  # 1,017,792
        )
    )
    assert pool.bytes_per_block == 1_435_968
    assert pool.num_gpu_blocks == 107_374_182_400 // 1_435_968  # 74,774
