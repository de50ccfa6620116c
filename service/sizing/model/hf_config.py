"""A Hugging Face `config.json` (parsed, as published on the Hub) -> `ModelArchitecture`.

One layer geometry per layer, in order. The rules below restate what transformers (the config
classes that fill in defaults) and vLLM (the engine that allocates the cache) do; each rule names
its source. Anything this module cannot interpret raises `SizingError(field, reason)` where
`field` is the config key (prefixed `text_config.` when the LM config is nested); an unknown layer
type raises `UnknownLayerKind`. Nothing unknown is ever sized as full attention.

Deliberately not counted: DeepSeek/GLM/Nemotron multi-token-prediction layers
(`num_nextn_predict_layers`, `mtp_*`), which vLLM only loads as a speculative draft.

The weights come from the same file: `checkpoint_weights` lists every tensor by class
(`param_count`) and prices it as the checkpoint's quantization stores it (`weight_format`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import SizingError, UnknownLayerKind
from .architecture import (
    AttentionShares,
    ChunkedLocalAttention,
    EncoderGeometry,
    FullAttention,
    GatedDeltaNet,
    Layer,
    Mamba1,
    Mamba2,
    MixtureOfExperts,
    ModelArchitecture,
    MultiHeadLatentAttention,
    NoCache,
    RoutedExperts,
    SlidingWindowAttention,
    WeightSplit,
)
from .config_guard import (
    IRRELEVANT,
    check_cache_keys,
    moot,
    plain_reading_note,
    unread_keys,
)
from .config_view import MAX_LAYERS, NESTED_LM_KEYS
from .config_view import HFConfig as _Cfg
from .context_limit import derived_max_model_len, sglang_context_len
from .dtypes import FloatDtype, parse_float_dtype
from .hf_deepseek_v4 import (
    DEEPSEEK_V4_TYPES,
    V41_TYPES,
    deepseek_v4_layers,
    deepseek_v41_refusal,
    draft_layers,
)
from .hf_hybrids import LFM2_TYPES, lfm2_layers
from .hf_kimi_minimax import (
    KIMI_LINEAR_TYPES,
    MINIMAX_LIGHTNING_TYPES,
    MINIMAX_M3_TYPES,
    kimi_linear_layers,
    minimax_lightning_layers,
    minimax_m3_layers,
)
from .hf_more import MIMO_V2_TYPES, mimo_v2_layers
from .param_count import ParameterCount, count_parameters
from .stage_weights import weight_split
from .tensors import TensorClass
from .towers import encoder_geometry
from .weight_format import (
    CheckpointSize,
    checkpoint_size,
    declared_kv_cache,
    detect_weight_format,
    model_dtype,
    tensor_bytes,
)

_FULL = "full_attention"
_SLIDING = "sliding_attention"
_CHUNKED = "chunked_attention"
_LINEAR = "linear_attention"
_MAMBA = "mamba"
_NO_CACHE = "no_cache"

_FALCON_TYPES: Final = frozenset({"falcon", "RefinedWeb", "RefinedWebModel"})
_GDN_TYPES: Final = frozenset(
    {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
)
_LLAMA4_TYPES: Final = frozenset({"llama4", "llama4_text"})
_GEMMA2_TYPES: Final = frozenset({"gemma2"})
_GEMMA3_TYPES: Final = frozenset({"gemma3", "gemma3_text"})
_GEMMA4_TYPES: Final = frozenset({"gemma4", "gemma4_text"})
_MLA_TYPES: Final = frozenset(
    {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25", "glm_moe_dsa"}
)
# model_types this module has rules for (used only to pick the error field for a config that
# has no attention heads at all).
_KNOWN_TYPES: Final = (
    _FALCON_TYPES
    | _GDN_TYPES
    | _LLAMA4_TYPES
    | _GEMMA2_TYPES
    | _GEMMA3_TYPES
    | _GEMMA4_TYPES
    | _MLA_TYPES
    | KIMI_LINEAR_TYPES
    | MINIMAX_M3_TYPES
    | MINIMAX_LIGHTNING_TYPES
    | {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gpt_oss",
        "phi3",
        "jamba",
        "nemotron_h",
        "granitemoehybrid",
        "minimax_m2",
        "glm4_moe",
        "mimo",
        "gemma",
        "gpt_bigcode",
        "qwen3_vl_text",
        "qwen3_vl_moe_text",
        "step3p7",
    }
    | MIMO_V2_TYPES
    | LFM2_TYPES
    | DEEPSEEK_V4_TYPES
)
# model_types whose cache kvplan reads by rules of their own (or, for Qwen-1, checked to be a
# plain decoder's: vLLM QWenAttention); any other is read as a plain decoder with a warning.
_READ_TYPES: Final = _KNOWN_TYPES | {"qwen"}
_ATTENTION_KEYS: Final = (
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "head_dim",
    "kv_lora_rank",
    "multi_query",
)

# Config keys that announce a layer layout kvplan has no geometry for. Each is a refusal, not a
# guess: sizing these as plain attention would be silently wrong.
_UNSUPPORTED_KEYS: Final[dict[str, str]] = {
    # nvidia Llama-3_3-Nemotron-Super-49B config.json: per-layer heads / no-op attention blocks.
    "block_configs": "per-layer NAS blocks (Nemotron-NAS / DeciLM) vary heads and skip "
    "attention layer by layer",
    # deepseek-ai/DeepSeek-V4 config.json: compressed sparse attention + a 128-token window.
    "compress_ratios": "DeepSeek-V4 compressed sparse attention",
    # Kimi-Linear / Kimi-K3 (model_type kimi_linear) are read by hf_kimi_minimax; elsewhere
    # KDA layers mixed with MLA are not something a reader has placed.
    "linear_attn_config": "Kimi Delta Attention (KDA) linear-attention hybrid",
    # MiniMax-M3 (model_type minimax_m3) is read by hf_kimi_minimax; elsewhere unplaced.
    "sparse_attention_config": "MiniMax sparse attention with an index cache",
}
# The model types whose reader handles one of the keys above.
_READ_BY: Final[dict[str, frozenset[str]]] = {
    "linear_attn_config": KIMI_LINEAR_TYPES,
    "sparse_attention_config": MINIMAX_M3_TYPES,
    "compress_ratios": DEEPSEEK_V4_TYPES - V41_TYPES,
}


# ---------------------------------------------------------------------------------------------
# public API


def architecture_from_hf_config(
    config: Mapping[str, Any],
    *,
    name: str = "",
    num_parameters: int | None = None,
    weight_bytes: int | None = None,
) -> ModelArchitecture:
    """Turn a Hub `config.json` (as a dict) into the layer schedule kvplan sizes.

    The weights come from the config too (`checkpoint_weights`: what the engine loads, MTP
    layers left out) unless the caller gives them; an explicit `num_parameters` or
    `weight_bytes` wins. A config the count cannot read still sizes the cache: the reason is
    kept in `weights_unknown` for the answers that need the weights.
    """
    return _architecture(
        _Cfg(config), config, name=name, num_parameters=num_parameters, weight_bytes=weight_bytes
    )


def unexplained_keys(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The language model's keys kvplan neither reads (for the cache or the weights) nor
    declares irrelevant (`config_guard.IRRELEVANT`, or moot in this config): what a test of the
    published configs fails on. Raises as `architecture_from_hf_config` does."""
    cfg = _Cfg(config)
    _architecture(cfg, config, name="", num_parameters=None, weight_bytes=None)
    return tuple(
        cfg.where(key)
        for key in unread_keys(cfg, cfg.keys_read)
        if key not in IRRELEVANT and moot(cfg, key) is None
    )


