"""kvplan's engine budgets against 46 public start-up logs, log by log and in summary.

engine_logs.json holds the logs (../shared/calibration/engine_logs.json, with the reporters'
machine paths redacted; tests/engine_logs checks the parser against every one of them).
cases.json says, for each log in the same order, what kvplan needs to size it and the log does
not print: its `id`, the release kvplan sizes it as (`engine_version`, with the evidence), the
model (a catalog slug, or a config.json kept in tests/fixtures/hf_configs, sometimes with the
quantization the log states), the catalog GPU, flags the log implies, and its `role`: "fit"
for the logs a constant of service/sizing/engines/calibration.py was fitted to, "held-out" for
the rest. A log kvplan cannot size says why (`no_model`).

For each log the figures it prints are read with the parser (`parse_engine_log`): the pool
and, where printed, every term of the budget. The prediction starts from the GPU's total (the
one the log prints, else the catalog's), the model, the engine release and the flags, and
nothing else. The error is the pool's difference as a share of the budget (utilization x
total, as the log prints it where it does). A log is complete when it prints the weights, the
activation peak, the non-torch memory and the pool. `make bench` prints the table.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Final

from ..engine_logs import LogNotRecognised, ParsedLog, Reported, Settings, parse_engine_log
from ..engine_logs.model import EngineName
from ..sizing import (
    Capacity,
    Engine,
    EngineOptions,
    Gpu,
    ModelArchitecture,
    Parallelism,
    SizingError,
    Workload,
    architecture_from_hf_config,
    compute_capacity,
    parse_kv_cache_dtype,
    parse_vllm_version,
    vllm_cudagraph_estimate,
    vllm_release,
)

# The targets (issue 7): the predicted pool within 3% of the budget on at least 90% of
# the complete logs, and a median error of at most 1.5%.
WITHIN: Final = 0.03
TARGET_SHARE: Final = 0.90
TARGET_MEDIAN: Final = 0.015

ENGINES: Final = {"vllm": Engine.VLLM, "sglang": Engine.SGLANG, "tensorrt-llm": Engine.TRTLLM}
PARSER_ENGINE: Final[dict[Engine, EngineName]] = {
    Engine.VLLM: "vllm",
    Engine.SGLANG: "sglang",
    Engine.TRTLLM: "trtllm",
}


def _json(name: str) -> list[dict[str, Any]]:
    text = resources.files("service.calibration").joinpath(name).read_text("utf-8")
    loaded: list[dict[str, Any]] = json.loads(text)
    return loaded


def load_logs() -> list[dict[str, Any]]:
    """The 46 logs, as ../shared/calibration/engine_logs.json has them (paths redacted)."""
    return _json("engine_logs.json")


def load_cases() -> list[dict[str, Any]]:
    """What kvplan needs for each log, in the logs' order (see the module docstring)."""
    return _json("cases.json")


@dataclass(frozen=True)
class LogCase:
    """One log, its case, and what the parser read from its quote."""

    id: str
    engine: Engine
    role: str
    log: Mapping[str, Any]
    case: Mapping[str, Any]
    parsed: ParsedLog

    @property
    def complete(self) -> bool:
        """The log prints every term of the budget: weights, peak, non-torch and the pool."""
        r = self.parsed.reported
        return None not in (
            r.weights_bytes,
            r.activation_peak_bytes,
            r.non_torch_bytes,
            r.kv_pool_bytes,
        )


def log_cases() -> list[LogCase]:
    """Every log with its case; the two files must pair up source by source."""
    logs, cases = load_logs(), load_cases()
    if len(logs) != len(cases):
        raise ValueError(f"{len(logs)} logs but {len(cases)} cases")
    out: list[LogCase] = []
    for log, case in zip(logs, cases, strict=True):
        if not str(log["source"]).startswith(case["source"]):
            raise ValueError(f"case {case['id']} does not name log {log['source']!r}")
        engine = ENGINES[log["engine"]]
        out.append(LogCase(case["id"], engine, case["role"], log, case, _parse(log, engine)))
    return out


def _parse(log: Mapping[str, Any], engine: Engine) -> ParsedLog:
    """The log read by the parser; a quote with no engine line (prose about a run) reads as
    a log that printed nothing."""
    name = PARSER_ENGINE[engine]
    try:
        return parse_engine_log(log["quote"], name)
    except LogNotRecognised:
        return ParsedLog(name, None, Settings(), Reported(), (), ())


