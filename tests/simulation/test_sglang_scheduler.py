"""SGLang's scheduler stepped by hand, with test_engine.py's step timer: a pass takes 10 ms, plus
0.01 ms a prompt token and 0.05 ms a decoding sequence. The rules (service/simulation/
sglang_scheduler.py, read in SGLang v0.5.23 python/sglang/srt/managers/scheduler.py,
schedule_policy.py, schedule_batch.py) are cited beside each case."""

from __future__ import annotations

import dataclasses

import pytest

from service.catalog.seed import offline_snapshot
from service.planning.schemas import CapacityRequest
from service.planning.service import CapacityQuestion, sized_deployment
from service.simulation import (
    EngineConfig,
    Lengths,
    Request,
    SglangEngine,
    SglangLimits,
    SimulationError,
    Workload,
    draw_requests,
    engine_config,
    run,
    summarise,
)
from service.simulation.sglang_scheduler import TokenRatio

from .test_engine import timer
from .test_engine_speed import CASES, _workload


def sglang(tokens: int = 160_000, max_running: int = 256, chunk: int = 8192) -> EngineConfig:
    """An SGLang replica: a pool of `tokens` (page_size 1: the simulator's blocks of 16)."""
    return EngineConfig(
        num_gpu_blocks=tokens // 16,
        block_size=16,
        max_num_seqs=max_running,
        max_num_batched_tokens=chunk,
        max_model_len=32_768,
        sglang=SglangLimits(max_total_num_tokens=tokens, chunked_prefill_size=chunk),
    )


def ms(seconds: float) -> float:
    return seconds * 1e3


def test_a_prefill_runs_as_its_own_step_while_decodes_wait() -> None:
    # get_next_batch_to_run: a prefill batch, when one is built, runs alone. A (prompt 100,
    # answer 3) at 0: its prefill 10 + 1 = 11 ms. B (prompt 500, answer 1) arrives at 1 ms:
    # at 11 ms B's prefill runs alone, 10 + 5 = 15 ms: B's token at 26 ms (TTFT 25 ms, 10 ms
    # queued; vLLM's step would add A's decode: 25.05 ms). Then A decodes twice, 10.05 ms
    # each: A ends at 26 + 20.1 = 46.1 ms, TPOT (46.1 - 11) / 2 = 17.55 ms.
    result = SglangEngine(sglang(), timer).run([Request(0.0, 100, 3), Request(0.001, 500, 1)])
    a = next(f for f in result.finished if f.input_tokens == 100)
    b = next(f for f in result.finished if f.input_tokens == 500)
    assert ms(b.first_token_s - b.arrival_s) == pytest.approx(25.0)
    assert ms(b.scheduled_s - b.arrival_s) == pytest.approx(10.0)
    assert ms(a.first_token_s) == pytest.approx(11.0)
    assert ms(a.finished_s) == pytest.approx(46.1)
    assert result.steps == 4  # two prefill passes, two decode passes


def test_a_chunked_prefill_stalls_the_decodes_until_its_last_chunk() -> None:
    # chunked_prefill_size 4,096. A (prompt 100, answer 4) prefills at 0 (11 ms). B (prompt
    # 10,000, answer 1) at 1 ms is cut to 4,096 tokens (add_one_req, `_select_prefill_admission`)
    # and continues first in the next passes (add_chunked_req): 4,096 + 4,096 + 1,808 in three
    # passes of 50.96, 50.96 and 28.08 ms from 11 ms: B's token at 141 ms (TTFT 140 ms).
    # A's three decodes wait for them: 141 + 3 x 10.05 = 171.15 ms.
    result = SglangEngine(sglang(chunk=4096), timer).run(
        [Request(0.0, 100, 4), Request(0.001, 10_000, 1)]
    )
    a = next(f for f in result.finished if f.input_tokens == 100)
    b = next(f for f in result.finished if f.input_tokens == 10_000)
    assert ms(b.first_token_s - b.arrival_s) == pytest.approx(140.0)
    assert ms(a.finished_s) == pytest.approx(171.15)


def test_admission_reserves_the_running_outputs_times_new_token_ratio() -> None:
    # Pool 160 tokens. A (prompt 16, answer 80) at 0 prefills alone: 10.16 ms. B (the same)
    # arrives at 5 ms. At 10.16 ms A has 79 tokens to go; new_token_ratio is still its init
    # 0.7 (NewTokenRatioTracker: 0.7 x schedule_conservativeness 1), so 0.7 x 79 = 55.3 are
    # reserved (`_get_running_request_total_token_offset`) of the 144 free (A holds one block
    # of 16): 88.7 left, and B asks 16 + 80 + page 1 = 97 >= 88.7 (add_one_req): NO_TOKEN,
    # batch_is_full, and B waits until A leaves: A decodes 79 steps of 10.05 ms, ending at
    # 10.16 + 793.95 = 804.11 ms; B prefills then (10.16 ms): its token at 814.27 ms.
    result = SglangEngine(sglang(tokens=160), timer).run(
        [Request(0.0, 16, 80), Request(0.005, 16, 80)]
    )
    a, b = result.finished
    assert ms(a.finished_s) == pytest.approx(804.11)
    assert ms(b.first_token_s) == pytest.approx(814.27)
    assert result.preemptions == 0


