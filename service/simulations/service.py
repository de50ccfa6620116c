"""Simulations' use case: size the deployment (planning's use case), then run the simulator
on one replica of it (`service.simulation`). Where a speed calibration has the deployment's key
(the capacity answer's `speed_calibrated_from`), the simulator's decode steps take its scale."""

from __future__ import annotations

import math
from dataclasses import asdict

from ..catalog.snapshot import CatalogSnapshot
from ..kit.errors import InvalidRequest
from ..planning.schemas import DistributionOut, SpeedCalibratedFrom, WorkloadIn
from ..planning.service import CapacityQuestion, SizedDeployment, sized_deployment
from ..simulation import (
    SGLANG_NO_BATCHED_TOKENS,
    Distribution,
    EngineConfig,
    Lengths,
    SimulationError,
    Summary,
    Targets,
    Trace,
    Workload,
    csv_trace,
    engine_config,
    mooncake_trace,
    rows_trace,
    simulate,
)
from ..sizing import Capacity
from .schemas import (
    EngineOut,
    GoodputOut,
    SampleOut,
    SimulationAnswer,
    SimulationRequest,
    ThroughputOut,
)
from .schemas import Targets as TargetsIn

STEP_TIME_NOTE = (
    "each step's time is composed from kvplan's speed model: decode(batch, mean context) + "
    "for each prefill chunk, prefill(tokens before it + its tokens) - prefill(tokens before it) "
    "(service/simulation/deployment.py)"
)
SGLANG_NOTE = (
    "SGLang's scheduler (service/simulation/sglang_scheduler.py): prefill batches run alone "
    "(no --enable-mixed-chunk), fcfs, chunked_prefill_size by GPU memory, requests sent "
    "without ignore_eos with max_tokens their output length; its pool counted in blocks of "
    "block_size tokens, prefix hits in whole blocks"
)


def _calibrated_note(used: SpeedCalibratedFrom) -> str:
    return (
        f"decode steps are kvplan's times {used.step_time_scale:.4g}, the scale speed "
        f"calibration {used.calibration_id} measured ({used.tool} at batch {used.batch}); the "
        "prefill chunks are kvplan's own"
    )


def problem(exc: SimulationError) -> InvalidRequest:
    return InvalidRequest(exc.reason, field=exc.field)


def workload_of(body: WorkloadIn) -> Workload:
    try:
        return Workload(
            Lengths.of("workload.input_tokens", body.input_tokens),
            Lengths.of("workload.output_tokens", body.output_tokens),
            request_rate=body.request_rate,
            max_concurrency=body.max_concurrency,
            num_requests=body.num_requests,
            duration_s=body.duration_s,
            prefix_cache_hit_rate=body.prefix_cache_hit_rate,
            seed=body.seed,
        )
    except SimulationError as exc:
        raise problem(exc) from exc


def targets_of(body: TargetsIn | None) -> Targets | None:
    if body is None:
        return None
    return Targets(body.max_ttft_ms, body.max_tpot_ms, body.max_e2e_latency_ms)


def traffic_of(body: SimulationRequest) -> Workload | Trace:
    if (body.workload is None) == (body.trace is None):
        raise InvalidRequest("give a workload or a trace, one of them", field="workload")
    if body.workload is not None:
        return workload_of(body.workload)
    rows = [row.model_dump() for row in body.trace or ()]
    try:
        return rows_trace(rows)
    except SimulationError as exc:
        raise problem(exc) from exc


def trace_of(text: str, media: str) -> Trace:
    """A trace posted as the body: CSV (Azure, BurstGPT, kvplan columns) or Mooncake JSONL."""
    try:
        return mooncake_trace(text) if "json" in media else csv_trace(text)
    except SimulationError as exc:
        raise problem(exc) from exc