# --- what the log printed -----------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """One side of the comparison, in bytes; None where the side has no such figure."""

    pool: int | None
    budget: int | None
    weights: int | None
    activation: int | None
    non_torch: int | None
    cudagraph_estimate: int | None
    cudagraph_subtracted: int | None
    cudagraph_captured: int | None = None


def binding_rank(parsed: ParsedLog) -> str | None:
    """The rank whose pool sets the blocks: every worker keeps the smallest block count
    (vLLM get_kv_cache_configs), so with several ranks printing their non-KV memory the one
    with the most. None: the figures the log printed without a rank, or one rank's only."""
    by_rank = parsed.by_rank("non_kv_cache_bytes")
    if len(by_rank) < 2:
        return None
    return max(by_rank, key=lambda rank: int(by_rank[rank]))


def _at(parsed: ParsedLog, field: str, rank: str | None) -> int | None:
    value = parsed.by_rank(field).get(rank) if rank is not None else None
    if value is None:
        value = getattr(parsed.reported, field)
    return None if value is None else int(value)


def logged_figures(parsed: ParsedLog) -> Figures:
    """What the log printed, for its binding rank."""
    r = parsed.reported
    rank = binding_rank(parsed)
    pool = r.kv_pool_bytes
    if rank is not None and r.requested_memory_bytes is not None:
        pool = r.requested_memory_bytes - int(parsed.by_rank("non_kv_cache_bytes")[rank])
    return Figures(
        pool=pool,
        budget=r.requested_memory_bytes,
        weights=_at(parsed, "weights_bytes", rank) or r.model_loading_bytes,
        activation=_at(parsed, "activation_peak_bytes", rank),
        non_torch=_at(parsed, "non_torch_bytes", rank),
        cudagraph_estimate=r.cudagraph_estimate_bytes,
        cudagraph_subtracted=None,
        cudagraph_captured=r.cudagraph_bytes,
    )


def pool_from_counts(parsed: ParsedLog, capacity: Capacity) -> int | None:
    """A pool the log gives only as blocks or tokens, in bytes by kvplan's own layout."""
    r = parsed.reported
    layout = capacity.layout
    if capacity.engine is Engine.SGLANG:
        tokens = r.max_total_num_tokens or r.kv_cache_tokens
        return None if tokens is None else tokens * capacity.kv_bytes_per_token_per_gpu
    if r.num_gpu_blocks is not None:
        return r.num_gpu_blocks * layout.bytes_per_block
    if r.kv_cache_tokens is not None and len(layout.groups) == 1:
        return r.kv_cache_tokens // layout.block_size * layout.bytes_per_block
    return None


# --- the prediction -----------------------------------------------------------------------


@dataclass(frozen=True)
class Models:
    """Where models come from: the catalog's architectures and the config.json fixtures."""

    catalog: Mapping[str, ModelArchitecture]
    gpus: Mapping[str, Gpu]
    configs: Path


def case_model(case: Mapping[str, Any], models: Models) -> ModelArchitecture | str:
    """The case's model, or why there is none."""
    ref = case.get("model")
    if not ref:
        return str(case.get("no_model", "no model"))
    if "catalog" in ref:
        arch = models.catalog.get(ref["catalog"])
        return arch if arch is not None else f"catalog has no model {ref['catalog']!r}"
    config = json.loads((models.configs / ref["config"]).read_text("utf-8"))
    if "quantization_config" in ref:
        config = {**config, "quantization_config": ref["quantization_config"]}
    return architecture_from_hf_config(config, name=ref["config"].removesuffix(".json"))


def case_gpu(case: Mapping[str, Any], models: Models, parsed: ParsedLog) -> Gpu | None:
    """The catalog's GPU, with the total the log itself printed when it printed one."""
    slug = case.get("gpu")
    if slug is None:
        return None
    gpu = models.gpus[slug]
    total = parsed.reported.total_memory_bytes
    if total is None:
        return gpu
    return Gpu(total, gpu.name, gpu.slug, gpu.price_usd_per_hour, gpu.max_gpus_per_node)


