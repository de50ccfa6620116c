"""Plans for a rate (issue 23 item 2): POST /v1/plans and `kvplan plan` with a `workload`.

The planner (`service.sizing`'s `plan`) finds every GPU and layout that holds one sequence;
each is then given the replicas that serve the workload's `request_rate` within the percentile
targets, in two passes:

1. Analytic, every candidate, from the speed model's step table (the simulator's own,
   `service.simulation.step_table`, its decode times a speed calibration's scale where one
   has the candidate's key, as a capacity answer's): the batch b a replica runs is the largest
   that memory (num_gpu_blocks // blocks of a mean request), max_num_seqs and the TPOT target
   allow; a request then holds a replica for prefill(I) + O x decode(b) / b ms (I, O the mean
   input and output tokens), so one replica serves mu = 1000 / that requests per second, and
   Little's law puts rate x (prefill(I) + O x decode(b)) / 1000 requests in flight. The
   replicas are max(ceil(rate / (mu x UTILISATION)), ceil(in flight / b)); at utilisation 1
   the same formula gives the candidate's LOWER BOUND, the fewest replicas the analytic model
   says could serve the rate and hold its requests.
2. Simulated, by branch and bound: candidates in order of their lower bound's cost (the
   bound's replicas x the price per replica), each one replica of the option under the
   workload at request_rate / replicas (`service.simulation.run`: the candidate's engine's
   scheduler, vLLM's V1 or SGLang's; the planner searches one engine, the question's), from
   the analytic replicas, fewer tried while the targets still hold, more while they do not.
   The search stops once the next candidate's lower bound costs more than the k-th cheapest
   simulated option (k = FINALISTS, or fewer when fewer are shown), or after MAX_CANDIDATES
   candidates simulated; a simulated option dearer than an unsimulated candidate's lower
   bound is not shown (that candidate might beat it). The analytic pass alone could leave an
   option out that the simulation trims (GB200 at 20/s: two replicas analytically, one
   simulated). An engine whose scheduler is not simulated (TensorRT-LLM) is refused by name.

Each candidate is simulated with the running cap its flags paste (`max_num_seqs`: vLLM
--max-num-seqs, SGLang --max-running-requests), and its answer pastes the flags of the engine
simulated only (another engine's scheduler would meet other latencies).

Each option then carries its cost per million output (and input) tokens: cost_per_hour_usd /
(tokens per second x 3600) x 10^6, the whole cost over one kind of token.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..catalog.snapshot import CatalogSnapshot
from ..kit.metrics import Metrics
from ..simulation import (
    SGLANG_NO_BATCHED_TOKENS,
    SIMULATED_ENGINES,
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
    Capacity,
    Gpu,
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
    DisaggregatedOut,
    DistributionOut,
    PlanAnswer,
    PlanFields,
    PlanOptionOut,
    WorkloadIn,
)

# The share of a replica's time the analytic pass lets the rate fill: queues grow without
# bound as it nears 1, and the simulation of the finalists says where the targets hold.
UTILISATION = 0.8
# Options the branch and bound proves the cheapest (module docstring), the most candidates
# it simulates (to keep a plan interactive), and simulations per candidate.
FINALISTS = 4
MAX_CANDIDATES = 12
MAX_SIMULATIONS = 10
DEFAULT_NUM_REQUESTS = 2000
# Split pools are chained on vLLM's scheduler (simulation/disaggregated.py); SGLang's decode
# instance runs its own disaggregation loop, which the simulator does not step.
SPLIT_VLLM_ONLY = (
    "disaggregated prefill/decode pools are simulated on vLLM's scheduler only: not planned "
    "for engine=sglang (its disaggregated decode loop is not modelled)"
)
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
        for name in (*RATE_TARGETS, "disaggregated"):
            if getattr(fields, name) is not None:
                raise SizingError(name, "a plan for a rate's field: give a workload")
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
    if fields.engine not in {engine.value for engine in SIMULATED_ENGINES}:
        raise SizingError(
            "engine",
            f"a plan for a rate simulates the engine's scheduler: vLLM's or SGLang's, not "
            f"{fields.engine}'s (engine=vllm or engine=sglang)",
        )
    if not targets_of(fields):
        raise SizingError("ttft_p99_ms", "a workload needs a target: ttft_p99_ms, tpot_p99_ms")
    if fields.disaggregated == "only" and fields.engine != "vllm":
        raise SizingError("disaggregated", SPLIT_VLLM_ONLY)
    if fields.engine == "sglang" and fields.max_num_batched_tokens is not None:
        raise SizingError("max_num_batched_tokens", SGLANG_NO_BATCHED_TOKENS)


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
    *,
    utilisation: float = UTILISATION,
) -> int | str:
    """The analytic pass (module docstring): replicas, or why no count of them will do; at
    `utilisation` 1 the lower bound."""
    context = means.input_tokens + means.output_tokens / 2
    prefill = table.prefill(math.ceil(means.input_tokens))
    batch = memory_batch(config, means)
    if isinstance(batch, str):
        return batch
    for target in targets:
        if target.metric == "ttft_ms" and prefill > target.ms:
            return f"{target.name}: one prefill alone takes {prefill:.1f} ms"
    batch = decode_batch(table, config, means, targets)
    if isinstance(batch, str):
        return batch
    decode = table.decode(batch, context)
    held_ms = prefill + means.output_tokens * decode / batch
    busy = rate * held_ms / 1000 / utilisation
    in_flight = rate * (prefill + means.output_tokens * decode) / 1000
    return max(1, math.ceil(busy), math.ceil(in_flight / batch))


def memory_batch(config: EngineConfig, means: Means) -> int | str:
    """The batch memory and max_num_seqs allow: num_gpu_blocks // blocks of a mean request."""
    tokens = means.input_tokens + means.output_tokens
    blocks = max(1, math.ceil(tokens / config.block_size))
    batch = min(config.max_num_seqs, config.num_gpu_blocks // blocks)
    if batch < 1:
        return f"a mean request ({tokens:.0f} tokens) needs {blocks} blocks; the pool holds " + (
            f"{config.num_gpu_blocks}"
        )
    return batch


def decode_batch(
    table: StepTable, config: EngineConfig, means: Means, targets: Sequence[Target]
) -> int | str:
    """The batch a replica decodes: the largest that memory, max_num_seqs and the TPOT
    targets allow; or why none does."""
    batch = memory_batch(config, means)
    if isinstance(batch, str):
        return batch
    context = means.input_tokens + means.output_tokens / 2
    for target in targets:
        if target.metric != "tpot_ms":
            continue
        if table.decode(1, context) > target.ms:
            return f"{target.name}: one sequence's decode step takes " + (
                f"{table.decode(1, context):.1f} ms"
            )
        low, high = 1, batch  # decode grows with the batch: the largest within the target
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if table.decode(mid, context) <= target.ms else (low, mid - 1)
        batch = low
    return batch


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
    floor: int  # the lower bound's (at utilisation 1)

    @property
    def bound(self) -> float | None:
        """The lower bound's cost an hour (None: unpriced)."""
        cost = self.option.cost_per_hour_usd
        return None if cost is None else cost * self.floor


@dataclass(frozen=True, slots=True)
class Chosen:
    """A simulated option: one pool, or a disaggregated one (`disaggregated` its two pools;
    `option` then the decode pool's, with both pools' GPUs and cost)."""

    option: PlanOption  # with its replicas
    summary: Summary
    disaggregated: DisaggregatedOut | None = None


def plan_for_rate(
    question: service.PlanQuestion, catalog: CatalogSnapshot, metrics: Metrics | None = None
) -> PlanAnswer:
    """POST /v1/plans with a workload (module docstring; disaggregated.py for split pools)."""
    from . import disaggregated  # noqa: PLC0415 (disaggregated.py builds on this module)

    fields = question.fields
    assert fields.workload is not None
    workload = workload_of(fields.workload)
    load = Load(float(fields.workload.request_rate or 0), means_of(workload), targets_of(fields))
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
    rejected = list(found.rejected)
    mode = fields.disaggregated or "auto"
    if fields.engine != "vllm":
        mode = "never"  # SPLIT_VLLM_ONLY: said among the warnings below
    # A speed calibration with a candidate's key scales its decode steps, in the analytic pass
    # and the simulation alike; the hook remembers it for the option's speed_calibrated_from.
    speed = hook.speed_scale if hook.may_match_speed else None
    pools = tabled(arch, found, rejected, speed_scale=speed)
    candidates = [] if mode == "only" else _analytic(pools, load, rejected)
    keep = min(FINALISTS, 1 + fields.max_alternatives)
    bounded = _simulated(candidates, workload, load, (fields.max_replicas, keep), rejected)
    chosen = bounded.chosen
    split: list[Chosen] = []
    note = (
        f"a plan for a rate: {len(candidates)} candidates sized analytically, "
        f"{bounded.note()} ({len(draw_requests(workload, 16))} "
        "requests each run, one replica at request_rate / replicas)"
    )
    if mode != "never":
        search = disaggregated.Search(arch, gpus, fields, catalog, pool)
        # a split pool's rejections are listed when only split pools are planned
        split, paired = disaggregated.split_options(
            search, pools, (workload, load), rejected if mode == "only" else []
        )
        note += (
            f"; {paired} (a prefill and a decode replica chained, each at its pool's share of "
            "request_rate)"
        )
    answer = _answer(
        question, catalog, found, [*chosen, *split], rejected=rejected, context=(label, hook, load)
    )
    answer.warnings.append(note)
    if fields.engine != "vllm" and fields.disaggregated != "never":
        answer.warnings.append(SPLIT_VLLM_ONLY)
    if mode != "never":
        answer.disaggregation = disaggregated.comparison(
            mode, [*chosen, *split], lambda c: _per_million(c, load)
        )
        answer.warnings.append(answer.disaggregation.statement)
    if metrics is not None:
        metrics.plans.labels("feasible" if answer.recommendation else "infeasible").inc()
    return answer


def _per_million(chosen: Chosen, load: Load) -> float | None:
    value = cost_per_million(chosen.option.cost_per_hour_usd, load.rate * load.means.output_tokens)
    return None if value is None else round(value, 4)


def _answer(
    question: service.PlanQuestion,
    catalog: CatalogSnapshot,
    found: Plan,
    chosen: list[Chosen],
    *,
    rejected: list[Rejection],
    context: tuple[str, calibrated.CalibrationHook, Load],
) -> PlanAnswer:
    """The simulated options ranked and shown, each with the rate's figures."""
    label, hook, load = context
    fields = question.fields
    chosen.sort(key=lambda c: _rank(c.option))
    shown = chosen[: 1 + fields.max_alternatives]
    options, notes = _simulated_flags_only([c.option for c in shown], fields.engine)
    result = Plan(
        request=found.request,
        recommendation=options[0] if options else None,
        alternatives=tuple(options[1:]),
        rejected=tuple(rejected),
        warnings=(*found.warnings, *notes),
        alternatives_omitted=len(chosen) - len(shown),
    )
    answer = service._plan_answer(result, label, catalog.version, question.explain, hook)
    outs = [
        _with_rate(out, c, load.rate, load.means)
        for out, c in zip(
            [o for o in (answer.recommendation, *answer.alternatives) if o is not None],
            shown,
            strict=True,
        )
    ]
    answer.recommendation = outs[0] if outs else None
    answer.alternatives = outs[1:]
    answer.peak_concurrency = None
    answer.request_rate = load.rate
    answer.kv_cache_dtype = fields.kv_cache_dtype
    answer.warnings[:0] = [
        *service._notes(question.model),
        *service._gpu_notes(question.gpus, catalog),
    ]
    return answer


def _simulated_flags_only(
    options: list[PlanOption], engine: str
) -> tuple[list[PlanOption], list[str]]:
    """A plan for a rate's options with the simulated engine's flags alone: its replicas and
    percentiles are that engine's scheduler's, so the other engine's equivalents would paste
    numbers no simulation stands behind. Said once per engine left out, unless the planner
    already left it out for the model (its own warning then says why)."""
    others = [e for e in ("vllm", "sglang") if e != engine]
    notes = []
    for other in others:
        if not options or all(other in o.flags_left_out for o in options):
            continue
        reason = (
            f"a plan for a rate simulates {engine}'s scheduler (its replicas and percentiles "
            f"are {engine}'s), so {other}'s flags would carry numbers no simulation checked"
        )
        options = without_flags(options, [other])
        notes.append(left_out_warning(other, reason))
    return options, notes


def _rank(option: PlanOption) -> tuple[bool, float, int]:
    """Cheapest per output token first (at one rate: cheapest an hour), unpriced last."""
    cost = option.cost_per_hour_usd
    return (cost is None, cost or 0.0, option.total_gpus)


@dataclass(frozen=True, slots=True)
class Load:
    rate: float
    means: Means
    targets: tuple[Target, ...]


@dataclass(frozen=True, slots=True)
class Tabled:
    """One replica of an option the planner found, as the simulator takes it."""

    option: PlanOption
    config: EngineConfig
    table: StepTable


def tabled(
    arch: ModelArchitecture,
    found: Plan,
    rejected: list[Rejection],
    *,
    prefill_only: bool = False,
    speed_scale: Callable[[Capacity, Gpu], float | None] | None = None,
) -> list[Tabled]:
    """Every single-engine-core option the planner found, with its scheduler and step table
    (an option the speed model cannot time is rejected; `prefill_only`: a prefill pool's); each
    step table's decode times the option's speed calibration, where one matches."""
    out = []
    for option in (*((found.recommendation,) if found.recommendation else ()), *found.alternatives):
        if option.data_parallel_size > 1:
            continue  # the simulator runs one engine core
        try:
            served, _ = served_model(arch, option.gpu, option.engine)
            # the running cap the option's flags paste (--max-num-seqs, --max-running-requests)
            config = dataclasses.replace(
                engine_config(
                    option.capacity, enable_prefix_caching=option.engine.enable_prefix_caching
                ),
                max_num_seqs=option.max_num_seqs,
            )
            scale = None if speed_scale is None else speed_scale(option.capacity, option.gpu)
            table = step_table(
                served,
                option.gpu,
                option.capacity,
                config,
                weight_format=option.engine.weight_format,
                decode_scale=1.0 if scale is None else scale,
                prefill_only=prefill_only,
            )
        except SimulationError as exc:
            rejected.append(rejection(option, f"{exc.field}: {exc.reason}", NO_ESTIMATE))
            continue
        out.append(Tabled(option, config, table))
    return out


def _analytic(options: Sequence[Tabled], load: Load, rejected: list[Rejection]) -> list[_Candidate]:
    """Every option with the analytic pass's replicas and lower bound, cheapest bound first."""
    candidates = []
    for one in options:
        replicas = analytic_replicas(one.table, one.config, load.rate, load.means, load.targets)
        if isinstance(replicas, str):
            rejected.append(rejection(one.option, replicas, _miss_code(replicas)))
            continue
        floor = analytic_replicas(
            one.table, one.config, load.rate, load.means, load.targets, utilisation=1.0
        )
        assert isinstance(floor, int)  # the same checks passed at UTILISATION
        candidates.append(_Candidate(one.option, one.config, one.table, replicas, floor))
    candidates.sort(
        key=lambda c: (c.bound is None, c.bound or 0.0, c.option.total_gpus * c.floor, c.replicas)
    )
    return candidates


@dataclass(frozen=True, slots=True)
class Bounded:
    """The branch and bound's outcome: the options shown, and what the note says of the rest."""

    chosen: list[Chosen]
    simulated: int  # candidates simulated
    unsimulated: int  # candidates left
    next_bound: float | None  # the cheapest lower bound left ($/h), None: none priced left
    capped: bool  # stopped at the cap on simulations, not by the bound
    withheld: int  # simulated options not shown: an unsimulated bound is below their cost

    keep: int  # the cheapest options the bound proves

    def note(self) -> str:
        """How many were simulated, and why the rest could not beat the ones shown."""
        if not self.unsimulated:
            return f"all {self.simulated} simulated"
        rest = f"the other {self.unsimulated}'s lower bound (replicas at utilisation 1) " + (
            "is unpriced" if self.next_bound is None else f"is ${self.next_bound:.2f}/h or more"
        )
        if self.capped:
            said = f"{self.simulated} simulated, the most simulated ({rest}, not above the "
            said += f"{self.keep} cheapest simulated: the ranking past them is not proven)"
        else:
            said = f"{self.simulated} simulated cheapest lower bound first ({rest}, above the "
            said += f"{self.keep} cheapest simulated: none of them could beat those)"
        if self.withheld:
            said += f"; {self.withheld} simulated not shown (dearer than that lower bound)"
        return said


def _simulated(
    candidates: Sequence[_Candidate],
    workload: Workload,
    load: Load,
    limits: tuple[int, int],
    rejected: list[Rejection],
) -> Bounded:
    """Branch and bound (module docstring): candidates simulated cheapest lower bound first,
    each at the replicas that meet the targets, until the next bound costs more than the
    k-th cheapest simulated option (`limits`: max_replicas and k); one that cannot meet
    them is rejected."""
    max_replicas, keep = limits
    return branch_and_bound(
        [(c.bound, c) for c in candidates],
        lambda c: _simulate(c, workload, load, max_replicas, rejected),
        keep=keep,
        most=MAX_CANDIDATES,
    )


_Item = TypeVar("_Item")


def branch_and_bound(
    bounded_items: Sequence[tuple[float | None, _Item]],
    simulate: Callable[[_Item], Chosen | None],
    *,
    keep: int,
    most: int,
) -> Bounded:
    """Simulate the items (each with its lower bound, cheapest first) until the next bound
    costs more than the `keep`-th cheapest simulated option, or `most` are simulated; a
    simulation that meets no target gives None (the item rejected by `simulate`)."""
    chosen: list[Chosen] = []
    done = 0
    for bound, item in bounded_items:
        if bound_closes(bound, chosen, keep) or done >= most:
            break
        done += 1
        one = simulate(item)
        if one is not None:
            chosen.append(one)
    return bounded(chosen, done, [b for b, _ in bounded_items[done:]], keep)


def bounded(chosen: list[Chosen], done: int, left: Sequence[float | None], keep: int) -> Bounded:
    """The outcome of a branch and bound that simulated `done` candidates and left those whose
    lower bounds are `left` (cheapest first): the options no unsimulated one might beat."""
    bound = left[0] if left else None
    shown = [c for c in chosen if not _beatable(_cost(c), bound)]
    capped = bool(left) and not bound_closes(bound, chosen, keep)
    return Bounded(shown, done, len(left), bound, capped, len(chosen) - len(shown), keep)


def _beatable(cost: float | None, bound: float | None) -> bool:
    """Whether an unsimulated candidate whose lower bound is `bound` might cost less."""
    return cost is not None and bound is not None and cost > bound


def _cost(chosen: Chosen) -> float | None:
    return chosen.option.cost_per_hour_usd


def bound_closes(bound: float | None, chosen: Sequence[Chosen], keep: int) -> bool:
    """Whether a candidate whose lower bound costs `bound` an hour, and so every later one,
    cannot be among the `keep` cheapest: the bound is above the keep-th cheapest priced option
    simulated (an unpriced candidate: once keep priced options are found)."""
    costs = sorted(c for c in map(_cost, chosen) if c is not None)
    if len(costs) < keep:
        return False
    return bound is None or bound > costs[keep - 1]


def _simulate(
    candidate: _Candidate,
    workload: Workload,
    load: Load,
    max_replicas: int,
    rejected: list[Rejection],
) -> Chosen | None:
    """One candidate simulated at the replicas that meet the targets, or rejected."""

    def at(replicas: int) -> Summary:
        share = dataclasses.replace(workload, request_rate=load.rate / replicas)
        return run(candidate.config, candidate.table, share)

    try:
        outcome = choose_replicas(at, candidate.replicas, load.targets, max_replicas)
    except SimulationError as exc:
        rejected.append(rejection(candidate.option, exc.reason, NO_ESTIMATE))
        return None
    if isinstance(outcome, str):
        rejected.append(rejection(candidate.option, outcome, SIMULATED_MISS))
        return None
    replicas, summary = outcome
    return Chosen(_replicated(candidate.option, replicas), summary)


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


def rejection(option: PlanOption, reason: str, code: str) -> Rejection:
    return Rejection(
        option.gpu, option.tensor_parallel_size, code, reason, option.pipeline_parallel_size
    )


def distribution_out(value: Distribution) -> DistributionOut:
    return DistributionOut(
        **{k: None if math.isnan(v) else round(v, 3) for k, v in dataclasses.asdict(value).items()}
    )


def _with_rate(out: PlanOptionOut, chosen: Chosen, rate: float, means: Means) -> PlanOptionOut:
    """The option's answer with the rate's figures: cost per million tokens, percentiles."""
    output_per_s = rate * means.output_tokens
    cost = chosen.option.cost_per_hour_usd
    per_million_out = cost_per_million(cost, output_per_s)
    per_million_in = cost_per_million(cost, rate * means.input_tokens)
    summary = chosen.summary
    engine = chosen.option.engine.engine.value  # the flags of the engine simulated, only
    return out.model_copy(
        update={
            "engine_flags": {k: v for k, v in out.engine_flags.items() if k == engine},
            "node_flags": {k: v for k, v in out.node_flags.items() if k == engine},
            "request_rate_per_replica": round(rate / chosen.option.replicas, 6),
            "output_tokens_per_second_at_rate": round(output_per_s, 1),
            "cost_per_million_output_tokens_usd": (
                None if per_million_out is None else round(per_million_out, 4)
            ),
            "cost_per_million_input_tokens_usd": (
                None if per_million_in is None else round(per_million_in, 4)
            ),
            "ttft_ms": distribution_out(summary.ttft_ms),
            "tpot_ms": distribution_out(summary.tpot_ms),
            "e2e_latency_ms": distribution_out(summary.e2e_latency_ms),
            "tokens_per_dollar": (None if not cost else round(output_per_s * 3600 / cost, 1)),
            **_split(chosen.disaggregated),
        }
    )


def _split(pools: DisaggregatedOut | None) -> dict[str, object]:
    """A disaggregated option's kind, pools, and the decode pool's flags to paste."""
    if pools is None:
        return {}
    return {
        "kind": "disaggregated",
        "disaggregated": pools,
        "engine_flags": pools.decode_pool.engine_flags,
        "node_flags": {},
    }
