"""vLLM: memory budget, KV-cache layout and the two log lines, version by version.

Sources (restated, not copied): vllm/v1/worker/gpu_worker.py (budget), vllm/v1/core/
kv_cache_utils.py (groups, blocks, report), vllm/v1/kv_cache_interface.py (page sizes and
per-request usage), vllm/engine/arg_utils.py (defaults); ../shared/design/engine-memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..architecture import (
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
from ..errors import SizingError
from ..kv import state_bytes_per_sequence, token_bytes_per_layer
from ..units import GiB, cdiv
from . import calibration
from .activation import forward_bytes_per_token, sampler_bytes
from .common import BudgetLine, CacheGroup, CacheLayout, EngineOptions, MemoryBudget, PoolReport

Version = tuple[int, int, int]


def parse_version(text: str | None, field: str = "engine_version") -> Version | None:
    if text is None:
        return None
    core = text.strip().lower().removeprefix("v").split("+")[0].split("rc")[0].split(".post")[0]
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise SizingError(field, f"not a version number like 0.10.1: {text!r}")
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return numbers[0], numbers[1], numbers[2]


@dataclass(frozen=True, slots=True)
class VllmBehaviour:
    """The parts of vLLM's arithmetic that changed between versions."""

    version: Version
    v1_engine: bool
    # Hybrid KV-cache manager (sliding/local/Mamba layers in their own groups), v0.10.0+.
    hybrid_allocator: bool
    # "GPU KV cache size" = blocks x block size (v1 up to the hybrid report fix), then
    # (blocks // groups) x min block size, then int(concurrency x max_model_len).
    tokens_report: str
    # CUDA-graph memory profiled and subtracted before sizing the pool (default since v0.21).
    cudagraph_in_budget: bool
    # Other processes and the CUDA context counted against the budget (before vllm PR #10511).
    non_torch_includes_context: bool
    default_utilization: float

    @property
    def label(self) -> str:
        return ".".join(str(n) for n in self.version)


def behaviour_for(version: Version) -> VllmBehaviour:
    v1 = version >= calibration.VLLM_V1_DEFAULT
    if version >= calibration.VLLM_TOKENS_FROM_CONCURRENCY:
        tokens_report = "concurrency"
    elif version >= calibration.VLLM_HYBRID_ALLOCATOR:
        tokens_report = "groups"
    else:
        tokens_report = "blocks"
    return VllmBehaviour(
        version=version,
        v1_engine=v1,
        hybrid_allocator=version >= calibration.VLLM_HYBRID_ALLOCATOR,
        tokens_report=tokens_report,
        cudagraph_in_budget=version >= calibration.VLLM_CUDAGRAPH_PROFILING_DEFAULT,
        non_torch_includes_context=version < calibration.VLLM_PER_INSTANCE_BUDGET,
        default_utilization=(
            calibration.VLLM_DEFAULT_UTILIZATION_NEW
            if version >= calibration.VLLM_UTILIZATION_092
            else calibration.VLLM_DEFAULT_UTILIZATION_OLD
        ),
    )


@dataclass(frozen=True, slots=True)
class BatchDefaults:
    max_num_batched_tokens: int
    max_num_seqs: int
    source: str


def batch_defaults(
    behaviour: VllmBehaviour, gpu_memory_bytes: int, gpu_name: str, max_model_len: int
) -> BatchDefaults:
    """`vllm serve` defaults for the scheduler budget, which also sizes the profile run."""
    if not behaviour.v1_engine:
        # V0 SchedulerConfig: 256 sequences; without chunked prefill the token budget is
        # max(max_model_len, 2048); chunked prefill turns on by itself above 32K context.
        if max_model_len > calibration.VLLM_V0_CHUNKED_PREFILL_ABOVE:
            return BatchDefaults(2048, 256, "V0: chunked prefill on above 32K -> 2048 tokens")
        return BatchDefaults(max(max_model_len, 2048), 256, "V0: max(max_model_len, 2048)")
    # V1 EngineArgs.get_batch_defaults: >= 70 GiB and not an A100 -> 8192 / 1024 for the
    # OpenAI server, else 2048 / 256.
    if gpu_memory_bytes >= 70 * GiB and "a100" not in gpu_name.lower():
        return BatchDefaults(8192, 1024, "vllm serve on a >= 70 GiB GPU (not A100)")
    return BatchDefaults(2048, 256, "vllm serve on a < 70 GiB GPU or an A100")


