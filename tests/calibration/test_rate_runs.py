"""The public request-rate runs (service/calibration/rate_runs.json) are complete and simulable.

Each run records the figures its quoted lines print, names a source, a catalog model and a GPU
the catalog (or the run, inline) describes, and goes through the use case POST /v1/simulations
runs. No test here holds kvplan's error to a bound: `make bench` prints it (bench/rate_runs.py),
since nothing was fitted on these runs.
"""

from __future__ import annotations

import math

import pytest

from service.calibration.rate_runs import (
    METRICS,
    SHAREGPT_MAX_PROMPT_TOKENS,
    STATISTICS,
    RateRun,
    RunError,
    errors,
    lengths,
    load_document,
    load_runs,
    simulate,
    simulation_request,
    uniform_upper,
)
from service.catalog.seed import load_seed, offline_snapshot

RUNS = load_runs()
RAW = {raw["id"]: raw for raw in load_document()["runs"]}
CATALOG = offline_snapshot()


def test_every_run_has_a_source_and_a_quote() -> None:
    document = load_document()
    assert RUNS
    assert len(RAW) == len(RUNS)
    for run in RUNS:
        assert run.source in document["sources"], run.id
        assert document["sources"][run.source]["cite"], run.source
        assert RAW[run.id]["quote"], run.id
    # Every run used ShareGPT, whose lengths the file's `lengths` section says how kvplan draws.
    assert {raw["dataset"] for raw in RAW.values()} == set(document["lengths"])


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_each_run_records_the_figures_its_quote_prints(run: RateRun) -> None:
    quote = RAW[run.id]["quote"]
    for metric, name in METRICS:
        for statistic, word in STATISTICS:
            assert f"{word} {name} (ms): {run.printed(metric, statistic):.2f}" in quote
    assert f"Successful requests: {run.num_prompts} " in quote
    assert f"Total input tokens: {run.total_input_tokens} " in quote
    assert f"Total generated tokens: {run.total_generated_tokens} " in quote
    assert f"Request throughput (req/s): {run.measured['request_throughput']:.2f}" in quote


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_each_run_is_complete(run: RateRun) -> None:
    raw = RAW[run.id]
    assert raw["engine"] == "vllm"
    assert run.engine_version
    assert run.model in CATALOG.models, run.model
    if isinstance(run.gpu, str):
        assert run.gpu in CATALOG.gpus, run.gpu
    else:  # inline: everything the speed model needs for a tensor-parallel layout
        for field in ("memory_bytes", "memory_bandwidth_tb_s", "dense_bf16_tflops"):
            assert run.gpu[field] > 0, field
        assert run.gpu["interconnect_gb_s"] > 0 or run.deployment["tensor_parallel_size"] == 1
    assert raw["gpu_as_run"]
    assert raw["model_as_run"]
    assert raw["gpu_count"] == run.deployment["tensor_parallel_size"]
    assert math.isfinite(run.request_rate)
    assert run.request_rate > 0
    assert run.num_prompts >= 1
    assert run.total_input_tokens >= 4 * run.num_prompts


def test_the_inline_a100_40gb_sxm4_is_the_catalog_card_but_its_link() -> None:
    """The one inline GPU: the catalog a100-40gb's memory, bandwidth and BF16 figure, and the
    SXM4 board's NVLink (300 GB/s, the catalog a100-sxm-80gb's) instead of the PCIe card's."""
    gpus = {g["slug"]: g for g in load_seed("gpus.json")}
    inline = [run.gpu for run in RUNS if not isinstance(run.gpu, str)]
    assert inline
    for gpu in inline:
        for field in ("memory_bytes", "memory_bandwidth_tb_s", "dense_bf16_tflops"):
            assert gpu[field] == gpus["a100-40gb"][field], field
        assert gpu["interconnect_gb_s"] == gpus["a100-sxm-80gb"]["interconnect_gb_s"]


def test_lengths_are_uniform_with_the_runs_own_mean() -> None:
    # surajssd-llm-k8s qps 1: Total input tokens 42659 over 200 requests = 213.295 a prompt;
    # 2 x 213.295 - 4 = 422.59, rounded 423: uniform [4, 423], mean (4 + 423) / 2 = 213.5.
    # Total generated tokens 42722 / 200 = 213.61; 2 x 213.61 - 4 = 423.22 -> 423.
    qps1 = next(r for r in RUNS if r.total_generated_tokens == 42722)
    assert lengths(qps1) == ([[4, 423, 1]], [[4, 423, 1]])
    # torchpipe: 117316 / 500 = 234.632; 2 x 234.632 - 4 = 465.264 -> 465.
    assert uniform_upper(117316, 500, SHAREGPT_MAX_PROMPT_TOKENS) == 465
    # A mean of 3,000 would give 5,996; vLLM's sampler keeps no prompt over 1,024.
    assert uniform_upper(30_000, 10, SHAREGPT_MAX_PROMPT_TOKENS) == 1024


def test_the_error_is_relative_to_the_measured_figure() -> None:
    # Measured 50 ms, kvplan 60 ms: (60 - 50) / 50 = +0.2; kvplan 40 ms: (40 - 50) / 50 = -0.2.
    run = RUNS[0]
    assert RunError(run, "ttft_ms", "mean", 50.0, 60.0).error == pytest.approx(0.2)
    assert RunError(run, "ttft_ms", "mean", 50.0, 40.0).error == pytest.approx(-0.2)


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.id)
def test_each_run_is_simulated_by_the_simulations_use_case(run: RateRun) -> None:
    body = simulation_request(run)
    assert body.workload is not None
    assert body.workload.request_rate == run.request_rate
    assert body.workload.num_requests == run.num_prompts
    answer = simulate(run, CATALOG)
    # Every request fits the context (ShareGPT's are at most 2,048 tokens), so all complete.
    assert answer.completed_requests == run.num_prompts
    assert answer.rejected_requests == 0
    assert answer.engine.engine_version == run.engine_version
    found = errors(run, answer)
    assert {(e.metric, e.statistic) for e in found} == {
        (metric, statistic) for metric, _ in METRICS for statistic, _ in STATISTICS
    }
