"""DeepSeek-V4 on vLLM 0.33.0: the page of each kind of cache and what one request reserves.

The first step towards sizing DeepSeek-V4 as vLLM packs it (issue 19). Each DeepSeek-V4 layer
hands vLLM's planner up to five kinds of cache spec, each with its own page; this module works
out those pages and each kind's per-request reservation exactly as the 0.33.0 wheel does:

- compressed latent (C4 and C128 layers): models/deepseek_v4/attention.py
  `DeepseekV4MLAAttention.get_kv_cache_spec` -> `MLAAttentionSpec(block_size=--block-size,
  tokens_per_state=compress_ratio, state_content_bytes=584, alignment=576)`;
- indexer key (C4 layers): `DeepseekV4IndexerCache.get_kv_cache_spec`, uint8 rows of
  `k_cache_head_dim` (`DeepseekV4Indexer.__init__`: 128 fp8 + 4 x fp32 scale = 132 B, or
  64 + 4 = 68 B with `use_fp4_indexer_cache`), tokens_per_state 4, alignment 576;
- window (every layer): v1/attention/backends/mla/sparse_swa.py `DeepseekV4SWACache`:
  `SlidingWindowMLASpec(block_size=64, sliding_window=config sliding_window)`, 584-B rows,
  alignment 576;
- compressor state (C4 main + C4 indexer + C128): models/deepseek_v4/compressor.py
  `CompressorStateCache`: float32 rows of `state_dim = 2 x coff x head_dim`, block 4 (C4) or
  8 (C128), `sliding_window = coff x ratio`, alignment 576.

Page bytes: v1/kv_cache_interface.py `AttentionSpec.unpadded_page_size_bytes` (heads x states x
content; states = block_size // tokens_per_state) rounded up by `_apply_alignment_padding`.
Per-request bytes: `FullAttentionSpec.max_memory_usage_bytes` (cdiv(max_model_len, block) pages)
and `SlidingWindowSpec.max_admission_blocks_per_request` (cdiv(min(window - 1 +
max_in_flight_tokens, max_model_len), block) + 1 pages).

NOT YET MODELLED (so DeepSeek-V4 stays refused by name in hf_deepseek_v4.py): how
v1/core/kv_cache_planning.py `_get_packed_kv_cache_groups` buckets these specs into groups and
sizes the shared block (`_get_kv_cache_bytes_per_block`), and `VllmConfig.max_in_flight_tokens`
from the engine's flags; the in-flight tokens are an input here.
"""

from __future__ import annotations

from typing import Final, Literal

from ..frozen import frozen
from ..hf_deepseek_v4 import FP8_DS_MLA_ROW_BYTES, HEAD_DIM, CompressedLayer

DS_MLA_ALIGNMENT: Final = 576  # alignment=576 on every fp8_ds_mla DeepSeek-V4 spec
SWA_BLOCK_TOKENS: Final = 64  # DeepseekV4SWACache block_size default
FLOAT32_BYTES: Final = 4
INDEXER_RATIO: Final = 4

Kind = Literal["compressed", "indexer", "window", "compressor_state", "indexer_state"]


@frozen
class PageSpec:
    """One layer's cache of one kind as vLLM specs it: tokens a page covers, its bytes, and
    the window it keeps (None: the whole context)."""

    kind: Kind
    block_tokens: int
    page_bytes: int
    sliding_window: int | None

    def request_bytes(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """What one request of `max_model_len` tokens reserves (`max_memory_usage_bytes`)."""
        if self.sliding_window is None:
            return -(-max_model_len // self.block_tokens) * self.page_bytes
        held = min(self.sliding_window - 1 + max_in_flight_tokens, max_model_len)
        return (-(-held // self.block_tokens) + 1) * self.page_bytes


def aligned(page_bytes: int) -> int:
    """`_apply_alignment_padding`: round a page up to the 576-B fp8_ds_mla alignment."""
    return -(-page_bytes // DS_MLA_ALIGNMENT) * DS_MLA_ALIGNMENT


def indexer_row_bytes(index_head_dim: int, *, fp4_indexer: bool) -> int:
    """`DeepseekV4Indexer.__init__` k_cache_head_dim: fp8 + fp32 scale per 128, or MXFP4
    (two values a byte) + one UE8M0 byte per 32."""
    if fp4_indexer:
        return index_head_dim // 2 + index_head_dim // 32
    return index_head_dim + index_head_dim // 128 * FLOAT32_BYTES


def layer_pages(
    layer: CompressedLayer, block_size: int, *, fp4_indexer: bool = False
) -> tuple[PageSpec, ...]:
    """The specs one DeepSeek-V4 layer hands the planner, with `--block-size` tokens per
    compressed page (256 in every published recipe)."""
    window = PageSpec(
        "window",
        SWA_BLOCK_TOKENS,
        aligned(SWA_BLOCK_TOKENS * FP8_DS_MLA_ROW_BYTES),
        layer.sliding_window,
    )
    ratio = layer.compress_ratio
    if ratio == 1:
        return (window,)
    states = block_size // ratio
    coff = 2 if ratio == INDEXER_RATIO else 1
    state_block = 4 if ratio == INDEXER_RATIO else 8
    pages = [
        window,
        PageSpec("compressed", block_size, aligned(states * FP8_DS_MLA_ROW_BYTES), None),
        PageSpec(
            "compressor_state",
            state_block,
            aligned(state_block * 2 * coff * HEAD_DIM * FLOAT32_BYTES),
            coff * ratio,
        ),
    ]
    if ratio == INDEXER_RATIO:
        row = indexer_row_bytes(layer.index_head_dim, fp4_indexer=fp4_indexer)
        pages.append(PageSpec("indexer", block_size, aligned(states * row), None))
        pages.append(
            PageSpec(
                "indexer_state",
                state_block,
                aligned(state_block * 2 * coff * layer.index_head_dim * FLOAT32_BYTES),
                coff * ratio,
            )
        )
    return tuple(pages)


__all__ = ["PageSpec", "aligned", "indexer_row_bytes", "layer_pages"]
