"""Per-token and per-sequence cache bytes, layer by layer.

These are the model's own numbers, before any engine rounds them into blocks:
  full attention   2 x kv_heads x head_dim x bytes per token per layer (K and V; D_k + D_v)
  MLA              (kv_lora_rank + qk_rope_head_dim) x bytes, no factor 2, not split by TP
  sliding window   as full attention, for at most `sliding_window` tokens
  chunked local    as full attention, for at most `attention_chunk_size` tokens
  linear / Mamba   a fixed state per sequence, in the state dtype (not the KV-cache dtype)
  DeepSeek-V4      a window of latent rows, one compressed row (+ indexer key) per 4 or 128
                   tokens and a compressor state (model/hf_deepseek_v4.py); per token is
                   the compressed rows' bytes spread over the tokens they cover, rounded up

Short local names: tp = tensor_parallel_size; conv_b / ssm_b = bytes per element of the conv
and SSM states.
"""

from __future__ import annotations

from dataclasses import field
from functools import lru_cache

from ..errors import InvalidDtype
from ..frozen import frozen
from ..model.architecture import (
    AttentionLayer,
    ChunkedLocalAttention,
    CompressedSparseAttention,
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
from ..model.dtypes import PACKED_MLA_KV_DTYPE, FloatDtype, KvCacheDtype
from ..model.hf_deepseek_v4 import (
    Storage,
    compressor_state_bytes,
    indexer_key_bytes,
    row_bytes,
)


def kv_heads_per_gpu(num_kv_heads: int, tensor_parallel_size: int) -> int:
    # vLLM ModelConfig.get_num_kv_heads: max(1, total // tp); heads replicate when tp > total.
    return max(1, num_kv_heads // tensor_parallel_size)


# vLLM flashmla_sparse.py "FP8 with scale": the latent in fp8 with one fp32 scale per 128
# values, the rope part left in bf16 (512 + 16 + 128 = 656 B for DeepSeek-V3.2).
PACKED_MLA_SCALE_BLOCK = 128
PACKED_MLA_SCALE_BYTES = 4
PACKED_MLA_ROPE_BYTES = 2


def mla_latent_bytes(layer: MultiHeadLatentAttention, kv_element_bytes: int, packed: bool) -> int:
    """One token's latent in one MLA layer: plain elements, or the packed fp8_ds_mla row."""
    if packed:
        scales = layer.kv_lora_rank // PACKED_MLA_SCALE_BLOCK * PACKED_MLA_SCALE_BYTES
        return layer.kv_lora_rank + scales + layer.qk_rope_head_dim * PACKED_MLA_ROPE_BYTES
    return (layer.kv_lora_rank + layer.qk_rope_head_dim) * kv_element_bytes


def token_bytes_per_layer(
    layer: TokenLayer,
    kv_element_bytes: int,
    tensor_parallel_size: int = 1,
    packed_mla: bool = False,
) -> int:
    """Bytes one token adds to one layer's cache on one GPU."""
    if isinstance(layer, MultiHeadLatentAttention):
        # vllm/v1/kv_cache_interface.py MLAAttentionSpec: one latent "head", no K/V split,
        # identical on every TP rank.
        return mla_latent_bytes(layer, kv_element_bytes, packed_mla) + indexer_bytes(layer)
    v_head_dim = layer.head_dim if layer.v_head_dim is None else layer.v_head_dim
    # FullAttentionSpec page: block_size x kv_heads x (head_size_k + head_size_v) x dtype bytes.
    return kv_heads_per_gpu(layer.num_kv_heads, tensor_parallel_size) * (
        layer.head_dim + v_head_dim
    ) * kv_element_bytes + index_key_bytes(layer)


# vLLM models/minimax_m3 MiniMaxM3IndexerCache: a bf16 key (indexer_kv_dtype "auto" -> bf16).
INDEX_KEY_ELEMENT_BYTES = 2


def index_key_bytes(layer: AttentionLayer) -> int:
    """MiniMax-M3's per-token index key on a sparse layer: one key of indexer_head_dim bf16
    values (MiniMaxM3IndexerCache.get_kv_cache_spec: MLAAttentionSpec with one head, so one
    copy on every tensor-parallel rank), whatever the KV-cache dtype."""
    if not isinstance(layer, FullAttention) or layer.indexer_head_dim is None:
        return 0
    return layer.indexer_head_dim * INDEX_KEY_ELEMENT_BYTES


# vLLM deepseek_v2.py Indexer: keys stored as fp8 with one fp32 scale per 128 values.
INDEXER_QUANT_BLOCK = 128
INDEXER_SCALE_BYTES = 4


def indexer_bytes(layer: MultiHeadLatentAttention) -> int:
    """Bytes the sparse-attention indexer keeps per token per layer, whatever the KV dtype.

    vLLM DeepseekV32IndexerCache (0.11+): head_size = d + d // 128 x 4 of uint8, one head,
    not split by tensor parallelism; d = index_head_dim (128 for DeepSeek-V3.2 and GLM-5).
    """
    d = layer.indexer_head_dim
    if d is None:
        return 0
    return d + d // INDEXER_QUANT_BLOCK * INDEXER_SCALE_BYTES


def tokens_held(layer: TokenLayer, context_tokens: int) -> int:
    """Tokens a layer keeps for one sequence of `context_tokens`, before block rounding."""
    if isinstance(layer, SlidingWindowAttention):
        return min(context_tokens, layer.sliding_window)
    if isinstance(layer, ChunkedLocalAttention):
        return min(context_tokens, layer.attention_chunk_size)
    return context_tokens


@frozen
class StateShape:
    """Elements of the two state tensors of a recurrent layer, per sequence, per GPU."""

    conv_elements: int
    ssm_elements: int


def state_shape(layer: StateLayer, tensor_parallel_size: int = 1) -> StateShape:
    tp = tensor_parallel_size
    if isinstance(layer, GatedDeltaNet):
        # vLLM MambaStateShapeCalculator.gated_delta_net_state_shape:
        # conv (conv_kernel - 1, (2 x key_dim + value_dim) / tp); recurrent (v_heads / tp, d_k, d_v)
        key_dim = layer.num_key_heads * layer.key_head_dim
        value_dim = layer.num_value_heads * layer.value_head_dim
        conv = (layer.conv_kernel - 1) * ((2 * key_dim + value_dim) // tp)
        ssm = (layer.num_value_heads // tp) * layer.key_head_dim * layer.value_head_dim
        return StateShape(conv, ssm)
    if isinstance(layer, Mamba2):
        # vLLM MambaStateShapeCalculator.mamba2_state_shape: groups are replicated when
        # tp does not divide n_groups; conv (conv_kernel - 1, (d_inner + 2 x groups x d_state)/tp)
        # and ssm (heads / tp, head_dim, d_state).
        groups = layer.n_groups
        if groups % tp != 0:
            groups = groups * tp  # extra_groups_for_head_shards: one copy of the groups per rank
        intermediate = layer.num_heads * layer.head_dim
        conv_dim = intermediate // tp + 2 * (groups // tp) * layer.state_size
        conv = (layer.conv_kernel - 1) * conv_dim
        ssm = (layer.num_heads // tp) * layer.head_dim * layer.state_size
        return StateShape(conv, ssm)
    # vLLM MambaStateShapeCalculator.mamba1_state_shape: conv (d_inner / tp, d_conv - 1),
    # ssm (d_inner / tp, d_state).
    inner = layer.intermediate_size // tp
    return StateShape(inner * (layer.conv_kernel - 1), inner * layer.state_size)


def state_bytes_per_sequence(
    layer: StateLayer,
    conv_element_bytes: int,
    ssm_element_bytes: int,
    tensor_parallel_size: int = 1,
) -> int:
    shape = state_shape(layer, tensor_parallel_size)
    if isinstance(layer, LightningAttention):
        # vLLM MambaStateDtypeCalculator.linear_attention_state_dtype: the one state tensor is
        # in mamba_cache_dtype (auto: the model dtype, the conv states' dtype here), so
        # mamba_ssm_cache_dtype does not reach it.
        return shape.ssm_elements * conv_element_bytes
    return shape.conv_elements * conv_element_bytes + shape.ssm_elements * ssm_element_bytes


def state_dtype_bytes(
    arch: ModelArchitecture, ssm_cache_dtype: FloatDtype | None = None
) -> tuple[int, int]:
    """(conv, ssm) element sizes: the model dtype unless the model or engine says otherwise.

    The KV-cache dtype never applies here (vllm#55196: fp8 KV leaves Mamba state alone).
    """
    ssm = ssm_cache_dtype or arch.state_dtype or arch.dtype
    return arch.dtype.element_bytes, ssm.element_bytes


@frozen
class LayerBytes:
    """One line of the per-token / per-sequence breakdown."""

    kind: str
    layers: int
    bytes_per_token_per_layer: int
    tokens_held: int | None
    state_bytes_per_layer: int
    bytes_per_sequence: int
    # The factors, written out for people; built on demand (plans compute hundreds of lines).
    layer: TokenLayer | StateLayer | CompressedSparseAttention = field(repr=False, compare=False)
    kv_bytes: int = field(repr=False, compare=False)
    conv_bytes: int = field(repr=False, compare=False)
    ssm_bytes: int = field(repr=False, compare=False)
    tensor_parallel_size: int = field(repr=False, compare=False)
    packed_mla: bool = field(default=False, repr=False, compare=False)

    @property
    def formula(self) -> str:
        count, tp, layer = self.layers, self.tensor_parallel_size, self.layer
        if isinstance(layer, LightningAttention):
            heads = layer.num_value_heads // tp
            return (
                f"{count} layers x {heads} heads x {layer.key_head_dim} x "
                f"{layer.value_head_dim} state x {self.conv_bytes} B"
            )
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            shape = state_shape(layer, tp)
            return (
                f"{count} layers x ({shape.conv_elements} conv x {self.conv_bytes} B + "
                f"{shape.ssm_elements} state x {self.ssm_bytes} B)"
            )
        held = self.tokens_held
        if isinstance(layer, CompressedSparseAttention):
            if layer.compress_ratio == 1:
                return f"{count} layers x {self.bytes_per_token_per_layer} B x {held} window tokens"
            return (
                f"{count} layers x ({self.bytes_per_token_per_layer} B x {held} compressed rows "
                f"(one per {layer.compress_ratio} tokens) + {self.state_bytes_per_layer} B window "
                "and compressor state)"
            )
        if isinstance(layer, MultiHeadLatentAttention):
            index = indexer_bytes(layer)
            indexer = f" + {index} B indexer" if index else ""
            if self.packed_mla:
                rank = layer.kv_lora_rank
                latent = (
                    f"({rank} fp8 + {rank // PACKED_MLA_SCALE_BLOCK} x "
                    f"{PACKED_MLA_SCALE_BYTES} B scales + {layer.qk_rope_head_dim} x "
                    f"{PACKED_MLA_ROPE_BYTES} B rope)"
                )
            else:
                latent = f"({layer.kv_lora_rank} + {layer.qk_rope_head_dim}) x {self.kv_bytes} B"
            return f"{count} layers x ({latent}{indexer}) x {held} tokens"
        v = layer.head_dim if layer.v_head_dim is None else layer.v_head_dim
        heads = kv_heads_per_gpu(layer.num_kv_heads, tp)
        dims = f"2 x {layer.head_dim}" if v == layer.head_dim else f"({layer.head_dim} + {v})"
        index = index_key_bytes(layer)
        if index:
            return (
                f"{count} layers x ({dims} x {heads} kv heads x {self.kv_bytes} B + {index} B "
                f"index key) x {held} tokens"
            )
        return f"{count} layers x {dims} x {heads} kv heads x {self.kv_bytes} B x {held} tokens"


@lru_cache(maxsize=4096)
def kv_bytes_per_token(
    arch: ModelArchitecture, kv_cache_dtype: KvCacheDtype, tensor_parallel_size: int = 1
) -> int:
    """Bytes each token adds, summed over every layer that stores keys/values per token."""
    kv_bytes = kv_cache_dtype.bytes_at(arch.dtype)
    packed = packed_mla(arch, kv_cache_dtype)
    compressed = compressed_bytes_per_token(
        arch.compressed_layers, compressed_storage(arch, kv_cache_dtype)
    )
    return compressed + sum(
        count * token_bytes_per_layer(layer, kv_bytes, tensor_parallel_size, packed)
        for layer, count in arch.cache_layer_counts
        if not isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1)
    )


def compressed_storage(arch: ModelArchitecture, kv_cache_dtype: KvCacheDtype) -> Storage:
    """DeepSeek-V4's rows: vLLM's fp8_ds_mla with a 1-byte cache, 16-bit rows otherwise."""
    return "fp8_ds_mla" if kv_cache_dtype.bytes_at(arch.dtype) == 1 else "16-bit"


# DeepSeek-V4's ratios divide this many tokens (4 and 128): per-token bytes are worked over it.
_COMPRESSED_SPAN = 128


def compressed_bytes_per_token(
    layers: tuple[CompressedSparseAttention, ...], storage: Storage
) -> int:
    """The compressed rows (latent, and indexer key on C4 layers) every token adds on
    average, summed over DeepSeek-V4's layers and rounded up; the window and the compressor
    state are per sequence, not per token."""
    row = row_bytes(storage)
    per_span = 0
    for layer in layers:
        ratio = layer.compress_ratio
        if ratio == 1:
            continue
        key = indexer_key_bytes(layer.index_head_dim, storage) if ratio == 4 else 0
        per_span += (row + key) * (_COMPRESSED_SPAN // ratio)
    return -(-per_span // _COMPRESSED_SPAN)


def compressed_lines(
    layers: tuple[CompressedSparseAttention, ...], storage: Storage, context_tokens: int
) -> tuple[LayerBytes, ...]:
    """One sequence's DeepSeek-V4 cache, one line per ratio (C4, C128, window only): rows
    held per layer and the window plus compressor state each layer keeps."""
    row = row_bytes(storage)
    lines: list[LayerBytes] = []
    for ratio in (4, 128, 1):
        same = [layer for layer in layers if layer.compress_ratio == ratio]
        if not same:
            continue
        layer, count = same[0], len(same)
        window = min(context_tokens, layer.sliding_window)
        if ratio == 1:
            lines.append(
                LayerBytes(
                    f"{layer.kind.value} (window only)",
                    count,
                    row,
                    window,
                    0,
                    count * row * window,
                    layer,
                    row,
                    0,
                    0,
                    1,
                )
            )
            continue
        key = indexer_key_bytes(layer.index_head_dim, storage) if ratio == 4 else 0
        held = context_tokens // ratio
        state = window * row + compressor_state_bytes(layer, context_tokens)
        lines.append(
            LayerBytes(
                f"{layer.kind.value} (C{ratio})",
                count,
                row + key,
                held,
                state,
                count * ((row + key) * held + state),
                layer,
                row,
                0,
                0,
                1,
            )
        )
    return tuple(lines)


def packed_mla(arch: ModelArchitecture, kv_cache_dtype: KvCacheDtype) -> bool:
    """Whether the cache is DeepSeek's packed fp8_ds_mla rows; refused for other models.
    DeepSeek-V4's own fp8_ds_mla rows (584 B) are its layers' (`compressed_storage`)."""
    if not kv_cache_dtype.packed_mla or arch.has_compressed_attention:
        return False
    if not arch.has_sparse_mla or any(
        not isinstance(layer, MultiHeadLatentAttention)
        for layer, _ in arch.cache_layer_counts
        if not isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1)
    ):
        raise InvalidDtype(
            "kv_cache_dtype",
            f"{PACKED_MLA_KV_DTYPE} is the packed cache of DeepSeek sparse-attention MLA models "
            "(DeepSeek-V3.2, GLM-5); this model's attention is not that: use fp8",
        )
    return True


def sequence_breakdown(
    arch: ModelArchitecture,
    kv_cache_dtype: KvCacheDtype,
    context_tokens: int,
    tensor_parallel_size: int = 1,
    ssm_cache_dtype: FloatDtype | None = None,
) -> tuple[LayerBytes, ...]:
    """What one sequence of `context_tokens` holds, per layer geometry: each geometry's bytes
    per token (`_per_layer_bytes`) times the tokens it holds, or its fixed state."""
    lines: list[LayerBytes] = []
    for line in _per_layer_bytes(arch, kv_cache_dtype, tensor_parallel_size, ssm_cache_dtype):
        layer, count, per_token = line.layer, line.layers, line.bytes_per_token_per_layer
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1 | CompressedSparseAttention):
            lines.append(line)  # the same state at any context (no compressed line is here)
            continue
        held = tokens_held(layer, context_tokens)
        lines.append(
            LayerBytes(
                line.kind,
                count,
                per_token,
                held,
                0,
                count * per_token * held,
                layer,
                line.kv_bytes,
                line.conv_bytes,
                line.ssm_bytes,
                line.tensor_parallel_size,
                line.packed_mla,
            )
        )
    layers = arch.compressed_layers
    if not layers:  # every model but DeepSeek-V4: no compressed line to add
        return tuple(lines)
    return tuple(lines) + compressed_lines(
        layers, compressed_storage(arch, kv_cache_dtype), context_tokens
    )


# Memoised without the context: every new max_model_len of one model and layout reuses it.
@lru_cache(maxsize=4096)
def _per_layer_bytes(
    arch: ModelArchitecture,
    kv_cache_dtype: KvCacheDtype,
    tensor_parallel_size: int,
    ssm_cache_dtype: FloatDtype | None,
) -> tuple[LayerBytes, ...]:
    """Each layer geometry's bytes per token, or its state per sequence; the token lines hold
    0 tokens until `sequence_breakdown` places a sequence in them."""
    kv_bytes = kv_cache_dtype.bytes_at(arch.dtype)
    packed = packed_mla(arch, kv_cache_dtype)
    conv_b, ssm_b = state_dtype_bytes(arch, ssm_cache_dtype)
    tp = tensor_parallel_size
    lines: list[LayerBytes] = []
    for layer, count in arch.cache_layer_counts:
        factors = (layer, kv_bytes, conv_b, ssm_b, tp, packed)
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            state = state_bytes_per_sequence(layer, conv_b, ssm_b, tp)
            lines.append(
                LayerBytes(layer.kind.value, count, 0, None, state, count * state, *factors)
            )
            continue
        per_token = token_bytes_per_layer(layer, kv_bytes, tp, packed)
        lines.append(LayerBytes(layer.kind.value, count, per_token, 0, 0, 0, *factors))
    return tuple(lines)


def kv_bytes_per_sequence(
    arch: ModelArchitecture,
    kv_cache_dtype: KvCacheDtype,
    context_tokens: int,
    tensor_parallel_size: int = 1,
    ssm_cache_dtype: FloatDtype | None = None,
) -> int:
    """The model's own state for one sequence: windows capped, recurrent state fixed."""
    return sum(
        line.bytes_per_sequence
        for line in sequence_breakdown(
            arch, kv_cache_dtype, context_tokens, tensor_parallel_size, ssm_cache_dtype
        )
    )
