"""The three sizing questions -> a plan: which GPU, how many, how laid out, at what cost.

Every GPU x every tensor-parallel size a node allows is sized with `compute_capacity`; each
feasible one gets the fewest replicas that hold the peak concurrency with the headroom asked
for. The options are ranked by `rank_by`: "cost" (price per hour; the default), "gpu_count"
(total GPUs, then price) or "tokens_per_dollar" (output tokens per second of all replicas at the
peak, per dollar an hour; every option is timed for it). An option without a price (an inline
or caller-written GPU with none) ranks after every priced one under "cost" and
"tokens_per_dollar", and the plan says so; a plan counts the options it does not show
(`alternatives_omitted`) and names their GPUs.

Latency targets (max_tpot_ms, max_ttft_ms, min_output_tokens_per_second_per_user) are held by
speed.py `pace`: a candidate whose replicas, at the peak, decode too slowly runs the largest
batch that meets them (a lower max_num_seqs) on as many more replicas as the peak then needs;
one whose prefill is too slow, or whose single sequence is, is rejected with the reason. The
cheapest candidate left is still the recommendation. The options shown carry their speed at
the concurrency each replica is planned to serve.
A GPU none of whose single-node layouts fits is tried again across nodes: tensor parallel
within a node, 2 ... MAX_PIPELINE_NODES pipeline stages across nodes (multinode.py).
Short local names: m = max_model_len, tp = tensor_parallel_size, pp = pipeline_parallel_size.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ..capacity import Capacity, Gpu, Parallelism, Workload, compute_capacity, served_model
from ..engines.common import Engine, EngineOptions
from ..engines.encoder import encoder_flags
from ..engines.kv import packed_mla
from ..engines.lmcache import lmcache_flags
from ..engines.lora import lora_flags
from ..engines.multinode import MAX_PIPELINE_NODES, node_flags, nodes_to_try
from ..engines.offload import offload_flags
from ..engines.parallel import check_tensor_parallel
from ..engines.sglang import sglang_refusal, sglang_release
from ..engines.sglang_dp import SGLANG_ATTN_DP_SIZE, dp_attention_asked
from ..engines.speculative import speculative_flags
from ..errors import InvalidDtype, SizingError
from ..model.architecture import ModelArchitecture
from ..model.context_limit import (
    check_max_model_len,
    long_context_override,
    max_model_len_limit,
)
from ..model.dtypes import KvCacheDtype, ModelDtype, parse_kv_cache_dtype
from ..speed.performance import PerformanceEstimate
from ..speed.replica import (
    LatencyTargets,
    NoEstimate,
    Paced,
    Speed,
    SpeedQuestion,
    TargetMiss,
    check_prompt_tokens,
    pace,
    replica_speed,
    with_expert_layout,
)
from ..units import cdiv

MAX_PEAK_CONCURRENCY = 1_000_000
RANK_BY = ("cost", "gpu_count", "tokens_per_dollar")
# Share of each replica's usable KV blocks kept free at the peak unless a plan asks otherwise:
# README "Headroom" says why 10%.
DEFAULT_HEADROOM_FRACTION = 0.1

# A measured pool for a candidate (the planning slice's calibrations): called with the
# candidate sized as usual, it answers the pool to size it with instead, or None.
CalibratedPool = Callable[[Capacity, Gpu], int | None]
# A speed calibration's step-time scale (measured / kvplan's decode step) for a candidate sized
# as usual, or None: the latency targets are checked at the scaled decode step.
CalibratedSpeed = Callable[[Capacity, Gpu], float | None]


@dataclass(frozen=True, slots=True)
class PlanRequest:
    max_model_len: int
    peak_concurrency: int
    # A name (or alias) is parsed once, here; a `KvCacheDtype` from then on.
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO
    engine: EngineOptions = field(default_factory=EngineOptions)
    max_gpus_per_node: int | None = None
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION
    avg_context_tokens: int | None = None
    max_replicas: int = 4096
    max_alternatives: int = 10
    avg_prompt_tokens: int | None = None
    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None
    min_output_tokens_per_second_per_user: float | None = None
    rank_by: str = "cost"

    @property
    def targets(self) -> LatencyTargets:
        return LatencyTargets(
            self.max_tpot_ms, self.max_ttft_ms, self.min_output_tokens_per_second_per_user
        )

    @property
    def context_tokens(self) -> int:
        """The context each running sequence is timed at."""
        return self.avg_context_tokens or self.max_model_len

    def __post_init__(self) -> None:
        check_prompt_tokens(self.avg_prompt_tokens, self.max_model_len)
        LatencyTargets(
            self.max_tpot_ms, self.max_ttft_ms, self.min_output_tokens_per_second_per_user
        )
        if not 1 <= self.peak_concurrency <= MAX_PEAK_CONCURRENCY:
            raise SizingError("peak_concurrency", f"must be between 1 and {MAX_PEAK_CONCURRENCY}")
        if not 0 <= self.headroom_fraction < 1:
            raise SizingError("headroom_fraction", "must be at least 0 and below 1")
        if self.avg_context_tokens is not None and not (
            1 <= self.avg_context_tokens <= self.max_model_len
        ):
            raise SizingError("avg_context_tokens", "must be between 1 and max_model_len")
        if self.max_gpus_per_node is not None and self.max_gpus_per_node < 1:
            raise SizingError("max_gpus_per_node", "must be at least 1")
        if self.rank_by not in RANK_BY:
            raise SizingError("rank_by", f"must be one of {', '.join(RANK_BY)}")
        object.__setattr__(self, "kv_cache_dtype", parse_kv_cache_dtype(self.kv_cache_dtype))


@dataclass(frozen=True, slots=True)
class PlanOption:
    """One feasible deployment: a GPU type, a TP layout and enough replicas for the peak."""

    gpu: Gpu
    tensor_parallel_size: int
    replicas: int
    total_gpus: int
    max_num_seqs: int
    sequences_per_replica: int
    headroom_fraction: float
    headroom_bytes: int
    headroom_tokens: int
    cost_per_hour_usd: float | None
    warnings: tuple[str, ...]
    capacity: Capacity
    engine: EngineOptions
    # Sequences each replica runs at the peak: ceil(peak_concurrency / replicas).
    concurrency_per_replica: int = 0
    # At concurrency_per_replica; set on the options a plan shows.
    speed: Speed | None = None
    # What the latency targets made of the batch (None without targets).
    latency_outcome: str | None = None
    # Nodes one replica spans: pipeline stages, one per node (1: within one node).
    pipeline_parallel_size: int = 1
    # issue 21: a replica of DP engine cores (vLLM --data-parallel-size) sharing a MoE's
    # experts (--enable-expert-parallel); its capacity is one DP rank's.
    data_parallel_size: int = 1
    # Engines whose flags the option leaves out (`flags_left_out`: kvplan cannot size that
    # engine for the model, or the plan's numbers are another engine's simulation); the plan's
    # warnings say why, naming each.
    flags_left_out: tuple[str, ...] = ()

    @property
    def gpus_per_node(self) -> int:
        return self.tensor_parallel_size * self.data_parallel_size

    @property
    def nodes_per_replica(self) -> int:
        return self.pipeline_parallel_size

    @property
    def node_flags(self) -> dict[str, list[list[str]]]:
        """The flags for each node of a multi-node replica (node rank 0 first); empty when
        one node holds it (`engine_flags` then is the whole command)."""
        if self.pipeline_parallel_size == 1:
            return {}
        return node_flags(self._flags(), self.pipeline_parallel_size)

    @property
    def engine_flags(self) -> dict[str, list[str]]:
        """Built on demand: only the options a plan shows need them. A multi-node replica's
        are its first node's (`node_flags` has every node's)."""
        flags = self._flags()
        if self.pipeline_parallel_size == 1:
            return flags
        return {
            name: nodes[0] for name, nodes in node_flags(flags, self.pipeline_parallel_size).items()
        }

    def _flags(self) -> dict[str, list[str]]:
        flags = engine_flags(
            self.capacity, min(self.sequences_per_replica, self.max_num_seqs) or 1, self.engine
        )
        return {name: line for name, line in flags.items() if name not in self.flags_left_out}

    @property
    def rank_key(self) -> tuple[bool, float, int, float]:
        """Cheapest first; an unpriced option after every priced one, by GPU count."""
        cost = self.cost_per_hour_usd
        return (
            cost is None,
            cost if cost is not None else 0.0,
            self.total_gpus,
            -self.headroom_fraction,
        )

    @property
    def gpu_count_key(self) -> tuple[int, bool, float, float]:
        """Fewest GPUs first, then cheapest (unpriced last among equals)."""
        cost = self.cost_per_hour_usd
        return (
            self.total_gpus,
            cost is None,
            cost if cost is not None else 0.0,
            -self.headroom_fraction,
        )

    @property
    def output_tokens_per_second(self) -> float | None:
        """All replicas' output tokens per second at the peak (None without an estimate); a
        DP x EP replica's speed is one DP rank's (speed/replica.py), so x its DP ranks."""
        if not isinstance(self.speed, PerformanceEstimate):
            return None
        return self.speed.output_tokens_per_second * self.replicas * self.data_parallel_size

    @property
    def tokens_per_dollar(self) -> float | None:
        """Output tokens per US dollar at the peak: tokens an hour over the cost an hour."""
        rate = self.output_tokens_per_second
        cost = self.cost_per_hour_usd
        if rate is None or not cost:
            return None
        return rate * 3600 / cost

    @property
    def tokens_per_dollar_key(self) -> tuple[bool, float, float]:
        """Most tokens per dollar first; options without a price or an estimate last."""
        value = self.tokens_per_dollar
        return (value is None, -(value or 0.0), self.cost_per_hour_usd or 0.0)


@dataclass(frozen=True, slots=True)
class Rejection:
    gpu: Gpu
    tensor_parallel_size: int | None
    code: str
    reason: str
    pipeline_parallel_size: int = 1


@dataclass(frozen=True, slots=True)
class Plan:
    request: PlanRequest
    recommendation: PlanOption | None
    alternatives: tuple[PlanOption, ...]
    rejected: tuple[Rejection, ...]
    warnings: tuple[str, ...]
    # Feasible options not shown (beyond max_alternatives), and the GPUs they are on.
    alternatives_omitted: int = 0
    omitted_gpus: tuple[str, ...] = ()


def tensor_parallel_candidates(arch: ModelArchitecture, node_size: int) -> list[int]:
    """TP sizes a node can hold that divide the attention heads (vLLM's first check)."""
    return [tp for tp in range(1, node_size + 1) if arch.num_attention_heads % tp == 0]


@lru_cache(maxsize=4096)
def tensor_parallel_problem(arch: ModelArchitecture, tp: int) -> SizingError | None:
    """Why `tp` cannot shard this model, or None (checked once per model and size)."""
    try:
        check_tensor_parallel(arch, tp)
    except SizingError as exc:
        return exc
    return None


def engine_flags(
    capacity: Capacity, max_num_seqs: int, options: EngineOptions
) -> dict[str, list[str]]:
    """Flags to paste, for vLLM and their SGLang equivalents."""
    tp = capacity.parallel.tensor_parallel_size
    m = capacity.max_model_len
    dtype = capacity.kv_cache_dtype
    vllm = [
        f"--tensor-parallel-size {tp}",
        f"--max-model-len {m}",
        f"--max-num-seqs {max_num_seqs}",
        f"--kv-cache-dtype {_vllm_kv_dtype(dtype)}",
    ]
    util = capacity.engine_settings.get("gpu_memory_utilization")
    if options.engine is Engine.VLLM and util is not None:
        vllm.append(f"--gpu-memory-utilization {util}")
    if options.block_size is not None:
        vllm.append(f"--block-size {options.block_size}")
    if options.max_num_batched_tokens is not None:
        vllm.append(f"--max-num-batched-tokens {options.max_num_batched_tokens}")
    if options.enable_prefix_caching is not None:
        vllm.append(
            "--enable-prefix-caching"
            if options.enable_prefix_caching
            else "--no-enable-prefix-caching"
        )
    if options.enforce_eager:
        vllm.append("--enforce-eager")
    if options.disable_custom_all_reduce:
        vllm.append("--disable-custom-all-reduce")
    vllm.extend(_parallel_flags(capacity, options))
    sglang = [
        f"--tp {tp}",
        f"--context-length {m}",
        f"--max-running-requests {max_num_seqs}",
        f"--kv-cache-dtype {_sglang_kv_dtype(dtype)}",
    ]
    if options.dtype is not ModelDtype.AUTO:  # both engines spell it --dtype
        vllm.append(f"--dtype {options.dtype.value}")
        sglang.append(f"--dtype {options.dtype.value}")
    fraction = capacity.engine_settings.get("mem_fraction_static")
    if fraction is not None:
        sglang.append(f"--mem-fraction-static {fraction}")
    # issue 21: the drafter and the LoRA slots sized (engines/speculative.py, engines/lora.py)
    if options.speculative_config is not None:
        drafter = speculative_flags(options.speculative_config)
        vllm += drafter["vllm"]
        sglang += drafter["sglang"]
    if options.engine is Engine.SGLANG:
        sglang += lora_flags(options)
    else:
        vllm += lora_flags(options)
    # issue 21: KV tiers (LMCache's included) and weights in host memory
    offloaded = offload_flags(options, lmcache_flags(options, capacity.parallel.gpus_per_replica))
    encoder = encoder_flags(options.limit_mm_per_prompt, options.skip_mm_profiling)
    if options.engine is Engine.SGLANG and dp_attention_asked(options.sglang_parallel):
        # SGLang's DP attention (engines/sglang_dp.py): --tp is the whole engine
        sglang[0] = f"--tp {tp * capacity.parallel.data_parallel_size}"
        sglang[2] = f"--max-running-requests {max_num_seqs * capacity.parallel.data_parallel_size}"
        sglang.extend(_sglang_parallel_flags(capacity, options))
        return {"sglang": sglang + offloaded[1]}
    if capacity.parallel.data_parallel_size > 1:
        return {"vllm": vllm + offloaded[0] + encoder}  # a vLLM DP layout: SGLang's is sized apart
    return {"vllm": vllm + offloaded[0] + encoder, "sglang": sglang + offloaded[1]}


def flags_left_out(arch: ModelArchitecture, options: EngineOptions) -> dict[str, str]:
    """The engines whose equivalent flags a plan sized for `options.engine` leaves out, each
    with the reason: SGLang's beside another engine's numbers when kvplan cannot size SGLang
    for this model at all (`sglang_refusal`: DeepSeek-V4, Kimi-K3, LFM2, MiniMax-M3, Jamba, ...).
    A plan for SGLang itself is sized by SGLang's rules or refused, so it leaves nothing out."""
    if options.engine is Engine.SGLANG:
        return {}
    refusal = sglang_refusal(arch)
    return {} if refusal is None else {"sglang": refusal.reason}


def left_out_warning(engine: str, reason: str) -> str:
    """The plan-level warning for flags an option leaves out, naming the engine."""
    label = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}.get(engine, engine)
    return f"no {label} flags in any option ({engine} left out of engine_flags): {reason}"