def simulation(
    question: CapacityQuestion,
    traffic: Workload | Trace,
    targets: Targets | None,
    catalog: CatalogSnapshot,
) -> SimulationAnswer:
    """One replica of the deployment under the traffic."""
    fields = question.fields
    if fields.engine == "sglang" and fields.max_num_batched_tokens is not None:
        raise InvalidRequest(SGLANG_NO_BATCHED_TOKENS, field="max_num_batched_tokens")
    deployment = sized_deployment(question, catalog)
    if not deployment.detail.fits:
        raise InvalidRequest(
            deployment.detail.reason or "the layout holds no sequence", field="max_model_len"
        )
    # The deployment's speed calibration, found as capacity finds it (planning.calibrated).
    used = deployment.detail.speed_calibrated_from
    try:
        summary = simulate(
            deployment.arch,
            deployment.gpu,
            deployment.capacity,
            traffic,
            targets=targets,
            weight_format=deployment.weight_format,
            decode_scale=1.0 if used is None else used.step_time_scale,
            enable_prefix_caching=question.fields.enable_prefix_caching,
        )
    except SimulationError as exc:
        raise problem(exc) from exc
    return _answer(deployment, traffic, summary, question.fields.enable_prefix_caching)


def _distribution(value: Distribution) -> DistributionOut:
    """NaN (no request to measure: TPOT when every answer is one token) is null."""
    return DistributionOut(**{k: None if math.isnan(v) else v for k, v in asdict(value).items()})


def _engine_out(capacity: Capacity, config: EngineConfig) -> EngineOut:
    """The replica's limits as the run read them, in its engine's names."""
    version = capacity.engine_settings.get("engine_version")
    sglang = config.sglang
    return EngineOut(
        engine="vllm" if sglang is None else "sglang",
        engine_version=version if isinstance(version, str) else None,
        num_gpu_blocks=config.num_gpu_blocks,
        block_size=config.block_size,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens if sglang is None else None,
        chunked_prefill_size=None if sglang is None else sglang.chunked_prefill_size,
        max_total_num_tokens=None if sglang is None else sglang.max_total_num_tokens,
        page_size=None if sglang is None else sglang.page_size,
        max_model_len=config.max_model_len,
        enable_prefix_caching=config.enable_prefix_caching,
    )


def _answer(
    deployment: SizedDeployment,
    traffic: Workload | Trace,
    summary: Summary,
    enable_prefix_caching: bool | None,
) -> SimulationAnswer:
    capacity = deployment.capacity
    # the limits the run used, read as it read them
    config = engine_config(capacity, enable_prefix_caching=enable_prefix_caching)
    used = deployment.detail.speed_calibrated_from
    warnings = [STEP_TIME_NOTE] + ([] if config.sglang is None else [SGLANG_NOTE])
    warnings += [] if used is None else [_calibrated_note(used)]
    if summary.rejected_requests:
        warnings.append(
            f"{summary.rejected_requests} requests are longer than max_model_len "
            f"({capacity.max_model_len}) and were not run"
        )
    trace = traffic if isinstance(traffic, Trace) else None
    return SimulationAnswer(
        model=deployment.detail.model,
        gpu=deployment.detail.gpu,
        engine=_engine_out(capacity, config),
        traffic="trace" if trace else "workload",
        trace_format=trace.format if trace else None,
        skipped_rows=trace.skipped_rows if trace else 0,
        completed_requests=summary.completed_requests,
        rejected_requests=summary.rejected_requests,
        duration_s=summary.duration_s,
        ttft_ms=_distribution(summary.ttft_ms),
        tpot_ms=_distribution(summary.tpot_ms),
        e2e_latency_ms=_distribution(summary.e2e_latency_ms),
        queue_time_ms=_distribution(summary.queue_time_ms),
        throughput=ThroughputOut(**asdict(summary.throughput)),
        goodput=None if summary.goodput is None else GoodputOut(**asdict(summary.goodput)),
        mean_running=summary.mean_running,
        mean_waiting=summary.mean_waiting,
        mean_kv_usage=summary.mean_kv_usage,
        peak_kv_usage=summary.peak_kv_usage,
        preemptions=summary.preemptions,
        steps=summary.steps,
        time_series=[SampleOut(**asdict(s)) for s in summary.samples],
        speed_calibrated_from=used,
        warnings=warnings,
    )
