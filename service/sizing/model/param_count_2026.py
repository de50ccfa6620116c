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
    CompressedSparseAttention,
    FullAttention,
    KimiDeltaAttention,
    Layer,
    LightningAttention,
    MultiHeadLatentAttention,
    ShortConv,
    SlidingWindowAttention,
)
from .config_view import HFConfig
from .tensors import Tensor, TensorClass, TensorList

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


__all__ = ["deepseek_v4", "kimi_k3", "lfm2", "mimo_v2", "minimax_m1", "minimax_m3"]


def minimax_m1(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    """MiniMax-Text-01 / MiniMax-M1 (vLLM 0.23.0 models/minimax_text_01.py; the checkpoint's
    names as its `load_weights` reads them).

    `MiniMaxText01ForCausalLM`: embed_tokens and an untied lm_head (vocab x hidden). Per
    layer (`MiniMaxText01DecoderLayer`): a lightning layer (`MiniMaxText01LinearAttention`:
    qkv_proj hidden -> 3 x heads x head_dim, output_gate hidden -> heads x head_dim,
    out_proj back to hidden, a norm of heads x head_dim) or a softmax layer
    (`MiniMaxText01Attention`: q/k/v/o_proj of num_attention_heads / num_key_value_heads x
    head_dim), input_layernorm and post_attention_layernorm, and `MiniMaxText01MoE`: a gate
    of num_local_experts x hidden stored in float32 (`ReplicatedLinear(...,
    params_dtype=torch.float32)`; M1's model.safetensors.index.json total_size counts it at
    4 B) and num_local_experts experts w1/w3 (hidden -> intermediate_size) and w2. The final
    norm. A shared expert (shared_intermediate_size > 0) is not read: refused by name.
    """
    if cfg.opt_int("shared_intermediate_size", minimum=0):
        raise SizingError(
            cfg.where("shared_intermediate_size"),
            "kvplan counts MiniMax-Text-01 / M1 without a shared expert (0 in the published "
            "configs); pass num_parameters and weight_bytes",
        )
    h = cfg.get_int("hidden_size")
    vocab = cfg.get_int("vocab_size")
    out.embedding("model.embed_tokens", TensorClass.EMBEDDING, vocab, h)
    if not cfg.flag("tie_word_embeddings", False):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)
    heads = cfg.get_int("num_attention_heads")
    e = cfg.get_int("num_local_experts")
    inter = cfg.get_int("intermediate_size")
    experts = TensorClass.ROUTED_EXPERTS
    for i, mixer in enumerate(mixers):
        p = f"model.layers.{i}"
        a = f"{p}.self_attn"
        if isinstance(mixer, LightningAttention):
            width = mixer.num_key_heads * mixer.key_head_dim
            lin = TensorClass.LINEAR_ATTENTION
            out.linear(f"{a}.qkv_proj", lin, 3 * width, h)
            out.linear(f"{a}.output_gate", lin, width, h)
            out.linear(f"{a}.out_proj", lin, h, width)
            out.norm(f"{a}.norm", _N, width)
        elif isinstance(mixer, FullAttention):
            hd, kv = mixer.head_dim, mixer.num_kv_heads
            out.linear(f"{a}.q_proj", _A, heads * hd, h)
            out.linear(f"{a}.k_proj", _A, kv * hd, h)
            out.linear(f"{a}.v_proj", _A, kv * hd, h)
            out.linear(f"{a}.o_proj", _A, h, heads * hd)
        else:
            raise SizingError(cfg.where("attn_type_list"), f"layer {i} is not MiniMax's")
        out.norm(f"{p}.input_layernorm", _N, h)
        out.norm(f"{p}.post_attention_layernorm", _N, h)
        m = f"{p}.block_sparse_moe"
        out.linear(f"{m}.gate", TensorClass.ROUTER, e, h, float32=True)
        out.linear(f"{m}.experts.0.w1", experts, inter, h, count=e)
        out.linear(f"{m}.experts.0.w3", experts, inter, h, count=e)
        out.linear(f"{m}.experts.0.w2", experts, h, inter, count=e)
    out.norm("model.norm", _N, h)


