"""Public request-rate runs (rate_runs.json) and kvplan's simulation of each.

Each run is a `vllm bench serve` (benchmarks/benchmark_serving.py) run at a finite Poisson
request rate, with the figures it printed and its source in the file. `simulate` asks the use
case POST /v1/simulations runs (`service.simulations.service.simulation`) the same question:
the deployment the run served, its rate and number of prompts, and the lengths the file's
`lengths` section derives from the run's own token totals. Nothing here, or anywhere in kvplan,
is fitted on these runs; `make bench` prints the error (bench/rate_runs.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..catalog.snapshot import CatalogSnapshot
from ..planning.service import CapacityQuestion
from ..simulations import service as simulations
from ..simulations.schemas import SimulationAnswer, SimulationRequest

# vLLM's ShareGPT sampler (vllm benchmarks/benchmark_dataset.py `ShareGPTDataset.sample` and
# `is_valid_sequence`, v0.8.x: min_len 4, max_prompt_len 1024, max_total_len 2048): the
# shortest prompt or answer it keeps, the longest prompt, and the longest prompt + answer.
SHAREGPT_MIN_TOKENS = 4
SHAREGPT_MAX_PROMPT_TOKENS = 1024
SHAREGPT_MAX_TOTAL_TOKENS = 2048
# The statistics a run prints and the file records, in vllm bench's words and kvplan's.
STATISTICS = (("mean", "Mean"), ("p50", "Median"), ("p99", "P99"))
METRICS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"))
SEED = 0


@dataclass(frozen=True, slots=True)
class RateRun:
    """One published run: where it comes from, what it served and what it printed."""

    id: str
    source: str
    engine_version: str
    model: str
    gpu: str | dict[str, Any]  # a catalog slug, or the GPU inline where the catalog has none
    deployment: dict[str, Any]
    request_rate: float
    num_prompts: int
    total_input_tokens: int
    total_generated_tokens: int
    measured: dict[str, Any]

    def printed(self, metric: str, statistic: str) -> float:
        """A latency figure the run printed (metric ttft_ms or tpot_ms; mean, p50 or p99)."""
        return float(self.measured[metric][statistic])


def load_document() -> dict[str, Any]:
    text = resources.files("service.calibration").joinpath("rate_runs.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def load_runs() -> list[RateRun]:
    return [
        RateRun(
            id=raw["id"],
            source=raw["source"],
            engine_version=raw["engine_version"],
            model=raw["model"],
            gpu=raw["gpu"] if isinstance(raw["gpu"], str) else dict(raw["gpu"]),
            deployment=dict(raw["deployment"]),
            request_rate=float(raw["request_rate"]),
            num_prompts=int(raw["num_prompts"]),
            total_input_tokens=int(raw["total_input_tokens"]),
            total_generated_tokens=int(raw["total_generated_tokens"]),
            measured=raw["measured"],
        )
        for raw in load_document()["runs"]
    ]


def uniform_upper(total_tokens: int, requests: int, cap: int) -> int:
    """The top of a uniform [4, top] length whose mean is the run's mean: 2 x mean - 4, at most
    `cap` (the file's `lengths.sharegpt`: the shape is kvplan's assumption, the mean the run's)."""
    mean = total_tokens / requests
    return max(SHAREGPT_MIN_TOKENS, min(cap, round(2 * mean - SHAREGPT_MIN_TOKENS)))


def lengths(run: RateRun) -> tuple[list[list[int]], list[list[int]]]:
    """The prompt and answer lengths as one-bin histograms, as POST /v1/simulations takes them."""
    prompt_top = uniform_upper(run.total_input_tokens, run.num_prompts, SHAREGPT_MAX_PROMPT_TOKENS)
    answer_top = uniform_upper(
        run.total_generated_tokens,
        run.num_prompts,
        SHAREGPT_MAX_TOTAL_TOKENS - SHAREGPT_MIN_TOKENS,
    )
    return [[SHAREGPT_MIN_TOKENS, prompt_top, 1]], [[SHAREGPT_MIN_TOKENS, answer_top, 1]]


def simulation_request(run: RateRun, seed: int = SEED) -> SimulationRequest:
    """The run as a POST /v1/simulations body: its deployment, rate, prompts and lengths."""
    prompts, answers = lengths(run)
    return SimulationRequest.model_validate(
        {
            "model": run.model,
            "gpu": run.gpu,
            "engine": "vllm",
            "engine_version": run.engine_version,
            **run.deployment,
            "workload": {
                "request_rate": run.request_rate,
                "num_requests": run.num_prompts,
                "input_tokens": prompts,
                "output_tokens": answers,
                "seed": seed,
            },
        }
    )


def simulate(run: RateRun, catalog: CatalogSnapshot, seed: int = SEED) -> SimulationAnswer:
    """kvplan's answer to the run's question, by the use case POST /v1/simulations runs."""
    body = simulation_request(run, seed)
    return simulations.simulation(
        CapacityQuestion.from_body(body), simulations.traffic_of(body), None, catalog
    )


@dataclass(frozen=True, slots=True)
class RunError:
    """One printed figure beside kvplan's: (predicted - measured) / measured."""

    run: RateRun
    metric: str
    statistic: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured


def errors(run: RateRun, answer: SimulationAnswer) -> list[RunError]:
    """Every figure the run printed (TTFT and TPOT: mean, median, P99) beside kvplan's."""
    out = []
    for metric, _ in METRICS:
        simulated = getattr(answer, metric)
        for statistic, _ in STATISTICS:
            predicted = getattr(simulated, statistic)
            if predicted is not None:
                out.append(
                    RunError(run, metric, statistic, run.printed(metric, statistic), predicted)
                )
    return out
