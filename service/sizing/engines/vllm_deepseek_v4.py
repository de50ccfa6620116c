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

The pool (`packed_pool`): v1/core/kv_cache_planning.py `_get_packed_kv_cache_groups` buckets
the specs by uniform type (same block size and window), splits balanced buckets into groups of
`_approximate_gcd` pattern repeats, and every group draws from one pool of blocks as wide as the
widest group (`_get_kv_cache_bytes_per_block`, block-outermost); `get_kv_cache_config_from_groups`
makes `available // bytes_per_block` blocks, and v1/core/kv_cache_utils.py
`get_max_concurrency_for_kv_cache_config` divides them by the sum over groups of the blocks one
max_model_len request takes; `update_kv_cache_capacity` logs int(concurrency x max_model_len)
as "GPU KV cache size". The in-flight tokens the window groups reserve are
`VllmConfig.max_in_flight_tokens` (`max_concurrent_batches` x max_num_batched_tokens: 2 batches
with async scheduling, the default), an input here.
"""

from __future__ import annotations

from collections import Counter
from typing import Final, Literal

from ..frozen import frozen
from ..model.hf_deepseek_v4 import FP8_DS_MLA_ROW_BYTES, HEAD_DIM, CompressedLayer

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


@frozen
class PackedPool:
    """vLLM's DeepSeek-V4 pool: the groups' page bytes, the block, and what it holds."""

    group_bytes: tuple[int, ...]  # one block's pages of each group, in vLLM's group order
    group_pages_per_request: tuple[int, ...]
    bytes_per_block: int
    num_gpu_blocks: int
    max_model_len: int

    @property
    def blocks_per_request(self) -> int:
        return sum(self.group_pages_per_request)

    @property
    def max_concurrency(self) -> float:
        """ "Maximum concurrency for X tokens per request: %.2fx"."""
        return self.num_gpu_blocks / self.blocks_per_request

    @property
    def kv_cache_tokens(self) -> int:
        """ "GPU KV cache size: N tokens": int(concurrency x max_model_len)."""
        return int(self.max_concurrency * self.max_model_len)


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """`_approximate_gcd`: the chunk in [lower_bound, max] padding the values least (ties:
    the larger)."""
    best_d, best_pad = lower_bound, -1
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad < 0 or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


def _buckets(
    layers: tuple[CompressedLayer, ...], block_size: int, fp4_indexer: bool
) -> list[list[PageSpec]]:
    """Specs bucketed by uniform type (`UniformTypeKVCacheSpecs.is_uniform_type`: one block
    size, and one window or none), in the order vLLM meets them layer by layer."""
    buckets: dict[tuple[int, int | None], list[PageSpec]] = {}
    for layer in layers:
        for page in layer_pages(layer, block_size, fp4_indexer=fp4_indexer):
            buckets.setdefault((page.block_tokens, page.sliding_window), []).append(page)
    return list(buckets.values())


def packed_pool(
    layers: tuple[CompressedLayer, ...],
    *,
    block_size: int,
    max_model_len: int,
    max_in_flight_tokens: int,
    available_bytes: int,
    fp4_indexer: bool = False,
) -> PackedPool:
    """`_get_packed_kv_cache_groups` + `get_kv_cache_config_from_groups` for DeepSeek-V4."""
    buckets = _buckets(layers, block_size, fp4_indexer)
    counts = [Counter(page.page_bytes for page in bucket) for bucket in buckets]
    balanced = [len(set(c.values())) == 1 for c in counts]
    most = [c.most_common(1)[0][1] for c in counts]
    floor = max(
        (m for m, b, c in zip(most, balanced, counts, strict=True) if b and len(c) > 1),
        default=0,
    )
    repeats = (
        approximate_gcd([m for m, b in zip(most, balanced, strict=True) if b], floor)
        if floor
        else None
    )
    group_bytes: list[int] = []
    group_pages: list[int] = []
    for bucket, count, is_balanced, m in zip(buckets, counts, balanced, most, strict=True):
        # DeepSeek-V4's compressor states are SlidingWindowMLASpec, never a state bucket
        # (MambaSpec, CircularBufferSpec), so the split is the repeat pattern's alone.
        n = -(-m // repeats) if is_balanced and repeats is not None else 1
        pages = bucket[0].request_bytes(max_model_len, max_in_flight_tokens)
        pages //= bucket[0].page_bytes
        for i in range(n):
            # pattern repeat r goes to group r mod n: ceil((count - i) / n) repeats each
            group_bytes.append(sum(page * len(range(i, c, n)) for page, c in count.items()))
            group_pages.append(pages)
    bytes_per_block = max(group_bytes)
    return PackedPool(
        tuple(group_bytes),
        tuple(group_pages),
        bytes_per_block,
        available_bytes // bytes_per_block,
        max_model_len,
    )


__all__ = [
    "PackedPool",
    "PageSpec",
    "aligned",
    "approximate_gcd",
    "indexer_row_bytes",
    "layer_pages",
    "packed_pool",
]
