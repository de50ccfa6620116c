"""vLLM: memory budget, KV-cache layout and the two log lines, release by release.

Sources (restated, not copied), as read in the released wheels 0.6.2 ... 0.33.0:
vllm/v1/worker/gpu_worker.py and vllm/utils/mem_utils.py (budget), vllm/v1/core/kv_cache_utils.py
(groups, blocks, report), vllm/v1/kv_cache_interface.py (pages, per-request usage),
vllm/engine/arg_utils.py (batch defaults), vllm/model_executor/models/config.py and
vllm/platforms/interface.py (hybrid block alignment); ../shared/design/engine-memory.md.
Each release's behaviour, with the vLLM file and function it was read from: docs/engines/vllm.md.

`vllm_capacity` reads top to bottom as vLLM starts: the release's rules (`vllm_release`), the
flags and their defaults (`vllm_flags`), the KV-cache groups of each worker (`vllm_layout`,
one helper per step of kv_cache_utils.get_kv_cache_groups), the memory budget (`vllm_budget`),
the blocks every worker keeps (`vllm_blocks`), the start-up check and the two log lines
(`vllm_report`). Short local names: m = max_model_len, tp = tensor_parallel_size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache, partial

from ..errors import InvalidDtype, SizingError
from ..frozen import frozen
from ..model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    LightningAttention,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
    StateLayer,
    TokenLayer,
)
from ..model.dtypes import KvCacheDtype
from ..units import GiB, cdiv
from ..versions import modelled_release, parse_engine_version, release_label, sizing_note
from . import calibration as cal
from .activation import (
    forward_bytes_per_token,
    moe_workspace_bytes,
    sampler_bytes,
    triton_sampler_bytes,
)
from .all2all import All2All, vllm_all2all, vllm_batched_dp_tokens
from .common import (
    BudgetLine,
    CacheGroup,
    CacheLayout,
    Capacity,
    Engine,
    EngineOptions,
    EngineSettings,
    Gpu,
    MemoryBudget,
    Parallelism,
    PoolReport,
    SizingInputs,
    given_pool_budget,
)
from .encoder import EncoderProfile, check_encoder_release, encoder_profile
from .expert_parallel import check_vllm_dcp, dcp_tokens_per_rank, expert_placement_note
from .kv import packed_mla, state_bytes_per_sequence, state_dtype_bytes, token_bytes_per_layer
from .lmcache import with_lmcache
from .lora import vllm_lora_buffers
from .offload import offloaded_weight_bytes, vllm_tiers, with_weight_offload
from .speculative import vllm_drafter
from .vllm_deepseek_v4 import PackedPool, TuplePool, packed_pool, pool_layout, tuple_pool
from .vllm_diffkv import check_diffkv_release
from .vllm_kinds import check_vllm_kinds, default_block_size, hybrid_block_alignment
from .vllm_platform import LINKED, DeviceMemory, device_memory

Version = tuple[int, int, int]


@lru_cache(maxsize=256)
def parse_vllm_version(text: str, field: str = "engine_version") -> Version:
    """Any PEP 440 release string -> the (major, minor, patch) whose rules size it.

    `0.10.1.1` -> (0, 10, 1); `v0.6.3.post1` -> (0, 6, 3); a pre-release such as `0.11.0rc2`
    comes before 0.11.0 and gets the rules of the releases before it (versions.modelled_release).
    """
    numbers = modelled_release(parse_engine_version(text, field, "vLLM"), 3)
    return numbers[0], numbers[1], numbers[2]


@dataclass(frozen=True, slots=True, eq=False)
class VllmRelease:
    """The parts of vLLM's arithmetic one release has, resolved once per version.

    `vllm_release` hands out one instance per release, so identity is equality (and hashing
    it for the layout cache costs nothing).
    """

    version: Version
    label: str
    v1_engine: bool
    # V0 before PR #10511 and V1 before 0.9.2 charged the CUDA context (and any other
    # process) to the budget: util x total - (torch peak + all non-torch memory).
    non_torch_includes_context: bool
    hybrid_allocator: bool
    state_in_pool: bool
    group_max_ratio: float | None
    cudagraph_in_budget: bool
    default_utilization: float
    in_flight_batches: bool
    mamba_cache_modes: bool
    hybrid_prefix_caching: bool
    tokens_from_concurrency: bool
    one_log_line: bool
    request_ceil: bool
    whole_model_groups: bool
    pad_attention_pages: bool
    fit_check_reserves_null_block: bool
    concurrency_from_blocks: bool
    triton_top_k_top_p: bool
    persistent_moe_workspace: bool

    def in_flight_tokens(self, max_num_batched_tokens: int, pipeline_parallel_size: int) -> int:
        """Tokens a sliding/chunked layer keeps beyond its window for the steps in flight."""
        if not self.in_flight_batches:
            return max_num_batched_tokens
        # config/vllm.py max_concurrent_batches: async scheduling (default) keeps 2 batches
        # in flight at PP=1; with PP it is off in the V1 runner and PP batches are in flight.
        batches = 2 if pipeline_parallel_size == 1 else pipeline_parallel_size
        return batches * max_num_batched_tokens

    def mamba_blocks(self, prefix_caching: bool) -> int:
        # MambaSpec.max_memory_usage_bytes: 'none' keeps one state page, 'align' (prefix
        # caching on, 0.15+) keeps two.
        return 2 if prefix_caching and self.mamba_cache_modes else 1

    def default_prefix_caching(self, has_state: bool) -> bool:
        if not self.v1_engine:
            return False
        return self.hybrid_prefix_caching if has_state else True

    def tokens_report(self, hybrid: bool) -> str:
        if self.tokens_from_concurrency:
            return "concurrency"
        if hybrid and self.hybrid_allocator:
            return "groups"
        return "blocks"


@lru_cache(maxsize=256)
def vllm_release(version: Version) -> VllmRelease:
    def since(milestone: Version) -> bool:
        return version >= milestone

    v1 = since(cal.VLLM_V1_DEFAULT)
    ratio = (
        1.5 if since(cal.VLLM_GROUPS_MAX_15) else 1.25 if since(cal.VLLM_GROUPS_MAX_125) else None
    )
    return VllmRelease(
        version=version,
        label=release_label(version),
        v1_engine=v1,
        non_torch_includes_context=(
            not since(cal.VLLM_V1_PER_INSTANCE) if v1 else not since(cal.VLLM_PER_INSTANCE_BUDGET)
        ),
        hybrid_allocator=since(cal.VLLM_HYBRID_ALLOCATOR),
        state_in_pool=since(cal.VLLM_MAMBA_IN_POOL),
        group_max_ratio=ratio,
        cudagraph_in_budget=since(cal.VLLM_CUDAGRAPH_IN_BUDGET),
        default_utilization=(
            cal.VLLM_DEFAULT_UTILIZATION_NEW
            if since(cal.VLLM_UTILIZATION_092)
            else cal.VLLM_DEFAULT_UTILIZATION_OLD
        ),
        in_flight_batches=since(cal.VLLM_IN_FLIGHT_BATCHES),
        mamba_cache_modes=since(cal.VLLM_MAMBA_CACHE_MODES),
        hybrid_prefix_caching=since(cal.VLLM_HYBRID_PREFIX_CACHING),
        tokens_from_concurrency=since(cal.VLLM_TOKENS_FROM_CONCURRENCY),
        one_log_line=since(cal.VLLM_ONE_LOG_LINE),
        request_ceil=since(cal.VLLM_REQUEST_CEIL),
        whole_model_groups=since(cal.VLLM_WHOLE_MODEL_GROUPS),
        pad_attention_pages=since(cal.VLLM_PAD_ATTENTION_PAGES),
        fit_check_reserves_null_block=since(cal.VLLM_FIT_CHECK_RESERVES_NULL_BLOCK),
        concurrency_from_blocks=since(cal.VLLM_CONCURRENCY_FROM_BLOCKS),
        triton_top_k_top_p=since(cal.VLLM_TRITON_TOP_K_TOP_P),
        persistent_moe_workspace=since(cal.VLLM_PERSISTENT_MOE_WORKSPACE),
    )


def gpu_family(gpu_name: str) -> str:
    """hopper / blackwell / other, from the device name (decides MLA block sizes)."""
    name = gpu_name.lower()
    if any(tag in name for tag in ("b200", "b300", "gb200", "gb300")):
        return "blackwell"
    if any(tag in name for tag in ("h100", "h200", "h800", "h20", "gh200")):
        return "hopper"
    return "other"


def cuda_major(gpu_name: str) -> int | None:
    """The CUDA compute capability's major version, from the device name, where kvplan knows
    it: 12 (RTX 50 / RTX PRO Blackwell, SM120), 10 (B200 / B300 / GB200 / GB300), 9 (Hopper);
    None for every other (the backend choice it decides is then not modelled)."""
    name = gpu_name.lower()
    if any(tag in name for tag in ("rtx 50", "rtx pro 6000 blackwell", "gb10")):
        return 12
    if gpu_family(name) == "blackwell":
        return 10
    if gpu_family(name) == "hopper":
        return 9
    return None


def mla_block_size(release: VllmRelease, gpu_name: str, sparse: bool = False) -> int:
    """The block size MLA backends force or prefer (platforms/cuda.py, backend preference)."""
    if sparse:
        # FlashMLA-sparse (DeepSeek-V3.2, GLM-5) reads the cache in 64-token pages
        # (flashmla_sparse.py get_supported_kernel_block_sizes: MultipleOf(64)).
        return cal.VLLM_SPARSE_MLA_BLOCK_SIZE
    family = gpu_family(gpu_name)
    if release.version >= cal.VLLM_MLA_BACKEND_BLOCK:
        # 0.18+: Hopper's first backend FLASH_ATTN_MLA takes 16; Blackwell FLASHINFER_MLA 32.
        return {"hopper": 16, "blackwell": 32}.get(family, 16)
    # Up to 0.17: FlashMLA (Hopper) and FlashInfer-MLA force 64; CUTLASS MLA 128 (0.12-0.14).
    if family == "blackwell":
        return 128 if (0, 12, 0) <= release.version < (0, 15, 0) else 64
    return 64 if family == "hopper" else 16


@frozen
class BatchDefaults:
    max_num_batched_tokens: int
    max_num_seqs: int
    source: str


def batch_defaults(
    release: VllmRelease, gpu_memory_bytes: int, gpu_name: str, max_model_len: int
) -> BatchDefaults:
    """`vllm serve` scheduler defaults, which also size the profile run."""
    if not release.v1_engine:
        # V0 SchedulerConfig: 256 sequences; without chunked prefill max(M, 2048) tokens;
        # chunked prefill switches itself on above 32K (512 tokens up to 0.6.4, then 2048).
        if max_model_len > cal.VLLM_V0_CHUNKED_PREFILL_ABOVE:
            tokens = 2048 if release.version >= cal.VLLM_V0_CHUNKED_MNBT_2048 else 512
            return BatchDefaults(tokens, 256, f"V0: chunked prefill above 32K, {tokens} tokens")
        return BatchDefaults(max(max_model_len, 2048), 256, "V0: max(max_model_len, 2048)")
    name = gpu_name.lower()
    if release.version >= cal.VLLM_BATCH_160_GIB_TIER and gpu_memory_bytes >= 160 * GiB:
        return BatchDefaults(16384, 1024, "vllm serve on a >= 160 GiB GPU")
    if release.version < cal.VLLM_BATCH_BY_MEMORY:
        big = "h100" in name or "h200" in name
        return BatchDefaults(8192 if big else 2048, 1024, "vllm serve (0.8.0-0.8.3 by name)")
    big = gpu_memory_bytes >= 70 * GiB
    if release.version >= cal.VLLM_A100_SMALL_TIER:
        big = big and "a100" not in name
    if big:
        return BatchDefaults(8192, 1024, "vllm serve on a >= 70 GiB GPU (not A100)")
    return BatchDefaults(2048, 256, "vllm serve on a smaller GPU or an A100")


# --- layout -------------------------------------------------------------------------------
# vllm/v1/core/kv_cache_utils.py `get_kv_cache_groups`, one function per step:
#   _merge_windows_as_full   unify_hybrid_kv_cache_specs (no hybrid KV-cache manager)
#   _specs_by_layer          each layer's KVCacheSpec (kv_cache_interface.py page sizes)
#   _uniform_type_layout     UniformTypeKVCacheSpecs: one group of one kind, pages summed
#   _align_hybrid_blocks     attention blocks grown to cover a Mamba state page
#   _unify_page_sizes        unify_kv_cache_spec_page_size
#   _group_layers            _get_kv_cache_groups_uniform_page_size
#   _stage_widths            _project_kv_cache_groups_to_worker (pipeline stages)

WindowedLayer = SlidingWindowAttention | ChunkedLocalAttention
NO_HYBRID_MANAGER_NOTE = "no hybrid KV-cache manager: sliding/chunked layers keep the context"


@dataclass(frozen=True, slots=True)
class _Spec:
    """One distinct per-layer cache spec, as vLLM buckets layers, and the layers that have it."""

    layer: TokenLayer | StateLayer
    positions: tuple[int, ...]  # the model's layer indices with this spec, in order
    block_size: int
    page_bytes: int
    per_token_bytes: int  # 0 for recurrent-state layers

    @property
    def count(self) -> int:
        return len(self.positions)


@frozen
class _RequestUsage:
    """What one request of max_model_len keeps in each kind of layer (max_memory_usage_bytes
    of each spec in kv_cache_interface.py)."""

    max_model_len: int
    in_flight_tokens: int  # tokens a sliding/chunked layer keeps beyond its window
    mamba_blocks: int  # state pages one request holds

    def blocks(self, layer: TokenLayer | StateLayer, block_size: int) -> int:
        """Blocks one request holds in one group's table."""
        if isinstance(layer, SlidingWindowAttention):
            # SlidingWindowSpec: the window, the tokens in flight, and one more block because
            # the window may start inside a block.
            tokens = min(layer.sliding_window - 1 + self.in_flight_tokens, self.max_model_len)
            return cdiv(tokens, block_size) + 1
        if isinstance(layer, ChunkedLocalAttention):
            tokens = min(layer.attention_chunk_size + self.in_flight_tokens, self.max_model_len)
            return cdiv(tokens, block_size)
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            return self.mamba_blocks
        return cdiv(self.max_model_len, block_size)


