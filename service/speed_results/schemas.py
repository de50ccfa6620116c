"""POST /v1/speed-results: a benchmark's result file and the deployment it ran, as asked."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..planning.schemas import CapacityDetail, CapacityRequest

RESULT_EXAMPLE: dict[str, Any] = {
    "backend": "vllm",
    "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 320,
    "request_rate": "inf",
    "max_concurrency": 32,
    "duration": 60.0,
    "completed": 320,
    "total_input_tokens": 327680,
    "total_output_tokens": 40960,
    "request_throughput": 5.33,
    "output_throughput": 682.7,
    "mean_ttft_ms": 150.0,
    "mean_tpot_ms": 40.0,
    "mean_itl_ms": 40.0,
}


class SpeedResultRequest(BaseModel):
    """The tool's result file as it wrote it, and the deployment the run was served by."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "result": RESULT_EXAMPLE,
                    "deployment": {"model": "llama-3.1-8b-instruct", "gpu": "h100-sxm-80gb"},
                }
            ]
        },
    )

    result: dict[str, Any] = Field(
        description="`vllm bench serve --save-result` JSON, genai-perf's "
        "profile_export_genai_perf.json (or AIPerf's), or guidellm's benchmarks.json, as the "
        "tool wrote it."
    )
    benchmark: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="Which of a guidellm report's `benchmarks` (its index, from 0) the answer's "
        "`run`, `figures` and `step_time_scale` describe, and a speed calibration keeps. A file "
        "of one run needs none; a report of several (a sweep) without it is compared "
        "benchmark by benchmark in `benchmarks` alone, and cannot be stored.",
    )
    deployment: CapacityRequest = Field(
        description="The deployment that served the run, as POST /v1/capacity asks it (model, "
        "GPU, layout, the engines' flag names)."
    )


class RunOut(BaseModel):
    tool: str
    strategy: str | None = Field(
        None,
        description="guidellm's strategy as it names it: synchronous, concurrent@N, "
        "throughput@N (or @unlimited), constant@R, poisson@R; null for the other tools.",
    )
    model_id: str | None
    completed: int | None
    mean_input_tokens: float
    mean_output_tokens: float
    max_concurrency: int | None = Field(description="Clients of a closed loop; null otherwise.")
    request_rate: float | None = Field(description="Requests/s offered; null for inf.")
    concurrency: float = Field(
        description="Requests in flight: max_concurrency, else request_throughput x mean "
        "end-to-end latency (Little's law)."
    )
    batch: int = Field(description="The batch the estimate is asked at: concurrency, rounded.")
    context_tokens: int = Field(description="Each sequence's context: prompt + output / 2.")
    prompt_tokens: int = Field(description="The prefill's prompt: the mean prompt.")


FIGURES_DOC = (
    "Each figure measured beside kvplan's estimate of it: mean_tpot_ms and mean_itl_ms against "
    "the decode step at the run's batch, mean_ttft_ms against one prompt's prefill, and for a "
    "closed loop output_throughput (tokens/s)."
)


class ComparedOut(BaseModel):
    name: str = Field(description="The result file's own name for the figure.")
    measured: float | None
    estimated: float | None
    ratio: float | None = Field(description="measured / estimated.")


class BenchmarkOut(BaseModel):
    """One run of the file (one benchmark of a guidellm report) beside kvplan's estimate."""

    index: int = Field(description="Its place in the file (guidellm's `benchmarks`), from 0.")
    strategy: str | None = Field(description="guidellm's strategy; null for the other tools.")
    run: RunOut | None = Field(description="Null when it is not compared (`not_compared`).")
    figures: list[ComparedOut] = Field(description=FIGURES_DOC)
    step_time_scale: float | None = Field(
        description="Measured TPOT over kvplan's decode step at its batch."
    )
    estimate_unavailable: str | None = Field(description="Why there is no estimate, if none.")
    not_compared: str | None = Field(
        description="Why this benchmark cannot be compared (a figure the comparison needs is "
        "missing or 0, no request completed), naming the field; null when it is."
    )


class SpeedResultAnswer(BaseModel):
    benchmark: int | None = Field(
        description="The index of the run `run`, `figures` and `step_time_scale` describe: the "
        "one asked, or 0 for a file of one run; null for a report of several when none was "
        "asked (then only `benchmarks` compares them)."
    )
    run: RunOut | None = Field(
        description="The run `benchmark` names, its shape as the file gives it; null when a "
        "report of several was sent without `benchmark`."
    )
    figures: list[ComparedOut] = Field(description=FIGURES_DOC)
    step_time_scale: float | None = Field(
        description="Measured TPOT over kvplan's decode step at the run's batch: the factor on "
        "the estimate's step time that this run measured."
    )
    estimate_unavailable: str | None = Field(description="Why there is no estimate, if none.")
    benchmarks: list[BenchmarkOut] = Field(
        description="Every run in the file, in its order, each beside kvplan's estimate at its "
        "own shape (a guidellm sweep: one per strategy; other tools: the one run)."
    )
    capacity: CapacityDetail = Field(description="The deployment's capacity answer.")


class SpeedCalibrationCreate(SpeedResultRequest):
    """POST /v1/speed-calibrations: the result file, its deployment, and a note for people."""

    notes: str | None = Field(None, max_length=2000, description="For people; kvplan ignores it.")


class SpeedCalibrationRead(BaseModel):
    """A stored speed calibration: its key (the memory calibrations' key) and what it measured."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    model: str
    gpu: str
    engine: str
    engine_version: str | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    max_num_batched_tokens: int | None
    enforce_eager: bool
    weight_format: str | None
    tool: str
    batch: int = Field(description="The run's batch: its concurrency, rounded.")
    context_tokens: int
    prompt_tokens: int
    measured_tpot_ms: float
    measured_ttft_ms: float | None
    estimated_tpot_ms: float = Field(description="kvplan's decode step at the run's shape.")
    step_time_scale: float = Field(
        description="measured_tpot_ms / estimated_tpot_ms: the factor capacity answers with "
        "this key put on kvplan's decode step (`speed_calibrated_from`)."
    )
    result_sha256: str = Field(
        description="sha256 of the result's canonical JSON (keys sorted, no spaces)."
    )
    notes: str | None
    revision: int
    created_at: datetime


class SpeedCalibrationPage(BaseModel):
    """One page of speed calibrations, oldest first; follow `next` until it is null."""

    items: list[SpeedCalibrationRead]
    limit: int
    next_cursor: str | None
    next: str | None
