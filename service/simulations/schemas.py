"""POST /v1/simulations: the question (a capacity question plus a workload or a trace) and
the answer, with the field docs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..planning.schemas import (  # moved there: a plan for a rate takes them too
    MAX_SIMULATED_REQUESTS,
    CapacityQuery,
    CapacityRequest,
    DistributionOut,
    EngineName,
    SpeedCalibratedFrom,
    WorkloadIn,
)

MAX_TRACE_BYTES = 16 * 2**20


class Targets(BaseModel):
    """Goodput's targets (each optional): a request within all of them is good."""

    max_ttft_ms: float | None = Field(None, gt=0, description="Time to first token, ms.")
    max_tpot_ms: float | None = Field(None, gt=0, description="Time per output token, ms.")
    max_e2e_latency_ms: float | None = Field(None, gt=0, description="End-to-end latency, ms.")


class TraceRowIn(BaseModel):
    """One request of a trace, in kvplan's columns."""

    model_config = ConfigDict(extra="forbid")

    arrival_s: float = Field(..., ge=0, description="When the request arrives, s from 0.")
    input_tokens: int = Field(..., ge=1, description="Its prompt, tokens.")
    output_tokens: int = Field(..., ge=1, description="Its answer, tokens (max_tokens).")
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

    engine: EngineName = Field(
        "vllm",
        description="Whose scheduler steps the replica, and whose memory arithmetic sizes its "
        "pool: `vllm` (its V1 scheduler) or `sglang`; `trtllm`'s scheduler is not simulated "
        "(422, `engine`).",
    )
    workload: WorkloadIn | None = Field(None, description="Synthetic traffic (or `trace`).")
    trace: list[TraceRowIn] | None = Field(
        None, max_length=MAX_SIMULATED_REQUESTS, description="Requests as rows (or `workload`)."
    )
    targets: Targets | None = Field(
        None, description="Goodput's targets: the answer's `goodput` counts requests within them."
    )


class SimulationQuery(CapacityQuery):
    """POST /v1/simulations with a trace as the body (`text/csv`, Mooncake's JSON lines): the
    deployment in the query string, as GET /v1/capacity takes it."""

    max_ttft_ms: float | None = Field(None, gt=0)
    max_tpot_ms: float | None = Field(None, gt=0)
    max_e2e_latency_ms: float | None = Field(None, gt=0)


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
    """The replica simulated: its pool and its scheduler's limits, as its engine runs them."""

    engine: Literal["vllm", "sglang"] = Field(
        description="Whose scheduler was stepped: vLLM's V1 scheduler or SGLang's."
    )
    engine_version: str | None
    num_gpu_blocks: int = Field(
        description="The pool in blocks of block_size tokens (SGLang: its max_total_num_tokens "
        "in the simulator's blocks, 16 tokens at page_size 1, its page otherwise)."
    )
    block_size: int
    max_num_seqs: int = Field(description="vLLM max_num_seqs; SGLang max_running_requests.")
    max_num_batched_tokens: int | None = Field(
        description="vLLM: the tokens one step computes. Null for SGLang (chunked_prefill_size)."
    )
    chunked_prefill_size: int | None = Field(
        None, description="SGLang: a prefill batch's chunk, tokens (its default by GPU memory)."
    )
    max_total_num_tokens: int | None = Field(None, description="SGLang: the token pool.")
    page_size: int | None = Field(None, description="SGLang: tokens per page.")
    max_model_len: int
    enable_prefix_caching: bool = Field(description="vLLM's prefix cache; SGLang's radix cache.")

    def limits_text(self) -> str:
        """The pool and the limits in one line (the CLI's table, the pictures' subtitle)."""
        pool = f"{self.num_gpu_blocks:,} blocks of {self.block_size} tokens"
        if self.engine == "sglang":
            return (
                f"{self.max_total_num_tokens or 0:,} tokens ({pool}), max_running_requests "
                f"{self.max_num_seqs:,}, chunked_prefill_size {self.chunked_prefill_size or 0:,}"
            )
        return (
            f"{pool}, max_num_seqs {self.max_num_seqs:,}, "
            f"max_num_batched_tokens {self.max_num_batched_tokens or 0:,}"
        )


class SimulationAnswer(BaseModel):
    """One replica under the traffic: latency percentiles, throughput, the engine's load."""

    model: str
    gpu: str | None
    engine: EngineOut
    traffic: Literal["workload", "trace"]
    trace_format: str | None = Field(None, description="azure, burstgpt, mooncake or kvplan.")
    skipped_rows: int = Field(0, description="Trace rows without output (failed requests).")
    completed_requests: int = Field(description="Requests run to their last token.")
    rejected_requests: int = Field(description="Longer than max_model_len: never run.")
    duration_s: float = Field(description="Simulated time from 0 to the last token.")
    ttft_ms: DistributionOut = Field(
        description="Time to first token, ms: from a request's arrival to its first output "
        "token (queue and prefill included), as `vllm bench serve` reports it."
    )
    tpot_ms: DistributionOut = Field(
        description="Time per output token (inter-token latency), ms: (end-to-end - TTFT) / "
        "(output tokens - 1), over requests of more than one output token."
    )
    e2e_latency_ms: DistributionOut = Field(
        description="End-to-end latency, ms: from a request's arrival to its last token."
    )
    queue_time_ms: DistributionOut = Field(
        description="From a request's arrival until the scheduler first runs it, ms."
    )
    throughput: ThroughputOut
    goodput: GoodputOut | None = Field(
        description="Requests within every target given (`targets`); null without targets."
    )
    mean_running: float = Field(
        description="Requests running in the engine, averaged over the simulated time."
    )
    mean_waiting: float = Field(
        description="Requests queued for room (KV blocks, the running cap), time-averaged."
    )
    mean_kv_usage: float = Field(
        description="Share (0-1) of the KV pool's blocks in use, averaged over the time."
    )
    peak_kv_usage: float = Field(description="The largest share (0-1) of KV blocks in use.")
    preemptions: int = Field(
        description="Requests evicted when KV blocks ran out (vLLM: preempted and recomputed; "
        "SGLang: retracted to the queue), counted each time."
    )
    steps: int = Field(description="Engine steps (forward passes) simulated.")
    time_series: list[SampleOut] = Field(
        description="Running and waiting requests and KV usage over time (at most 800 points)."
    )
    speed_calibrated_from: SpeedCalibratedFrom | None = Field(
        None,
        description="Set when a stored speed calibration with the deployment's key (as a "
        "capacity answer's `speed_calibrated_from`) measured its decode step: every simulated "
        "step's decode part is kvplan's times its `step_time_scale`; the prefill chunks stay "
        "kvplan's, as a capacity answer's prefill_ms does.",
    )
    warnings: list[str]
