"""Never silently wrong: a config's cache geometry comes only from keys kvplan read.

`hf_config` reads a config through `HFConfig`, which remembers every key it looked up
(`config_view.RecordedKeys`). Once the layer schedule is built, `check_cache_keys` refuses the
config by name (`UnknownLayerKind`, field = the key) when it carries a key known to change the
KV cache that the reader for its `model_type` did not read: sizing it as a plain decoder would
answer a wrong number with no warning (Step-3.5's `num_attention_groups` read as 8x the KV heads,
Ling-linear's `layer_group_size` read as every layer attending). A key is a cache key when it
is named in `CACHE_KEYS` or starts with one of `CACHE_KEY_PREFIXES`; a cache key a reader
rightly leaves alone is either declared in `IRRELEVANT` (with the reason) or moot in this config
(`_moot`: a switch turns it off, or another key supersedes it).

A `model_type` kvplan has no reader for is read as a plain decoder (the transformers keys every
decoder shares) only when no unread cache key is left, and the answer says which keys were read
(`plain_reading_note`). `tests/sizing/test_config_keys.py` runs every committed fixture and fails
on any key neither read nor declared irrelevant here. What vLLM does with the architectures this
refuses: docs/engines/vllm.md#architectures-refused-by-name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..errors import UnknownLayerKind
from .config_view import HFConfig

# Keys whose value changes what a layer caches, with what they change. Per-layer schedules,
# head counts and sizes, windows, shared-KV and compression keys.
CACHE_KEYS: Final[Mapping[str, str]] = {
    "num_attention_groups": "the KV head count of Step-3.x attention (vLLM step3p5 / step3_text)",
    "layer_group_size": "Ling/Ring linear: one softmax layer per group, the rest linear attention",
    "compress_ratios": "DeepSeek-V4 per-layer compression",
    "kv_source_layer_ids": "layers that reuse another layer's K/V",
    "num_kv_shared_layers": "layers that reuse another layer's K/V",
    "layer_types": "the per-layer attention schedule",
    "layers_block_type": "the per-layer block schedule",
    "hybrid_override_pattern": "the per-layer block schedule",
    "hybrid_layer_pattern": "the per-layer attention schedule",
    "attn_type_list": "the per-layer attention schedule",
    "full_attn_idxs": "the layers that attend (the rest keep another state)",
    "block_configs": "per-layer blocks",
    "no_rope_layers": "the per-layer chunked/global schedule",
    "indexer_types": "which layers keep indexer keys",
    "full_attention_interval": "the per-layer attention schedule",
    "sliding_window_pattern": "the per-layer attention schedule",
    "max_window_layers": "which layers slide",
    "use_sliding_window": "whether layers slide",
    "sliding_window": "the window a sliding layer keeps",
    "attention_window": "the window a sliding layer keeps",
    "attention_chunk_size": "the chunk a chunked layer keeps",
    "num_layers": "the layer count",
    "num_key_value_heads": "the KV head count",
    "num_kv_heads": "the KV head count",
    "n_head_kv": "the KV head count",
    "multi_query": "the KV head count",
    "multi_query_group_num": "the KV head count",
    "num_key_value_groups": "the KV head count",
    "head_dim": "the K/V head size",
    "v_head_dim": "the V head size",
    "kv_channels": "the K/V head size",
    "global_head_dim": "the head size of global layers",
    "num_global_key_value_heads": "the KV head count of global layers",
    "attention_k_eq_v": "the KV head count of global layers",
    "qk_rope_head_dim": "the MLA latent size",
    "qk_nope_head_dim": "the MLA head size",
    "use_mla": "whether attention is MLA",
    "conv_L_cache": "the short-convolution state",
    # tencent Hunyuan-A13B config.json (use_cla false there): cross-layer attention.
    "use_cla": "cross-layer attention: layers share K/V",
    "cla_share_factor": "cross-layer attention: how many layers share one K/V",
}
CACHE_KEY_PREFIXES: Final = (
    "swa_",
    "mamba_",
    "ssm_",
    "linear_",
    "attn_",
    "sliding_",
    "kv_",
    "index_",
    "compress",
    "mla_",
    "lightning_",
    "conv_",
)

_NOT_CACHE: Final = "names, ids and bookkeeping: no tensor shape"
_TRAINING: Final = "training-time setting: no effect on inference shapes"
_NUMERICS: Final = "a value inside the computation (norm, activation, scale): no shape"
_POSITIONS: Final = (
    "rotary/positional setting: changes values, not what a token caches (the context limit "
    "comes from max_position_embeddings)"
)
_ROUTING: Final = "MoE routing: which experts run, not the cache or the weights' size"
_VISION: Final = (
    "vision or multimodal front end (its tower is priced from vision_config; no per-token cache)"
)

# transformers PretrainedConfig writes its generation and export defaults into every config it
# saves (Kimi-K3's text_config carries them verbatim): none is read by a model's layers.
_SAVED_DEFAULTS: Final = (
    "transformers PretrainedConfig's saved generation/export default: no tensor shape"
)
_WEIGHTS: Final = "weights only: which layers are dense or MoE, and how wide (no cache)"
_MTP: Final = "the MTP draft layers, which kvplan does not count (hf_config module docstring)"

# Keys kvplan never reads that do not change the cache, each with the reason. The fixture test
# (tests/sizing/test_config_keys.py) fails on a key that is neither read nor listed here.
IRRELEVANT: Final[Mapping[str, str]] = {
    **dict.fromkeys(
        (
            "_name_or_path",
            "architectures",
            "auto_map",
            "transformers_version",
            "tokenizer_class",
            "tokenizer_type",
            "tokenizer_model_max_length",
            "tokenizer_padding_side",
            "bos_token_id",
            "eos_token_id",
            "pad_token_id",
            "badwordsids",
            "use_cache",
            "bf16",
            "fp16",
            "fp32",
            "onnx_safe",
            "use_flash_attn",
            "use_cache_kernel",
            "use_mamba_kernels",
            "num_logits_to_keep",
            "output_router_logits",
            "ep_size",
            "pretraining_tp",
        ),
        _NOT_CACHE,
    ),
    **dict.fromkeys(
        (
            "attention_dropout",
            "attn_dropout_prob",
            "embd_pdrop",
            "resid_pdrop",
            "emb_dropout_prob",
            "hidden_dropout",
            "initializer_range",
            "rescale_prenorm_residual",
            "router_aux_loss_coef",
            "router_jitter_noise",
            "time_step_floor",
            "time_step_limit",
            "time_step_max",
            "time_step_min",
            "mm_projector_lr",
            "mm_vision_tower_lr",
            "mm_tunable_parts",
        ),
        _TRAINING,
    ),
    **dict.fromkeys(
        (
            "hidden_act",
            "hidden_activation",
            "mamba_hidden_act",
            "mlp_hidden_act",
            "rms_norm_eps",
            "layer_norm_eps",
            "layer_norm_epsilon",
            "layer_norm_type",
            "attention_layer_norm",
            "norm_after",
            "residual_in_fp32",
            "softmax_in_fp32",
            "scale_attn_weights",
            "attn_logit_softcapping",
            "final_logit_softcapping",
            "query_pre_attn_scalar",
            "clip_qkv",
            "swiglu_limit",
            "use_qk_norm",
            "use_logn_attn",
            "output_gate_type",
            "attn_output_gate",
            "mamba_proj_bias",
            "mamba_conv_bias",
            "alibi",
            "no_bias",
            "attention_bias",
        ),
        _NUMERICS,
    ),
    **dict.fromkeys(
        (
            "rope_theta",
            "rope_scaling",
            "rope_parameters",
            "rope_local_base_freq",
            "rotary_emb_base",
            "rotary_pct",
            "partial_rotary_factor",
            "use_dynamic_ntk",
            "use_mrope",
            "use_position_ids",
            "seq_length",
            "max_sequence_length",
            "initial_context_length",
            "use_pos_skipping",
            "pos_skipping_range",
        ),
        _POSITIONS,
    ),
    **dict.fromkeys(
        (
            "n_group",
            "topk_group",
            "topk_method",
            "scoring_func",
            "routed_scaling_factor",
            "norm_topk_prob",
            "experts_per_token",
        ),
        _ROUTING,
    ),
    **dict.fromkeys(
        (
            "add_faster_video",
            "add_time_instruction",
            "faster_token_stride",
            "force_sample",
            "image_aspect_ratio",
            "image_crop_resolution",
            "image_grid_pinpoints",
            "image_split_resolution",
            "mm_hidden_size",
            "mm_newline_position",
            "mm_patch_merge_type",
            "mm_projector_type",
            "mm_resampler_type",
            "mm_spatial_pool_mode",
            "mm_spatial_pool_stride",
            "mm_use_im_patch_token",
            "mm_use_im_start_end",
            "mm_vision_select_feature",
            "mm_vision_select_layer",
            "mm_vision_tower",
            "siglip_config",
            "use_mm_proj",
            "vision_tower_pretrained",
        ),
        _VISION,
    ),
    # Mamba-2 kernels' scan chunk and the Nemotron-H `expand` (mamba_num_heads x mamba_head_dim
    # already give the inner width vLLM NemotronHMambaDecoderLayer uses).
    "chunk_size": "the Mamba-2 scan's chunk length: a kernel setting, not the state's size",
    "expand": "Nemotron-H: the inner width is mamba_num_heads x mamba_head_dim, which are read",
    "time_step_rank": "Mamba dt projection rank: weights only, and not the state's size",
    "mamba_dt_rank": "Mamba dt projection rank: weights only, and not the state's size",
    # vLLM DeepseekV32IndexerCache keeps one index_head_dim key per token, whatever the heads.
    "index_n_heads": "the indexer's query heads: its cache holds one key per token",
    # Weights-only keys no reader needs (the weights come from the keys that give the shapes).
    "intermediate_size_mlp": "Llama 4 dense-MLP width: weights, priced from intermediate_size",
    "mlp_only_layers": "which layers use a dense MLP instead of experts: weights, not the cache",
    "vocab_size_per_layer_input": "Gemma per-layer input embeddings: weights, not the cache",
    "lm_head": "DeepSeek-OCR head switch: weights, not the cache",
    "rm_head": "DeepSeek-OCR reward head switch: weights, not the cache",
    "q_lora_rank": "MLA query compression: weights, not the cached latent",
    "mtp_use_dedicated_embeddings": "the MTP draft's embeddings: vLLM loads MTP only as a draft",
    "tie_word_embeddings": "weights only (the parameter count reads it where its rules need it)",
    "quantization_config": "the weights' format (weight_format reads it from the top level)",
    # Qwen-1 remote code's int8 KV cache: vLLM's QWenLMHeadModel (models/qwen.py) has no such
    # path and caches in the model dtype.
    "use_cache_quantization": "Qwen-1 remote-code int8 cache: vLLM does not implement it",
    # LiquidAI LFM2 config.json keys vLLM 0.33.0 models/lfm2.py does not read for the cache
    # (hf_hybrids.lfm2_layers reads conv_dim, conv_L_cache, layer_types / full_attn_idxs).
    "conv_bias": "LFM2 short convolution's bias: weights, not the conv state's size",
    "conv_dim_out": "LFM2 out_proj width: weights; vLLM sizes the conv state from conv_dim",
    "conv_use_xavier_init": _TRAINING,
    "block_use_xavier_init": _TRAINING,
    "block_mlp_init_scale": _TRAINING,
    "block_out_init_scale": _TRAINING,
    "use_pos_enc": _POSITIONS,
    **dict.fromkeys(
        (
            "block_auto_adjust_ff_dim",
            "block_dim",
            "block_ff_dim",
            "block_ffn_dim_multiplier",
            "block_multiple_of",
            "block_use_swiglu",
        ),
        "LFM2 feed-forward shape: weights, not the cache",
    ),
    "block_norm_eps": _NUMERICS,
    "norm_eps": _NUMERICS,
    "num_heads": "LFM2's copy of num_attention_heads, which is read (vLLM Lfm2Attention)",
    # Keys of the 2026 fixtures (Kimi-K3, MiniMax-M3, DeepSeek-V4, GLM-5.3) their readers do not
    # need: weights of model types kvplan gives no parameter count for, numerics, routing.
    **dict.fromkeys(
        (
            "add_cross_attention",
            "chunk_size_feed_forward",
            "diversity_penalty",
            "do_sample",
            "early_stopping",
            "encoder_no_repeat_ngram_size",
            "id2label",
            "is_decoder",
            "is_encoder_decoder",
            "label2id",
            "length_penalty",
            "max_length",
            "min_length",
            "no_repeat_ngram_size",
            "num_beam_groups",
            "num_beams",
            "num_return_sequences",
            "output_attentions",
            "output_hidden_states",
            "output_scores",
            "pruned_heads",
            "remove_invalid_values",
            "repetition_penalty",
            "return_dict",
            "return_dict_in_generate",
            "temperature",
            "tf_legacy_loss",
            "tie_encoder_decoder",
            "top_k",
            "top_p",
            "torchscript",
            "typical_p",
            "use_bfloat16",
        ),
        _SAVED_DEFAULTS,
    ),
    **dict.fromkeys(
        (
            "first_k_dense_replace",
            "moe_layer_freq",
            "mlp_layer_types",
            "dense_intermediate_size",
            "routed_expert_hidden_size",
            "latent_moe_use_norm",
            "expert_dtype",
            "o_groups",
            "o_lora_rank",
        ),
        _WEIGHTS,
    ),
    **dict.fromkeys(
        ("num_nextn_predict_layers", "num_mtp_modules", "index_share_for_mtp_iteration"), _MTP
    ),
    **dict.fromkeys(
        (
            "num_expert_group",
            "use_grouped_topk",
            "moe_renormalize",
            "moe_router_activation_func",
            "moe_router_dtype",
            "use_routing_bias",
            "num_hash_layers",
        ),
        _ROUTING,
    ),
    **dict.fromkeys(
        (
            "activation_situ_beta",
            "activation_situ_linear_beta",
            "swiglu_alpha",
            "qk_norm_type",
            "use_gemma_norm",
            "attention_output_gate",
            "hc_eps",
            "hc_mult",
            "hc_sinkhorn_iters",
        ),
        _NUMERICS,
    ),
    **dict.fromkeys(
        ("rotary_dim", "rope_interleave", "indexer_rope_interleave", "compress_rope_theta"),
        _POSITIONS,
    ),
    "qk_head_dim": "qk_nope_head_dim + qk_rope_head_dim, which are read: weights, not the cache",
    "n_shared_experts": "weights: read where no shared-expert width key (shared_intermediate_size)"
    " gives the shared experts' size",
    # XiaomiMiMo MiMo-V2-Flash (vLLM mimo_v2.py MiMoV2DecoderLayer / MiMoV2Attention).
    "swa_rope_theta": _POSITIONS,
    "swa_num_attention_heads": "the sliding layers' query heads: K/V heads and sizes are read",
    "attention_value_scale": _NUMERICS,
    "add_swa_attention_sink_bias": "a learned logit per query head (attention sinks): no cache",
    "add_full_attention_sink_bias": "a learned logit per query head (attention sinks): no cache",
    "layernorm_epsilon": _NUMERICS,
    # NVIDIA Nemotron 3 Super / Ultra (read as nemotron_h; vLLM nemotron_h.py); their
    # `norm_eps` is declared with LFM2's above.
    "moe_shared_expert_overlap": "whether the shared expert runs beside the routed ones: a"
    " schedule, not a weight or the cache",
    "mtp_hybrid_override_pattern": _MTP,
    "mtp_layers_block_type": _MTP,
    # MiniMax-M1 / Text-01 (vLLM 0.20.0 models/minimax_text_01.py MiniMaxText01DecoderLayer):
    # the residual scales of each block's norm, whether the norm's output or input is the
    # residual (postnorm), and how the shared expert's output is mixed (shared_moe_mode, with
    # shared_intermediate_size 0 in M1): numerics and weights, not the cache.
    **dict.fromkeys(
        (
            "layernorm_full_attention_alpha",
            "layernorm_full_attention_beta",
            "layernorm_linear_attention_alpha",
            "layernorm_linear_attention_beta",
            "layernorm_mlp_alpha",
            "layernorm_mlp_beta",
            "postnorm",
        ),
        _NUMERICS,
    ),
    "shared_moe_mode": "how the shared expert's output is mixed (MiniMax-M1 sigmoid): weights"
    " and numerics, not the cache",
    # stepfun-ai Step-3.7-Flash as ai-dynamo/aiconfigurator keeps it (read as step3p7).
    "use_moe_router_bias": _ROUTING,
    "moe_router_scaling_factor": _ROUTING,
}

# A cache key that this config switches off or that another key supersedes: (why, test).
_Moot = tuple[str, Callable[[HFConfig], bool]]


def _value(cfg: HFConfig, key: str) -> Any:
    return cfg.recorded.unrecorded.get(key)


def _off(cfg: HFConfig, key: str) -> bool:
    return _value(cfg, key) is False


def _expand_agrees(cfg: HFConfig) -> bool:
    values = [_value(cfg, key) for key in ("mamba_expand", "hidden_size", "mamba_n_heads")]
    values.append(_value(cfg, "mamba_d_head"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return False
    expand, hidden, heads, head_dim = values
    return bool(expand * hidden == heads * head_dim)


def _mla_family(cfg: HFConfig) -> bool:
    """A DeepSeek-style config: it names kv_lora_rank (null when MLA is off)."""
    return "kv_lora_rank" in cfg.recorded.unrecorded


_MOOT: Final[Mapping[str, _Moot]] = {
    # vLLM ModelConfig.get_hf_config_sliding_window: use_sliding_window false -> no window.
    "sliding_window": (
        "use_sliding_window is false",
        lambda cfg: _off(cfg, "use_sliding_window"),
    ),
    "max_window_layers": (
        "use_sliding_window is false",
        lambda cfg: _off(cfg, "use_sliding_window"),
    ),
    # transformers: an explicit layer_types list wins over the interval that would build it.
    "full_attention_interval": (
        "layer_types lists every layer",
        lambda cfg: _value(cfg, "layer_types") is not None,
    ),
    "sliding_window_pattern": (
        "layer_types lists every layer",
        lambda cfg: _value(cfg, "layer_types") is not None,
    ),
    # vLLM MLAAttentionSpec caches one latent; the per-head counts and sizes do not enter it.
    "num_key_value_heads": (
        "MLA caches the latent (kv_lora_rank)",
        lambda cfg: _value(cfg, "kv_lora_rank") is not None,
    ),
    "head_dim": (
        "MLA caches the latent (kv_lora_rank)",
        lambda cfg: _value(cfg, "kv_lora_rank") is not None,
    ),
    # GLM-5.3: the indexer pattern keys build indexer_types, which lists every layer.
    "index_topk_freq": (
        "indexer_types lists every layer",
        lambda cfg: _value(cfg, "indexer_types") is not None,
    ),
    "index_skip_topk_offset": (
        "indexer_types lists every layer",
        lambda cfg: _value(cfg, "indexer_types") is not None,
    ),
    "index_topk_pattern": (
        "indexer_types lists every layer",
        lambda cfg: _value(cfg, "indexer_types") is not None,
    ),
    "v_head_dim": ("MLA caches the latent (kv_lora_rank) or MLA is off", _mla_family),
    "qk_nope_head_dim": ("MLA caches the latent (kv_lora_rank) or MLA is off", _mla_family),
    # vLLM DeepseekV2: no kv_lora_rank -> DeepseekAttention (MHA), the MLA sizes unused.
    "qk_rope_head_dim": (
        "kv_lora_rank is null: MLA is off",
        lambda cfg: _mla_family(cfg) and _value(cfg, "kv_lora_rank") is None,
    ),
    "use_sliding_window": ("false: no layer slides", lambda cfg: _off(cfg, "use_sliding_window")),
    # vLLM MambaMixer2 sizes its state from num_heads x head_dim; expand x hidden is the same.
    "mamba_expand": (
        "mamba_expand x hidden_size equals mamba_n_heads x mamba_d_head, which are read",
        _expand_agrees,
    ),
    # Hunyuan-A13B's remote code shares K/V across layers only when use_cla is true.
    "cla_share_factor": ("use_cla is false", lambda cfg: _off(cfg, "use_cla")),
    "use_cla": ("false: every layer keeps its own K/V", lambda cfg: _off(cfg, "use_cla")),
    # vLLM FalconAttention: new_decoder_architecture -> num_kv_heads, multi_query unused.
    "multi_query": (
        "new_decoder_architecture is true",
        lambda cfg: _value(cfg, "new_decoder_architecture") is True,
    ),
    # vLLM QWenAttention (models/qwen.py): head_dim = hidden_size // total_num_heads.
    "kv_channels": (
        "vLLM's Qwen-1 attention takes hidden_size // num_attention_heads",
        lambda cfg: cfg.model_type == "qwen",
    ),
    "use_mla": (
        "kv_lora_rank decides MLA (vLLM ModelConfig.is_deepseek_mla)",
        _mla_family,
    ),
    # Phi-3's LongRoPE (vLLM rotary_embedding get_rope, Phi3LongRoPEScaledRotaryEmbedding) reads
    # it only under rope_scaling; microsoft/phi-4 publishes it beside rope_scaling null.
    "original_max_position_embeddings": (
        "rope_scaling is null: no scaling reads it",
        lambda cfg: _value(cfg, "rope_scaling") is None,
    ),
}


def is_cache_key(key: str) -> bool:
    return key in CACHE_KEYS or key.startswith(CACHE_KEY_PREFIXES)


def moot(cfg: HFConfig, key: str) -> str | None:
    """Why `key` does not matter in this config, or None when it does (or is not moot)."""
    rule = _MOOT.get(key)
    if rule is None:
        return None
    why, test = rule
    return why if test(cfg) else None


def unread_keys(cfg: HFConfig, read: frozenset[str]) -> list[str]:
    """The language model's keys (with a value) that were not read, in the config's order."""
    data = cfg.recorded.unrecorded
    return [key for key in data if key not in read and data[key] is not None]


def check_cache_keys(cfg: HFConfig, read: frozenset[str]) -> None:
    """Refuse by name a cache key the reader left unread (never sized as if it were absent)."""
    for key in unread_keys(cfg, read):
        if not is_cache_key(key) or key in IRRELEVANT or moot(cfg, key) is not None:
            continue
        what = CACHE_KEYS.get(key, "a key of this family changes the KV cache")
        label = repr(cfg.model_type) if cfg.model_type else "(none)"
        raise UnknownLayerKind(
            cfg.where(key),
            f"{what}; kvplan's reading of model_type {label} does not use this key, so it "
            "refuses the config rather than size its cache wrong",
        )


def plain_reading_note(cfg: HFConfig, read: frozenset[str], known: frozenset[str]) -> str | None:
    """For a model_type with no reader of its own: the warning naming the keys that were read."""
    if cfg.model_type in known:
        return None
    data = cfg.recorded.unrecorded
    present = [key for key in data if key in read and data[key] is not None]
    label = repr(cfg.model_type) if cfg.model_type else "(none)"
    return (
        f"model_type {label} has no reader of its own in kvplan: its cache is sized as a plain "
        f"decoder's from {', '.join(present)} (no other key of this config changes the cache "
        "as far as kvplan knows); check them against the model's attention"
    )


__all__ = [
    "CACHE_KEYS",
    "CACHE_KEY_PREFIXES",
    "IRRELEVANT",
    "check_cache_keys",
    "is_cache_key",
    "moot",
    "plain_reading_note",
    "unread_keys",
]
