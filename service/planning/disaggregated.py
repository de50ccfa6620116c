"""Disaggregated prefill/decode options of a plan for a rate (issue 23 item 2).

A disaggregated option is two pools sized apart: a prefill pool that computes each prompt and
its first token, and a decode pool that receives the prompt's KV over the inter-node link and
generates the answer (`service.sizing`'s `kv_transfer` says how long that takes, and which
flags each engine adds: `sizing/engines/disaggregation.py`).

Each pool has its own engine settings and so its own memory, sized by the planner like any
option: the decode pool with the caller's settings (it holds the whole sequences), the prefill
pool with max_num_seqs PREFILL_MAX_NUM_SEQS and max_num_batched_tokens
PREFILL_MAX_NUM_BATCHED_TOKENS (few prompts live at once, their KV held only until it is sent;
a large token budget so a step prefills several prompts). Then, as rate.py does for one pool:

1. Analytic, every pool: a prefill replica is busy prefill(I) ms per request, so the prefill
   pool needs ceil(rate x prefill(I) / 1000 / UTILISATION) replicas; a decode replica runs the
   largest batch b memory, max_num_seqs and the TPOT target allow (rate.decode_batch), each
   request holding a slot for O x decode(b) ms, so the decode pool needs
   ceil(rate x O x decode(b) / b / 1000 / UTILISATION). A pair whose prefill(I) + transfer(I)
   alone misses the TTFT target is dropped. Each pool's lower bound is the same count at
   utilisation 1. The PAIRED prefill and decode pools of each platform cheapest by their
   lower bound are paired, the pairs ranked by both pools' lower bounds' cost.
2. Simulated, by branch and bound as rate.py's single pools: pairs in order of their lower
   bound (`service.simulation.run_disaggregated`: one prefill replica and one decode replica,
   chained request by request), from the analytic replicas, more replicas of the pool that a
   missed target points at (TPOT: decode; TTFT: whichever of the time before the decode pool
   and the wait in it is longer), then fewer of each while the targets hold; until the next
   pair's lower bound costs more than the FINALISTS-th cheapest simulated pair, or after
   MAX_PAIRS pairs simulated. A simulated pair dearer than an unsimulated pair's lower bound
   is not shown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..catalog.snapshot import CatalogSnapshot
from ..simulation import (
    DisaggregatedSummary,
    EngineConfig,
    Pool,
    SimulationError,
    StepTable,
    Workload,
    run_disaggregated,
)
from ..sizing import (
    Gpu,
    ModelArchitecture,
    PlanRequest,
    Rejection,
    disaggregation_flags,
    kv_transfer,
    platform,
    router_commands,
)
from ..sizing import plan as search_plans
from . import calibrated, service
from .rate import (
    MAX_SIMULATIONS,
    UTILISATION,
    Bounded,
    Chosen,
    Load,
    Tabled,
    branch_and_bound,
    decode_batch,
    distribution_out,
    misses,
    rejection,
    tabled,
)
from .schemas import DisaggregatedMode, DisaggregatedOut, DisaggregationOut, PlanFields, PoolOut

# The prefill pool's engine settings (module docstring).
PREFILL_MAX_NUM_SEQS: Final = 16
PREFILL_MAX_NUM_BATCHED_TOKENS: Final = 16384
PAIRED = 4  # cheapest pools of each role paired in the analytic pass
FINALISTS = 2  # pairs the branch and bound proves the cheapest
MAX_PAIRS = 6  # pairs simulated at most
SPLIT_MISS = "disaggregated-percentile-over-target"


@dataclass(frozen=True, slots=True)
class Search:
    """What the pools are searched over: the model, the GPUs, the caller's plan request."""

    arch: ModelArchitecture
    gpus: Sequence[Gpu]
    fields: PlanFields
    catalog: CatalogSnapshot
    pool: calibrated.CalibrationHook | None


@dataclass(frozen=True, slots=True)
class _Sized:
    pool: Tabled
    replicas: int
    floor: int  # the lower bound's replicas (at utilisation 1)

    @property
    def cost(self) -> float | None:
        cost = self.pool.option.cost_per_hour_usd
        return None if cost is None else cost * self.replicas

    @property
    def bound(self) -> float | None:
        cost = self.pool.option.cost_per_hour_usd
        return None if cost is None else cost * self.floor


@dataclass(frozen=True, slots=True)
class _Pair:
    prefill: _Sized
    decode: _Sized
    transfer_ms_per_token: float

    def alone_ms(self, prompt: int) -> float:
        """A prompt's prefill and KV transfer, with no queue: the least TTFT can be."""
        return self.prefill.pool.table.prefill(prompt) + self.transfer_ms_per_token * prompt

    @property
    def bound(self) -> float | None:
        """Both pools' lower bounds' cost an hour (None: a pool unpriced)."""
        costs = (self.prefill.bound, self.decode.bound)
        return None if costs[0] is None or costs[1] is None else costs[0] + costs[1]

    @property
    def rank(self) -> tuple[bool, float, int]:
        gpus = sum(s.pool.option.total_gpus * s.floor for s in (self.prefill, self.decode))
        return (self.bound is None, self.bound or 0.0, gpus)


