"""The engine's tight loop over steps of decodes alone (`Engine._decode_steps`) changes no
result: the same seeded workloads stepped one `_step` at a time give equal runs, every float
the same (the loop does the same operations in the same order)."""

from __future__ import annotations

import dataclasses

import pytest

from service.catalog.seed import offline_snapshot
from service.planning.schemas import CapacityRequest
from service.planning.service import CapacityQuestion, sized_deployment
from service.simulation import (
    Engine,
    EngineConfig,
    Lengths,
    Run,
    StepTimer,
    Workload,
    draw_requests,
    engine_config,
    step_table,
)

from .test_engine import config, timer


def _runs(cfg: EngineConfig, step_ms: StepTimer, workload: Workload) -> tuple[Run, Run]:
    requests = draw_requests(workload, cfg.block_size)
    fast = Engine(cfg, step_ms).run(requests, max_concurrency=workload.max_concurrency)
    slow_engine = Engine(cfg, step_ms)
    slow_engine._decode_steps = lambda until_s, stop_on_end: (0, 0)  # type: ignore[method-assign]
    slow = slow_engine.run(requests, max_concurrency=workload.max_concurrency)
    return fast, slow


def _workload(rate: float | None, concurrency: int | None, hit: float, seed: int) -> Workload:
    return Workload(
        Lengths.of("input_tokens", {"50": 800, "90": 3000, "99": 3900}),
        Lengths.of("output_tokens", {"50": 150, "99": 700}),
        request_rate=rate,
        max_concurrency=concurrency,
        num_requests=400,
        prefix_cache_hit_rate=hit,
        seed=seed,
    )


CASES = [(1.0, None, 0.0, 1), (5.0, None, 0.33, 2), (40.0, None, 0.5, 3), (None, 32, 0.2, 4)]


@pytest.mark.parametrize("blocks", [10_000, 700])  # 700 blocks: preemptions
@pytest.mark.parametrize(("rate", "concurrency", "hit", "seed"), CASES)
def test_the_tight_loop_changes_no_result(
    blocks: int, rate: float | None, concurrency: int | None, hit: float, seed: int
) -> None:
    fast, slow = _runs(
        config(num_gpu_blocks=blocks), timer, _workload(rate, concurrency, hit, seed)
    )
    assert fast == slow
    assert fast.steps == slow.steps > 400


@pytest.mark.parametrize("blocks", [None, 900])
def test_the_tight_loop_changes_no_result_with_the_speed_models_table(blocks: int | None) -> None:
    body = CapacityRequest.model_validate(
        {"model": "llama-3.1-8b-instruct", "gpu": "h100-sxm", "max_model_len": 4096}
    )
    deployment = sized_deployment(CapacityQuestion.from_body(body), offline_snapshot())
    cfg = engine_config(deployment.capacity)
    table = step_table(deployment.arch, deployment.gpu, deployment.capacity, cfg)
    if blocks is not None:
        cfg = dataclasses.replace(cfg, num_gpu_blocks=blocks)
    for case in CASES:
        fast, slow = _runs(cfg, table, _workload(*case))
        assert fast == slow
        assert fast.preemptions == slow.preemptions