@dataclass(frozen=True, slots=True)
class _Groups:
    """KV-cache groups of equal size and the model's layer indices in each."""

    groups: tuple[CacheGroup, ...]
    members: tuple[tuple[int, ...], ...]
    group_size: int
    padding_layers: int
    layers: tuple[TokenLayer | StateLayer, ...]  # each group's layer kind


def _same_type(a: TokenLayer | StateLayer, b: TokenLayer | StateLayer) -> bool:
    """UniformTypeKVCacheSpecs.is_uniform_type: layers that need the same token slots."""
    if isinstance(a, FullAttention | MultiHeadLatentAttention):
        return isinstance(b, FullAttention | MultiHeadLatentAttention)
    if isinstance(a, SlidingWindowAttention):
        return isinstance(b, SlidingWindowAttention) and b.sliding_window == a.sliding_window
    if isinstance(a, ChunkedLocalAttention):
        return (
            isinstance(b, ChunkedLocalAttention)
            and b.attention_chunk_size == a.attention_chunk_size
        )
    return isinstance(b, GatedDeltaNet | Mamba2 | Mamba1)


def _stage_bounds(num_layers: int, stage_sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    bounds: list[tuple[int, int]] = []
    start = 0
    for size in stage_sizes or (num_layers,):
        bounds.append((start, start + size))
        start += size
    return bounds


# Not memoised: keyed by max_model_len, a memo misses for every new question (dashboards,
# spreadsheets) and its upkeep costs more than the groups' `.at()`; the groups are memoised.
def vllm_layout(
    arch: ModelArchitecture,
    *,
    release: VllmRelease,
    kv_element_bytes: int,
    conv_element_bytes: int,
    ssm_element_bytes: int,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    max_model_len: int,
    block_size: int,
    block_size_given: bool,
    max_num_batched_tokens: int,
    prefix_caching: bool,
    hybrid_manager: bool,
    stage_sizes: tuple[int, ...] = (),
    packed_mla: bool = False,
) -> CacheLayout:
    """Cut the model's layers into vLLM KV-cache groups and pages, as get_kv_cache_groups does.

    `arch` is the layers one worker groups: the whole model from 0.11 (groups are formed on the
    whole model and projected onto each pipeline stage, whose sizes `stage_sizes` gives), or one
    stage's layers before. `stage_bytes_per_block` is what one block costs on each stage.
    The groups and pages do not depend on the request (`_vllm_groups`, shared by every
    max_model_len); the blocks one request holds in each group do.
    """
    grouped = _vllm_groups(
        arch,
        release=release,
        kv_element_bytes=kv_element_bytes,
        conv_element_bytes=conv_element_bytes,
        ssm_element_bytes=ssm_element_bytes,
        tensor_parallel_size=tensor_parallel_size,
        block_size=block_size,
        block_size_given=block_size_given,
        hybrid_manager=hybrid_manager,
        stage_sizes=stage_sizes,
        packed_mla=packed_mla,
    )
    usage = _RequestUsage(
        max_model_len,
        release.in_flight_tokens(max_num_batched_tokens, pipeline_parallel_size),
        release.mamba_blocks(prefix_caching),
    )
    return grouped.at(usage)


@dataclass(frozen=True, slots=True)
class _GroupedLayout:
    """A worker's layout before a request is placed in it: `layout` with no blocks per request
    yet, and the layer kind each of its groups holds."""

    layout: CacheLayout
    layers: tuple[TokenLayer | StateLayer, ...]

    def at(self, usage: _RequestUsage) -> CacheLayout:
        """The layout with the blocks one request of `usage` holds in each group's table."""
        groups = []
        blocks_per_request = 0
        for g, layer in zip(self.layout.groups, self.layers, strict=True):
            blocks = usage.blocks(layer, g.block_size)
            groups.append(CacheGroup(g.kind, g.layers, g.block_size, g.page_bytes, blocks))
            blocks_per_request += blocks
        lay = self.layout
        return CacheLayout(
            groups=tuple(groups),
            bytes_per_block=lay.bytes_per_block,
            blocks_per_request=blocks_per_request,
            block_size=lay.block_size,
            padding_layers=lay.padding_layers,
            notes=lay.notes,
            stage_bytes_per_block=lay.stage_bytes_per_block,
        )


# Memoised without the context: a capacity question and a plan ask it of one model at many.
@lru_cache(maxsize=4096)
def _vllm_groups(
    arch: ModelArchitecture,
    *,
    release: VllmRelease,
    kv_element_bytes: int,
    conv_element_bytes: int,
    ssm_element_bytes: int,
    tensor_parallel_size: int,
    block_size: int,
    block_size_given: bool,
    hybrid_manager: bool,
    stage_sizes: tuple[int, ...],
    packed_mla: bool,
) -> _GroupedLayout:
    """get_kv_cache_groups' groups and pages, which no request changes (see `vllm_layout`)."""
    notes: list[str] = []
    positions = dict(arch.cache_layer_positions)
    if len(positions) > 1 and not hybrid_manager:
        if any(isinstance(layer, WindowedLayer) for layer in positions):
            notes.append(NO_HYBRID_MANAGER_NOTE)
        positions = _merge_windows_as_full(positions)
    specs = _specs_by_layer(
        positions,
        block_size=block_size,
        kv_element_bytes=kv_element_bytes,
        conv_element_bytes=conv_element_bytes,
        ssm_element_bytes=ssm_element_bytes,
        tensor_parallel_size=tensor_parallel_size,
        packed_mla=packed_mla,
    )
    bounds = _stage_bounds(arch.num_layers, stage_sizes)
    if release.whole_model_groups and _is_uniform_type(specs):
        return _uniform_type_layout(specs, bounds, tuple(dict.fromkeys(notes)))
    mla = any(isinstance(s.layer, MultiHeadLatentAttention) for s in specs)
    specs, aligned = _align_hybrid_blocks(
        specs, hybrid_block_alignment(mla, release.version, block_size)
    )
    specs, padded = _unify_page_sizes(specs, release)
    grouped = _group_layers(specs, release)
    notes += [*aligned, *padded]
    if grouped.padding_layers:
        notes.append(
            f"{grouped.padding_layers} padding layers so every group has "
            f"{grouped.group_size} layers"
        )
    if not block_size_given and not aligned and mla:
        # (an aligned hybrid's block is the alignment's, which its own note gives)
        notes.append(f"MLA block size {block_size} is the attention backend's choice")
    page = max(s.page_bytes for s in specs)
    token_blocks = [s.block_size for s in specs if s.per_token_bytes]
    layout = CacheLayout(
        groups=grouped.groups,
        bytes_per_block=page * grouped.group_size,
        blocks_per_request=0,
        block_size=min(token_blocks) if token_blocks else specs[0].block_size,
        padding_layers=grouped.padding_layers,
        notes=tuple(dict.fromkeys(notes)),
        stage_bytes_per_block=_stage_widths(page, grouped.members, bounds),
    )
    return _GroupedLayout(layout, grouped.layers)


def _merge_windows_as_full(
    positions: Mapping[TokenLayer | StateLayer, Sequence[int]],
) -> dict[TokenLayer | StateLayer, tuple[int, ...]]:
    """unify_hybrid_kv_cache_specs: without the hybrid KV-cache manager, sliding-window and
    chunked layers become full-attention specs of the same geometry (they keep the context)."""
    merged: dict[TokenLayer | StateLayer, list[int]] = {}
    for layer, where in positions.items():
        as_full: TokenLayer | StateLayer = layer
        if isinstance(layer, WindowedLayer):
            as_full = FullAttention(layer.num_kv_heads, layer.head_dim, layer.v_head_dim)
        merged.setdefault(as_full, []).extend(where)
    return {layer: tuple(sorted(where)) for layer, where in merged.items()}


def _specs_by_layer(
    positions: Mapping[TokenLayer | StateLayer, Sequence[int]],
    *,
    block_size: int,
    kv_element_bytes: int,
    conv_element_bytes: int,
    ssm_element_bytes: int,
    tensor_parallel_size: int,
    packed_mla: bool,
) -> list[_Spec]:
    """Each distinct layer's spec: an attention page holds block_size tokens
    (AttentionSpec.page_size_bytes); a recurrent layer's page is one request's state
    (MambaSpec.page_size_bytes)."""
    tp = tensor_parallel_size
    specs: list[_Spec] = []
    for layer, where in positions.items():
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            state = state_bytes_per_sequence(layer, conv_element_bytes, ssm_element_bytes, tp)
            specs.append(_Spec(layer, tuple(where), block_size, state, 0))
        else:
            per_token = token_bytes_per_layer(layer, kv_element_bytes, tp, packed_mla)
            specs.append(_Spec(layer, tuple(where), block_size, block_size * per_token, per_token))
    return specs


def _is_uniform_type(specs: Sequence[_Spec]) -> bool:
    """UniformTypeKVCacheSpecs.from_specs: several specs, all of one kind."""
    return len(specs) > 1 and all(_same_type(specs[0].layer, s.layer) for s in specs)


def _uniform_type_layout(
    specs: Sequence[_Spec],
    bounds: Sequence[tuple[int, int]],
    notes: tuple[str, ...],
) -> _GroupedLayout:
    """UniformTypeKVCacheSpecs (0.11+): one kind of attention with different sizes is one
    group whose page is the sum of the layers' pages."""
    first = specs[0]
    per_layer_page = {i: s.page_bytes for s in specs for i in s.positions}
    total = sum(s.count * s.page_bytes for s in specs)
    layout = CacheLayout(
        groups=(
            CacheGroup(first.layer.kind.value, len(per_layer_page), first.block_size, total, 0),
        ),
        bytes_per_block=total,
        blocks_per_request=0,
        block_size=first.block_size,
        padding_layers=0,
        notes=notes,
        stage_bytes_per_block=tuple(
            sum(page for i, page in per_layer_page.items() if lo <= i < hi) for lo, hi in bounds
        ),
    )
    return _GroupedLayout(layout, (first.layer,))


def _align_hybrid_blocks(
    specs: Sequence[_Spec], align: int = cal.VLLM_MAMBA_BLOCK_ALIGNMENT
) -> tuple[list[_Spec], tuple[str, ...]]:
    """Hybrid block alignment (platforms/interface.py `_align_hybrid_block_size`, before that
    models/config.py `HybridAttentionMambaModelConfig`): raise the attention block size, in
    multiples of `align` (the kernel alignment, `vllm_kinds.hybrid_block_alignment`), until
    one attention page covers a state page; pad the state page to match."""
    attention = [s for s in specs if s.per_token_bytes]
    states = [s for s in specs if not s.per_token_bytes]
    if not (states and attention):
        return list(specs), ()
    block_size = attention[0].block_size  # every spec starts at the configured block size
    per_token = max(s.per_token_bytes for s in attention)
    state_page = max(s.page_bytes for s in states)
    attn_block = max(block_size, align * cdiv(state_page, align * per_token))
    attn_page = attn_block * per_token
    aligned = [
        replace(s, block_size=attn_block, page_bytes=attn_block * s.per_token_bytes)
        if s.per_token_bytes
        else replace(s, block_size=attn_block, page_bytes=attn_page)
        for s in specs
    ]
    if attn_block == block_size:
        return aligned, ()
    return aligned, (
        f"attention block size set to {attn_block} tokens so one page ({attn_page} B) "
        f"covers the {state_page} B recurrent state (state page padded "
        f"{100 * (attn_page - state_page) / state_page:.2f}%)",
    )


def _unify_page_sizes(
    specs: Sequence[_Spec], release: VllmRelease
) -> tuple[list[_Spec], tuple[str, ...]]:
    """unify_kv_cache_spec_page_size: smaller pages take proportionally larger blocks; a page
    that does not divide the largest is refused (0.29+ pads a non-MLA attention page)."""
    max_page = max(s.page_bytes for s in specs)
    unified: list[_Spec] = []
    notes: list[str] = []
    for s in specs:
        if s.page_bytes == max_page:
            unified.append(s)
        elif max_page % s.page_bytes == 0:
            ratio = max_page // s.page_bytes
            unified.append(replace(s, block_size=s.block_size * ratio, page_bytes=max_page))
        elif release.pad_attention_pages and not isinstance(s.layer, MultiHeadLatentAttention):
            notes.append(
                f"{s.layer.kind.value} page of {s.page_bytes} B padded to {max_page} B "
                f"({100 * (max_page - s.page_bytes) / s.page_bytes:.2f}% unused)"
            )
            unified.append(replace(s, page_bytes=max_page))
        else:
            raise SizingError(
                "model.layer_specs",
                f"vLLM {release.label} cannot unify page sizes of {s.page_bytes} B and "
                f"{max_page} B",
            )
    return unified, tuple(notes)


def _group_layers(specs: Sequence[_Spec], release: VllmRelease) -> _Groups:
    """_get_kv_cache_groups_uniform_page_size: every group holds the same number of layers of
    one spec; the last group of a spec is padded. The blocks a request holds in each group are
    left at 0 for `_GroupedLayout.at` to fill in."""
    counts = [s.count for s in specs]
    group_size = counts[0]
    if len(specs) > 1:
        # Groups of the smallest bucket's size, or of the largest when it is within the
        # release's ratio of the smallest.
        smallest, largest = min(counts), max(counts)
        limit = release.group_max_ratio
        group_size = largest if limit is not None and largest < limit * smallest else smallest
    groups: list[CacheGroup] = []
    members: list[tuple[int, ...]] = []
    layers: list[TokenLayer | StateLayer] = []
    padding = 0
    for s in specs:
        n_groups = cdiv(s.count, group_size)
        padding += n_groups * group_size - s.count
        for i in range(n_groups):
            # 0.11+: group i takes layers[i::n_groups] (padding spread over the groups, so PP
            # stages stay balanced); before, consecutive slices of group_size.
            chosen = (
                s.positions[i::n_groups]
                if release.whole_model_groups
                else s.positions[i * group_size : (i + 1) * group_size]
            )
            members.append(chosen)
            layers.append(s.layer)
            groups.append(
                CacheGroup(s.layer.kind.value, len(chosen), s.block_size, s.page_bytes, 0)
            )
    return _Groups(tuple(groups), tuple(members), group_size, padding, tuple(layers))


def _stage_widths(
    page_bytes: int, members: Sequence[Sequence[int]], bounds: Sequence[tuple[int, int]]
) -> tuple[int, ...]:
    """_project_kv_cache_groups_to_worker: a stage's block is as wide as its largest group,
    counted over the layers the stage holds."""
    if len(bounds) == 1:
        return (page_bytes * max(len(chosen) for chosen in members),)
    return tuple(
        page_bytes * max(1, *(sum(lo <= i < hi for i in chosen) for chosen in members))
        for lo, hi in bounds
    )


# --- budget -------------------------------------------------------------------------------
# vllm/v1/worker/gpu_worker.py `determine_available_memory`: what the instance may use
# (utilization x total), less the weights as loaded, the profile run's torch peak, the non-torch
# memory and, from 0.20, the CUDA graphs. Each term has its step below, named after the vLLM
# code it follows; the constants come from calibration.py with the logs they were fitted on.


def requested_memory(release: VllmRelease, total_bytes: int, utilization: float) -> int:
    product = total_bytes * utilization
    return math.ceil(product) if release.request_ceil else int(product)


# --- what the engine loads ("Model loading took X GiB": GPUModelRunner.load_model's
# model_memory_usage, the torch memory the model holds once loaded)


def rotary_cos_sin_cache_bytes(arch: ModelArchitecture) -> int:
    """The rotary embedding's `cos_sin_cache` buffer (model_executor/layers/rotary_embedding
    base.py `RotaryEmbedding.__init__`: max_position x rotary_dim, cast to the model dtype;
    YaRN scaling's rows are original_max_position x factor, the config's max_position), one
    per distinct rope (`get_rope` caches instances). kvplan counts one, rotary_dim the head
    size (MLA: qk_rope_head_dim). Llama-3.1-8B: 131,072 x 128 x 2 B = 32 MiB, which makes the
    14.9575 GiB checkpoint vllm#10517's "Loading model weights took 14.9888 GB"."""
    if arch.max_position_embeddings is None:
        return 0
    for layer, _ in arch.cache_layer_counts:
        if isinstance(layer, MultiHeadLatentAttention):
            rotary_dim = layer.qk_rope_head_dim
        elif isinstance(layer, FullAttention | SlidingWindowAttention | ChunkedLocalAttention):
            rotary_dim = layer.head_dim
        else:
            continue
        return arch.max_position_embeddings * rotary_dim * arch.dtype.element_bytes
    return 0


def mxfp4_moe_bytes(arch: ModelArchitecture, tensor_parallel_size: int) -> int:
    """What vLLM's MXFP4 experts hold on one Hopper rank beyond their checkpoint share, read in
    the v0.19.0 release (its wheel, whose `vllm/third_party/triton_kernels` is triton's
    `python/triton_kernels` at tag v3.6.0, pinned by cmake/external_projects/triton_kernels.cmake;
    the v0.19.0 Docker image installs no other triton_kernels). Per layer, E experts, hidden H:

    * `Mxfp4MoEMethod.create_weights` (quantization/mxfp4.py) allocates the intermediate size per
      rank I rounded up by `mxfp4_round_up_hidden_size_and_intermediate_size`
      (fused_moe/oracle/mxfp4.py: to 64 for the Triton backend, which `select_mxfp4_moe_backend`
      picks first on H100); gpt-oss-20b at TP2: I 1,440 -> 1,472.
    * `convert_to_mxfp4_moe_kernel_format` (same oracle, TRITON branch) swizzles new copies of
      the values and drops the loaded ones (`del layer.w13_weight`): `_swizzle_mxfp4`
      (quantization/utils/mxfp4_utils.py) hands each (E, N, K/2)-byte weight to
      `HopperMXValueLayout.swizzle_data` transposed, which pads both byte dims to 64 (its
      16 x 32 tiles then divide them): w13 (E, 2I, H/2) -> E x 64|H/2 x 64|2I, w2 (E, H, I/2)
      -> E x 64|I/2 x 64|H.
    * the scales are swizzled too (`HopperMXScaleLayout.swizzle_data`, num_warps 8: N padded to
      2 x 8 x 2 x 8 = 256, K/32 to 2) into the precision configs, while the loaded scales stay
      registered (`_setup_kernel` replaces parameters only off the Triton path).
    * both biases become fp32 (`w13_bias.to(torch.float32)`); w2's (E, H) is whole on every
      rank, where the checkpoint share counts 1/TP of it.

    The share this adds to is the checkpoint's experts over TP: E x (3 I H x 17/32 B +
    (2 I + H) x 2 B) / TP, MXFP4 being 4-bit values with one uint8 scale per 32.
    """
    moe = arch.moe
    if moe is None or arch.hidden_size is None or arch.weight_format != "mxfp4":
        return 0
    hidden = arch.hidden_size
    full = moe.moe_intermediate_size
    inter = _round_up(full // tensor_parallel_size, 64)
    w13_values = _round_up(hidden // 2, 64) * _round_up(2 * inter, 64)
    w2_values = _round_up(inter // 2, 64) * _round_up(hidden, 64)
    w13_swizzled_scales = _round_up(2 * inter, 256) * _round_up(hidden // 32, 2)
    w2_swizzled_scales = _round_up(hidden, 256) * _round_up(inter // 32, 2)
    loaded_scales = 2 * inter * (hidden // 32) + hidden * (inter // 32)
    biases = (2 * inter + hidden) * 4
    held = (
        w13_values + w2_values + w13_swizzled_scales + w2_swizzled_scales + loaded_scales + biases
    )
    checkpoint = 3 * full * hidden * 17 // 32 + (2 * full + hidden) * 2
    per_layer = moe.num_experts * held - moe.num_experts * checkpoint // tensor_parallel_size
    return per_layer * arch.num_layers


def _round_up(value: int, multiple: int) -> int:
    return cdiv(value, multiple) * multiple


def vocab_padding_bytes(arch: ModelArchitecture, tensor_parallel_size: int) -> int:
    """VocabParallelEmbedding pads the vocabulary to a multiple of 64 (pad_vocab_size,
    DEFAULT_VOCAB_PADDING_SIZE) before sharding it: embedding and lm_head rows kvplan counts
    once each (tied or not, which the architecture does not say)."""
    if arch.vocab_size is None or arch.hidden_size is None:
        return 0
    padded = cdiv(arch.vocab_size, 64) * 64
    rows = 2 * (padded - arch.vocab_size)
    return rows * arch.hidden_size * arch.dtype.element_bytes // tensor_parallel_size


@lru_cache(maxsize=4096)
def model_memory_usage(
    arch: ModelArchitecture, weights_per_gpu: int, tensor_parallel_size: int
) -> int:
    """What one worker holds after load_model: its share of the checkpoint as stored, plus
    the buffers and padding vLLM adds when it builds the model."""
    return (
        weights_per_gpu
        + rotary_cos_sin_cache_bytes(arch)
        + mxfp4_moe_bytes(arch, tensor_parallel_size)
        + vocab_padding_bytes(arch, tensor_parallel_size)
    )


# --- the profile run's torch peak (GPUModelRunner.profile_run)


@dataclass(frozen=True, slots=True)
class ProfilePeak:
    """The profile run's torch peak: one forward pass over max_num_batched_tokens tokens, then
    the sampler on min(max_num_seqs, max_num_batched_tokens) rows. The larger counts, plus what
    the run leaves allocated (`overhead`); the sampler's side holds what the forward pass
    returned and the buffers it keeps (`kept`)."""

    forward_bytes_per_token: int | None  # None: the model's shape does not say
    max_num_batched_tokens: int
    forward_factor: float
    sampler_rows: int
    vocab_size: int | None
    sampler: int
    sampler_how: str
    kept: int
    overhead: int
    # issue 21: the multimodal encoder's profile (engines/encoder.py); None for text models
    encoder: EncoderProfile | None = None

    @property
    def language_model_bytes(self) -> int:
        """The peak of the language model's dummy run and sampler alone."""
        return self.overhead + max(self.forward_bytes, self.sampler_bytes)

    @property
    def encoder_bytes(self) -> int:
        """What the encoder's profile adds to the peak: its kept batch and outputs, or its
        own forward pass where that is higher than the language model's side."""
        return self.bytes - self.language_model_bytes

    @property
    def forward_bytes(self) -> int:
        per_token = self.forward_bytes_per_token
        if per_token is None:
            return 0
        return int(per_token * self.max_num_batched_tokens * self.forward_factor)

    @property
    def sampler_bytes(self) -> int:
        return self.sampler + self.kept

    @property
    def bytes(self) -> int:
        text = self.overhead + max(self.forward_bytes, self.sampler_bytes)
        if self.encoder is None:
            return text
        return max(self.encoder.tower_forward_bytes, self.encoder.kept_bytes + text)

    @property
    def note(self) -> str:
        if self.forward_bytes_per_token is None:
            return "forward pass not modelled (no hidden_size); pass kv_pool_bytes if known"
        if self.sampler_bytes > self.forward_bytes:
            return (
                f"sampler peak: {self.sampler_rows} rows x {self.vocab_size} vocab, "
                f"{self.sampler_how}"
                + (f", with {self.kept} B the forward pass keeps" if self.kept else "")
                + (f", {self.overhead} B left by the run" if self.overhead else "")
                + f" (the forward pass peaks at {self.forward_bytes} B)"
            )
        return (
            f"forward peak: {self.max_num_batched_tokens} batched tokens x "
            f"{self.forward_bytes_per_token} B/token"
            + (f" x {self.forward_factor} (torch.compile)" if self.forward_factor != 1 else "")
            + (f", {self.overhead} B left by the run" if self.overhead else "")
        )


@lru_cache(maxsize=4096)
def profile_peak(
    arch: ModelArchitecture,
    release: VllmRelease,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    *,
    pipeline_parallel_size: int = 1,
    encoder: EncoderProfile | None = None,
) -> ProfilePeak:
    """The peak of the worker whose pool binds: with a pipeline, the last stage, which runs
    the sampler and holds the intermediate tensors it receives; a VLM's encoder profile
    (engines/encoder.py) runs first and what it keeps adds to it."""
    rows = min(max_num_seqs, max_num_batched_tokens)
    tokens = max_num_batched_tokens
    sampler, how = _dummy_sampler_run(arch, release, rows)
    return ProfilePeak(
        forward_bytes_per_token=forward_bytes_per_token(arch, tensor_parallel_size),
        max_num_batched_tokens=tokens,
        forward_factor=cal.VLLM_V1_FORWARD_FACTOR if release.v1_engine else 1.0,
        sampler_rows=rows,
        vocab_size=arch.vocab_size,
        sampler=sampler,
        sampler_how=how,
        kept=_kept_through_sampler(arch, release, tensor_parallel_size, pipeline_parallel_size)(
            tokens, rows
        ),
        overhead=cal.VLLM_PROFILE_OVERHEAD if release.triton_top_k_top_p else 0,
        encoder=encoder if release.v1_engine else None,
    )


def _dummy_sampler_run(arch: ModelArchitecture, release: VllmRelease, rows: int) -> tuple[int, str]:
    """GPUModelRunner._dummy_sampler_run's peak, and how it was worked out."""
    if release.triton_top_k_top_p:
        element = arch.dtype.element_bytes
        rows_buffer = cal.VLLM_TOPK_TOPP_BUFFER_ROWS
        return triton_sampler_bytes(arch.vocab_size, rows, element, rows_buffer), (
            f"{element} B logits + fp32 copy, probs and draws, and "
            f"min(rows, {rows_buffer}) fp32 Triton scratch rows"
        )
    copies = (
        cal.VLLM_V1_SAMPLER_FP32_COPIES if release.v1_engine else cal.VLLM_V0_SAMPLER_FP32_COPIES
    )
    return sampler_bytes(arch.vocab_size, rows, copies), f"4 B x {copies} fp32 copies"


def _kept_through_sampler(
    arch: ModelArchitecture, release: VllmRelease, tensor_parallel_size: int, stages: int
) -> Callable[[int, int], int]:
    """What stays allocated while the sampler runs, for T tokens and R rows."""

    def kept(tokens: int, rows: int) -> int:
        out = 0
        hidden, element = arch.hidden_size or 0, arch.dtype.element_bytes
        if release.triton_top_k_top_p:
            # profile_run keeps the T x H hidden states and the R rows taken for the logits;
            # _dummy_sampler_run draws R random rows of them (torch.rand_like).
            out += (tokens + 2 * rows) * hidden * element
        if release.persistent_moe_workspace and arch.weight_format != "mxfp4":
            # gpt-oss's MXFP4 experts run in triton_kernels, outside the modular kernel
            out += moe_workspace_bytes(arch, tensor_parallel_size, tokens)
        if release.v1_engine and stages > 1:
            # make_empty_intermediate_tensors: hidden states and residual for T tokens, made
            # by the first dummy run of every stage but the first
            out += 2 * tokens * hidden * element
        return out

    return kept


# --- non-torch memory


_CUDA_LINKED = DeviceMemory("cuda", True, LINKED)


def vllm_non_torch_bytes(
    release: VllmRelease,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
    device: DeviceMemory = _CUDA_LINKED,
) -> int:
    """Non-torch memory the budget charges (docs/engines/vllm.md#non-torch-memory): the XPU
    worker's own figure, else by release, and with tensor parallelism by whether the custom
    all-reduce runs (engines/vllm_platform.py device_memory): its buffers are the TP growth
    the H100 logs show; without it (PCIe past two GPUs, `disable_custom_all_reduce`) NCCL
    alone grows about as one GPU does."""
    if device.non_torch_bytes is not None:
        return device.non_torch_bytes
    if release.non_torch_includes_context:
        return cal.VLLM_NON_TORCH_WITH_CONTEXT
    if not release.v1_engine:
        return cal.VLLM_NON_TORCH_INCREASE
    if tensor_parallel_size > 1 and device.custom_all_reduce:
        return cal.VLLM_NON_TORCH_TP2 + cal.VLLM_NON_TORCH_PER_TP_RANK * (tensor_parallel_size - 2)
    if tensor_parallel_size > 1:
        return cal.VLLM_NON_TORCH_INCREASE
    if pipeline_parallel_size > 1:
        return cal.VLLM_NON_TORCH_PIPELINE
    return cal.VLLM_NON_TORCH_INCREASE


# --- CUDA graphs


@lru_cache(maxsize=4096)
def vllm_cudagraph_estimate(
    arch: ModelArchitecture,
    release: VllmRelease,
    *,
    pipeline_parallel_size: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    enforce_eager: bool,
) -> int:
    """What "Estimated CUDA graph memory" would print (0.18+; 0 when no graph is captured).

    GPUModelRunner.profile_cudagraph_memory captures PIECEWISE graphs for the sizes up to
    min(2 x max_num_seqs, 512) and, for FULL_AND_PIECEWISE (the default), FULL decode graphs
    up to max_num_seqs; Llama 4's chunked local attention captures PIECEWISE only (the
    llm-d-planner Scout log). kvplan charges VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER per graph and
    per layer of the stage.
    """
    if enforce_eager or release.version < cal.VLLM_CUDAGRAPH_PROFILED:
        return 0
    largest = min(2 * max_num_seqs, cal.VLLM_CUDAGRAPH_MAX_CAPTURE, max_num_batched_tokens)
    graphs = cal.cudagraph_capture_count(largest)
    if not any(isinstance(layer, ChunkedLocalAttention) for layer, _ in arch.layer_counts):
        graphs += cal.cudagraph_capture_count(min(max_num_seqs, largest))
    layers = cdiv(arch.num_layers, pipeline_parallel_size)
    return graphs * layers * cal.VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER


def _counts_cudagraphs(release: VllmRelease, options: EngineOptions) -> bool:
    return release.cudagraph_in_budget and not options.enforce_eager


def _refuse_minimax_loaded_terms(arch: ModelArchitecture) -> None:
    """MiniMax-Text-01 / M1 (lightning attention): its weights are counted
    (model/param_count_2026.py minimax_m1), but three terms of vLLM's loaded model are not
    modelled (docs/engines/vllm.md, MiniMax section; models/minimax_text_01.py, 0.20.0 and
    0.23.0): `self.lm_head.float()` (float32 lm_head), the float32 router
    (`ReplicatedLinear(..., params_dtype=torch.float32)`) whole on every rank, and the rope
    cache of min(max_position_embeddings, max_model_len) x rotary_dim x 4 B where kvplan's
    `rotary_cos_sin_cache_bytes` charges max_position_embeddings x head_dim x the model dtype
    (2.44 GiB too much for M1). A pool from GPU memory would be off by them: the pool is asked
    for instead."""
    if any(isinstance(layer, LightningAttention) for layer, _ in arch.cache_layer_counts):
        raise SizingError(
            "kv_pool_bytes",
            "MiniMax-Text-01 / M1 on vLLM: its float32 lm_head, float32 routers on every rank "
            "and max_model_len-long float32 rope cache are not modelled yet, so kvplan cannot "
            "size the pool from GPU memory: give kv_pool_bytes (the log's \"Available KV cache "
            'memory")',
        )


# Memoised: the budget is the same at every max_model_len of a layout (the V1 scheduler's
# defaults do not read it), and dashboards ask one layout at many.
@lru_cache(maxsize=4096)
def vllm_budget(
    arch: ModelArchitecture,
    *,
    release: VllmRelease,
    total_bytes: int,
    weights_per_gpu: int,
    tensor_parallel_size: int,
    options: EngineOptions,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    pipeline_parallel_size: int = 1,
    device: DeviceMemory = _CUDA_LINKED,
    weights_note: str | None = None,
    loaded_with_model: tuple[BudgetLine, ...] = (),
    encoder: EncoderProfile | None = None,
    all2all: All2All | None = None,
) -> MemoryBudget:
    """Worker.determine_available_memory's steps: a given --kv-cache-memory-bytes replaces
    them; else the requested memory, the weights, the profiled peak (profile_peak), non-torch
    memory, the CUDA graphs (`_cudagraph_bytes`), and what is left (`_profiled_budget`).
    `loaded_with_model` are what load_model allocates beside the weights (a drafter's weights,
    LoRA buffers: `_loaded_with_model`), each a line taken from the pool."""
    if options.kv_pool_bytes is not None:
        return given_pool_budget(
            total_bytes=total_bytes,
            weights_per_gpu=weights_per_gpu,
            pool_bytes=options.kv_pool_bytes,
            fraction_name="gpu_memory_utilization",
            note="given (--kv-cache-memory-bytes or a log)",
        )
    _refuse_minimax_loaded_terms(arch)
    tp, pp = tensor_parallel_size, pipeline_parallel_size
    util = options.gpu_memory_utilization or release.default_utilization
    peak = profile_peak(
        arch,
        release,
        tp,
        max_num_batched_tokens,
        max_num_seqs,
        pipeline_parallel_size=pp,
        encoder=encoder,
    )
    return _profiled_budget(
        release,
        options,
        utilization=util,
        total_bytes=total_bytes,
        requested_bytes=requested_memory(release, total_bytes, util),
        weights_bytes=model_memory_usage(arch, weights_per_gpu, tp),
        loaded_with_model=loaded_with_model,
        peak=peak,
        non_torch_bytes=vllm_non_torch_bytes(release, tp, pp, device),
        device=device,
        cudagraph_bytes=_cudagraph_bytes(
            arch,
            release,
            options,
            pipeline_parallel_size=pp,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
        ),
        weights_note=weights_note,
        all2all=all2all,
    )


def _cudagraph_bytes(
    arch: ModelArchitecture,
    release: VllmRelease,
    options: EngineOptions,
    *,
    pipeline_parallel_size: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> int:
    """The CUDA-graph term of Worker.determine_available_memory: 0 where this release leaves
    it out of the budget or the graphs are off; else --cudagraph-memory-bytes, else the
    estimate (vllm_cudagraph_estimate)."""
    if not _counts_cudagraphs(release, options):
        return 0
    if options.cudagraph_memory_bytes is not None:
        return options.cudagraph_memory_bytes
    return vllm_cudagraph_estimate(
        arch,
        release,
        pipeline_parallel_size=pipeline_parallel_size,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        enforce_eager=options.enforce_eager,
    )


def _profiled_budget(
    release: VllmRelease,
    options: EngineOptions,
    *,
    utilization: float,
    total_bytes: int,
    requested_bytes: int,
    weights_bytes: int,
    peak: ProfilePeak,
    non_torch_bytes: int,
    cudagraph_bytes: int,
    device: DeviceMemory = _CUDA_LINKED,
    weights_note: str | None = None,
    loaded_with_model: tuple[BudgetLine, ...] = (),
    all2all: All2All | None = None,
) -> MemoryBudget:
    """The last step of Worker.determine_available_memory: what the requested memory leaves
    for the KV cache after the weights, the profiled peak, non-torch memory and the graphs.
    An all-to-all backend's buffers are part of the non-torch increase vLLM measures, its
    gathered activations part of the peak (engines/all2all.py)."""
    loaded = weights_bytes - sum(line.bytes for line in loaded_with_model)
    buffers = all2all.buffer_bytes if all2all is not None else 0
    gathered = all2all.gathered_bytes if all2all is not None else 0
    pool = (
        requested_bytes
        - loaded
        - peak.bytes
        - gathered
        - non_torch_bytes
        - buffers
        - cudagraph_bytes
    )
    describe = partial(
        _budget_lines,
        release=release,
        options=options,
        utilization=utilization,
        total_bytes=total_bytes,
        requested_bytes=requested_bytes,
        weights_bytes=weights_bytes,
        loaded_with_model=loaded_with_model,
        peak=peak,
        non_torch_bytes=non_torch_bytes,
        cudagraph_bytes=cudagraph_bytes,
        pool_bytes=pool,
        device=device,
        weights_note=weights_note,
        all2all=all2all,
    )
    return MemoryBudget(
        total_bytes=total_bytes,
        fraction=utilization,
        fraction_name="gpu_memory_utilization",
        requested_bytes=requested_bytes,
        weights_bytes=loaded,
        activation_bytes=peak.bytes + gathered,
        non_torch_bytes=non_torch_bytes + buffers,
        cudagraph_bytes=cudagraph_bytes,
        pool_bytes=pool,
        pool_given=False,
        describe=describe,
    )


def _budget_lines(
    *,
    release: VllmRelease,
    options: EngineOptions,
    utilization: float,
    total_bytes: int,
    requested_bytes: int,
    weights_bytes: int,
    loaded_with_model: tuple[BudgetLine, ...],
    peak: ProfilePeak,
    non_torch_bytes: int,
    cudagraph_bytes: int,
    pool_bytes: int,
    device: DeviceMemory = _CUDA_LINKED,
    weights_note: str | None = None,
    all2all: All2All | None = None,
) -> tuple[BudgetLine, ...]:
    """The budget's terms, written out on demand (only explanations read them)."""
    lines = [
        BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports"),
        BudgetLine(
            "requested",
            requested_bytes,
            f"gpu_memory_utilization {utilization} x total",
        ),
        BudgetLine(
            "weights",
            -weights_bytes,
            "model weights on this GPU as vLLM loads them (with the rotary cache and padding)"
            + (f"; {weights_note}" if weights_note else ""),
        ),
        *loaded_with_model,
        BudgetLine("activation_peak", -peak.language_model_bytes, peak.note),
    ]
    if peak.encoder is not None:  # issue 21: multimodal encoders
        lines.append(BudgetLine("encoder_profile", -peak.encoder_bytes, peak.encoder.note))
    lines += [
        BudgetLine("non_torch", -non_torch_bytes, _non_torch_note(release, device)),
    ]
    if all2all is not None:  # issue 21: expert parallelism's all-to-all
        lines += all2all.budget_lines()
    if _counts_cudagraphs(release, options):
        lines.append(
            BudgetLine(
                "cudagraph",
                -cudagraph_bytes,
                "CUDA-graph memory, given"
                if options.cudagraph_memory_bytes is not None
                else "CUDA-graph memory, kvplan's estimate (vLLM profiles it since 0.20)",
            )
        )
    lines.append(BudgetLine("kv_cache_memory", pool_bytes, "what is left for the KV cache"))
    return tuple(lines)


def _non_torch_note(release: VllmRelease, device: DeviceMemory) -> str:
    if device.non_torch_bytes is not None:
        return device.why
    if release.non_torch_includes_context:
        return "CUDA context and all other non-torch memory (counted by this release)"
    return f"non-torch growth during profiling (NCCL, cuBLAS, attention workspaces); {device.why}"


# --- report -------------------------------------------------------------------------------


def vllm_report(
    num_blocks: int, layout: CacheLayout, max_model_len: int, release: VllmRelease, dcp: int = 1
) -> PoolReport:
    """The "GPU KV cache size" / "Maximum concurrency" lines, and whole sequences that fit.

    With decode context parallelism the layout's blocks per request are one rank's share
    (cdiv(max_model_len, dcp) tokens), so the concurrency holds the factor; the tokens counted
    from blocks are multiplied by `dcp`, as kv_cache_utils.py logs them before 0.21."""
    m = max_model_len
    if not release.v1_engine:
        # V0 executor: "# GPU blocks" and concurrency = blocks x block size / max_model_len.
        tokens = num_blocks * layout.block_size
        v0_concurrency = tokens / m
        # worker.py determine_num_available_blocks: CPU blocks = swap space // block bytes.
        cpu_blocks = cal.VLLM_V0_SWAP_SPACE_BYTES // layout.bytes_per_block
        return PoolReport(
            num_blocks,
            tokens,
            v0_concurrency,
            num_blocks // cdiv(m, layout.block_size),
            lambda: (
                f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}",
                f"Maximum concurrency for {m} tokens per request: {v0_concurrency:.2f}x",
            ),
        )
    if release.concurrency_from_blocks:
        concurrency = num_blocks / layout.blocks_per_request
    else:
        # V1 before 0.9.1: tokens (blocks x block size) over max_model_len.
        concurrency = num_blocks * layout.block_size / m
    style = release.tokens_report(len(layout.groups) > 1)
    if style == "concurrency":
        tokens = int(concurrency * m)
    elif style == "groups":
        tokens = num_blocks // len(layout.groups) * min(g.block_size for g in layout.groups)
    else:
        tokens = num_blocks * layout.block_size
    if style != "concurrency":
        tokens *= dcp

    def describe() -> tuple[str, ...]:
        size = f"GPU KV cache size: {tokens:,} tokens"
        conc = f"Maximum concurrency for {m:,} tokens per request: {concurrency:.2f}x"
        return (f"{size}, {conc}",) if release.one_log_line else (size, conc)

    # The block pool keeps block 0 as the null block: one fewer is ever handed out.
    fits = max(0, num_blocks - 1) // layout.blocks_per_request
    return PoolReport(num_blocks, tokens, concurrency, fits, describe)


# --- the pipeline ---------------------------------------------------------------------------


def vllm_capacity(inputs: SizingInputs) -> Capacity:
    """One vLLM instance: release, flags, cache groups per worker, budget, blocks, report."""
    asked = inputs.engine.engine_version or cal.LATEST_VLLM_VERSION
    release, note = _checked_release(
        inputs.arch, inputs.parallel.tensor_parallel_size, inputs.engine
    )
    dcp = inputs.engine.expert_parallel.decode_context_parallel_size
    flags = vllm_flags(inputs, release)
    inputs, all2all = _with_all2all(inputs, release, flags)
    if inputs.arch.has_compressed_attention:
        return _deepseek_v4_capacity(inputs, asked, release, flags, note, all2all=all2all)
    stages, stage_sizes, layout_at = worker_layouts(inputs, release, flags, dcp)
    layouts = [layout_at(stage, inputs.workload.max_model_len) for stage in stages]
    # Each worker profiles its own stage's weights (Worker.determine_available_memory).
    budgets = tuple(
        _stage_budget(inputs, release, flags, weights, all2all)
        for weights in inputs.facts.stage_weights_bytes_per_gpu
        or (inputs.facts.weights_bytes_per_gpu,)
    )
    blocks = vllm_blocks(
        tuple(budget.pool_bytes for budget in budgets),
        layouts,
        bool(stage_sizes),
        inputs.engine.num_gpu_blocks_override,
    )
    # The budget answered is the binding stage's (the fewest blocks).
    budget = budgets[blocks.binding if len(budgets) > 1 else 0]
    reason, longest = _does_not_fit(
        budget,
        blocks,
        release,
        inputs.workload.max_model_len,
        lambda context: layout_at(stages[blocks.worker], context),
    )
    capacity = Capacity(
        engine=Engine.VLLM,
        engine_version=asked.strip(),
        facts=inputs.facts,
        budget=budget,
        layout=blocks.layout,
        report=vllm_report(
            blocks.num_blocks, blocks.layout, inputs.workload.max_model_len, release, dcp
        ),
        engine_settings=_settings(release, flags, budget, blocks.layout, inputs),
        warnings=inputs.warnings
        + blocks.layout.notes
        + ((note,) if note else ())
        + expert_placement_note(inputs.facts.rank_weights, release.version, release.label),
        fits=reason is None,
        reason=reason,
        max_model_len_that_fits=longest,
        per_stage_blocks=blocks.per_stage,
    )
    tiered = vllm_tiers(capacity, inputs.engine, release.version, release.label)
    return with_lmcache(tiered, inputs.engine, release.version, release.label)


# Memoised without the context: the release and the checks of what it runs read none of it.
@lru_cache(maxsize=4096)
def _checked_release(
    arch: ModelArchitecture, tensor_parallel_size: int, engine: EngineOptions
) -> tuple[VllmRelease, str | None]:
    """The release that sizes the question and the note saying so (`release_sizing`), once
    it is known to run the model, the roles and the flags asked."""
    asked = engine.engine_version or cal.LATEST_VLLM_VERSION
    vllm_rules_text(engine)  # refuses rules without a build, or outside the build's
    release, note = release_sizing(asked, engine.engine_rules_version)
    _check_release_runs(arch, release)
    _check_roles_run(engine, release)
    check_encoder_release(engine.skip_mm_profiling, release.version, release.label)
    check_vllm_kinds(arch, release.version, release.label, engine)
    dcp = engine.expert_parallel.decode_context_parallel_size
    check_vllm_dcp(arch, tensor_parallel_size, dcp, release.version, release.label)
    return release, note


def _loaded_with_model(
    arch: ModelArchitecture, engine: EngineOptions, tp: int, flags: VllmFlags
) -> tuple[BudgetLine, ...]:
    """What GPUModelRunner.load_model allocates beside the target's weights (issue 21): the
    drafter's weights (engines/speculative.py) and the LoRA buffers (engines/lora.py)."""
    lines: list[BudgetLine] = []
    spec = engine.speculative_config
    draft_layers = 0
    if spec is not None:
        # arch already ends with the drafter's cache layers (capacity.py): the LoRA manager
        # wraps the target's layers only
        drafter = vllm_drafter(arch, spec, tp)
        draft_layers = len(drafter.layers)
        lines.append(drafter.budget_line())
    lora = vllm_lora_buffers(
        arch,
        engine,
        num_layers=arch.num_layers - draft_layers,
        tensor_parallel_size=tp,
        max_num_batched_tokens=flags.max_num_batched_tokens,
        max_num_seqs=flags.max_num_seqs,
    )
    if lora is not None:
        lines.append(lora.budget_line())
    return tuple(line for line in lines if line.bytes)


def _with_all2all(
    inputs: SizingInputs, release: VllmRelease, flags: VllmFlags
) -> tuple[SizingInputs, All2All | None]:
    """The all-to-all backend's memory (engines/all2all.py) and the question as vLLM runs it
    with that backend: its warnings added, CUDA graphs off where DeepEP high throughput turns
    them off (DP > 1)."""
    all2all = vllm_all2all(
        inputs.arch,
        inputs.parallel,
        inputs.engine.expert_parallel,
        version=release.version,
        label=release.label,
        max_num_batched_tokens=flags.max_num_batched_tokens,
    )
    if all2all is None or not (all2all.warnings or all2all.cuda_graphs_off):
        return inputs, all2all
    warnings = inputs.warnings + all2all.warnings
    engine = inputs.engine
    if all2all.cuda_graphs_off and not engine.enforce_eager:
        engine = replace(engine, enforce_eager=True)
        warnings += (
            "all2all_backend deepep_high_throughput with data_parallel_size > 1: vLLM turns "
            "CUDA graphs off (config/compilation.py; platforms/cuda.py before 0.14), sized as "
            "enforce_eager",
        )
    return replace(inputs, engine=engine, warnings=warnings), all2all


def _stage_budget(
    inputs: SizingInputs,
    release: VllmRelease,
    flags: VllmFlags,
    weights_per_gpu: int,
    all2all: All2All | None = None,
) -> MemoryBudget:
    """One worker's budget with `weights_per_gpu` (its stage's weights) loaded."""
    rank = inputs.facts.rank_weights
    return _worker_budget(
        inputs.arch,
        inputs.gpu,
        inputs.parallel,
        inputs.engine,
        release,
        flags=flags,
        weights_per_gpu=weights_per_gpu,
        weights_note=None if rank is None else rank.note,
        # the encoder's profile is the budget's one term that reads the context
        encoder_context=0 if inputs.arch.encoder is None else inputs.workload.max_model_len,
        all2all=all2all,
    )


# Memoised by the layout, not the context: questions on one layout at other lengths share it.
@lru_cache(maxsize=4096)
def _worker_budget(
    arch: ModelArchitecture,
    gpu: Gpu,
    parallel: Parallelism,
    engine: EngineOptions,
    release: VllmRelease,
    *,
    flags: VllmFlags,
    weights_per_gpu: int,
    weights_note: str | None,
    encoder_context: int,
    all2all: All2All | None,
) -> MemoryBudget:
    offloaded = offloaded_weight_bytes(engine, weights_per_gpu)
    tp, pp = parallel.tensor_parallel_size, parallel.pipeline_parallel_size
    budget = vllm_budget(
        arch,
        release=release,
        total_bytes=gpu.memory_bytes,
        weights_per_gpu=weights_per_gpu - offloaded,
        tensor_parallel_size=tp,
        options=engine,
        max_num_batched_tokens=flags.max_num_batched_tokens,
        max_num_seqs=flags.max_num_seqs,
        pipeline_parallel_size=pp,
        device=device_memory(gpu, tp, engine, release.version),
        weights_note=weights_note,
        loaded_with_model=_loaded_with_model(arch, engine, tp, flags),
        encoder=encoder_profile(
            arch,
            version=release.version,
            pipeline_parallel_size=pp,
            max_num_batched_tokens=flags.max_num_batched_tokens,
            max_num_seqs=flags.max_num_seqs,
            max_model_len=encoder_context,
            limit_mm_per_prompt=engine.limit_mm_per_prompt,
            skip_mm_profiling=engine.skip_mm_profiling,
        ),
        all2all=all2all,
    )
    return with_weight_offload(budget, offloaded)


# Memoised per version string: answers name a handful of releases, each parsed once.
@lru_cache(maxsize=256)
def release_sizing(asked: str, rules: str | None = None) -> tuple[VllmRelease, str | None]:
    """The release that sizes the version asked, and the note saying so where it is another:
    by default the newest modelled release not newer than it (versions.modelled_release);
    with `rules` (engine_rules_version) the final release whose arithmetic a dev build
    carries (`rules_for_build`)."""
    if rules is None:
        release = vllm_release(parse_vllm_version(asked))
        note = sizing_note(
            "vLLM", parse_engine_version(asked), release.label, cal.LATEST_VLLM_VERSION
        )
        return release, note
    release = vllm_release(rules_for_build(asked, rules))
    default = release_label(parse_vllm_version(asked))
    note = (
        f"vLLM {asked.strip()} is sized by the rules of {release.label} "
        f"(engine_rules_version: the build carries that release's arithmetic); "
        f"without it, by {default}'s"
    )
    newer = sizing_note("vLLM", parse_engine_version(rules), release.label, cal.LATEST_VLLM_VERSION)
    return release, note if newer is None else f"{note}; {newer}"


@lru_cache(maxsize=256)
def rules_for_build(asked: str, rules: str) -> Version:
    """The release `rules` names for the build `asked`, checked: a final release, not newer
    than the build's own (`0.20.1` for `0.20.1rc1.dev91`) nor older than the releases PEP 440
    puts before the build (whose rules size it by default)."""
    build = parse_engine_version(asked)
    carried = parse_engine_version(rules, "engine_rules_version", "vLLM")
    if carried.is_prerelease or carried.post is not None or len(carried.release) > 3:
        raise SizingError(
            "engine_rules_version", f"name a final release (like 0.20.1), not {rules!r}"
        )
    lowest, highest = parse_vllm_version(asked), build.major_minor_patch
    wanted = carried.major_minor_patch
    if not lowest <= wanted <= highest:
        raise SizingError(
            "engine_rules_version",
            f"a build of vLLM {build.text} carries the rules of {release_label(lowest)} up to "
            f"{'.'.join(map(str, highest))}, not {rules}",
        )
    return wanted


def vllm_rules_text(engine: EngineOptions) -> str:
    """The release string whose rules size `engine`'s question: engine_rules_version where
    given (checked against the build, rules_for_build), else engine_version, else the newest."""
    asked = engine.engine_version or cal.LATEST_VLLM_VERSION
    if engine.engine_rules_version is None:
        return asked
    if engine.engine_version is None:
        raise SizingError(
            "engine_rules_version",
            "names the release a nightly or dev build carries: give the build as "
            "engine_version too",
        )
    rules_for_build(asked, engine.engine_rules_version)
    return engine.engine_rules_version


def _check_release_runs(arch: ModelArchitecture, release: VllmRelease) -> None:
    """Raise for models this release does not size (or does not run)."""
    check_diffkv_release(arch, release.version, release.label)
    if arch.has_state_layers and not release.state_in_pool:
        raise SizingError(
            "engine_version",
            f"vLLM {release.label} kept Mamba / linear-attention state outside the KV pool; "
            "kvplan sizes recurrent-state models from vLLM 0.10.2 on",
        )
    if arch.has_compressed_attention:
        _check_deepseek_v4_release(release)
    if arch.has_sparse_mla and release.version < cal.VLLM_SPARSE_MLA:
        raise SizingError(
            "engine_version",
            f"vLLM {release.label} does not run DeepSeek sparse attention (indexer) models; "
            "they arrived in 0.11.0",
        )


def _check_deepseek_v4_release(release: VllmRelease) -> None:
    """DeepSeek-V4 runs from 0.20.0; kvplan models its pool on 0.24.0-0.26.x and 0.33.0."""
    v, label = release.version, release.label
    if v < cal.VLLM_DEEPSEEK_V4:
        raise SizingError(
            "engine_version",
            f"vLLM {label} does not run DeepSeek-V4 (compressed sparse attention); it arrived "
            "in 0.20.0",
        )
    if v < cal.VLLM_DEEPSEEK_V4_TUPLES:
        raise SizingError(
            "engine_version",
            f"vLLM {label} runs DeepSeek-V4 but lays its pool out before the packed block of "
            "0.24.0 (kv_cache_utils.py _get_kv_cache_config_packed); kvplan models DeepSeek-V4 "
            "on vLLM 0.24.0-0.26.x and 0.33.0",
        )
    if cal.VLLM_DEEPSEEK_V4_REGROUPED <= v < cal.VLLM_DEEPSEEK_V4_PLANNED:
        raise SizingError(
            "engine_version",
            f"vLLM {label} regroups DeepSeek-V4's caches (unpadded layer tuples from 0.27.0, "
            "groups per kind from 0.29.0) in ways kvplan does not model; it models DeepSeek-V4 "
            "on vLLM 0.24.0-0.26.x and 0.33.0",
        )


# DeepSeek-V4's C128 layers keep block_size / 128 rows a page (MLAAttentionSpec
# storage_block_size), and the backend reads pages of 64-token multiples.
_DEEPSEEK_V4_BLOCK_MULTIPLE = 128


def _deepseek_v4_pool(
    inputs: SizingInputs, release: VllmRelease, flags: VllmFlags, context: int
) -> TuplePool | PackedPool:
    """The release's DeepSeek-V4 pool for one request of `context` tokens."""
    in_flight = release.in_flight_tokens(flags.max_num_batched_tokens, 1)
    layers = inputs.arch.compressed_layers
    if release.version < cal.VLLM_DEEPSEEK_V4_PLANNED:
        return tuple_pool(
            layers,
            block_size=flags.block_size,
            max_model_len=context,
            max_in_flight_tokens=in_flight,
        )
    return packed_pool(
        layers,
        block_size=flags.block_size,
        max_model_len=context,
        max_in_flight_tokens=in_flight,
        available_bytes=0,
    )


def _deepseek_v4_fits(pool: TuplePool | PackedPool, pool_bytes: int, num_blocks: int) -> bool:
    """vLLM's start-up check: 0.26 asks the bytes of `_max_memory_usage_bytes_from_groups`,
    0.33 one request's blocks beside the null block."""
    if isinstance(pool, TuplePool):
        return pool.request_bytes <= pool_bytes
    return num_blocks - 1 >= pool.blocks_per_request


def _check_deepseek_v4_roles(options: EngineOptions) -> None:
    """Issue 21's roles on DeepSeek-V4: its MTP drafter is sized (the layer joins the pool,
    capacity.py), the others refused by name with the reason."""
    spec = options.speculative_config
    if spec is not None and spec.method != "mtp":
        raise SizingError(
            "speculative_config.method",
            f"{spec.method}: kvplan sizes DeepSeek-V4's own MTP drafter (method mtp / "
            "deepseek_mtp, models/deepseek_v4/nvidia/mtp.py) in its pool; other drafters "
            "(EAGLE heads, DSpark, draft models, ngram, which turns async scheduling off) "
            "are not modelled for it",
        )
    unsized = (
        (
            "enable_lora",
            options.enable_lora,
            "vLLM's LoRA manager wraps DeepSeek-V4's layers in ways kvplan has not read "
            "(its compressed attention and hash-routed experts)",
        ),
        (
            "kv_offloading_size",
            options.kv_offloading_size is not None,
            "the OffloadingConnector's host block is one packed GPU block of each rank "
            "(kv_connector/v1/offloading/config.py: the KV tensor over num_blocks), but the "
            "tokens and sequences a host block holds across DeepSeek-V4's 256-, 64-, 4- and "
            "8-token groups, and which groups it stores, are not modelled",
        ),
        (
            "cpu_offload_gb",
            bool(options.cpu_offload_gb),
            "which of DeepSeek-V4's weights vLLM's UVA offloader moves (its fp8 and MXFP4 "
            "expert tensors) has not been read",
        ),
    )
    for field, asked, why in unsized:
        if asked:
            raise SizingError(
                field,
                f"kvplan's DeepSeek-V4 pool (engines/vllm_deepseek_v4.py) does not size this "
                f"role yet: {why}",
            )


def _check_deepseek_v4_question(
    inputs: SizingInputs, release: VllmRelease, flags: VllmFlags
) -> None:
    """Raise, by name, for what kvplan's DeepSeek-V4 pool does not model."""
    _check_deepseek_v4_roles(inputs.engine)
    if inputs.parallel.pipeline_parallel_size > 1:
        raise SizingError(
            "pipeline_parallel_size",
            "kvplan models DeepSeek-V4's pool on one pipeline stage (tensor and data "
            "parallelism); vLLM's per-stage projection of its packed groups is not modelled",
        )
    if cuda_major(inputs.gpu.name) is None:
        raise SizingError(
            "gpu",
            f"{inputs.gpu.name or 'this GPU'}: kvplan sizes DeepSeek-V4 on the GPUs vLLM's "
            "DeepSeek-V4 attention runs on (models/deepseek_v4/nvidia/model.py "
            "_select_dsv4_attn_cls: FlashMLA on Hopper and B200-class Blackwell, FlashInfer on "
            "SM120); its ROCm, XPU and CPU paths and older GPUs are not modelled",
        )
    if flags.block_size % _DEEPSEEK_V4_BLOCK_MULTIPLE:
        raise SizingError(
            "block_size",
            f"{flags.block_size}: DeepSeek-V4's C128 layers keep block_size / 128 compressed "
            "rows a page; vLLM's recipes run 256 (DeepseekSparseSWABackend's preferred size)",
        )
    dtype = inputs.workload.kv_cache_dtype
    if dtype is not KvCacheDtype.FP8_DS_MLA:
        raise InvalidDtype(
            "kv_cache_dtype",
            f"{dtype.value}: vLLM {release.label} stores DeepSeek-V4's cache as fp8_ds_mla rows "
            "with an fp8 cache (kv_cache_dtype fp8, every published recipe); the plain bf16 "
            "rows of the FlashInfer backends are not modelled",
        )


def _deepseek_v4_does_not_fit(
    inputs: SizingInputs,
    release: VllmRelease,
    flags: VllmFlags,
    pool_bytes: int,
    num_blocks: int,
) -> tuple[str | None, int | None]:
    """Why vLLM would not start (None when it starts), and the longest context that fits."""
    m = inputs.workload.max_model_len
    if pool_bytes <= 0:
        return "no memory left for the KV cache", None
    if _deepseek_v4_fits(_deepseek_v4_pool(inputs, release, flags, m), pool_bytes, num_blocks):
        return None, None
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _deepseek_v4_fits(
            _deepseek_v4_pool(inputs, release, flags, mid), pool_bytes, num_blocks
        ):
            lo = mid
        else:
            hi = mid - 1
    return (
        f"one sequence of {m} tokens needs more of DeepSeek-V4's pool than the {pool_bytes} B "
        f"there are; the longest max_model_len that fits is {lo}"
    ), lo


def _deepseek_v4_capacity(
    inputs: SizingInputs,
    asked: str,
    release: VllmRelease,
    flags: VllmFlags,
    note: str | None,
    *,
    all2all: All2All | None = None,
) -> Capacity:
    """DeepSeek-V4 on vLLM: its own pool (engines/vllm_deepseek_v4.py) in place of the
    generic layout; budget, report and settings as every other model's."""
    _check_deepseek_v4_question(inputs, release, flags)
    m = inputs.workload.max_model_len
    pool = _deepseek_v4_pool(inputs, release, flags, m)
    budget = vllm_budget(
        inputs.arch,
        release=release,
        total_bytes=inputs.gpu.memory_bytes,
        weights_per_gpu=inputs.facts.weights_bytes_per_gpu,
        tensor_parallel_size=inputs.parallel.tensor_parallel_size,
        options=inputs.engine,
        max_num_batched_tokens=flags.max_num_batched_tokens,
        max_num_seqs=flags.max_num_seqs,
        # the MTP drafter's weights (engines/speculative.py); its layer is already in
        # inputs.arch.compressed_layers (capacity.py with_draft_layers)
        loaded_with_model=_loaded_with_model(
            inputs.arch, inputs.engine, inputs.parallel.tensor_parallel_size, flags
        ),
        all2all=all2all,
    )
    pool_bytes = max(0, budget.pool_bytes)
    override = inputs.engine.num_gpu_blocks_override
    num_blocks = pool_bytes // pool.bytes_per_block if override is None else override
    style = (
        f"{len(pool.groups)} groups in {pool.layer_tuples} layer tuples"
        if isinstance(pool, TuplePool)
        else f"{len(pool.group_bytes)} packed groups"
    )
    layout = pool_layout(
        pool,
        (
            f"DeepSeek-V4 pool as vLLM {release.label} packs it: {style}, one block of "
            f"{pool.bytes_per_block} B holds every group's page, a request of {m} tokens takes "
            f"{pool.blocks_per_request} blocks",
        ),
    )
    layout = replace(layout, block_size=flags.block_size)
    reason, longest = _deepseek_v4_does_not_fit(
        inputs, release, flags, budget.pool_bytes, num_blocks
    )
    return Capacity(
        engine=Engine.VLLM,
        engine_version=asked.strip(),
        facts=inputs.facts,
        budget=budget,
        layout=layout,
        report=vllm_report(num_blocks, layout, m, release),
        engine_settings=_settings(release, flags, budget, layout, inputs),
        warnings=inputs.warnings
        + layout.notes
        + ((note,) if note else ())
        + expert_placement_note(inputs.facts.rank_weights, release.version, release.label),
        fits=reason is None,
        reason=reason,
        max_model_len_that_fits=longest,
        per_stage_blocks=(num_blocks,),
    )


def _check_roles_run(options: EngineOptions, release: VllmRelease) -> None:
    """Issue 21's roles are read from the V1 engine (0.33.0): refuse them before it."""
    if release.v1_engine:
        return
    if options.speculative_config is not None:
        raise SizingError(
            "engine_version",
            f"vLLM {release.label} runs the V0 engine, whose speculative-decoding worker kept "
            "the draft's cache apart; kvplan sizes the V1 drafter (0.8.0 on)",
        )
    if options.enable_lora:
        raise SizingError(
            "engine_version",
            f"vLLM {release.label} runs the V0 engine, whose block count did not see the LoRA "
            "buffers (vllm#14450); kvplan sizes LoRA from the V1 engine (0.8.0 on)",
        )


@frozen
class VllmFlags:
    """The scheduler and cache flags one instance runs with: given, or the release's default."""

    defaults: BatchDefaults
    max_num_batched_tokens: int
    max_num_seqs: int
    prefix_caching: bool
    block_size: int
    hybrid_manager: bool


def vllm_flags(inputs: SizingInputs, release: VllmRelease) -> VllmFlags:
    # V1's scheduler defaults are the GPU's; V0's alone read the context (batch_defaults)
    context = inputs.workload.max_model_len if not release.v1_engine else 0
    return _flags(
        inputs.arch, inputs.gpu, inputs.parallel, inputs.engine, release, max_model_len=context
    )


# Memoised without the context where the release's defaults do not read it (V1).
@lru_cache(maxsize=4096)
def _flags(
    arch: ModelArchitecture,
    gpu: Gpu,
    parallel: Parallelism,
    engine: EngineOptions,
    release: VllmRelease,
    *,
    max_model_len: int,
) -> VllmFlags:
    defaults = batch_defaults(release, gpu.memory_bytes, gpu.name, max_model_len)
    batched_dp = vllm_batched_dp_tokens(arch, parallel, engine.expert_parallel, release.version)
    if batched_dp is not None:
        defaults = BatchDefaults(
            batched_dp,
            defaults.max_num_seqs,
            "deepep_low_latency with expert parallel and DP > 1 (vLLM 0.20+ "
            "DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP)",
        )
    max_num_batched_tokens = engine.max_num_batched_tokens or defaults.max_num_batched_tokens
    return VllmFlags(
        defaults=defaults,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=min(engine.max_num_seqs or defaults.max_num_seqs, max_num_batched_tokens),
        prefix_caching=(
            engine.enable_prefix_caching
            if engine.enable_prefix_caching is not None
            else release.default_prefix_caching(arch.has_state_layers)
        ),
        block_size=engine.block_size
        or default_block_size(arch)
        or (
            mla_block_size(release, gpu.name, arch.has_sparse_mla)
            if arch.has_mla
            else cal.VLLM_DEFAULT_BLOCK_SIZE
        ),
        hybrid_manager=release.hybrid_allocator
        and release.v1_engine
        and not engine.disable_hybrid_kv_cache_manager,
    )


LayoutAt = Callable[[ModelArchitecture, int], CacheLayout]


def worker_layouts(
    inputs: SizingInputs, release: VllmRelease, flags: VllmFlags, dcp: int = 1
) -> tuple[tuple[ModelArchitecture, ...], tuple[int, ...], LayoutAt]:
    """The layers each worker groups, the stage sizes the groups are projected on (0.11+ with
    pipeline stages; empty before), and the layout of those layers at any context: with
    decode context parallelism `dcp`, the cdiv(context, dcp) tokens one rank keeps
    (expert_parallel.py dcp_tokens_per_rank)."""
    stages = inputs.stages
    sizes: tuple[int, ...] = ()
    if release.whole_model_groups and len(inputs.stages) > 1:
        # get_kv_cache_configs (0.11+): groups on the whole model, projected on each stage.
        stages = (inputs.arch,)
        sizes = tuple(stage.num_layers for stage in inputs.stages)
    conv, ssm = state_dtype_bytes(inputs.arch, inputs.engine.mamba_ssm_cache_dtype)
    layout_of = partial(
        vllm_layout,
        release=release,
        kv_element_bytes=inputs.facts.kv_element_bytes,
        conv_element_bytes=conv,
        ssm_element_bytes=ssm,
        tensor_parallel_size=inputs.parallel.tensor_parallel_size,
        pipeline_parallel_size=inputs.parallel.pipeline_parallel_size,
        block_size=flags.block_size,
        block_size_given=inputs.engine.block_size is not None,
        max_num_batched_tokens=flags.max_num_batched_tokens,
        prefix_caching=flags.prefix_caching,
        hybrid_manager=flags.hybrid_manager,
        stage_sizes=sizes,
        packed_mla=packed_mla(inputs.arch, inputs.workload.kv_cache_dtype),
    )

    def layout_at(stage: ModelArchitecture, context: int) -> CacheLayout:
        return layout_of(stage, max_model_len=dcp_tokens_per_rank(context, dcp))

    return stages, sizes, layout_at


@frozen
class VllmBlocks:
    """The pool cut into blocks on every worker, and the worker whose layout is reported."""

    per_stage: tuple[int, ...]
    num_blocks: int
    worker: int
    layout: CacheLayout
    binding: int = 0  # the stage with the fewest blocks (the smallest pool of a tie)


def vllm_blocks(
    pool_bytes: int | Sequence[int],
    layouts: Sequence[CacheLayout],
    projected: bool,
    num_gpu_blocks_override: int | None = None,
) -> VllmBlocks:
    """get_kv_cache_configs: every worker takes the smallest block count of all workers.

    `pool_bytes`: each stage's pool (each worker's weights are its own stage's), or one pool
    for every stage."""
    widths = (
        layouts[0].stage_bytes_per_block if projected else [lay.bytes_per_block for lay in layouts]
    )
    pools = [pool_bytes] * len(widths) if isinstance(pool_bytes, int) else list(pool_bytes)
    if len(pools) == 1:
        pools = pools * len(widths)
    per_stage = tuple(max(0, pool) // width for pool, width in zip(pools, widths, strict=True))
    # the stage with the fewest blocks; of stages that tie, the one with the smallest pool
    binding = min(range(len(per_stage)), key=lambda i: (per_stage[i], pools[i]))
    if projected:
        # Report the block as the widest stage's worker sees it.
        widest = max(range(len(widths)), key=lambda i: widths[i])
        worker, layout = 0, replace(layouts[0], bytes_per_block=widths[widest])
    else:
        worker = binding
        layout = layouts[worker]
    num_blocks = min(per_stage) if num_gpu_blocks_override is None else num_gpu_blocks_override
    return VllmBlocks(per_stage, num_blocks, worker, layout, binding)


def _does_not_fit(
    budget: MemoryBudget,
    blocks: VllmBlocks,
    release: VllmRelease,
    max_model_len: int,
    layout_at: Callable[[int], CacheLayout],
) -> tuple[str | None, int | None]:
    """Why vLLM refuses to start (None when it starts), and the longest context that fits."""
    if budget.pool_bytes <= 0:
        return (
            f"no memory left for the KV cache: weights, activation and overheads take "
            f"{budget.requested_bytes - budget.pool_bytes} B of the {budget.requested_bytes} B "
            "the engine may use"
        ), None
    num_blocks, layout = blocks.num_blocks, blocks.layout
    # 0.33 checks one request against the blocks left after the null block.
    usable = num_blocks - 1 if release.fit_check_reserves_null_block else num_blocks
    if usable >= layout.blocks_per_request:
        return None, None
    longest = longest_context(layout_at, usable, max_model_len)
    return (
        f"one sequence of {max_model_len} tokens needs {layout.blocks_per_request} blocks but "
        f"the pool holds {num_blocks}"
        + (" (one is the null block)" if usable != num_blocks else "")
        + f"; the longest max_model_len that fits is {longest}"
    ), longest


def longest_context(layout_at: Callable[[int], CacheLayout], num_blocks: int, upper: int) -> int:
    """Binary search for the longest context whose per-request blocks fit (vLLM does the same)."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout_at(mid).blocks_per_request <= num_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _settings(
    release: VllmRelease,
    flags: VllmFlags,
    budget: MemoryBudget,
    layout: CacheLayout,
    inputs: SizingInputs,
) -> EngineSettings:
    options = inputs.engine
    return {
        "engine_version": release.label,
        "gpu_memory_utilization": budget.fraction,
        "block_size": layout.block_size,
        "max_num_batched_tokens": flags.max_num_batched_tokens,
        "max_num_seqs": flags.max_num_seqs,
        "enable_prefix_caching": flags.prefix_caching,
        "enforce_eager": options.enforce_eager,
        "defaults_from": flags.defaults.source,
        **({"disable_custom_all_reduce": True} if options.disable_custom_all_reduce else {}),
    } | _parallel_settings(inputs)


def _parallel_settings(inputs: SizingInputs) -> EngineSettings:
    """The DP / EP / DCP flags as `vllm serve` takes them, where they were asked
    (issue 21: engines/expert_parallel.py)."""
    flags, rank = inputs.engine.expert_parallel, inputs.facts.rank_weights
    out: EngineSettings = {}
    if inputs.parallel.data_parallel_size > 1 and (flags.asked or rank is not None):
        out["data_parallel_size"] = inputs.parallel.data_parallel_size
    if flags.enable_expert_parallel:
        out["enable_expert_parallel"] = True
        if rank is not None and rank.local_num_experts is not None:
            out["expert_parallel_size"] = rank.expert_parallel_size
            out["local_num_experts"] = rank.local_num_experts
    if flags.enable_eplb:
        out["enable_eplb"] = True
        out["num_redundant_experts"] = flags.num_redundant_experts
    if flags.decode_context_parallel_size > 1:
        out["decode_context_parallel_size"] = flags.decode_context_parallel_size
    if flags.all2all_backend is not None:
        out["all2all_backend"] = flags.all2all_backend
    return out
