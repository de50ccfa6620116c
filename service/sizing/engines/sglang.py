"""SGLang: a fixed static fraction of the memory free at start-up, cut into token slots.

Source: python/sglang/srt/model_executor/model_runner.py `profile_max_num_token`,
`init_memory_pool`; server_args.py for the default `mem_fraction_static` (read in the released
wheels 0.4.3 ... 0.5.23; restated in ../shared/design/engine-memory.md section 2).

Hybrid models (read in the wheels 0.4.9 ... 0.5.23, milestones in calibration.py): sliding-
window models split rest_memory into a full-attention and an SWA token pool
(--swa-full-tokens-ratio); Mamba / gated-delta-net models give part of it to a pool of
per-request state slots (--mamba-full-memory-ratio) and the rest to full-attention tokens.
Each release's behaviour, with the SGLang file and function: docs/engines/sglang.md.

`sglang_capacity` is the whole path: rest_memory (`sglang_budget`), then one token pool
(`sglang_report`) or the hybrid pools (`sglang_hybrid`: `_swa_pools`, `_mamba_pools`, each cut
into SGLang's own steps). Short local names: m = max_model_len, tp = tensor_parallel_size,
page = page_size (tokens per page).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Layer,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
    StateLayer,
    TokenLayer,
)
from ..model.dtypes import FloatDtype
from ..units import GiB, MiB, cdiv
from ..versions import parse_engine_version, predecessor, release_label, sizing_note
from . import calibration as cal
from .all2all import SglangDeepEP, sglang_deepep
from .common import (
    BudgetLine,
    CacheGroup,
    CacheLayout,
    Capacity,
    Engine,
    EngineOptions,
    EngineSettings,
    MemoryBudget,
    PoolReport,
    SizingInputs,
    given_pool_budget,
    single_group_layout,
)
from .kv import kv_heads_per_gpu, state_shape, token_bytes_per_layer
from .lora import sglang_lora_buffers
from .offload import offloaded_weight_bytes, sglang_tiers, with_weight_offload
from .sglang_dp import (
    dp_attention_asked,
    dp_attention_reserve_mib,
    per_rank_running_requests,
    sglang_parallel_settings,
)
from .unmodelled import refuse_unmodelled


def default_mem_fraction_static(
    total_bytes: int, tensor_parallel_size: int, attn_dp_size: int = 1, a2a_reserve_mib: int = 0
) -> float:
    """server_args.py (0.5.x): reserve MiB for activations and graphs, keep the rest static.

    reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs
               + tp/8 x 1024, at least 10240 above 60 GB; the chunked-prefill size and the
    largest graph batch grow with the GPU's memory. DP attention adds its padding
    (sglang_dp.py dp_attention_reserve_mib) before the floor, as memory_hook.py 0.5.23 does;
    DeepEP's reserve (all2all.py sglang_deepep) after it.
    """
    gpu_mib = total_bytes / MiB
    tp = tensor_parallel_size
    chunked, graph_bs = _gpu_memory_defaults(gpu_mib, tp)
    reserved = 512 + 1.5 * max(chunked, 2048) + 2 * graph_bs + tp / 8 * 1024
    reserved += dp_attention_reserve_mib(graph_bs, attn_dp_size)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    reserved += a2a_reserve_mib
    return round((gpu_mib - reserved) / gpu_mib, 3)


def _gpu_memory_defaults(gpu_mib: float, tp: int) -> tuple[int, int]:
    """chunked_prefill_size and cuda_graph_max_bs by the GPU's memory (server_args.py
    `_handle_gpu_memory_settings`, 0.5.3 ... 0.5.10;
    docs/engines/sglang.md#default-mem-fraction-static)."""
    if gpu_mib < 20 * 1024:
        return 2048, 8
    if gpu_mib < 35 * 1024:
        return 2048, (80 if tp >= 4 else 16)
    if gpu_mib < 60 * 1024:
        return 4096, (160 if tp >= 4 else 32)
    if gpu_mib < 160 * 1024:
        return 8192, (512 if tp >= 4 else 256)
    return 16384, 512


def default_chunked_prefill_size(total_bytes: int) -> int:
    """SGLang's --chunked-prefill-size when not given: by the GPU's memory, the value the
    default mem_fraction_static reserves activations for (`_gpu_memory_defaults`)."""
    return _gpu_memory_defaults(total_bytes / MiB, 1)[0]


def sglang_budget(
    *,
    total_bytes: int,
    weights_per_gpu: int,
    tensor_parallel_size: int,
    options: EngineOptions,
    attn_dp_size: int = 1,
    weights_note: str | None = None,
    held: BudgetLine | None = None,
    deepep: SglangDeepEP | None = None,
) -> MemoryBudget:
    """`tensor_parallel_size`: SGLang's --tp-size (every GPU of the engine, DP attention's
    groups included); `attn_dp_size`: DP attention's width (sglang_dp.py); `held`: what
    ModelRunner.initialize allocates after the weights and before the pool is sized (the LoRA
    buffers, engines/lora.py), a line taken from rest_memory; `deepep`: the DeepEP buffer made
    after the pool (engines/all2all.py), a line cut out of the reserve."""
    if options.kv_pool_bytes is not None:
        return given_pool_budget(
            total_bytes=total_bytes,
            weights_per_gpu=weights_per_gpu,
            pool_bytes=options.kv_pool_bytes,
            fraction_name="mem_fraction_static",
            note="given",
        )
    fraction = options.mem_fraction_static or default_mem_fraction_static(
        total_bytes,
        tensor_parallel_size,
        attn_dp_size,
        a2a_reserve_mib=0 if deepep is None else deepep.reserve_mib,
    )
    startup = cal.SGLANG_CONTEXT + (cal.SGLANG_NCCL if tensor_parallel_size > 1 else 0)
    # total_gpu_memory in SGLang's formula: free memory after distributed init (min over ranks).
    free_at_start = total_bytes - startup
    loaded = int(weights_per_gpu * (1 + cal.SGLANG_LOAD_OVERHEAD_FRACTION))
    reserved = int(free_at_start * (1 - fraction))
    # rest_memory = free after loading - free_at_start x (1 - mem_fraction_static)
    pool = free_at_start - loaded - reserved + (0 if held is None else held.bytes)
    lines = (
        BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports"),
        BudgetLine("startup", -startup, "CUDA context and NCCL before SGLang reads free memory"),
        BudgetLine(
            "weights",
            -loaded,
            "model weights on this GPU, with loading slack"
            + ("" if weights_note is None else f" ({weights_note})"),
        ),
        *(() if held is None else (held,)),
        *_reserved_lines(reserved, fraction, deepep),
        BudgetLine("kv_cache_memory", pool, "rest_memory: what is left for the KV cache"),
    )
    return MemoryBudget(
        total_bytes=total_bytes,
        fraction=fraction,
        fraction_name="mem_fraction_static",
        requested_bytes=int(free_at_start * fraction),
        weights_bytes=loaded,
        activation_bytes=reserved,
        non_torch_bytes=startup,
        cudagraph_bytes=0,
        pool_bytes=pool,
        pool_given=False,
        describe=lambda: lines,
    )