# --- layout -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spec:
    """One distinct per-layer cache spec, as vLLM groups them."""

    layer: Layer
    count: int
    block_size: int
    page_bytes: int
    per_token_bytes: int  # 0 for state layers


def _is_attention(layer: Layer) -> bool:
    return isinstance(
        layer,
        FullAttention | SlidingWindowAttention | ChunkedLocalAttention | MultiHeadLatentAttention,
    )


def _blocks_per_request(
    layer: Layer,
    block_size: int,
    max_model_len: int,
    max_num_batched_tokens: int,
    mamba_blocks: int,
) -> int:
    """Blocks one request of `max_model_len` tokens holds in one layer's table."""
    if isinstance(layer, SlidingWindowAttention):
        # SlidingWindowSpec.max_memory_usage_bytes: the window, the tokens of one scheduler
        # step, and one extra block for a window that straddles a boundary.
        tokens = min(layer.sliding_window - 1 + max_num_batched_tokens, max_model_len)
        return cdiv(tokens, block_size) + 1
    if isinstance(layer, ChunkedLocalAttention):
        # ChunkedLocalAttentionSpec.max_memory_usage_bytes.
        tokens = min(layer.attention_chunk_size + max_num_batched_tokens, max_model_len)
        return cdiv(tokens, block_size)
    if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
        return mamba_blocks
    return cdiv(max_model_len, block_size)


