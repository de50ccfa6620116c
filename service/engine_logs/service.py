"""The engine-log use case: read a start-up log and set it against kvplan's own prediction.

POST /v1/engine-logs and `kvplan explain-log` call `explain_log`; POST /v1/calibrations calls
it too, then keeps what it measured (`calibrations.py`). No HTTP here.

The prediction is the planning use case's answer (`planning.service.capacity`) for the model,
the GPU and the settings the log reveals, copied by name (`Settings` and the capacity fields
share vLLM's argument names), with calibrations left out: it is kvplan's own arithmetic that
is being checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pydantic import ValidationError

from ..catalog.snapshot import CatalogSnapshot
from ..kit.errors import InvalidRequest, Problem
from ..planning import service as planning
from ..planning.schemas import CapacityDetail, CapacityFields, GpuRef, HfConfigModel, InlineGpu
from ..planning.service import CapacityQuestion
from ..sizing import SizingError, parse_weight_format
from .model import ParsedLog, Reported, Settings
from .schemas import (
    MAX_LOG_BYTES,
    MAX_LOG_MIB,
    Difference,
    DifferenceUnit,
    EngineLogAnswer,
    RecognisedLineOut,
)


@dataclass(frozen=True, slots=True)
class LogQuestion:
    """A log and what the caller says about it, however it was sent (text, JSON, the CLI)."""

    log: str
    engine: str | None = None
    engine_version: str | None = None
    model: str | None = None
    gpu: str | None = None
    hf_config: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """What the prediction is for: the model and the GPU, each as the capacity question takes
    it and as the answer names it."""

    model_ref: str | HfConfigModel
    model: str
    gpu_ref: GpuRef
    gpu: str


@dataclass(frozen=True, slots=True)
class Explained:
    """A log read, the question kvplan asked itself about it, and the answer."""

    parsed: ParsedLog
    target: Target | None
    question: CapacityQuestion | None
    answer: EngineLogAnswer
    # Without a prediction: the input that would give one (model, gpu, or the log's settings).
    missing_field: str | None = None


def parse(question: LogQuestion) -> ParsedLog:
    """The log read; 422 when it is too long or nothing in it is a line kvplan knows."""
    size = len(question.log.encode("utf-8", errors="replace"))
    if size > MAX_LOG_BYTES:
        raise InvalidRequest(
            f"the log is {size:,} bytes; at most {MAX_LOG_MIB} MiB: send the start-up part "
            "(up to the first request served)",
            field="log",
        )
    # The parser compiles its patterns on import: with the first log read, not with the app.
    from .parser import LogNotRecognised, parse_engine_log  # noqa: PLC0415

    try:
        return parse_engine_log(question.log, question.engine, question.engine_version)
    except LogNotRecognised as exc:
        raise InvalidRequest(
            exc.reason,
            field="log",
            code=exc.code,
            title="No line of the log is one kvplan reads",
            looked_for=list(exc.looked_for),
        ) from exc


def explain_log(question: LogQuestion, catalog: CatalogSnapshot) -> EngineLogAnswer:
    return explain(question, catalog).answer


def explain(question: LogQuestion, catalog: CatalogSnapshot) -> Explained:
    """The log read, kvplan's prediction for the same deployment, and each line's difference."""
    parsed = parse(question)
    warnings: list[str] = []
    target, missing, missing_field = _target(question, parsed, catalog)
    capacity_question: CapacityQuestion | None = None
    prediction: CapacityDetail | None = None
    if target is not None:
        try:
            capacity_question = capacity_question_for(parsed, target)
            prediction = planning.capacity(capacity_question, catalog)
        except ValidationError as exc:
            missing = "the log's settings cannot be asked: " + _validation_message(exc)
            missing_field = "log"
        except SizingError as exc:
            missing = f"kvplan cannot size it: {exc.field}: {exc.reason}"
            missing_field = "log"
        except Problem as exc:
            missing = f"kvplan cannot size it: {exc.detail}"
            missing_field = "log"
    if prediction is not None and parsed.engine_version is None:
        warnings.append(
            "the log prints no engine version: the prediction is for kvplan's default release "
            f"({prediction.engine_version}); give engine_version for the one that ran"
        )
    budget = _budget_bytes(parsed.reported, prediction)
    answer = EngineLogAnswer(
        engine=parsed.engine,
        engine_version=parsed.engine_version,
        settings=parsed.settings,
        reported=parsed.reported,
        recognised_lines=[
            RecognisedLineOut(
                line_number=line.line_number, text=line.text, patterns=list(line.patterns)
            )
            for line in parsed.recognised_lines
        ],
        recognised_lines_omitted=parsed.recognised_lines_omitted,
        model=target.model if target is not None else None,
        gpu=target.gpu if target is not None else None,
        prediction=prediction,
        prediction_unavailable=None if prediction is not None else missing,
        budget_bytes=budget,
        differences=differences(parsed.reported, prediction, budget),
        warnings=warnings,
    )
    if prediction is None:
        return Explained(parsed, target, None, answer, missing_field)
    return Explained(parsed, target, capacity_question, answer)


def answer_json(answer: EngineLogAnswer) -> dict[str, Any]:
    """The answer as JSON, with the settings and figures the log does not reveal left out."""
    body = answer.model_dump(mode="json")
    body["settings"] = {k: v for k, v in body["settings"].items() if v is not None}
    body["reported"] = {k: v for k, v in body["reported"].items() if v not in (None, [])}
    return body


# ---------------------------------------------------------------------------------------------
# what the prediction is for


def catalog_model_for(model_id: str, catalog: CatalogSnapshot) -> str | None:
    """The catalog model a log names: by `hf_id` or slug, any case (catalog.names)."""
    return catalog.model_names.resolve(model_id)


def _target(
    question: LogQuestion, parsed: ParsedLog, catalog: CatalogSnapshot
) -> tuple[Target | None, str, str | None]:
    """The model and the GPU to predict for, or why there are none. A slug the caller names
    must exist (404); one the log names need not."""
    model_ref: str | HfConfigModel
    if question.model is not None:
        model_ref = model = catalog.model(question.model).slug
    elif question.hf_config is not None:
        model_ref, model = HfConfigModel(hf_config=dict(question.hf_config)), "hf_config"
    else:
        named = parsed.settings.model
        slug = catalog_model_for(named, catalog) if named else None
        if slug is None:
            why = (
                f"the log's model {named!r} is no catalog model's hf_id or slug"
                if named
                else "the log does not name its model"
            )
            give = "give model (a catalog slug) or hf_config (its config.json)"
            return None, f"{why}: {give}", "model"
        model_ref = model = slug
    if question.gpu is not None:
        gpu = catalog.gpu(question.gpu).slug
        return Target(model_ref, model, gpu, gpu), "", None
    total = parsed.reported.total_memory_bytes
    if total is None:
        why = "the log does not print the GPU's total memory: give gpu (a catalog slug)"
        return None, why, "gpu"
    known = catalog.gpu_by_memory(total)
    if known is not None:
        return Target(model_ref, model, known.slug, known.slug), "", None
    return Target(model_ref, model, InlineGpu(memory_bytes=total), f"{total}B"), "", None


_RELEASE = re.compile(r"^v?(\d{1,3}(?:\.\d{1,3}){0,2})")
# Settings the capacity question takes under another name.
_RENAMED = {"kv_cache_memory_bytes": "kv_pool_bytes"}
# The engines' quantization methods (vLLM `--quantization`, QUANTIZATION_METHODS in
# vllm/model_executor/layers/quantization/__init__.py; SGLang `--quantization`, the same names)
# whose name says how the weights are stored, as kvplan's weight formats
# (sizing.model.dtypes.WEIGHT_FORMAT_BITS). The Marlin and FBGEMM kernels read the same checkpoints.
_QUANTIZATION_FORMATS = {
    "fp8": "fp8",
    "fbgemm_fp8": "fp8",
    "ptpc_fp8": "fp8",
    "awq": "awq",
    "awq_marlin": "awq",
    "gptq": "gptq",
    "gptq_marlin": "gptq",
    "mxfp4": "mxfp4",
    "modelopt_fp4": "nvfp4",
}
# Methods that read the format from the checkpoint's own quantization_config: the weights are
# the model's own format (the catalog entry's, or what the attached config.json declares).
_FORMAT_FROM_CHECKPOINT = frozenset({"compressed-tensors", "modelopt"})


def weight_format_of_quantization(quantization: str | None) -> str | None:
    """The capacity question's `weight_format` for the log's `quantization` flag: None where
    the weights are the model's own format (no flag, or a method the checkpoint describes);
    422 naming the log for a method kvplan cannot price, so that the calibration of a
    quantized run is never keyed as the model's own format."""
    if quantization is None:
        return None
    method = quantization.strip().lower()
    if method in _FORMAT_FROM_CHECKPOINT:
        return None
    if method in _QUANTIZATION_FORMATS:
        return _QUANTIZATION_FORMATS[method]
    try:
        return parse_weight_format(method)
    except SizingError:
        known = ", ".join(sorted(_QUANTIZATION_FORMATS))
        raise InvalidRequest(
            f"the log's quantization {quantization!r} is no weight format kvplan prices "
            f"({known}, or a format name such as int8 or nvfp4)",
            field="log",
        ) from None


