"""Request and answer shapes of POST /v1/engine-logs.

The log comes as the body (`text/plain`, the hints as query parameters) or inside a JSON body
with the hints beside it. The answer keeps the parser's own names (`service.engine_logs.model`):
`settings` are engine flags by vLLM's argument names, `reported` every figure the engine
printed with its unit in the name, absent when the log does not print it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..planning.schemas import QUERY_CONFIG, CapacityDetail, EngineName
from .model import LINES_PER_PATTERN, Reported, Settings

# Larger than any start-up log (the 18 whole DEBUG logs of the calibration set are under
# 200 KiB each); a longer paste is a whole day of serving, not a start-up.
MAX_LOG_BYTES = 2**20  # the default request body limit too (KVPLAN_MAX_BODY_BYTES)
MAX_LOG_MIB = MAX_LOG_BYTES // 2**20

LOG_EXAMPLE = (
    "(EngineCore pid=242) INFO 04-22 00:04:02 [v1/worker/gpu_model_runner.py:4820] Model loading "
    "took 14.99 GiB memory and 14.429680 seconds\n"
    "(EngineCore pid=242) INFO 04-22 00:04:20 [v1/worker/gpu_worker.py:436] Available KV cache "
    "memory: 58.11 GiB\n"
    "(EngineCore pid=242) INFO 04-22 00:04:20 [v1/core/kv_cache_utils.py:1319] GPU KV cache "
    "size: 476,016 tokens\n"
)

_ENGINE_DOC = (
    "The engine whose lines to read (`vllm`, `sglang`, `trtllm`; `tensorrt-llm` too) when the "
    "log holds lines of several; default: the engine with the most recognised lines."
)
_VERSION_DOC = "The engine release, used when the log prints none (e.g. `0.19.0`)."
_MODEL_DOC = (
    "A catalog model slug for the prediction; default: the catalog model whose `hf_id` (or "
    "slug) is the model the log names."
)
_GPU_DOC = (
    "A catalog GPU slug for the prediction; default: the catalog GPU whose runtime total the "
    "log prints, else an unnamed GPU of that total."
)


class LogHints(BaseModel):
    """What the caller may say about a log that the log itself may not."""

    engine: str | None = Field(None, min_length=1, max_length=20, description=_ENGINE_DOC)
    engine_version: str | None = Field(
        None, min_length=1, max_length=80, description=_VERSION_DOC, examples=["0.19.0"]
    )
    model: str | None = Field(
        None, min_length=1, max_length=100, description=_MODEL_DOC, examples=["llama-3.1-8b"]
    )
    gpu: str | None = Field(
        None, min_length=1, max_length=100, description=_GPU_DOC, examples=["h100-sxm-80gb"]
    )


class EngineLogQuery(LogHints):
    """The hints as query parameters: with a `text/plain` body they are the only way to give
    them; with a JSON body, the body's own fields win."""

    model_config = QUERY_CONFIG


class EngineLogRequest(LogHints):
    """POST /v1/engine-logs as JSON: the log and what the caller knows about it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"log": LOG_EXAMPLE, "engine": "vllm", "gpu": "h100-sxm-80gb"},
                {
                    "log": LOG_EXAMPLE,
                    "model": "llama-3.1-8b-instruct",
                    "engine_version": "0.19.0",
                },
            ]
        },
    )

    log: str = Field(
        ...,
        max_length=MAX_LOG_BYTES,
        description="The start-up log as printed (`kubectl logs`, `docker logs`): timestamps, "
        "process prefixes, ANSI colours and other lines may stay.",
    )
    hf_config: dict[str, Any] | None = Field(
        None,
        description="The model's config.json, as it is, for a model the catalog does not hold.",
    )


class RecognisedLineOut(BaseModel):
    line_number: int = Field(description="1-based, counting the lines of the text sent.")
    text: str = Field(description="The line without its prefix, timestamp and colours.")
    patterns: list[str] = Field(description="The lines kvplan knows that it matched.")


DifferenceUnit = Literal["bytes", "blocks", "tokens", "sequences"]


class Difference(BaseModel):
    """One budget line: what kvplan predicts, what the engine printed, and how far apart."""

    line: str = Field(
        description="weights, activation_peak, non_torch, cudagraph, kv_pool, num_gpu_blocks, "
        "kv_cache_tokens or max_concurrency."
    )
    unit: DifferenceUnit
    predicted: int | float | None = Field(
        description="kvplan's figure; null where its budget has no such line (vLLM before "
        "0.20 does not subtract CUDA graphs)."
    )
    reported: int | float | None = Field(description="The engine's; null where not printed.")
    difference: int | float | None = Field(
        description="predicted - reported (positive: kvplan predicts more)."
    )
    share_of_budget: float | None = Field(
        description="For memory lines: the difference over the budget, the utilization (or "
        "memory fraction) x total memory, as the engine requested it."
    )
    share_of_reported: float | None = Field(description="The difference over the reported.")
    note: str


class EngineLogAnswer(BaseModel):
    """A start-up log, read, and set against kvplan's own answer for the same deployment."""

    engine: EngineName
    engine_version: str | None = Field(
        description="As the log prints it, else the caller's hint, else null."
    )
    settings: Settings = Field(
        description="Every engine flag the log reveals, by vLLM's argument names (SGLang's and "
        "TensorRT-LLM's own where only they have it); absent when not revealed."
    )
    reported: Reported = Field(
        description="Every figure the engine printed, in bytes (integers; the printed decimal "
        "times the unit the engine divides by) or counts; absent when not printed, never "
        "derived. `kv_pool_bytes` is the smallest rank's pool, `kv_pool_bytes_by_rank` each."
    )
    recognised_lines: list[RecognisedLineOut] = Field(
        description="The lines kvplan read, in log order: of each pattern its first "
        f"{LINES_PER_PATTERN} lines and its last, and every line a figure in `reported` or "
        "`settings` was read from (a repeated line is read every time; only the echo is cut)."
    )
    recognised_lines_omitted: int = Field(
        0, ge=0, description="Recognised lines read but left out of `recognised_lines`."
    )
    model: str | None = Field(
        description="The catalog model the prediction is for, `hf_config` for an attached "
        "config.json, or null (no prediction)."
    )
    gpu: str | None = Field(
        description="The catalog GPU the prediction is for, `<bytes>B` for an unnamed one "
        "given by the logged total, or null (no prediction)."
    )
    prediction: CapacityDetail | None = Field(
        description="kvplan's capacity for the same model, GPU and settings, without any "
        "calibration (POST /v1/capacity's answer)."
    )
    prediction_unavailable: str | None = Field(
        None, description="Why there is no prediction: what to add to get one."
    )
    budget_bytes: int | None = Field(
        None,
        description="What the shares are of: the memory the engine requested (utilization x "
        "total), as printed where the log prints it.",
    )
    differences: list[Difference] = Field(
        description="Each budget line, predicted against reported; empty without a prediction."
    )
    warnings: list[str]