def without_flags(options: Sequence[PlanOption], engines: Sequence[str]) -> list[PlanOption]:
    """The options with `engines`' flags left out (besides what each already leaves out)."""
    return [
        replace(o, flags_left_out=tuple(dict.fromkeys((*o.flags_left_out, *engines))))
        for o in options
    ]


def _shared_warnings(shown: Sequence[PlanOption], said: Sequence[str]) -> list[str]:
    """The warnings every option shown carries, said once at the top as well (issue 20: every
    plan-level fact in the plan's warnings): facts of the question, not of one GPU, such as the
    release sized, the model's cache format, a speed kvplan does not model."""
    if not shown:
        return []
    rest = [set(option.warnings) for option in shown[1:]]
    common = [w for w in shown[0].warnings if all(w in other for other in rest)]
    return [w for w in dict.fromkeys(common) if w not in said]


# The engines whose equivalent flags a plan for each engine gives beside (or instead of) its own.
_EQUIVALENTS = {
    Engine.VLLM: (Engine.SGLANG,),
    Engine.SGLANG: (Engine.VLLM,),
    Engine.TRTLLM: (Engine.VLLM, Engine.SGLANG),
}
_LENGTH_FLAG = {Engine.VLLM: "--max-model-len", Engine.SGLANG: "--context-length"}
# trtllm-serve's spellings: tensorrt_llm/commands/serve.py `serve` (kit/engine_flags.py).
TRTLLM_FLAGS_NOTE = (
    "engine trtllm: the options are sized by TensorRT-LLM's rules, and engine_flags spells "
    "each layout for vLLM and SGLang only; kvplan writes no trtllm-serve command yet (its "
    "--tp_size, --max_seq_len and --max_batch_size take tensor_parallel_size, max_model_len "
    "and max_num_seqs)"
)


