"""Plans that honour latency targets (max_tpot_ms, max_ttft_ms and a per-user token rate).

The candidates are two inline GPUs with an H100's memory and the pool of worked example A of
../shared/design/engine-memory.md (28,006 blocks of 2 MiB: (28,006 - 1) // 512 = 54 sequences
of 8,192 tokens per replica of Llama-3.1-8B, bf16 KV), one GPU per node so TP is 1:

* `fast`: 3.35 TB/s, 989 BF16 TFLOPS (an H100 SXM's catalog figures), $1.80 an hour;
* `slow`: half the bandwidth, 1.675 TB/s, the same FLOPS, $1.00 an hour.

The decode step at B sequences of 8,192 tokens is worked by hand from the performance model
(service/sizing/speed/performance.py), as in tests/planning/test_capacity_speed.py: it reads
16,060,522,496 B of weights + B x 1,073,741,824 B of KV and does B x 20,355,489,792 FLOPs, so

    memory  = bytes / (bandwidth x FITTED.bandwidth)
    compute = FLOPs / (989e12 x FITTED.compute)
    step    = larger + (1 - FITTED.overlap) x smaller + FITTED.step_overhead_ms
              + 32 layers x FITTED.layer_overhead_us

which, with the shipped fit (bandwidth 0.84, compute 0.787, overlap 0, 0 ms + 32 x 80.25 us
= 2.568 ms), is 8.275 + 0.4077 B ms on `fast` and 13.983 + 0.7893 B ms on `slow`. The tests
search the largest batch with `step` itself; the figures with the shipped fit are in the
comments.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.planning.schemas import PlanRequestBody
from service.sizing.speed.performance import FITTED
from tests.planning.test_capacity_speed import (
    FLOPS_TOKEN_8B,
    KV_SEQUENCE_8B,
    WEIGHTS_8B,
    overhead_ms,
)

MiB = 1 << 20
FAST_BYTES_PER_S, SLOW_BYTES_PER_S = 3.35e12, 1.675e12
FLOPS_PER_S = 989e12
PEAK = 54


def step_ms(batch: int, bytes_per_s: float) -> float:
    memory = (WEIGHTS_8B + batch * KV_SEQUENCE_8B) / (bytes_per_s * FITTED.bandwidth) * 1e3
    compute = batch * FLOPS_TOKEN_8B / (FLOPS_PER_S * FITTED.compute) * 1e3
    larger, smaller = max(memory, compute), min(memory, compute)
    return larger + (1 - FITTED.overlap) * smaller + overhead_ms(32)


def largest_batch(limit_ms: float, bytes_per_s: float) -> int:
    return max((b for b in range(1, PEAK + 1) if step_ms(b, bytes_per_s) <= limit_ms), default=0)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gpu(name: str, tb_s: float, price: float, memory_bytes: int) -> dict[str, Any]:
    return {
        "memory_bytes": memory_bytes,
        "name": name,
        "price_usd_per_hour": price,
        "max_gpus_per_node": 1,
        "memory_bandwidth_tb_s": tb_s,
        "dense_bf16_tflops": 989,
    }


@pytest.fixture
def question(client: TestClient) -> dict[str, Any]:
    memory = client.get("/v1/gpus/h100-sxm-80gb").json()["memory_bytes"]
    return {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": PEAK,
        "kv_pool_bytes": 28_006 * 2 * MiB,
        "engine_version": "0.20.0",
        "gpus": [gpu("fast", 3.35, 1.8, memory), gpu("slow", 1.675, 1.0, memory)],
        # none kept free (the default keeps 10%), so the worked pool is the plan's
        "headroom_fraction": 0.0,
    }


def plan(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_without_targets_the_cheaper_slower_gpu_wins_and_says_how_fast(
    client: TestClient, question: dict[str, Any]
) -> None:
    answer = plan(client, question)
    best, (other,) = answer["recommendation"], answer["alternatives"]
    # one replica of each holds the 54: $1.00 beats $1.80
    assert (best["gpu"], best["replicas"], other["gpu"], other["replicas"]) == (
        "slow",
        1,
        "fast",
        1,
    )
    # each decodes all 54 at once: 13.983 + 0.7893 x 54 = 56.60 ms (slow), 30.29 ms (fast)
    assert best["decode_ms_per_token"] == pytest.approx(step_ms(54, SLOW_BYTES_PER_S), abs=1e-3)
    assert other["decode_ms_per_token"] == pytest.approx(step_ms(54, FAST_BYTES_PER_S), abs=1e-3)
    assert best["output_tokens_per_second"] == pytest.approx(
        54_000 / step_ms(54, SLOW_BYTES_PER_S), abs=0.1
    )
    assert best["performance_bound"] == "bandwidth"


def test_a_tpot_target_shrinks_the_batch_and_the_cheapest_plan_that_meets_it_wins(
    client: TestClient, question: dict[str, Any]
) -> None:
    answer = plan(client, {**question, "max_tpot_ms": 25})
    # fast: (25 - 8.275) / 0.4077 = 41.02 -> 41 a replica, ceil(54 / 41) = 2 replicas, $3.60;
    # slow: (25 - 13.983) / 0.7893 = 13.96 -> 13, ceil(54 / 13) = 5 replicas, $5.00.
    fast, slow = largest_batch(25, FAST_BYTES_PER_S), largest_batch(25, SLOW_BYTES_PER_S)
    assert (fast, slow) == (41, 13)
    best, (other,) = answer["recommendation"], answer["alternatives"]
    assert (best["gpu"], best["replicas"]) == ("fast", cdiv(PEAK, fast))
    assert (other["gpu"], other["replicas"]) == ("slow", cdiv(PEAK, slow))
    assert best["cost_per_hour_usd"] == pytest.approx(1.8 * 2)
    assert (best["max_num_seqs"], best["sequences_per_replica"]) == (fast, fast)
    assert f"--max-num-seqs {fast}" in best["engine_flags"]["vllm"]
    assert f"--max-running-requests {fast}" in best["engine_flags"]["sglang"]
    # at the peak each of the 2 replicas runs ceil(54 / 2) = 27: 8.275 + 0.4077 x 27 = 19.28 ms
    assert best["decode_ms_per_token"] == pytest.approx(step_ms(27, FAST_BYTES_PER_S), abs=1e-3)
    assert best["decode_ms_per_token"] <= 25
    # 30.29 ms at 54, over 25: the warning says why the batch is smaller
    assert (
        f"decode at 54 sequences takes {step_ms(54, FAST_BYTES_PER_S):.1f} ms per token, over "
        "the 25 ms max_tpot_ms target; max_num_seqs 41"
    ) in " ".join(best["warnings"])


def test_a_gpu_too_slow_for_one_sequence_is_rejected_with_the_reason(
    client: TestClient, question: dict[str, Any]
) -> None:
    answer = plan(client, {**question, "max_tpot_ms": 10})
    # slow at 1 sequence: 13.983 + 0.789 = 14.8 ms > 10; fast: (10 - 8.275) / 0.4077 = 4.2 -> 4
    (rejected,) = answer["rejected"]
    assert (rejected["gpu"], rejected["code"]) == ("slow", "tpot-over-target")
    assert rejected["reason"] == (
        f"decode at 1 sequence takes {step_ms(1, SLOW_BYTES_PER_S):.1f} ms per token, over the "
        "10 ms max_tpot_ms target"
    )
    best = answer["recommendation"]
    assert largest_batch(10, FAST_BYTES_PER_S) == 4
    assert (best["gpu"], best["max_num_seqs"], best["replicas"]) == ("fast", 4, cdiv(PEAK, 4))


def test_too_many_replicas_for_the_target_is_rejected_with_the_reason(
    client: TestClient, question: dict[str, Any]
) -> None:
    # fast at 4 a replica needs 14 replicas; max_replicas 10 turns it down
    answer = plan(client, {**question, "max_tpot_ms": 10, "max_replicas": 10})
    assert answer["recommendation"] is None
    reasons = {r["gpu"]: (r["code"], r["reason"]) for r in answer["rejected"]}
    code, reason = reasons["fast"]
    assert code == "too-many-replicas"
    assert reason.endswith(
        "at 4 sequences per replica the peak needs 14 replicas of 1 GPUs, more than max_replicas 10"
    )
    assert reason.startswith("decode at 54 sequences takes")


def test_a_tokens_per_second_target_is_a_step_of_1000_over_it(
    client: TestClient, question: dict[str, Any]
) -> None:
    # 40 tokens/s per user is one token every 1000 / 40 = 25 ms: the plan of max_tpot_ms 25
    by_rate = plan(client, {**question, "min_output_tokens_per_second_per_user": 40})
    by_tpot = plan(client, {**question, "max_tpot_ms": 25})
    assert by_rate["recommendation"]["replicas"] == by_tpot["recommendation"]["replicas"] == 2
    assert by_rate["recommendation"]["max_num_seqs"] == 41
    # 100 tokens/s is 10 ms a token: `slow` takes 14.8 ms for one sequence, 67.7 tokens/s
    answer = plan(client, {**question, "min_output_tokens_per_second_per_user": 100})
    (rejected,) = answer["rejected"]
    assert rejected["code"] == "tokens-per-second-under-target"
    assert rejected["reason"] == (
        f"decode at 1 sequence gives {1e3 / step_ms(1, SLOW_BYTES_PER_S):.1f} output tokens/s "
        "per user, under the 100 min_output_tokens_per_second_per_user target"
    )


def test_a_ttft_target_rejects_a_layout_whose_prefill_is_too_slow(
    client: TestClient, question: dict[str, Any]
) -> None:
    # One prompt of 2,048 tokens: 33,991,998,570,496 FLOPs (test_capacity_speed) and the
    # weights read once; 43.67 ms of compute at the shipped fit, plus reading 16,060,522,496 B:
    # 5.71 ms (fast), 11.41 ms (slow), plus 2.568 ms: 51.9 ms and 57.7 ms, one each side of 55.
    flops = 33_991_998_570_496

    def prefill_ms(bytes_per_s: float) -> float:
        memory = WEIGHTS_8B / (bytes_per_s * FITTED.bandwidth) * 1e3
        compute = flops / (FLOPS_PER_S * FITTED.compute) * 1e3
        larger, smaller = max(memory, compute), min(memory, compute)
        return larger + (1 - FITTED.overlap) * smaller + overhead_ms(32)

    assert prefill_ms(FAST_BYTES_PER_S) < 55 < prefill_ms(SLOW_BYTES_PER_S)
    answer = plan(client, {**question, "max_ttft_ms": 55, "avg_prompt_tokens": 2048})
    best = answer["recommendation"]
    assert (best["gpu"], best["replicas"]) == ("fast", 1)
    assert best["prefill_ms"] == pytest.approx(prefill_ms(FAST_BYTES_PER_S), abs=1e-3)
    (rejected,) = answer["rejected"]
    assert (rejected["gpu"], rejected["code"]) == ("slow", "ttft-over-target")
    assert rejected["reason"] == (
        f"the prefill of one 2,048-token prompt takes {prefill_ms(SLOW_BYTES_PER_S):.1f} ms, "
        "over the 55 ms max_ttft_ms target"
    )


def test_a_gpu_without_speed_figures_cannot_be_checked_against_targets(
    client: TestClient, question: dict[str, Any]
) -> None:
    blind = {k: v for k, v in question["gpus"][1].items() if k != "memory_bandwidth_tb_s"}
    body = {**question, "gpus": [question["gpus"][0], blind], "max_tpot_ms": 100}
    answer = plan(client, body)
    (rejected,) = answer["rejected"]
    assert rejected["code"] == "no-performance-figures"
    assert "slow has no memory_bandwidth_tb_s figure" in rejected["reason"]
    # without a target it is planned as before, its speed null and the warning saying why
    answer = plan(client, {**question, "gpus": [blind]})
    best = answer["recommendation"]
    assert best["decode_ms_per_token"] is None
    assert any("slow has no memory_bandwidth_tb_s figure" in w for w in best["warnings"])


def test_the_explanation_shows_the_targets_and_the_speed_at_the_peaks_share(
    client: TestClient, question: dict[str, Any]
) -> None:
    answer = plan(client, {**question, "max_tpot_ms": 25})
    performance = answer["explanation"]["performance"]
    assert performance["decode"]["tokens"] == 27
    assert performance["decode_ms_per_token"] == pytest.approx(
        step_ms(27, FAST_BYTES_PER_S), abs=1e-3
    )
    targets = performance["latency_targets"]
    assert targets["max_tpot_ms"] == 25
    assert targets["sequences_per_replica"] == 41
    assert targets["outcome"].endswith(
        "max_num_seqs 41, the largest batch that meets every target (the KV cache holds 54), "
        "on 2 replicas instead of 1"
    )
    assert list(answer["explanation"])[-1] == "replicas"


def test_get_plans_takes_the_targets_as_parameters(client: TestClient) -> None:
    # the catalog H100's figures are `fast`'s: the same 41 a replica, on 2 replicas
    params = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": PEAK,
        "kv_pool_bytes": 28_006 * 2 * MiB,
        "engine_version": "0.20.0",
        "gpus": "h100-sxm-80gb",
        "max_gpus_per_node": 1,
        "max_tpot_ms": 25,
        "headroom_fraction": 0,
    }
    answer = client.get("/v1/plans", params=params).json()
    assert (answer["recommendation"]["replicas"], answer["recommendation"]["max_num_seqs"]) == (
        2,
        41,
    )
    text = client.get("/v1/plans", params={**params, "field": "decode_ms_per_token"}).text
    assert float(text) == pytest.approx(step_ms(27, FAST_BYTES_PER_S), abs=1e-3)


def test_every_post_field_is_a_get_parameter(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    declared = {p["name"] for p in spec["paths"]["/v1/plans"]["get"]["parameters"]}
    assert set(PlanRequestBody.model_fields) <= declared
    assert {"max_tpot_ms", "max_ttft_ms", "min_output_tokens_per_second_per_user"} <= declared