def split_options(
    search: Search,
    decodes: Sequence[Tabled],
    traffic: tuple[Workload, Load],
    rejected: list[Rejection],
) -> tuple[list[Chosen], str]:
    """The disaggregated options (module docstring), and the note on how many pairs the
    analytic pass sized and simulated; `decodes` are the single-pool options, whose settings
    the decode pool keeps."""
    workload, load = traffic
    found = pairs(prefill_pools(search, rejected), decodes, load, rejected)
    outcome = simulated(found, workload, load, search.fields.max_replicas, rejected)
    return outcome.chosen, f"{len(found)} disaggregated pairs of pools sized analytically, " + (
        outcome.note()
    )


def prefill_pools(search: Search, rejected: list[Rejection]) -> list[Tabled]:
    """Every prefill pool: the planner's options with the prefill settings, one replica each."""
    asked = search.fields.model_copy(
        update={
            "peak_concurrency": 1,
            "max_num_seqs": PREFILL_MAX_NUM_SEQS,
            "max_num_batched_tokens": PREFILL_MAX_NUM_BATCHED_TOKENS,
        }
    )
    request: PlanRequest = dataclasses.replace(
        service._plan_request(asked, search.catalog),
        max_alternatives=100_000,
        headroom_fraction=0.0,
    )
    found = search_plans(search.arch, search.gpus, request, search.pool)
    return tabled(search.arch, found, rejected, prefill_only=True)


def prefill_replicas(table: StepTable, load: Load, utilisation: float = UTILISATION) -> int:
    """The analytic prefill pool: rate x prefill(I) ms of work a second, at `utilisation`."""
    busy = load.rate * table.prefill(math.ceil(load.means.input_tokens)) / 1000
    return max(1, math.ceil(busy / utilisation))


def decode_replicas(
    table: StepTable, config: EngineConfig, load: Load, utilisation: float = UTILISATION
) -> int | str:
    """The analytic decode pool: each request holds one of b slots for O x decode(b) ms."""
    batch = decode_batch(table, config, load.means, load.targets)
    if isinstance(batch, str):
        return batch
    context = load.means.input_tokens + load.means.output_tokens / 2
    held_ms = load.means.output_tokens * table.decode(batch, context)
    return max(1, math.ceil(load.rate * held_ms / batch / 1000 / utilisation))


def _cheapest(sized: Sequence[_Sized], on: str) -> list[_Sized]:
    """The PAIRED pools on one platform cheapest by their lower bound."""
    mine = [s for s in sized if platform(s.pool.option.gpu) == on]
    mine.sort(key=lambda s: (s.bound is None, s.bound or 0.0, s.pool.option.total_gpus))
    return mine[:PAIRED]


def pairs(
    prefills: Sequence[Tabled], decodes: Sequence[Tabled], load: Load, rejected: list[Rejection]
) -> list[_Pair]:
    """The analytic pass over pairs of the cheapest pools of one platform, cheapest first."""
    sized_decodes = []
    for pool in decodes:
        replicas = decode_replicas(pool.table, pool.config, load)
        if isinstance(replicas, str):
            rejected.append(rejection(pool.option, f"decode pool: {replicas}", SPLIT_MISS))
            continue
        floor = decode_replicas(pool.table, pool.config, load, 1.0)
        assert isinstance(floor, int)  # the same checks passed at UTILISATION
        sized_decodes.append(_Sized(pool, replicas, floor))
    ttft = min((t.ms for t in load.targets if t.metric == "ttft_ms"), default=math.inf)
    prompt = math.ceil(load.means.input_tokens)
    sized_prefills = []
    for pool in prefills:
        one = _Sized(pool, 1, 1)
        alone = _Pair(one, one, _per_token(pool, pool)).alone_ms(prompt)
        if alone > ttft:
            reason = f"prefill pool: a mean prompt's prefill and KV transfer take {alone:.1f} ms"
            rejected.append(rejection(pool.option, reason, SPLIT_MISS))
            continue
        floor = prefill_replicas(pool.table, load, 1.0)
        sized_prefills.append(_Sized(pool, prefill_replicas(pool.table, load), floor))
    found = []
    for on in sorted({platform(s.pool.option.gpu) for s in sized_prefills}):
        for prefill in _cheapest(sized_prefills, on):
            for decode in _cheapest(sized_decodes, on):
                pair = _Pair(prefill, decode, _per_token(prefill.pool, decode.pool))
                if pair.alone_ms(prompt) <= ttft:  # the decode GPU's link may be the slower
                    found.append(pair)
    found.sort(key=lambda p: p.rank)
    return found