def release(version: str | None) -> str | None:
    """The release a version string names, as the capacity question takes it (`0.14.0` of
    `0.14.0rc1.dev2+g7d9f6663a`)."""
    if version is None:
        return None
    found = _RELEASE.match(version.strip())
    return found.group(1) if found else None


def capacity_fields(parsed: ParsedLog) -> CapacityFields:
    """The log's settings as capacity fields, copied by name (ValidationError when the log's
    values are outside what a capacity question takes)."""
    values: dict[str, Any] = {
        "engine": parsed.engine,
        "engine_version": release(parsed.engine_version),
        "weight_format": weight_format_of_quantization(parsed.settings.quantization),
    }
    wanted = CapacityFields.model_fields
    for setting in fields(Settings):
        value = getattr(parsed.settings, setting.name)
        name = _RENAMED.get(setting.name, setting.name)
        if value is not None and name in wanted and name not in values:
            values[name] = value
    # Without the flag, the context the engine ran is the one its concurrency line divides by:
    # "Maximum concurrency for {max_model_len:,} tokens per request" (vLLM V1
    # vllm/v1/core/kv_cache_utils.py, _report_kv_cache_config; V0
    # vllm/executor/executor_base.py, initialize_cache), and a V0 start-up failure names it:
    # "The model's max seq len (N) is larger than ..." (parsed as the setting itself).
    concurrency_tokens = parsed.reported.max_concurrency_tokens
    if "max_model_len" not in values and concurrency_tokens is not None:
        values["max_model_len"] = concurrency_tokens
    return CapacityFields.model_validate(values)