def test_decode_out_of_tokens_retracts_to_the_end_of_the_queue() -> None:
    # Pool 176 tokens (11 blocks of 16). As above, but 160 free at 10.16 ms: 160 - 55.3 =
    # 104.7 > 97, so B prefills (10.16 ms, to 20.32 ms). Both then decode together, 10.1 ms
    # a step; each holds 16 tokens and needs a block at its decode steps 1, 17, 33, 49 and 65
    # (computing tokens 17, 33, 49, 65, 81): 1 + 1 + 4 x 2 = 10 blocks by step 49, and at step
    # 65 one is free for two (check_decode_mem): retract_decode takes B (equal outputs and
    # prompts: the later in the batch) to the end of the queue, freeing its 5 blocks, and sets
    # new_token_ratio to min(1, (65 + 20) / (80 + 1)) = 1. A decodes alone from step 65 to
    # 79 (15 x 10.05 ms): 20.32 + 64 x 10.1 + 150.75 = 817.47 ms. B, asking 81 + 15 + 1 = 97
    # with 80 free less 1.0 x A's 14 left, waits for it; then prefills its prompt and the 65
    # tokens it made (10.81 ms) and decodes 14 more: 817.47 + 10.81 + 140.7 = 968.98 ms.
    result = SglangEngine(sglang(tokens=176), timer).run(
        [Request(0.0, 16, 80), Request(0.005, 16, 80)]
    )
    a, b = result.finished
    assert result.preemptions == 1
    assert (a.preempted, b.preempted) == (0, 1)
    assert ms(b.first_token_s) == pytest.approx(20.32)
    assert ms(a.finished_s) == pytest.approx(817.47)
    assert ms(b.finished_s) == pytest.approx(968.98)
    assert result.steps == 3 + 79 + 14  # prefills of A, B, B again; decodes to 79, B's 14
    assert result.peak_kv_blocks == 10  # of 11: the one left free at step 65


def test_new_token_ratio_constants() -> None:
    # new_token_ratio_tracker.py from_config with environ.py's defaults: init 0.7, min
    # 0.7 x 0.14 = 0.098, decay (0.7 - 0.098) / 600 = 0.001003 a decode step.
    ratio = TokenRatio.of(1.0)
    assert (ratio.init, ratio.min) == pytest.approx((0.7, 0.098))
    assert ratio.decay == pytest.approx(0.602 / 600)
    assert TokenRatio.of(2.0).init == 1.0  # min(0.7 x 2, 1)


def test_radix_cache_hits_skip_whole_blocks_of_the_prompt() -> None:
    # As test_engine.py's: the second request shares 32 blocks of 16 tokens (512) and
    # prefills only its other 512 tokens: 10 + 5.12 = 15.12 ms; with the radix cache off
    # (enable_prefix_caching false, --disable-radix-cache), 10 + 10.24 = 20.24 ms.
    first = tuple(range(64))
    second = tuple(range(32)) + tuple(range(100, 132))
    requests = [Request(0.0, 1024, 1, first), Request(3600.0, 1024, 1, second)]
    for cfg, expected in (
        (sglang(), [20.24, 15.12]),
        (dataclasses.replace(sglang(), enable_prefix_caching=False), [20.24, 20.24]),
    ):
        result = SglangEngine(cfg, timer).run(requests)
        ttfts = [ms(f.first_token_s - f.arrival_s) for f in result.finished]
        assert ttfts == pytest.approx(expected)


def test_the_running_cap_holds_admission_until_a_request_leaves() -> None:
    # max_running_requests 1: B (prompt 100, answer 1) arriving with A (prompt 100, answer 3)
    # waits (get_num_allocatable_reqs 0: batch_is_full) until A's prefill (11 ms) and two
    # decodes (20.1 ms) end at 31.1 ms; its prefill then ends at 42.1 ms.
    result = SglangEngine(sglang(max_running=1), timer).run(
        [Request(0.0, 100, 3), Request(0.0, 100, 1)]
    )
    b = result.finished[1]
    assert ms(b.scheduled_s) == pytest.approx(31.1)
    assert ms(b.first_token_s) == pytest.approx(42.1)