def case_options(item: LogCase) -> tuple[Workload, Parallelism, EngineOptions]:
    """The question the log answers: context, layout and the flags it ran with."""
    log, flags, settings = item.log, item.case.get("flags", {}), item.parsed.settings
    model = item.case.get("model") or {}
    context = flags.get("max_model_len") or log.get("max_model_len") or settings.max_model_len
    if not context:
        raise SizingError("max_model_len", f"{item.id}: neither the log nor its case gives it")
    fraction = log.get("gpu_memory_utilization")
    engine_only = item.engine is Engine.VLLM
    options = EngineOptions(
        engine=item.engine,
        engine_version=item.case.get("engine_version"),
        gpu_memory_utilization=fraction if engine_only else None,
        mem_fraction_static=fraction if item.engine is Engine.SGLANG else None,
        free_gpu_memory_fraction=fraction if item.engine is Engine.TRTLLM else None,
        block_size=log.get("block_size") if engine_only else None,
        max_num_batched_tokens=log.get("max_num_batched_tokens") if engine_only else None,
        max_num_seqs=flags.get("max_num_seqs") or settings.max_num_seqs,
        enable_prefix_caching=log.get("enable_prefix_caching"),
        enforce_eager=bool(flags.get("enforce_eager") or settings.enforce_eager),
        weight_format=model.get("weight_format"),
    )
    parallel = Parallelism(log.get("tp") or 1, log.get("pp") or 1)
    kv_cache_dtype = parse_kv_cache_dtype(log.get("kv_cache_dtype") or "auto")
    return Workload(int(context), kv_cache_dtype), parallel, options


def predicted_cudagraph_estimate(arch: ModelArchitecture, capacity: Capacity) -> int | None:
    """The "Estimated CUDA graph memory" kvplan expects a vLLM log to print (0.18+), whether
    or not the release subtracts it; None where no estimate is printed."""
    settings = capacity.engine_settings
    estimate = vllm_cudagraph_estimate(
        arch,
        vllm_release(parse_vllm_version(capacity.engine_version)),
        pipeline_parallel_size=capacity.facts.parallel.pipeline_parallel_size,
        max_num_seqs=int(str(settings["max_num_seqs"])),
        max_num_batched_tokens=int(str(settings["max_num_batched_tokens"])),
        enforce_eager=bool(settings["enforce_eager"]),
    )
    return estimate or None


def predicted_figures(item: LogCase, arch: ModelArchitecture, capacity: Capacity) -> Figures:
    budget = capacity.budget
    estimate = None
    if item.engine is Engine.VLLM:
        estimate = predicted_cudagraph_estimate(arch, capacity)
    return Figures(
        pool=budget.pool_bytes,
        budget=budget.requested_bytes,
        weights=budget.weights_bytes,
        activation=budget.activation_bytes,
        non_torch=budget.non_torch_bytes,
        cudagraph_estimate=estimate,
        cudagraph_subtracted=budget.cudagraph_bytes,
    )


# --- one row per log ----------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """A log, kvplan's figures beside the logged ones, and the error in the pool."""

    item: LogCase
    logged: Figures
    predicted: Figures | None
    capacity: Capacity | None
    why_not: str | None

    @property
    def budget(self) -> int | None:
        return self.logged.budget or (self.predicted.budget if self.predicted else None)

    @property
    def error(self) -> float | None:
        """(predicted pool - logged pool) / budget; None where either is missing."""
        if self.predicted is None or self.logged.pool is None or not self.budget:
            return None
        assert self.predicted.pool is not None
        return (self.predicted.pool - self.logged.pool) / self.budget


def compare(item: LogCase, models: Models) -> Row:
    logged = logged_figures(item.parsed)
    arch = case_model(item.case, models)
    if isinstance(arch, str):
        return Row(item, logged, None, None, arch)
    gpu = case_gpu(item.case, models, item.parsed)
    if gpu is None:
        return Row(item, logged, None, None, str(item.case.get("no_gpu", "no GPU")))
    try:
        capacity = compute_capacity(arch, gpu, *case_options(item))
    except SizingError as exc:
        return Row(item, logged, None, None, f"kvplan refuses it: {exc.field}: {exc.reason}")
    if logged.pool is None:
        logged = Figures(
            pool_from_counts(item.parsed, capacity),
            logged.budget,
            logged.weights,
            logged.activation,
            logged.non_torch,
            logged.cudagraph_estimate,
            logged.cudagraph_subtracted,
            logged.cudagraph_captured,
        )
    return Row(item, logged, predicted_figures(item, arch, capacity), capacity, None)