def vllm_layout(
    stage: ModelArchitecture,
    *,
    kv_bytes: int,
    conv_bytes: int,
    ssm_bytes: int,
    tensor_parallel_size: int,
    max_model_len: int,
    block_size: int | None,
    max_num_batched_tokens: int,
    enable_prefix_caching: bool,
    hybrid_allocator: bool,
) -> CacheLayout:
    """Cut one GPU's share of the model into vLLM KV-cache groups and pages."""
    tp = tensor_parallel_size
    notes: list[str] = []
    specs: list[_Spec] = []
    has_mla = any(
        isinstance(layer, MultiHeadLatentAttention) for layer, _ in stage.cache_layer_counts
    )
    base_block = block_size or (
        calibration.VLLM_MLA_BLOCK_SIZE if has_mla else calibration.VLLM_DEFAULT_BLOCK_SIZE
    )
    if block_size is None and has_mla:
        notes.append(
            f"MLA backends force a block size of {base_block} (FlashMLA); "
            "pass block_size to override"
        )
    layers = list(stage.cache_layer_counts)
    hybrid = len(layers) > 1
    if hybrid and not hybrid_allocator:
        # Without the hybrid manager, sliding and chunked layers are sized as full attention.
        converted: dict[TokenLayer | StateLayer, int] = {}
        for layer, count in layers:
            as_full = layer
            if isinstance(layer, SlidingWindowAttention | ChunkedLocalAttention):
                as_full = FullAttention(layer.num_kv_heads, layer.head_dim, layer.v_head_dim)
                notes.append(
                    "hybrid KV-cache manager off: sliding/chunked layers keep the whole context"
                )
            converted[as_full] = converted.get(as_full, 0) + count
        layers = list(converted.items())
        hybrid = len(layers) > 1
    for layer, count in layers:
        if _is_attention(layer):
            per_token = token_bytes_per_layer(layer, kv_bytes, tp)  # type: ignore[arg-type]
            specs.append(_Spec(layer, count, base_block, base_block * per_token, per_token))
        elif isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            state = state_bytes_per_sequence(layer, conv_bytes, ssm_bytes, tp)
            specs.append(_Spec(layer, count, base_block, state, 0))
    attention = [s for s in specs if s.per_token_bytes]
    states = [s for s in specs if not s.per_token_bytes]
    if states and attention:
        # HybridAttentionMambaModelConfig.verify_and_update_config: raise the attention block
        # size (in multiples of the kernel alignment) until an attention page covers the
        # largest state page, then pad the state pages to exactly that size.
        per_token = max(s.per_token_bytes for s in attention)
        state_page = max(s.page_bytes for s in states)
        align = calibration.VLLM_MAMBA_BLOCK_ALIGNMENT
        attn_block = align * cdiv(state_page, align * per_token)
        if block_size is not None and block_size * per_token >= state_page:
            attn_block = block_size
        attn_page = attn_block * per_token
        notes.append(
            f"attention block size raised to {attn_block} tokens so a page "
            f"({attn_page} B) covers the {state_page} B recurrent state; state pages padded"
        )
        specs = [
            _Spec(s.layer, s.count, attn_block, attn_block * s.per_token_bytes, s.per_token_bytes)
            if s.per_token_bytes
            else _Spec(s.layer, s.count, attn_block, attn_page, 0)
            for s in specs
        ]
    elif states:
        notes.append("recurrent state only: one page per state")
    # unify_kv_cache_spec_page_size: smaller pages take proportionally larger blocks.
    max_page = max(s.page_bytes for s in specs)
    unified: list[_Spec] = []
    for s in specs:
        if s.page_bytes == max_page:
            unified.append(s)
            continue
        if max_page % s.page_bytes:
            raise SizingError(
                "model.layer_specs",
                f"vLLM cannot unify page sizes {s.page_bytes} B and {max_page} B",
            )
        ratio = max_page // s.page_bytes
        unified.append(_Spec(s.layer, s.count, s.block_size * ratio, max_page, s.per_token_bytes))
    counts = [s.count for s in unified]
    if not hybrid:
        group_size = counts[0]
    else:
        # _get_kv_cache_groups_uniform_page_size: groups of the smallest layer count, or of
        # the largest when that is under 1.5x the smallest; each type is padded to a multiple.
        smallest, largest = min(counts), max(counts)
        group_size = largest if largest < 1.5 * smallest else smallest
    mamba_blocks = 2 if enable_prefix_caching else 1
    groups: list[CacheGroup] = []
    padding = 0
    for s in unified:
        n_groups = cdiv(s.count, group_size)
        padding += n_groups * group_size - s.count
        blocks = _blocks_per_request(
            s.layer, s.block_size, max_model_len, max_num_batched_tokens, mamba_blocks
        )
        remaining = s.count
        for _ in range(n_groups):
            in_group = min(group_size, remaining)
            remaining -= in_group
            groups.append(CacheGroup(s.layer.kind.value, in_group, s.block_size, max_page, blocks))
    if padding:
        notes.append(f"{padding} padding layers added so every group has {group_size} layers")
    attention_blocks = [
        g.block_size for g, s in zip(groups, unified, strict=False) if s.per_token_bytes
    ]
    return CacheLayout(
        groups=tuple(groups),
        bytes_per_block=max_page * group_size,
        blocks_per_request=sum(g.blocks_per_request for g in groups),
        block_size=min(attention_blocks) if attention_blocks else min(g.block_size for g in groups),
        padding_layers=padding,
        notes=tuple(dict.fromkeys(notes)),
    )


# --- budget -------------------------------------------------------------------------------