def test_light_load_waits_one_prefill() -> None:
    # One request alone: its prompt's prefill, 10 + 0.01 x 1,000 = 20 ms, is its TTFT.
    result = SglangEngine(sglang(), timer).run([Request(0.0, 1000, 5)])
    (done,) = result.finished
    assert ms(done.first_token_s - done.arrival_s) == pytest.approx(20.0)
    assert summarise(result, 10_000).tpot_ms.mean == pytest.approx(10.05)


@pytest.mark.parametrize("rate", [2.0, 10.0, 40.0])
def test_littles_law_holds_at_every_rate(rate: float) -> None:
    # Mean running = throughput x mean time running (e2e less the queue), for any schedule.
    workload = Workload(
        Lengths.of("input_tokens", {"50": 500, "99": 3000}),
        Lengths.of("output_tokens", 200),
        request_rate=rate,
        num_requests=600,
        seed=7,
    )
    summary = run(sglang(tokens=3_200_000), timer, workload)
    assert summary.preemptions == 0
    running_s = (summary.e2e_latency_ms.mean - summary.queue_time_ms.mean) / 1e3
    assert summary.mean_running == pytest.approx(
        summary.throughput.requests_per_second * running_s, rel=1e-9
    )


def test_saturation_serves_less_than_offered_and_the_queue_grows() -> None:
    # Capped at 8 running, 2,000-token prompts and 300-token answers: a step of 8 decodes
    # takes 10.4 ms, so 8 x 1000 / 10.4 = 769 tokens/s serve at most 2.6 requests/s (less:
    # prefills run alone); 20/s are offered.
    def summary(n: int):  # type: ignore[no-untyped-def]
        workload = Workload(
            Lengths.of("input_tokens", 2000),
            Lengths.of("output_tokens", 300),
            request_rate=20.0,
            num_requests=n,
        )
        return run(sglang(max_running=8), timer, workload)

    short, long = summary(200), summary(400)
    assert long.throughput.requests_per_second < 2.6
    assert long.ttft_ms.p99 > 1.8 * short.ttft_ms.p99
    assert long.mean_waiting > short.mean_waiting


@pytest.mark.parametrize("tokens", [160_000, 11_200])  # 11,200 tokens: retractions
@pytest.mark.parametrize(("rate", "concurrency", "hit", "seed"), CASES)
def test_the_tight_loop_changes_no_result(
    tokens: int, rate: float | None, concurrency: int | None, hit: float, seed: int
) -> None:
    # engine.py's loop of decodes alone, under SGLang's scheduler: the same floats.
    cfg = sglang(tokens=tokens)
    workload = _workload(rate, concurrency, hit, seed)
    requests = draw_requests(workload, cfg.block_size)
    fast = SglangEngine(cfg, timer).run(requests, max_concurrency=concurrency)
    slow_engine = SglangEngine(cfg, timer)
    slow_engine._decode_steps = lambda until_s, stop_on_end: (0, 0)  # type: ignore[method-assign]
    slow = slow_engine.run(requests, max_concurrency=concurrency)
    assert fast == slow
    if tokens < 20_000 and rate == 40.0:
        assert fast.preemptions > 0


def _deployment(engine: str) -> EngineConfig:
    body = CapacityRequest.model_validate(
        {"model": "llama-3.1-8b-instruct", "gpu": "h100-sxm", "max_model_len": 4096,
         "engine": engine}
    )  # fmt: skip
    deployment = sized_deployment(CapacityQuestion.from_body(body), offline_snapshot())
    return engine_config(deployment.capacity)


def test_an_sglang_deployment_gives_its_pool_and_limits() -> None:
    # kvplan's SGLang capacity: max_total_num_tokens in blocks of 16, max_running_requests,
    # and chunked_prefill_size 8,192 on an 80 GB H100 (server_args.py
    # _handle_gpu_memory_settings: 60-160 GiB; docs/engines/sglang.md#default-mem-fraction-static).
    body = CapacityRequest.model_validate(
        {"model": "llama-3.1-8b-instruct", "gpu": "h100-sxm", "max_model_len": 4096,
         "engine": "sglang"}
    )  # fmt: skip
    capacity = sized_deployment(CapacityQuestion.from_body(body), offline_snapshot()).capacity
    cfg = engine_config(capacity)
    assert cfg.sglang is not None
    assert cfg.sglang.max_total_num_tokens == capacity.kv_cache_tokens
    assert cfg.num_gpu_blocks == capacity.kv_cache_tokens // 16
    assert cfg.max_num_seqs == capacity.engine_settings["max_running_requests"]
    assert cfg.sglang.chunked_prefill_size == 8192


def test_an_engine_whose_scheduler_is_not_simulated_is_refused_by_name() -> None:
    with pytest.raises(SimulationError) as caught:
        _deployment("trtllm")
    assert caught.value.field == "engine"
