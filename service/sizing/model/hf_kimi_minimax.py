"""Config readers for Kimi's MLA + KDA hybrids, MiniMax-M3's indexed GQA and MiniMax-Text-01 /
MiniMax-M1's lightning attention (`minimax_lightning_layers`).

Kept beside `hf_config` (which calls them from `_mixers`) so each reader reads every key of
its model type that could change the cache, and says which keys it leaves to the weights.

Kimi-Linear / Kimi-K3 (`model_type` kimi_linear; Kimi-K3 nests it under `text_config`):
  vLLM models/kimi_k3 `KimiLinearForCausalLM` (0.33.0 wheel; transformers_utils/configs/
  kimi_linear.py `KimiLinearConfig.is_kda_layer`): layer i is a KDA layer when i + 1 is in
  `linear_attn_config.kda_layers`, else an MLA layer (`full_attn_layers`, both 1-based).
  MLA caches kv_lora_rank + qk_rope_head_dim per token (`mla_use_nope` leaves the rope part
  unrotated but cached; `mla_use_output_gate` and `attn_res_block_size`, the output gate and
  the attention residuals' layer blocks, are read and change no cache); KDA keeps
  `MambaStateShapeCalculator.kda_state_shape(tp, num_heads, head_dim,
  conv_kernel_size=short_conv_kernel_size)`. Weights only (kvplan has no parameter count for
  kimi_linear, so these are unread, declared in config_guard.IRRELEVANT or moot there):
  q_lora_rank, qk_nope_head_dim, v_head_dim, num_key_value_heads (MLA caches no per-head K/V),
  gate_lower_bound, use_full_rank_gate, the MoE keys.

MiniMax-M3 (`model_type` minimax_m3): vLLM models/minimax_m3 `MiniMaxM3SparseAttention` on
  the layers whose `sparse_attention_config.sparse_attention_freq` is not 0
  (`_sparse_attention_layer_ids`), plain GQA (`MiniMaxM3Attention`) elsewhere. Every layer
  caches K and V of num_key_value_heads x head_dim; a sparse layer's indexer also caches one
  key of `sparse_index_dim` elements per token (`MiniMaxM3IndexerCache`, bf16 unless
  --attention-config indexer_kv_dtype says fp8). Compute only, so not read for the cache (the
  top-level ones are declared in config_guard.IRRELEVANT): sparse_topk_blocks,
  sparse_init_block, sparse_local_block, sparse_score_type, partial_rotary_factor /
  rotary_dim. The weights (sparse_num_index_heads, the MoE and dense widths) are read by the
  parameter count, param_count_2026.minimax_m3.
"""

from __future__ import annotations

from typing import Final

from ..errors import SizingError, UnknownLayerKind
from .architecture import (
    FullAttention,
    KimiDeltaAttention,
    Layer,
    LightningAttention,
    MultiHeadLatentAttention,
)
from .config_view import ConfigView
from .config_view import HFConfig as _Cfg

KIMI_LINEAR_TYPES: Final = frozenset({"kimi_linear"})
MINIMAX_M3_TYPES: Final = frozenset({"minimax_m3"})
# MiniMax-Text-01 and MiniMax-M1 (MiniMax-AI/MiniMax-M1 config.json: model_type minimax_m1).
MINIMAX_LIGHTNING_TYPES: Final = frozenset({"minimax_text_01", "minimax_m1"})
# vLLM MiniMaxM3SparseBackend.get_supported_kernel_block_sizes: one sparse block per page.
MINIMAX_M3_SPARSE_BLOCK: Final = 128