def _reserved_lines(
    reserved: int, fraction: float, deepep: SglangDeepEP | None
) -> tuple[BudgetLine, ...]:
    """The reserve mem_fraction_static keeps, with DeepEP's buffer cut out of it where it is
    made after the pool (it does not shrink the pool: it must fit in the reserve)."""
    note = (
        f"(1 - mem_fraction_static {fraction}) x free memory at start, kept for activations "
        "and CUDA graphs"
    )
    if deepep is None or not deepep.buffer_bytes:
        return (BudgetLine("reserved", -reserved, note),)
    buffers = min(deepep.buffer_bytes, reserved)
    return (
        BudgetLine("reserved", -(reserved - buffers), note + ", less DeepEP's buffer"),
        BudgetLine("all2all_buffers", -buffers, deepep.note),
    )


def sglang_tokens(pool_bytes: int, cell_bytes: int, page_size: int) -> int:
    """max_total_num_tokens = rest_memory // cell_size, rounded down to whole pages."""
    return max(0, pool_bytes) // cell_bytes // page_size * page_size


def sglang_running_requests(tokens: int, max_model_len: int, requested: int | None) -> int:
    """max_running_requests of a single-pool model: --max-running-requests, or
    clamp(int(tokens / context_len x 512), 2048, 4096); never more than tokens // 2
    (tp_worker before 0.5.10, resolve_max_num_reqs after)."""
    if requested is None:
        requested = _estimated_requests(tokens, max_model_len)
    return max(0, min(requested, tokens // 2))


def _estimated_requests(tokens: int, context_len: int) -> int:
    """The request pool SGLang sizes without --max-running-requests."""
    estimated = int(tokens / context_len * cal.SGLANG_REQS_PER_CONTEXT)
    return min(max(estimated, cal.SGLANG_MIN_REQS), cal.SGLANG_MAX_REQS)


def sglang_report(
    pool_bytes: int,
    cell_bytes: int,
    page_size: int,
    max_model_len: int,
    max_running_requests: int | None = None,
) -> PoolReport:
    """The pool in whole pages, and the sequences of max_model_len it holds."""
    tokens = sglang_tokens(pool_bytes, cell_bytes, page_size)
    pages_per_request = cdiv(max_model_len, page_size)
    pages = tokens // page_size
    concurrency = pages / pages_per_request
    running = sglang_running_requests(tokens, max_model_len, max_running_requests)
    lines = (
        f"KV Cache is allocated. #tokens: {tokens}, K size: "
        f"{tokens * cell_bytes / 2 / GiB:.2f} GB, V size: {tokens * cell_bytes / 2 / GiB:.2f} GB",
        f"max_total_num_tokens={tokens}, max_running_requests={running}, "
        f"context_len={max_model_len}",
    )
    return PoolReport(pages, tokens, concurrency, pages // pages_per_request, lambda: lines)


# --- hybrid pools (sliding window, Mamba / GDN) ---------------------------------------------


def parse_sglang_version(text: str, field: str = "engine_version") -> cal.SglangVersion:
    """Any PEP 440 release string -> the (major, minor, patch, post) whose rules size it.

    `0.5.2` -> (0, 5, 2, 0); `v0.4.9.post3` -> (0, 4, 9, 3) (SGLang ships behaviour in post
    releases); a pre-release or dev build comes before its release and gets the rules of the
    releases before it (`0.5.10rc0` -> (0, 5, 9, any post)), as versions.modelled_release.
    """
    version = parse_engine_version(text, field, "SGLang")
    if any(version.release[3:]) or not version.is_prerelease:
        numbers = (*(*version.release, 0, 0)[:3], version.post or 0)
    elif version.pre is not None:
        numbers = predecessor((*(*version.release, 0, 0)[:3], 0))
    else:  # a dev build of a release or of a post-release: just before it
        numbers = predecessor((*(*version.release, 0, 0)[:3], version.post or 0))
    return numbers[0], numbers[1], numbers[2], numbers[3]


@dataclass(frozen=True, slots=True)
class SglangRelease:
    """The parts of SGLang's hybrid-pool arithmetic one release has."""

    version: cal.SglangVersion
    label: str

    def has(self, milestone: cal.SglangVersion) -> bool:
        return self.version >= milestone


def sglang_release(engine_version: str | None) -> SglangRelease:
    text = engine_version or cal.LATEST_SGLANG_VERSION
    return SglangRelease(parse_sglang_version(text), text)


def sglang_version_note(engine_version: str | None) -> tuple[str, ...]:
    """A warning when the release asked is not one kvplan sizes as itself (newer, pre-release)."""
    text = engine_version or cal.LATEST_SGLANG_VERSION
    numbers = parse_sglang_version(text)
    post = f".post{release_label(numbers[3:])}" if numbers[3] else ""
    label = release_label(numbers[:3]) + post
    note = sizing_note("SGLang", parse_engine_version(text), label, cal.LATEST_SGLANG_VERSION)
    return (note,) if note else ()


@dataclass(frozen=True, slots=True)
class SwaSplit:
    """The full-attention and sliding-window token pools, per GPU."""

    # rest // (F x n_full + S x n_swa), before the split: builds before 0.5.10 size
    # max_running_requests from it.
    profiled_tokens: int
    full_tokens: int  # the scheduler's max_total_num_tokens
    swa_tokens: int


def swa_split(
    release: SglangRelease,
    *,
    rest_bytes: int,
    full_bytes: int,
    swa_bytes: int,
    full_layers: int,
    swa_layers: int,
    page_size: int,
    ratio: float = cal.SGLANG_SWA_FULL_TOKENS_RATIO,
) -> SwaSplit:
    """Split rest_memory into full and SWA token pools, with swa_tokens = ratio x full_tokens.

    full_bytes / swa_bytes: bytes one token costs across all full / all sliding layers (F x n,
    S x n). Three generations (released wheels):
      < 0.5.9  ModelRunner.set_num_token_hybrid: profile as if every layer were full,
               T = rest // (F n_f + S n_s) (page-aligned); full = int(T x L / (r n_s + n_f)).
      0.5.9-10 set_num_tokens_hybrid_swa / _resolve_hybrid_swa_tokens: the same T, then
               full = int(T (F n_f + S n_s) / (F n_f + r S n_s)) (bytes, not layers).
      >= 0.5.11 pool_configurator.HybridSWAPoolConfigurator: full = int(rest // (F n_f + r S n_s)).
    swa = int(full x r); both rounded down to pages (from 0.5.7 for the split pools).
    """
    rest = max(0, rest_bytes)

    def align(tokens: int) -> int:
        return tokens // page_size * page_size

    if release.has(cal.SGLANG_SWA_SPLIT_BY_COEFF):
        full = align(int(rest // (full_bytes + ratio * swa_bytes)))
        return SwaSplit(full, full, align(int(full * ratio)))
    profiled = rest // (full_bytes + swa_bytes)
    capacity = align(profiled)
    if release.has(cal.SGLANG_SWA_SPLIT_BY_MEMORY):
        total_memory = capacity * (full_bytes + swa_bytes)
        full = align(int(total_memory / (full_bytes + ratio * swa_bytes)))
        return SwaSplit(profiled, full, align(int(full * ratio)))
    full = int(capacity * (full_layers + swa_layers) / (ratio * swa_layers + full_layers))
    swa = int(full * ratio)
    if release.has(cal.SGLANG_SWA_SPLIT_PAGE_ALIGNED):
        full, swa = align(full), align(swa)
    return SwaSplit(profiled, full, swa)


def sglang_state_bytes(layer: StateLayer, tensor_parallel_size: int, ssm_element_bytes: int) -> int:
    """Bytes one request's state takes in one recurrent layer on one GPU (MambaPool).

    configs/mamba_utils.py Mamba2StateShape.create (0.5.4 ... 0.5.23; qwen3_next.py builds GDN
    state the same way): groups become tp when tp does not divide them; conv (conv_dim / tp,
    kernel - 1) in bfloat16, temporal (heads / tp, head_dim, state_size) in the SSM dtype.
    GDN: heads = value heads, head_dim = value dim, groups = key heads, state = key dim.
    """
    tp = tensor_parallel_size
    if isinstance(layer, Mamba1):
        # No hybrid Mamba-1 model in SGLang; attention-free Mamba-1 (models/mamba.py, 0.5.20+).
        shape = state_shape(layer, tp)
        return (
            shape.conv_elements * cal.SGLANG_MAMBA_CONV_BYTES
            + shape.ssm_elements * ssm_element_bytes
        )
    if isinstance(layer, GatedDeltaNet):
        heads, head_dim = layer.num_value_heads, layer.value_head_dim
        groups, state = layer.num_key_heads, layer.key_head_dim
    else:
        heads, head_dim = layer.num_heads, layer.head_dim
        groups, state = layer.n_groups, layer.state_size
    if groups % tp:
        groups += tp - groups  # extra_groups_for_head_shards
    conv = (layer.conv_kernel - 1) * ((heads * head_dim + 2 * groups * state) // tp)
    temporal = (heads // tp) * head_dim * state
    return conv * cal.SGLANG_MAMBA_CONV_BYTES + temporal * ssm_element_bytes


@dataclass(frozen=True, slots=True)
class MambaSplit:
    """Mamba state slots and what is left of rest_memory for full-attention tokens."""

    slots: int  # max_mamba_cache_size
    state_bytes: int
    rest_bytes: int
    by_ratio: bool  # sized by --mamba-full-memory-ratio, not a fixed count


def mamba_split(
    release: SglangRelease,
    *,
    rest_bytes: int,
    per_request: int,
    radix_cache: bool,
    ratio: float = cal.SGLANG_MAMBA_FULL_MEMORY_RATIO,
    slots: int | None = None,
) -> MambaSplit:
    """handle_max_mamba_cache (model_runner 0.5.2 ... kv_cache_configurator 0.5.23).

    0.5.2-0.5.3: radix cache forced off, max_mamba_cache_size = 512.
    0.5.4-0.5.8: 512 without radix cache; with it the state takes r / (1 + r) of rest_memory:
                 slots = int(rest x r / (1 + r) // per_request).
    0.5.9+:      the ratio split also without radix cache (no --max-running-requests given).
    0.5.17+:     the pool's padding slot is charged too: slots = int((B - per_req) // per_req)
                 and the state takes (slots + 1) x per_request.
    --max-mamba-cache-size (`slots`) replaces all of that (kv_cache_configurator 0.5.23).
    """
    rest = max(0, rest_bytes)
    fixed = slots is not None or (
        not release.has(cal.SGLANG_MAMBA_MEMORY_RATIO)
        or (not radix_cache and not release.has(cal.SGLANG_MAMBA_FIT_WITHOUT_RADIX))
    )
    padding = 1 if release.has(cal.SGLANG_MAMBA_PADDING_SLOT) else 0
    if slots is not None:
        count = slots
    elif fixed:
        count = cal.SGLANG_MAMBA_FIXED_SLOTS
    else:
        budget = rest * ratio / (1 + ratio)
        count = max(0, int((budget - padding * per_request) // per_request))
    slots = count
    state = (slots + padding) * per_request
    # A fixed pool larger than rest_memory leaves nothing: SGLang stops ("Not enough memory").
    return MambaSplit(slots, state, max(0, rest - state), not fixed)


def mamba_slots_per_request(release: SglangRelease, radix_cache: bool) -> int:
    """State slots one running request may pin: _calculate_mamba_ratio.

    1 without radix cache; 3 with it (0.5.4+); from 0.5.14 --mamba-radix-cache-strategy auto
    picks extra_buffer under the default overlap schedule, which adds a ping-pong pair (+2).
    """
    if not radix_cache:
        return 1
    extra = cal.SGLANG_MAMBA_EXTRA_BUFFER_SLOTS if release.has(cal.SGLANG_MAMBA_EXTRA_BUFFER) else 0
    return cal.SGLANG_MAMBA_SLOTS_PER_REQUEST + extra


def max_running_requests(
    release: SglangRelease,
    *,
    profiled_tokens: int,
    tokens: int,
    context_len: int,
    state_cap: int | None = None,
    requested: int | None = None,
) -> int:
    """max_running_requests: --max-running-requests (`requested`) when given, else the estimate.

    Before 0.5.10 (init_memory_pool + tp_worker / model_runner): max_num_reqs =
    clamp(int(profiled / context_len x 512), 2048, 4096) from the profiled count (before the
    SWA split), capped by the Mamba slots; then min(max_total_num_tokens // 2, max_num_reqs).
    0.5.10+ (_resolve_max_num_reqs / resolve_max_num_reqs): the same clamp from the final
    token count, min(that, tokens // 2), capped by the Mamba slots.
    """
    if requested is not None:
        requests = requested
    else:
        base = profiled_tokens if not release.has(cal.SGLANG_REQS_FROM_FINAL_TOKENS) else tokens
        requests = _estimated_requests(base, context_len)
    if state_cap is not None:
        requests = min(requests, state_cap)
    return max(0, min(requests, tokens // 2))


@dataclass(frozen=True, slots=True)
class SglangHybrid:
    """One GPU's hybrid pools as SGLang cuts them; `tokens` is max_total_num_tokens."""

    tokens: int
    full_layers: int  # layers holding every token of the context (the token pool's layers)
    pool_bytes_per_token: float  # rest_memory one full-attention token costs, other pools incl.
    running: int  # max_running_requests
    sequences: int  # sequences of max_model_len that run at once
    concurrency: float
    settings: EngineSettings
    problem: str | None  # why not even one sequence runs; None when it fits
    describe: Callable[[], tuple[str, ...]] = field(compare=False, repr=False)


WindowedLayer = SlidingWindowAttention | ChunkedLocalAttention


def _windowed(layers: Iterable[Layer]) -> list[WindowedLayer]:
    return [g for g in layers if isinstance(g, SlidingWindowAttention | ChunkedLocalAttention)]


def _whole_context(layers: Iterable[Layer]) -> list[TokenLayer]:
    """Full attention and MLA: layers that keep every token of the context."""
    return [g for g in layers if isinstance(g, FullAttention | MultiHeadLatentAttention)]


def _attention(layers: Iterable[Layer]) -> list[TokenLayer]:
    return [*_whole_context(layers), *_windowed(layers)]


def _recurrent(layers: Iterable[Layer]) -> list[StateLayer]:
    return [g for g in layers if isinstance(g, GatedDeltaNet | Mamba2 | Mamba1)]


def _bytes_per_token(
    layers: Iterable[TokenLayer], kv_element_bytes: int, tensor_parallel_size: int
) -> int:
    return sum(token_bytes_per_layer(g, kv_element_bytes, tensor_parallel_size) for g in layers)


# Which sliding-window models SGLang puts in the SWA pool is decided by architecture name
# (ModelRunner's model check up to 0.5.7, model_config.is_hybrid_swa_model from 0.5.8, and
# server_args / arg_groups/model_overrides turning it off), which a layer schedule does not
# carry: the model's name (catalog slug or Hugging Face id) is the only hint.
SWA_ARCHITECTURES_NOTE = (
    "SGLang puts sliding-window layers in its SWA pool only for the architectures it lists "
    "(gpt-oss, MiMo-V2, Step-3.5, Gemma 4, Llama 4 from 0.5.8); for Gemma 2/3/3n (from "
    "0.5.1), Exaone 4, OLMo 2/3 and Cohere 2 it sizes every layer for the whole context. "
    "kvplan did not recognise this model's name and assumed the SWA pool: if SGLang does not "
    "list it, set disable_hybrid_kv_cache_manager (--disable-hybrid-swa-memory)"
)
_SWA_POOL_MODELS = re.compile(
    r"gpt[-_ ]?oss|mimo[-_ ]?v2|step[-_ ]?3\.?[57]|gemma[-_ ]?4|llama[-_ ]?4"
)
_GEMMA_2_3 = re.compile(r"gemma[-_ ]?[23]")
_NO_SWA_POOL_MODELS = re.compile(r"exaone|olmo|cohere|command[-_ ]?[ra]|c4ai")


def _swa_pool_by_name(name: str, release: SglangRelease) -> bool | None:
    """True / False when the name says whether SGLang uses its SWA pool, None when unknown."""
    lowered = name.lower()
    if _SWA_POOL_MODELS.search(lowered):
        return True
    if _GEMMA_2_3.search(lowered):
        # server_args._handle_model_specific_adjustments (0.5.1+) and
        # arg_groups/model_overrides/gemma2_gemma3.py (0.5.23): disable_hybrid_swa_memory.
        return not release.has(cal.SGLANG_GEMMA_SWA_OFF)
    if _NO_SWA_POOL_MODELS.search(lowered):
        return False
    return None


def _kv_lines(
    tokens: int, layers: Sequence[TokenLayer], kv_element_bytes: int, tensor_parallel_size: int
) -> tuple[str, ...]:
    """memory_pool.py MHATokenToKVPool / MLATokenToKVPool: "KV Cache is allocated." (GB = GiB)."""
    latent = [layer for layer in layers if isinstance(layer, MultiHeadLatentAttention)]
    if latent:
        size = tokens * sum(
            token_bytes_per_layer(layer, kv_element_bytes, tensor_parallel_size) for layer in layers
        )
        return (f"KV Cache is allocated. #tokens: {tokens}, KV size: {size / GiB:.2f} GB",)
    k = v = 0
    for layer in layers:
        if isinstance(layer, MultiHeadLatentAttention):
            continue
        heads = kv_heads_per_gpu(layer.num_kv_heads, tensor_parallel_size)
        k += heads * layer.head_dim * kv_element_bytes
        v += heads * (layer.v_head_dim or layer.head_dim) * kv_element_bytes
    return (
        f"KV Cache is allocated. #tokens: {tokens}, K size: {tokens * k / GiB:.2f} GB, "
        f"V size: {tokens * v / GiB:.2f} GB",
    )


def sglang_hybrid(
    arch: ModelArchitecture,
    *,
    stages: Sequence[ModelArchitecture],
    pool_bytes: int,
    kv_element_bytes: int,
    tensor_parallel_size: int,
    page_size: int,
    max_model_len: int,
    options: EngineOptions,
) -> tuple[SglangHybrid | None, tuple[str, ...]]:
    """The SWA or Mamba pools, or None when SGLang sizes every attention layer for the whole
    context (then the notes say why). Raises SizingError for models SGLang does not run."""
    if arch.has_state_layers:
        return _mamba_pools(
            arch,
            sglang_release(options.engine_version),
            stages=stages,
            pool_bytes=pool_bytes,
            kv_element_bytes=kv_element_bytes,
            tensor_parallel_size=tensor_parallel_size,
            page_size=page_size,
            max_model_len=max_model_len,
            options=options,
        )
    windowed = _windowed(layer for layer, _ in arch.cache_layer_counts)
    if not windowed:
        return None, ()
    release = sglang_release(options.engine_version)
    by_name = _swa_pool_by_name(arch.name, release)
    refusal = _without_swa_pool(arch, release, options, windowed, by_name)
    if refusal is not None:
        return None, (refusal,)
    return _swa_pools(
        release,
        known=by_name is True,
        stages=stages,
        pool_bytes=pool_bytes,
        kv_element_bytes=kv_element_bytes,
        tensor_parallel_size=tensor_parallel_size,
        page_size=page_size,
        max_model_len=max_model_len,
        ratio=(
            options.swa_full_tokens_ratio
            if options.swa_full_tokens_ratio is not None
            else cal.SGLANG_SWA_FULL_TOKENS_RATIO
        ),
        requested=options.max_num_seqs,
    )


def _without_swa_pool(
    arch: ModelArchitecture,
    release: SglangRelease,
    options: EngineOptions,
    windowed: Sequence[WindowedLayer],
    by_name: bool | None,
) -> str | None:
    """Why SGLang sizes this windowed model's every layer for the whole context, or None."""
    everything = "every attention layer is sized for the whole context"
    if options.disable_hybrid_kv_cache_manager:
        return f"--disable-hybrid-swa-memory: SGLang {everything}"
    if not release.has(cal.SGLANG_SWA_POOL):
        return f"SGLang {release.label} has no SWA pool (0.4.9.post3+): {everything}"
    chunked = any(isinstance(layer, ChunkedLocalAttention) for layer in windowed)
    if chunked and not release.has(cal.SGLANG_CHUNKED_AS_SWA):
        return (
            f"SGLang {release.label} keeps chunked-attention layers in the SWA pool only with "
            f"--hybrid-kvcache-ratio (the SWA pool takes them from 0.5.8): {everything}"
        )
    if len(windowed) == len(arch.cache_layer_counts):
        return (
            "SGLang has no SWA pool for models whose every layer is windowed (Mistral v0.1, "
            f"Phi-3): {everything}"
        )
    if by_name is False:
        return (
            f"SGLang {release.label} keeps {arch.name}'s sliding-window layers out of its SWA pool "
            f"(disable_hybrid_swa_memory for this architecture): {everything}"
        )
    return None


# --- sliding-window pools -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _StageSplit:
    """One pipeline stage's SWA split and the layers on each side of it."""

    split: SwaSplit
    full: list[TokenLayer]
    windowed: list[WindowedLayer]


def _tightest_stage_split(
    release: SglangRelease,
    *,
    stages: Sequence[ModelArchitecture],
    pool_bytes: int,
    kv_element_bytes: int,
    tensor_parallel_size: int,
    page_size: int,
    ratio: float,
) -> _StageSplit:
    """Pipeline stages: each rank splits its own layers; SGLang keeps the smallest token count."""
    tp = tensor_parallel_size
    best: _StageSplit | None = None
    for stage in stages:
        full, windowed = _whole_context(stage.layers), _windowed(stage.layers)
        full_bytes = _bytes_per_token(full, kv_element_bytes, tp)
        swa_bytes = _bytes_per_token(windowed, kv_element_bytes, tp)
        if full_bytes + swa_bytes == 0:
            continue
        split = swa_split(
            release,
            rest_bytes=pool_bytes,
            full_bytes=full_bytes,
            swa_bytes=swa_bytes,
            full_layers=len(full),
            swa_layers=len(windowed),
            page_size=page_size,
            ratio=ratio,
        )
        if best is None or split.full_tokens < best.split.full_tokens:
            best = _StageSplit(split, full, windowed)
    if best is None:
        raise SizingError("layer_schedule", "no attention layer to size")
    return best


def _swa_pools(
    release: SglangRelease,
    *,
    known: bool,
    stages: Sequence[ModelArchitecture],
    pool_bytes: int,
    kv_element_bytes: int,
    tensor_parallel_size: int,
    page_size: int,
    max_model_len: int,
    ratio: float,
    requested: int | None,
) -> tuple[SglangHybrid, tuple[str, ...]]:
    """SWAKVPool, M = max_model_len: the split (`_tightest_stage_split`), the requests each
    pool admits (`_swa_admission`), the pools as answered (`_swa_hybrid`)."""
    tp, page, m = tensor_parallel_size, page_size, max_model_len
    best = _tightest_stage_split(
        release,
        stages=stages,
        pool_bytes=pool_bytes,
        kv_element_bytes=kv_element_bytes,
        tensor_parallel_size=tp,
        page_size=page,
        ratio=ratio,
    )
    split, full, windowed = best.split, best.full, best.windowed
    notes = _swa_notes(
        release,
        known,
        len(stages),
        {token_bytes_per_layer(g, kv_element_bytes, tp) for g in [*full, *windowed]},
    )
    admission = _swa_admission(
        release, split, windowed, page_size=page, max_model_len=m, requested=requested
    )
    if admission.by_swa < admission.by_full and admission.by_swa < admission.running:
        notes.append(
            f"the SWA pool ({split.swa_tokens} tokens) binds before the full-attention pool: "
            f"kvplan charges each sequence min(max_model_len, window) + one page = "
            f"{admission.swa_need} SWA tokens; when SGLang frees out-of-window tokens differs "
            "by version"
        )
    return _swa_hybrid(
        release,
        best,
        admission,
        kv_element_bytes=kv_element_bytes,
        tensor_parallel_size=tp,
        ratio=ratio,
        max_model_len=m,
    ), tuple(notes)


@frozen
class _SwaAdmission:
    """The requests the SWA pools admit at once: by the full-attention pages one request of
    M tokens holds, by the SWA tokens it pins, and by max_running_requests."""

    window: int  # the widest sliding window or attention chunk
    page_size: int
    running: int  # max_running_requests
    full_pages: int  # full-attention pages one request holds: cdiv(M, page)
    by_full: int
    swa_need: int  # SWA tokens one request pins
    by_swa: int
    sequences: int


def _swa_admission(
    release: SglangRelease,
    split: SwaSplit,
    windowed: Sequence[WindowedLayer],
    *,
    page_size: int,
    max_model_len: int,
    requested: int | None,
) -> _SwaAdmission:
    """max_running_requests from the full pool, then the sequences each pool holds."""
    page, m = page_size, max_model_len
    window = max(
        g.sliding_window if isinstance(g, SlidingWindowAttention) else g.attention_chunk_size
        for g in windowed
    )
    running = max_running_requests(
        release,
        profiled_tokens=split.profiled_tokens,
        tokens=split.full_tokens,
        context_len=m,
        requested=requested,
    )
    full_pages = cdiv(m, page)
    by_full = split.full_tokens // page // full_pages
    # A request pins min(M, window) SWA tokens plus a page (the prefill admission floor of
    # pool_configurator.validate_swa_pool_size, 0.5.23).
    swa_need = min(m, window) + page
    by_swa = split.swa_tokens // swa_need
    sequences = min(by_full, by_swa, running)
    return _SwaAdmission(window, page, running, full_pages, by_full, swa_need, by_swa, sequences)


def _swa_hybrid(
    release: SglangRelease,
    best: _StageSplit,
    admission: _SwaAdmission,
    *,
    kv_element_bytes: int,
    tensor_parallel_size: int,
    ratio: float,
    max_model_len: int,
) -> SglangHybrid:
    """The SWA pools as kvplan answers them: tokens, settings, the problem, the log lines."""
    split, full, windowed, tp = best.split, best.full, best.windowed, tensor_parallel_size
    page, running = admission.page_size, admission.running
    log = _SwaLog(split, tuple(full), tuple(windowed), kv_element_bytes, tp, running, max_model_len)
    return SglangHybrid(
        tokens=split.full_tokens,
        full_layers=len(full),
        pool_bytes_per_token=_bytes_per_token(full, kv_element_bytes, tp)
        + ratio * _bytes_per_token(windowed, kv_element_bytes, tp),
        running=running,
        sequences=max(0, admission.sequences),
        concurrency=min(split.full_tokens / page / admission.full_pages, admission.by_swa, running),
        settings={
            "engine_version": release.label,
            "swa_full_tokens_ratio": ratio,
            "full_max_total_num_tokens": split.full_tokens,
            "swa_max_total_num_tokens": split.swa_tokens,
            "max_running_requests": running,
            "max_num_seqs": running,
        },
        problem=_swa_problem(
            release,
            split,
            window=admission.window,
            page_size=page,
            sequences=admission.sequences,
            max_model_len=max_model_len,
        ),
        describe=log.describe,
    )


@dataclass(frozen=True, slots=True)
class _SwaLog:
    """What SGLang logs for its SWA pools, written on demand."""

    split: SwaSplit
    full: tuple[TokenLayer, ...]
    windowed: tuple[WindowedLayer, ...]
    kv_bytes: int
    tensor_parallel_size: int
    running: int
    max_model_len: int

    def describe(self) -> tuple[str, ...]:
        split, tp = self.split, self.tensor_parallel_size
        return (
            f"Use sliding window memory pool. full_layer_tokens={split.full_tokens}, "
            f"swa_layer_tokens={split.swa_tokens}",
            *_kv_lines(split.full_tokens, self.full, self.kv_bytes, tp),
            *_kv_lines(split.swa_tokens, self.windowed, self.kv_bytes, tp),
            f"max_total_num_tokens={split.full_tokens}, max_running_requests={self.running}, "
            f"context_len={self.max_model_len}",
        )


def _swa_notes(
    release: SglangRelease, known: bool, num_stages: int, layer_bytes: set[int]
) -> list[str]:
    notes = [] if known else [SWA_ARCHITECTURES_NOTE]
    if num_stages > 1:
        notes.append(
            "pipeline parallel: each stage's SWA split is computed on its own layers and the "
            "stage with the fewest full-attention tokens is reported (SGLang syncs the token "
            "count with MIN across ranks before or after the split, by version)"
        )
    if len(layer_bytes) > 1 and not release.has(cal.SGLANG_SWA_SPLIT_BY_MEMORY):
        notes.append(
            f"SGLang {release.label} sized every layer with the full layers' geometry (separate "
            "sliding-window geometry arrived in 0.5.9); kvplan uses each layer's own"
        )
    return notes


def _swa_problem(
    release: SglangRelease,
    split: SwaSplit,
    *,
    window: int,
    page_size: int,
    sequences: int,
    max_model_len: int,
) -> str | None:
    """Why SGLang does not start or cannot run one sequence; None when it can."""
    if release.has(cal.SGLANG_SWA_FLOOR_CHECK) and window + page_size >= split.swa_tokens:
        return (
            f"SGLang {release.label} refuses to start: the SWA pool ({split.swa_tokens} tokens) "
            f"is not larger than the window {window} + page {page_size}"
        )
    if sequences < 1:
        return (
            f"{split.full_tokens} full-attention and {split.swa_tokens} sliding-window tokens "
            f"cannot hold one sequence of {max_model_len} tokens"
        )
    return None


# --- Mamba / gated-delta-net pools ----------------------------------------------------------


def check_mamba_support(
    release: SglangRelease, state_layers: Sequence[StateLayer], token_layers: Sequence[TokenLayer]
) -> None:
    """Raise for recurrent models this SGLang release does not run."""
    kinds = {type(g) for g in state_layers}
    if Mamba1 in kinds and token_layers:
        raise SizingError(
            "engine",
            "SGLang has no model with Mamba-1 layers beside attention (Jamba): its "
            "models/ (0.5.23) run Mamba-1 only attention-free (mamba.py, falcon_mamba.py)",
        )
    first = {
        GatedDeltaNet: (cal.SGLANG_GDN, "0.5.2", "gated delta net (Qwen3-Next)"),
        Mamba2: (cal.SGLANG_MAMBA2, "0.5.3", "Mamba-2 (Falcon-H1, Nemotron-H in 0.5.4)"),
        Mamba1: (cal.SGLANG_ATTENTION_FREE_MAMBA, "0.5.20", "Mamba-1"),
    }
    for kind in kinds:
        milestone, label, what = first[kind]
        if not release.has(milestone):
            raise SizingError(
                "engine_version",
                f"SGLang {release.label} does not run {what} models; they arrived in {label}",
            )
    if not token_layers and not release.has(cal.SGLANG_ATTENTION_FREE_MAMBA):
        raise SizingError(
            "engine_version",
            f"SGLang {release.label} runs recurrent models only beside attention; "
            "attention-free Mamba models arrived in 0.5.20",
        )


@lru_cache(maxsize=256)
def sglang_refusal(arch: ModelArchitecture) -> SizingError | None:
    """Why kvplan cannot size SGLang for this model at any release, or None: the layer kinds
    its pipeline here has not read (unmodelled.py) and the recurrent models SGLang does not run
    (`check_mamba_support` at the newest release). A plan sized for another engine leaves
    SGLang's flags out for such a model rather than paste numbers SGLang was never sized for."""
    try:
        refuse_unmodelled(arch, "SGLang")
        layers = list(arch.layers)
        check_mamba_support(sglang_release(None), _recurrent(layers), _attention(layers))
    except SizingError as exc:
        return exc
    return None


def mamba_radix_cache(
    release: SglangRelease, state_layers: Sequence[StateLayer], enable_prefix_caching: bool | None
) -> tuple[bool, tuple[str, ...]]:
    """Whether the radix (prefix) cache runs: GDN models from 0.5.4, Mamba-2 models from 0.5.7
    (server_args / model_runner turn it off before); --disable-radix-cache is
    enable_prefix_caching False."""
    kinds = {type(g) for g in state_layers}
    since = cal.SGLANG_GDN_RADIX if kinds == {GatedDeltaNet} else cal.SGLANG_MAMBA2_RADIX
    supported = release.has(since)
    if enable_prefix_caching is None:
        return supported, ()
    if enable_prefix_caching and not supported:
        return False, (f"SGLang {release.label} turns the radix cache off for this model",)
    return enable_prefix_caching and supported, ()


def mamba_ssm_dtype(
    release: SglangRelease, arch: ModelArchitecture, mamba_ssm_cache_dtype: FloatDtype | None
) -> FloatDtype:
    """--mamba-ssm-dtype; from 0.5.10 the config's mamba_ssm_dtype; else float32
    (mamba_utils.mamba2_state_dtype). The conv state is bfloat16 in every release."""
    return (
        mamba_ssm_cache_dtype
        or (arch.state_dtype if release.has(cal.SGLANG_SSM_DTYPE_FROM_CONFIG) else None)
        or cal.SGLANG_MAMBA_SSM_DTYPE
    )


@dataclass(frozen=True, slots=True)
class MambaState:
    """One request's recurrent state on one GPU, as SGLang's MambaPool holds it."""

    per_request: int  # what one slot costs the budget
    conv_bytes: int  # conv state over every recurrent layer
    ssm_bytes: int  # temporal (SSM) state over every recurrent layer


def mamba_state(
    release: SglangRelease,
    *,
    stages: Sequence[ModelArchitecture],
    state_layers: Sequence[StateLayer],
    tensor_parallel_size: int,
    ssm_element_bytes: int,
) -> MambaState:
    tp = tensor_parallel_size
    per_layer = [sglang_state_bytes(g, tp, ssm_element_bytes) for g in state_layers]
    # The conv part alone is the state with a 0-byte SSM dtype.
    conv = sum(sglang_state_bytes(g, tp, 0) for g in state_layers)
    per_request = sum(per_layer)
    if len(stages) > 1 and release.has(cal.SGLANG_MAMBA_PADDING_SLOT):
        # kv_cache_configurator._handle_max_mamba_cache (0.5.17+): the largest stage's share.
        share = max(len(_recurrent(stage.layers)) for stage in stages)
        per_request = int(per_request * (share / len(state_layers)))
    return MambaState(per_request, conv, sum(per_layer) - conv)


def mamba_tokens(rest_bytes: int, cells: Sequence[int], attention: bool, max_model_len: int) -> int:
    """The profiled token count before page alignment: rest_memory over the most attention
    bytes per token of any stage; an attention-free model's pool is one context
    (DefaultPoolConfigurator, 0.5.20+: no KV bytes -> max_total_tokens or context_len)."""
    if not attention:
        return max_model_len
    return min(rest_bytes // cell for cell in cells if cell > 0)


@dataclass(frozen=True, slots=True)
class MambaBatch:
    """The token pool in whole pages, and the requests it and the state slots run at once."""

    tokens: int  # max_total_num_tokens
    slots_per_request: int
    running: int  # max_running_requests
    sequences: int  # sequences of max_model_len that run at once


def mamba_batch(
    release: SglangRelease,
    split: MambaSplit,
    *,
    profiled_tokens: int,
    radix_cache: bool,
    page_size: int,
    max_model_len: int,
    requested: int | None,
) -> MambaBatch:
    tokens = profiled_tokens // page_size * page_size
    slots_per_request = mamba_slots_per_request(release, radix_cache)
    running = max_running_requests(
        release,
        profiled_tokens=profiled_tokens,
        tokens=tokens,
        context_len=max_model_len,
        state_cap=split.slots // slots_per_request,
        requested=requested,
    )
    sequences = max(0, min(tokens // page_size // cdiv(max_model_len, page_size), running))
    return MambaBatch(tokens, slots_per_request, running, sequences)


def _mamba_pools(
    arch: ModelArchitecture,
    release: SglangRelease,
    *,
    stages: Sequence[ModelArchitecture],
    pool_bytes: int,
    kv_element_bytes: int,
    tensor_parallel_size: int,
    page_size: int,
    max_model_len: int,
    options: EngineOptions,
) -> tuple[SglangHybrid, tuple[str, ...]]:
    """HybridLinearKVPool + MambaPool: the state slots (`_mamba_slots`), the token pool in
    whole pages and the requests it runs (`mamba_batch`), the pools as answered."""
    tp, m = tensor_parallel_size, max_model_len
    token_layers = _attention(arch.layers)
    slots = _mamba_slots(
        arch,
        release,
        stages=stages,
        pool_bytes=pool_bytes,
        tensor_parallel_size=tp,
        options=options,
    )
    cells = [_bytes_per_token(_attention(stage.layers), kv_element_bytes, tp) for stage in stages]
    batch = mamba_batch(
        release,
        slots.split,
        profiled_tokens=mamba_tokens(slots.split.rest_bytes, cells, bool(token_layers), m),
        radix_cache=slots.radix_cache,
        page_size=page_size,
        max_model_len=m,
        requested=options.max_num_seqs,
    )
    hybrid = _mamba_hybrid(
        release,
        slots,
        batch,
        token_layers,
        pool_bytes_per_token=float(max(cells) if cells else 0),
        kv_element_bytes=kv_element_bytes,
        tensor_parallel_size=tp,
        page_size=page_size,
        max_model_len=m,
    )
    return hybrid, slots.notes + _mamba_notes(token_layers, len(stages))


@frozen
class _MambaSlots:
    """MambaPool before the token pool: the radix cache, the SSM dtype, one request's state
    and the slots the memory ratio (or --max-mamba-cache-size) gives."""

    radix_cache: bool
    ssm_dtype: str
    state: MambaState
    ratio: float  # mamba_full_memory_ratio
    split: MambaSplit
    notes: tuple[str, ...]


def _mamba_slots(
    arch: ModelArchitecture,
    release: SglangRelease,
    *,
    stages: Sequence[ModelArchitecture],
    pool_bytes: int,
    tensor_parallel_size: int,
    options: EngineOptions,
) -> _MambaSlots:
    """Support, radix cache, SSM dtype, one request's state, then the state slots."""
    state_layers = _recurrent(arch.layers)
    check_mamba_support(release, state_layers, _attention(arch.layers))
    radix, notes = mamba_radix_cache(release, state_layers, options.enable_prefix_caching)
    ssm_name = mamba_ssm_dtype(release, arch, options.mamba_ssm_cache_dtype)
    state = mamba_state(
        release,
        stages=stages,
        state_layers=state_layers,
        tensor_parallel_size=tensor_parallel_size,
        ssm_element_bytes=ssm_name.element_bytes,
    )
    ratio = (
        cal.SGLANG_MAMBA_FULL_MEMORY_RATIO
        if options.mamba_full_memory_ratio is None
        else options.mamba_full_memory_ratio
    )
    split = mamba_split(
        release,
        rest_bytes=pool_bytes,
        per_request=state.per_request,
        radix_cache=radix,
        ratio=ratio,
        slots=options.max_mamba_cache_size,
    )
    return _MambaSlots(radix, ssm_name, state, ratio, split, notes)


def _mamba_hybrid(
    release: SglangRelease,
    slots: _MambaSlots,
    batch: MambaBatch,
    token_layers: Sequence[TokenLayer],
    *,
    pool_bytes_per_token: float,
    kv_element_bytes: int,
    tensor_parallel_size: int,
    page_size: int,
    max_model_len: int,
) -> SglangHybrid:
    """The Mamba and token pools as kvplan answers them: settings, the problem, the log."""
    split, state, m = slots.split, slots.state, max_model_len
    tokens, running = batch.tokens, batch.running
    log = _MambaLog(
        split.slots,
        state,
        tokens,
        tuple(token_layers),
        kv_element_bytes,
        tensor_parallel_size,
        running,
        m,
    )
    return SglangHybrid(
        tokens=tokens,
        full_layers=len(token_layers),
        pool_bytes_per_token=pool_bytes_per_token,
        running=running,
        sequences=batch.sequences,
        concurrency=min(tokens / page_size / cdiv(m, page_size), running),
        settings={
            "engine_version": release.label,
            "radix_cache": slots.radix_cache,
            "mamba_ssm_dtype": slots.ssm_dtype,
            "mamba_full_memory_ratio": slots.ratio if split.by_ratio else None,
            "max_mamba_cache_size": split.slots,
            "mamba_state_bytes_per_request": state.per_request,
            "mamba_slots_per_request": batch.slots_per_request,
            "max_running_requests": running,
            "max_num_seqs": running,
        },
        problem=_mamba_problem(split, state, batch, m),
        describe=log.describe,
    )


@dataclass(frozen=True, slots=True)
class _MambaLog:
    """What SGLang logs for its Mamba and token pools, written on demand."""

    slots: int
    state: MambaState
    tokens: int
    token_layers: tuple[TokenLayer, ...]
    kv_bytes: int
    tensor_parallel_size: int
    running: int
    max_model_len: int

    def describe(self) -> tuple[str, ...]:
        rows = self.slots + 1  # MambaPool tensors keep a padding slot 0
        tokens, tp = self.tokens, self.tensor_parallel_size
        return (
            f"Mamba Cache is allocated. max_mamba_cache_size: {self.slots}, "
            f"conv_state size: {rows * self.state.conv_bytes / GiB:.2f}GB, "
            f"ssm_state size: {rows * self.state.ssm_bytes / GiB:.2f}GB",
            *(_kv_lines(tokens, self.token_layers, self.kv_bytes, tp) if self.token_layers else ()),
            f"max_total_num_tokens={tokens}, max_running_requests={self.running}, "
            f"context_len={self.max_model_len}",
        )


def _mamba_notes(token_layers: Sequence[TokenLayer], num_stages: int) -> tuple[str, ...]:
    notes: list[str] = []
    if _windowed(token_layers):
        notes.append(
            "sliding-window layers beside recurrent layers: SGLang's Mamba pools size every "
            "attention layer for the whole context, and so does kvplan here"
        )
    if num_stages > 1:
        notes.append(
            "pipeline parallel: every stage gets the same Mamba slots and the stage with the "
            "most attention bytes per token sets the token count (SGLang syncs it with MIN)"
        )
    if not token_layers:
        notes.append(
            "attention-free model: SGLang's token pool is one context length "
            "(--max-total-tokens raises it) and kvplan takes that at face value"
        )
    return tuple(notes)


def _mamba_problem(
    split: MambaSplit, state: MambaState, batch: MambaBatch, max_model_len: int
) -> str | None:
    """Why not even one sequence runs; None when one does."""
    if split.slots < 1 or split.slots // batch.slots_per_request < 1:
        return (
            f"{split.slots} Mamba state slots ({state.per_request} B each) leave no running "
            f"request ({batch.slots_per_request} slots per request)"
        )
    if batch.sequences < 1:
        return f"{batch.tokens} KV tokens cannot hold one sequence of {max_model_len} tokens"
    return None


# --- the pipeline ---------------------------------------------------------------------------


def sglang_capacity(inputs: SizingInputs) -> Capacity:
    """One SGLang instance: rest_memory, then one token pool or the hybrid pools."""
    engine, max_model_len = inputs.engine, inputs.workload.max_model_len
    refuse_unmodelled(inputs.arch, "SGLang")
    page_size = engine.block_size or 1
    version_notes = sglang_version_note(engine.engine_version)  # refuses what is no version
    # With pipeline stages, weights_bytes_per_gpu is the heaviest stage's, which binds every
    # rank: ModelRunner's profiling reads get_available_gpu_memory(distributed=world_size > 1),
    # the smallest free memory over the world group (every TP and PP rank).
    budget, attn_dp, a2a_notes = _rank_budget(inputs)
    hybrid, notes = sglang_hybrid(
        inputs.arch,
        stages=inputs.stages,
        pool_bytes=budget.pool_bytes,
        kv_element_bytes=inputs.facts.kv_element_bytes,
        tensor_parallel_size=inputs.parallel.tensor_parallel_size,
        page_size=page_size,
        max_model_len=max_model_len,
        options=engine,
    )
    notes = version_notes + a2a_notes + notes
    if hybrid is not None:
        _refuse_hybrid_dp_attention(attn_dp)
        if engine.enable_hierarchical_cache:
            raise SizingError(
                "enable_hierarchical_cache",
                "kvplan sizes HiCache's host pool for one full-attention token pool; this "
                "model has SGLang's hybrid pools (sliding-window or recurrent state)",
            )
        capacity = _hybrid_capacity(inputs, hybrid, budget, page_size, inputs.warnings + notes)
        return sglang_tiers(capacity, engine, page_size)
    # Every attention layer holds the whole context (design section 2).
    cell = inputs.facts.kv_bytes_per_token_per_gpu
    # --max-running-requests is the engine's; each attention-DP group runs its share.
    requested = per_rank_running_requests(engine.max_num_seqs, attn_dp)
    report = sglang_report(budget.pool_bytes, cell, page_size, max_model_len, requested)
    # --max-running-requests sizes the request pool: the batch never grows past it.
    running = sglang_running_requests(
        sglang_tokens(budget.pool_bytes, cell, page_size), max_model_len, requested
    )
    settings: EngineSettings = {
        "mem_fraction_static": budget.fraction,
        "page_size": page_size,
        "max_running_requests": running,
        "max_num_seqs": running,
        **sglang_parallel_settings(
            inputs.parallel, engine.sglang_parallel, inputs.facts.rank_weights
        ),
    }
    fits = report.max_num_seqs >= 1
    reason = (
        f"{report.kv_cache_tokens} KV tokens cannot hold one sequence of {max_model_len} tokens"
    )
    capacity = Capacity(
        engine=Engine.SGLANG,
        engine_version=engine.engine_version,
        facts=inputs.facts,
        budget=budget,
        layout=single_group_layout(cell, page_size, max_model_len),
        report=report,
        engine_settings=settings,
        warnings=inputs.warnings + notes,
        fits=fits,
        reason=None if fits else reason,
    )
    return sglang_tiers(capacity, engine, page_size)


def _rank_budget(inputs: SizingInputs) -> tuple[MemoryBudget, int, tuple[str, ...]]:
    """rest_memory of one GPU, DP attention's width (1 without it) and DeepEP's warnings.
    Under DP attention kvplan's parallel is attention TP x attention DP (capacity.py);
    SGLang's own --tp-size, which its reserve and NCCL follow, is their product
    (sglang_dp.py)."""
    engine = inputs.engine
    offloaded = offloaded_weight_bytes(engine, inputs.facts.weights_bytes_per_gpu)
    asked = dp_attention_asked(engine.sglang_parallel)
    attn_dp = inputs.parallel.data_parallel_size if asked else 1
    rank = inputs.facts.rank_weights
    deepep = _sglang_deepep(inputs, attn_dp)
    # the release is read only where LoRA is asked (plans size hundreds of budgets)
    lora = (
        sglang_lora_buffers(
            inputs.arch,
            engine,
            version=sglang_release(engine.engine_version).version,
            tensor_parallel_size=inputs.parallel.tensor_parallel_size,
        )
        if engine.enable_lora
        else None
    )
    budget = sglang_budget(
        total_bytes=inputs.gpu.memory_bytes,
        weights_per_gpu=inputs.facts.weights_bytes_per_gpu - offloaded,
        tensor_parallel_size=inputs.parallel.tensor_parallel_size * attn_dp,
        options=engine,
        attn_dp_size=attn_dp,
        weights_note=None if rank is None else rank.note,
        held=None if lora is None else lora.budget_line(),
        deepep=deepep,
    )
    notes = () if deepep is None else deepep.warnings
    if deepep is None and engine.sglang_parallel.deepep_mode != "auto":
        notes += (
            f"deepep_mode {engine.sglang_parallel.deepep_mode}: the mode of SGLang's DeepEP "
            "buffer (DeepEPBuffer.get_deepep_buffer), made only with moe_a2a_backend deepep; "
            "it changes nothing here",
        )
    if deepep is not None and deepep.buffer_bytes > budget.activation_bytes:
        notes += (
            f"moe_a2a_backend deepep: its {deepep.buffer_bytes} B buffer is more than the "
            "reserve mem_fraction_static leaves; SGLang would run out of memory at the first "
            "dispatch",
        )
    return with_weight_offload(budget, offloaded), attn_dp, notes


def _sglang_deepep(inputs: SizingInputs, attn_dp: int) -> SglangDeepEP | None:
    """DeepEP's buffer where --moe-a2a-backend deepep is asked (engines/all2all.py); its EP
    group is SGLang's tp_size."""
    flags, engine = inputs.engine.sglang_parallel, inputs.engine
    if not flags.deepep:
        return None
    return sglang_deepep(
        inputs.arch,
        mode=flags.deepep_mode,
        ranks=inputs.parallel.tensor_parallel_size * attn_dp,
        redundant_experts=flags.ep_num_redundant_experts,
        version=sglang_release(engine.engine_version).version,
        graphs=flags.deepep_mode != "normal" and not engine.enforce_eager,
    )


def _refuse_hybrid_dp_attention(attn_dp: int) -> None:
    if attn_dp > 1:
        raise SizingError(
            "enable_dp_attention",
            "kvplan sizes SGLang's DP attention for one full-attention token pool; this model "
            "has SGLang's hybrid pools (sliding-window or recurrent state)",
        )


def _hybrid_capacity(
    inputs: SizingInputs,
    hybrid: SglangHybrid,
    budget: MemoryBudget,
    page_size: int,
    warnings: tuple[str, ...],
) -> Capacity:
    """SWA / Mamba pools: a block is one page of the full-attention token pool, priced with
    what it takes of rest_memory (its share of the SWA pool included)."""
    per_request = cdiv(inputs.workload.max_model_len, page_size)
    block_bytes = round(page_size * hybrid.pool_bytes_per_token)
    layout = CacheLayout(
        groups=(
            CacheGroup("full_attention", hybrid.full_layers, page_size, block_bytes, per_request),
        ),
        bytes_per_block=block_bytes,
        blocks_per_request=per_request,
        block_size=page_size,
        padding_layers=0,
        notes=(),
    )
    report = PoolReport(
        hybrid.tokens // page_size,
        hybrid.tokens,
        hybrid.concurrency,
        hybrid.sequences,
        hybrid.describe,
    )
    problem = hybrid.problem
    if budget.pool_bytes <= 0:
        problem = "no memory left for the KV cache after the weights and the static reserve"
    return Capacity(
        engine=Engine.SGLANG,
        engine_version=inputs.engine.engine_version,
        facts=inputs.facts,
        budget=budget,
        layout=layout,
        report=report,
        engine_settings={
            "mem_fraction_static": budget.fraction,
            "page_size": page_size,
            **hybrid.settings,
        },
        warnings=warnings,
        fits=problem is None,
        reason=problem,
    )
