"""DeepSeek-V4 on vLLM: the page of each kind of cache, and the pool releases pack them into.

`packed_pool` is vLLM 0.33.0's; `tuple_pool` is 0.24.0-0.26.x's layer tuples (its docstring
names the functions; checked on vllm#51041); engines/vllm.py `_deepseek_v4_capacity` asks the
one the release has. Each DeepSeek-V4 layer
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
from functools import lru_cache
from typing import Final, Literal

from ..errors import SizingError
from ..frozen import frozen
from ..model.hf_deepseek_v4 import FP8_DS_MLA_ROW_BYTES, HEAD_DIM, CompressedLayer
from .common import CacheGroup, CacheLayout

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


# Memoised by value: the specs depend on the layers and the block alone, never on the
# context, so a new question on a model already asked reads them (every DeepSeek-V4 question
# rebuilt some 45 layers' pages before: the costliest step of a new question on that model).
@lru_cache(maxsize=64)
def _buckets(
    layers: tuple[CompressedLayer, ...], block_size: int, fp4_indexer: bool
) -> tuple[tuple[PageSpec, ...], ...]:
    """Specs bucketed by uniform type (`UniformTypeKVCacheSpecs.is_uniform_type`: one block
    size, and one window or none), in the order vLLM meets them layer by layer."""
    buckets: dict[tuple[int, int | None], list[PageSpec]] = {}
    for layer in layers:
        for page in layer_pages(layer, block_size, fp4_indexer=fp4_indexer):
            buckets.setdefault((page.block_tokens, page.sliding_window), []).append(page)
    return tuple(tuple(bucket) for bucket in buckets.values())


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
    groups = _packed_groups(layers, block_size, fp4_indexer)
    group_bytes = tuple(bytes_ for _, bytes_ in groups)
    group_pages = tuple(
        spec.request_bytes(max_model_len, max_in_flight_tokens) // spec.page_bytes
        for spec, _ in groups
    )
    bytes_per_block = max(group_bytes)
    return PackedPool(
        group_bytes,
        group_pages,
        bytes_per_block,
        available_bytes // bytes_per_block,
        max_model_len,
    )


# Memoised by value, as `_buckets`: the groups and their pages do not depend on the context.
@lru_cache(maxsize=64)
def _packed_groups(
    layers: tuple[CompressedLayer, ...], block_size: int, fp4_indexer: bool
) -> tuple[tuple[PageSpec, int], ...]:
    """`_get_packed_kv_cache_groups`: each group, in vLLM's group order, as its bucket's spec
    (what one request takes of it is the spec's) and one block's bytes of its pages."""
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
    groups: list[tuple[PageSpec, int]] = []
    for bucket, count, is_balanced, m in zip(buckets, counts, balanced, most, strict=True):
        # DeepSeek-V4's compressor states are SlidingWindowMLASpec, never a state bucket
        # (MambaSpec, CircularBufferSpec), so the split is the repeat pattern's alone.
        n = -(-m // repeats) if is_balanced and repeats is not None else 1
        for i in range(n):
            # pattern repeat r goes to group r mod n: ceil((count - i) / n) repeats each
            groups.append((bucket[0], sum(page * len(range(i, c, n)) for page, c in count.items())))
    return tuple(groups)


# --- vLLM 0.24.0 - 0.26.0: layer tuples -----------------------------------------------------


@frozen
class TupleGroup:
    """One KV-cache group of the layer-tuple grouping: its kind, layers, pages and what one
    max_model_len request takes of it."""

    kind: Kind
    layers: int
    block_tokens: int
    page_bytes: int  # UniformTypeKVCacheSpecs.page_size_bytes: its layers' pages, padded
    pages_per_request: int  # UniformTypeKVCacheSpecs.max_memory_usage_pages
    page_sizes: tuple[tuple[int, int], ...]  # (page bytes, layers with it), for the block


@frozen
class TuplePool:
    """vLLM 0.24.0-0.26.0's DeepSeek-V4 pool: the groups, the block, and one request."""

    groups: tuple[TupleGroup, ...]
    layer_tuples: int  # _approximate_gcd's pick
    bytes_per_block: int  # _get_kv_cache_config_packed's total_num_bytes_per_block
    blocks_per_request: int  # get_max_concurrency_for_kv_cache_config's divisor
    request_bytes: int  # _max_memory_usage_bytes_from_groups: the start-up fit check
    padding_layers: int


def tuple_pool(
    layers: tuple[CompressedLayer, ...],
    *,
    block_size: int,
    max_model_len: int,
    max_in_flight_tokens: int,
    fp4_indexer: bool = False,
) -> TuplePool:
    """v1/core/kv_cache_utils.py (0.24.0-0.26.0) for DeepSeek-V4, step by step:

    `group_and_unify_kv_cache_specs`: every MLAAttentionSpec (compressed latents, indexer keys:
    block `block_size`, no window) in one group first, the SlidingWindowMLASpecs by (block
    size, window): the 64-token window, the C4 compressor states (block 4, window 8), the C128
    ones (block 8, window 128). `_get_kv_cache_groups_uniform_groups`: a group's "layer
    tuples" are the count of its most common page size (`get_num_layer_tuples`); the tuple
    count is `_approximate_gcd` of them, at least the MLA group's; each window group's pages
    are padded up to the nearest MLA page size, and it is split into cdiv(layers per size,
    tuples) groups, tuple i going to group i mod n. `_get_kv_cache_config_packed`: one block
    holds, for every page size, as many pages as the group with most of them
    (`_bucket_layers_by_page_size`). `get_max_concurrency_for_kv_cache_config` (0.20.0-0.26.0):
    a request's bytes are the sum over groups of its pages x the group's page, divided by the
    first (MLA) group's page: cdiv of that is the blocks one request takes. The start-up check
    (`_max_memory_usage_bytes_from_groups`) asks tuples x pages x the sum of the distinct MLA
    page sizes, per group.
    """
    mla, windowed = _mla_first(_buckets(layers, block_size, fp4_indexer), block_size)
    mla_counts = Counter(page.page_bytes for page in mla)
    mla_sizes = sorted(mla_counts)
    tuples_per_bucket = [
        Counter(page.page_bytes for page in bucket).most_common(1)[0][1]
        for bucket in (mla, *windowed)
    ]
    n = approximate_gcd(tuples_per_bucket, tuples_per_bucket[0])
    groups = [
        TupleGroup(
            "compressed",
            len(mla),
            block_size,
            sum(mla_counts.elements()),
            -(-max_model_len // block_size),
            tuple(sorted(mla_counts.items(), reverse=True)),
        )
    ]
    padding = 0
    for bucket in windowed:
        split, pad = _split_window_bucket(
            bucket, mla_sizes, n, max_model_len=max_model_len, in_flight=max_in_flight_tokens
        )
        groups += split
        padding += pad
    slots: dict[int, int] = {}
    for group in groups:
        for size, count in group.page_sizes:
            slots[size] = max(slots.get(size, 0), count)
    request = sum(g.pages_per_request * g.page_bytes for g in groups)
    most = max(max(count for _, count in g.page_sizes) for g in groups)
    return TuplePool(
        tuple(groups),
        n,
        sum(size * count for size, count in slots.items()),
        -(-request // groups[0].page_bytes),
        sum(most * g.pages_per_request * sum(mla_sizes) for g in groups),
        padding,
    )


def _mla_first(
    buckets: tuple[tuple[PageSpec, ...], ...], block_size: int
) -> tuple[tuple[PageSpec, ...], list[tuple[PageSpec, ...]]]:
    """The MLAAttentionSpec bucket (block `block_size`, no window) and the window buckets."""
    mla_key = (block_size, None)
    first = [b for b in buckets if (b[0].block_tokens, b[0].sliding_window) == mla_key]
    if not first:
        raise SizingError(
            "compress_ratios",
            "no layer compresses: vLLM's DeepSeek-V4 grouping needs one compressed (MLA) group "
            "(group_and_unify_kv_cache_specs asserts one)",
        )
    return first[0], [b for b in buckets if b is not first[0]]


def _split_window_bucket(
    bucket: tuple[PageSpec, ...],
    mla_sizes: list[int],
    tuples: int,
    *,
    max_model_len: int,
    in_flight: int,
) -> tuple[list[TupleGroup], int]:
    """One window bucket padded up to the MLA page sizes and split into groups of `tuples`
    layer tuples (`_get_kv_cache_groups_uniform_groups`), and the padding layers it takes."""
    padded: Counter[int] = Counter()
    for page in bucket:
        larger = [size for size in mla_sizes if size >= page.page_bytes]
        if not larger:
            raise SizingError(
                "block_size",
                f"a {page.kind} page of {page.page_bytes} B is larger than every compressed "
                "page: vLLM 0.26 cannot pad it into the layer tuples (asserts)",
            )
        padded[min(larger)] += 1
    per_size = set(padded.values())
    if len(per_size) != 1:
        raise SizingError(
            "compress_ratios",
            "the window-group page sizes have unequal layer counts; vLLM 0.26's layer "
            "tuples assert they are equal",
        )
    count = per_size.pop()
    splits = -(-count // tuples)
    head = bucket[0]
    pages = head.request_bytes(max_model_len, in_flight) // head.page_bytes
    groups = []
    for i in range(splits):
        in_group = len(range(i, count, splits))
        groups.append(
            TupleGroup(
                head.kind,
                in_group * len(padded),
                head.block_tokens,
                in_group * sum(padded),
                pages,
                tuple((size, in_group) for size in sorted(padded, reverse=True)),
            )
        )
    return groups, (splits * tuples - count) * len(padded)


def pool_layout(pool: TuplePool | PackedPool, notes: tuple[str, ...]) -> CacheLayout:
    """kvplan's description of either pool: its groups, its block and one request's blocks."""
    if isinstance(pool, TuplePool):
        groups = tuple(
            CacheGroup(
                f"deepseek_v4_{g.kind}", g.layers, g.block_tokens, g.page_bytes, g.pages_per_request
            )
            for g in pool.groups
        )
        return CacheLayout(
            groups,
            pool.bytes_per_block,
            pool.blocks_per_request,
            pool.groups[0].block_tokens,
            pool.padding_layers,
            notes,
        )
    groups = tuple(
        CacheGroup("deepseek_v4", 0, 0, size, pages)
        for size, pages in zip(pool.group_bytes, pool.group_pages_per_request, strict=True)
    )
    return CacheLayout(groups, pool.bytes_per_block, pool.blocks_per_request, 0, 0, notes)


__all__ = [
    "PackedPool",
    "PageSpec",
    "TupleGroup",
    "TuplePool",
    "aligned",
    "approximate_gcd",
    "indexer_row_bytes",
    "layer_pages",
    "packed_pool",
    "pool_layout",
    "tuple_pool",
]
