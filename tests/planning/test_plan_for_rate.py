"""Plans for a rate (issue 23 item 2): POST /v1/plans and `kvplan plan` with a workload.

The replica search is checked on a replica whose step times are written by hand (a StepTable
of constants), so its saturation point is arithmetic; the whole plan through HTTP and the CLI.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from service.planning.rate import (
    Means,
    Target,
    analytic_replicas,
    choose_replicas,
    cost_per_million,
    misses,
)
from service.simulation import EngineConfig, Lengths, StepTable, Summary, Workload, run

# A replica written by hand: every decode step 20 ms whatever the batch and context; a prefill
# of P tokens 10 + (P - 1) x 0.01 ms (linear between the two points); at most 4 sequences.
CONFIG = EngineConfig(
    num_gpu_blocks=10_000,
    block_size=16,
    max_num_seqs=4,
    max_num_batched_tokens=2048,
    max_model_len=4096,
    enable_prefix_caching=False,
)
TABLE = StepTable(
    batches=(1, 4),
    contexts=(16, 4096),
    decode_ms=((20.0, 20.0), (20.0, 20.0)),
    prompts=(1, 4096),
    prefill_ms=(10.0, 10.0 + 4095 * 0.01),
)
WORKLOAD = Workload(
    Lengths.of("input_tokens", 1000),
    Lengths.of("output_tokens", 100),
    request_rate=3.0,
    num_requests=2000,
)
TARGETS = (Target("ttft_ms", "99", 5000.0), Target("tpot_ms", "99", 100.0))


def test_cost_per_million_tokens_is_the_hour_over_the_hours_tokens() -> None:
    # $6.00 an hour (2 GPUs at $3.00) serving 20 requests/s x 300 output tokens = 6,000
    # tokens/s = 21,600,000 tokens an hour: 6 / 21.6 = $0.2777... per million.
    assert cost_per_million(6.0, 20 * 300) == pytest.approx(6 / 21.6)
    # the same hour over the input tokens, 20 x 2,000 = 40,000/s = 144,000,000 an hour:
    # 6 / 144 = $0.041666... per million.
    assert cost_per_million(6.0, 20 * 2000) == pytest.approx(6 / 144)
    assert cost_per_million(None, 6000) is None  # unpriced: no cost per token


def test_one_replica_saturates_two_meet_the_targets() -> None:
    # The analytic pass: a request of 1,000 + 100 tokens holds ceil(1100 / 16) = 69 blocks,
    # the pool holds 10,000 // 69 = 144 such, max_num_seqs caps the batch at 4; decode(4) =
    # 20 ms <= the 100 ms TPOT target. prefill(1000) = 10 + 999 x 0.01 = 19.99 ms. A request
    # holds a replica 19.99 + 100 x 20 / 4 = 519.99 ms: one replica serves 1000 / 519.99 =
    # 1.923 requests/s. At 3 requests/s: 3 x 0.51999 / 0.8 = 1.95 -> 2 replicas; Little's law:
    # 3 x (19.99 + 100 x 20) / 1000 = 6.06 in flight over batches of 4 -> 1.51 -> 2.
    means = Means(1000.0, 100.0)
    assert analytic_replicas(TABLE, CONFIG, 3.0, means, TARGETS) == 2

    def at(replicas: int) -> Summary:
        return run(CONFIG, TABLE, dataclasses.replace(WORKLOAD, request_rate=3.0 / replicas))

    # One replica: 4 sequences each at least 100 decode steps of 20 ms = 2 s, so it finishes at
    # most 4 / 2 = 2 requests/s against 3 offered: the queue grows through the run and p99 TTFT
    # with it (2,000 arrivals over ~667 s, a backlog of at least 1 request/s).
    one = at(1)
    assert one.throughput.requests_per_second < 2.0
    assert one.ttft_ms.p99 > 60_000
    assert misses(one, TARGETS)
    # Two: 1.5 requests/s each, 1.5 / 2 = 75% of what a replica finishes: the targets hold, and
    # the search, started at the analytic 2, tries 1, sees it miss, and keeps 2.
    tried: list[int] = []

    def counted(replicas: int) -> Summary:
        tried.append(replicas)
        return at(replicas)

    outcome = choose_replicas(counted, 2, TARGETS, max_replicas=16)
    assert not isinstance(outcome, str)
    replicas, summary = outcome
    assert replicas == 2
    assert tried == [2, 1]
    assert summary.ttft_ms.p99 <= 5000
    assert summary.tpot_ms.p99 <= 100
    # From an analytic 1 the search climbs: 1 misses, 1 + max(1, 1 // 4) = 2 meets.
    from_one = choose_replicas(at, 1, TARGETS, max_replicas=16)
    assert not isinstance(from_one, str)
    assert from_one[0] == 2


def test_a_target_no_replica_count_meets_is_said() -> None:
    # decode(1) = 20 ms > a 10 ms TPOT target: more replicas never shorten a step.
    reason = analytic_replicas(
        TABLE, CONFIG, 3.0, Means(1000.0, 100.0), (Target("tpot_ms", "99", 10.0),)
    )
    assert reason == "tpot_p99_ms: one sequence's decode step takes 20.0 ms"


RATE_BODY = {
    "model": "llama-3.1-8b-instruct",
    "max_model_len": 8192,
    "gpus": ["h100-sxm-80gb"],
    "workload": {"request_rate": 20, "input_tokens": 2000, "output_tokens": 300},
    "ttft_p99_ms": 2000,
    "tpot_p99_ms": 50,
}


def test_a_plan_for_a_rate_over_http(client: TestClient) -> None:
    response = client.post("/v1/plans", json=RATE_BODY)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["request_rate"] == 20
    assert answer["peak_concurrency"] is None
    best = answer["recommendation"]
    # every request is 2,000 in and 300 out: 20 x 300 = 6,000 output tokens/s
    assert best["output_tokens_per_second_at_rate"] == 6000
    assert best["request_rate_per_replica"] == pytest.approx(20 / best["replicas"])
    cost = best["cost_per_hour_usd"]
    assert cost == pytest.approx(best["price_usd_per_hour"] * best["total_gpus"])
    # cost / (6,000 x 3,600 / 10^6 = 21.6 million tokens an hour); input: 20 x 2,000 x 3,600
    # = 144 million an hour
    assert best["cost_per_million_output_tokens_usd"] == pytest.approx(cost / 21.6, abs=1e-4)
    assert best["cost_per_million_input_tokens_usd"] == pytest.approx(cost / 144, abs=1e-4)
    assert best["ttft_ms"]["p99"] <= 2000
    assert best["tpot_ms"]["p99"] <= 50
    assert set(best["e2e_latency_ms"]) == {"mean", "p50", "p90", "p99"}
    options = [best, *answer["alternatives"]]
    per_million = [o["cost_per_million_output_tokens_usd"] for o in options]
    assert per_million == sorted(per_million)  # ranked by cost per million output tokens
    # one replica fewer misses a target: the simulation, not the analytic pass, said so
    if best["replicas"] > 1:
        assert best["replicas"] * best["request_rate_per_replica"] == pytest.approx(20)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"peak_concurrency": 64}, "peak_concurrency"),
        ({"max_tpot_ms": 50}, "max_tpot_ms"),
        ({"avg_prompt_tokens": 2000}, "avg_prompt_tokens"),
        ({"rank_by": "gpu_count"}, "rank_by"),
        ({"engine": "trtllm"}, "engine"),
        ({"ttft_p99_ms": None, "tpot_p99_ms": None}, "ttft_p99_ms"),
        (
            {"workload": {"max_concurrency": 8, "input_tokens": 10, "output_tokens": 10}},
            "workload.request_rate",
        ),
    ],
)
def test_what_does_not_combine_with_a_workload_is_refused_by_name(
    client: TestClient, change: dict[str, object], field: str
) -> None:
    body = {k: v for k, v in {**RATE_BODY, **change}.items() if v is not None}
    response = client.post("/v1/plans", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


def test_a_plan_for_a_rate_on_sglang_simulates_sglang_and_pastes_its_flags(
    client: TestClient,
) -> None:
    # engine=sglang: every candidate is one SGLang replica stepped by SGLang's scheduler, at
    # the --max-running-requests its flags paste; the answer pastes SGLang's flags only.
    response = client.post("/v1/plans", json={**RATE_BODY, "engine": "sglang"})
    assert response.status_code == 200, response.text
    answer = response.json()
    best = answer["recommendation"]
    assert answer["engine"] == "sglang"
    assert set(best["engine_flags"]) == {"sglang"}
    assert f"--max-running-requests {best['max_num_seqs']}" in best["engine_flags"]["sglang"]
    assert best["ttft_ms"]["p99"] <= 2000
    assert best["tpot_ms"]["p99"] <= 50
    vllm = client.post("/v1/plans", json=RATE_BODY).json()["recommendation"]
    assert set(vllm["engine_flags"]) == {"vllm"}


def test_a_target_without_a_workload_is_refused_by_name(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b-instruct", "max_model_len": 8192, "ttft_p99_ms": 2000}
    response = client.post("/v1/plans", json={**body, "peak_concurrency": 8})
    assert response.status_code == 422
    assert response.json()["field"] == "ttft_p99_ms"
    neither = client.post("/v1/plans", json=body | {"ttft_p99_ms": None})
    assert neither.status_code == 422
    assert neither.json()["field"] == "peak_concurrency"


def test_a_plan_for_a_rate_on_sglang_refuses_vllms_token_budget(client: TestClient) -> None:
    # SGLang's scheduler has no max_num_batched_tokens (it chunks by chunked_prefill_size):
    # a plan for a rate on it would simulate and paste flags without the budget asked
    body = {**RATE_BODY, "engine": "sglang", "max_num_batched_tokens": 4096}
    response = client.post("/v1/plans", json=body)
    assert (response.status_code, response.json()["field"]) == (422, "max_num_batched_tokens")


@pytest.mark.parametrize("engine_name", ["vllm", "sglang"])
def test_the_shell_and_http_give_the_same_plan_for_a_rate(
    client: TestClient, capsys: pytest.CaptureFixture[str], engine_name: str
) -> None:
    code = main(
        [
            "plan", "--offline", "--model", "llama-3.1-8b-instruct", "--max-model-len", "8192",
            "--gpu", "h100-sxm-80gb", "--rate", "20", "--input-tokens", "2000",
            "--output-tokens", "300", "--ttft-p99-ms", "2000", "--tpot-p99-ms", "50",
            "--engine", engine_name, "--format", "json",
        ]
    )  # fmt: skip
    assert code == 0
    shell = json.loads(capsys.readouterr().out)
    http = client.post("/v1/plans", json={**RATE_BODY, "engine": engine_name}).json()
    for name in ("replicas", "cost_per_million_output_tokens_usd", "ttft_ms", "tpot_ms"):
        assert shell["recommendation"][name] == http["recommendation"][name]
    assert set(shell["recommendation"]["engine_flags"]) == {engine_name}
    assert math.isclose(shell["request_rate"], 20)


def test_get_refuses_a_workloads_fields_given_one_by_one(client: TestClient) -> None:
    # `request_rate=20&input_tokens=2000` beside a peak was ignored (said only in a header) and
    # the peak planned; GET takes the workload as one JSON text, and says so by name
    query = {
        "model": "llama-3.1-8b-instruct",
        "max_model_len": 8192,
        "gpus": "h100-sxm-80gb",
        "peak_concurrency": 4,
    }
    for name, value in (("request_rate", 20), ("input_tokens", 2000), ("num_requests", 50)):
        refused = client.get("/v1/plans", params={**query, name: value})
        assert (refused.status_code, refused.json()["field"]) == (422, name)
        assert "workload=" in refused.json()["detail"]
    assert client.get("/v1/plans", params=query).status_code == 200


def test_get_takes_the_workload_as_json_text_and_answers_as_post(client: TestClient) -> None:
    query = {
        "model": "llama-3.1-8b-instruct",
        "max_model_len": 8192,
        "gpus": "h100-sxm-80gb",
        "workload": json.dumps(RATE_BODY["workload"]),
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 50,
    }
    got = client.get("/v1/plans", params=query)
    assert got.status_code == 200, got.text
    posted = client.post("/v1/plans", json=RATE_BODY).json()
    for name in ("replicas", "cost_per_million_output_tokens_usd", "ttft_ms", "tpot_ms"):
        assert got.json()["recommendation"][name] == posted["recommendation"][name]
    # a CSV of the plan names each percentile as its target is named
    table = client.get("/v1/plans", params={**query, "format": "csv"})
    header = table.text.splitlines()[0].split(",")
    assert {"ttft_p99_ms", "tpot_p99_ms", "e2e_latency_p50_ms"} <= set(header)
    bad = client.get("/v1/plans", params={**query, "workload": "{not json"})
    assert bad.status_code == 422
    assert "workload" in bad.text
