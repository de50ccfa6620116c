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
from .architecture import FullAttention, Layer, ShortConv, SlidingWindowAttention
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
    # transformers Lfm2Config.__init__: intermediate_size = kwargs.get("block_ff_dim",
    # intermediate_size); vLLM lfm2.py Lfm2MLP.__init__ applies the auto-adjust.
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


def _gated(
    out: TensorList, name: str, cls: TensorClass, hidden: int, inter: int, *, count: int = 1
) -> None:
    # vLLM MergedColumnParallelLinear gate_up_proj, loaded from the checkpoint's gate_proj and
    # up_proj (hidden -> intermediate each), and down_proj (intermediate -> hidden).
    out.linear(f"{name}.gate_proj", cls, inter, hidden, count=count)
    out.linear(f"{name}.up_proj", cls, inter, hidden, count=count)
    out.linear(f"{name}.down_proj", cls, hidden, inter, count=count)


__all__ = ["lfm2", "mimo_v2"]