def capacity_question_for(parsed: ParsedLog, target: Target) -> CapacityQuestion:
    return CapacityQuestion(target.model_ref, target.gpu_ref, capacity_fields(parsed), explain=True)


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()
    )


# ---------------------------------------------------------------------------------------------
# the differences


def budget_lines(prediction: CapacityDetail) -> dict[str, int]:
    """The prediction's memory budget, line name -> bytes (what each line takes, positive)."""
    explanation = prediction.explanation or {}
    lines = explanation.get("memory_budget", {}).get("lines", [])
    return {str(line["name"]): abs(int(line["bytes"])) for line in lines}


_FRACTIONS = ("gpu_memory_utilization", "mem_fraction_static", "free_gpu_memory_fraction")


def _budget_bytes(reported: Reported, prediction: CapacityDetail | None) -> int | None:
    """The memory the engine requested: as printed, else the prediction's utilization (or
    memory fraction) x total."""
    if reported.requested_memory_bytes is not None:
        return reported.requested_memory_bytes
    if prediction is None:
        return None
    requested = budget_lines(prediction).get("requested")
    if requested is not None:
        return requested
    for name in _FRACTIONS:
        fraction = prediction.engine_settings.get(name)
        if isinstance(fraction, int | float):
            return int(fraction * prediction.gpu_memory_bytes)
    return None


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def _kv_pool_reported(reported: Reported) -> int | None:
    if reported.kv_pool_bytes is not None:
        return reported.kv_pool_bytes
    if reported.k_cache_bytes is not None and reported.v_cache_bytes is not None:
        return reported.k_cache_bytes + reported.v_cache_bytes  # SGLang: K and V pools
    return None