def _equivalent_flags(
    arch: ModelArchitecture, request: PlanRequest, shown: list[PlanOption]
) -> tuple[list[PlanOption], list[str]]:
    """The options shown without the flags `flags_left_out` names, and the warnings: what was
    left out, and each other engine's flags that engine would refuse at start-up (a length past
    the limit it derives from the config, without its override; context_limit.py)."""
    if not shown:
        return shown, []
    left_out = flags_left_out(arch, request.engine)
    notes = [left_out_warning(name, reason) for name, reason in left_out.items()]
    if request.engine.engine is Engine.TRTLLM:
        notes.append(TRTLLM_FLAGS_NOTE)
    for other in _EQUIVALENTS[request.engine.engine]:
        limit = max_model_len_limit(arch, other)
        if other.value in left_out or limit is None or request.max_model_len <= limit:
            continue
        label = {Engine.VLLM: "vLLM", Engine.SGLANG: "SGLang"}[other]
        notes.append(
            f"{label} flags: {_LENGTH_FLAG[other]} {request.max_model_len} is above the {limit} "
            f"tokens {label} derives from the model's config; {label} refuses it at start-up "
            f"unless {long_context_override(other)} is set"
        )
    return (without_flags(shown, list(left_out)) if left_out else shown), notes


def _sglang_parallel_flags(capacity: Capacity, options: EngineOptions) -> list[str]:
    """SGLang's DP-attention and EP flags, by release: --attn-dp-size from 0.5.23 (its
    server_args.py deprecates --dp-size with --enable-dp-attention), else those two."""
    dp = capacity.parallel.data_parallel_size
    flags = options.sglang_parallel
    if sglang_release(options.engine_version).version >= SGLANG_ATTN_DP_SIZE:
        out = [f"--attn-dp-size {dp}"]
    else:
        out = [f"--dp-size {dp}", "--enable-dp-attention"]
    if flags.ep_size > 1:
        out.append(f"--ep-size {flags.ep_size}")
    if flags.ep_num_redundant_experts:
        out.append(f"--ep-num-redundant-experts {flags.ep_num_redundant_experts}")
    if flags.enable_dp_lm_head:
        out.append("--enable-dp-lm-head")
    if flags.moe_dense_tp_size is not None:
        out.append(f"--moe-dense-tp-size {flags.moe_dense_tp_size}")
    return out


