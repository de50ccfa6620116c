"""The scheduler stepped by hand: a step timer whose every term is written out, so each time
in these tests is worked beside it (the engine's rules: service/simulation/engine.py, read
from vLLM vllm/v1/core/sched/scheduler.py Scheduler.schedule, release 0.33.0)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from service.simulation import (
    Engine,
    EngineConfig,
    Lengths,
    Request,
    SimulationError,
    Targets,
    Workload,
    run,
    summarise,
)

STEP_MS = 10.0  # every forward pass: 10 ms
PREFILL_MS_PER_TOKEN = 0.01  # plus 0.01 ms a prompt token
DECODE_MS_PER_SEQUENCE = 0.05  # plus 0.05 ms a decoding sequence


def timer(decodes: int, decode_context: int, chunks: Sequence[tuple[int, int]]) -> float:
    prefill_tokens = sum(tokens for _, tokens in chunks)
    return STEP_MS + DECODE_MS_PER_SEQUENCE * decodes + PREFILL_MS_PER_TOKEN * prefill_tokens


def config(**overrides: int) -> EngineConfig:
    values = {
        "num_gpu_blocks": 10_000,
        "block_size": 16,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "max_model_len": 32_768,
    } | overrides
    return EngineConfig(**values)


def test_one_request_alone_takes_one_prefill_then_a_decode_a_step() -> None:
    # Prompt 1,000, answer 5. Step 1: the whole prompt (1,000 <= 8,192), 10 + 0.01 x 1,000 =
    # 20 ms, and samples the first token: TTFT 20 ms. Steps 2-5 decode one sequence each,
    # 10 + 0.05 = 10.05 ms: e2e = 20 + 4 x 10.05 = 60.2 ms; TPOT = 40.2 / 4 = 10.05 ms.
    result = Engine(config(), timer).run([Request(0.0, 1000, 5)])
    (done,) = result.finished
    assert (done.first_token_s - done.arrival_s) * 1e3 == pytest.approx(20.0)
    assert (done.finished_s - done.arrival_s) * 1e3 == pytest.approx(60.2)
    assert result.steps == 5
    summary = summarise(result, 10_000)
    assert summary.tpot_ms.mean == pytest.approx(10.05)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget() -> None:
    # Prompt 10,000 with max_num_batched_tokens 4,096: chunks 4,096 + 4,096 + 1,808, three
    # steps of 10 + 40.96, 10 + 40.96 and 10 + 18.08 ms: TTFT = 130 ms.
    result = Engine(config(max_num_batched_tokens=4096), timer).run([Request(0.0, 10_000, 1)])
    (done,) = result.finished
    assert (done.first_token_s - done.arrival_s) * 1e3 == pytest.approx(130.0)


def test_decodes_go_first_and_a_new_prompt_shares_their_step() -> None:
    # A (prompt 100, answer 3) arrives at 0; B (prompt 500, answer 1) at 1 ms, during A's
    # first step (10 + 1 = 11 ms). Step 2 at 11 ms: A decodes (1 token) and B's whole prompt
    # fits the budget left (8,191): 10 + 0.05 + 5 = 15.05 ms, so B's first (and last) token
    # comes at 26.05 ms: TTFT 25.05 ms, of which 10 ms queued.
    result = Engine(config(), timer).run([Request(0.0, 100, 3), Request(0.001, 500, 1)])
    b = next(f for f in result.finished if f.input_tokens == 500)
    assert (b.first_token_s - b.arrival_s) * 1e3 == pytest.approx(25.05)
    assert (b.scheduled_s - b.arrival_s) * 1e3 == pytest.approx(10.0)


def test_the_last_admitted_is_preempted_when_the_pool_runs_out() -> None:
    # Pool of 10 blocks of 16 tokens; A and B, prompt 16 (1 block) and answer 80 each, both
    # admitted at step 1. Each decode step computes one token; a request's 6th block is
    # needed when it computes token 81, at its 65th decode step (16 + 65 = 81), step 66.
    # Both need it then and no block is free (5 + 5 = 10): B, admitted last, is preempted
    # (its 5 blocks freed; A takes one). Once A ends, B recomputes its prompt and the 65
    # tokens it had made, so B ends after A.
    result = Engine(config(num_gpu_blocks=10, max_model_len=96), timer).run(
        [Request(0.0, 16, 80), Request(0.0, 16, 80)]
    )
    assert result.preemptions == 1
    a, b = sorted(result.finished, key=lambda f: f.finished_s)
    assert (a.preempted, b.preempted) == (0, 1)
    assert result.peak_kv_blocks == 10


def test_prefix_cache_hits_skip_whole_blocks_of_the_prompt() -> None:
    # The first request (1,024 tokens, 64 blocks) computes and caches blocks 0-63; the
    # second, an hour later, shares the first 32 blocks (512 tokens) and prefills only the
    # other 512: TTFT 10 + 0.01 x 1,024 = 20.24 ms, then 10 + 0.01 x 512 = 15.12 ms.
    first = tuple(range(64))
    second = tuple(range(32)) + tuple(range(100, 132))
    result = Engine(config(), timer).run(
        [Request(0.0, 1024, 1, first), Request(3600.0, 1024, 1, second)]
    )
    ttfts = [(f.first_token_s - f.arrival_s) * 1e3 for f in result.finished]
    assert ttfts == pytest.approx([20.24, 15.12])


def test_a_full_prompt_hit_still_computes_its_last_token() -> None:
    # Same 1,024 tokens twice: at most (1,024 - 1) // 16 = 63 blocks hit, so the second
    # prefills the last block's 16 tokens: 10 + 0.16 = 10.16 ms.
    hashes = tuple(range(64))
    result = Engine(config(), timer).run(
        [Request(0.0, 1024, 1, hashes), Request(3600.0, 1024, 1, hashes)]
    )
    second = result.finished[1]
    assert (second.first_token_s - second.arrival_s) * 1e3 == pytest.approx(10.16)


@pytest.mark.parametrize("rate", [2.0, 10.0, 40.0])
def test_littles_law_holds_at_every_rate(rate: float) -> None:
    # Little's law: the time-averaged number running = throughput x mean time running
    # (e2e latency less the queue), over the whole run, for any arrival process.
    workload = Workload(
        Lengths.of("input_tokens", {"50": 500, "99": 3000}),
        Lengths.of("output_tokens", 200),
        request_rate=rate,
        num_requests=600,
        seed=7,
    )
    summary = run(config(num_gpu_blocks=200_000), timer, workload)
    assert summary.preemptions == 0  # a request's time running is then one stretch
    running_s = (summary.e2e_latency_ms.mean - summary.queue_time_ms.mean) / 1e3
    assert summary.mean_running == pytest.approx(
        summary.throughput.requests_per_second * running_s, rel=1e-9
    )


def test_saturation_serves_less_than_offered_and_the_queue_grows() -> None:
    # Each request: one 2,000-token prefill (10 + 20 = 30 ms) and 300 decode steps. Capped
    # at 8 running, a step of 8 decodes takes 10.4 ms, so 8 sequences x 1000 / 10.4 = 769
    # tokens/s serve at most 769 / 300 = 2.6 requests/s; 20/s are offered.
    def summary(n: int):  # type: ignore[no-untyped-def]
        workload = Workload(
            Lengths.of("input_tokens", 2000),
            Lengths.of("output_tokens", 300),
            request_rate=20.0,
            num_requests=n,
        )
        return run(config(max_num_seqs=8), timer, workload)

    short, long = summary(200), summary(400)
    assert long.throughput.requests_per_second < 2.6
    assert long.ttft_ms.p99 > 1.8 * short.ttft_ms.p99  # twice the queue, about twice the wait
    assert long.mean_waiting > short.mean_waiting


def test_goodput_counts_requests_within_every_target() -> None:
    # One request alone (the first test): TTFT 20 ms, TPOT 10.05 ms. Within 25 / 11 ms: good.
    result = Engine(config(), timer).run([Request(0.0, 1000, 5)])
    good = summarise(result, 10_000, Targets(ttft_ms=25, tpot_ms=11)).goodput
    bad = summarise(result, 10_000, Targets(ttft_ms=15)).goodput
    assert good is not None
    assert good.fraction == 1.0
    assert bad is not None
    assert bad.fraction == 0.0


def test_requests_longer_than_max_model_len_are_rejected_not_run() -> None:
    result = Engine(config(max_model_len=1000), timer).run(
        [Request(0.0, 900, 200), Request(0.0, 10, 10)]
    )
    assert (result.rejected, len(result.finished)) == (1, 1)


def test_a_workload_names_its_bad_field() -> None:
    with pytest.raises(SimulationError) as caught:
        Workload(Lengths.of("input_tokens", 10), Lengths.of("output_tokens", 10), num_requests=5)
    assert caught.value.field == "workload.request_rate"
    with pytest.raises(SimulationError) as caught:
        Lengths.of("input_tokens", {"p50": 100, "p90": 50})
    assert caught.value.field == "input_tokens"


def test_percentile_lengths_are_drawn_through_their_points() -> None:
    # {50: 1000, 90: 3000}: half the draws at most 1,000 tokens, 90% at most 3,000.
    lengths = Lengths.of("input_tokens", {"50": 1000, "90": 3000})
    rng = random.Random(1)
    draws = sorted(lengths.draw(rng) for _ in range(20_000))
    assert draws[10_000] == pytest.approx(1000, rel=0.02)
    assert draws[18_000] == pytest.approx(3000, rel=0.02)
    assert math.isclose(max(draws), 3000)


def test_a_closed_loop_sends_the_next_request_when_one_ends() -> None:
    # One client, three requests of prompt 1,000 and answer 5: each takes 60.2 ms alone (the
    # first test), and the next is sent when it ends, so the run lasts 3 x 60.2 = 180.6 ms,
    # nobody queues, and 3 / 0.1806 s = 16.6 requests/s are served.
    workload = Workload(
        Lengths.of("input_tokens", 1000),
        Lengths.of("output_tokens", 5),
        max_concurrency=1,
        num_requests=3,
    )
    summary = run(config(), timer, workload)
    assert summary.duration_s * 1e3 == pytest.approx(180.6)
    assert summary.e2e_latency_ms.p99 == pytest.approx(60.2)
    assert summary.queue_time_ms.mean == 0.0
    assert summary.throughput.requests_per_second == pytest.approx(3 / 0.1806)
