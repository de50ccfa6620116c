"""A model as the KV cache sees it: an ordered schedule of layers, each of a known kind.

A model is not one formula. Each layer kind keeps a different kind of per-sequence state:
attention layers keep keys and values per token (all of them, a window, or a chunk), MLA keeps
one compressed latent per token, and linear-attention / Mamba layers keep a fixed-size state.
Unknown kinds are rejected (`UnknownLayerKind`), never sized as full attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import ClassVar, TypeAlias

from ..errors import SizingError, UnknownLayerKind
from .dtypes import (
    FloatDtype,
    WeightFormat,
    normalize_checkpoint_kv_cache,
    parse_float_dtype,
    parse_weight_format,
)


class LayerKind(StrEnum):
    FULL_ATTENTION = "full_attention"
    SLIDING_ATTENTION = "sliding_attention"
    CHUNKED_ATTENTION = "chunked_attention"
    MLA = "mla"
    LINEAR_ATTENTION = "linear_attention"
    KDA = "kda"
    LIGHTNING_ATTENTION = "lightning_attention"
    MAMBA2 = "mamba2"
    MAMBA = "mamba"
    SHORT_CONV = "short_conv"
    COMPRESSED_SPARSE = "compressed_sparse_attention"
    NO_CACHE = "no_cache"


def _positive(field_name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SizingError(field_name, f"must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class FullAttention:
    """MHA / GQA / MQA: K and V for every token of the context."""

    kind: ClassVar[LayerKind] = LayerKind.FULL_ATTENTION
    num_kv_heads: int
    head_dim: int
    v_head_dim: int | None = None
    # MiniMax-M3 sparse attention: the layer's indexer keeps one bf16 index key of this many
    # elements per token beside K and V (vLLM models/minimax_m3 MiniMaxM3IndexerCache).
    indexer_head_dim: int | None = None

    def __post_init__(self) -> None:
        _positive("num_kv_heads", self.num_kv_heads)
        _positive("head_dim", self.head_dim)
        if self.v_head_dim is not None:
            _positive("v_head_dim", self.v_head_dim)
        if self.indexer_head_dim is not None:
            _positive("indexer_head_dim", self.indexer_head_dim)


@dataclass(frozen=True, slots=True)
class SlidingWindowAttention:
    """Attention over the last `sliding_window` tokens (Mistral v0.1, Gemma 2/3, gpt-oss)."""

    kind: ClassVar[LayerKind] = LayerKind.SLIDING_ATTENTION
    num_kv_heads: int
    head_dim: int
    sliding_window: int
    v_head_dim: int | None = None

    def __post_init__(self) -> None:
        _positive("num_kv_heads", self.num_kv_heads)
        _positive("head_dim", self.head_dim)
        _positive("sliding_window", self.sliding_window)
        if self.v_head_dim is not None:
            _positive("v_head_dim", self.v_head_dim)


@dataclass(frozen=True, slots=True)
class ChunkedLocalAttention:
    """Attention inside fixed chunks of `attention_chunk_size` tokens (Llama 4)."""

    kind: ClassVar[LayerKind] = LayerKind.CHUNKED_ATTENTION
    num_kv_heads: int
    head_dim: int
    attention_chunk_size: int
    v_head_dim: int | None = None

    def __post_init__(self) -> None:
        _positive("num_kv_heads", self.num_kv_heads)
        _positive("head_dim", self.head_dim)
        _positive("attention_chunk_size", self.attention_chunk_size)
        if self.v_head_dim is not None:
            _positive("v_head_dim", self.v_head_dim)


@dataclass(frozen=True, slots=True)
class MultiHeadLatentAttention:
    """MLA (DeepSeek V2/V3/R1, Kimi K2): one latent of kv_lora_rank + rope dims per token."""

    kind: ClassVar[LayerKind] = LayerKind.MLA
    kv_lora_rank: int
    qk_rope_head_dim: int
    # DeepSeek sparse attention (V3.2, GLM-5): the lightning indexer keeps its own key per token.
    indexer_head_dim: int | None = None

    def __post_init__(self) -> None:
        _positive("kv_lora_rank", self.kv_lora_rank)
        _positive("qk_rope_head_dim", self.qk_rope_head_dim)
        if self.indexer_head_dim is not None:
            _positive("indexer_head_dim", self.indexer_head_dim)


@dataclass(frozen=True, slots=True)
class GatedDeltaNet:
    """Linear attention (Qwen3-Next, Qwen3.5/3.6): a conv state plus a recurrent matrix state."""

    kind: ClassVar[LayerKind] = LayerKind.LINEAR_ATTENTION
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    def __post_init__(self) -> None:
        _positive("num_key_heads", self.num_key_heads)
        _positive("num_value_heads", self.num_value_heads)
        _positive("key_head_dim", self.key_head_dim)
        _positive("value_head_dim", self.value_head_dim)
        _positive("conv_kernel", self.conv_kernel)


@dataclass(frozen=True, slots=True)
class KimiDeltaAttention(GatedDeltaNet):
    """Kimi Delta Attention (Kimi-Linear, Kimi-K3): a Gated DeltaNet state, kept apart because
    engines treat it apart (vLLM `MambaStateShapeCalculator.kda_state_shape`: q/k/v convs of
    (conv_kernel - 1) x (2 x key_dim + value_dim) / tp, recurrent (heads / tp, d, d); the
    recurrent state in float32 unless the release takes `mamba_ssm_cache_dtype`)."""

    kind: ClassVar[LayerKind] = LayerKind.KDA


@dataclass(frozen=True, slots=True)
class LightningAttention(GatedDeltaNet):
    """MiniMax lightning attention (MiniMax-Text-01, MiniMax-M1): one (heads, d, d) state per
    sequence and no conv state. vLLM 0.10.2-0.23.0 treats it as a Mamba-like layer
    (MiniMaxText01LinearAttention is a MambaBase with mamba_type "linear_attention": a MambaSpec
    of `MambaStateShapeCalculator.linear_attention_state_shape` = (num_heads / tp, head_dim,
    head_dim)), which is Gated DeltaNet's recurrent state with query/key and value heads alike
    and a conv kernel of 1 (no conv window). The state is in `mamba_cache_dtype` (`auto`: the
    model dtype; `linear_attention_state_dtype`), never `mamba_ssm_cache_dtype`: kv.py
    `state_bytes_per_sequence` prices it so."""

    kind: ClassVar[LayerKind] = LayerKind.LIGHTNING_ATTENTION
    conv_kernel: int = field(default=1, kw_only=True)

    def __post_init__(self) -> None:
        GatedDeltaNet.__post_init__(self)
        if self.conv_kernel != 1:
            raise SizingError("conv_kernel", "lightning attention keeps no conv state (1)")
        if self.num_key_heads != self.num_value_heads:
            raise SizingError("num_value_heads", "lightning attention has one head count")
        if self.key_head_dim != self.value_head_dim:
            raise SizingError("value_head_dim", "a lightning state is head_dim x head_dim")

    @classmethod
    def of(cls, num_heads: int, head_dim: int) -> LightningAttention:
        return cls(
            num_key_heads=num_heads,
            num_value_heads=num_heads,
            key_head_dim=head_dim,
            value_head_dim=head_dim,
        )


@dataclass(frozen=True, slots=True)
class Mamba2:
    """Mamba-2 mixer (Nemotron-H, Granite 4.0-H, Falcon-H1)."""

    kind: ClassVar[LayerKind] = LayerKind.MAMBA2
    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    conv_kernel: int

    def __post_init__(self) -> None:
        _positive("num_heads", self.num_heads)
        _positive("head_dim", self.head_dim)
        _positive("state_size", self.state_size)
        _positive("n_groups", self.n_groups)
        _positive("conv_kernel", self.conv_kernel)


@dataclass(frozen=True, slots=True)
class Mamba1:
    """Mamba-1 mixer (Jamba): d_inner channels, each with a d_state state and a conv window."""

    kind: ClassVar[LayerKind] = LayerKind.MAMBA
    intermediate_size: int
    state_size: int
    conv_kernel: int

    def __post_init__(self) -> None:
        _positive("intermediate_size", self.intermediate_size)
        _positive("state_size", self.state_size)
        _positive("conv_kernel", self.conv_kernel)


@dataclass(frozen=True, slots=True)
class ShortConv(Mamba1):
    """LFM2's gated short convolution: a conv state and no SSM state.

    vLLM 0.33.0 `MambaStateShapeCalculator.short_conv_state_shape` (layers/mamba/mamba_utils.py):
    one tensor of (conv_kernel - 1) x intermediate_size / tp per sequence, where LFM2 passes
    `conv_dim` as intermediate_size and `conv_L_cache` as conv_kernel (models/lfm2.py
    `Lfm2ForCausalLM.get_mamba_state_shape_from_config`). Kept as a Mamba-1 layer with no SSM
    state (state_size 0), so every path that sizes a conv state sizes it; kept apart because
    kvplan models only vLLM's pool for it.
    """

    kind: ClassVar[LayerKind] = LayerKind.SHORT_CONV
    state_size: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        _positive("intermediate_size", self.intermediate_size)
        _positive("conv_kernel", self.conv_kernel)
        if self.state_size != 0:
            raise SizingError("state_size", "a short convolution keeps no SSM state")


# vLLM models/deepseek_v4 (0.20.0+) sparse_swa.py `_layer_type_for`: window only, C4, C128.
COMPRESS_RATIOS = frozenset({1, 4, 128})


@dataclass(frozen=True, slots=True)
class CompressedSparseAttention:
    """A DeepSeek-V4 layer (hf_deepseek_v4.py): a `sliding_window` of latent rows on every
    layer, and one compressed latent per `compress_ratio` tokens (4: with a lightning-indexer
    key of `index_head_dim`; 128: without), or the window only (ratio 1). Its bytes are not
    per-token rows, so no engine's generic layout reads it: vLLM's DeepSeek-V4 pool does
    (engines/vllm_deepseek_v4.py), and the other engines refuse it by name."""

    kind: ClassVar[LayerKind] = LayerKind.COMPRESSED_SPARSE
    compress_ratio: int
    sliding_window: int
    index_head_dim: int

    def __post_init__(self) -> None:
        if self.compress_ratio not in COMPRESS_RATIOS:
            raise UnknownLayerKind(
                "compress_ratio",
                f"{self.compress_ratio}: DeepSeek-V4 layers compress by 4 or 128, or keep only "
                "the window (1)",
            )
        _positive("sliding_window", self.sliding_window)
        _positive("index_head_dim", self.index_head_dim)


@dataclass(frozen=True, slots=True)
class NoCache:
    """A block that keeps no per-sequence state (Nemotron-H MLP / MoE blocks)."""

    kind: ClassVar[LayerKind] = LayerKind.NO_CACHE


AttentionLayer: TypeAlias = FullAttention | SlidingWindowAttention | ChunkedLocalAttention
TokenLayer: TypeAlias = AttentionLayer | MultiHeadLatentAttention
StateLayer: TypeAlias = GatedDeltaNet | Mamba2 | Mamba1
Layer: TypeAlias = TokenLayer | StateLayer | NoCache | CompressedSparseAttention

LAYER_CLASSES: dict[LayerKind, type[Layer]] = {
    LayerKind.FULL_ATTENTION: FullAttention,
    LayerKind.SLIDING_ATTENTION: SlidingWindowAttention,
    LayerKind.CHUNKED_ATTENTION: ChunkedLocalAttention,
    LayerKind.MLA: MultiHeadLatentAttention,
    LayerKind.LINEAR_ATTENTION: GatedDeltaNet,
    LayerKind.KDA: KimiDeltaAttention,
    LayerKind.LIGHTNING_ATTENTION: LightningAttention,
    LayerKind.MAMBA2: Mamba2,
    LayerKind.MAMBA: Mamba1,
    LayerKind.SHORT_CONV: ShortConv,
    LayerKind.COMPRESSED_SPARSE: CompressedSparseAttention,
    LayerKind.NO_CACHE: NoCache,
}


def parse_layer_kind(name: str, field_name: str = "layer_schedule") -> LayerKind:
    try:
        return LayerKind(name)
    except ValueError:
        accepted = ", ".join(k.value for k in LayerKind)
        raise UnknownLayerKind(
            field_name, f"unknown layer kind {name!r}; kvplan sizes only: {accepted}"
        ) from None


@dataclass(frozen=True, slots=True)
class EncoderGeometry:
    """A vision tower as vLLM's encoder profile sees it (issue 21: multimodal encoders).

    One dummy item of the largest size (`get_image_size_with_most_features`): the pixel values
    the processor hands the tower (`pixel_elements`, in the model dtype), the patches the tower
    runs over (`patches`), the embeddings it returns into the language model's width
    (`tokens` x `output_width`), and the tower's own widths for its forward pass. `source`
    names the vLLM model file whose processor info this follows.
    """

    modality: str
    tokens: int
    output_width: int
    pixel_elements: int
    patches: int
    hidden_size: int
    intermediate_size: int
    source: str


@dataclass(frozen=True, slots=True)
class MixtureOfExperts:
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int = 0
    # Layers whose MLP is the routed experts (DeepSeek-V3: 61 - first_k_dense_replace 3 = 58);
    # None = not given. Lets a catalog model that carries no config.json price its experts'
    # share (`ModelArchitecture.routed_experts`) for expert parallelism.
    num_moe_layers: int | None = None


@dataclass(frozen=True, slots=True)
class RoutedExperts:
    """The routed experts' share of the served weights: every MoE layer, every expert (what
    expert parallelism shards over its ranks; engines/expert_parallel.py)."""

    parameters: int
    bytes: int


@dataclass(frozen=True, slots=True)
class WeightSplit:
    """The served weights by where a pipeline stage holds them, in parameters and in checkpoint
    bytes (each a `(parameters, bytes)` pair), read from a config's tensors.

    vLLM models/llama.py `LlamaModel.__init__` / `LlamaForCausalLM.__init__` (and every model
    built the same way): `embed_tokens` on the first rank, and on the last too when
    `tie_word_embeddings` and there are several ranks (the last rank's lm_head is tied to it);
    the decoder layers from `make_layers` (each rank builds the layers `get_pp_indices` gives
    it, PPMissingLayer for the others); `norm` and `lm_head` only on the last rank.
    """

    embedding: tuple[int, int]
    head: tuple[int, int]  # lm_head (when untied) and the final norm
    layers: tuple[tuple[int, int], ...]  # each decoder layer, in model order
    tied: bool


@dataclass(frozen=True, slots=True)
class AttentionShares:
    """The served weights SGLang cuts by its attention-TP group under DP attention
    (engines/sglang_dp.py): attention (every layer's attention projections and norms of
    that class), the input embedding, and the LM head (placed there only with
    enable_dp_lm_head). Each as (parameters, checkpoint bytes)."""

    attention: RoutedExperts
    embedding: RoutedExperts
    lm_head: RoutedExperts


@dataclass(frozen=True)
class ModelArchitecture:
    """Everything about a model that decides its memory: the layer schedule and the weights."""

    layers: tuple[Layer, ...]
    num_attention_heads: int
    # Parsed once here from a name (`torch.bfloat16`, `bf16`), typed from then on.
    dtype: FloatDtype = FloatDtype.BFLOAT16
    state_dtype: FloatDtype | None = None
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    num_parameters: int | None = None
    weight_bytes: int | None = None
    weight_format: WeightFormat = WeightFormat.BFLOAT16
    max_position_embeddings: int | None = None
    # The longest max_model_len the engine starts with, where a config.json gave more than
    # max_position_embeddings says (rope scaling, other length keys: context_limit.py
    # derived_max_model_len); None = max_position_embeddings is the limit.
    derived_max_model_len: int | None = None
    # The same for SGLang, which derives its context length its own way
    # (context_limit.py sglang_context_len); None = max_model_len_limit.
    sglang_context_len: int | None = None
    moe: MixtureOfExperts | None = None
    # The KV cache the checkpoint's quantization config declares (dtypes.CHECKPOINT_KV_CACHES),
    # which an engine may take for --kv-cache-dtype auto (engines/vllm.py vllm_kv_cache_dtype).
    checkpoint_kv_cache: str | None = None
    name: str = field(default="", compare=False)
    # When the weights were to come from a config.json and could not: the (field, reason) of
    # the SizingError that stopped the count, for the answer that needs the weights to name.
    weights_unknown: tuple[str, str] | None = field(default=None, compare=False)
    # What the answer must say about how the config was read (a model_type with no reader of
    # its own, read as a plain decoder: config_guard.plain_reading_note).
    config_note: str | None = None
    # issue 21: expert parallelism. The routed experts' parameters and checkpoint bytes, read
    # from the config's tensors (hf_config.py); None = not known (see `routed_experts`).
    routed_experts_known: RoutedExperts | None = None
    # issue 21: speculative decoding. The multi-token-prediction layers the checkpoint holds
    # beside num_hidden_layers (config.json num_nextn_predict_layers), which vLLM loads only as
    # a draft (--speculative-config '{"method": "mtp"}'), and the bytes of theirs the drafter
    # keeps (its embeddings and head are the target's: engines/speculative.py).
    num_nextn_predict_layers: int = 0
    mtp_weight_bytes: int | None = None
    # issue 21: multimodal encoders -- the vision tower vLLM profiles (towers.encoder_geometry);
    # None for a text-only model or a tower kvplan has no profile rules for.
    encoder: EncoderGeometry | None = None
    # issue 20: the served weights by pipeline stage (first stage's embedding, last stage's
    # head, each layer), from a config's tensors; None for the catalog's stored form, whose
    # stages are then given even shares of the weights (weights.stage_weight_bytes).
    weight_split: WeightSplit | None = None
    # issue 21: SGLang's DP attention. Attention, embedding and LM-head weights, read from the
    # config's tensors (hf_config.py); None = not known (DP attention is then refused).
    attention_shares_known: AttentionShares | None = None
    # The MTP layers' own cache layers where the model says them (DeepSeek-V4: the ratio
    # compress_ratios gives after num_hidden_layers, hf_deepseek_v4.draft_layers); empty = each
    # is a copy of the last cache layer (engines/speculative.py _mtp_draft).
    mtp_layers: tuple[Layer, ...] = ()

    def __post_init__(self) -> None:
        if not self.layers:
            raise SizingError("layer_schedule", "a model needs at least one layer")
        for layer in self.layers:
            if type(layer) not in LAYER_CLASSES.values():
                raise UnknownLayerKind(
                    "layer_schedule", f"unknown layer object {type(layer).__name__}"
                )
        _positive("num_attention_heads", self.num_attention_heads)
        object.__setattr__(self, "dtype", parse_float_dtype(self.dtype))
        if self.state_dtype is not None:
            object.__setattr__(
                self, "state_dtype", parse_float_dtype(self.state_dtype, "state_dtype")
            )
        object.__setattr__(self, "weight_format", parse_weight_format(self.weight_format))
        if self.checkpoint_kv_cache is not None:
            normalize_checkpoint_kv_cache(self.checkpoint_kv_cache)
        if not any(not isinstance(layer, NoCache) for layer in self.layers):
            raise SizingError("layer_schedule", "no layer keeps any per-sequence state")
        for name in (
            "hidden_size",
            "intermediate_size",
            "vocab_size",
            "num_parameters",
            "weight_bytes",
            "max_position_embeddings",
            "derived_max_model_len",
            "sglang_context_len",
        ):
            value = getattr(self, name)
            if value is not None:
                _positive(name, value)
        # Hashing 100+ layers on every cache lookup would cost more than the arithmetic.
        object.__setattr__(
            self,
            "_hash",
            hash(
                (
                    self.layers,
                    self.num_attention_heads,
                    self.dtype,
                    self.state_dtype,
                    self.hidden_size,
                    self.intermediate_size,
                    self.vocab_size,
                    self.num_parameters,
                    self.weight_bytes,
                    self.weight_format,
                    self.max_position_embeddings,
                    self.derived_max_model_len,
                    self.sglang_context_len,
                    self.moe,
                    self.checkpoint_kv_cache,
                    self.config_note,
                    self.routed_experts_known,
                    self.encoder,
                    self.weight_split,
                    self.attention_shares_known,
                )
            ),
        )

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    @property
    def max_model_len_limit(self) -> int | None:
        """The longest max_model_len the engine derives from the model (context_limit.py)."""
        if self.derived_max_model_len is not None:
            return self.derived_max_model_len
        return self.max_position_embeddings

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def weights_known(self) -> bool:
        """Whether the weights can be sized (a parameter count or a checkpoint size is known)."""
        return self.num_parameters is not None or self.weight_bytes is not None

    @cached_property
    def layer_counts(self) -> tuple[tuple[Layer, int], ...]:
        """Distinct layer geometries with how many layers have each, in first-seen order."""
        counts: dict[Layer, int] = {}
        for layer in self.layers:
            counts[layer] = counts.get(layer, 0) + 1
        return tuple(counts.items())

    @cached_property
    def kinds(self) -> frozenset[LayerKind]:
        return frozenset(layer.kind for layer in self.layers)

    @cached_property
    def cache_layer_counts(self) -> tuple[tuple[TokenLayer | StateLayer, int], ...]:
        """`layer_counts` without the blocks that keep no state (and without DeepSeek-V4's
        compressed layers, which only `compressed_layers` readers size)."""
        return tuple(
            (layer, count)
            for layer, count in self.layer_counts
            if not isinstance(layer, NoCache | CompressedSparseAttention)
        )

    @cached_property
    def cache_layer_positions(self) -> tuple[tuple[TokenLayer | StateLayer, tuple[int, ...]], ...]:
        """Each distinct cache layer, in model order, with the indexes of the layers it is."""
        positions: dict[TokenLayer | StateLayer, list[int]] = {}
        for index, layer in enumerate(self.layers):
            if not isinstance(layer, NoCache | CompressedSparseAttention):
                positions.setdefault(layer, []).append(index)
        return tuple((layer, tuple(where)) for layer, where in positions.items())

    @cached_property
    def has_state_layers(self) -> bool:
        """Any linear-attention / Mamba layer (a fixed state per sequence)."""
        return any(isinstance(g, GatedDeltaNet | Mamba2 | Mamba1) for g, _ in self.layer_counts)

    @cached_property
    def has_mla(self) -> bool:
        return any(isinstance(g, MultiHeadLatentAttention) for g, _ in self.layer_counts)

    @cached_property
    def has_sparse_mla(self) -> bool:
        """DeepSeek sparse attention: MLA layers with a lightning-indexer key cache."""
        return any(
            isinstance(g, MultiHeadLatentAttention) and g.indexer_head_dim is not None
            for g, _ in self.layer_counts
        )

    @cached_property
    def has_kda(self) -> bool:
        """Kimi Delta Attention layers (Kimi-Linear, Kimi-K3)."""
        return any(isinstance(g, KimiDeltaAttention) for g, _ in self.layer_counts)

    @cached_property
    def has_lightning(self) -> bool:
        """MiniMax lightning-attention layers (MiniMax-Text-01, MiniMax-M1)."""
        return any(isinstance(g, LightningAttention) for g, _ in self.layer_counts)

    @cached_property
    def has_short_conv(self) -> bool:
        """LFM2 short-convolution layers."""
        return any(isinstance(g, ShortConv) for g, _ in self.layer_counts)

    @cached_property
    def has_indexed_attention(self) -> bool:
        """Attention layers with a MiniMax-M3 sparse-attention index key per token."""
        return any(
            isinstance(g, FullAttention) and g.indexer_head_dim is not None
            for g, _ in self.layer_counts
        )

    @cached_property
    def compressed_layers(self) -> tuple[CompressedSparseAttention, ...]:
        """DeepSeek-V4's compressed sparse-attention layers, in model order (empty for others)."""
        return tuple(layer for layer in self.layers if isinstance(layer, CompressedSparseAttention))

    @property
    def has_compressed_attention(self) -> bool:
        return bool(self.compressed_layers)

    @property
    def routed_experts(self) -> RoutedExperts | None:
        """The routed experts' share: read from the config's tensors, else priced from the
        MoE geometry (num_moe_layers x experts x gate, up and down projections of
        moe_intermediate_size x hidden_size, at the weights' format); None when neither says."""
        if self.routed_experts_known is not None:
            return self.routed_experts_known
        moe = self.moe
        if moe is None or moe.num_moe_layers is None or self.hidden_size is None:
            return None
        per_expert = 3 * moe.moe_intermediate_size * self.hidden_size
        parameters = moe.num_moe_layers * moe.num_experts * per_expert
        bits = self.weight_format.bits
        return RoutedExperts(parameters, -(-parameters * bits.numerator // (8 * bits.denominator)))

    @property
    def is_hybrid(self) -> bool:
        """More than one cache geometry: vLLM's hybrid KV-cache manager takes over."""
        return len(self.cache_layer_counts) > 1

    def with_layers(self, layers: Sequence[Layer]) -> ModelArchitecture:
        """The same model restricted to some of its layers (one pipeline stage)."""
        return ModelArchitecture(
            layers=tuple(layers),
            num_attention_heads=self.num_attention_heads,
            dtype=self.dtype,
            state_dtype=self.state_dtype,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            vocab_size=self.vocab_size,
            num_parameters=self.num_parameters,
            weight_bytes=self.weight_bytes,
            weight_format=self.weight_format,
            max_position_embeddings=self.max_position_embeddings,
            derived_max_model_len=self.derived_max_model_len,
            sglang_context_len=self.sglang_context_len,
            moe=self.moe,
            checkpoint_kv_cache=self.checkpoint_kv_cache,
            name=self.name,
            weights_unknown=self.weights_unknown,
            config_note=self.config_note,
            routed_experts_known=self.routed_experts_known,
            weight_split=self.weight_split,
            attention_shares_known=self.attention_shares_known,
        )