def _line(
    line: str,
    unit: DifferenceUnit,
    *,
    predicted: int | float | None,
    reported: int | float | None,
    budget: int | None,
    note: str,
) -> Difference:
    difference = None if predicted is None or reported is None else predicted - reported
    if isinstance(difference, float):
        difference = round(difference, 4)
    of_budget = None
    if unit == "bytes" and difference is not None and budget:
        of_budget = round(difference / budget, 6)
    of_reported = None
    if difference is not None and reported:
        of_reported = round(difference / reported, 6)
    return Difference(
        line=line,
        unit=unit,
        predicted=predicted,
        reported=reported,
        difference=difference,
        share_of_budget=of_budget,
        share_of_reported=of_reported,
        note=note,
    )


def differences(
    reported: Reported, prediction: CapacityDetail | None, budget: int | None
) -> list[Difference]:
    """Each budget line kvplan predicts against the engine's (a line neither has is left out)."""
    if prediction is None:
        return []
    rows = [
        *_budget_rows(reported, budget_lines(prediction), budget),
        *_pool_rows(reported, prediction, budget),
    ]
    return [row for row in rows if row.predicted is not None or row.reported is not None]


def _budget_rows(
    reported: Reported, lines: dict[str, int], budget: int | None
) -> tuple[Difference, ...]:
    """The memory budget's terms, as the engine profiles them before it sizes the pool."""
    weights = _first(
        reported.weights_bytes, reported.model_loading_bytes, reported.engine_allocation_bytes
    )
    return (
        _line(
            "weights",
            "bytes",
            predicted=lines.get("weights"),
            reported=weights,
            budget=budget,
            note="model weights on one GPU (vLLM 'Model loading took', SGLang 'Load weight end', "
            "TensorRT-LLM engine allocation)",
        ),
        _line(
            "activation_peak",
            "bytes",
            predicted=lines.get("activation_peak"),
            reported=reported.activation_peak_bytes,
            budget=budget,
            note="the profile run's torch peak over the weights",
        ),
        _line(
            "non_torch",
            "bytes",
            predicted=lines.get("non_torch"),
            reported=reported.non_torch_bytes,
            budget=budget,
            note="memory outside torch's allocator (CUDA context, NCCL, cuBLAS workspaces)",
        ),
        _line(
            "cudagraph",
            "bytes",
            predicted=lines.get("cudagraph"),
            reported=reported.cudagraph_bytes,
            budget=budget,
            note="CUDA-graph memory (predicted only where the release subtracts it)",
        ),
    )


def _pool_rows(
    reported: Reported, prediction: CapacityDetail, budget: int | None
) -> tuple[Difference, ...]:
    """The KV cache pool the budget leaves, and what it holds: blocks, tokens, sequences."""
    return (
        _line(
            "kv_pool",
            "bytes",
            predicted=prediction.kv_pool_bytes,
            reported=_kv_pool_reported(reported),
            budget=budget,
            note="the KV cache pool on one GPU (vLLM 'Available KV cache memory', SGLang K + V)",
        ),
        _line(
            "num_gpu_blocks",
            "blocks",
            predicted=prediction.num_gpu_blocks,
            reported=reported.num_gpu_blocks,
            budget=budget,
            note="blocks the pool is cut into",
        ),
        _line(
            "kv_cache_tokens",
            "tokens",
            predicted=prediction.kv_cache_tokens,
            reported=_first(reported.kv_cache_tokens, reported.max_total_num_tokens),
            budget=budget,
            note="tokens the pool holds (vLLM 'GPU KV cache size', SGLang max_total_num_tokens)",
        ),
        _line(
            "max_concurrency",
            "sequences",
            predicted=prediction.max_concurrency,
            reported=reported.max_concurrency,
            budget=budget,
            note="sequences of max_model_len the pool holds ('Maximum concurrency')",
        ),
    )
