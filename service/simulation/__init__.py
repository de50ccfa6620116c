"""The traffic simulator: pure like `service.sizing`, beside it.

A simulation replays requests (arrivals, prompt and output lengths, prefix blocks) against one
replica of a deployment as its engine's scheduler runs it (vLLM's V1 scheduler, `engine.py`;
SGLang's, `sglang_scheduler.py`), with the KV pool the
capacity answer sized and each step timed by kvplan's speed model (`deployment.py`), and
reports latency percentiles, throughput and the engine's load (`results.py`). Like sizing it
imports no web, database or I/O and reads sizing only through its facade; the slices reach it
through a use case of their own (tests/test_layers.py holds both rules).
"""

from __future__ import annotations

from ..sizing import Capacity, Gpu, ModelArchitecture, WeightFormat
from .deployment import (
    SGLANG_NO_BATCHED_TOKENS,
    SIMULATED_ENGINES,
    StepTable,
    engine_config,
    step_table,
)
from .disaggregated import DecodeOnly, DisaggregatedSummary, Pool, run_disaggregated
from .engine import Engine, EngineConfig, Finished, Run, Sample, SglangLimits, StepTimer
from .errors import SimulationError
from .results import Distribution, Goodput, Summary, Targets, Throughput, summarise
from .sglang_scheduler import SglangEngine
from .traces import Trace, TraceRow, csv_trace, mooncake_trace, requests_of, rows_trace
from .workload import Lengths, Request, Workload, draw_requests


def simulate(
    arch: ModelArchitecture,
    gpu: Gpu,
    capacity: Capacity,
    traffic: Workload | Trace,
    *,
    targets: Targets | None = None,
    weight_format: WeightFormat | None = None,
    decode_scale: float = 1.0,
    enable_prefix_caching: bool | None = None,
) -> Summary:
    """One replica of a sized deployment under a workload or a trace, stepped by its engine's
    scheduler (vLLM's or SGLang's; `enable_prefix_caching`: the caller's flag); each decode
    step kvplan's times `decode_scale` (a speed calibration's, deployment.py)."""
    if capacity.parallel.data_parallel_size > 1:
        raise SimulationError(
            "data_parallel_size", "one replica (one data-parallel rank) is simulated; ask with 1"
        )
    config = engine_config(capacity, enable_prefix_caching=enable_prefix_caching)
    table = step_table(
        arch, gpu, capacity, config, weight_format=weight_format, decode_scale=decode_scale
    )
    return run(config, table, traffic, targets=targets)


def run(
    config: EngineConfig,
    step_ms: StepTimer,
    traffic: Workload | Trace,
    *,
    targets: Targets | None = None,
) -> Summary:
    """The engine's run under a workload or a trace, summarised."""
    if isinstance(traffic, Trace):
        requests = requests_of(traffic, config.block_size)
        concurrency = None
    else:
        requests = draw_requests(traffic, config.block_size)
        concurrency = traffic.max_concurrency
    scheduler = Engine if config.sglang is None else SglangEngine
    result = scheduler(config, step_ms).run(requests, max_concurrency=concurrency)
    if not result.finished:
        raise SimulationError(
            "workload",
            f"no request fits: each needs at most max_model_len ({config.max_model_len}) tokens",
        )
    return summarise(result, config.num_gpu_blocks, targets)


__all__ = [
    "SGLANG_NO_BATCHED_TOKENS",
    "SIMULATED_ENGINES",
    "DecodeOnly",
    "DisaggregatedSummary",
    "Distribution",
    "Engine",
    "EngineConfig",
    "Finished",
    "Goodput",
    "Lengths",
    "Pool",
    "Request",
    "Run",
    "Sample",
    "SglangEngine",
    "SglangLimits",
    "SimulationError",
    "StepTable",
    "StepTimer",
    "Summary",
    "Targets",
    "Throughput",
    "Trace",
    "TraceRow",
    "Workload",
    "csv_trace",
    "draw_requests",
    "engine_config",
    "mooncake_trace",
    "requests_of",
    "rows_trace",
    "run",
    "run_disaggregated",
    "simulate",
    "step_table",
    "summarise",
]