def kimi_linear_layers(cfg: _Cfg) -> list[Layer]:
    """MLA and KDA layers in model order (see the module docstring)."""
    n = cfg.layer_count("num_hidden_layers")
    linear = cfg.sub("linear_attn_config")
    if linear is None:
        raise SizingError(
            cfg.where("linear_attn_config"),
            "is required for kimi_linear (kda_layers, full_attn_layers, num_heads, head_dim)",
        )
    kda_ids = _one_based(linear, "kda_layers", n)
    mla_ids = _one_based(linear, "full_attn_layers", n)
    both = kda_ids & mla_ids
    if both:
        raise SizingError(
            linear.where("kda_layers"), f"layer {min(both)} is also in full_attn_layers"
        )
    missing = set(range(1, n + 1)) - kda_ids - mla_ids
    if missing:
        raise SizingError(
            linear.where("full_attn_layers"),
            f"layer {min(missing)} (1-based) is in neither kda_layers nor full_attn_layers",
        )
    heads = linear.get_int("num_heads")
    head_dim = linear.get_int("head_dim")
    kda = KimiDeltaAttention(
        num_key_heads=heads,
        num_value_heads=heads,
        key_head_dim=head_dim,
        value_head_dim=head_dim,
        conv_kernel=linear.get_int("short_conv_kernel_size"),
    )
    mla = MultiHeadLatentAttention(
        kv_lora_rank=cfg.get_int("kv_lora_rank"), qk_rope_head_dim=cfg.get_int("qk_rope_head_dim")
    )
    # Read, and found not to change what a layer caches (module docstring): mla_use_nope
    # leaves the rope part unrotated but still cached; mla_use_output_gate gates the attention
    # output (a projection: weights); attn_res_block_size groups layers for the attention
    # residuals, which mix earlier layers' outputs within one forward pass (no per-token state
    # kept across the sequence).
    cfg.flag("mla_use_nope", False)
    cfg.flag("mla_use_output_gate", False)
    cfg.opt_int("attn_res_block_size")
    return [kda if i + 1 in kda_ids else mla for i in range(n)]


def _one_based(linear: ConfigView, key: str, n: int) -> set[int]:
    ids = linear.int_list(key, minimum=1)
    if ids is None:
        raise SizingError(linear.where(key), "is required (1-based layer numbers)")
    for index, layer in enumerate(ids):
        if layer > n:
            raise SizingError(
                linear.where(f"{key}[{index}]"), f"layer {layer} but num_hidden_layers is {n}"
            )
    if len(set(ids)) != len(ids):
        raise SizingError(linear.where(key), "names a layer twice")
    return set(ids)


def minimax_m3_layers(cfg: _Cfg) -> list[Layer]:
    """GQA on every layer, with an index key on the sparse ones (see the module docstring)."""
    n = cfg.layer_count("num_hidden_layers")
    plain = FullAttention(
        num_kv_heads=cfg.get_int("num_key_value_heads"), head_dim=cfg.get_int("head_dim")
    )
    sparse = cfg.sub("sparse_attention_config")
    if sparse is None:
        return [plain] * n
    freq = _per_layer(sparse, "sparse_attention_freq", n)
    if not sparse.flag("use_sparse_attention", True):
        # vLLM reads only sparse_attention_freq; a config that turns sparse attention off
        # while listing sparse layers is one vLLM would still run sparse.
        if any(freq):
            raise SizingError(
                sparse.where("use_sparse_attention"),
                "is false but sparse_attention_freq lists sparse layers, which vLLM builds "
                "as sparse anyway (models/minimax_m3 _sparse_attention_layer_ids)",
            )
        return [plain] * n
    no_value = _per_layer(sparse, "sparse_disable_index_value", n)
    for index, (is_sparse, disabled) in enumerate(zip(freq, no_value, strict=True)):
        if is_sparse and not disabled:
            raise UnknownLayerKind(
                sparse.where(f"sparse_disable_index_value[{index}]"),
                "is 0: an index value cache is not one vLLM builds (MiniMaxM3SparseAttention "
                "creates no index_v_proj), so kvplan cannot size it as vLLM would",
            )
    block = sparse.get_int("sparse_block_size")
    if block != MINIMAX_M3_SPARSE_BLOCK:
        raise SizingError(
            sparse.where("sparse_block_size"),
            f"is {block}; vLLM's MiniMax-M3 kernels read pages of {MINIMAX_M3_SPARSE_BLOCK} "
            "tokens (MiniMaxM3SparseBackend.get_supported_kernel_block_sizes)",
        )
    indexed = FullAttention(
        num_kv_heads=plain.num_kv_heads,
        head_dim=plain.head_dim,
        indexer_head_dim=sparse.get_int("sparse_index_dim"),
    )
    return [indexed if is_sparse else plain for is_sparse in freq]


