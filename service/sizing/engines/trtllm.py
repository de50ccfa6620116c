"""TensorRT-LLM (PyTorch backend): a fraction of what is still free after weights and warm-up.

Source: tensorrt_llm/_torch/pyexecutor/_util.py `KvCacheCreator.configure_kv_cache_capacity`
(restated in ../shared/design/engine-memory.md section 3).

Hybrid models (read in TensorRT-LLM's repository history, milestones in calibration.py):
  Mamba / gated-delta-net hybrids (Nemotron-H from 0.20, Qwen3-Next from 1.2.0rc1) keep one
  conv + SSM state per request slot (max_batch_size slots) beside the paged KV pool; the
  state is allocated before the warm-up, so it is taken before free_gpu_memory_fraction.
  Variable sliding window (VSWA) pools exist only when KvCacheConfig.max_attention_window
  lists several windows; its default gives every layer max_seq_len (one pool).
Each release's behaviour, with the TensorRT-LLM file and function: docs/engines/trtllm.md.

`trtllm_capacity` is the whole path: the budget (`trtllm_budget`), then one pool
(`trtllm_report`), the window pools (`trtllm_window_pools`) or the Mamba hybrid's pools
(`trtllm_mamba_pools`). Short local names: m = max_model_len, tp = tensor_parallel_size,
tpb = tokens_per_block.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
    StateLayer,
    TokenLayer,
)
from ..model.dtypes import FloatDtype
from ..units import GiB, cdiv
from ..versions import parse_engine_version
from . import calibration
from .activation import forward_bytes_per_token
from .common import (
    BudgetLine,
    CacheGroup,
    CacheLayout,
    Capacity,
    Engine,
    EngineOptions,
    MemoryBudget,
    PoolReport,
    SizingInputs,
    given_pool_budget,
    single_group_layout,
)
from .kv import packed_mla, token_bytes_per_layer
from .unmodelled import refuse_unmodelled


def trtllm_budget(
    *,
    total_bytes: int,
    weights_per_gpu: int,
    activation_bytes: int,
    options: EngineOptions,
    state_bytes: int = 0,
) -> MemoryBudget:
    """`state_bytes`: Mamba state a hybrid allocates before the warm-up (part of the peak)."""
    if options.kv_pool_bytes is not None:
        return given_pool_budget(
            total_bytes=total_bytes,
            weights_per_gpu=weights_per_gpu,
            pool_bytes=options.kv_pool_bytes,
            fraction_name="free_gpu_memory_fraction",
            note="given",
        )
    fraction = options.free_gpu_memory_fraction or calibration.TRTLLM_DEFAULT_FREE_FRACTION
    peak = weights_per_gpu + activation_bytes + calibration.TRTLLM_NON_TORCH + state_bytes
    free = total_bytes - peak
    pool = int(free * fraction)
    state_lines = (
        (
            BudgetLine(
                "mamba_state",
                -state_bytes,
                "conv + SSM state of max_batch_size slots, allocated before the warm-up",
            ),
        )
        if state_bytes
        else ()
    )
    lines = (
        BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports it"),
        BudgetLine("weights", -weights_per_gpu, "model weights on this GPU"),
        *state_lines,
        BudgetLine("activation_peak", -activation_bytes, "warm-up peak (estimated)"),
        BudgetLine("non_torch", -calibration.TRTLLM_NON_TORCH, "context, NCCL, graphs (estimate)"),
        BudgetLine("free_after_warmup", free, "memory still free after warm-up"),
        BudgetLine("kv_cache_memory", pool, f"free_gpu_memory_fraction {fraction} x free"),
    )
    return MemoryBudget(
        total_bytes=total_bytes,
        fraction=fraction,
        fraction_name="free_gpu_memory_fraction",
        requested_bytes=free,
        weights_bytes=weights_per_gpu,
        activation_bytes=activation_bytes,
        non_torch_bytes=calibration.TRTLLM_NON_TORCH,
        cudagraph_bytes=0,
        pool_bytes=pool,
        pool_given=False,
        describe=lambda: lines,
    )


def trtllm_report(
    pool_bytes: int, bytes_per_token: int, tokens_per_block: int, max_model_len: int
) -> PoolReport:
    # KvCacheCreator: max_tokens = pool // kv_size_per_token; KVCacheManager
    # calculate_max_num_blocks then rounds the blocks up: ceil(max_tokens / tokens_per_block).
    tokens = max(0, pool_bytes) // bytes_per_token
    blocks = cdiv(tokens, tokens_per_block)
    per_request = cdiv(max_model_len, tokens_per_block)
    concurrency = blocks / per_request
    lines = (
        f"Estimated max memory in KV cache : {pool_bytes / (1 << 30):.2f} GiB",
        f"max_tokens={tokens}",
    )
    return PoolReport(blocks, tokens, concurrency, blocks // per_request, lambda: lines)


# --- releases ------------------------------------------------------------------------------


def parse_trtllm_version(text: str, field: str = "engine_version") -> calibration.TrtllmVersion:
    """Any PEP 440 release string -> (major, minor, patch, pre), as pip orders them.

    TensorRT-LLM ships behaviour in release candidates, so the rc number is part of the tuple:
    `1.1.0rc1` -> (1, 1, 0, 1); a final release sorts after every rc (`1.0.0` -> (1, 0, 0,
    TRTLLM_FINAL)); a post-release is its release; a dev build, or an alpha or beta, sorts
    before rc0 of its release (-1), and a dev build of an rc before that rc.
    """
    version = parse_engine_version(text, field, "TensorRT-LLM")
    major, minor, patch = (*version.release, 0, 0)[:3]
    if version.pre is None:
        pre = calibration.TRTLLM_FINAL if version.dev is None else -1
    elif version.pre[0] == "rc":
        pre = version.pre[1] - (1 if version.dev is not None and version.post is None else 0)
    else:
        pre = -1
    return major, minor, patch, pre


@dataclass(frozen=True, slots=True)
class TrtllmRelease:
    """The parts of TensorRT-LLM's hybrid-pool arithmetic one release has."""

    version: calibration.TrtllmVersion
    label: str

    def has(self, milestone: calibration.TrtllmVersion) -> bool:
        return self.version >= milestone

    @property
    def newer_than_modelled(self) -> bool:
        latest = parse_trtllm_version(calibration.LATEST_TRTLLM_VERSION)
        # 1.2.0.postN and later 1.2.x patch releases come from the same release branch.
        return self.version[:2] > latest[:2]


