"""The planner's steps for one candidate: fit, replicas, price.

Sources: the rule in service/sizing/planning/planner.py's module docstring (the fewest replicas that
hold the peak with the headroom asked for, by blocks and by the engine's batch cap), vLLM's null
block (vllm/v1/core/block_pool.py `BlockPool`: block 0 is never handed out) and paged attention
(a sequence holds blocks for the tokens it has). Llama-3.1-8B: 32 layers x 8 KV heads x 128 x
2 (K, V) x 2 B = 131,072 B per token; a vLLM block of 16 tokens is 2 MiB.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from service.catalog.seed import offline_snapshot
from service.sizing.capacity import Capacity, Gpu, Workload, compute_capacity
from service.sizing.engines.common import EngineOptions
from service.sizing.model.architecture import FullAttention, ModelArchitecture
from service.sizing.model.dtypes import parse_kv_cache_dtype
from service.sizing.planning.explain import as_plain, explain, performance_steps
from service.sizing.planning.planner import (
    PlanRequest,
    _Fit,
    _fit_for,
    _priced,
    _remembered,
    _replicas,
    candidate_capacity,
    plan,
)
from service.sizing.speed.performance import PerformanceEstimate
from service.sizing.units import GiB, MiB

LLAMA_31_8B = ModelArchitecture(
    layers=(FullAttention(8, 128),) * 32, num_attention_heads=32, weight_bytes=16 * GiB
)
H100 = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3", price_usd_per_hour=2.5)
# 1,001 blocks of 2 MiB given: 1,000 can be handed out
POOL = EngineOptions(engine_version="0.33.0", kv_pool_bytes=1001 * 2 * MiB, max_num_seqs=4)


def test_a_sequence_holds_the_blocks_of_its_tokens() -> None:
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(8192), engine=POOL)
    # at max_model_len: 8,192 / 16 = 512 blocks, so 1,000 usable blocks hold 1 sequence
    assert _fit_for(cap, None) == _Fit(1000, 512, 1, 4)
    # at 2,048 tokens on average: 128 blocks, 1,000 // 128 = 7 sequences, capped at 4
    fit = _fit_for(cap, 2048)
    assert (fit.blocks_per_sequence, fit.sequences_that_fit) == (128, 7)
    assert fit.sequences_per_replica == 4


def test_replicas_hold_the_peak_by_blocks_and_by_batch() -> None:
    request = PlanRequest(max_model_len=8192, peak_concurrency=20, headroom_fraction=0.1)
    # by blocks: ceil(20 x 128 / (1,000 x 0.9)) = ceil(2.84) = 3
    # by batch: cdiv(20, min(7, 8)) = 3
    assert _replicas(request, _Fit(1000, 128, 7, 8)) == 3
    # a batch cap of 4: cdiv(20, 4) = 5 replicas, more than the blocks need
    assert _replicas(request, _Fit(1000, 128, 7, 4)) == 5


def test_the_priced_option_reports_headroom_cost_and_the_batch_cap() -> None:
    cap = compute_capacity(LLAMA_31_8B, H100, Workload(8192), engine=POOL)
    request = PlanRequest(max_model_len=8192, peak_concurrency=20, engine=POOL)
    option = _priced(H100, 1, cap, request, fit=_Fit(1000, 128, 7, 4), replicas=5)
    # demand 20 x 128 = 2,560 blocks; supply 5 x 1,000 = 5,000; free 2,440 = 48.8%
    assert option.headroom_fraction == 0.488
    assert option.headroom_bytes == 2440 * 2 * MiB
    # 5 replicas x 1 GPU x $2.5 per hour
    assert (option.total_gpus, option.cost_per_hour_usd) == (5, 12.5)
    assert option.sequences_per_replica == 4
    assert any("max_num_seqs 4 caps the batch" in w for w in option.warnings)


def test_a_plan_from_remembered_capacities_equals_one_computed_afresh() -> None:
    # Candidates' capacities are memoised across plans (planner.candidate_capacity); another
    # peak reuses them, and must answer exactly what a cold computation answers.
    a100 = Gpu(80 * GiB, "A100 80GB", slug="a100", price_usd_per_hour=1.5, max_gpus_per_node=4)
    gpus = [H100, a100]
    first = PlanRequest(max_model_len=8192, peak_concurrency=64)
    other_peak = PlanRequest(max_model_len=8192, peak_concurrency=300)
    plan(LLAMA_31_8B, gpus, first)
    warm = plan(LLAMA_31_8B, gpus, other_peak)
    assert candidate_capacity.cache_info().hits > 0
    candidate_capacity.cache_clear()
    assert plan(LLAMA_31_8B, gpus, other_peak) == warm


def _catalog() -> tuple[dict[str, ModelArchitecture], list[Gpu]]:
    snapshot = offline_snapshot()
    models = {slug: entry.architecture for slug, entry in snapshot.models.items()}
    return models, [entry.gpu for entry in snapshot.gpus.values()]


def _never_calibrated(capacity: Capacity, gpu: Gpu) -> int | None:
    """A calibrated-pool hook that matches nothing: the planner then searches afresh."""
    del capacity, gpu
    return None


def test_a_remembered_plan_answers_what_a_search_afresh_answers() -> None:
    # Without a calibrated-pool hook the planner remembers each GPU's search and each option's
    # timing per question (planner._Remembered); with one it searches every candidate again.
    # The questions: the benchmark's multi-node one (405B at 131,072 tokens: every GPU's
    # layouts across nodes), and the README's 70B one ranked by tokens per dollar (every
    # option timed) and held to a latency target.
    models, gpus = _catalog()
    questions = [
        (models["llama-3.1-405b"], PlanRequest(max_model_len=131072, peak_concurrency=16)),
        (
            models["llama-3.1-70b"],
            PlanRequest(
                max_model_len=32768,
                peak_concurrency=64,
                kv_cache_dtype=parse_kv_cache_dtype("fp8"),
                rank_by="tokens_per_dollar",
                max_tpot_ms=40.0,
            ),
        ),
    ]
    for arch, request in questions:
        _remembered.cache_clear()
        first = plan(arch, gpus, request)
        again = plan(arch, gpus, request)
        afresh = plan(arch, gpus, request, _never_calibrated)
        assert first == again == afresh
        assert first.recommendation is not None
        # the second plan read the first one's options, not copies of them
        assert again.recommendation is first.recommendation
        assert afresh.recommendation is not first.recommendation
    # the multi-node question's answer has options across nodes (H100 at TP 8 x PP 2, ...)
    arch, request = questions[0]
    shown = plan(arch, gpus, replace(request, max_alternatives=100)).alternatives
    assert any(option.pipeline_parallel_size > 1 for option in shown)


def test_as_plain_answers_what_dataclasses_asdict_answers() -> None:
    # The explanation the API shows is `as_plain` of the recommendation's steps: the same dict,
    # nested the same way, as the standard library's dataclasses.asdict.
    models, gpus = _catalog()
    arch = models["llama-3.1-405b"]
    request = PlanRequest(max_model_len=131072, peak_concurrency=16)
    best = plan(arch, gpus, request).recommendation
    assert best is not None
    speed = best.speed
    assert isinstance(speed, PerformanceEstimate)
    steps = performance_steps(speed, context_tokens=request.context_tokens)
    explanation = explain(best.capacity, steps)
    # (a tuple never equals a list, so the containers' types are compared too)
    assert as_plain(explanation) == dataclasses.asdict(explanation)