def minimax_lightning_layers(cfg: _Cfg) -> list[Layer]:
    """MiniMax-Text-01 / MiniMax-M1: softmax GQA layers beside lightning-attention layers.

    vLLM models/minimax_text_01.py (read in the 0.20.0 and 0.23.0 wheels, the last release
    serving it): `MiniMaxText01Model.__init__` takes the layer kinds from `attn_type_list` (or
    `decoder_attention_types`; else `layer_types`, "linear_attention" 0 and "full_attention"
    1; else every layer softmax). 1 is `MiniMaxText01Attention`: an `Attention` of
    num_key_value_heads x head_dim K and V per token (`sliding_window` is kept on the module
    but not passed to `Attention`, so it changes no cache). 0 is
    `MiniMaxText01LinearAttention`, whose state vLLM sizes from the whole config
    (`MiniMaxText01ForCausalLM.get_mamba_state_shape_from_config`:
    `linear_attention_state_shape(num_heads=num_attention_heads, tp_size, head_dim=head_dim)`,
    one (heads / tp, head_dim, head_dim) tensor per sequence): a `LightningAttention`.
    """
    n = cfg.layer_count("num_hidden_layers")
    kinds = _minimax_attention_types(cfg, n)
    heads = cfg.get_int("num_attention_heads")
    head_dim = cfg.opt_int("head_dim")
    if head_dim is None:
        if 0 in kinds:
            # get_mamba_state_shape_from_config reads hf_config.head_dim, with no fallback.
            raise SizingError(
                cfg.where("head_dim"),
                "is required for lightning-attention layers (vLLM MiniMaxText01ForCausalLM."
                "get_mamba_state_shape_from_config reads it)",
            )
        hidden = cfg.get_int("hidden_size")
        head_dim = hidden // heads  # MiniMaxText01DecoderLayer: hidden_size // heads
    # Read and found not to change the cache: vLLM never hands sliding_window to Attention.
    cfg.raw("sliding_window")
    softmax = FullAttention(num_kv_heads=cfg.get_int("num_key_value_heads"), head_dim=head_dim)
    lightning = LightningAttention.of(heads, head_dim)
    return [softmax if kind == 1 else lightning for kind in kinds]


_MINIMAX_LAYER_TYPES: Final = {"linear_attention": 0, "full_attention": 1}


def _minimax_attention_types(cfg: _Cfg, n: int) -> list[int]:
    for key in ("attn_type_list", "decoder_attention_types"):
        if cfg.raw(key) is None:
            continue
        types = cfg.int_list(key, minimum=0)
        if types is None or len(types) != n or any(t not in (0, 1) for t in types):
            raise SizingError(
                cfg.where(key), f"must list 0 (lightning) or 1 (softmax) for each of {n} layers"
            )
        return types
    names = cfg.str_list("layer_types")
    if names is None:
        return [1] * n  # MiniMaxText01Model: "Default to full attention"
    if len(names) != n:
        raise SizingError(
            cfg.where("layer_types"), f"has {len(names)} entries, num_hidden_layers is {n}"
        )
    for index, name in enumerate(names):
        if name not in _MINIMAX_LAYER_TYPES:
            raise UnknownLayerKind(
                cfg.where(f"layer_types[{index}]"),
                f"{name!r} is not a MiniMax layer type (linear_attention or full_attention)",
            )
    return [_MINIMAX_LAYER_TYPES[name] for name in names]


def _per_layer(view: ConfigView, key: str, n: int) -> list[bool]:
    values = view.int_list(key, minimum=0)
    if values is None:
        raise SizingError(view.where(key), f"is required: one entry per layer ({n})")
    if len(values) != n:
        raise SizingError(view.where(key), f"has {len(values)} entries, num_hidden_layers is {n}")
    return [value != 0 for value in values]


__all__ = [
    "KIMI_LINEAR_TYPES",
    "MINIMAX_LIGHTNING_TYPES",
    "MINIMAX_M3_SPARSE_BLOCK",
    "MINIMAX_M3_TYPES",
    "kimi_linear_layers",
    "minimax_lightning_layers",
    "minimax_m3_layers",
]