def compare_all(models: Models) -> list[Row]:
    return [compare(item, models) for item in log_cases()]


# --- the summary --------------------------------------------------------------------------


@dataclass(frozen=True)
class Share:
    """How many logs of a set land within WITHIN, and the median |error|."""

    logs: int
    sized: int
    within: int
    median: float | None

    @property
    def share(self) -> float:
        """Within WITHIN, of the logs kvplan sized."""
        return self.within / self.sized if self.sized else 0.0

    @property
    def share_of_all(self) -> float:
        """Within WITHIN, counting the logs kvplan cannot size as misses."""
        return self.within / self.logs if self.logs else 0.0


def share(rows: list[Row]) -> Share:
    errors = [abs(e) for e in (row.error for row in rows) if e is not None]
    return Share(
        logs=len(rows),
        sized=len(errors),
        within=sum(1 for e in errors if e <= WITHIN),
        median=statistics.median(errors) if errors else None,
    )


@dataclass(frozen=True)
class Summary:
    complete: Share
    complete_fitted: Share
    complete_held_out: Share
    every_log: Share
    not_sized: tuple[str, ...]

    @property
    def meets_targets(self) -> bool:
        c = self.complete
        return c.share >= TARGET_SHARE and c.median is not None and c.median <= TARGET_MEDIAN


def summarize(rows: list[Row]) -> Summary:
    complete = [row for row in rows if row.item.complete]
    return Summary(
        complete=share(complete),
        complete_fitted=share([row for row in complete if row.item.role == "fit"]),
        complete_held_out=share([row for row in complete if row.item.role != "fit"]),
        every_log=share([row for row in rows if row.logged.pool is not None]),
        not_sized=tuple(row.item.id for row in complete if row.error is None),
    )


# --- the log's own pool, replayed ---------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    """kvplan's report fed the pool the log itself printed: as whole blocks where the log
    prints the block count (or tokens that are whole blocks of one group), else the rounded
    GiB it printed. The lines kvplan would print, and the log's figures beside them."""

    pool_bytes: int
    from_counts: bool
    lines: tuple[str, ...]
    tokens: int
    concurrency: float
    logged_tokens: int | None
    logged_concurrency: float | None

    @property
    def exact(self) -> bool | None:
        """Tokens and concurrency (as printed, 2 decimals) equal the log's; None where the
        log prints neither, or its pool only in rounded GiB."""
        if not self.from_counts or (self.logged_tokens is None and self.logged_concurrency is None):
            return None
        tokens_ok = self.logged_tokens is None or self.logged_tokens == self.tokens
        shown = f"{self.concurrency:.2f}"
        conc_ok = self.logged_concurrency is None or float(shown) == self.logged_concurrency
        return tokens_ok and conc_ok


def replay(row: Row, models: Models) -> Replay | None:
    """Feed the log's pool back in as `kv_pool_bytes`; None where kvplan sized nothing."""
    if row.capacity is None or row.logged.pool is None:
        return None
    r = row.item.parsed.reported
    counted = pool_from_counts(row.item.parsed, row.capacity)
    pool = row.logged.pool if counted is None else counted
    workload, parallel, options = case_options(row.item)
    arch = case_model(row.item.case, models)
    gpu = case_gpu(row.item.case, models, row.item.parsed)
    assert not isinstance(arch, str)
    assert gpu is not None
    again = compute_capacity(arch, gpu, workload, parallel, _with_pool(options, pool))
    logged_tokens = r.kv_cache_tokens if row.item.engine is Engine.VLLM else r.max_total_num_tokens
    return Replay(
        pool_bytes=pool,
        from_counts=counted is not None,
        lines=again.report.log_lines,
        tokens=again.kv_cache_tokens,
        concurrency=again.report.max_concurrency,
        logged_tokens=logged_tokens,
        logged_concurrency=r.max_concurrency,
    )


def _with_pool(options: EngineOptions, pool: int) -> EngineOptions:
    return replace(options, kv_pool_bytes=pool)