# ---------------------------------------------------------------------------------------------
# calibrations


class CalibrationCreate(EngineLogRequest):
    """POST /v1/calibrations as JSON: the log, the hints, and a note for people."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "log": LOG_EXAMPLE,
                    "model": "llama-3.1-8b-instruct",
                    "gpu": "h100-sxm-80gb",
                    "engine_version": "0.19.0",
                    "notes": "prod-chat pod, 2026-04-22",
                }
            ]
        },
    )

    notes: str | None = Field(None, max_length=2000, description="Free text for people.")


class CalibrationRead(BaseModel):
    """A stored calibration: what it measured and the key questions are matched on."""

    id: int
    model: str = Field(
        description="A catalog model slug, or `sha256:<hex>` of the attached config.json's "
        "canonical JSON (sorted keys, no spaces)."
    )
    gpu: str = Field(description="A catalog GPU slug, or `<bytes>B` for an unnamed GPU.")
    engine: EngineName
    engine_version: str | None = Field(description="The release it was sized as.")
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    max_num_batched_tokens: int | None
    enforce_eager: bool
    weight_format: str | None = Field(
        description="The weights' storage format the log ran (its `quantization` flag, else the "
        "model's own: the catalog's, or the config.json's quantization_config), e.g. bfloat16, "
        "fp8, awq. Null only for a calibration stored before kvplan keyed the format and whose "
        "format could not be told then: it answers no question."
    )
    fraction_name: str = Field(
        description="gpu_memory_utilization, mem_fraction_static or free_gpu_memory_fraction."
    )
    fraction: float | None = Field(description="The fraction the engine ran with.")
    fraction_base_bytes: int | None = Field(
        description="What the fraction is of: vLLM total memory, SGLang memory free at start, "
        "TensorRT-LLM memory free after warm-up (as printed where the log prints it)."
    )
    gpu_memory_bytes: int = Field(description="The GPU's total as the prediction used it.")
    kv_pool_bytes: int = Field(
        description="The pool, per GPU, that gives the log's own blocks and tokens by kvplan's "
        "arithmetic: within the printed pool's last digit, the middle of the pools that do."
    )
    reproduces: bool = Field(
        description="True when such a pool exists (the log's blocks, tokens and concurrency "
        "come out exactly); false when kvplan's cache layout differs from the engine's, and "
        "the printed pool is kept."
    )
    weights_bytes: int | None
    activation_peak_bytes: int | None
    non_torch_bytes: int | None
    cudagraph_bytes: int | None
    reported_kv_pool_bytes: int | None = Field(description="The pool as the log printed it.")
    num_gpu_blocks: int | None
    kv_cache_tokens: int | None
    max_concurrency: float | None
    max_model_len: int | None
    replaced: list[str] = Field(description="kvplan's budget lines the measurement replaces.")
    settings: dict[str, Any] = Field(description="Every flag the log revealed.")
    log_sha256: str = Field(description="sha256 of the log as sent (UTF-8).")
    notes: str | None
    revision: int
    created_at: datetime
    updated_at: datetime


class CalibrationPage(BaseModel):
    """One page of calibrations, oldest first; follow `next` until it is null."""

    items: list[CalibrationRead]
    limit: int = Field(description="The page size asked for (default 50, at most 500).")
    next_cursor: str | None = Field(
        description="Opaque: pass as `cursor` for the next page; null on the last page."
    )
    next: str | None = Field(
        description="Relative URL of the next page (same filters); null on the last page."
    )
