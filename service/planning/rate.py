"""Plans for a rate (issue 23 item 2): POST /v1/plans and `kvplan plan` with a `workload`.

The planner (`service.sizing`'s `plan`) finds every GPU and layout that holds one sequence;
each is then given the replicas that serve the workload's `request_rate` within the percentile
targets, in two passes:

1. Analytic, every candidate, from the speed model's step table (the simulator's own,
   `service.simulation.step_table`): the batch b a replica runs is the largest that memory
   (num_gpu_blocks // blocks of a mean request), max_num_seqs and the TPOT target allow; a
   request then holds a replica for prefill(I) + O x decode(b) / b ms (I, O the mean input and
   output tokens), so one replica serves mu = 1000 / that requests per second, and Little's law
   puts rate x (prefill(I) + O x decode(b)) / 1000 requests in flight. The replicas are
   max(ceil(rate / (mu x UTILISATION)), ceil(in flight / b)).
2. Simulated, the FINALISTS cheapest (by the analytic replicas x the price per replica): one
   replica of the option under the workload at request_rate / replicas
   (`service.simulation.run`, vLLM's V1 scheduler), fewer replicas tried while the targets
   still hold, more while they do not.

Each option then carries its cost per million output (and input) tokens: cost_per_hour_usd /
(tokens per second x 3600) x 10^6, the whole cost over one kind of token.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..catalog.snapshot import CatalogSnapshot
from ..kit.metrics import Metrics
from ..simulation import (
    Distribution,
    EngineConfig,
    Lengths,
    SimulationError,
    StepTable,
    Summary,
    Workload,
    draw_requests,
    engine_config,
    run,
    step_table,
)
from ..sizing import (
    Engine,
    ModelArchitecture,
    Plan,
    PlanOption,
    Rejection,
    SizingError,
    left_out_warning,
    served_model,
    without_flags,
)
from ..sizing import plan as search_plans
from . import calibrated, service
from .schemas import (
    PEAK_ONLY,
    RATE_TARGETS,
    DistributionOut,
    PlanAnswer,
    PlanFields,
    PlanOptionOut,
    WorkloadIn,
)

# The share of a replica's time the analytic pass lets the rate fill: queues grow without
# bound as it nears 1, and the simulation of the finalists says where the targets hold.
UTILISATION = 0.8
# Candidates simulated (cheapest by the analytic pass first), and simulations per candidate.
FINALISTS = 4
MAX_SIMULATIONS = 10
DEFAULT_NUM_REQUESTS = 2000
# Rejection codes, as the planner's latency targets spell theirs (sizing TargetMiss).
SIMULATED_MISS = "percentile-over-target"
NO_ESTIMATE = "no-speed-estimate"


def _miss_code(reason: str) -> str:
    """An analytic pass's reason as a code: which target one replica misses on its own."""
    for metric in ("ttft", "tpot"):
        if reason.startswith(metric):
            return f"{metric}-over-target"
    return "sequence-does-not-fit"


@dataclass(frozen=True, slots=True)
class Target:
    """One percentile target: `metric` (ttft_ms or tpot_ms) at p`percentile` within `ms`."""

    metric: str
    percentile: str
    ms: float

    @property
    def name(self) -> str:
        return f"{self.metric.removesuffix('_ms')}_p{self.percentile}_ms"


def targets_of(fields: PlanFields) -> tuple[Target, ...]:
    """The targets asked (ttft_p99_ms, tpot_p90_ms, ...)."""
    targets = []
    for name in RATE_TARGETS:
        value = getattr(fields, name)
        if value is not None:
            metric, percentile, _ = name.split("_")
            targets.append(Target(f"{metric}_ms", percentile.removeprefix("p"), value))
    return tuple(targets)


def misses(summary: Summary, targets: Sequence[Target]) -> list[str]:
    """The targets a simulation misses, each with its figure (a TPOT of NaN, every answer one
    token long, misses nothing)."""
    missed = []
    for target in targets:
        value = getattr(getattr(summary, target.metric), f"p{target.percentile}")
        if not math.isnan(value) and value > target.ms:
            missed.append(f"{target.name} {value:.1f} > {target.ms:g}")
    return missed