def _vllm_kv_dtype(dtype: KvCacheDtype) -> str:
    # vLLM's --kv-cache-dtype takes auto, bfloat16 and the fp8 names; fp16/fp32 are "auto"
    # on a model of that dtype. fp8_ds_mla is what vLLM makes of `fp8` on sparse-MLA and
    # DeepSeek-V4 models (the flag every recipe passes; 0.26.0 asserts an fp8 flag for V4):
    # "auto" there would ask a 16-bit cache.
    if dtype == "fp8_ds_mla":
        return "fp8"
    return dtype if dtype in {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"} else "auto"


def _sglang_kv_dtype(dtype: KvCacheDtype) -> str:
    return {"fp8": "fp8_e4m3", "bfloat16": "bf16"}.get(
        dtype, dtype if dtype != "float16" else "auto"
    )


def plan(
    arch: ModelArchitecture,
    gpus: Sequence[Gpu],
    request: PlanRequest,
    calibrated_pool: CalibratedPool | None = None,
    calibrated_speed: CalibratedSpeed | None = None,
) -> Plan:
    if not gpus:
        raise SizingError("gpus", "no candidate GPUs")
    workload = Workload(request.max_model_len, request.kv_cache_dtype)
    if packed_mla(arch, request.kv_cache_dtype) and request.engine.engine is not Engine.VLLM:
        raise InvalidDtype("kv_cache_dtype", "fp8_ds_mla is a vLLM cache format")
    # A length the engine refuses is the request's fault, not every candidate's; allowed with
    # allow_long_max_model_len, it is said once at the top.
    too_long = check_max_model_len(arch, request.max_model_len, request.engine)
    warnings: list[str] = [] if too_long is None else [too_long]
    # Without calibrated pools a GPU's search depends on the question alone, so it is
    # remembered across plans (_Remembered); a calibrated pool is looked up for each candidate.
    calibrated = calibrated_pool is not None or calibrated_speed is not None
    memo = None if calibrated else _remembered(arch, workload, request)
    options: list[PlanOption] = []
    rejected: list[Rejection] = []
    for gpu in gpus:
        if memo is None:
            searched = _search_gpu(
                arch, gpu, workload, request, calibrated_pool, calibrated_speed=calibrated_speed
            )
        else:
            searched = memo.search(gpu)
        options.extend(searched.options)
        rejected.extend(searched.rejected)
    timed: Callable[[PlanOption], PlanOption] = (
        (lambda option: _timed(arch, option, request)) if memo is None else memo.timed
    )
    ranked = _ranked(options, request, timed)
    # Only the options shown are timed (all of them when ranked by tokens per dollar).
    shown = [timed(option) for option in ranked[: 1 + request.max_alternatives]]
    hidden = ranked[len(shown) :]
    shown, notes = _equivalent_flags(arch, request, shown)
    warnings.extend(notes)
    warnings.extend(_shared_warnings(shown, warnings))
    best = shown[0] if shown else None
    if best is None:
        warnings.append("no candidate GPU and layout can serve this workload; see `rejected`")
    warnings.extend(_ranking_warnings(ranked, shown, request))
    return Plan(
        request=request,
        recommendation=best,
        alternatives=tuple(shown[1:]),
        rejected=tuple(rejected),
        warnings=tuple(warnings),
        alternatives_omitted=len(hidden),
        omitted_gpus=tuple(dict.fromkeys(option.gpu.slug for option in hidden)),
    )


def _ranked(
    options: list[PlanOption],
    request: PlanRequest,
    timed: Callable[[PlanOption], PlanOption],
) -> list[PlanOption]:
    """The options in the order `rank_by` asks for (stable: ties keep the cost order)."""
    options = sorted(options, key=lambda option: option.rank_key)
    if request.rank_by == "gpu_count":
        return sorted(options, key=lambda option: option.gpu_count_key)
    if request.rank_by == "tokens_per_dollar":
        return sorted(map(timed, options), key=lambda option: option.tokens_per_dollar_key)
    return options


def _unpriced_warning(unpriced: list[str], ranked: Sequence[PlanOption], rank_by: str) -> str:
    """Which GPUs have no price, and where the ranking put their options."""
    one = len(unpriced) == 1
    theirs = "its options" if one else "their options"
    if rank_by == "gpu_count":
        how = f"{theirs} rank by GPU count, after priced options of as many GPUs"
    elif len(unpriced) < len({o.gpu.slug for o in ranked}):
        how = f"{theirs} rank after every priced option, by GPU count"
    else:
        how = "no option has a cost, and they rank by GPU count (then headroom)"
    advice = (
        "give price_usd_per_hour to rank by cost"
        if rank_by == "gpu_count"
        else "give price_usd_per_hour, or rank_by gpu_count to rank by GPU count alone"
    )
    return (
        f"{', '.join(unpriced)} {'has' if one else 'have'} no price, so {how} "
        f"(rank_by {rank_by}); {advice}"
    )


def _ranking_warnings(
    ranked: Sequence[PlanOption], shown: Sequence[PlanOption], request: PlanRequest
) -> list[str]:
    """What the ranking left out or put last, said plainly."""
    warnings = []
    unpriced = sorted({o.gpu.slug for o in ranked if o.cost_per_hour_usd is None})
    if unpriced:
        warnings.append(_unpriced_warning(unpriced, ranked, request.rank_by))
    hidden = ranked[len(shown) :]
    if hidden:
        gpus = ", ".join(dict.fromkeys(option.gpu.slug for option in hidden))
        warnings.append(
            f"{len(hidden):,} more feasible option{'s' if len(hidden) != 1 else ''} not shown "
            f"(max_alternatives {request.max_alternatives}), on {gpus}; raise max_alternatives "
            "to see them"
        )
    return warnings


@dataclass(frozen=True, slots=True)
class _GpuSearch:
    """One GPU's layouts for one question: the feasible options (not yet timed) and the
    rejections, each in the order they were tried."""

    options: tuple[PlanOption, ...]
    rejected: tuple[Rejection, ...]


def _search_gpu(
    arch: ModelArchitecture,
    gpu: Gpu,
    workload: Workload,
    request: PlanRequest,
    calibrated_pool: CalibratedPool | None,
    *,
    calibrated_speed: CalibratedSpeed | None = None,
) -> _GpuSearch:
    """Every tensor-parallel size one node of `gpu` holds, then, if the largest left too
    little memory, its layouts across nodes."""
    node = gpu.max_gpus_per_node
    if request.max_gpus_per_node is not None:
        node = min(node, request.max_gpus_per_node)
    candidates = tensor_parallel_candidates(arch, node)
    if not candidates:
        return _GpuSearch(
            (),
            (
                Rejection(
                    gpu,
                    None,
                    "no-tensor-parallel-size",
                    f"no tensor_parallel_size up to {node} divides the "
                    f"{arch.num_attention_heads} attention heads",
                ),
            ),
        )
    options: list[PlanOption] = []
    rejected: list[Rejection] = []
    outcome: PlanOption | Rejection | None = None
    for tp in candidates:
        outcome = _option(
            arch,
            gpu,
            tp,
            workload,
            request,
            calibrated_pool=calibrated_pool,
            calibrated_speed=calibrated_speed,
        )
        if isinstance(outcome, Rejection):
            rejected.append(outcome)
        else:
            options.append(outcome)
    # A MoE model on vLLM: one node as DP x EP beside the TP layouts (issue 21).
    options.extend(_expert_parallel_options(arch, gpu, node, workload, request))
    # The largest TP a node holds left too little memory: more nodes may hold it. (Too
    # slow, or too many replicas, a pipeline does not mend.)
    if isinstance(outcome, Rejection) and outcome.code in MEMORY_CODES:
        _across_nodes(
            arch,
            gpu,
            candidates,
            workload=workload,
            request=request,
            options=options,
            rejected=rejected,
        )
    return _GpuSearch(tuple(options), tuple(rejected))


# GPUs (or timed options) one remembered question keeps before it starts afresh: the catalog
# has a few dozen; inline GPUs in the questions could otherwise grow it without bound.
_REMEMBERED_PER_QUESTION = 512


class _Remembered:
    """What a plan's search found for one question (model, workload, request), per GPU, and
    its options once timed: another plan asking the same question (any peak differs it)
    reads them instead of sizing every candidate again. A GPU is a key by its value, so a
    catalog GPU whose price or figures changed is searched afresh. Every value is frozen and
    a function of its key, so plans in several threads at most compute one twice."""

    __slots__ = ("arch", "request", "searches", "timings", "workload")

    def __init__(self, arch: ModelArchitecture, workload: Workload, request: PlanRequest):
        self.arch, self.workload, self.request = arch, workload, request
        self.searches: dict[Gpu, _GpuSearch] = {}
        self.timings: dict[tuple[Gpu, int, int], PlanOption] = {}

    def search(self, gpu: Gpu) -> _GpuSearch:
        found = self.searches.get(gpu)
        if found is None:
            if len(self.searches) >= _REMEMBERED_PER_QUESTION:
                self.searches.clear()
            found = _search_gpu(self.arch, gpu, self.workload, self.request, None)
            self.searches[gpu] = found
        return found

    def timed(self, option: PlanOption) -> PlanOption:
        key = (option.gpu, option.tensor_parallel_size, option.pipeline_parallel_size)
        found = self.timings.get(key)
        if found is None:
            if len(self.timings) >= _REMEMBERED_PER_QUESTION:
                self.timings.clear()
            found = _timed(self.arch, option, self.request)
            self.timings[key] = found
        return found


# Questions remembered: the most recent few dozen (an autoscaler or a page asks the same few
# again); each holds its GPUs' options, so the bound keeps what the cycle collector walks small.
@lru_cache(maxsize=64)
def _remembered(arch: ModelArchitecture, workload: Workload, request: PlanRequest) -> _Remembered:
    return _Remembered(arch, workload, request)


MEMORY_CODES = frozenset({"weights-do-not-fit", "sequence-does-not-fit"})


def _across_nodes(
    arch: ModelArchitecture,
    gpu: Gpu,
    candidates: list[int],
    *,
    workload: Workload,
    request: PlanRequest,
    options: list[PlanOption],
    rejected: list[Rejection],
) -> None:
    """Replicas of 2 ... MAX_PIPELINE_NODES nodes, each node `tp` GPUs (the largest TP the
    node holds that shards the model), for a GPU no single node of which can serve.

    Every node count that fits is an option (ranking picks among them); where none fits, the
    largest one's rejection says why. Calibrated pools are per single-node layout, so these
    candidates are sized by the engine's arithmetic alone.
    """
    usable = [tp for tp in candidates if tensor_parallel_problem(arch, tp) is None]
    if not usable:
        return
    tp = usable[-1]
    last: Rejection | None = None
    fitted = False
    for pp in nodes_to_try(MAX_PIPELINE_NODES, arch.num_layers):
        outcome = _option(arch, gpu, tp, workload, request, pp=pp)
        if isinstance(outcome, Rejection):
            last = outcome
        else:
            options.append(outcome)
            fitted = True
    if last is not None and not fitted:
        rejected.append(last)


def _timed(arch: ModelArchitecture, option: PlanOption, request: PlanRequest) -> PlanOption:
    """The option with its speed at the concurrency each replica serves at the peak."""
    if option.speed is not None:
        return option
    question = SpeedQuestion(
        tensor_parallel_size=option.tensor_parallel_size,
        pipeline_parallel_size=option.pipeline_parallel_size,
        batch=option.concurrency_per_replica,
        context_tokens=request.context_tokens,
        prompt_tokens=check_prompt_tokens(request.avg_prompt_tokens, request.max_model_len),
        kv_cache_dtype=option.capacity.kv_cache_dtype,
        weight_format=request.engine.weight_format,
    )
    if option.data_parallel_size > 1:  # one DP rank's share of the replica's sequences
        question = replace(
            question, batch=cdiv(option.concurrency_per_replica, option.data_parallel_size)
        )
    question = with_expert_layout(question, arch, option.capacity)
    served, _ = served_model(arch, option.gpu, request.engine)  # the weights at --dtype
    speed = replica_speed(served, option.gpu, question)
    warnings = option.warnings
    if isinstance(speed, NoEstimate):
        warnings = (*warnings, speed.warning)
    return replace(option, speed=speed, warnings=warnings)


# Memoised like the layouts, across plans: a candidate's capacity depends on the model, GPU,
# layout, length, cache dtype and engine options, not on the peak, headroom or replicas asked
# for, so a plan asked again (or with another peak) skips the engines' arithmetic, which is
# most of a whole-catalog plan's time. Capacity is frozen and only read; a plan has about 80
# candidates per cache dtype, so this holds a few dozen plans' worth.
@lru_cache(maxsize=2048)
def candidate_capacity(
    arch: ModelArchitecture,
    gpu: Gpu,
    workload: Workload,
    tp: int,
    engine: EngineOptions,
    *,
    pp: int = 1,
) -> Capacity:
    return compute_capacity(arch, gpu, workload, Parallelism(tp, pp), engine)


def _option(
    arch: ModelArchitecture,
    gpu: Gpu,
    tp: int,
    workload: Workload,
    request: PlanRequest,
    *,
    calibrated_pool: CalibratedPool | None = None,
    calibrated_speed: CalibratedSpeed | None = None,
    pp: int = 1,
) -> PlanOption | Rejection:
    problem = tensor_parallel_problem(arch, tp)
    if problem is not None:
        return Rejection(gpu, tp, problem.code, problem.reason)
    outcome = _sized_option(
        arch,
        gpu,
        tp,
        workload=workload,
        request=request,
        calibrated=(calibrated_pool, calibrated_speed),
        pp=pp,
    )
    if isinstance(outcome, Rejection) and outcome.pipeline_parallel_size != pp:
        return replace(outcome, pipeline_parallel_size=pp)  # a latency target's rejection
    return outcome


def _sized_option(
    arch: ModelArchitecture,
    gpu: Gpu,
    tp: int,
    *,
    workload: Workload,
    request: PlanRequest,
    calibrated: tuple[CalibratedPool | None, CalibratedSpeed | None],
    pp: int,
) -> PlanOption | Rejection:
    calibrated_pool, calibrated_speed = calibrated
    try:
        capacity = candidate_capacity(arch, gpu, workload, tp, request.engine, pp=pp)
        pool = None if calibrated_pool is None else calibrated_pool(capacity, gpu)
        if pool is not None:
            capacity = with_given_pool(
                capacity, pool, arch=arch, gpu=gpu, workload=workload, options=request.engine
            )
    except SizingError as exc:
        return Rejection(gpu, tp, exc.code, exc.reason, pp)
    if not capacity.fits:
        code = "weights-do-not-fit" if capacity.kv_pool_bytes <= 0 else "sequence-does-not-fit"
        return Rejection(gpu, tp, code, capacity.reason or "does not fit", pp)
    fit = _fit_for(capacity, request.avg_context_tokens)
    if fit.sequences_that_fit == 0:
        # The start-up check passed, but the null block leaves too little for one sequence.
        return Rejection(
            gpu,
            tp,
            "sequence-does-not-fit",
            f"one sequence needs {fit.blocks_per_sequence} blocks but only {fit.usable_blocks} "
            f"of the {capacity.num_gpu_blocks} blocks can be handed out",
            pp,
        )
    replicas = _replicas(request, fit)
    if replicas > request.max_replicas:
        return Rejection(
            gpu,
            tp,
            "too-many-replicas",
            f"needs {replicas} replicas of {tp * pp} GPUs, more than max_replicas "
            f"{request.max_replicas}",
            pp,
        )
    # Asked of every candidate, targets or not: the hook remembers which one it scaled.
    scale = None if calibrated_speed is None else calibrated_speed(capacity, gpu)
    outcome = None
    if request.targets.given:
        held = _hold_to_targets(
            arch, gpu, capacity, request, fit=fit, replicas=replicas, speed_scale=scale or 1.0
        )
        if isinstance(held, Rejection):
            return held
        fit, replicas, outcome = held
    option = _priced(gpu, tp, capacity, request, fit=fit, replicas=replicas, pp=pp)
    if outcome is None:
        return option
    slowed = (outcome,) if fit.latency_limit is not None else ()
    return replace(option, latency_outcome=outcome, warnings=(*option.warnings, *slowed))


def _hold_to_targets(
    arch: ModelArchitecture,
    gpu: Gpu,
    capacity: Capacity,
    request: PlanRequest,
    *,
    fit: _Fit,
    replicas: int,
    speed_scale: float = 1.0,
) -> tuple[_Fit, int, str] | Rejection:
    """The batch and replicas that meet the latency targets at the peak, or why none do; the
    decode step scaled by a speed calibration's `speed_scale` where one matched."""
    tp = capacity.parallel.tensor_parallel_size
    per_replica = min(fit.sequences_per_replica, cdiv(request.peak_concurrency, replicas))
    question = SpeedQuestion(
        tensor_parallel_size=tp,
        pipeline_parallel_size=capacity.parallel.pipeline_parallel_size,
        batch=per_replica,
        context_tokens=request.context_tokens,
        prompt_tokens=check_prompt_tokens(request.avg_prompt_tokens, request.max_model_len),
        kv_cache_dtype=capacity.kv_cache_dtype,
        weight_format=request.engine.weight_format,
    )
    question = with_expert_layout(question, arch, capacity)
    paced = pace(arch, gpu, question, request.targets, speed_scale=speed_scale)
    if isinstance(paced, NoEstimate):
        return Rejection(
            gpu,
            tp,
            "no-performance-figures",
            f"the latency targets cannot be checked: {paced.reason}",
        )
    if isinstance(paced, TargetMiss):
        return Rejection(gpu, tp, paced.code, paced.reason)
    if paced.miss is None:
        return fit, replicas, f"met at {per_replica:,} sequences per replica"
    pp = capacity.parallel.pipeline_parallel_size
    return _slowed(gpu, tp, request, fit=fit, replicas=replicas, paced=paced, pp=pp)


def _slowed(
    gpu: Gpu,
    tp: int,
    request: PlanRequest,
    *,
    fit: _Fit,
    replicas: int,
    paced: Paced,
    pp: int = 1,
) -> tuple[_Fit, int, str] | Rejection:
    """A smaller batch on more replicas: what a decode too slow at the peak's batch needs."""
    why = paced.miss.reason if paced.miss is not None else ""
    slower = replace(fit, latency_limit=paced.batch)
    more = max(replicas, _replicas(request, slower))
    if more > request.max_replicas:
        return Rejection(
            gpu,
            tp,
            "too-many-replicas",
            f"{why}; at {paced.batch:,} sequences per replica the peak needs {more:,} "
            f"replicas of {tp * pp} GPUs, more than max_replicas {request.max_replicas}",
        )
    outcome = (
        f"{why}; max_num_seqs {paced.batch:,}, the largest batch that meets every target (the "
        f"KV cache holds {fit.sequences_per_replica:,}), on {more:,} replicas instead of "
        f"{replicas:,}"
    )
    return slower, more, outcome


def with_given_pool(
    sized: Capacity,
    pool: int,
    *,
    arch: ModelArchitecture,
    gpu: Gpu,
    workload: Workload,
    options: EngineOptions,
) -> Capacity:
    """`sized` again with `pool` as its KV pool; its engine settings keep the fraction asked
    for (a given pool has none), so the flags to paste still carry it."""
    given = compute_capacity(
        arch, gpu, workload, sized.parallel, dataclasses.replace(options, kv_pool_bytes=pool)
    )
    fraction = {sized.budget.fraction_name: sized.budget.fraction}
    return dataclasses.replace(given, engine_settings={**given.engine_settings, **fraction})


@dataclass(frozen=True, slots=True)
class _Fit:
    """How one replica's blocks hold sequences of the workload's context."""

    usable_blocks: int
    blocks_per_sequence: int
    sequences_that_fit: int  # by the cache alone
    max_num_seqs: int | None  # the engine's cap on running sequences, if it has one
    latency_limit: int | None = None  # the largest batch that meets the latency targets

    @property
    def sequences_per_replica(self) -> int:
        caps = [self.sequences_that_fit, self.max_num_seqs, self.latency_limit]
        return min(cap for cap in caps if cap is not None)


def _fit_for(capacity: Capacity, avg_context_tokens: int | None) -> _Fit:
    usable = _usable_blocks(capacity)
    per_sequence = capacity.layout.blocks_per_request
    if avg_context_tokens is not None:
        # Paged attention: a sequence holds blocks for the tokens it has, not the maximum.
        per_sequence = _blocks_at(capacity, avg_context_tokens)
    cap = capacity.engine_settings.get("max_num_seqs")
    return _Fit(usable, per_sequence, usable // per_sequence, cap if isinstance(cap, int) else None)


def _replicas(request: PlanRequest, fit: _Fit) -> int:
    """Replicas that hold the peak: by blocks (less the headroom asked for) and by batch."""
    budget_blocks = fit.usable_blocks * (1 - request.headroom_fraction)
    by_memory = math.ceil(request.peak_concurrency * fit.blocks_per_sequence / budget_blocks)
    by_batch = cdiv(request.peak_concurrency, max(1, fit.sequences_per_replica))
    return max(1, by_memory, by_batch)


def _priced(
    gpu: Gpu,
    tp: int,
    capacity: Capacity,
    request: PlanRequest,
    *,
    fit: _Fit,
    replicas: int,
    pp: int = 1,
) -> PlanOption:
    """The option with its headroom, warnings and cost; a replica of `pp` nodes of `tp` GPUs
    (pipeline stages, one per node) has `tp x pp` GPUs, and costs as many."""
    demand = request.peak_concurrency * fit.blocks_per_sequence
    supply = replicas * fit.usable_blocks
    free_blocks = supply - demand
    headroom = free_blocks / supply
    warnings = list(capacity.warnings)
    cap = fit.max_num_seqs
    if cap is not None and fit.sequences_that_fit > cap:
        why = (
            "raising it also raises the profile run's sampler peak"
            if capacity.engine is Engine.VLLM
            else "that is the engine's limit on running requests"
        )
        warnings.append(
            f"the KV cache holds {fit.sequences_that_fit} sequences per replica but max_num_seqs "
            f"{cap} caps the batch; {why}"
        )
    total = replicas * tp * pp
    cost = None if gpu.price_usd_per_hour is None else round(total * gpu.price_usd_per_hour, 4)
    limit = capacity.max_num_seqs if fit.latency_limit is None else fit.latency_limit
    return PlanOption(
        gpu=gpu,
        tensor_parallel_size=tp,
        replicas=replicas,
        total_gpus=total,
        max_num_seqs=min(capacity.max_num_seqs, limit),
        sequences_per_replica=fit.sequences_per_replica,
        headroom_fraction=round(headroom, 4),
        headroom_bytes=free_blocks * capacity.layout.bytes_per_block,
        headroom_tokens=int(headroom * replicas * capacity.kv_cache_tokens),
        cost_per_hour_usd=cost,
        warnings=tuple(warnings),
        capacity=capacity,
        engine=request.engine,
        concurrency_per_replica=min(
            fit.sequences_per_replica, cdiv(request.peak_concurrency, replicas)
        ),
        pipeline_parallel_size=pp,
    )


def _usable_blocks(capacity: Capacity) -> int:
    # vLLM's block pool hands out every block but the null block.
    if capacity.engine is Engine.VLLM:
        return max(0, capacity.num_gpu_blocks - 1)
    return capacity.num_gpu_blocks


def _blocks_at(capacity: Capacity, context_tokens: int) -> int:
    """Blocks a sequence of `context_tokens` holds, scaling each group's context-bound part."""
    total = 0
    for group in capacity.layout.groups:
        if group.kind in ("full_attention", "mla", "all_layers"):
            total += cdiv(context_tokens, group.block_size)
        else:
            # Windows, chunks and recurrent state do not grow past what max_model_len needs.
            total += min(group.blocks_per_request, cdiv(context_tokens, group.block_size) + 1)
    return max(1, total)


# --- issue 21: data-parallel attention with expert parallelism ------------------------------


def _parallel_flags(capacity: Capacity, options: EngineOptions) -> list[str]:
    """vLLM's DP / EP / DCP flags where the layout has them."""
    flags = []
    if capacity.parallel.data_parallel_size > 1:
        flags.append(f"--data-parallel-size {capacity.parallel.data_parallel_size}")
    ep = options.expert_parallel
    if ep.enable_expert_parallel:
        flags.append("--enable-expert-parallel")
    if ep.decode_context_parallel_size > 1:
        flags.append(f"--decode-context-parallel-size {ep.decode_context_parallel_size}")
    return flags


def _expert_parallel_options(
    arch: ModelArchitecture, gpu: Gpu, node: int, workload: Workload, request: PlanRequest
) -> list[PlanOption]:
    """A MoE model on vLLM: one node of `node` GPUs as DP `node` x TP 1 with expert
    parallelism (engines/expert_parallel.py), each DP rank its own pool of its own sequences,
    beside the TP layouts, timed per DP rank (`_timed`, speed/replica.py expert_layout). Not
    tried with latency targets (the search for a batch that meets them paces TP layouts). A
    layout that does not fit is left out (the TP layouts' rejections say enough)."""
    if (
        arch.moe is None
        or node < 2
        or request.engine.engine is Engine.TRTLLM
        or request.targets.given
        or request.engine.expert_parallel.decode_context_parallel_size > 1
    ):
        return []
    engine, sglang_tp = _data_parallel_engine(request.engine, node)
    try:
        capacity = _data_parallel_capacity(arch, gpu, workload, node, engine, sglang_tp=sglang_tp)
    except SizingError:
        return []
    rank = _fit_for(capacity, request.avg_context_tokens)
    if not capacity.fits or rank.sequences_that_fit == 0:
        return []
    fit = _Fit(
        rank.usable_blocks * node,
        rank.blocks_per_sequence,
        rank.sequences_that_fit * node,
        None if rank.max_num_seqs is None else rank.max_num_seqs * node,
    )
    replicas = _replicas(request, fit)
    if replicas > request.max_replicas:
        return []
    priced = _priced(
        gpu, node, capacity, replace(request, engine=engine), fit=fit, replicas=replicas
    )
    other = "vllm" if request.engine.engine is Engine.SGLANG else "sglang"
    return [
        replace(
            priced,
            tensor_parallel_size=1,
            data_parallel_size=node,
            max_num_seqs=capacity.max_num_seqs,
            headroom_tokens=int(
                priced.headroom_fraction * replicas * capacity.kv_cache_tokens_total
            ),
            speed=None,
            warnings=(
                *priced.warnings,
                f"DP {node} x TP 1 with expert parallelism: each of the {node} DP ranks holds "
                f"its own KV pool ({capacity.kv_cache_tokens:,} tokens, {capacity.max_num_seqs} "
                "sequences at max_model_len); max_num_seqs and the pool are per rank",
                f"no {other} flags for this layout ({other} left out of engine_flags): its "
                f"DP ranks are sized by {request.engine.engine.value}'s rules, and the other "
                "engine's data-parallel layout is sized apart (a plan with that engine)",
            ),
            flags_left_out=(other,),
        )
    ]


def _data_parallel_engine(options: EngineOptions, node: int) -> tuple[EngineOptions, int]:
    """vLLM: --enable-expert-parallel over DP `node`; SGLang: --tp node with DP attention
    node and EP node (engines/sglang_dp.py), its --tp returned (0 for vLLM). An --ep-size the
    caller gave is kept (one that does not fit the node is refused by name, not replaced)."""
    if options.engine is Engine.SGLANG:
        asked = options.sglang_parallel.ep_size
        ep = asked if asked > 1 else node
        flags = replace(options.sglang_parallel, enable_dp_attention=True, ep_size=ep)
        return replace(options, sglang_parallel=flags), node
    vllm_flags = replace(options.expert_parallel, enable_expert_parallel=True)
    return replace(options, expert_parallel=vllm_flags), 0


@lru_cache(maxsize=512)
def _data_parallel_capacity(
    arch: ModelArchitecture,
    gpu: Gpu,
    workload: Workload,
    dp: int,
    engine: EngineOptions,
    *,
    sglang_tp: int = 0,
) -> Capacity:
    """vLLM's DP `dp` x TP 1, or SGLang's --tp `sglang_tp` --dp `dp` with DP attention (given
    in `engine`): capacity.parallel is attention TP 1 x DP `dp` for both."""
    if sglang_tp:
        return compute_capacity(arch, gpu, workload, Parallelism(sglang_tp, 1, dp), engine)
    return compute_capacity(arch, gpu, workload, Parallelism(1, 1, dp), engine)