def _architecture(
    cfg: _Cfg,
    config: Mapping[str, Any],
    *,
    name: str,
    num_parameters: int | None,
    weight_bytes: int | None,
) -> ModelArchitecture:
    _reject_unsupported(cfg)
    heads = _num_attention_heads(cfg)
    mixers = _mixers(cfg, heads)
    layers = _share_kv(cfg, mixers)
    dtype = model_dtype(cfg)
    state_dtype = _state_dtype(cfg)
    read = cfg.keys_read  # the cache's keys: before the weights' count reads its own
    check_cache_keys(cfg, read)
    unknown: tuple[str, str] | None = None
    routed: RoutedExperts | None = None
    split: WeightSplit | None = None
    shares: AttentionShares | None = None
    moe = _moe(cfg)
    mtp_weight_bytes: int | None = None
    weights: CheckpointWeights | None = None
    # Counted even when the caller gives both totals: the pipeline stages' split needs the
    # tensors (stage_weights.py).
    try:
        weights = _weights(config, cfg, mixers)
    except SizingError as exc:
        if num_parameters is None or weight_bytes is None:
            unknown = (exc.field, exc.reason)
    else:
        mtp_weight_bytes = weights.size.mtp_loaded_bytes or None
        split = weight_split(weights.parameters, weights.tensor_bytes, len(layers))
        routed = _routed_experts(weights) if moe is not None else None
        shares = _attention_shares(weights) if moe is not None else None
    if weights is not None and num_parameters is None:
        num_parameters = weights.parameters.served_total
        if weight_bytes is None:
            # the derived bytes only when the caller gave neither: a given
            # num_parameters is priced by weight_format, as before
            weight_bytes = weights.size.served_bytes
    return ModelArchitecture(
        layers=tuple(layers),
        num_attention_heads=heads,
        dtype=dtype,
        state_dtype=state_dtype,
        hidden_size=_hidden_size(cfg),
        intermediate_size=_widest(cfg, ("intermediate_size",)),
        vocab_size=cfg.opt_int("vocab_size"),
        num_parameters=num_parameters,
        weight_bytes=weight_bytes,
        weight_format=detect_weight_format(config),
        max_position_embeddings=cfg.opt_int("max_position_embeddings"),
        derived_max_model_len=derived_max_model_len(cfg),
        sglang_context_len=sglang_context_len(cfg),
        moe=moe,
        checkpoint_kv_cache=declared_kv_cache(config),
        name=name,
        weights_unknown=unknown,
        config_note=plain_reading_note(cfg, read, _READ_TYPES),
        routed_experts_known=routed,
        num_nextn_predict_layers=_mtp_layers(cfg) if mtp_weight_bytes else 0,
        mtp_weight_bytes=mtp_weight_bytes,
        encoder=_encoder(cfg),
        weight_split=split,
        attention_shares_known=shares,
        mtp_layers=draft_layers(cfg)
        if mtp_weight_bytes and cfg.model_type in DEEPSEEK_V4_TYPES
        else (),
    )