def trtllm_release(engine_version: str | None) -> TrtllmRelease:
    text = engine_version or calibration.LATEST_TRTLLM_VERSION
    return TrtllmRelease(parse_trtllm_version(text), text)


def _newer_note(release: TrtllmRelease, what: str, since: str) -> tuple[str, ...]:
    if not release.newer_than_modelled:
        return ()
    return (
        f"TensorRT-LLM {release.label} is newer than the newest release whose {what} kvplan "
        f"models ({calibration.LATEST_TRTLLM_VERSION}) and is sized as that release; {since}",
    )


MAMBA_SINCE_1_3 = (
    "1.3 moved the Mamba state into C++ (PR #10540), then into the KV pool itself "
    "(CppMambaHybridCacheManager, PR #12185: tokens = (pool - max_batch_size x state) // "
    "attention bytes) and onto KVCacheManagerV2 (PR #16598)"
)
VSWA_SINCE_1_3 = (
    "1.3 cuts the window pools in Python (calculate_max_num_blocks_for_vswa, blocks rounded "
    "down) after shrinking windows that do not fit (adjust_window_sizes_for_vswa)"
)


# --- Mamba / gated-delta-net hybrids -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrtllmStateSlot:
    """One request's recurrent state in one layer on one GPU, in elements."""

    conv_elements: int
    ssm_elements: int


NO_MAMBA1 = (
    "TensorRT-LLM's PyTorch backend has no Mamba-1 cache manager (Jamba, Falcon-Mamba); its "
    "MambaHybridCacheManager holds Mamba-2 and gated-delta-net state only"
)


def check_trtllm_head_sizes(arch: ModelArchitecture) -> None:
    """Refuse attention whose V head is narrower than its K head (MiMo-V2-Flash: 192 / 128).

    TensorRT-LLM's KVCacheManager keeps one head_dim for K and V. No release kvplan models has
    a MiMo-V2 model; the one port found (github:WeiHaocheng/TensorRT-LLM, a fork,
    tensorrt_llm/_torch/models/modeling_mimo_v2_flash.py MiMoV2FlashAttention) pads V to
    head_dim in the cache, which no release is known to ship: refused rather than sized.
    """
    for layer in _attention_layers(arch.layers):
        if isinstance(layer, MultiHeadLatentAttention) or layer.v_head_dim is None:
            continue
        if layer.v_head_dim != layer.head_dim:
            raise SizingError(
                "layer_schedule",
                f"K heads of {layer.head_dim} beside V heads of {layer.v_head_dim} "
                "(MiMo-V2): TensorRT-LLM's KV cache keeps one head size for K and V, and no "
                "TensorRT-LLM release kvplan models runs this architecture",
            )


