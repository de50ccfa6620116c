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
from .architecture import FullAttention, Layer, SlidingWindowAttention
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


def _gated(
    out: TensorList, name: str, cls: TensorClass, hidden: int, inter: int, *, count: int = 1
) -> None:
    # vLLM MergedColumnParallelLinear gate_up_proj, loaded from the checkpoint's gate_proj and
    # up_proj (hidden -> intermediate each), and down_proj (intermediate -> hidden).
    out.linear(f"{name}.gate_proj", cls, inter, hidden, count=count)
    out.linear(f"{name}.up_proj", cls, inter, hidden, count=count)
    out.linear(f"{name}.down_proj", cls, hidden, inter, count=count)


__all__ = ["mimo_v2", "minimax_m3"]
