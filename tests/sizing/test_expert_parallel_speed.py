"""Expert parallelism in the step-time model: each rank holds E / ep whole experts and a step
waits for the rank whose experts the batch touches most (performance.busiest_rank_experts)."""

from __future__ import annotations

import pytest

from service.sizing.errors import SizingError
from service.sizing.model.architecture import ModelArchitecture
from service.sizing.speed.performance import (
    ParameterSplit,
    busiest_rank_experts,
    decode_cost,
    prefill_cost,
)

from .test_performance import H100, LLAMA_70B, MIXTRAL


def test_the_busiest_rank_touches_more_experts_than_the_average() -> None:
    # 4 experts, 1 per token, 1 token: q = 1 - (1 - 1/4)^1 = 0.25. A rank of 2 experts touches
    # Binomial(2, 0.25): P(0) = 0.5625, P(1) = 0.375, P(2) = 0.0625, so F(0) = 0.5625 and
    # F(1) = 0.9375. The larger of two ranks: (1 - 0.5625^2) + (1 - 0.9375^2)
    # = 0.68359375 + 0.12109375 = 0.8046875; one rank: its mean, 2 x 0.25 = 0.5.
    assert busiest_rank_experts(2, 4, 1, 1, 2) == pytest.approx(0.8046875)
    assert busiest_rank_experts(2, 4, 1, 1, 1) == pytest.approx(0.5)
    # Many tokens touch every expert: q -> 1 and each rank reads all of its own.
    assert busiest_rank_experts(32, 256, 8, 4096, 8) == pytest.approx(32.0)


def test_a_rank_reads_the_dense_part_sharded_and_the_busiest_ranks_experts() -> None:
    # dense 100, 2 MoE layers of 4 experts of 10 parameters, 1 per token; 1 token at TP 2:
    # TP alone (ep 1): (100 + 2 x 10 x 1 expert) / 2 = 60; EP 2: 100 / 2 + 2 x 10 x 0.8046875
    # (the busiest rank above) x 2 / 2 = 50 + 16.09375 = 66.09375.
    split = ParameterSplit(180, 100, 10, 2, 4, 1)
    assert split.read_per_gpu(1, 2, 1) == pytest.approx(60.0)
    assert split.read_per_gpu(1, 2, 2) == pytest.approx(66.09375)


def test_mixtral_at_ep_2_reads_the_busiest_ranks_experts() -> None:
    # Mixtral (test_performance.MIXTRAL: dense 1,605,636,096, experts of 176,160,768, 32 MoE
    # layers, 8 experts, 2 per token) at TP 2, batch 1. TP 2: (1,605,636,096 + 32 x 2 x
    # 176,160,768) / 2 = 6,439,962,624 parameters, 12,879,925,248 B in bf16.
    tp = decode_cost(MIXTRAL, H100, batch=1, context_tokens=1, tensor_parallel_size=2)
    assert tp.weight_bytes == 12_879_925_248
    # EP 2: q = 1 - (1 - 2/8) = 0.25, a rank of 4 experts: Binomial(4, 0.25) has F(0..3) =
    # 0.31640625, 0.73828125, 0.94921875, 0.99609375; the larger of two ranks sums
    # 1 - F^2 = 0.89988708 + 0.45494080 + 0.09898376 + 0.00779724 = 1.46160889 experts
    # (exactly 1.46160888671875). 1,605,636,096 / 2 + 32 x 176,160,768 x 1.46160888671875
    # = 802,818,048 + 32 x 257,478,144 = 9,042,118,656 parameters, 18,084,237,312 B.
    ep = decode_cost(
        MIXTRAL, H100, batch=1, context_tokens=1, tensor_parallel_size=2, expert_parallel_size=2
    )
    assert ep.weight_bytes == 18_084_237_312
    # FLOPs and all-reduces are TP's: the same tokens through the same active parameters.
    assert ep.flops == tp.flops
    assert ep.allreduce_bytes == tp.allreduce_bytes


@pytest.mark.parametrize(
    ("model", "tp", "ep"),
    [(MIXTRAL, 4, 3), (MIXTRAL, 2, 4), (MIXTRAL, 2, 0), (LLAMA_70B, 2, 2)],
)
def test_an_expert_parallel_size_that_cannot_be_laid_out_is_refused_by_name(
    model: ModelArchitecture, tp: int, ep: int
) -> None:
    with pytest.raises(SizingError) as raised:
        prefill_cost(model, H100, 16, tensor_parallel_size=tp, expert_parallel_size=ep)
    assert raised.value.field == "expert_parallel_size"
