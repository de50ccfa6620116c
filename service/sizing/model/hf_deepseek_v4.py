"""DeepSeek-V4 compressed sparse attention: what one sequence holds, and why kvplan refuses it.

Every DeepSeek-V4 layer (vLLM 0.33.0 wheel, models/deepseek_v4/attention.py
`DeepseekV4MultiHeadLatentAttentionWrapper`, `DeepseekV4MLAAttention.get_kv_cache_spec`;
v1/attention/backends/mla/sparse_swa.py `DeepseekV4SWACache`) keeps:
  - a window: the last `sliding_window` (128) tokens' latent rows, on every layer;
  - C4 layers (`compress_ratios[i] == 4`): one compressed latent row per 4 tokens, and the
    lightning indexer's key per 4 tokens (`DeepseekV4Indexer`, `DeepseekV4IndexerCache`);
  - C128 layers (`== 128`): one compressed latent row per 128 tokens, no indexer;
  - layers with ratio 0 (or 1): the window only;
  - a compressor state per compressing layer (models/deepseek_v4/compressor.py
    `CompressorStateCache`): float32 rows of 2 x coff x head_dim for the last coff x ratio
    tokens (coff 2 on C4, which overlaps groups; 1 on C128); the C4 indexer has its own of
    index_head_dim.
Row sizes: vLLM stores `fp8_ds_mla` rows of 584 B (448 fp8 NoPE + 64 bf16 RoPE + 7 UE8M0
scales + 1 pad; `state_content_bytes=584`; DeepSeek-V4 runs with an fp8 cache only) and
indexer keys of index_head_dim + index_head_dim / 128 x 4 B (132 B, fp8 with fp32 scales;
68 B with `use_fp4_indexer_cache`, `DeepseekV4Indexer.__init__`, not counted here).
`16-bit` rows are head_dim x 2 and index_head_dim x 2 bytes: the basis of vLLM's published
figure (9.62 GiB for V4-Pro at 1M).

Only `num_hidden_layers` entries of `compress_ratios` are layers; the rest describe the MTP
draft layers, which kvplan does not count (hf_config module docstring).

kvplan does not yet answer how an engine packs these five kinds of cache into its pool (vLLM
0.33 v1/core/kv_cache_planning.py `_get_packed_kv_cache_groups`: compressed, indexer,
window and compressor-state pages of different sizes bucketed into block-outermost groups,
the window and state groups reserving in-flight tokens per request; modelled, not yet wired,
in engines/vllm_deepseek_v4.py, and earlier releases pack differently). Public start-up logs
show the pool per token moves with max_model_len for that reason (vllm#51041, vllm#54703),
so a capacity from the model's own bytes would be wrong. The config is read and refused by
name, with the bytes it holds in the reason.
"""

from __future__ import annotations

from typing import Final, Literal, NoReturn

from ..errors import SizingError, UnknownLayerKind
from ..frozen import frozen
from .config_view import HFConfig as _Cfg

DEEPSEEK_V4_TYPES: Final = frozenset({"deepseek_v4", "deepseek_v41", "deepseek_v41_text"})
_V41_TYPES: Final = frozenset({"deepseek_v41", "deepseek_v41_text"})

# vLLM DeepseekV4MLAAttention / DeepseekSparseSWABackend: head_dim 512 with 64 RoPE dims.
HEAD_DIM: Final = 512
ROPE_DIM: Final = 64
FP8_DS_MLA_ROW_BYTES: Final = 584  # 448 fp8 + 64 x 2 B bf16 + 7 scales + 1 pad
INDEXER_QUANT_BLOCK: Final = 128  # DeepseekV4Indexer.quant_block_size
INDEXER_SCALE_BYTES: Final = 4
COMPRESSOR_STATE_BYTES: Final = 4  # CompressorStateCache asserts float32
RATIOS: Final = frozenset({0, 1, 4, 128})

Storage = Literal["fp8_ds_mla", "16-bit"]


@frozen
class CompressedLayer:
    """One DeepSeek-V4 layer: its compression ratio (1 = window only) and its widths."""

    compress_ratio: int
    sliding_window: int
    index_head_dim: int  # used on C4 layers only


@frozen
class SequenceBytes:
    """What one sequence of `context_tokens` holds, summed over the layers, by part."""

    window_bytes: int
    compressed_bytes: int
    indexer_bytes: int
    compressor_state_bytes: int

    @property
    def total_bytes(self) -> int:
        return (
            self.window_bytes
            + self.compressed_bytes
            + self.indexer_bytes
            + self.compressor_state_bytes
        )


