"""SGLang's DP attention and expert parallelism (issue 21 item 1, SGLang's half).

DeepSeek-V3 (tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V3.json, its SOURCES.md) on
8 x H200, `--tp 8 --dp 8 --enable-dp-attention --ep-size 8` (0.5.23: `--tp 8 --attn-dp-size 8
--ep-size 8`) against `--tp 8`, worked by hand from SGLang's code (0.5.2 and 0.5.23 wheels):
layers/dp_attention.py `compute_dp_attention_world_info` (attn_tp = tp // dp = 1),
runtime_context.py `derive_parallel_widths` (moe_tp = tp // ep = 1), models/deepseek_v2.py
(attention over attn_tp, LM head over tp, dense MLPs and shared experts over tp),
vocab_parallel_embedding.py `get_embedding_tp_kwargs` (embedding over attn_tp),
arg_groups/memory_hook.py `reserve_for_graph_mb` (DP attention's reserve).

The checkpoint's classes, from the config's tensors (hf_config.py, fp8 with 128 x 128 block
scales): routed experts 654,068,416,512 B; attention 11,416,215,392 B; embedding and lm_head
129,280 x 7,168 x 2 B = 1,853,358,080 B each; the rest (3 dense MLPs, 58 shared experts,
routers, norms) 673,150,582,112 - 654,068,416,512 - 11,416,215,392 - 2 x 1,853,358,080
= 3,959,234,048 B.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing import architecture_from_hf_config
from service.sizing.capacity import Capacity, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions, Gpu, Parallelism, Workload
from service.sizing.engines.sglang_dp import NO_SGLANG_PARALLEL, SglangParallel
from service.sizing.errors import SizingError
from service.sizing.model.architecture import ModelArchitecture
from service.sizing.units import MiB

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
H200 = Gpu(memory_bytes=150_109_106_995, name="NVIDIA H200 141GB", slug="h200-141gb")
ROUTED = 654_068_416_512
ATTENTION = 11_416_215_392
TABLE = 129_280 * 7_168 * 2  # embedding, and the LM head: 1,853,358,080 B each
REST = 673_150_582_112 - ROUTED - ATTENTION - 2 * TABLE
# MLA: 61 layers x (512 + 64) values x 2 B = 70,272 B per token, whole on every GPU
CELL = 61 * 576 * 2
DP8 = SglangParallel(enable_dp_attention=True, ep_size=8)


@pytest.fixture(scope="module")
def v3() -> ModelArchitecture:
    path = FIXTURES / "deepseek-ai--DeepSeek-V3.json"
    return architecture_from_hf_config(json.loads(path.read_text(encoding="utf-8")))


def size(
    arch: ModelArchitecture,
    parallel: Parallelism,
    flags: SglangParallel = NO_SGLANG_PARALLEL,
    version: str | None = None,
    max_model_len: int = 32768,
) -> Capacity:
    options = EngineOptions(engine=Engine.SGLANG, sglang_parallel=flags, engine_version=version)
    return compute_capacity(arch, H200, Workload(max_model_len), parallel, options)


def test_the_classes_are_read_from_the_config(v3: ModelArchitecture) -> None:
    shares = v3.attention_shares_known
    assert shares is not None
    assert shares.attention.bytes == ATTENTION
    assert shares.embedding.bytes == shares.lm_head.bytes == TABLE == 1_853_358_080
    assert REST == 3_959_234_048


def test_dp8_attention_whole_on_every_gpu_experts_an_eighth(v3: ModelArchitecture) -> None:
    dp8 = size(v3, Parallelism(8, 1, 8), DP8)
    # attention and embedding whole (attn_tp 1): 11,416,215,392 + 1,853,358,080; the LM head,
    # the routed experts (32 of 256 whole, = 1/8) and the rest over tp 8:
    # 231,669,760 + 81,758,552,064 + 494,904,256 -> 95,754,699,552 B
    expected = ATTENTION + TABLE + TABLE // 8 + ROUTED // 8 + REST // 8
    assert dp8.weights_bytes_per_gpu == expected == 95_754_699_552
    assert dp8.engine_settings["attn_tp_size"] == 1
    assert dp8.engine_settings["attn_dp_size"] == 8
    assert dp8.engine_settings["tp_size"] == 8
    assert dp8.engine_settings["moe_tp_size"] == 1
    assert dp8.engine_settings["num_local_experts"] == 32
    weights = next(line for line in dp8.budget.lines if line.name == "weights")
    assert "DP attention 8 x attention TP 1 over TP 8" in weights.note
    # 8 GPUs in all: kvplan's parallel is attention TP 1 x attention DP 8
    assert dp8.parallel.total_gpus == 8


def test_tp8_shards_every_weight_eightfold(v3: ModelArchitecture) -> None:
    tp8 = size(v3, Parallelism(8))
    # 673,150,582,112 / 8 = 84,143,822,764 B (rounded up)
    assert tp8.weights_bytes_per_gpu == 84_143_822_764


def test_dp_attention_reserves_more_and_each_rank_pools_its_own(v3: ModelArchitecture) -> None:
    dp8 = size(v3, Parallelism(8, 1, 8), DP8)
    tp8 = size(v3, Parallelism(8))
    # H200: 150,109,106,995 B = 143,155.2 MiB; chunked_prefill 8192, max_bs 512 at tp >= 4:
    # reserved = 512 + 1.5 x 8192 + 2 x 512 + 8/8 x 1024 = 14,848 MiB ->
    # (143,155.2 - 14,848) / 143,155.2 = 0.8963 -> 0.896. DP attention 8 adds
    # 512 x 8 x 3 + 512 x 8 x 1.5 (max_bs > 300) = 18,432 MiB -> 33,280 MiB -> 0.7675 -> 0.768.
    assert H200.memory_bytes / MiB == pytest.approx(143_155.2, abs=0.1)
    assert tp8.budget.fraction == 0.896
    assert dp8.budget.fraction == 0.768
    for answer in (dp8, tp8):
        # max_total_num_tokens = rest_memory // 70,272 (page 1)
        assert answer.layout.bytes_per_block == CELL
        assert answer.kv_cache_tokens == answer.kv_pool_bytes // CELL
    # each of the 8 attention-DP groups keeps its own pool of its own requests
    assert dp8.kv_cache_tokens_total == 8 * dp8.kv_cache_tokens
    assert tp8.kv_cache_tokens_total == tp8.kv_cache_tokens
    # the DP ranks hold 11.6 GB more weights and reserve 18 GiB more: a smaller pool per GPU
    # (16.08 GiB against 44.82 GiB), yet 8 pools of whole latents hold 2.9x TP 8's one
    assert dp8.kv_pool_bytes < tp8.kv_pool_bytes
    assert dp8.kv_cache_tokens_total > 2.8 * tp8.kv_cache_tokens_total


def test_attn_dp_size_is_0523s_spelling_of_the_same_question(v3: ModelArchitecture) -> None:
    old = size(v3, Parallelism(8, 1, 8), DP8, version="0.5.23")
    new = size(v3, Parallelism(8), SglangParallel(attn_dp_size=8, ep_size=8), version="0.5.23")
    assert new.kv_cache_tokens == old.kv_cache_tokens
    assert new.kv_cache_tokens_total == old.kv_cache_tokens_total
    with pytest.raises(SizingError) as refused:
        size(v3, Parallelism(8), SglangParallel(attn_dp_size=8), version="0.5.2")
    assert refused.value.field == "attn_dp_size"


def test_ep_alone_moves_no_bytes_redundant_experts_do(v3: ModelArchitecture) -> None:
    tp8 = size(v3, Parallelism(8))
    ep8 = size(v3, Parallelism(8), SglangParallel(ep_size=8))
    # 32 whole experts of 256 on a rank hold the bytes of 1/8 of each
    assert ep8.weights_bytes_per_gpu == tp8.weights_bytes_per_gpu
    assert ep8.engine_settings["ep_size"] == 8
    red = size(v3, Parallelism(8), SglangParallel(ep_size=8, ep_num_redundant_experts=32))
    # (256 + 32) / 8 = 36 experts a rank: routed x 288 / (256 x 8) = 91,978,371,072 B
    assert red.weights_bytes_per_gpu == -(-ROUTED * 288 // (256 * 8)) + -(
        -(673_150_582_112 - ROUTED) // 8
    )
    assert red.engine_settings["num_local_experts"] == 36


def test_enable_dp_lm_head_keeps_the_head_on_the_attention_group(v3: ModelArchitecture) -> None:
    dp8 = size(v3, Parallelism(8, 1, 8), DP8)
    head = size(
        v3, Parallelism(8, 1, 8), SglangParallel(enable_dp_attention=True, enable_dp_lm_head=True)
    )
    # the LM head whole (attn_tp 1) instead of an eighth: 1,853,358,080 x 7/8 more
    assert head.weights_bytes_per_gpu - dp8.weights_bytes_per_gpu == TABLE - TABLE // 8


def test_max_running_requests_is_split_over_the_groups(v3: ModelArchitecture) -> None:
    options = EngineOptions(engine=Engine.SGLANG, sglang_parallel=DP8, max_num_seqs=1024)
    dp8 = compute_capacity(v3, H200, Workload(4096), Parallelism(8, 1, 8), options)
    # kv_cache_configurator.resolve_max_num_reqs: 1024 // 8 = 128 per group
    assert dp8.engine_settings["max_running_requests"] == 128


def test_what_sglang_refuses_is_refused_by_name(v3: ModelArchitecture) -> None:
    cases = [
        (Parallelism(8, 1, 3), SglangParallel(enable_dp_attention=True), "data_parallel_size"),
        (Parallelism(8), SglangParallel(ep_size=3), "ep_size"),
        (Parallelism(8), SglangParallel(enable_dp_lm_head=True), "enable_dp_lm_head"),
        (Parallelism(8, 1, 2), SglangParallel(attn_dp_size=4), "attn_dp_size"),
        (
            Parallelism(8),
            SglangParallel(ep_size=8, ep_num_redundant_experts=3),
            "ep_num_redundant_experts",
        ),
    ]
    for parallel, flags, field in cases:
        with pytest.raises(SizingError) as refused:
            size(v3, parallel, flags)
        assert refused.value.field == field
    with pytest.raises(SizingError) as refused:
        compute_capacity(
            v3, H200, Workload(4096), Parallelism(8), EngineOptions(sglang_parallel=DP8)
        )
    assert refused.value.field == "enable_dp_attention"
    assert "SGLang's flag" in refused.value.reason