def check(fields: PlanFields) -> None:
    """What does not combine with a workload (or is missing), refused by name."""
    if fields.workload is None:
        if fields.peak_concurrency is None:
            raise SizingError("peak_concurrency", "give peak_concurrency or a workload")
        for name in RATE_TARGETS:
            if getattr(fields, name) is not None:
                raise SizingError(name, "a target of a plan for a rate: give a workload")
        return
    for name, instead in PEAK_ONLY.items():
        if getattr(fields, name) is not None:
            raise SizingError(name, f"does not combine with a workload: {instead}")
    if fields.workload.request_rate is None:
        raise SizingError("workload.request_rate", "a plan for a rate needs request_rate")
    if fields.rank_by != "cost":
        raise SizingError(
            "rank_by", "a plan for a rate ranks by cost per million output tokens (cost)"
        )
    if fields.engine != Engine.VLLM.value:
        raise SizingError("engine", "a plan for a rate simulates vLLM's scheduler only so far")
    if not targets_of(fields):
        raise SizingError("ttft_p99_ms", "a workload needs a target: ttft_p99_ms, tpot_p99_ms")


def workload_of(body: WorkloadIn) -> Workload:
    """The simulator's workload at the whole rate (num_requests 2000 unless given)."""
    num = body.num_requests
    if num is None and body.duration_s is None:
        num = DEFAULT_NUM_REQUESTS
    try:
        return Workload(
            Lengths.of("workload.input_tokens", body.input_tokens),
            Lengths.of("workload.output_tokens", body.output_tokens),
            request_rate=body.request_rate,
            num_requests=num,
            duration_s=body.duration_s,
            prefix_cache_hit_rate=body.prefix_cache_hit_rate,
            seed=body.seed,
        )
    except SimulationError as exc:
        raise SizingError(exc.field, exc.reason) from exc


@dataclass(frozen=True, slots=True)
class Means:
    """The mean input and output tokens of the workload's requests, as drawn."""

    input_tokens: float
    output_tokens: float


def means_of(workload: Workload) -> Means:
    requests = draw_requests(workload, 16)
    n = len(requests) or 1
    return Means(
        sum(r.input_tokens for r in requests) / n, sum(r.output_tokens for r in requests) / n
    )


