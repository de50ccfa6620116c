"""kvplan against real engine logs (service/calibration/engine_logs.json, from
../shared/calibration/engine_logs.json with each thread named in the file).

Two claims: fed the pool a log reports, the block, token and concurrency arithmetic prints what
the engine printed; and from the GPU total and flags alone, the predicted pool is within 5% of
the logged one for every complete case.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.calibration import compare, engine_options, load_cases, logged_pool_bytes
from service.catalog.seed import load_seed
from service.sizing import (
    EngineOptions,
    Gpu,
    Parallelism,
    Workload,
    architecture_from_dict,
    compute_capacity,
)
from service.sizing.engines.common import CacheGroup, CacheLayout
from service.sizing.engines.vllm import parse_vllm_version, vllm_release, vllm_report
from service.sizing.units import GiB, MiB

CASES = {case["id"]: case for case in load_cases()}
MODELS = {m["slug"]: architecture_from_dict(m["architecture"]) for m in load_seed("models.json")}
GPUS = {
    g["slug"]: Gpu(g["memory_bytes"], g["name"], g["slug"], g.get("price_usd_per_hour"))
    for g in load_seed("gpus.json")
}
COMPLETE = sorted(case_id for case_id, case in CASES.items() if case["complete"])


def _given_pool(case: dict[str, Any], pool: int) -> Any:
    options = engine_options(case)
    fields = {name: getattr(options, name) for name in EngineOptions.__slots__}
    return compute_capacity(
        MODELS[case["model"]],
        GPUS[case["gpu"]],
        Workload(case["max_model_len"], case.get("kv_cache_dtype") or "auto"),
        Parallelism(case.get("tensor_parallel_size") or 1),
        EngineOptions(**{**fields, "kv_pool_bytes": pool}),
    )


def test_the_complete_cases_are_the_four_with_every_input_logged() -> None:
    # vllm#10517 twice (RTX 3090), vllm#13061 (RTX 4090 TP2), vllm#21348's SGLang run.
    assert COMPLETE == ["vllm-10517-20k", "vllm-10517-29k", "vllm-13061", "vllm-21348-sglang"]


@pytest.mark.parametrize("case_id", COMPLETE)
def test_predicted_pool_is_within_five_percent_of_the_log(case_id: str) -> None:
    case = CASES[case_id]
    result = compare(case, MODELS[case["model"]], GPUS[case["gpu"]])
    assert abs(result.error) < 0.05, f"{case_id}: {result.error:+.2%}"


def test_3090_log_pool_of_3_81_gib_holds_the_1952_logged_blocks() -> None:
    # vllm#10517: "kv_cache_size=3.81GiB", "# GPU blocks: 1952". A block of Llama-3.1-8B is
    # 16 tokens x 131,072 B = 2 MiB; 3.81 GiB is rounded to 2 decimals, i.e. [3.805, 3.815)
    # GiB = [1948.2, 1953.3] blocks, which holds 1952.
    low = int(3.805 * GiB) // (2 * MiB)
    high = int(3.815 * GiB) // (2 * MiB)
    assert low <= 1952 <= high
    capacity = _given_pool(CASES["vllm-10517-20k"], 1952 * 2 * MiB)
    # 1952 blocks x 16 = 31,232 tokens; 31,232 / 20,000 = 1.5616 -> "1.56x"
    # V0 also prints the swap blocks: 4 GiB swap space // 2 MiB per block = 2,048
    # (vllm/worker/worker.py determine_num_available_blocks, EngineArgs.swap_space = 4).
    assert capacity.report.log_lines == (
        "# GPU blocks: 1952, # CPU blocks: 2048",
        "Maximum concurrency for 20000 tokens per request: 1.56x",
    )
    assert capacity.kv_cache_tokens == 31_232


def test_3090_at_29k_prints_0_82x_and_does_not_start() -> None:
    # vllm#10517 '29k - BAD': 1478 blocks x 16 = 23,648 tokens; 23,648 / 29,000 = 0.815 -> 0.82x
    # and one 29,000-token sequence needs cdiv(29000, 16) = 1813 blocks > 1478.
    capacity = _given_pool(CASES["vllm-10517-29k"], 1478 * 2 * MiB)
    assert capacity.report.log_lines[1] == "Maximum concurrency for 29000 tokens per request: 0.82x"
    assert capacity.kv_cache_tokens == 23_648
    assert not capacity.fits
    assert capacity.layout.blocks_per_request == 1813


def test_4090_tp2_pool_from_the_logged_tokens_gives_81536_tokens() -> None:
    # vllm#13061: DeepSeek-R1-Distill-Qwen-14B at TP2: 48 layers x 4 KV heads per GPU x 128
    # x 2 x 2 B = 98,304 B per token per GPU; a 16-token block is 1,572,864 B. 81,536 tokens
    # = 5,096 blocks = 8,015,511,552 B = 7.465 GiB (rank 0's pool, the minimum over workers).
    capacity = _given_pool(CASES["vllm-13061"], 5096 * 1_572_864)
    assert capacity.kv_bytes_per_token_per_gpu == 98_304
    assert capacity.layout.bytes_per_block == 1_572_864
    assert capacity.kv_cache_tokens == 81_536
    # max_model_len 131,072 needs 8,192 blocks: vLLM refused to start.
    assert not capacity.fits


def test_sglang_qwen3_235b_tokens_give_the_logged_k_size() -> None:
    # vllm#21348: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB" (SGLang GB = GiB).
    # Cell per GPU at TP4: 94 layers x max(1, 4 // 4) KV head x 128 x 2 (K, V) x 2 B = 48,128 B.
    case = CASES["vllm-21348-sglang"]
    capacity = _given_pool(case, 367_404 * 48_128)
    assert capacity.kv_bytes_per_token_per_gpu == 48_128
    assert capacity.kv_cache_tokens == 367_404
    # K size: 367,404 x 94 x 128 x 2 B / 2^30 = 8.2345 -> "8.23 GB"
    assert capacity.report.log_lines[0].startswith(
        "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    )


def test_qwen3_235b_vllm_tokens_are_the_minimum_rank_pool() -> None:
    # vllm#21348 vLLM side: "GPU KV cache size: 178,880 tokens" at block 16: 11,180 blocks of
    # 94 layers x 1 head x 128 x 2 x 2 B x 16 = 770,048 B -> 8.02 GiB, below the 8.11 GiB one
    # rank logged (every worker uses the smallest block count).
    case = CASES["vllm-21348-vllm"]
    capacity = _given_pool(case, 11_180 * 770_048)
    assert capacity.layout.bytes_per_block == 770_048
    assert capacity.report.log_lines[0] == "GPU KV cache size: 178,880 tokens"
    assert logged_pool_bytes(case, capacity) == 11_180 * 770_048


def test_pr_12569_v1_log_of_1381_blocks_prints_10_79x() -> None:
    # vllm PR #12569 (V1 in 0.7.2): 1381 blocks x 16 / 2048 = 10.789 -> "10.79x"
    layout = CacheLayout(
        groups=(CacheGroup("full_attention", 80, 16, 16 * 2 * 8 * 128 * 2, 128),),
        bytes_per_block=16 * 327_680,
        blocks_per_request=128,
        block_size=16,
        padding_layers=0,
        notes=(),
    )
    report = vllm_report(1381, layout, 2048, vllm_release(parse_vllm_version("0.7.2")))
    # The PR ran the opt-in V1 engine (VLLM_USE_V1=1), whose executor logs "# GPU blocks: 1381"
    # alone; 0.7.2's default V0 engine, which kvplan models for that release, adds the swap
    # blocks: 4 GiB // (16 x 327,680 B = 5 MiB) = 819.
    assert report.log_lines == (
        "# GPU blocks: 1381, # CPU blocks: 819",
        "Maximum concurrency for 2048 tokens per request: 10.79x",
    )
    assert report.kv_cache_tokens == 22_096


def test_pr_13596_prints_tokens_with_thousands_separators() -> None:
    # vllm PR #13596 (0.8.0): 127,626 blocks x 16 = 2,042,016 tokens; / cdiv(2048, 16) = 128
    # blocks per request -> 997.08x
    layout = CacheLayout(
        groups=(CacheGroup("full_attention", 32, 16, 65_536, 128),),
        bytes_per_block=2 * MiB,
        blocks_per_request=128,
        block_size=16,
        padding_layers=0,
        notes=(),
    )
    report = vllm_report(127_626, layout, 2048, vllm_release(parse_vllm_version("0.8.0")))
    assert report.log_lines == (
        "GPU KV cache size: 2,042,016 tokens",
        "Maximum concurrency for 2,048 tokens per request: 997.08x",
    )


def test_incomplete_cases_say_why() -> None:
    incomplete = [case for case in CASES.values() if not case["complete"]]
    assert incomplete
    assert all(case.get("why_incomplete") for case in incomplete)