def _per_token(prefill: Tabled, decode: Tabled) -> float:
    """The KV transfer's ms per prompt token between the two pools' GPUs."""
    sent = kv_transfer(prefill.option.capacity, prefill.option.gpu, decode.option.gpu, 1)
    return sent.transfer_ms


def choose_pools(
    simulate_at: Callable[[tuple[int, int]], DisaggregatedSummary],
    start: tuple[int, int],
    load: Load,
    max_replicas: int,
) -> tuple[tuple[int, int], DisaggregatedSummary] | str:
    """The fewest replicas of each pool from `start` that meet the targets (module docstring);
    at most MAX_SIMULATIONS runs. A string says why none was found."""
    replicas = (min(start[0], max_replicas), min(start[1], max_replicas))
    result = simulate_at(replicas)
    runs = 1
    while missed := misses(result.summary, load.targets):
        grown = _grown(replicas, result, missed, max_replicas)
        if grown == replicas or runs >= MAX_SIMULATIONS:
            return f"{', '.join(missed)} at {replicas[0]} prefill and {replicas[1]} decode replicas"
        replicas = grown
        result = simulate_at(replicas)
        runs += 1
    for side in (0, 1):
        while replicas[side] > 1 and runs < MAX_SIMULATIONS:
            fewer = (replicas[0] - 1, replicas[1]) if side == 0 else (replicas[0], replicas[1] - 1)
            trial = simulate_at(fewer)
            runs += 1
            if misses(trial.summary, load.targets):
                break
            replicas, result = fewer, trial
    return replicas, result


