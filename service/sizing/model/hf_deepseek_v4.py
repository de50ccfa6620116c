"""DeepSeek-V4 compressed sparse attention: what one sequence holds, read from its config.

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
draft layers (`draft_layers`: vLLM's models/deepseek_v4 MTP builds each as a
`DeepseekV4DecoderLayer` of that ratio, whose caches join the pool when speculative decoding
runs).

How an engine packs these caches into its pool is the engine's: vLLM's is
engines/vllm_deepseek_v4.py. DeepSeek-V4.1 (`kv_source_layer_ids`: compressed KV and indexer
keys shared across layers) is refused by name.
"""

from __future__ import annotations

from typing import Final, Literal

from ..errors import SizingError, UnknownLayerKind
from ..frozen import frozen
from .architecture import CompressedSparseAttention
from .config_view import HFConfig as _Cfg

DEEPSEEK_V4_TYPES: Final = frozenset({"deepseek_v4", "deepseek_v41", "deepseek_v41_text"})
V41_TYPES: Final = frozenset({"deepseek_v41", "deepseek_v41_text"})

# vLLM DeepseekV4MLAAttention / DeepseekSparseSWABackend: head_dim 512 with 64 RoPE dims.
HEAD_DIM: Final = 512
ROPE_DIM: Final = 64
FP8_DS_MLA_ROW_BYTES: Final = 584  # 448 fp8 + 64 x 2 B bf16 + 7 scales + 1 pad
INDEXER_QUANT_BLOCK: Final = 128  # DeepseekV4Indexer.quant_block_size
INDEXER_SCALE_BYTES: Final = 4
COMPRESSOR_STATE_BYTES: Final = 4  # CompressorStateCache asserts float32
RATIOS: Final = frozenset({0, 1, 4, 128})

Storage = Literal["fp8_ds_mla", "16-bit"]


# One DeepSeek-V4 layer: its compression ratio (1 = window only) and its widths.
CompressedLayer = CompressedSparseAttention


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
    if cfg.model_type in V41_TYPES:
        raise deepseek_v41_refusal(cfg)
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


def draft_layers(cfg: _Cfg) -> tuple[CompressedLayer, ...]:
    """The MTP draft layers' caches (`num_nextn_predict_layers`, each with the ratio
    `compress_ratios` gives after the model's layers): vLLM models/deepseek_v4 MTP
    (`DeepSeekV4MultiTokenPredictor`) builds layers num_hidden_layers .. + n as
    `DeepseekV4DecoderLayer`s, whose window (and compressed) caches join the pool."""
    layers = deepseek_v4_layers(cfg)
    n = len(layers)
    count = cfg.get_int("num_nextn_predict_layers", default=0)
    ratios = cfg.int_list("compress_ratios", minimum=0) or []
    if len(ratios) < n + count:
        raise SizingError(
            cfg.where("compress_ratios"),
            f"has {len(ratios)} entries, fewer than num_hidden_layers {n} + "
            f"num_nextn_predict_layers {count}",
        )
    window, index = layers[0].sliding_window, layers[0].index_head_dim
    return tuple(CompressedLayer(max(r, 1), window, index) for r in ratios[n : n + count])


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


def deepseek_v41_refusal(cfg: _Cfg) -> UnknownLayerKind:
    """DeepSeek-V4.1 shares compressed KV and indexer keys across layers: refused by name."""
    return UnknownLayerKind(
        cfg.where("model_type"),
        f"{cfg.model_type}: DeepSeek-V4.1 shares compressed KV and indexer keys across "
        "layers (kv_source_layer_ids, index_source_layer_ids); kvplan has no cache "
        "geometry for that",
    )


__all__ = [
    "DEEPSEEK_V4_TYPES",
    "V41_TYPES",
    "CompressedLayer",
    "SequenceBytes",
    "deepseek_v4_layers",
    "deepseek_v41_refusal",
    "draft_layers",
    "sequence_bytes",
]
