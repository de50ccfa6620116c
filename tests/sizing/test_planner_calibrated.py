"""The planner's hook for measured pools (`CalibratedPool`): a candidate the hook answers for
is sized with that pool, as a given pool, and keeps the fraction it was asked at.

Llama-3.1-8B as in test_planner_steps.py: a vLLM block of 16 tokens is 16 x 32 layers x 8 KV
heads x 128 x 2 (K, V) x 2 B = 2 MiB.
"""

from __future__ import annotations

from service.sizing.capacity import Capacity, Gpu
from service.sizing.engines.common import EngineOptions
from service.sizing.model.architecture import FullAttention, ModelArchitecture
from service.sizing.planning.planner import PlanRequest, plan
from service.sizing.units import GiB, MiB

LLAMA_31_8B = ModelArchitecture(
    layers=(FullAttention(8, 128),) * 32, num_attention_heads=32, weight_bytes=16 * GiB
)
H100 = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3", slug="h100", max_gpus_per_node=2)
REQUEST = PlanRequest(
    max_model_len=8192,
    peak_concurrency=100,
    engine=EngineOptions(engine_version="0.19.0", gpu_memory_utilization=0.95),
)
MEASURED = 20_001 * 2 * MiB  # 20,001 blocks: 20,000 usable


def test_the_hook_sizes_its_candidates_with_the_measured_pool() -> None:
    asked: list[tuple[str, int, float | None]] = []

    def measured(capacity: Capacity, gpu: Gpu) -> int | None:
        tp = capacity.parallel.tensor_parallel_size
        asked.append((gpu.slug, tp, capacity.budget.fraction))
        return MEASURED if tp == 1 else None

    result = plan(LLAMA_31_8B, [H100], REQUEST, measured)
    # every candidate was offered to the hook, sized as usual first (at the asked fraction)
    assert asked == [("h100", 1, 0.95), ("h100", 2, 0.95)]
    options = {
        o.tensor_parallel_size: o for o in [result.recommendation, *result.alternatives] if o
    }
    one = options[1].capacity
    assert one.kv_pool_bytes == MEASURED
    assert one.num_gpu_blocks == 20_001
    assert one.kv_cache_tokens == 20_001 * 16
    assert one.engine_settings["gpu_memory_utilization"] == 0.95
    # 100 sequences of 512 blocks in 20,000 usable blocks: ceil(51,200 / 20,000) = 3 replicas
    assert options[1].replicas == 3
    # the other layout keeps kvplan's own budget
    assert options[2].capacity.budget.pool_given is False


def test_without_a_hook_nothing_changes() -> None:
    assert plan(LLAMA_31_8B, [H100], REQUEST) == plan(
        LLAMA_31_8B, [H100], REQUEST, lambda capacity, gpu: None
    )