def analytic_replicas(
    table: StepTable,
    config: EngineConfig,
    rate: float,
    means: Means,
    targets: Sequence[Target],
) -> int | str:
    """The analytic pass (module docstring): replicas, or why no count of them will do."""
    tokens = means.input_tokens + means.output_tokens
    blocks = max(1, math.ceil(tokens / config.block_size))
    batch = min(config.max_num_seqs, config.num_gpu_blocks // blocks)
    if batch < 1:
        return f"a mean request ({tokens:.0f} tokens) needs {blocks} blocks; the pool holds " + (
            f"{config.num_gpu_blocks}"
        )
    context = means.input_tokens + means.output_tokens / 2
    prefill = table.prefill(math.ceil(means.input_tokens))
    for target in targets:
        if target.metric == "ttft_ms" and prefill > target.ms:
            return f"{target.name}: one prefill alone takes {prefill:.1f} ms"
        if target.metric == "tpot_ms":
            if table.decode(1, context) > target.ms:
                return f"{target.name}: one sequence's decode step takes " + (
                    f"{table.decode(1, context):.1f} ms"
                )
            low, high = 1, batch  # decode grows with the batch: the largest within the target
            while low < high:
                mid = (low + high + 1) // 2
                low, high = (
                    (mid, high) if table.decode(mid, context) <= target.ms else (low, mid - 1)
                )
            batch = low
    decode = table.decode(batch, context)
    held_ms = prefill + means.output_tokens * decode / batch
    busy = rate * held_ms / 1000 / UTILISATION
    in_flight = rate * (prefill + means.output_tokens * decode) / 1000
    return max(1, math.ceil(busy), math.ceil(in_flight / batch))


def choose_replicas(
    simulate_at: Callable[[int], Summary],
    start: int,
    targets: Sequence[Target],
    max_replicas: int,
) -> tuple[int, Summary] | str:
    """The fewest replicas from `start` whose one replica, simulated at rate / replicas, meets
    the targets: fewer tried while they hold, more (by a quarter, at least one) while they do
    not; at most MAX_SIMULATIONS runs. A string says why none was found."""
    replicas = min(start, max_replicas)
    summary = simulate_at(replicas)
    runs = 1
    if misses(summary, targets):
        while misses(summary, targets):
            if replicas >= max_replicas or runs >= MAX_SIMULATIONS:
                return f"{', '.join(misses(summary, targets))} at {replicas} replicas"
            replicas = min(max_replicas, replicas + max(1, replicas // 4))
            summary = simulate_at(replicas)
            runs += 1
        return replicas, summary
    while replicas > 1 and runs < MAX_SIMULATIONS:
        fewer = simulate_at(replicas - 1)
        runs += 1
        if misses(fewer, targets):
            break
        replicas, summary = replicas - 1, fewer
    return replicas, summary


def cost_per_million(cost_per_hour_usd: float | None, tokens_per_second: float) -> float | None:
    """US dollars per million tokens: the cost of an hour over the tokens of an hour."""
    if cost_per_hour_usd is None or tokens_per_second <= 0:
        return None
    return cost_per_hour_usd / (tokens_per_second * 3600) * 1_000_000


@dataclass(frozen=True, slots=True)
class _Candidate:
    option: PlanOption  # one replica
    config: EngineConfig
    table: StepTable
    replicas: int  # the analytic pass's


@dataclass(frozen=True, slots=True)
class _Chosen:
    option: PlanOption  # with its replicas
    summary: Summary


def plan_for_rate(
    question: service.PlanQuestion, catalog: CatalogSnapshot, metrics: Metrics | None = None
) -> PlanAnswer:
    """POST /v1/plans with a workload (module docstring)."""
    fields = question.fields
    assert fields.workload is not None
    workload = workload_of(fields.workload)
    targets = targets_of(fields)
    rate = float(fields.workload.request_rate or 0)
    label, arch = service._resolve_model(question.model, catalog)
    gpus = service._candidate_gpus(question.gpus, catalog)
    hook = calibrated.CalibrationHook(
        catalog, calibrated.model_key(question.model, label), arch, fields.weight_format
    )
    pool = None if fields.kv_pool_bytes is not None or not hook.may_match else hook
    one = fields.model_copy(update={"peak_concurrency": 1})
    request = dataclasses.replace(
        service._plan_request(one, catalog), max_alternatives=100_000, headroom_fraction=0.0
    )
    found = search_plans(arch, gpus, request, pool)
    means = means_of(workload)
    rejected = list(found.rejected)
    candidates = _analytic(arch, found, _Load(rate, means, targets), rejected)
    chosen = _simulated(
        candidates, workload, _Load(rate, means, targets), fields.max_replicas, rejected
    )
    chosen.sort(key=lambda c: _rank(c.option))
    if metrics is not None:
        metrics.plans.labels("feasible" if chosen else "infeasible").inc()
    shown = chosen[: 1 + fields.max_alternatives]
    warnings = [
        f"a plan for a rate: {len(candidates)} candidates sized analytically, the "
        f"{min(len(candidates), FINALISTS)} cheapest simulated ({len(draw_requests(workload, 16))} "
        "requests each run, one replica at request_rate / replicas)",
    ]
    options, notes = _vllm_flags_only([c.option for c in shown])
    result = Plan(
        request=request,
        recommendation=options[0] if options else None,
        alternatives=tuple(options[1:]),
        rejected=tuple(rejected),
        warnings=(*found.warnings, *warnings, *notes),
        alternatives_omitted=len(chosen) - len(shown),
    )
    answer = service._plan_answer(result, label, catalog.version, question.explain, hook)
    outs = [
        _with_rate(out, c, rate, means)
        for out, c in zip(
            [o for o in (answer.recommendation, *answer.alternatives) if o is not None],
            shown,
            strict=True,
        )
    ]
    answer.recommendation = outs[0] if outs else None
    answer.alternatives = outs[1:]
    answer.peak_concurrency = None
    answer.request_rate = rate
    answer.kv_cache_dtype = fields.kv_cache_dtype
    answer.warnings[:0] = [
        *service._notes(question.model),
        *service._gpu_notes(question.gpus, catalog),
    ]
    return answer


def _vllm_flags_only(options: list[PlanOption]) -> tuple[list[PlanOption], list[str]]:
    """A plan for a rate's options with vLLM's flags alone: its replicas and percentiles are
    vLLM's scheduler's (the simulator runs no other engine), so SGLang's equivalents would
    paste numbers no simulation stands behind. Said once, unless the planner already left
    SGLang out for the model (its own warning then says why)."""
    if not options or all("sglang" in o.flags_left_out for o in options):
        return options, []
    reason = (
        "a plan for a rate simulates vLLM's scheduler only (its replicas and percentiles are "
        "vLLM's), so SGLang's flags would carry numbers no simulation checked"
    )
    return without_flags(options, ["sglang"]), [left_out_warning("sglang", reason)]


def _rank(option: PlanOption) -> tuple[bool, float, int]:
    """Cheapest per output token first (at one rate: cheapest an hour), unpriced last."""
    cost = option.cost_per_hour_usd
    return (cost is None, cost or 0.0, option.total_gpus)


@dataclass(frozen=True, slots=True)
class _Load:
    rate: float
    means: Means
    targets: tuple[Target, ...]


def _analytic(
    arch: ModelArchitecture, found: Plan, load: _Load, rejected: list[Rejection]
) -> list[_Candidate]:
    """Every option the planner found, with the analytic pass's replicas (cheapest first)."""
    candidates = []
    for option in (*((found.recommendation,) if found.recommendation else ()), *found.alternatives):
        if option.data_parallel_size > 1:
            continue  # the simulator runs one engine core
        try:
            served, _ = served_model(arch, option.gpu, option.engine)
            config = engine_config(option.capacity)
            table = step_table(
                served,
                option.gpu,
                option.capacity,
                config,
                weight_format=option.engine.weight_format,
            )
        except SimulationError as exc:
            rejected.append(_rejection(option, f"{exc.field}: {exc.reason}", NO_ESTIMATE))
            continue
        replicas = analytic_replicas(table, config, load.rate, load.means, load.targets)
        if isinstance(replicas, str):
            rejected.append(_rejection(option, replicas, _miss_code(replicas)))
            continue
        candidates.append(_Candidate(option, config, table, replicas))
    candidates.sort(
        key=lambda c: (
            c.option.cost_per_hour_usd is None,
            (c.option.cost_per_hour_usd or 0.0) * c.replicas,
            c.option.total_gpus * c.replicas,
        )
    )
    return candidates


def _simulated(
    candidates: Sequence[_Candidate],
    workload: Workload,
    load: _Load,
    max_replicas: int,
    rejected: list[Rejection],
) -> list[_Chosen]:
    """The finalists simulated, each at the replicas that meet the targets; a finalist that
    cannot is rejected and the next candidate takes its place."""
    chosen: list[_Chosen] = []
    for candidate in candidates:
        if len(chosen) >= FINALISTS:
            break

        def at(replicas: int, c: _Candidate = candidate) -> Summary:
            share = dataclasses.replace(workload, request_rate=load.rate / replicas)
            return run(c.config, c.table, share)

        try:
            outcome = choose_replicas(at, candidate.replicas, load.targets, max_replicas)
        except SimulationError as exc:
            rejected.append(_rejection(candidate.option, exc.reason, NO_ESTIMATE))
            continue
        if isinstance(outcome, str):
            rejected.append(_rejection(candidate.option, outcome, SIMULATED_MISS))
            continue
        replicas, summary = outcome
        chosen.append(_Chosen(_replicated(candidate.option, replicas), summary))
    return chosen


def _replicated(option: PlanOption, replicas: int) -> PlanOption:
    """One replica's option as `replicas` of it (no speed figures at a peak: the simulation's
    percentiles take their place)."""
    cost = option.cost_per_hour_usd
    return dataclasses.replace(
        option,
        replicas=replicas,
        total_gpus=option.total_gpus * replicas,
        cost_per_hour_usd=None if cost is None else round(cost * replicas, 6),
        speed=None,
    )


def _rejection(option: PlanOption, reason: str, code: str) -> Rejection:
    return Rejection(
        option.gpu, option.tensor_parallel_size, code, reason, option.pipeline_parallel_size
    )


def _distribution(value: Distribution) -> DistributionOut:
    return DistributionOut(
        **{k: None if math.isnan(v) else round(v, 3) for k, v in dataclasses.asdict(value).items()}
    )


def _with_rate(out: PlanOptionOut, chosen: _Chosen, rate: float, means: Means) -> PlanOptionOut:
    """The option's answer with the rate's figures: cost per million tokens, percentiles."""
    output_per_s = rate * means.output_tokens
    cost = chosen.option.cost_per_hour_usd
    per_million_out = cost_per_million(cost, output_per_s)
    per_million_in = cost_per_million(cost, rate * means.input_tokens)
    summary = chosen.summary
    return out.model_copy(
        update={
            "request_rate_per_replica": round(rate / chosen.option.replicas, 6),
            "output_tokens_per_second_at_rate": round(output_per_s, 1),
            "cost_per_million_output_tokens_usd": (
                None if per_million_out is None else round(per_million_out, 4)
            ),
            "cost_per_million_input_tokens_usd": (
                None if per_million_in is None else round(per_million_in, 4)
            ),
            "ttft_ms": _distribution(summary.ttft_ms),
            "tpot_ms": _distribution(summary.tpot_ms),
            "e2e_latency_ms": _distribution(summary.e2e_latency_ms),
            "tokens_per_dollar": (None if not cost else round(output_per_s * 3600 / cost, 1)),
        }
    )
