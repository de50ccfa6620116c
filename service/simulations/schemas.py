"""POST /v1/simulations: the question (a capacity question plus a workload or a trace) and
the answer, with the field docs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..planning.schemas import CapacityQuery, CapacityRequest

MAX_SIMULATED_REQUESTS = 200_000
MAX_DURATION_S = 86_400.0
MAX_TRACE_BYTES = 16 * 2**20

Length = int | dict[str, int] | list[list[float]]
LENGTH_DOC = (
    'Tokens per request: a number; percentiles such as `{"50": 2000, "90": 5000, "99": '
    "12000}` (drawn through those points, never beyond the highest); or a histogram "
    "`[[low, high, weight], ...]` (a bin by weight, then uniform in it)."
)


class Targets(BaseModel):
    """Goodput's targets (each optional): a request within all of them is good."""

    max_ttft_ms: float | None = Field(None, gt=0, description="Time to first token, ms.")
    max_tpot_ms: float | None = Field(None, gt=0, description="Time per output token, ms.")
    max_e2e_latency_ms: float | None = Field(None, gt=0, description="End-to-end latency, ms.")


class WorkloadIn(BaseModel):
    """Synthetic traffic: arrivals, lengths and how many requests."""

    model_config = ConfigDict(extra="forbid")

    request_rate: float | None = Field(
        None, gt=0, description="Poisson arrivals, requests per second (or max_concurrency)."
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=100_000,
        description="A closed loop: this many clients, each sending its next request when its "
        "last one ends (as `vllm bench serve --max-concurrency`).",
    )  # fmt: skip
    input_tokens: Length = Field(..., description=LENGTH_DOC)
    output_tokens: Length = Field(..., description=LENGTH_DOC)
    num_requests: int | None = Field(None, ge=1, le=MAX_SIMULATED_REQUESTS)
    duration_s: float | None = Field(
        None, gt=0, le=MAX_DURATION_S, description="Arrivals for this long (with request_rate)."
    )
    prefix_cache_hit_rate: float = Field(
        0.0, ge=0, le=1,
        description="The share of each prompt that is a prefix every request shares (whole "
        "blocks); the engine's prefix cache decides what hits.",
    )  # fmt: skip
    seed: int = Field(0, description="The random generator's seed: the same seed, the same run.")


class TraceRowIn(BaseModel):
    """One request of a trace, in kvplan's columns."""

    model_config = ConfigDict(extra="forbid")

    arrival_s: float = Field(..., ge=0)
    input_tokens: int = Field(..., ge=1)
    output_tokens: int = Field(..., ge=1)
    hash_ids: list[int] | None = Field(
        None, description="Prefix-aware block hashes, one per 512 tokens (Mooncake's)."
    )


class SimulationRequest(CapacityRequest):
    """POST /v1/simulations (JSON): the deployment as POST /v1/capacity takes it, plus
    `workload` or `trace`, and goodput's optional targets."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "llama-3.1-8b-instruct",
                    "gpu": "h100-sxm",
                    "max_model_len": 8192,
                    "workload": {
                        "request_rate": 4,
                        "input_tokens": {"50": 2000, "99": 6000},
                        "output_tokens": 300,
                        "num_requests": 2000,
                    },
                    "targets": {"max_ttft_ms": 2000, "max_tpot_ms": 50},
                }
            ]
        },
    )

    workload: WorkloadIn | None = Field(None, description="Synthetic traffic (or `trace`).")
    trace: list[TraceRowIn] | None = Field(
        None, max_length=MAX_SIMULATED_REQUESTS, description="Requests as rows (or `workload`)."
    )
    targets: Targets | None = None


class SimulationQuery(CapacityQuery):
    """POST /v1/simulations with a trace as the body (`text/csv`, Mooncake's JSON lines): the
    deployment in the query string, as GET /v1/capacity takes it."""

    max_ttft_ms: float | None = Field(None, gt=0)
    max_tpot_ms: float | None = Field(None, gt=0)
    max_e2e_latency_ms: float | None = Field(None, gt=0)


class DistributionOut(BaseModel):
    """Over completed requests (null: none to measure)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class ThroughputOut(BaseModel):
    requests_per_second: float
    output_tokens_per_second: float


class GoodputOut(BaseModel):
    requests_per_second: float = Field(description="Completed requests within every target, per s.")
    fraction: float = Field(description="Of completed requests, the share within every target.")


class SampleOut(BaseModel):
    time_s: float
    running: int
    waiting: int
    kv_usage: float = Field(description="Share of the KV pool's blocks in use.")


class EngineOut(BaseModel):
    """The replica simulated: its pool and its scheduler's limits, as vLLM runs them."""

    engine_version: str | None
    num_gpu_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_prefix_caching: bool


class SimulationAnswer(BaseModel):
    """One replica under the traffic: latency percentiles, throughput, the engine's load."""

    model: str
    gpu: str | None
    engine: EngineOut
    traffic: Literal["workload", "trace"]
    trace_format: str | None = Field(None, description="azure, burstgpt, mooncake or kvplan.")
    skipped_rows: int = Field(0, description="Trace rows without output (failed requests).")
    completed_requests: int
    rejected_requests: int = Field(description="Longer than max_model_len: never run.")
    duration_s: float = Field(description="Simulated time from 0 to the last token.")
    ttft_ms: DistributionOut
    tpot_ms: DistributionOut
    e2e_latency_ms: DistributionOut
    queue_time_ms: DistributionOut
    throughput: ThroughputOut
    goodput: GoodputOut | None
    mean_running: float
    mean_waiting: float
    mean_kv_usage: float
    peak_kv_usage: float
    preemptions: int
    steps: int = Field(description="Engine steps (forward passes) simulated.")
    time_series: list[SampleOut]
    warnings: list[str]