def trtllm_state_slot(layer: StateLayer, tensor_parallel_size: int) -> TrtllmStateSlot:
    """_torch/pyexecutor/mamba_cache_manager.py `MambaCacheManager.__init__` (0.20 ... 1.2):
    conv_dim = head_dim x heads + 2 x groups x d_state, split by tp (no group replication;
    heads and conv_dim must divide); conv state (conv_dim / tp, d_conv - 1); SSM state
    (heads / tp, head_dim, d_state). Qwen3-Next passes (_util.py `_create_kv_cache_manager`)
    d_state = key head dim, heads = value heads, groups = key heads, head_dim = value head dim.
    """
    tp = tensor_parallel_size
    if isinstance(layer, Mamba1):
        raise SizingError("layer_schedule", NO_MAMBA1)
    if isinstance(layer, GatedDeltaNet):
        d_state, d_conv = layer.key_head_dim, layer.conv_kernel
        heads, groups, head_dim = layer.num_value_heads, layer.num_key_heads, layer.value_head_dim
    else:
        d_state, d_conv = layer.state_size, layer.conv_kernel
        heads, groups, head_dim = layer.num_heads, layer.n_groups, layer.head_dim
    conv_dim = head_dim * heads + 2 * groups * d_state
    if heads % tp or conv_dim % tp:
        raise SizingError(
            "tensor_parallel_size",
            f"TensorRT-LLM's MambaCacheManager needs heads ({heads}) and conv_dim ({conv_dim}) "
            f"divisible by tensor_parallel_size {tp}",
        )
    return TrtllmStateSlot(conv_dim // tp * (d_conv - 1), heads // tp * head_dim * d_state)


def _attention_layers(layers: Sequence[object]) -> list[TokenLayer]:
    return [
        g
        for g in layers
        if isinstance(
            g,
            FullAttention
            | SlidingWindowAttention
            | ChunkedLocalAttention
            | MultiHeadLatentAttention,
        )
    ]


def _state_layers(layers: Sequence[object]) -> list[StateLayer]:
    return [g for g in layers if isinstance(g, GatedDeltaNet | Mamba2 | Mamba1)]


def check_trtllm_hybrid(arch: ModelArchitecture, release: TrtllmRelease) -> None:
    """Raise for recurrent models the PyTorch backend of this release does not run."""
    state = _state_layers(arch.layers)
    if any(isinstance(g, Mamba1) for g in state):
        raise SizingError("layer_schedule", NO_MAMBA1)
    if not _attention_layers(arch.layers):
        raise SizingError(
            "layer_schedule",
            "TensorRT-LLM's PyTorch backend runs recurrent layers only in attention hybrids "
            "(Nemotron-H, Qwen3-Next: MambaHybridCacheManager); attention-free Mamba models "
            "ran in the TensorRT engine flow only",
        )
    if not release.has(calibration.TRTLLM_MAMBA_HYBRID):
        raise SizingError(
            "engine_version",
            f"TensorRT-LLM {release.label} has no Mamba hybrid in its PyTorch backend; "
            "Nemotron-H arrived in 0.20.0",
        )
    if any(isinstance(g, GatedDeltaNet) for g in state) and not release.has(calibration.TRTLLM_GDN):
        raise SizingError(
            "engine_version",
            f"TensorRT-LLM {release.label} does not run gated-delta-net models; Qwen3-Next "
            "arrived in 1.2.0rc1",
        )


def trtllm_state_bytes_per_slot(
    stage: ModelArchitecture,
    tensor_parallel_size: int,
    conv_element_bytes: int,
    ssm_element_bytes: int,
) -> tuple[int, int]:
    """(conv, ssm) bytes one request slot holds over the stage's recurrent layers."""
    conv = ssm = 0
    for layer in _state_layers(stage.layers):
        slot = trtllm_state_slot(layer, tensor_parallel_size)
        conv += slot.conv_elements * conv_element_bytes
        ssm += slot.ssm_elements * ssm_element_bytes
    return conv, ssm


def trtllm_state_dtypes(
    arch: ModelArchitecture, release: TrtllmRelease, options: EngineOptions
) -> tuple[int, int, FloatDtype]:
    """(conv bytes, SSM bytes, SSM dtype). _torch/pyexecutor/model_loader.py
    `validate_and_set_mamba_ssm_cache_dtype` (0.20 ... 1.2): KvCacheConfig.mamba_ssm_cache_dtype
    "auto" is the model's torch_dtype; the conv state is always the model dtype. Newer
    releases read the config's mamba_ssm_dtype first (resolve_ssm_cache_dtype)."""
    ssm = options.mamba_ssm_cache_dtype  # None: "auto" (EngineOptions)
    if ssm is None:
        ssm = (arch.state_dtype if release.newer_than_modelled else None) or arch.dtype
    return arch.dtype.element_bytes, ssm.element_bytes, ssm


def has_windowed_layers(arch: ModelArchitecture) -> bool:
    return any(
        isinstance(g, SlidingWindowAttention | ChunkedLocalAttention)
        for g, _ in arch.cache_layer_counts
    )


@dataclass(frozen=True, slots=True)
class TrtllmMambaPools:
    """One GPU's KV blocks and Mamba state slots as TensorRT-LLM cuts them."""

    pool_bytes: int  # KvCacheCreator's "Estimated max memory in KV cache" (after the fraction)
    slots: int  # max_batch_size: one conv + SSM state each
    conv_bytes_per_slot: int
    ssm_bytes_per_slot: int
    kv_size_per_token: int  # what KvCacheCreator divides the pool by
    attention_layers: int  # layers whose KV the blocks hold
    attention_bytes_per_token: int  # what one token of a block really stores
    max_tokens: int
    blocks: int
    blocks_per_request: int
    sequences: int
    concurrency: float
    problem: str | None
    notes: tuple[str, ...]
    describe: Callable[[], tuple[str, ...]] = field(compare=False, repr=False)

    @property
    def state_bytes(self) -> int:
        return self.slots * (self.conv_bytes_per_slot + self.ssm_bytes_per_slot)


@dataclass(frozen=True, slots=True)
class TrtllmKvSize:
    """What KvCacheCreator divides the KV budget by, and what the blocks really hold."""

    kv_size_per_token: int  # KvCacheCreator's divisor
    attention_layers: int  # the stage's layers whose KV the blocks hold
    attention_bytes_per_token: int  # what one token of a block stores over those layers
    notes: tuple[str, ...]


def trtllm_kv_size(
    release: TrtllmRelease,
    *,
    stage: ModelArchitecture,
    model: ModelArchitecture,
    kv_element_bytes: int,
    tensor_parallel_size: int,
) -> TrtllmKvSize:
    """kv_size_per_token: the attention layers' bytes per token (1.0.0rc3+, PR #5371) or,
    before, every hidden layer counted as an attention layer (resource_manager
    `get_cache_size_per_token` on num_hidden_layers); at least one layer either way. One layer's
    bytes come from the config's one head_dim and KV head count: the first attention layer's."""
    tp = tensor_parallel_size
    model_attention = _attention_layers(model.layers)
    per_layer = token_bytes_per_layer(model_attention[0], kv_element_bytes, tp)
    stage_attention = _attention_layers(stage.layers)
    notes: list[str] = []
    if release.has(calibration.TRTLLM_KV_SIZE_ATTENTION_ONLY):
        kv_size = per_layer * max(1, len(stage_attention))
    else:
        kv_size = per_layer * max(1, stage.num_layers)
        notes.append(
            f"TensorRT-LLM {release.label} divides the KV budget by every hidden layer's "
            f"attention bytes ({stage.num_layers} layers x {per_layer} B = {kv_size} B per "
            f"token) though only {len(stage_attention)} layers keep KV; the pool is "
            "under-used until 1.0.0rc3 (PR #5371)"
        )
    if len({token_bytes_per_layer(g, kv_element_bytes, tp) for g in model_attention}) > 1:
        notes.append(
            "attention layers of different geometry: TensorRT-LLM sizes max_tokens with the "
            "config's one head_dim and KV head count; kvplan uses the first attention layer's"
        )
    return TrtllmKvSize(
        kv_size_per_token=kv_size,
        attention_layers=len(stage_attention),
        attention_bytes_per_token=sum(
            token_bytes_per_layer(g, kv_element_bytes, tp) for g in stage_attention
        ),
        notes=tuple(notes),
    )


def trtllm_mamba_pools(
    release: TrtllmRelease,
    *,
    stage: ModelArchitecture,
    model: ModelArchitecture,
    pool_bytes: int,
    kv_element_bytes: int,
    conv_element_bytes: int,
    ssm_element_bytes: int,
    tensor_parallel_size: int,
    tokens_per_block: int,
    max_model_len: int,
    max_batch_size: int,
) -> TrtllmMambaPools:
    """KvCacheCreator + MambaHybridCacheManager for one pipeline stage (0.20 ... 1.2).

    max_tokens = pool // kv_size_per_token (`trtllm_kv_size`). KVCacheManager
    .calculate_max_num_blocks then rounds up: blocks = ceil(max_tokens / tokens_per_block).
    A request needs ceil(M / tokens_per_block) blocks and one of the max_batch_size state slots.
    """
    tpb = tokens_per_block
    size = trtllm_kv_size(
        release,
        stage=stage,
        model=model,
        kv_element_bytes=kv_element_bytes,
        tensor_parallel_size=tensor_parallel_size,
    )
    conv, ssm = trtllm_state_bytes_per_slot(
        stage, tensor_parallel_size, conv_element_bytes, ssm_element_bytes
    )
    pool = _mamba_blocks(
        pool_bytes,
        kv_size_per_token=size.kv_size_per_token,
        tokens_per_block=tpb,
        max_model_len=max_model_len,
        max_batch_size=max_batch_size,
    )
    log = _MambaPoolsLog(pool_bytes, size.kv_size_per_token, pool, tpb, max_batch_size, conv, ssm)
    return TrtllmMambaPools(
        pool_bytes=pool_bytes,
        slots=max_batch_size,
        conv_bytes_per_slot=conv,
        ssm_bytes_per_slot=ssm,
        kv_size_per_token=size.kv_size_per_token,
        attention_layers=size.attention_layers,
        attention_bytes_per_token=size.attention_bytes_per_token,
        max_tokens=pool.max_tokens,
        blocks=pool.blocks,
        blocks_per_request=pool.per_request,
        sequences=max(0, pool.sequences),
        concurrency=min(pool.blocks / pool.per_request, float(max_batch_size)),
        problem=pool.problem,
        notes=size.notes + _newer_note(release, "Mamba-state arithmetic", MAMBA_SINCE_1_3),
        describe=log.describe,
    )


@frozen
class _MambaBlocks:
    """One stage's KV blocks beside the Mamba state, and the sequences they hold."""

    max_tokens: int
    blocks: int
    per_request: int  # blocks one request of max_model_len needs
    sequences: int
    problem: str | None


def _mamba_blocks(
    pool_bytes: int,
    *,
    kv_size_per_token: int,
    tokens_per_block: int,
    max_model_len: int,
    max_batch_size: int,
) -> _MambaBlocks:
    """KvCacheCreator's max_tokens, KVCacheManager.calculate_max_num_blocks' blocks (rounded
    up), then the requests: each needs its blocks and one of the max_batch_size state slots."""
    tpb = tokens_per_block
    max_tokens = max(0, pool_bytes) // kv_size_per_token
    blocks = cdiv(max_tokens, tpb)
    per_request = cdiv(max_model_len, tpb)
    sequences = min(blocks // per_request, max_batch_size)
    problem = None
    if pool_bytes <= 0:
        problem = "no memory left for the KV cache after the weights, warm-up and Mamba state"
    elif sequences < 1:
        problem = (
            f"{blocks} blocks of {tpb} tokens cannot hold one sequence of "
            f"{max_model_len} tokens ({per_request} blocks)"
        )
    return _MambaBlocks(max_tokens, blocks, per_request, sequences, problem)


@frozen
class _MambaPoolsLog:
    """What TensorRT-LLM logs for one stage's KV and Mamba pools, written on demand."""

    pool_bytes: int
    kv_size_per_token: int
    pool: _MambaBlocks
    tokens_per_block: int
    slots: int  # max_batch_size
    conv_bytes_per_slot: int
    ssm_bytes_per_slot: int

    def describe(self) -> tuple[str, ...]:
        slots = self.slots
        return (
            f"Estimated max memory in KV cache : {self.pool_bytes / GiB:.2f} GiB",
            f"max_tokens={self.pool.max_tokens} (kv size per token {self.kv_size_per_token} B), "
            f"blocks={self.pool.blocks} of {self.tokens_per_block} tokens",
            # MambaCacheManager.__init__ (its GB is 2^30 bytes)
            f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, "
            f"conv_state size: {slots * self.conv_bytes_per_slot / GiB:.2f}GB, "
            f"ssm_state size: {slots * self.ssm_bytes_per_slot / GiB:.2f}GB",
        )


# --- variable sliding window (VSWA) --------------------------------------------------------

WINDOWED_DEFAULT_NOTE = (
    "TensorRT-LLM's PyTorch backend builds one KV pool per distinct entry of "
    "KvCacheConfig.max_attention_window, which defaults to max_seq_len for every layer (it "
    "does not read the model's sliding_window or attention_chunk_size): sliding-window and "
    "chunked layers hold the whole context. Pass max_attention_window (e.g. [128, 131072]) "
    "to size per-window pools as a deployment that sets it does"
)


def _f32(value: float) -> float:
    """Round to IEEE single precision, as C++ `float` arithmetic does."""
    rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    return rounded


@dataclass(frozen=True, slots=True)
class WindowPool:
    """The blocks TensorRT-LLM gives one attention window size on one GPU."""

    window: int
    layers: int
    bytes_per_token: int  # over the window's layers
    share: float
    tokens: int
    blocks: int
    blocks_per_request: int

    @property
    def sequences(self) -> int:
        return self.blocks // self.blocks_per_request


@dataclass(frozen=True, slots=True)
class TrtllmWindowPools:
    pools: tuple[WindowPool, ...]
    sequences: int
    concurrency: float
    notes: tuple[str, ...]
    describe: Callable[[], tuple[str, ...]] = field(compare=False, repr=False)


def trtllm_window_pools(
    release: TrtllmRelease,
    *,
    pool_bytes: int,
    layer_windows: Sequence[tuple[int, int]],
    tokens_per_block: int,
    max_model_len: int,
) -> TrtllmWindowPools:
    """Per-window KV pools for KvCacheConfig.max_attention_window (one entry per layer:
    (window, bytes one token costs that layer on this GPU)).

    resource_manager.py `KVCacheManager.__init__`: windows are clamped to max_seq_len; one
    distinct window is the standard pool (tokens = pool // bytes, blocks rounded up). Several
    go to C++ `BaseKVCacheManager::calculateMaxNumBlocks` (kvCacheManager.cpp), which shares
    the pool between windows (`trtllm_window_shares`). blocks_w = ceil(tokens_w / 32).
    A request of M tokens needs ceil(min(M, w) / tokens_per_block) blocks of window w
    (KVCacheManager::calculateMaxBlockRequirementsPerBeam); the window that runs out first
    sets the batch (getMaxCapacityBatchSize).
    """
    m, tpb = max_model_len, tokens_per_block
    groups: dict[int, list[int]] = {}
    for window, bytes_per_token in layer_windows:
        groups.setdefault(min(window, m), []).append(bytes_per_token)
    per_window = {w: sum(groups[w]) for w in sorted(groups)}
    notes: list[str] = list(_newer_note(release, "VSWA arithmetic", VSWA_SINCE_1_3))
    if len(per_window) > 1 and not release.has(calibration.TRTLLM_PYTORCH_VSWA):
        raise SizingError(
            "engine_version",
            f"TensorRT-LLM {release.label} has no variable-window KV pools in its PyTorch "
            "backend; they arrived in 1.0.0rc2 (PR #5151)",
        )
    shares = trtllm_window_shares(release, per_window, max(0, pool_bytes))
    notes += shares.notes
    pools = tuple(
        WindowPool(
            window=w,
            layers=len(groups[w]),
            bytes_per_token=per_window[w],
            share=shares.shares[w],
            tokens=shares.tokens[w],
            blocks=cdiv(shares.tokens[w], tpb),
            blocks_per_request=cdiv(min(m, w), tpb),
        )
        for w in per_window
    )
    if len(pools) > 1 and release.has(calibration.TRTLLM_VSWA_EQUAL_SHARES):
        notes.append(
            "from 1.2.0rc0 TensorRT-LLM writes sliding-window blocks linearly and releases "
            "out-of-window blocks as the window moves (PR #6768); kvplan charges a request "
            "ceil(min(M, window) / tokens_per_block) blocks per window, its steady state"
        )
    return TrtllmWindowPools(
        pools,
        sequences=min(p.sequences for p in pools),
        concurrency=min(p.blocks / p.blocks_per_request for p in pools),
        notes=tuple(notes),
        describe=partial(_window_log, pools),
    )


def _window_log(pools: Sequence[WindowPool]) -> tuple[str, ...]:
    """kvCacheManager.cpp: the blocks each window size gets (its spelling kept)."""
    return (
        "Blocks per window size:",
        *(
            f"[windowSize={p.window}] {{.primaryBlocks={p.blocks}, .secondayBlocks=0}}"
            for p in pools
        ),
    )


@dataclass(frozen=True, slots=True)
class WindowShares:
    """The share of the pool each window gets, and the tokens that share holds."""

    shares: dict[int, float]
    tokens: dict[int, int]
    notes: tuple[str, ...]


def trtllm_window_shares(
    release: TrtllmRelease, per_window: Mapping[int, int], pool_bytes: int
) -> WindowShares:
    """BaseKVCacheManager::calculateMaxNumBlocks (kvCacheManager.cpp), by release:
      1.0.0rc2 (PR #5151)  the C++ share came from free memory and every window was capped at
                           KvCacheCreator's max_tokens = pool // (all layers' bytes); kvplan
                           takes the cap (approximate).
      1.1.0rc2 (PR #5933)  the budget is the estimated KV memory (max_gpu_total_bytes), no cap;
                           share_w = (bytes_w / sum bytes) x w, normalised
                           (BlockManager::calculateWindowSizeToShare, float32).
      1.2.0rc0 (PR #7923)  every window gets the same share 1 / n (TRTLLM_WINDOW_SIZE_SHARES
                           overrides it), max_tokens ignored under VSWA.
    tokens_w = (uint64)(float32(pool x share_w) / bytes_w).
    """
    windows = sorted(per_window)
    total = sum(per_window.values())
    if len(windows) == 1:
        return WindowShares({windows[0]: 1.0}, {windows[0]: pool_bytes // total}, ())
    if not release.has(calibration.TRTLLM_VSWA_FROM_BUDGET):
        capped = pool_bytes // total
        return WindowShares(
            {w: per_window[w] / total for w in windows},
            dict.fromkeys(windows, capped),
            (
                f"TensorRT-LLM {release.label} split free memory between windows and capped each "
                f"at max_tokens = pool // {total} B; kvplan assumes the cap binds for every "
                "window (free memory at that point is not modelled)",
            ),
        )
    if release.has(calibration.TRTLLM_VSWA_EQUAL_SHARES):
        shares = {w: _f32(1.0 / len(windows)) for w in windows}
    else:
        # float weight = bytes_w / total; weight *= w; double sum; float share.
        contribution = {w: _f32(_f32(per_window[w] / total) * w) for w in windows}
        denominator = sum(contribution.values())
        shares = {w: _f32(contribution[w] / denominator) for w in windows}
    # uint64 x float is a float product; divided as double, truncated to uint64.
    tokens = {w: int(_f32(_f32(pool_bytes) * shares[w]) / per_window[w]) for w in windows}
    return WindowShares(shares, tokens, ())


# --- the pipeline ---------------------------------------------------------------------------


def trtllm_capacity(inputs: SizingInputs) -> Capacity:
    """One TensorRT-LLM instance: one KV pool, per-window pools, or a Mamba hybrid's pools."""
    arch, engine = inputs.arch, inputs.engine
    trtllm_release(engine.engine_version)  # what is not a version is refused on every path
    refuse_unmodelled(arch, "TensorRT-LLM")
    check_trtllm_head_sizes(arch)
    if arch.has_state_layers:
        return _mamba_capacity(inputs)
    warnings = inputs.warnings
    if has_windowed_layers(arch) and engine.max_attention_window is None:
        # resource_manager.py KVCacheManager: no max_attention_window -> [max_seq_len] for all.
        warnings += (WINDOWED_DEFAULT_NOTE,)
    per_token = forward_bytes_per_token(arch, inputs.parallel.tensor_parallel_size) or 0
    max_num_tokens = engine.max_num_batched_tokens or calibration.TRTLLM_MAX_NUM_TOKENS
    budget = trtllm_budget(
        total_bytes=inputs.gpu.memory_bytes,
        weights_per_gpu=inputs.facts.weights_bytes_per_gpu,
        activation_bytes=per_token * max_num_tokens,
        options=engine,
    )
    block = engine.block_size or calibration.TRTLLM_TOKENS_PER_BLOCK
    if engine.max_attention_window is not None:
        return _window_capacity(inputs, engine.max_attention_window, budget, block, max_num_tokens)
    max_model_len = inputs.workload.max_model_len
    cell = inputs.facts.kv_bytes_per_token_per_gpu
    report = trtllm_report(budget.pool_bytes, cell, block, max_model_len)
    fits = report.max_num_seqs >= 1
    reason = (
        f"{report.kv_cache_tokens} KV tokens cannot hold one sequence of {max_model_len} tokens"
    )
    return Capacity(
        engine=Engine.TRTLLM,
        engine_version=engine.engine_version,
        facts=inputs.facts,
        budget=budget,
        layout=single_group_layout(cell, block, max_model_len),
        report=report,
        engine_settings={
            "free_gpu_memory_fraction": budget.fraction,
            "tokens_per_block": block,
            "max_num_tokens": max_num_tokens,
        },
        warnings=warnings,
        fits=fits,
        reason=None if fits else reason,
    )


def _window_capacity(
    inputs: SizingInputs,
    windows: tuple[int, ...],
    budget: MemoryBudget,
    tokens_per_block: int,
    max_num_tokens: int,
) -> Capacity:
    """KvCacheConfig.max_attention_window given: one pool per distinct window (VSWA)."""
    max_model_len = inputs.workload.max_model_len
    best = _tightest_stage_windows(inputs, windows, budget.pool_bytes, tokens_per_block)
    # The pool that runs out first sets the batch; the planner reads its blocks.
    binding = min(best.pools, key=lambda p: p.sequences)
    largest = max(best.pools, key=lambda p: p.window)
    report = PoolReport(
        binding.blocks, largest.tokens, best.concurrency, best.sequences, best.describe
    )
    layout = CacheLayout(
        groups=tuple(
            CacheGroup(
                "full_attention" if p.window >= max_model_len else "sliding_attention",
                p.layers,
                tokens_per_block,
                tokens_per_block * p.bytes_per_token,
                p.blocks_per_request,
            )
            for p in best.pools
        ),
        bytes_per_block=tokens_per_block * binding.bytes_per_token,
        blocks_per_request=binding.blocks_per_request,
        block_size=tokens_per_block,
        padding_layers=0,
        notes=best.notes,
    )
    fits = best.sequences >= 1
    return Capacity(
        engine=Engine.TRTLLM,
        engine_version=inputs.engine.engine_version,
        facts=inputs.facts,
        budget=budget,
        layout=layout,
        report=report,
        engine_settings={
            "free_gpu_memory_fraction": budget.fraction,
            "tokens_per_block": tokens_per_block,
            "max_num_tokens": max_num_tokens,
            "max_attention_window": list(windows),
            "pools": {str(p.window): p.blocks for p in best.pools},
        },
        warnings=inputs.warnings + best.notes,
        fits=fits,
        reason=None
        if fits
        else (
            f"the window-{binding.window} pool's {binding.blocks} blocks cannot hold one "
            f"sequence of {max_model_len} tokens ({binding.blocks_per_request} blocks)"
        ),
    )


def _tightest_stage_windows(
    inputs: SizingInputs, windows: tuple[int, ...], pool_bytes: int, tokens_per_block: int
) -> TrtllmWindowPools:
    """Each stage's window pools; the stage that holds the fewest sequences is reported."""
    tp, kv_element_bytes = inputs.parallel.tensor_parallel_size, inputs.facts.kv_element_bytes
    packed = packed_mla(inputs.arch, inputs.workload.kv_cache_dtype)
    best = None
    offset = 0
    for stage in inputs.stages:
        # The window list is per decoder layer, repeated over the layers when shorter.
        layer_windows = [
            (
                windows[(offset + i) % len(windows)],
                token_bytes_per_layer(g, kv_element_bytes, tp, packed),
            )
            for i, g in enumerate(stage.layers)
            if isinstance(g, TokenLayer)
        ]
        offset += stage.num_layers
        if not layer_windows:
            continue
        pools = trtllm_window_pools(
            trtllm_release(inputs.engine.engine_version),
            pool_bytes=pool_bytes,
            layer_windows=layer_windows,
            tokens_per_block=tokens_per_block,
            max_model_len=inputs.workload.max_model_len,
        )
        if best is None or pools.sequences < best.sequences:
            best = pools
    if best is None:
        raise SizingError("max_attention_window", "the model has no attention layer to window")
    return best


def _mamba_capacity(inputs: SizingInputs) -> Capacity:
    """MambaHybridCacheManager: max_batch_size state slots taken before the fraction, then a
    paged KV pool for the attention layers (`trtllm_mamba_pools`)."""
    release = trtllm_release(inputs.engine.engine_version)
    check_trtllm_hybrid(inputs.arch, release)
    engine = inputs.engine
    max_num_tokens = engine.max_num_batched_tokens or calibration.TRTLLM_MAX_NUM_TOKENS
    block = engine.block_size or calibration.TRTLLM_TOKENS_PER_BLOCK
    slots = engine.max_num_seqs or calibration.TRTLLM_DEFAULT_MAX_BATCH_SIZE
    conv_bytes, ssm_bytes, ssm_name = trtllm_state_dtypes(inputs.arch, release, engine)
    budget, pools = _tightest_stage_mamba(
        inputs,
        release,
        max_num_tokens=max_num_tokens,
        tokens_per_block=block,
        slots=slots,
        conv_element_bytes=conv_bytes,
        ssm_element_bytes=ssm_bytes,
    )
    notes = pools.notes + ((WINDOWED_DEFAULT_NOTE,) if has_windowed_layers(inputs.arch) else ())
    if len(inputs.stages) > 1:
        notes += (
            "pipeline parallel: each stage holds its own layers' state and KV; TensorRT-LLM "
            "keeps the smallest max_tokens of all ranks and kvplan reports that stage",
        )
    return Capacity(
        engine=Engine.TRTLLM,
        engine_version=engine.engine_version,
        facts=inputs.facts,
        budget=budget,
        layout=_mamba_layout(pools, block),
        report=PoolReport(
            pools.blocks, pools.blocks * block, pools.concurrency, pools.sequences, pools.describe
        ),
        engine_settings={
            "engine_version": release.label,
            "free_gpu_memory_fraction": budget.fraction,
            "tokens_per_block": block,
            "max_num_tokens": max_num_tokens,
            "max_batch_size": slots,
            "max_num_seqs": slots,
            "mamba_ssm_cache_dtype": ssm_name,
            "mamba_state_bytes_per_request": pools.conv_bytes_per_slot + pools.ssm_bytes_per_slot,
            "kv_size_per_token": pools.kv_size_per_token,
        },
        warnings=inputs.warnings + notes,
        fits=pools.problem is None,
        reason=pools.problem,
    )


def _mamba_layout(pools: TrtllmMambaPools, tokens_per_block: int) -> CacheLayout:
    """MambaHybridCacheManager's KVCacheManager: one paged pool over the attention layers (the
    recurrent state sits in its own slots, outside the blocks)."""
    block_bytes = tokens_per_block * pools.attention_bytes_per_token
    return CacheLayout(
        groups=(
            CacheGroup(
                "full_attention",
                pools.attention_layers,
                tokens_per_block,
                block_bytes,
                pools.blocks_per_request,
            ),
        ),
        bytes_per_block=block_bytes,
        blocks_per_request=pools.blocks_per_request,
        block_size=tokens_per_block,
        padding_layers=0,
        notes=(),
    )


def _tightest_stage_mamba(
    inputs: SizingInputs,
    release: TrtllmRelease,
    *,
    max_num_tokens: int,
    tokens_per_block: int,
    slots: int,
    conv_element_bytes: int,
    ssm_element_bytes: int,
) -> tuple[MemoryBudget, TrtllmMambaPools]:
    """Each stage's budget and pools; the stage with the fewest max_tokens is reported."""
    tp = inputs.parallel.tensor_parallel_size
    activation = (forward_bytes_per_token(inputs.arch, tp) or 0) * max_num_tokens
    chosen = None
    for stage in inputs.stages:
        conv, ssm = trtllm_state_bytes_per_slot(stage, tp, conv_element_bytes, ssm_element_bytes)
        budget = trtllm_budget(
            total_bytes=inputs.gpu.memory_bytes,
            weights_per_gpu=inputs.facts.weights_bytes_per_gpu,
            activation_bytes=activation,
            options=inputs.engine,
            state_bytes=slots * (conv + ssm),
        )
        pools = trtllm_mamba_pools(
            release,
            stage=stage,
            model=inputs.arch,
            pool_bytes=budget.pool_bytes,
            kv_element_bytes=inputs.facts.kv_element_bytes,
            conv_element_bytes=conv_element_bytes,
            ssm_element_bytes=ssm_element_bytes,
            tensor_parallel_size=tp,
            tokens_per_block=tokens_per_block,
            max_model_len=inputs.workload.max_model_len,
            max_batch_size=slots,
        )
        # KVCacheManager.calculate_max_num_blocks: every rank takes the MIN of max_tokens.
        if chosen is None or pools.max_tokens < chosen[1].max_tokens:
            chosen = (budget, pools)
    assert chosen is not None
    return chosen