def deepseek_v4_layers(cfg: _Cfg) -> tuple[CompressedLayer, ...]:
    """Each layer's ratio and widths, from every key of a DeepSeek-V4 config that sizes them."""
    n = cfg.layer_count("num_hidden_layers")
    ratios = cfg.int_list("compress_ratios", minimum=0)
    if ratios is None:
        raise SizingError(cfg.where("compress_ratios"), "is required for deepseek_v4")
    if len(ratios) < n:
        raise SizingError(
            cfg.where("compress_ratios"),
            f"has {len(ratios)} entries, fewer than num_hidden_layers {n}",
        )
    for index, ratio in enumerate(ratios[:n]):
        if ratio not in RATIOS:
            raise UnknownLayerKind(
                cfg.where(f"compress_ratios[{index}]"),
                f"{ratio}: vLLM's DeepSeek-V4 layers compress by 4 or 128, or keep only the "
                "window (0); sparse_swa.py _layer_type_for refuses anything else",
            )
    for key, expected in (("head_dim", HEAD_DIM), ("qk_rope_head_dim", ROPE_DIM)):
        value = cfg.get_int(key)
        if value != expected:
            raise SizingError(
                cfg.where(key),
                f"is {value}; vLLM's DeepSeek-V4 cache rows are built for {expected} "
                "(DeepseekSparseSWABackend, 584-B fp8_ds_mla rows)",
            )
    heads = cfg.get_int("num_key_value_heads", default=1)
    if heads != 1:
        raise SizingError(
            cfg.where("num_key_value_heads"),
            f"is {heads}; DeepSeek-V4 caches one latent row per token (num_kv_heads=1)",
        )
    index_head_dim = cfg.get_int("index_head_dim")
    if index_head_dim % INDEXER_QUANT_BLOCK:
        raise SizingError(
            cfg.where("index_head_dim"),
            f"must be a multiple of {INDEXER_QUANT_BLOCK} (one fp32 scale per 128 fp8 values)",
        )
    # The lightning indexer keeps one key per 4 tokens on every C4 layer, whatever top-k it
    # picks from them (DeepseekV4Indexer: index_topk chooses which compressed rows attend, it
    # does not size the cache): checked, and otherwise not part of the bytes.
    cfg.opt_int("index_topk")
    window = cfg.get_int("sliding_window")
    return tuple(CompressedLayer(max(ratio, 1), window, index_head_dim) for ratio in ratios[:n])


def row_bytes(storage: Storage) -> int:
    return FP8_DS_MLA_ROW_BYTES if storage == "fp8_ds_mla" else HEAD_DIM * 2


def indexer_key_bytes(index_head_dim: int, storage: Storage) -> int:
    if storage == "fp8_ds_mla":
        return index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * INDEXER_SCALE_BYTES
    return index_head_dim * 2


def compressor_state_bytes(layer: CompressedLayer, context_tokens: int) -> int:
    """The float32 state of the groups still being compressed (C4: coff 2, 8 tokens)."""
    ratio = layer.compress_ratio
    if ratio == 1:
        return 0
    coff = 2 if ratio == 4 else 1
    tokens = min(context_tokens, coff * ratio)
    main = tokens * 2 * coff * HEAD_DIM * COMPRESSOR_STATE_BYTES
    index = tokens * 2 * coff * layer.index_head_dim * COMPRESSOR_STATE_BYTES if ratio == 4 else 0
    return main + index


def sequence_bytes(
    layers: tuple[CompressedLayer, ...], context_tokens: int, storage: Storage
) -> SequenceBytes:
    """One sequence's cache, before any engine rounds it into pages."""
    row = row_bytes(storage)
    window = compressed = indexer = state = 0
    for layer in layers:
        window += min(context_tokens, layer.sliding_window) * row
        if layer.compress_ratio == 1:
            continue
        entries = context_tokens // layer.compress_ratio
        compressed += entries * row
        if layer.compress_ratio == 4:
            indexer += entries * indexer_key_bytes(layer.index_head_dim, storage)
        state += compressor_state_bytes(layer, context_tokens)
    return SequenceBytes(window, compressed, indexer, state)


def refuse_deepseek_v4(cfg: _Cfg) -> NoReturn:
    """Read the config (refusing what it cannot), then refuse it by name with its bytes."""
    raise deepseek_v4_refusal(cfg)


def deepseek_v4_refusal(cfg: _Cfg) -> UnknownLayerKind:
    """The by-name refusal of a DeepSeek-V4 config, after reading every key that sizes its
    cache (raising as `refuse_deepseek_v4` does on what it cannot read)."""
    if cfg.model_type in _V41_TYPES:
        raise UnknownLayerKind(
            cfg.where("model_type"),
            f"{cfg.model_type}: DeepSeek-V4.1 shares compressed KV and indexer keys across "
            "layers (kv_source_layer_ids, index_source_layer_ids); kvplan has no cache "
            "geometry for that",
        )
    layers = deepseek_v4_layers(cfg)
    context = cfg.get_int("max_position_embeddings")
    fp8 = sequence_bytes(layers, context, "fp8_ds_mla").total_bytes
    counts = {r: sum(1 for layer in layers if layer.compress_ratio == r) for r in (4, 128, 1)}
    return UnknownLayerKind(
        cfg.where("compress_ratios"),
        f"DeepSeek-V4 compressed sparse attention ({counts[4]} C4 layers with indexer keys, "
        f"{counts[128]} C128, {counts[1]} window-only; a {layers[0].sliding_window}-token "
        f"window on every layer): one sequence of {context} tokens holds {fp8} B as vLLM "
        "stores it (fp8_ds_mla). kvplan does not model how vLLM packs these caches into its "
        "pool (kv_cache_planning.py _get_packed_kv_cache_groups), nor SGLang's or TensorRT-"
        "LLM's pools for it, so it gives no capacity rather than a wrong one",
    )


__all__ = [
    "DEEPSEEK_V4_TYPES",
    "CompressedLayer",
    "SequenceBytes",
    "deepseek_v4_layers",
    "deepseek_v4_refusal",
    "refuse_deepseek_v4",
    "sequence_bytes",
]
