"""speed.py: the GPU's figures, the batch search and the latency targets, by hand.

H100 SXM figures as the catalog records them (service/catalog/data/gpus.json): 3.35 TB/s,
989 dense BF16 TFLOPS; its link from performance.py LINK_GB_S, 450 GB/s.
"""

from __future__ import annotations

import pytest

from service.sizing import Gpu
from service.sizing.errors import SizingError
from service.sizing.model.architecture import FullAttention, MixtureOfExperts, ModelArchitecture
from service.sizing.speed.replica import (
    LatencyTargets,
    NoEstimate,
    Paced,
    SpeedQuestion,
    TargetMiss,
    batch_sizes,
    check_prompt_tokens,
    gpu_performance,
    largest_batch,
    pace,
    replica_speed,
)

from .models import LLAMA_31_8B

H100 = Gpu(
    memory_bytes=85_520_809_984,
    slug="h100-sxm-80gb",
    memory_bandwidth_tb_s=3.35,
    dense_bf16_tflops=989,
    dense_fp8_tflops=1978,
    interconnect_gb_s=450,
)


def test_the_largest_batch_is_found_by_halving() -> None:
    asked: list[int] = []

    def meets(batch: int) -> bool:
        asked.append(batch)
        return batch <= 39

    assert largest_batch(meets, 54) == 39
    # a binary search over 1..54 asks at most ceil(log2(55)) = 6 batches
    assert len(asked) <= 6
    assert largest_batch(lambda b: False, 54) == 0
    assert largest_batch(lambda b: True, 54) == 54
    assert largest_batch(lambda b: True, 0) == 0


def test_batch_sizes_double_up_to_the_limit() -> None:
    assert batch_sizes(54) == (1, 2, 4, 8, 16, 32, 54)
    assert batch_sizes(64) == (1, 2, 4, 8, 16, 32, 64)
    assert batch_sizes(1) == (1,)


def test_a_gpu_names_the_figures_it_lacks() -> None:
    bare = Gpu(memory_bytes=10**11, slug="bare")
    missing = gpu_performance(bare, 2)
    assert isinstance(missing, NoEstimate)
    assert missing.reason.startswith(
        "bare has no memory_bandwidth_tb_s and no dense_bf16_tflops and no interconnect_gb_s figure"
    )
    # one GPU needs no link
    no_link = Gpu(memory_bytes=10**11, memory_bandwidth_tb_s=1.0, dense_bf16_tflops=100)
    assert not isinstance(gpu_performance(no_link, 1), NoEstimate)
    assert isinstance(gpu_performance(no_link, 2), NoEstimate)
    with pytest.raises(SizingError) as caught:
        Gpu(memory_bytes=10**11, memory_bandwidth_tb_s=0)
    assert caught.value.field == "gpu.memory_bandwidth_tb_s"


def test_a_model_the_estimate_cannot_read_gives_no_estimate() -> None:
    # an MoE without hidden_size: the experts' size is unknown (performance.parameter_split)
    moe = ModelArchitecture(
        layers=(FullAttention(8, 128),) * 4,
        num_attention_heads=32,
        num_parameters=10**9,
        moe=MixtureOfExperts(num_experts=8, experts_per_token=2, moe_intermediate_size=1024),
    )
    speed = replica_speed(moe, H100, SpeedQuestion(1, batch=4, context_tokens=64, prompt_tokens=64))
    assert isinstance(speed, NoEstimate)
    assert speed.reason.startswith("model.hidden_size: ")


def test_targets_are_positive_and_a_rate_is_a_step_of_1000_over_it() -> None:
    with pytest.raises(SizingError) as caught:
        LatencyTargets(max_tpot_ms=0)
    assert caught.value.field == "max_tpot_ms"
    assert not LatencyTargets().given
    # 40 tokens/s per user: one token every 25 ms
    rate = LatencyTargets(min_output_tokens_per_second_per_user=40)
    assert rate.decode_miss(8, 25.0) is None
    miss = rate.decode_miss(8, 25.1)
    assert miss == TargetMiss(
        "tokens-per-second-under-target",
        "decode at 8 sequences gives 39.8 output tokens/s per user, under the 40 "
        "min_output_tokens_per_second_per_user target",
    )


def test_a_prompt_must_fit_the_context() -> None:
    assert check_prompt_tokens(None, 8192) == 8192
    assert check_prompt_tokens(2048, 8192) == 2048
    with pytest.raises(SizingError) as caught:
        check_prompt_tokens(8193, 8192)
    assert caught.value.field == "avg_prompt_tokens"


def test_pace_keeps_a_batch_that_meets_the_target_and_shrinks_one_that_does_not() -> None:
    question = SpeedQuestion(1, batch=54, context_tokens=8192, prompt_tokens=8192)
    easy = pace(LLAMA_31_8B, H100, question, LatencyTargets(max_tpot_ms=1000))
    assert easy == Paced(54, None)
    tight = pace(LLAMA_31_8B, H100, question, LatencyTargets(max_tpot_ms=25))
    assert isinstance(tight, Paced)
    assert 1 <= tight.batch < 54
    assert tight.miss is not None
    assert tight.miss.code == "tpot-over-target"
    # one token reads the 16,060,522,496 B of weights: 4.8 ms at 3.35 TB/s, never 1 ms
    hopeless = pace(LLAMA_31_8B, H100, question, LatencyTargets(max_tpot_ms=1))
    assert isinstance(hopeless, TargetMiss)
    assert hopeless.reason.startswith("decode at 1 sequence takes")