def _grown(
    replicas: tuple[int, int],
    result: DisaggregatedSummary,
    missed: Sequence[str],
    max_replicas: int,
) -> tuple[int, int]:
    """More replicas (by a quarter, at least one, at most max_replicas) of the pool a missed
    target points at: TPOT the decode pool; TTFT the part of it that is longer."""
    prefill, decode = replicas
    grow_decode = any(m.startswith("tpot") for m in missed)
    grow_prefill = False
    if any(m.startswith("ttft") for m in missed):
        before, wait = result.before_decode_ms.p99, result.decode_wait_ms.p99
        if before >= wait:
            grow_prefill = True
        else:
            grow_decode = True
    if grow_prefill:
        prefill = min(max_replicas, prefill + max(1, prefill // 4))
    if grow_decode:
        decode = min(max_replicas, decode + max(1, decode // 4))
    return prefill, decode


def simulated(
    found: Sequence[_Pair],
    workload: Workload,
    load: Load,
    max_replicas: int,
    rejected: list[Rejection],
) -> Bounded:
    """Branch and bound over the pairs (module docstring), each simulated at the replicas that
    meet the targets."""
    return branch_and_bound(
        [(pair.bound, pair) for pair in found],
        lambda pair: _simulate(pair, workload, load, max_replicas, rejected),
        keep=FINALISTS,
        most=MAX_PAIRS,
    )


def _simulate(
    pair: _Pair, workload: Workload, load: Load, max_replicas: int, rejected: list[Rejection]
) -> Chosen | None:
    """One pair simulated at the replicas that meet the targets, or rejected."""

    def at(replicas: tuple[int, int]) -> DisaggregatedSummary:
        return run_disaggregated(
            Pool(pair.prefill.pool.config, pair.prefill.pool.table),
            Pool(pair.decode.pool.config, pair.decode.pool.table),
            workload,
            replicas,
            pair.transfer_ms_per_token,
        )

    start = (pair.prefill.replicas, pair.decode.replicas)
    try:
        outcome = choose_pools(at, start, load, max_replicas)
    except SimulationError as exc:
        rejected.append(rejection(pair.decode.pool.option, exc.reason, SPLIT_MISS))
        return None
    if isinstance(outcome, str):
        rejected.append(rejection(pair.decode.pool.option, outcome, SPLIT_MISS))
        return None
    return _chosen(pair, *outcome, load)


def _chosen(
    pair: _Pair, replicas: tuple[int, int], result: DisaggregatedSummary, load: Load
) -> Chosen:
    """A simulated pair as a plan's option: the decode pool's option, with both pools' GPUs
    and cost, and the pools themselves for the answer."""
    prefill, decode = pair.prefill.pool.option, pair.decode.pool.option
    costs = (prefill.cost_per_hour_usd, decode.cost_per_hour_usd)
    cost = (
        None
        if costs[0] is None or costs[1] is None
        else round(costs[0] * replicas[0] + costs[1] * replicas[1], 6)
    )
    option = dataclasses.replace(
        decode,
        replicas=replicas[1],
        total_gpus=prefill.total_gpus * replicas[0] + decode.total_gpus * replicas[1],
        cost_per_hour_usd=cost,
        speed=None,
    )
    prompt = math.ceil(load.means.input_tokens)
    sent = kv_transfer(prefill.capacity, prefill.gpu, decode.gpu, prompt)
    detail = DisaggregatedOut(
        prefill_pool=_pool_out(pair.prefill.pool, replicas[0], "prefill"),
        decode_pool=_pool_out(pair.decode.pool, replicas[1], "decode"),
        kv_transfer_bytes_per_gpu=sent.bytes_per_gpu,
        kv_transfer_ms=round(sent.transfer_ms, 3),
        link_gb_s=sent.link_gb_s,
        router={k: v for k, v in router_commands().items() if k == "vllm"},
        before_decode_ms=distribution_out(result.before_decode_ms),
        decode_wait_ms=distribution_out(result.decode_wait_ms),
    )
    return Chosen(option, result.summary, detail)


def _pool_out(pool: Tabled, replicas: int, role: str) -> PoolOut:
    option = pool.option
    extra = disaggregation_flags("prefill" if role == "prefill" else "decode")
    cost = option.cost_per_hour_usd
    return PoolOut(
        gpu=option.gpu.slug,
        tensor_parallel_size=option.tensor_parallel_size,
        pipeline_parallel_size=option.pipeline_parallel_size,
        replicas=replicas,
        total_gpus=option.total_gpus * replicas,
        cost_per_hour_usd=None if cost is None else round(cost * replicas, 6),
        max_num_seqs=min(option.sequences_per_replica, option.max_num_seqs) or 1,  # as flagged
        max_num_batched_tokens=pool.config.max_num_batched_tokens,
        kv_pool_bytes=option.capacity.kv_pool_bytes,
        kv_cache_tokens=option.capacity.kv_cache_tokens,
        num_gpu_blocks=option.capacity.num_gpu_blocks,
        engine_flags={  # vLLM's alone: split pools are simulated on its scheduler only
            engine: " ".join([*flags, *extra.get(engine, [])])
            for engine, flags in option.engine_flags.items()
            if engine == "vllm"
        },
    )


def comparison(
    mode: DisaggregatedMode, chosen: Sequence[Chosen], per_million: Callable[[Chosen], float | None]
) -> DisaggregationOut:
    """The cheapest option of each kind, and by how much the split one is cheaper."""

    def cheapest(split: bool) -> Chosen | None:
        kind = [c for c in chosen if (c.disaggregated is not None) == split]
        priced = [c for c in kind if per_million(c) is not None]
        return min(priced, key=lambda c: per_million(c) or 0.0, default=None)

    one, split = cheapest(False), cheapest(True)
    one_cost = None if one is None else per_million(one)
    split_cost = None if split is None else per_million(split)
    fraction = None
    if one_cost and split_cost is not None:
        fraction = round((one_cost - split_cost) / one_cost, 4)
    return DisaggregationOut(
        mode=mode,
        aggregated_cost_per_million_output_tokens_usd=one_cost,
        disaggregated_cost_per_million_output_tokens_usd=split_cost,
        cheaper_fraction=fraction,
        statement=_statement(mode, one, split, fraction, per_million),
    )


def _label(chosen: Chosen) -> str:
    pools = chosen.disaggregated
    if pools is None:
        option = chosen.option
        return f"{option.replicas} x {option.gpu.slug} TP{option.tensor_parallel_size}"
    p, d = pools.prefill_pool, pools.decode_pool
    return (
        f"{p.replicas} x {p.gpu} TP{p.tensor_parallel_size} prefill + "
        f"{d.replicas} x {d.gpu} TP{d.tensor_parallel_size} decode"
    )


def _statement(
    mode: DisaggregatedMode,
    one: Chosen | None,
    split: Chosen | None,
    fraction: float | None,
    per_million: Callable[[Chosen], float | None],
) -> str:
    if mode == "only":
        return "disaggregated=only: single-pool options were not planned, so not compared"
    if split is None and one is None:
        return "no priced option of either kind (one pool, or split pools) meets the targets"
    if split is None:
        return "no priced disaggregated option meets the targets: one pool it is"
    if one is None:
        return (
            f"no priced single-pool option meets the targets; disaggregated: {_label(split)} "
            f"at ${per_million(split):.4f} per million output tokens"
        )
    against = (
        f"{_label(split)} at ${per_million(split):.4f} per million output tokens against "
        f"{_label(one)} at ${per_million(one):.4f}"
    )
    assert fraction is not None
    if fraction > 0:
        return f"disaggregated prefill/decode is {fraction:.1%} cheaper than one pool: {against}"
    if fraction == 0:
        return f"disaggregated prefill/decode costs the same as one pool: {against}"
    return f"disaggregated prefill/decode is not cheaper ({-fraction:.1%} dearer): {against}"