def vllm_budget(
    arch: ModelArchitecture,
    *,
    behaviour: VllmBehaviour,
    total_bytes: int,
    weights_per_gpu: int,
    tensor_parallel_size: int,
    options: EngineOptions,
    max_num_batched_tokens: int,
    max_num_seqs: int,
) -> MemoryBudget:
    util = options.gpu_memory_utilization or behaviour.default_utilization
    requested = int(total_bytes * util)
    lines = [
        BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports it"),
        BudgetLine("requested", requested, f"gpu_memory_utilization {util} x total"),
        BudgetLine("weights", -weights_per_gpu, "model weights on this GPU"),
    ]
    if options.kv_cache_memory_bytes is not None:
        pool = options.kv_cache_memory_bytes
        lines = [
            BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports it"),
            BudgetLine("kv_cache_memory", pool, "given (--kv-cache-memory-bytes or a log)"),
        ]
        return MemoryBudget(
            total_bytes,
            None,
            "gpu_memory_utilization",
            requested,
            weights_per_gpu,
            0,
            0,
            0,
            pool,
            True,
            tuple(lines),
        )
    per_token = forward_bytes_per_token(arch, tensor_parallel_size)
    forward = 0 if per_token is None else per_token * max_num_batched_tokens
    rows = min(max_num_seqs, max_num_batched_tokens)
    copies = (
        calibration.VLLM_V1_SAMPLER_FP32_COPIES
        if behaviour.v1_engine
        else calibration.VLLM_V0_SAMPLER_FP32_COPIES
    )
    sampler = sampler_bytes(arch.vocab_size, rows, copies)
    activation = max(forward, sampler)
    if per_token is None:
        activation_note = "not modelled: the model has no hidden_size; pass the pool if known"
    elif sampler > forward:
        activation_note = (
            f"sampler peak: {rows} rows x {arch.vocab_size} vocab x 4 B x {copies} copies "
            f"(larger than the forward pass, {forward} B)"
        )
    else:
        activation_note = (
            f"forward peak: {max_num_batched_tokens} tokens x {per_token} B "
            f"(profile run with max_num_batched_tokens)"
        )
    lines.append(BudgetLine("activation_peak", -activation, activation_note))
    if behaviour.non_torch_includes_context:
        non_torch = calibration.VLLM_NON_TORCH_WITH_CONTEXT
        nt_note = "CUDA context and other non-torch memory (counted before vllm PR #10511)"
    else:
        non_torch = calibration.VLLM_NON_TORCH_INCREASE
        if tensor_parallel_size > 1:
            non_torch += calibration.VLLM_NCCL_BUFFERS
        nt_note = "non-torch growth during profiling (NCCL, cuBLAS, attention workspaces)"
    lines.append(BudgetLine("non_torch", -non_torch, nt_note))
    cudagraph = 0
    if behaviour.cudagraph_in_budget and not options.enforce_eager:
        if options.cudagraph_memory_bytes is not None:
            cudagraph = options.cudagraph_memory_bytes
            cg_note = "CUDA-graph memory, given"
        else:
            cudagraph = calibration.cudagraph_estimate(per_token or 0, max_num_seqs)
            cg_note = "estimated CUDA-graph pool (profiled and subtracted since v0.21)"
        lines.append(BudgetLine("cudagraph", -cudagraph, cg_note))
    pool = requested - weights_per_gpu - activation - non_torch - cudagraph
    lines.append(BudgetLine("kv_cache_memory", pool, "what is left for the KV cache"))
    return MemoryBudget(
        total_bytes,
        util,
        "gpu_memory_utilization",
        requested,
        weights_per_gpu,
        activation,
        non_torch,
        cudagraph,
        pool,
        False,
        tuple(lines),
    )


# --- report -------------------------------------------------------------------------------


def vllm_report(
    num_blocks: int, layout: CacheLayout, max_model_len: int, behaviour: VllmBehaviour
) -> PoolReport:
    """The "GPU KV cache size" and "Maximum concurrency" lines, and whole sequences that fit."""
    per_request = layout.blocks_per_request
    concurrency = num_blocks / per_request
    if behaviour.tokens_report == "concurrency":
        tokens = int(concurrency * max_model_len)
    elif behaviour.tokens_report == "groups":
        tokens = num_blocks // len(layout.groups) * min(g.block_size for g in layout.groups)
    else:
        tokens = num_blocks * layout.block_size
    # BlockPool keeps block 0 as the null block, so one fewer is ever handed to a request.
    fits = max(0, num_blocks - 1) // per_request
    if behaviour.v1_engine:
        lines = (
            f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x",
        )
    else:
        v0_concurrency = num_blocks * layout.block_size / max_model_len
        concurrency = v0_concurrency
        lines = (
            f"# GPU blocks: {num_blocks}",
            f"Maximum concurrency for {max_model_len} tokens per request: {v0_concurrency:.2f}x",
        )
    return PoolReport(num_blocks, tokens, concurrency, fits, lines)