def minimax_m3(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    """MiniMax-M3's text trunk (vLLM 0.33.0 models/minimax_m3/nvidia/model.py).

    `MiniMaxM3SparseForCausalLM`: embed_tokens and an untied lm_head (vocab x hidden). Per
    layer (`MiniMaxM3DecoderLayer`): q/k/v/o_proj of num_attention_heads / num_key_value_heads x
    head_dim (`MiniMaxM3Attention`), a per-head q_norm and k_norm; on the layers
    `sparse_attention_config.sparse_attention_freq` marks (`MiniMaxM3SparseAttention`, the
    layers `minimax_m3_layers` gave an index key) also index_q_proj of
    sparse_num_index_heads x sparse_index_dim and one index_k_proj head of sparse_index_dim
    (`MinimaxM3QKVParallelLinearWithIndexer`), with index_q_norm / index_k_norm. Then, where
    `moe_layer_freq[i]` is 0, `MiniMaxM3MLP` of dense_intermediate_size; else
    `MiniMaxM3MoE`: a gate of num_local_experts (no bias) with its e_score_correction_bias when
    use_routing_bias, num_local_experts experts w1/w2/w3 of intermediate_size, and a shared
    expert of intermediate_size x n_shared_experts (vLLM reads `intermediate_size` for both,
    not `moe_intermediate_size` or `shared_intermediate_size`, which agree in the published
    config). Two Gemma RMSNorms per layer and the final norm. `load_weights` skips "mtp."
    names (the MTP modules load only as a draft) and the vision tower is priced from a
    vision_config when the config has one (this text config has none).
    """
    h = cfg.get_int("hidden_size")
    vocab = cfg.get_int("vocab_size")
    out.embedding("model.embed_tokens", TensorClass.EMBEDDING, vocab, h)
    if not cfg.flag("tie_word_embeddings", False):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)
    freq = cfg.int_list("moe_layer_freq")
    if freq is not None and len(freq) != len(mixers):
        raise SizingError(
            cfg.where("moe_layer_freq"), f"must list one 0/1 per layer ({len(mixers)} layers)"
        )
    heads = cfg.get_int("num_attention_heads")
    inter = cfg.get_int("intermediate_size")
    sparse = cfg.sub("sparse_attention_config")
    for i, mixer in enumerate(mixers):
        p = f"model.layers.{i}"
        if not isinstance(mixer, FullAttention):
            raise SizingError(cfg.where("num_hidden_layers"), f"layer {i} is not attention")
        hd, kv = mixer.head_dim, mixer.num_kv_heads
        a = f"{p}.self_attn"
        out.linear(f"{a}.q_proj", _A, heads * hd, h)
        out.linear(f"{a}.k_proj", _A, kv * hd, h)
        out.linear(f"{a}.v_proj", _A, kv * hd, h)
        out.linear(f"{a}.o_proj", _A, h, heads * hd)
        out.norm(f"{a}.q_norm", _N, hd)
        out.norm(f"{a}.k_norm", _N, hd)
        if mixer.indexer_head_dim is not None and sparse is not None:
            idx = mixer.indexer_head_dim
            idx_heads = sparse.get_int("sparse_num_index_heads")
            out.linear(f"{a}.index_q_proj", _A, idx_heads * idx, h)
            out.linear(f"{a}.index_k_proj", _A, idx, h)
            out.norm(f"{a}.index_q_norm", _N, idx)
            out.norm(f"{a}.index_k_norm", _N, idx)
        out.norm(f"{p}.input_layernorm", _N, h)
        out.norm(f"{p}.post_attention_layernorm", _N, h)
        if freq is not None and not freq[i]:
            dense = cfg.get_int("dense_intermediate_size")
            _gated(out, f"{p}.mlp", TensorClass.MLP, h, dense)
            continue
        _minimax_m3_moe(cfg, out, f"{p}.block_sparse_moe", h, inter)
    out.norm("model.norm", _N, h)


