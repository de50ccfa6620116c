"""Issue 19: vLLM 0.26.0's DeepSeek-V4 pool reproduced to the block from the one public log.

The log: vllm#51041 (github.com/vllm-project/vllm/issues/51041, DeepSeek-V4-Flash-0731 on
H20 at TP 2, official vLLM 0.26.0, `--kv-cache-dtype fp8 --block-size 256`, MTP speculative
decoding; "Setting kv cache block size to 256 for DEEPSEEK_SPARSE_SWA backend.", "Using
DeepSeek's fp8_ds_mla KV cache format."): "Available KV cache memory: 7.01 GiB", "GPU KV cache
size: 1,009,661 tokens", "Maximum concurrency for 912,128 tokens per request: 1.11x". The
0731 checkpoint keeps V4-Flash's architecture (the published Flash config.json is the fixture).

Rules read in the vLLM 0.26.0 wheel (the same functions from 0.24.0: the wheels 0.20.0-0.33.0
were compared function by function), v1/core/kv_cache_utils.py: `group_and_unify_kv_cache_specs`,
`_approximate_gcd`, `_get_kv_cache_groups_uniform_groups`, `_bucket_layers_by_page_size`,
`_get_kv_cache_config_packed`, `get_max_concurrency_for_kv_cache_config`,
`_max_memory_usage_bytes_from_groups`; v1/kv_cache_interface.py `UniformTypeKVCacheSpecs`,
`SlidingWindowSpec.max_admission_blocks_per_request`; models/deepseek_v4/nvidia/mtp.py
`DeepSeekV4MultiTokenPredictor` (the MTP layer is a `DeepseekV4DecoderLayer` of index
num_hidden_layers, ratio compress_ratios[43] = 0: one more window-only layer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.sizing.capacity import Gpu, Parallelism, Workload, compute_capacity
from service.sizing.engines.common import EngineOptions
from service.sizing.engines.speculative import parse_speculative_config
from service.sizing.engines.vllm_deepseek_v4 import tuple_pool
from service.sizing.errors import InvalidDtype, SizingError
from service.sizing.model.config_view import HFConfig
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.hf_config import architecture_from_hf_config
from service.sizing.model.hf_deepseek_v4 import deepseek_v4_layers, draft_layers
from service.sizing.model.schedule import architecture_from_dict, architecture_to_dict

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GiB = 2**30
M = 912_128  # the log's max_model_len: 3,563 pages of 256 tokens exactly
H20 = Gpu(memory_bytes=96 * GiB, name="NVIDIA H20")


def flash_json() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (FIXTURES / "deepseek-ai--DeepSeek-V4-Flash.json").read_text("utf-8")
    )
    return data


def flash_config() -> HFConfig:
    return HFConfig(flash_json())


def test_vllm_0_26_groups_v4_flash_with_its_mtp_layer_into_five_groups_of_22_tuples() -> None:
    config = flash_config()
    draft = draft_layers(config)
    assert [layer.compress_ratio for layer in draft] == [1]  # compress_ratios[43] = 0
    # In-flight tokens 8,192: 2 batches (async scheduling) x 4,096, or one batch of 8,192.
    pool = tuple_pool(
        deepseek_v4_layers(config) + draft,
        block_size=256,
        max_model_len=M,
        max_in_flight_tokens=8192,
    )
    # 43 + 1 MTP layers: 2 + 1 window-only, 21 C4 (ratios 4 at 2, 4, ..., 42), 20 C128.
    # Buckets: MLA (C4 latent 37,440 x 21, indexer 8,640 x 21, C128 latent 1,728 x 20: 21
    # tuples), window 64/128 (37,440 x 44: 44), C4 states 4/8 (32,832 -> 37,440 and 8,640, x 21:
    # 21), C128 states 8/128 (32,832 -> 37,440 x 20: 20). _approximate_gcd([21, 44, 21, 20]) from
    # 21: padding 20 at 21, 4 at 22 (1 + 0 + 1 + 2), 9 at 23, ... -> 22 tuples; the window
    # bucket splits in two groups of 22.
    assert pool.layer_tuples == 22
    assert [(g.kind, g.layers, g.page_bytes) for g in pool.groups] == [
        ("compressed", 62, 21 * 37_440 + 21 * 8_640 + 20 * 1_728),  # 1,002,240
        ("window", 22, 22 * 37_440),  # 823,680
        ("window", 22, 22 * 37_440),
        ("compressor_state", 42, 21 * 37_440 + 21 * 8_640),  # 967,680
        ("compressor_state", 20, 20 * 37_440),  # 748,800
    ]
    # One block: per page size, the most pages any group has: 22 x 37,440 + 21 x 8,640 +
    # 20 x 1,728 = 823,680 + 181,440 + 34,560.
    assert pool.bytes_per_block == 1_039_680
    # One request: MLA 912,128 / 256 = 3,563 pages; windows cdiv(127 + 8,192, 64) + 1 = 131;
    # C4 states cdiv(7 + 8,192, 4) + 1 = 2,051; C128 states cdiv(127 + 8,192, 8) + 1 = 1,041.
    assert [g.pages_per_request for g in pool.groups] == [3563, 131, 131, 2051, 1041]
    request = 3563 * 1_002_240 + 2 * 131 * 823_680 + 2051 * 967_680 + 1041 * 748_800
    assert request == 6_550_997_760
    # cdiv(6,550,997,760, 1,002,240) = 6,536.4 -> 6,537 blocks a request.
    assert pool.blocks_per_request == 6537


def test_the_log_is_reproduced_to_the_block() -> None:
    config = flash_config()
    pool = tuple_pool(
        deepseek_v4_layers(config) + draft_layers(config),
        block_size=256,
        max_model_len=M,
        max_in_flight_tokens=8192,
    )
    # 7,236 blocks x 1,039,680 B = 7,523,124,480 B = 7.0065 GiB: "7.01 GiB" as logged.
    num_blocks = 7236
    assert round(num_blocks * pool.bytes_per_block / GiB, 2) == 7.01
    concurrency = num_blocks / pool.blocks_per_request  # 7,236 / 6,537 = 1.10693
    assert f"{concurrency:.2f}x" == "1.11x"
    assert int(concurrency * M) == 1_009_661  # "GPU KV cache size: 1,009,661 tokens"
    # No other block count in the logged 7.01 GiB (7.005-7.015 GiB: 7,235 to 7,244 blocks)
    # prints 1,009,661: 7,235 gives 1,009,522 and 7,237 gives 1,009,801.
    assert [n for n in range(7235, 7245) if int(n / pool.blocks_per_request * M) == 1_009_661] == [
        7236
    ]


def test_without_the_mtp_layer_or_with_16384_tokens_in_flight_the_log_is_not_reproduced() -> None:
    # The MTP layer's window and the in-flight tokens are both visible in the log's number.
    config = flash_config()
    layers = deepseek_v4_layers(config)
    no_mtp = tuple_pool(layers, block_size=256, max_model_len=M, max_in_flight_tokens=8192)
    # 43 layers: window tuples 43 -> groups of 22 and 21 (786,240 B); the request drops to
    # 6,532 blocks and 7,236 blocks print 1,010,434 tokens.
    assert no_mtp.blocks_per_request == 6532
    assert int(7236 / 6532 * M) == 1_010_434
    more = tuple_pool(
        layers + draft_layers(config), block_size=256, max_model_len=M, max_in_flight_tokens=16384
    )
    assert more.blocks_per_request == 9490  # 0.76x: far from the log's 1.11x


def test_compute_capacity_answers_the_logged_pool_on_every_field() -> None:
    # The same pool through kvplan's vLLM pipeline (kv_pool_bytes as the log's "Available KV
    # cache memory"), without speculative_config (the MTP layer joins only when it is asked):
    # 1,039,680-B blocks, 7,236 of them, 6,532 blocks a request.
    arch = architecture_from_hf_config(flash_json())
    capacity = compute_capacity(
        arch,
        H20,
        Workload(max_model_len=M, kv_cache_dtype=KvCacheDtype.FP8),
        Parallelism(tensor_parallel_size=2),
        EngineOptions(
            engine_version="0.26.0",
            kv_pool_bytes=7236 * 1_039_680,
            max_num_batched_tokens=4096,
        ),
    )
    assert capacity.fits
    assert capacity.kv_cache_dtype is KvCacheDtype.FP8_DS_MLA
    assert capacity.layout.bytes_per_block == 1_039_680
    assert capacity.report.num_gpu_blocks == 7236
    assert capacity.layout.blocks_per_request == 6532
    assert capacity.report.log_lines == (
        "GPU KV cache size: 1,010,434 tokens",
        "Maximum concurrency for 912,128 tokens per request: 1.11x",
    )
    assert any("5 groups in 22 layer tuples" in w for w in capacity.warnings)


def test_vllm_0_33_packs_the_same_pool_into_wider_requests() -> None:
    # 0.33.0 (kv_cache_planning.py _get_packed_kv_cache_groups, test_vllm_deepseek_v4_pages.py):
    # the same 7,523,124,480 B cut into 1,002,240-B blocks = 7,506, and a request of 912,128
    # tokens takes 10,245 of them with 2 x 8,192 tokens in flight (the default batch): vLLM
    # 0.33 would not start (7,505 usable blocks).
    arch = architecture_from_hf_config(flash_json())
    capacity = compute_capacity(
        arch,
        H20,
        Workload(max_model_len=M, kv_cache_dtype=KvCacheDtype.AUTO),
        Parallelism(tensor_parallel_size=2),
        EngineOptions(
            engine_version="0.33.0", kv_pool_bytes=7236 * 1_039_680, max_num_batched_tokens=8192
        ),
    )
    assert capacity.layout.bytes_per_block == 1_002_240
    assert capacity.report.num_gpu_blocks == 7506
    assert capacity.layout.blocks_per_request == 10_245
    assert not capacity.fits
    assert capacity.max_model_len_that_fits is not None
    assert capacity.max_model_len_that_fits < M
    # auto is fp8_ds_mla on 0.33 (attention.py _resolve_dsv4_kv_cache_dtype), said so.
    assert any("auto becomes fp8_ds_mla" in w for w in capacity.warnings)


@pytest.mark.parametrize(
    ("version", "words"),
    [
        ("0.19.0", "it arrived in 0.20.0"),
        ("0.22.0", "models DeepSeek-V4 on vLLM 0.24.0-0.26.x and 0.33.0"),
        ("0.30.0", "models DeepSeek-V4 on vLLM 0.24.0-0.26.x and 0.33.0"),
    ],
)
def test_releases_kvplan_does_not_model_are_refused_by_name(version: str, words: str) -> None:
    arch = architecture_from_hf_config(flash_json())
    with pytest.raises(SizingError) as caught:
        compute_capacity(
            arch,
            H20,
            Workload(max_model_len=M, kv_cache_dtype=KvCacheDtype.FP8),
            Parallelism(tensor_parallel_size=2),
            EngineOptions(engine_version=version, kv_pool_bytes=7 * GiB),
        )
    assert caught.value.field == "engine_version"
    assert words in caught.value.reason


def test_a_16_bit_cache_is_refused_by_name() -> None:
    # 0.26.0 asserts an fp8 cache for the fp8_ds_mla layout (auto is not turned into fp8
    # before 0.33.0); FlashInfer's plain bf16 rows are not modelled.
    arch = architecture_from_hf_config(flash_json())
    for version, dtype in (("0.26.0", KvCacheDtype.AUTO), ("0.33.0", KvCacheDtype.BFLOAT16)):
        with pytest.raises(InvalidDtype) as caught:
            compute_capacity(
                arch,
                H20,
                Workload(max_model_len=M, kv_cache_dtype=dtype),
                Parallelism(tensor_parallel_size=2),
                EngineOptions(engine_version=version, kv_pool_bytes=7 * GiB),
            )
        assert caught.value.field == "kv_cache_dtype"


# --- issue 19 / 21: the MTP drafter as an input (--speculative-config) ----------------------
#
# The flags the thread reports for its H20 TP 2 runs (vllm#51041, the consolidating comment of
# 2026-08-10): `--enable-chunked-prefill --max-num-batched-tokens 8192`, "with and without MTP
# speculative", no `--no-async-scheduling`. vLLM 0.26.0 config/vllm.py `__post_init__` keeps
# async scheduling on by default with an MTP drafter (`mtp` and `deepseek_mtp` are
# EagleModelTypes), so `max_concurrent_batches` is 2 (V1 and V2 runners alike at PP 1) and
# `max_in_flight_tokens` = 2 x 8,192 = 16,384. The logged 1,009,661 tokens / 1.11x need 8,192
# in flight: the code gives that from max_num_batched_tokens 4,096 (async on) or 8,192 with
# async scheduling off, and the thread does not show the flags of the run that printed it. So
# the log is reproduced from 4,096 (said so here and in README), and the flags the thread
# reports answer 0.76x: kvplan does not fit a flag to the log.

MTP_1 = {"method": "deepseek_mtp", "num_speculative_tokens": 1}


def _mtp_capacity(max_num_batched_tokens: int, tokens: int = 1, **extra: Any) -> Any:
    options: dict[str, Any] = {
        "engine_version": "0.26.0",
        "max_num_batched_tokens": max_num_batched_tokens,
        "speculative_config": parse_speculative_config({**MTP_1, "num_speculative_tokens": tokens}),
        **extra,
    }
    return compute_capacity(
        architecture_from_hf_config(flash_json()),
        H20,
        Workload(max_model_len=M, kv_cache_dtype=KvCacheDtype.FP8),
        Parallelism(tensor_parallel_size=2),
        EngineOptions(**options),
    )


def test_mtp_as_an_input_joins_the_pool_and_reproduces_the_log_at_8192_in_flight() -> None:
    # The MTP layer (compress_ratios[43] = 0: window only) joins the 43 layers through
    # speculative_config, not by hand: the pool of the first test, 7,236 blocks of 1,039,680 B,
    # 6,537 blocks a request at 2 x 4,096 in flight.
    capacity = _mtp_capacity(4096, kv_pool_bytes=7236 * 1_039_680)
    assert capacity.fits
    assert capacity.layout.bytes_per_block == 1_039_680
    assert capacity.report.num_gpu_blocks == 7236
    assert capacity.layout.blocks_per_request == 6537
    assert capacity.report.log_lines == (
        "GPU KV cache size: 1,009,661 tokens",
        "Maximum concurrency for 912,128 tokens per request: 1.11x",
    )
    assert any("1 MTP layer(s)" in w for w in capacity.warnings)
    # num_speculative_tokens reserves lookahead slots at run time (the scheduler's
    # allocate_slots), not in the start-up pool: 3 draft tokens print the same log
    assert _mtp_capacity(4096, 3, kv_pool_bytes=7236 * 1_039_680).report.log_lines == (
        capacity.report.log_lines
    )


def test_the_flags_the_thread_reports_give_16384_in_flight_and_not_the_logged_pool() -> None:
    # max_num_batched_tokens 8,192 with async scheduling (on with MTP): 16,384 in flight;
    # windows cdiv(127 + 16,384, 64) + 1 = 259 pages, C4 states cdiv(7 + 16,384, 4) + 1 =
    # 4,099, C128 states cdiv(127 + 16,384, 8) + 1 = 2,065: 9,490 blocks a request
    # (test_without_the_mtp_layer_...), 7,236 / 9,490 = 0.762x, int(0.762 x 912,128) = 695,485.
    capacity = _mtp_capacity(8192, kv_pool_bytes=7236 * 1_039_680)
    assert capacity.layout.blocks_per_request == 9490
    assert capacity.report.log_lines == (
        "GPU KV cache size: 695,485 tokens",
        "Maximum concurrency for 912,128 tokens per request: 0.76x",
    )
    assert not capacity.fits  # under one request: vLLM 0.26 would refuse to start


def test_the_mtp_weights_are_a_line_of_the_budget() -> None:
    # param_count_2026.deepseek_v4's MTP tensors (layer 43 as a DeepseekV4DecoderLayer, e_proj,
    # h_proj, enorm, hnorm, norm, hc_head) at the checkpoint's storage, less the embeddings
    # and head the drafter shares: 3,625,659,638 B, over TP 2 = 1,812,829,819 B a rank.
    arch = architecture_from_hf_config(flash_json())
    assert arch.mtp_weight_bytes == 3_625_659_638
    capacity = _mtp_capacity(4096)
    line = next(x for x in capacity.budget.lines if x.name == "speculative_draft_weights")
    assert line.bytes == -1_812_829_819
    plain = compute_capacity(
        arch,
        H20,
        Workload(max_model_len=M, kv_cache_dtype=KvCacheDtype.FP8),
        Parallelism(tensor_parallel_size=2),
        EngineOptions(engine_version="0.26.0", max_num_batched_tokens=4096),
    )
    # the rest of the difference is the CUDA-graph estimate, which grows with the layer count
    # (28,182,600 B a layer: 43 x 28,182,600 = 1,211,851,800, 44 x = 1,240,034,400)
    graphs = capacity.budget.cudagraph_bytes - plain.budget.cudagraph_bytes
    assert graphs == 28_182_600
    assert plain.budget.pool_bytes - capacity.budget.pool_bytes == 1_812_829_819 + graphs


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}, "method"),
        ({"enable_lora": True}, "enable_lora"),
        ({"kv_offloading_size": 100.0}, "kv_offloading_size"),
        ({"cpu_offload_gb": 10.0}, "cpu_offload_gb"),
    ],
)
def test_roles_the_v4_pool_does_not_size_are_refused_by_name(
    options: dict[str, Any], field: str
) -> None:
    if "speculative_config" in options:
        options = {"speculative_config": parse_speculative_config(options["speculative_config"])}
    with pytest.raises(SizingError) as caught:
        compute_capacity(
            architecture_from_hf_config(flash_json()),
            H20,
            Workload(max_model_len=M, kv_cache_dtype=KvCacheDtype.FP8),
            Parallelism(tensor_parallel_size=2),
            EngineOptions(engine_version="0.26.0", **options),
        )
    assert caught.value.field.endswith(field)


def test_the_plain_form_says_the_mtp_layer_and_refuses_a_name_it_lacks() -> None:
    arch = architecture_from_hf_config(flash_json())
    data = architecture_to_dict(arch)
    # compress_ratios[43] = 0: the window-only geometry of layers 0 and 1, named by its kind
    assert data["mtp_layer_schedule"] == ["compressed_sparse_attention"]
    assert architecture_from_dict(data).mtp_layers == arch.mtp_layers
    with pytest.raises(SizingError) as caught:
        architecture_from_dict({**data, "mtp_layer_schedule": ["no_such_spec"]})
    assert caught.value.field == "mtp_layer_schedule[0]"