def _mtp_layers(cfg: _Cfg) -> int:
    """The MTP layers vLLM's drafter builds (config/speculative.py SpeculativeConfig
    hf_config_override: n_predict = num_nextn_predict_layers, or Qwen3-Next's
    mtp_num_hidden_layers)."""
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        value = cfg.raw(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _encoder(cfg: _Cfg) -> EncoderGeometry | None:
    """The tower vLLM's encoder profile runs (issue 21); None where it cannot be read."""
    try:
        return encoder_geometry(cfg, _hidden_size(cfg))
    except SizingError:
        return None


@dataclass(frozen=True, slots=True)
class CheckpointWeights:
    """A config's weights: every tensor by class, and the bytes as the checkpoint stores them.

    `parameters.total` / `size.total_bytes` are the whole checkpoint (what
    model.safetensors.index.json's total_size counts); `served_total` / `served_bytes` leave out
    the tensors engines do not load for serving (MTP layers, Falcon's duplicate lm_head).
    """

    parameters: ParameterCount
    size: CheckpointSize
    tensor_bytes: tuple[int, ...]  # each tensor of `parameters`, as stored


def checkpoint_weights(config: Mapping[str, Any]) -> CheckpointWeights:
    """The parameter count and checkpoint bytes a `config.json` describes.

    Raises `SizingError` naming the field the count needs and the config lacks, or the model
    type / tower / quantization scheme kvplan has no rules for.
    """
    cfg = _Cfg(config)
    _reject_unsupported(cfg)
    return _weights(config, cfg, _mixers(cfg, _num_attention_heads(cfg)))


def _routed_experts(weights: CheckpointWeights) -> RoutedExperts | None:
    """The served routed experts (MTP layers' experts are another class, not served)."""
    parameters = weights.parameters.of(TensorClass.ROUTED_EXPERTS)
    if parameters == 0:
        return None
    return RoutedExperts(parameters, weights.size.of(TensorClass.ROUTED_EXPERTS))


def _attention_shares(weights: CheckpointWeights) -> AttentionShares:
    """Attention, embedding and LM-head weights: what SGLang's DP attention cuts by its
    attention-TP group (engines/sglang_dp.py)."""

    def share(cls: TensorClass) -> RoutedExperts:
        return RoutedExperts(weights.parameters.of(cls), weights.size.of(cls))

    return AttentionShares(
        share(TensorClass.ATTENTION), share(TensorClass.EMBEDDING), share(TensorClass.LM_HEAD)
    )


def _weights(config: Mapping[str, Any], cfg: _Cfg, mixers: list[Layer]) -> CheckpointWeights:
    count = count_parameters(cfg, mixers)
    return CheckpointWeights(count, checkpoint_size(config, count), tensor_bytes(config, count))


# ---------------------------------------------------------------------------------------------
# refusals, heads, dtype


def _reject_unsupported(cfg: _Cfg) -> None:
    if cfg.model_type in V41_TYPES:
        raise deepseek_v41_refusal(cfg)
    for key, what in _UNSUPPORTED_KEYS.items():
        if cfg.has(key) and cfg.model_type not in _READ_BY.get(key, ()):
            raise UnknownLayerKind(
                cfg.where(key), f"{what}: kvplan has no cache geometry for this layout"
            )
    # vLLM minimax_text_01: attn_type_list[i] == 0 is lightning (linear) attention, 1 softmax.
    attn_types = cfg.raw("attn_type_list")
    if attn_types is not None and cfg.model_type not in MINIMAX_LIGHTNING_TYPES:
        if not isinstance(attn_types, list):
            raise SizingError(cfg.where("attn_type_list"), "must be a list")
        for index, value in enumerate(attn_types):
            if value != 1 or isinstance(value, bool):
                raise UnknownLayerKind(
                    cfg.where(f"attn_type_list[{index}]"),
                    f"{value!r} is not softmax attention (MiniMax lightning attention is read "
                    "only for model_type minimax_text_01 / minimax_m1)",
                )


def _num_attention_heads(cfg: _Cfg) -> int:
    # transformers FalconConfig / GPTBigCode / MPT attribute_map: n_head, n_heads are aliases.
    for key in ("num_attention_heads", "n_head", "n_heads"):
        if cfg.has(key):
            return cfg.get_int(key)
    if cfg.model_type in _KNOWN_TYPES or any(cfg.has(k) for k in _ATTENTION_KEYS):
        raise SizingError(
            cfg.where("num_attention_heads"),
            "is required and missing (also looked for n_head, n_heads)",
        )
    label = repr(cfg.model_type) if cfg.model_type else "(none)"
    raise SizingError(
        cfg.where("model_type"),
        f"model_type {label} is not one kvplan knows and the config has no attention fields "
        "(num_attention_heads / n_head); attention-free models (pure Mamba, RWKV) are not sized",
    )


def _state_dtype(cfg: _Cfg) -> FloatDtype | None:
    # Qwen3.5/3.6 text_config `mamba_ssm_dtype`; Nemotron-3 `mamba_ssm_cache_dtype`.
    for key in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"):
        found = cfg.top_or_lm(key)
        if found is None:
            continue
        where, value = found
        if not isinstance(value, str):
            raise SizingError(where, f"must be a dtype name, got {value!r}")
        if value == "auto":
            return None
        return parse_float_dtype(value, where)
    if cfg.model_type in KIMI_LINEAR_TYPES:
        # vLLM mamba_utils.py kda_state_dtype: the KDA recurrent state is float32 ("auto").
        return FloatDtype.FLOAT32
    if cfg.model_type == "nemotron_h":
        # vLLM NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32" (used when the
        # HF config has none); transformers NemotronHConfig defaults mamba_ssm_cache_dtype the same.
        return FloatDtype.FLOAT32
    return None


def _hidden_size(cfg: _Cfg) -> int | None:
    # GPT-2/BigCode `n_embd`, RW-Falcon `n_embed` (transformers FalconConfig BC kwarg).
    for key in ("hidden_size", "n_embd", "n_embed", "d_model"):
        if cfg.has(key):
            return cfg.get_int(key)
    return None


# ---------------------------------------------------------------------------------------------
# the layer schedule


def _mixers(cfg: _Cfg, heads: int) -> list[Layer]:
    """Each layer's own geometry, before layers that reuse another layer's K/V are dropped
    (the parameter count still needs their projections)."""
    if cfg.model_type in DEEPSEEK_V4_TYPES:
        return list(deepseek_v4_layers(cfg))
    if cfg.model_type in KIMI_LINEAR_TYPES:
        return kimi_linear_layers(cfg)
    if cfg.model_type in MINIMAX_M3_TYPES:
        return minimax_m3_layers(cfg)
    if cfg.model_type in MINIMAX_LIGHTNING_TYPES:
        return minimax_lightning_layers(cfg)
    if cfg.has("kv_lora_rank"):
        return _mla_layers(cfg)
    if cfg.model_type == "nemotron_h" or cfg.has("hybrid_override_pattern"):
        return _nemotron_h_layers(cfg, heads)
    if cfg.model_type == "jamba":
        return _jamba_layers(cfg, heads)
    if cfg.model_type == "granitemoehybrid":
        return _granite_hybrid_layers(cfg, heads)
    if cfg.model_type in MIMO_V2_TYPES:
        return mimo_v2_layers(cfg)
    if cfg.model_type in LFM2_TYPES:
        return lfm2_layers(cfg)
    return _attention_layers(cfg, heads)


def _num_layers(cfg: _Cfg) -> int:
    if cfg.has("num_layers") and not cfg.has("num_hidden_layers"):
        # meituan-longcat LongCat-Flash: vLLM longcat_flash.py FlashDecoderLayer holds two MLA
        # blocks per layer (docs/engines/vllm.md#architectures-refused-by-name).
        raise UnknownLayerKind(
            cfg.where("num_layers"),
            "a layer count under num_layers (LongCat-Flash: two attention blocks per layer) is "
            "not one kvplan has a reader for",
        )
    # transformers FalconConfig/GPT-2 attribute_map: n_layer is num_hidden_layers.
    key = (
        "n_layer"
        if cfg.has("n_layer") and not cfg.has("num_hidden_layers")
        else "num_hidden_layers"
    )
    return cfg.layer_count(key)


def _head_dim(cfg: _Cfg, heads: int) -> int:
    # Read head_dim first (Qwen3, Gemma, Mistral-Nemo, gpt-oss set it != hidden/heads); the old
    # remote-code NemotronHConfig spells it attention_head_dim; else hidden_size // heads
    # (vLLM LlamaAttention: `head_dim or hidden_size // total_num_heads`).
    for key in ("head_dim", "attention_head_dim"):
        if cfg.has(key):
            return cfg.get_int(key)
    hidden = _hidden_size(cfg)
    if hidden is None:
        raise SizingError(cfg.where("head_dim"), "missing, and no hidden_size to derive it from")
    if hidden % heads:
        raise SizingError(
            cfg.where("head_dim"),
            f"missing, and hidden_size {hidden} is not a multiple of {heads} attention heads",
        )
    return hidden // heads


def _num_kv_heads(cfg: _Cfg, heads: int) -> int:
    if cfg.model_type in _FALCON_TYPES:
        # vLLM FalconAttention: new_decoder_architecture -> num_kv_heads; elif multi_query -> 1;
        # else MHA. FalconConfig defaults multi_query=True and num_kv_heads=num_attention_heads;
        # vLLM RWConfig (RefinedWeb*) spells it n_head_kv (default 1) and forces the new
        # architecture when hidden_size == 8192 (Falcon-40B).
        legacy = cfg.model_type != "falcon"
        new_arch = cfg.flag("new_decoder_architecture", False)
        if legacy and _hidden_size(cfg) == 8192:
            new_arch = True
        if new_arch:
            return cfg.first_int(("num_kv_heads", "n_head_kv"), default=1 if legacy else heads)
        return 1 if cfg.flag("multi_query", True) else heads
    # transformers LlamaConfig & co.: num_key_value_heads None -> num_attention_heads (MHA).
    # GPTBigCode (StarCoder): multi_query=true -> one KV head.
    for key in ("num_key_value_heads", "num_kv_heads", "n_head_kv"):
        if cfg.has(key):
            return cfg.get_int(key)
    if cfg.flag("multi_query", False):
        return 1
    return heads


def _sliding_window(cfg: _Cfg) -> int | None:
    """The window a sliding layer uses, or None when the config disables it."""
    use = cfg.raw("use_sliding_window")
    if use is None and cfg.model_type.startswith("qwen"):
        use = False  # transformers Qwen2Config/Qwen3Config: use_sliding_window defaults False
    if use is not None and not isinstance(use, bool):
        raise SizingError(cfg.where("use_sliding_window"), f"must be true or false, got {use!r}")
    if use is False:
        # vLLM ModelConfig.get_hf_config_sliding_window; Qwen2Config sets sliding_window=None.
        return None
    if "sliding_window" in cfg.lm:
        window = cfg.opt_int("sliding_window")
    else:
        # The key absent means the config class default: MistralConfig/Gemma2Config/
        # Gemma3TextConfig/Qwen2Config sliding_window=4096, Gemma4TextConfig 512.
        window = _DEFAULT_SLIDING_WINDOW.get(cfg.model_type)
    if window is None:
        return None
    bidirectional = cfg.raw("use_bidirectional_attention")
    if (cfg.model_type in _GEMMA3_TYPES and bidirectional is True) or (
        cfg.model_type in _GEMMA4_TYPES and bidirectional == "all"
    ):
        # transformers Gemma3TextConfig / Gemma4TextConfig: bidirectional (embedding) variants
        # use (sliding_window // 2) + 1.
        window = window // 2 + 1
    return window


_DEFAULT_SLIDING_WINDOW: Final[dict[str, int]] = {
    "mistral": 4096,
    "gemma2": 4096,
    "gemma3": 4096,
    "gemma3_text": 4096,
    "gemma4": 512,
    "gemma4_text": 512,
    "qwen2": 4096,
    "qwen2_moe": 4096,
    "qwen3": 4096,
    "qwen3_moe": 4096,
}


def _layer_types(cfg: _Cfg, n: int) -> list[str]:
    """One of full/sliding/chunked/linear attention per layer, before geometry."""
    explicit = cfg.str_list("layer_types")
    if explicit is not None:
        # An explicit list always wins (transformers `layer_types`, validated to num_hidden_layers).
        if len(explicit) != n:
            raise SizingError(
                cfg.where("layer_types"), f"has {len(explicit)} entries, num_hidden_layers is {n}"
            )
        accepted = {_FULL, _SLIDING, _CHUNKED, _LINEAR}
        for index, kind in enumerate(explicit):
            if kind not in accepted:
                raise UnknownLayerKind(
                    cfg.where(f"layer_types[{index}]"),
                    f"unknown layer type {kind!r}; kvplan reads only {', '.join(sorted(accepted))}",
                )
        if cfg.model_type in _GEMMA4_TYPES and explicit and explicit[-1] != _FULL:
            explicit[-1] = _FULL  # transformers Gemma4TextConfig forces the last layer global
        return explicit
    mt = cfg.model_type
    if mt in _GDN_TYPES:
        # transformers Qwen3NextConfig / Qwen3_5TextConfig: layer i is full attention iff
        # (i + 1) % full_attention_interval == 0 (default 4), the rest Gated DeltaNet.
        interval = cfg.get_int("full_attention_interval", default=4)
        return [_FULL if (i + 1) % interval == 0 else _LINEAR for i in range(n)]
    if mt in _LLAMA4_TYPES:
        return _llama4_layer_types(cfg, n)
    if mt in _GEMMA2_TYPES:
        # transformers Gemma2Config: "sliding_attention" if (i + 1) % 2 else "full" -> even
        # layers (0, 2, ...) slide, odd layers are global.
        return [_SLIDING if (i + 1) % 2 else _FULL for i in range(n)]
    if mt in _GEMMA4_TYPES:
        # transformers Gemma4TextConfig: fixed pattern 6 (5 local : 1 global), last layer global.
        kinds = [_SLIDING if (i + 1) % 6 else _FULL for i in range(n)]
        kinds[-1] = _FULL
        return kinds
    if mt in _GEMMA3_TYPES or cfg.has("sliding_window_pattern"):
        # transformers Gemma3TextConfig (and Cohere2Config): sliding_window_pattern (default 6)
        # -> layer i slides unless (i + 1) % pattern == 0: every 6th layer is global.
        pattern = cfg.get_int("sliding_window_pattern", default=6)
        return [_SLIDING if (i + 1) % pattern else _FULL for i in range(n)]
    if mt.startswith("qwen") and _sliding_window(cfg) is not None:
        # transformers Qwen2Config: with use_sliding_window, layers i >= max_window_layers
        # (default 28) slide and the first max_window_layers keep full attention.
        first = cfg.get_int("max_window_layers", default=28, minimum=0)
        return [_SLIDING if i >= first else _FULL for i in range(n)]
    if _sliding_window(cfg) is not None:
        # No per-layer list: vLLM Attention falls back to cache_config.sliding_window on every
        # layer (Mistral-7B-v0.1: 4096 on all 32 layers; Phi-3-mini-4k: 2047 on all 32).
        return [_SLIDING] * n
    return [_FULL] * n


def _llama4_layer_types(cfg: _Cfg, n: int) -> list[str]:
    # transformers Llama4TextConfig: no_rope_layers[i] == 1 -> the layer uses RoPE and chunked
    # local attention; 0 -> NoPE global layer. Default: int((i + 1) % no_rope_layer_interval != 0)
    # with interval 4, so every 4th layer (3, 7, ...) is global.
    flags = cfg.raw("no_rope_layers")
    if flags:
        if not isinstance(flags, list) or len(flags) < n:
            raise SizingError(
                cfg.where("no_rope_layers"), f"must list 0/1 for each of the {n} layers"
            )
        kinds = []
        for index, flag in enumerate(flags[:n]):
            if flag not in (0, 1) or isinstance(flag, bool):
                raise SizingError(cfg.where(f"no_rope_layers[{index}]"), "must be 0 or 1")
            kinds.append(_CHUNKED if flag else _FULL)
        return kinds
    interval = cfg.get_int("no_rope_layer_interval", default=4)
    return [_CHUNKED if (i + 1) % interval else _FULL for i in range(n)]


def _attention_layers(cfg: _Cfg, heads: int) -> list[Layer]:
    n = _num_layers(cfg)
    kinds = _layer_types(cfg, n)
    made: dict[str, Layer] = {}

    def layer_for(index: int, kind: str) -> Layer:
        if kind not in made:
            made[kind] = _attention_geometry(cfg, heads, kind, index)
        return made[kind]

    return [layer_for(i, kind) for i, kind in enumerate(kinds)]


def _share_kv(cfg: _Cfg, mixers: list[Layer]) -> list[Layer]:
    shared = cfg.opt_int("num_kv_shared_layers", minimum=0) or 0
    first_shared = len(mixers) - shared
    if not shared or first_shared <= 0:
        return mixers
    # transformers Gemma4TextAttention (and Gemma 3n): layers >= num_hidden_layers -
    # num_kv_shared_layers reuse an earlier layer's K/V; vLLM gives layers with a
    # kv_sharing_target_layer_name no cache of their own.
    return mixers[:first_shared] + [NoCache()] * shared


def _attention_geometry(cfg: _Cfg, heads: int, kind: str, index: int) -> Layer:
    if kind == _LINEAR:
        return _gated_delta_net(cfg, index)
    head_dim = _head_dim(cfg, heads)
    kv_heads = _num_kv_heads(cfg, heads)
    if kind == _FULL and cfg.model_type in _GEMMA4_TYPES:
        # transformers Gemma4TextAttention: global layers use global_head_dim (config default
        # 512) and, when attention_k_eq_v, num_global_key_value_heads. K and V are still cached
        # separately (V = v_norm(k_proj(x)) without RoPE, K gets k_norm + RoPE).
        head_dim = cfg.get_int("global_head_dim", default=512)
        if cfg.flag("attention_k_eq_v", False):
            kv_heads = cfg.get_int("num_global_key_value_heads")
    if kind == _SLIDING:
        window = _sliding_window(cfg)
        if window is None:
            # A sliding layer whose window is null/disabled attends to everything
            # (transformers: sliding_window None -> full causal mask).
            return FullAttention(num_kv_heads=kv_heads, head_dim=head_dim)
        return SlidingWindowAttention(
            num_kv_heads=kv_heads, head_dim=head_dim, sliding_window=window
        )
    if kind == _CHUNKED:
        if "attention_chunk_size" in cfg.lm:
            chunk = cfg.opt_int("attention_chunk_size")
        elif cfg.model_type in _LLAMA4_TYPES:
            chunk = 8192  # transformers Llama4TextConfig default attention_chunk_size
        else:
            raise SizingError(
                cfg.where("attention_chunk_size"), "is required for chunked_attention layers"
            )
        if chunk is None:
            # vLLM Llama4Attention: chunked local attention only when attention_chunk_size is set.
            return FullAttention(num_kv_heads=kv_heads, head_dim=head_dim)
        return ChunkedLocalAttention(
            num_kv_heads=kv_heads, head_dim=head_dim, attention_chunk_size=chunk
        )
    return FullAttention(num_kv_heads=kv_heads, head_dim=head_dim)


def _gated_delta_net(cfg: _Cfg, index: int) -> GatedDeltaNet:
    # transformers Qwen3NextConfig / Qwen3_5TextConfig linear-attention keys; vLLM
    # MambaStateShapeCalculator.gated_delta_net_state_shape reads the same five numbers.
    if cfg.model_type not in _GDN_TYPES and not cfg.has("linear_num_key_heads"):
        raise UnknownLayerKind(
            cfg.where(f"layer_types[{index}]"),
            "linear_attention without Gated DeltaNet geometry (linear_num_key_heads, ...): "
            "kvplan cannot size this linear-attention variant",
        )
    return GatedDeltaNet(
        num_key_heads=cfg.get_int("linear_num_key_heads"),
        num_value_heads=cfg.get_int("linear_num_value_heads"),
        key_head_dim=cfg.get_int("linear_key_head_dim"),
        value_head_dim=cfg.get_int("linear_value_head_dim"),
        conv_kernel=cfg.get_int("linear_conv_kernel_dim"),
    )


def _mla_layers(cfg: _Cfg) -> list[Layer]:
    # DeepSeek V2/V3/V3.2, Kimi K2, GLM-5: vLLM MLAAttentionSpec caches one latent of
    # kv_lora_rank + qk_rope_head_dim per token per layer; num_key_value_heads is irrelevant.
    # Only num_hidden_layers count: the num_nextn_predict_layers MTP layer is a draft model.
    n = _num_layers(cfg)
    layer = MultiHeadLatentAttention(
        kv_lora_rank=cfg.get_int("kv_lora_rank"), qk_rope_head_dim=cfg.get_int("qk_rope_head_dim")
    )
    if cfg.has("index_topk"):
        # DeepSeek sparse attention: vLLM keys its indexer cache on `index_topk` being present
        # (models/config.py DeepseekV32ForCausalLM); index_head_dim defaults to 128 in the
        # DeepSeek-V3.2 and GLM-5 configs.
        indexed = MultiHeadLatentAttention(
            layer.kv_lora_rank,
            layer.qk_rope_head_dim,
            indexer_head_dim=cfg.get_int("index_head_dim", default=128),
        )
        owners = cfg.str_list("indexer_types")
        layers: list[Layer] = [indexed] * n
        if owners is not None:
            # GLM-5.2: "shared" layers reuse another layer's top-k and keep no indexer keys.
            if len(owners) != n:
                raise SizingError(
                    cfg.where("indexer_types"),
                    f"has {len(owners)} entries, num_hidden_layers is {n}",
                )
            unknown = [o for o in owners if o not in ("full", "shared")]
            if unknown:
                raise SizingError(
                    cfg.where("indexer_types"), f"unknown indexer type {unknown[0]!r}"
                )
            layers = [indexed if o == "full" else layer for o in owners]
    else:
        layers = [layer] * n
    explicit = cfg.str_list("layer_types")
    if explicit is not None:
        # GLM-5.2 lists "deepseek_sparse_attention" (MLA + DSA indexer) on every layer.
        if len(explicit) != n:
            raise SizingError(
                cfg.where("layer_types"), f"has {len(explicit)} entries, num_hidden_layers is {n}"
            )
        for index, kind in enumerate(explicit):
            if kind not in (_FULL, "deepseek_sparse_attention"):
                raise UnknownLayerKind(
                    cfg.where(f"layer_types[{index}]"),
                    f"unknown layer type {kind!r} in an MLA model",
                )
    return layers


def _no_window(cfg: _Cfg, family: str) -> None:
    if cfg.has("sliding_window"):
        raise SizingError(
            cfg.where("sliding_window"),
            f"a sliding window on {family} attention layers is not "
            "something kvplan knows how to place",
        )


def _plain_attention(cfg: _Cfg, heads: int) -> FullAttention:
    return FullAttention(num_kv_heads=_num_kv_heads(cfg, heads), head_dim=_head_dim(cfg, heads))


def _nemotron_h_layers(cfg: _Cfg, heads: int) -> list[Layer]:
    # NemotronHConfig (remote code and transformers): hybrid_override_pattern, one character per
    # block: M = Mamba2 mixer, * = attention, - = MLP, E = MoE (MLP/MoE keep no state). Newer
    # configs (Nemotron-3 Ultra) give layers_block_type = ["mamba", "attention", "moe", ...].
    pattern = cfg.raw("hybrid_override_pattern")
    symbols = {"M": _MAMBA, "*": _FULL, "-": _NO_CACHE, "E": _NO_CACHE}
    names = {"mamba": _MAMBA, "attention": _FULL, "mlp": _NO_CACHE, "moe": _NO_CACHE}
    key = "hybrid_override_pattern"
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise SizingError(cfg.where(key), "must be a non-empty string of M, *, -, E")
        if len(pattern) > MAX_LAYERS:
            raise SizingError(
                cfg.where(key), f"has {len(pattern)} blocks: kvplan reads at most {MAX_LAYERS}"
            )
        kinds = []
        for index, char in enumerate(pattern):
            if char not in symbols:
                raise UnknownLayerKind(
                    cfg.where(f"{key}[{index}]"),
                    f"unknown block {char!r}; Nemotron-H blocks are M, *, -, E",
                )
            kinds.append(symbols[char])
    else:
        key = "layers_block_type"
        blocks = cfg.str_list(key)
        if not blocks:
            raise SizingError(
                cfg.where("hybrid_override_pattern"),
                "is required for nemotron_h (or layers_block_type)",
            )
        kinds = []
        for index, block in enumerate(blocks):
            if block not in names:
                raise UnknownLayerKind(
                    cfg.where(f"{key}[{index}]"),
                    f"unknown block {block!r}; Nemotron-H blocks are mamba, attention, mlp, moe",
                )
            kinds.append(names[block])
    stated = cfg.opt_int("num_hidden_layers")
    if stated is not None and stated != len(kinds):
        raise SizingError(
            cfg.where(key), f"has {len(kinds)} blocks but num_hidden_layers is {stated}"
        )
    _no_window(cfg, "Nemotron-H")
    attention = _plain_attention(cfg, heads)
    mamba: Layer | None = None
    if _MAMBA in kinds:
        # vLLM NemotronHMambaDecoderLayer -> MambaMixer2(num_heads=mamba_num_heads,
        # head_dim=mamba_head_dim, ssm_state_size, n_groups, conv_kernel_size=conv_kernel).
        mamba = Mamba2(
            num_heads=cfg.get_int("mamba_num_heads"),
            head_dim=cfg.get_int("mamba_head_dim"),
            state_size=cfg.get_int("ssm_state_size"),
            n_groups=cfg.first_int(("n_groups", "mamba_n_groups")),
            conv_kernel=cfg.first_int(("conv_kernel", "mamba_d_conv")),
        )
    return [_pick(kind, attention, mamba) for kind in kinds]


def _pick(kind: str, attention: Layer, mamba: Layer | None) -> Layer:
    if kind == _FULL:
        return attention
    if kind == _MAMBA and mamba is not None:
        return mamba
    return NoCache()


def _jamba_layers(cfg: _Cfg, heads: int) -> list[Layer]:
    n = _num_layers(cfg)
    blocks = cfg.str_list("layers_block_type")
    if blocks is not None:
        if len(blocks) != n:
            raise SizingError(
                cfg.where("layers_block_type"),
                f"has {len(blocks)} entries, num_hidden_layers is {n}",
            )
        for index, block in enumerate(blocks):
            if block not in ("attention", "mamba"):
                raise UnknownLayerKind(
                    cfg.where(f"layers_block_type[{index}]"),
                    f"unknown block {block!r}; Jamba blocks are attention or mamba",
                )
        kinds = [_FULL if block == "attention" else _MAMBA for block in blocks]
    else:
        # transformers JambaConfig.layers_block_type: layer i is attention iff
        # i % attn_layer_period == attn_layer_offset (defaults 8 and 4), else Mamba.
        period = cfg.get_int("attn_layer_period", default=8)
        offset = cfg.get_int("attn_layer_offset", default=4, minimum=0)
        kinds = [_FULL if i % period == offset else _MAMBA for i in range(n)]
    _no_window(cfg, "Jamba")
    attention = _plain_attention(cfg, heads)
    hidden = _hidden_size(cfg)
    if hidden is None:
        raise SizingError(cfg.where("hidden_size"), "is required for Jamba's Mamba width")
    # vLLM JambaMambaDecoderLayer -> MambaMixer(intermediate_size=mamba_expand * hidden_size,
    # ssm_state_size=mamba_d_state, conv_kernel_size=mamba_d_conv); JambaConfig defaults 2/16/4.
    mamba = Mamba1(
        intermediate_size=cfg.get_int("mamba_expand", default=2) * hidden,
        state_size=cfg.get_int("mamba_d_state", default=16),
        conv_kernel=cfg.get_int("mamba_d_conv", default=4),
    )
    return [_pick(kind, attention, mamba) for kind in kinds]


def _granite_hybrid_layers(cfg: _Cfg, heads: int) -> list[Layer]:
    # transformers GraniteMoeHybridConfig: layer_types (alias layers_block_type) of "mamba" /
    # "attention"; absent -> every layer Mamba.
    n = _num_layers(cfg)
    key = "layer_types" if cfg.has("layer_types") else "layers_block_type"
    blocks = cfg.str_list(key)
    if blocks is None:
        blocks = ["mamba"] * n
    if len(blocks) != n:
        raise SizingError(cfg.where(key), f"has {len(blocks)} entries, num_hidden_layers is {n}")
    for index, block in enumerate(blocks):
        if block not in ("attention", "mamba"):
            raise UnknownLayerKind(
                cfg.where(f"{key}[{index}]"),
                f"unknown layer type {block!r}; Granite 4.0-H layers are mamba or attention",
            )
    _no_window(cfg, "Granite 4.0-H")
    attention = _plain_attention(cfg, heads)
    # GraniteMoeHybridConfig defaults: mamba_n_heads 128, mamba_n_groups 1, mamba_d_state 256,
    # mamba_d_conv 4, mamba_expand 2, mamba_d_head "auto" = mamba_expand * hidden // mamba_n_heads.
    n_heads = cfg.get_int("mamba_n_heads", default=128)
    d_head_raw = cfg.raw("mamba_d_head")
    if d_head_raw is None or d_head_raw == "auto":
        hidden = _hidden_size(cfg)
        if hidden is None:
            raise SizingError(cfg.where("mamba_d_head"), "is auto but hidden_size is missing")
        inner = cfg.get_int("mamba_expand", default=2) * hidden
        if inner % n_heads:
            raise SizingError(cfg.where("mamba_n_heads"), "must divide mamba_expand * hidden_size")
        d_head = inner // n_heads
    else:
        d_head = cfg.check_int("mamba_d_head", d_head_raw)
    mamba = Mamba2(
        num_heads=n_heads,
        head_dim=d_head,
        state_size=cfg.get_int("mamba_d_state", default=256),
        n_groups=cfg.get_int("mamba_n_groups", default=1),
        conv_kernel=cfg.get_int("mamba_d_conv", default=4),
    )
    return [attention if block == "attention" else mamba for block in blocks]


# ---------------------------------------------------------------------------------------------
# mixture of experts


def _widest(cfg: _Cfg, keys: tuple[str, ...]) -> int | None:
    """The first of `keys` the config has, where a per-layer list (Gemma-3n's
    `intermediate_size`, Hunyuan-A13B's `moe_topk`) reads as its largest entry: these fields
    price weights and the activation peak (the widest layer), never the cache, so a list
    must not refuse the config (issue 19 item 3; the parameter count, which needs each
    layer's width, reports its own `weights_unknown`)."""
    for key in keys:
        if not cfg.has(key):
            continue
        if isinstance(cfg.raw(key), list):
            widths = cfg.int_list(key, minimum=1) or []
            if not widths:
                raise SizingError(cfg.where(key), "is an empty list")
            return max(widths)
        return cfg.get_int(key)
    return None


def _widest_required(cfg: _Cfg, keys: tuple[str, ...]) -> int:
    found = _widest(cfg, keys)
    return cfg.first_int(keys) if found is None else found  # first_int raises, naming keys[0]


def _moe(cfg: _Cfg) -> MixtureOfExperts | None:
    experts_key = next(
        (k for k in ("num_experts", "num_local_experts", "n_routed_experts") if cfg.has(k)), None
    )
    if experts_key is None:
        return None
    experts = cfg.get_int(experts_key, minimum=0)
    if experts <= 1:
        return None  # dense configs that carry the key as 0 (Granite 4.0-H micro) or 1
    # gpt-oss spells both num_experts_per_tok and experts_per_token; Gemma 4 top_k_experts.
    per_token = _widest_required(
        cfg,
        (
            "num_experts_per_tok",
            "num_experts_per_token",
            "experts_per_token",
            "moe_topk",
            "top_k_experts",
        ),
    )
    # Mixtral, gpt-oss, Jamba and Llama 4 size experts with intermediate_size.
    expert_size = _widest_required(cfg, ("moe_intermediate_size", "intermediate_size"))
    shared = 0
    for key in (
        "shared_expert_intermediate_size",
        "moe_shared_expert_intermediate_size",
        "shared_intermediate_size",
        "share_expert_dim",
    ):
        if cfg.has(key):
            shared = cfg.get_int(key, minimum=0)
            break
    else:
        if cfg.has("n_shared_experts") or cfg.has("num_shared_experts"):
            # DeepSeek: n_shared_experts experts of moe_intermediate_size each; Kimi-Linear /
            # Kimi-K3 spell it num_shared_experts (KimiLinearConfig).
            key = "n_shared_experts" if cfg.has("n_shared_experts") else "num_shared_experts"
            shared = cfg.get_int(key, minimum=0) * expert_size
        elif cfg.model_type in _LLAMA4_TYPES:
            # transformers Llama4TextMoe: one shared expert of intermediate_size in every MoE layer.
            shared = expert_size
    return MixtureOfExperts(
        num_experts=experts,
        experts_per_token=per_token,
        moe_intermediate_size=expert_size,
        shared_expert_intermediate_size=shared,
    )


__all__ = [
    "NESTED_LM_KEYS",
    "CheckpointWeights",
    "architecture_from_hf_config",
    "checkpoint_weights",
    "detect_weight_format",
    "unexplained_keys",
]
