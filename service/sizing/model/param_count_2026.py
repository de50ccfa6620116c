"""Parameter-count rules for 2026 layouts the generic decoder in `param_count` does not cover.

Each rule writes the tensors of the checkpoint as vLLM's model file names and shapes them (the
file and class are named beside each rule, paths under `vllm/model_executor/models/`). They
follow `param_count`'s conventions: `count` experts alike are written once as expert 0, and
multi-token-prediction tensors the checkpoint holds but vLLM loads only as a speculative draft
are `served=False`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SizingError
from .architecture import (
    FullAttention,
    KimiDeltaAttention,
    Layer,
    MultiHeadLatentAttention,
    ShortConv,
    SlidingWindowAttention,
)
from .config_view import HFConfig
from .tensors import TensorClass, TensorList

_A = TensorClass.ATTENTION
_N = TensorClass.NORM


def mimo_v2(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    """XiaomiMiMo MiMo-V2-Flash (vLLM mimo_v2.py `MiMoV2Model`, `MiMoV2FlashDecoderLayer`).

    Per layer: `MiMoV2Attention` with q/k/v_proj (the checkpoint's names, stacked into
    qkv_proj by `MiMoV2Model.load_weights`), K of head_dim and V of v_head_dim, o_proj from
    heads x v_head_dim; sliding layers use the swa_* heads and, with
    add_swa_attention_sink_bias, one `attention_sink_bias` per head. Then `MiMoV2MoE` (gate,
    its e_score_correction_bias, n_routed_experts gated experts of moe_intermediate_size, no
    shared expert) where moe_layer_freq[i] is set, else `MiMoV2MLP` of intermediate_size; an
    input and a post-attention RMSNorm. `MiMoV2Model.load_weights` skips every name with
    "mtp": the config does not say how many MTP layers the checkpoint stores, so none are
    counted (the published total includes them; the test states the residual).
    """
    h = cfg.get_int("hidden_size")
    vocab = cfg.get_int("vocab_size")
    out.embedding("model.embed_tokens", TensorClass.EMBEDDING, vocab, h)
    if not cfg.flag("tie_word_embeddings", False):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)
    freq = cfg.int_list("moe_layer_freq")
    if freq is None or len(freq) != len(mixers):
        raise SizingError(
            cfg.where("moe_layer_freq"), f"must list one 0/1 per layer ({len(mixers)} layers)"
        )
    bias = cfg.flag("attention_bias", False)
    sinks = cfg.flag("add_swa_attention_sink_bias", False)
    for i, mixer in enumerate(mixers):
        p = f"model.layers.{i}"
        sliding = isinstance(mixer, SlidingWindowAttention)
        if not isinstance(mixer, FullAttention | SlidingWindowAttention):
            raise SizingError(cfg.where("hybrid_layer_pattern"), f"layer {i} is not attention")
        heads = cfg.get_int("swa_num_attention_heads" if sliding else "num_attention_heads")
        hd, kv = mixer.head_dim, mixer.num_kv_heads
        vd = mixer.v_head_dim if mixer.v_head_dim is not None else hd
        a = f"{p}.self_attn"
        out.linear(f"{a}.q_proj", _A, heads * hd, h, bias=bias)
        out.linear(f"{a}.k_proj", _A, kv * hd, h, bias=bias)
        out.linear(f"{a}.v_proj", _A, kv * vd, h, bias=bias)
        out.linear(f"{a}.o_proj", _A, h, heads * vd)
        if sliding and sinks:
            out.vector(f"{a}.attention_sink_bias", _A, (heads,))
        out.norm(f"{p}.input_layernorm", _N, h)
        out.norm(f"{p}.post_attention_layernorm", _N, h)
        if freq[i]:
            e = cfg.get_int("n_routed_experts")
            inter = cfg.get_int("moe_intermediate_size")
            router, experts = TensorClass.ROUTER, TensorClass.ROUTED_EXPERTS
            out.linear(f"{p}.mlp.gate", router, e, h)
            out.vector(f"{p}.mlp.gate.e_score_correction_bias", router, (e,))
            _gated(out, f"{p}.mlp.experts.0", experts, h, inter, count=e)
        else:
            _gated(out, f"{p}.mlp", TensorClass.MLP, h, cfg.get_int("intermediate_size"))
    out.norm("model.norm", _N, h)


def lfm2(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    """LiquidAI LFM2 / LFM2.5 (vLLM 0.33.0 lfm2.py `Lfm2Model`, `Lfm2ForCausalLM`).

    `embed_tokens` (vocab x hidden); `lm_head` always tied to it (`Lfm2ForCausalLM.__init__`
    calls `tie_weights` whatever the config says). Per layer an `operator_norm` and a
    `ffn_norm` (hidden), then `Lfm2MLP` of `block_dim` (w1/w3 gate and up, w2 down, no bias)
    whose width is transformers `Lfm2Config.intermediate_size` (`block_ff_dim` when the config
    has it) cut by `block_auto_adjust_ff_dim`: int(2 x width / 3), times
    `block_ffn_dim_multiplier`, rounded up to `block_multiple_of`. An attention layer
    (`Lfm2Attention`) has q/k/v of heads x head_dim (head_dim = hidden / heads), `out_proj`,
    and per-head-dim `q_layernorm` / `k_layernorm`; a conv layer (layers/mamba/short_conv.py
    `ShortConv`) has `in_proj` (conv_dim -> 3 x conv_dim), a depthwise `conv` of conv_L_cache
    taps per channel and `out_proj` (conv_dim -> conv_dim), each with a bias when
    `conv_bias`. Then the final `embedding_norm`.
    """
    h = cfg.get_int("hidden_size")
    vocab = cfg.get_int("vocab_size")
    out.embedding("model.embed_tokens", TensorClass.EMBEDDING, vocab, h)
    width = _lfm2_ff_width(cfg)
    # vLLM Lfm2MLP reads config.block_dim (transformers 4.57 Lfm2Config has no such field, so
    # it comes from config.json); the MLP reads and writes the residual stream, so a loadable
    # checkpoint has block_dim == hidden_size, which stands in when the key is absent.
    dim = cfg.get_int("block_dim") if cfg.raw("block_dim") is not None else h
    conv_bias = cfg.flag("conv_bias", False)
    heads = cfg.get_int("num_attention_heads")
    for i, mixer in enumerate(mixers):
        p = f"model.layers.{i}"
        if isinstance(mixer, ShortConv):
            c, conv = mixer.intermediate_size, TensorClass.CONV_STATE
            s = f"{p}.conv"
            out.linear(f"{s}.in_proj", TensorClass.LINEAR_ATTENTION, 3 * c, c, bias=conv_bias)
            out.vector(f"{s}.conv.weight", conv, (c, 1, mixer.conv_kernel))
            if conv_bias:
                out.vector(f"{s}.conv.bias", conv, (c,))
            out.linear(f"{s}.out_proj", TensorClass.LINEAR_ATTENTION, c, c, bias=conv_bias)
        elif isinstance(mixer, FullAttention):
            hd, kv = mixer.head_dim, mixer.num_kv_heads
            a = f"{p}.self_attn"
            out.linear(f"{a}.q_proj", _A, heads * hd, h)
            out.linear(f"{a}.k_proj", _A, kv * hd, h)
            out.linear(f"{a}.v_proj", _A, kv * hd, h)
            out.linear(f"{a}.out_proj", _A, h, heads * hd)
            out.norm(f"{a}.q_layernorm", _N, hd)
            out.norm(f"{a}.k_layernorm", _N, hd)
        else:
            raise SizingError(cfg.where("layer_types"), f"layer {i} is neither conv nor attention")
        out.norm(f"{p}.operator_norm", _N, h)
        out.norm(f"{p}.ffn_norm", _N, h)
        f = f"{p}.feed_forward"
        out.linear(f"{f}.w1", TensorClass.MLP, width, dim)
        out.linear(f"{f}.w3", TensorClass.MLP, width, dim)
        out.linear(f"{f}.w2", TensorClass.MLP, dim, width)
    out.norm("model.embedding_norm", _N, h)


def _lfm2_ff_width(cfg: HFConfig) -> int:
    # transformers 4.57.1 Lfm2Config.__init__: intermediate_size = kwargs.get("block_ff_dim",
    # intermediate_size), block_multiple_of 256, block_ffn_dim_multiplier 1.0 and
    # block_auto_adjust_ff_dim True by default; vLLM lfm2.py Lfm2MLP.__init__ applies them.
    key = "block_ff_dim" if cfg.raw("block_ff_dim") is not None else "intermediate_size"
    width = cfg.get_int(key)
    if not cfg.flag("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    multiplier = cfg.raw("block_ffn_dim_multiplier")
    if multiplier is not None:
        if not isinstance(multiplier, int | float) or isinstance(multiplier, bool):
            raise SizingError(cfg.where("block_ffn_dim_multiplier"), "must be a number")
        width = int(multiplier * width)
    multiple = cfg.get_int("block_multiple_of") if cfg.raw("block_multiple_of") else 256
    return multiple * ((width + multiple - 1) // multiple)


def kimi_k3(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    """Moonshot Kimi-K3's text model, `model_type` kimi_linear (vLLM 0.33.0
    models/kimi_k3/nvidia/model.py `KimiLinearModel`, `KimiDecoderLayer`, `KimiMoE`; names as
    the checkpoint stores them, which `KimiLinearForCausalLM.load_weights` stacks).

    - KDA layers with `use_full_rank_gate` (nvidia/kda.py `KimiK3DeltaAttention`, P = heads x
      head_dim): q/k/v/g_proj (hidden -> P each), f_a_proj (hidden -> head_dim) and b_proj
      (hidden -> heads), f_b_proj (head_dim -> P), q/k/v_conv1d (P x 1 x conv taps),
      dt_bias (P), A_log (heads), o_norm (head_dim), o_proj (P -> hidden). Kimi-Linear's
      low-rank gate (`KimiLinearGatedDeltaNetAttention`) has no rules here yet.
    - MLA layers with q_lora_rank and `mla_use_output_gate` (nvidia/mla.py
      `MultiHeadLatentAttention`, one `KimiK3MergedQKVGateLinear`): q_a_proj (hidden ->
      q_lora_rank), kv_a_proj_with_mqa (hidden -> kv_lora_rank + rope), g_proj (hidden ->
      heads x v_head_dim), q_a_layernorm, q_b_proj (q_lora_rank -> heads x (nope + rope)),
      kv_a_layernorm, kv_b_proj (kv_lora_rank -> heads x (nope + v)), o_proj.
    - Layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0, else
      `KimiMLP` of intermediate_size. `KimiMoE`: the router gate (num_experts x hidden) and its
      float32 e_score_correction_bias; shared experts of moe_intermediate_size x
      num_shared_experts at hidden; with routed_expert_hidden_size (latent MoE) a
      routed_expert_down_proj (hidden -> latent), a routed_expert_norm when
      latent_moe_use_norm, a routed_expert_up_proj (latent -> hidden), and num_experts gated
      experts (w1/w3/w2) of moe_intermediate_size at the latent width.
    - With attn_res_block_size (attention residuals): per layer self_attention_res_norm,
      mlp_res_norm and two hidden -> 1 projections; after the last layer
      output_attn_res_norm and output_attn_res_proj. These and the router gate are built
      without quantization, so a quantized checkpoint keeps them in the model dtype.
    - input/post_attention RMSNorms, the final norm, embed_tokens and lm_head (untied unless
      tie_word_embeddings). num_nextn_predict_layers MTP layers are not counted.
    """
    h = cfg.get_int("hidden_size")
    vocab = cfg.get_int("vocab_size")
    out.embedding("model.embed_tokens", TensorClass.EMBEDDING, vocab, h)
    if not cfg.flag("tie_word_embeddings", False):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)
    first_dense = cfg.get_int("first_k_dense_replace", default=0, minimum=0)
    freq = cfg.get_int("moe_layer_freq", default=1)
    res_block = cfg.raw("attn_res_block_size")
    for i, mixer in enumerate(mixers):
        p = f"model.layers.{i}"
        if isinstance(mixer, KimiDeltaAttention):
            _kimi_k3_kda(cfg, out, f"{p}.self_attn", h)
        elif isinstance(mixer, MultiHeadLatentAttention):
            _kimi_k3_mla(cfg, out, f"{p}.self_attn", h, mixer)
        else:
            raise SizingError(cfg.where("linear_attn_config"), f"layer {i} is neither KDA nor MLA")
        out.norm(f"{p}.input_layernorm", _N, h)
        out.norm(f"{p}.post_attention_layernorm", _N, h)
        if i >= first_dense and i % freq == 0:
            _kimi_k3_moe(cfg, out, f"{p}.block_sparse_moe", h)
        else:
            _gated(out, f"{p}.mlp", TensorClass.MLP, h, cfg.get_int("intermediate_size"))
        if res_block is not None:
            out.norm(f"{p}.self_attention_res_norm", _N, h)
            out.norm(f"{p}.mlp_res_norm", _N, h)
            out.vector(f"{p}.self_attention_res_proj.weight", _N, (1, h))
            out.vector(f"{p}.mlp_res_proj.weight", _N, (1, h))
    out.norm("model.norm", _N, h)
    if res_block is not None:
        out.norm("model.output_attn_res_norm", _N, h)
        out.vector("model.output_attn_res_proj.weight", _N, (1, h))


def _kimi_k3_kda(cfg: HFConfig, out: TensorList, a: str, h: int) -> None:
    kda = cfg.sub("linear_attn_config")
    if kda is None:
        raise SizingError(cfg.where("linear_attn_config"), "is required for KDA layers")
    if not kda.flag("use_full_rank_gate", False):
        raise SizingError(
            kda.where("use_full_rank_gate"),
            "Kimi-Linear's low-rank KDA gate (vLLM KimiLinearGatedDeltaNetAttention) has no "
            "parameter-count rules in kvplan yet; pass num_parameters and weight_bytes",
        )
    hd, heads = kda.get_int("head_dim"), kda.get_int("num_heads")
    taps = kda.get_int("short_conv_kernel_size")
    p, cls, conv = hd * heads, TensorClass.LINEAR_ATTENTION, TensorClass.CONV_STATE
    for name in ("q_proj", "k_proj", "v_proj", "g_proj"):
        out.linear(f"{a}.{name}", cls, p, h)
    out.linear(f"{a}.f_a_proj", cls, hd, h)
    out.linear(f"{a}.b_proj", cls, heads, h)
    out.linear(f"{a}.f_b_proj", cls, p, hd)
    for name in ("q_conv1d", "k_conv1d", "v_conv1d"):
        out.vector(f"{a}.{name}.weight", conv, (p, 1, taps))
    out.vector(f"{a}.dt_bias", conv, (p,))
    out.vector(f"{a}.A_log", conv, (heads,))
    out.norm(f"{a}.o_norm", _N, hd)
    out.linear(f"{a}.o_proj", cls, h, p)


def _kimi_k3_mla(
    cfg: HFConfig, out: TensorList, a: str, h: int, mla: MultiHeadLatentAttention
) -> None:
    heads = cfg.get_int("num_attention_heads")
    q_lora = cfg.get_int("q_lora_rank")
    nope, v = cfg.get_int("qk_nope_head_dim"), cfg.get_int("v_head_dim")
    kv, rope = mla.kv_lora_rank, mla.qk_rope_head_dim
    if not cfg.flag("mla_use_output_gate", False):
        raise SizingError(
            cfg.where("mla_use_output_gate"),
            "Kimi MLA without the output gate has no parameter-count rules in kvplan yet",
        )
    out.linear(f"{a}.q_a_proj", _A, q_lora, h)
    out.linear(f"{a}.kv_a_proj_with_mqa", _A, kv + rope, h)
    out.linear(f"{a}.g_proj", _A, heads * v, h)
    out.norm(f"{a}.q_a_layernorm", _N, q_lora)
    out.linear(f"{a}.q_b_proj", _A, heads * (nope + rope), q_lora)
    out.norm(f"{a}.kv_a_layernorm", _N, kv)
    out.linear(f"{a}.kv_b_proj", _A, heads * (nope + v), kv)
    out.linear(f"{a}.o_proj", _A, h, heads * v)


def _kimi_k3_moe(cfg: HFConfig, out: TensorList, m: str, h: int) -> None:
    e = cfg.get_int("num_experts")
    inter = cfg.get_int("moe_intermediate_size")
    router = TensorClass.ROUTER
    # Kept in the model dtype: vLLM builds the gate (GateLinear) and the residual projections
    # (ReplicatedLinear, quant_config=None) unquantized, so the checkpoint stores them so.
    out.vector(f"{m}.gate.weight", router, (e, h))
    out.vector(f"{m}.gate.e_score_correction_bias", router, (e,))
    shared = cfg.get_int("num_shared_experts", default=0, minimum=0)
    if shared:
        _gated(out, f"{m}.shared_experts", TensorClass.SHARED_EXPERTS, h, inter * shared)
    width = h
    if cfg.raw("routed_expert_hidden_size") is not None:
        width = cfg.get_int("routed_expert_hidden_size")
        out.linear(f"{m}.routed_expert_down_proj", TensorClass.ROUTED_EXPERTS, width, h)
        if cfg.flag("latent_moe_use_norm", False):
            out.norm(f"{m}.routed_expert_norm", _N, width)
        out.linear(f"{m}.routed_expert_up_proj", TensorClass.ROUTED_EXPERTS, h, width)
    experts = TensorClass.ROUTED_EXPERTS
    out.linear(f"{m}.experts.0.w1", experts, inter, width, count=e)
    out.linear(f"{m}.experts.0.w3", experts, inter, width, count=e)
    out.linear(f"{m}.experts.0.w2", experts, width, inter, count=e)


def _gated(
    out: TensorList, name: str, cls: TensorClass, hidden: int, inter: int, *, count: int = 1
) -> None:
    # vLLM MergedColumnParallelLinear gate_up_proj, loaded from the checkpoint's gate_proj and
    # up_proj (hidden -> intermediate each), and down_proj (intermediate -> hidden).
    out.linear(f"{name}.gate_proj", cls, inter, hidden, count=count)
    out.linear(f"{name}.up_proj", cls, inter, hidden, count=count)
    out.linear(f"{name}.down_proj", cls, hidden, inter, count=count)


__all__ = ["kimi_k3", "lfm2", "mimo_v2"]