def _minimax_m3_moe(cfg: HFConfig, out: TensorList, m: str, h: int, inter: int) -> None:
    # vLLM MiniMaxM3MoE: the fp32 gate and its correction bias, the experts, the shared expert.
    e = cfg.get_int("num_local_experts")
    router = TensorClass.ROUTER
    out.linear(f"{m}.gate", router, e, h)
    if cfg.flag("use_routing_bias", False):
        out.vector(f"{m}.e_score_correction_bias", router, (e,))
    # Checkpoint experts: w1 gate, w3 up (hidden -> intermediate), w2 down.
    experts = TensorClass.ROUTED_EXPERTS
    out.linear(f"{m}.experts.0.w1", experts, inter, h, count=e)
    out.linear(f"{m}.experts.0.w3", experts, inter, h, count=e)
    out.linear(f"{m}.experts.0.w2", experts, h, inter, count=e)
    shared = cfg.opt_int("n_shared_experts", minimum=0) or 0
    if shared:
        _gated(out, f"{m}.shared_experts", TensorClass.SHARED_EXPERTS, h, inter * shared)


def deepseek_v4(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    """DeepSeek-V4 (vLLM 0.33.0 models/deepseek_v4: attention.py, compressor.py,
    nvidia/model.py `DeepseekV4DecoderLayer`, `DeepseekV4MoE`, `DeepseekV4Model`; mtp.py).

    Per layer: attention `fused_wqa_wkv` (hidden -> q_lora_rank + head_dim), `q_norm`, `wq_b`
    (q_lora_rank -> heads x head_dim), `kv_norm`, the grouped output `wo_a` (heads x head_dim /
    o_groups -> o_groups x o_lora_rank) and `wo_b` (-> hidden), one `attn_sink` per head; on
    compressing layers a `DeepseekCompressor` (`ape` ratio x coff x head_dim in float32,
    `fused_wkv_wgate` hidden -> 2 x coff x head_dim, `norm`; coff 2 on C4); on C4 layers the
    indexer (`wq_b` q_lora_rank -> index_n_heads x index_head_dim, `weights_proj` hidden ->
    index_n_heads, and its own compressor of index_head_dim). `DeepseekV4MoE`: `gate`, its
    `e_score_correction_bias` (noaux_tc) or, on the first num_hash_layers layers, the
    `tid2eid` table (vocab x experts per token), n_routed_experts and n_shared_experts gated
    experts of moe_intermediate_size. Two RMSNorms and the hyper-connection mixers
    (`hc_attn_fn` / `hc_ffn_fn` of (2 + hc_mult) x hc_mult rows by hc_mult x hidden, their
    `_base` and 3-value `_scale`, float32). The model: embeddings, `norm`, `hc_head_fn` /
    `_base` / `_scale`, an untied lm_head. MTP (`DeepSeekV4MultiTokenPredictorLayer`: a
    decoder layer of ratio compress_ratios[num_hidden_layers + i], `e_proj`, `h_proj`, `enorm`,
    `hnorm`, its own hc_head) is in the checkpoint but not served.
    """
    h = cfg.get_int("hidden_size")
    vocab = cfg.get_int("vocab_size")
    out.embedding("embed", TensorClass.EMBEDDING, vocab, h)
    out.linear("head", TensorClass.LM_HEAD, vocab, h)
    out.norm("norm", _N, h)
    _hc_head(cfg, out, "", h)
    hash_layers = cfg.get_int("num_hash_layers", default=0)
    layers: list[CompressedSparseAttention] = []
    for i, mixer in enumerate(mixers):
        if not isinstance(mixer, CompressedSparseAttention):
            raise SizingError(cfg.where("compress_ratios"), f"layer {i} is not DeepSeek-V4's")
        layers.append(mixer)
        _deepseek_v4_layer(cfg, out, f"layers.{i}", mixer, hashed=i < hash_layers)
    mtp = cfg.get_int("num_nextn_predict_layers", default=0)
    if not mtp:
        return
    out.served = False
    start = len(out.items)
    ratios = cfg.int_list("compress_ratios", minimum=0) or []
    for j in range(mtp):
        index = len(mixers) + j
        if index >= len(ratios):
            raise SizingError(cfg.where("compress_ratios"), f"has no ratio for MTP layer {j}")
        layer = CompressedSparseAttention(
            max(ratios[index], 1), layers[0].sliding_window, layers[0].index_head_dim
        )
        p = f"mtp.{j}"
        _deepseek_v4_layer(cfg, out, p, layer, hashed=False)
        out.linear(f"{p}.e_proj", TensorClass.MTP, h, h)
        out.linear(f"{p}.h_proj", TensorClass.MTP, h, h)
        out.norm(f"{p}.enorm", TensorClass.MTP, h)
        out.norm(f"{p}.hnorm", TensorClass.MTP, h)
        out.norm(f"{p}.norm", TensorClass.MTP, h)
        _hc_head(cfg, out, f"{p}.", h)
    out.items[start:] = [
        Tensor(t.name, TensorClass.MTP, t.role, t.shape, t.count, False, t.tensor_class)
        for t in out.items[start:]
    ]
    out.served = True


def _hc_head(cfg: HFConfig, out: TensorList, prefix: str, h: int) -> None:
    hc = cfg.get_int("hc_mult")
    out.vector(f"{prefix}hc_head_fn", _N, (hc, hc * h))
    out.vector(f"{prefix}hc_head_base", _N, (hc,))
    out.vector(f"{prefix}hc_head_scale", _N, (1,))


def _deepseek_v4_layer(
    cfg: HFConfig, out: TensorList, p: str, layer: CompressedSparseAttention, *, hashed: bool
) -> None:
    h = cfg.get_int("hidden_size")
    heads, hd = cfg.get_int("num_attention_heads"), cfg.get_int("head_dim")
    q_lora = cfg.get_int("q_lora_rank")
    groups, o_lora = cfg.get_int("o_groups"), cfg.get_int("o_lora_rank")
    a = f"{p}.attn"
    out.linear(f"{a}.fused_wqa_wkv", _A, q_lora + hd, h)
    out.norm(f"{a}.q_norm", _N, q_lora)
    out.linear(f"{a}.wq_b", _A, heads * hd, q_lora)
    out.norm(f"{a}.kv_norm", _N, hd)
    out.linear(f"{a}.wo_a", _A, groups * o_lora, heads * hd // groups)
    out.linear(f"{a}.wo_b", _A, h, groups * o_lora)
    out.vector(f"{a}.attn_sink", _A, (heads,))
    ratio = layer.compress_ratio
    if ratio > 1:
        _compressor(out, f"{a}.compressor", h, hd, ratio)
    if ratio == 4:
        index_heads = cfg.get_int("index_n_heads")
        out.linear(f"{a}.indexer.wq_b", _A, index_heads * layer.index_head_dim, q_lora)
        out.linear(f"{a}.indexer.weights_proj", _A, index_heads, h)
        _compressor(out, f"{a}.indexer.compressor", h, layer.index_head_dim, ratio)
    f = f"{p}.ffn"
    experts = cfg.get_int("n_routed_experts")
    out.linear(f"{f}.gate", TensorClass.ROUTER, experts, h)
    if hashed:
        out.vector(
            f"{f}.gate.tid2eid",
            TensorClass.ROUTER,
            (cfg.get_int("vocab_size"), cfg.get_int("num_experts_per_tok")),
        )
    else:
        out.vector(f"{f}.gate.e_score_correction_bias", TensorClass.ROUTER, (experts,))
    inter = cfg.get_int("moe_intermediate_size")
    _gated(out, f"{f}.experts.0", TensorClass.ROUTED_EXPERTS, h, inter, count=experts)
    shared = cfg.get_int("n_shared_experts", default=0)
    if shared:
        _gated(out, f"{f}.shared_experts", TensorClass.SHARED_EXPERTS, h, inter * shared)
    out.norm(f"{p}.attn_norm", _N, h)
    out.norm(f"{p}.ffn_norm", _N, h)
    hc = cfg.get_int("hc_mult")
    mix = (2 + hc) * hc
    for part in ("attn", "ffn"):
        out.vector(f"{p}.hc_{part}_fn", _N, (mix, hc * h))
        out.vector(f"{p}.hc_{part}_base", _N, (mix,))
        out.vector(f"{p}.hc_{part}_scale", _N, (3,))


def _compressor(out: TensorList, name: str, h: int, dim: int, ratio: int) -> None:
    # compressor.py DeepseekCompressor: coff 2 (overlapping windows) on C4, 1 on C128.
    coff = 2 if ratio == 4 else 1
    out.vector(f"{name}.ape", _A, (ratio, coff * dim))
    out.linear(f"{name}.fused_wkv_wgate", _A, 2 * coff * dim, h)
    out.norm(f"{name}.norm", _N, dim)
