"""Parameters by tensor class, from a `config.json` alone.

The checkpoint of a model is a list of tensors whose shapes follow from its config through the
model's modelling code. This module writes that list out the way Hugging Face transformers (and,
where the two differ, vLLM) build each architecture's modules; each rule names the file and class
it follows (`transformers` paths are under `src/transformers/models/`, vLLM paths under
`vllm/model_executor/models/`). Every tensor carries its module name as the checkpoint spells it,
so a quantization `ignore` list can be matched against it (`weight_format.checkpoint_size`).

A config without a number the count needs raises `SizingError` naming the field; a model type
with no rules here raises too (vision towers: `towers`). Nothing unknown is counted as something
else.

Tensors that are in the checkpoint but not loaded for serving are marked `served=False`:
multi-token-prediction layers (vLLM loads them only as a speculative draft) and the duplicate
`lm_head` the original Falcon checkpoints store beside tied embeddings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from ..errors import SizingError
from .architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Layer,
    Mamba1,
    Mamba2,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
)
from .config_view import ConfigView, HFConfig
from .hf_deepseek_v4 import DEEPSEEK_V4_TYPES, V41_TYPES
from .hf_hybrids import LFM2_TYPES
from .hf_kimi_minimax import KIMI_LINEAR_TYPES, MINIMAX_LIGHTNING_TYPES, MINIMAX_M3_TYPES
from .hf_more import MIMO_V2_TYPES
from .param_count_2026 import deepseek_v4, kimi_k3, lfm2, mimo_v2, minimax_m1, minimax_m3
from .tensors import ParameterCount, Tensor, TensorClass, TensorList, TensorRole, summarize
from .towers import count_towers

_A = TensorClass.ATTENTION
_N = TensorClass.NORM

# ---------------------------------------------------------------------------------------------
# model families

_LLAMA_LIKE: Final = frozenset({"llama", "mistral", "mixtral", "phi3", "granite"})
_QWEN2: Final = frozenset({"qwen2", "qwen2_moe", "mimo"})
_QWEN3: Final = frozenset({"qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text"})
_QWEN_GDN: Final = frozenset(
    {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
)
_GEMMA: Final = frozenset({"gemma"})
_GEMMA23: Final = frozenset({"gemma2", "gemma3", "gemma3_text"})
_GEMMA4: Final = frozenset({"gemma4", "gemma4_text"})
_LLAMA4: Final = frozenset({"llama4", "llama4_text"})
_DEEPSEEK: Final = frozenset(
    {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25", "deepseek_vl_v2"}
)
_GLM_MOE: Final = frozenset({"glm4_moe", "glm_moe_dsa"})
_DECODER_TYPES: Final = (
    _LLAMA_LIKE
    | _QWEN2
    | _QWEN3
    | _QWEN_GDN
    | _GEMMA
    | _GEMMA23
    | _GEMMA4
    | _LLAMA4
    | _DEEPSEEK
    | _GLM_MOE
    | {"gpt_oss", "minimax_m2"}
)
_FALCON: Final = frozenset({"falcon", "RefinedWeb", "RefinedWebModel"})

# transformers config classes that tie lm_head to the embeddings unless told otherwise
# (GemmaConfig/Gemma2Config/Gemma3TextConfig/Gemma4TextConfig tie_word_embeddings=True; the
# others pass tie_word_embeddings=False). FalconConfig keeps PretrainedConfig's default True.
_TIED_BY_DEFAULT: Final = _GEMMA | _GEMMA23 | _GEMMA4 | _FALCON
_UNTIED_BY_DEFAULT: Final = (_DECODER_TYPES - _TIED_BY_DEFAULT) | {"qwen", "jamba", "nemotron_h"}


def count_parameters(cfg: HFConfig, mixers: Sequence[Layer]) -> ParameterCount:
    """Every tensor of the checkpoint a config describes.

    `mixers` is the per-layer geometry `hf_config` reads (before KV sharing), so heads, head
    dimensions and layer kinds come from the same rules that size the cache.
    """
    out = TensorList()
    mt = cfg.model_type
    if mt in _FALCON:
        _falcon(cfg, mixers, out)
    elif mt == "qwen":
        _qwen_v1(cfg, out)
    elif mt == "molmo":
        _molmo(cfg, out)
    elif mt == "nemotron_h":
        _nemotron_h(cfg, mixers, out)
    elif mt == "jamba":
        _jamba(cfg, mixers, out)
    elif mt in MIMO_V2_TYPES:
        mimo_v2(cfg, mixers, out)
    elif mt in MINIMAX_M3_TYPES:
        minimax_m3(cfg, mixers, out)
    elif mt in MINIMAX_LIGHTNING_TYPES:
        minimax_m1(cfg, mixers, out)
    elif mt in DEEPSEEK_V4_TYPES - V41_TYPES:
        deepseek_v4(cfg, mixers, out)
    elif mt in LFM2_TYPES:
        lfm2(cfg, mixers, out)
    elif mt in KIMI_LINEAR_TYPES:
        kimi_k3(cfg, mixers, out)
    elif mt in _DECODER_TYPES:
        _Decoder(cfg, mixers, out).build()
    else:
        label = repr(mt) if mt else "(none)"
        raise SizingError(
            cfg.where("model_type"),
            f"model_type {label}: kvplan has no parameter-count rules for it; pass "
            "num_parameters and weight_bytes",
        )
    count_towers(cfg, out, _hidden(cfg))
    return summarize(out.items)


# ---------------------------------------------------------------------------------------------
# shared pieces


def _hidden(cfg: ConfigView) -> int:
    return cfg.first_int(("hidden_size", "n_embd", "n_embed", "d_model"))


def _vocab(cfg: ConfigView) -> int:
    return cfg.get_int("vocab_size")


def _tied(cfg: HFConfig) -> bool:
    """transformers `tie_word_embeddings`: the LM config, else the top level, else the class
    default of the model type."""
    found = cfg.top_or_lm("tie_word_embeddings")
    if found is not None:
        where, value = found
        if not isinstance(value, bool):
            raise SizingError(where, f"must be true or false, got {value!r}")
        return value
    if cfg.model_type in _TIED_BY_DEFAULT:
        return True
    if cfg.model_type in _UNTIED_BY_DEFAULT:
        return False
    raise SizingError(
        cfg.where("tie_word_embeddings"),
        f"is missing and kvplan does not know the default for model_type {cfg.model_type!r}",
    )


def _embeddings(out: TensorList, cfg: HFConfig, prefix: str, vocab: int, hidden: int) -> None:
    out.embedding(f"{prefix}.embed_tokens", TensorClass.EMBEDDING, vocab, hidden)
    if not _tied(cfg):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, hidden)


def _gated_mlp(
    out: TensorList,
    name: str,
    cls: TensorClass,
    hidden: int,
    inter: int,
    *,
    bias: bool = False,
    count: int = 1,
) -> None:
    # transformers LlamaMLP (and every gated SwiGLU/GeGLU MLP): gate_proj, up_proj
    # (hidden -> intermediate), down_proj (intermediate -> hidden). `count` experts alike are
    # written once, as expert 0.
    out.linear(f"{name}.gate_proj", cls, inter, hidden, bias=bias, count=count)
    out.linear(f"{name}.up_proj", cls, inter, hidden, bias=bias, count=count)
    out.linear(f"{name}.down_proj", cls, hidden, inter, bias=bias, count=count)


def _lm_prefix(cfg: HFConfig) -> str:
    """Module path of the decoder in the checkpoint: `model` for a causal LM, and the layout
    transformers >= 4.52 saves multimodal models in (`model.language_model`, checkpoints of
    the older `language_model.model` layout are matched through `weight_format`'s aliases)."""
    architectures = cfg.top.get("architectures")
    conditional = isinstance(architectures, list) and any(
        isinstance(a, str) and a.endswith("ForConditionalGeneration") for a in architectures
    )
    if cfg.prefix or conditional or cfg.top.get("vision_config") is not None:
        return "model.language_model"
    return "model"


# ---------------------------------------------------------------------------------------------
# the generic decoder: attention / MLA / Gated DeltaNet mixers with dense or MoE feed-forward


class _Decoder:
    def __init__(self, cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
        self.cfg, self.mixers, self.out = cfg, mixers, out
        self.mt = cfg.model_type
        self.hidden = _hidden(cfg)
        self.heads = cfg.first_int(("num_attention_heads", "n_head", "n_heads"))
        self.prefix = _lm_prefix(cfg)
        self.experts = self._num_experts()

    # -- layout --------------------------------------------------------------------------

    def build(self) -> None:
        cfg, out = self.cfg, self.out
        vocab = _vocab(cfg)
        _embeddings(out, cfg, self.prefix, vocab, self.hidden)
        if self.mt in _GEMMA4:
            self._gemma4_per_layer_inputs(vocab)
        for i, mixer in enumerate(self.mixers):
            self.layer(f"{self.prefix}.layers.{i}", i, mixer)
        out.norm(f"{self.prefix}.norm", _N, self.hidden)
        self.mtp(vocab)

    def layer(self, p: str, i: int, mixer: Layer, mtp: bool = False) -> None:
        out, h = self.out, self.hidden
        self.mixer(p, mixer)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if self.mt in _GEMMA23 or self.mt in _GEMMA4:
            # transformers Gemma2DecoderLayer / Gemma3DecoderLayer / Gemma4TextDecoderLayer:
            # pre- and post-norms around both attention and the MLP.
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for norm in norms:
            out.norm(f"{p}.{norm}", _N, h)
        if self.mt in _GEMMA4:
            self._gemma4_layer_extras(p, i)
            return
        if self.is_moe(i, mtp):
            self.moe(p)
        else:
            self.dense_mlp(p, i)

    # -- mixers --------------------------------------------------------------------------

    def mixer(self, p: str, mixer: Layer) -> None:
        if isinstance(mixer, MultiHeadLatentAttention):
            self.mla(f"{p}.self_attn", mixer)
        elif isinstance(mixer, GatedDeltaNet):
            self.gated_delta_net(f"{p}.linear_attn", mixer)
        elif isinstance(mixer, FullAttention | SlidingWindowAttention | ChunkedLocalAttention):
            self.attention(f"{p}.self_attn", mixer)
        else:
            raise SizingError(
                self.cfg.where("layer_types"),
                f"a {mixer.kind.value} layer in a {self.mt} model has no parameter rules",
            )

    def attention(
        self, p: str, layer: FullAttention | SlidingWindowAttention | ChunkedLocalAttention
    ) -> None:
        cfg, out, h, mt = self.cfg, self.out, self.hidden, self.mt
        hd, kv = layer.head_dim, layer.num_kv_heads
        heads = self.heads
        bias = cfg.flag("attention_bias", mt == "gpt_oss")
        # transformers Qwen2Attention: q/k/v carry a bias, o_proj none; LlamaAttention (and
        # Mistral, Gemma, GptOss, Llama4, Qwen3): attention_bias on all four.
        qkv_bias = True if mt in _QWEN2 else bias
        # transformers Glm4MoeAttention: attention_bias on q/k/v only.
        o_bias = False if mt in _QWEN2 or mt in _GLM_MOE else bias
        if mt == "mimo":
            qkv_bias = cfg.flag("attention_bias", True)
        # transformers Qwen3NextAttention / Qwen3_5Attention: q_proj also emits the output gate.
        gate = 2 if mt in _QWEN_GDN and cfg.flag("attn_output_gate", True) else 1
        if mt == "phi3":
            # transformers Phi3Attention: one fused qkv_proj, o_proj, no biases.
            out.linear(f"{p}.qkv_proj", _A, (heads + 2 * kv) * hd, h)
        else:
            out.linear(f"{p}.q_proj", _A, heads * hd * gate, h, bias=qkv_bias)
            out.linear(f"{p}.k_proj", _A, kv * hd, h, bias=qkv_bias)
            k_eq_v = (
                mt in _GEMMA4
                and cfg.flag("attention_k_eq_v", False)
                and isinstance(layer, FullAttention)
            )
            if not k_eq_v:
                # transformers Gemma4TextAttention: global layers with attention_k_eq_v have no
                # v_proj (V is the normed K).
                out.linear(f"{p}.v_proj", _A, kv * hd, h, bias=qkv_bias)
        out.linear(f"{p}.o_proj", _A, h, heads * hd, bias=o_bias)
        if self._qk_norm():
            # transformers Qwen3Attention / Gemma3Attention / Gemma4TextAttention: RMSNorm over
            # head_dim on q and k; MiniMaxM2Attention normalizes the whole projection.
            full = mt == "minimax_m2"
            out.norm(f"{p}.q_norm", _N, heads * hd if full else hd)
            out.norm(f"{p}.k_norm", _N, kv * hd if full else hd)
        if mt == "gpt_oss":
            # transformers GptOssAttention: one learned attention-sink logit per head.
            out.vector(f"{p}.sinks", _A, (heads,))

    def _qk_norm(self) -> bool:
        mt = self.mt
        if mt in _QWEN3 or mt in _QWEN_GDN or mt in _GEMMA4 or mt == "gemma3_text":
            return True
        if mt == "gemma3":
            return True
        if mt in ("glm4_moe", "minimax_m2"):
            # transformers Glm4MoeAttention / MiniMaxM2Attention: q_norm/k_norm iff use_qk_norm.
            return self.cfg.flag("use_qk_norm", mt == "minimax_m2")
        # Llama4TextAttention's qk norm (use_qk_norm) is an L2 norm with no weight.
        return False

    def mla(self, p: str, layer: MultiHeadLatentAttention) -> None:
        # transformers DeepseekV3Attention (DeepseekV2Attention the same shapes): queries through
        # a q_lora_rank bottleneck (q_a_proj, q_a_layernorm, q_b_proj) or one q_proj; keys and
        # values through kv_a_proj_with_mqa (latent + shared rope key), kv_a_layernorm and
        # kv_b_proj; attention_bias on q_a_proj, kv_a_proj_with_mqa and o_proj.
        cfg, out, h, heads = self.cfg, self.out, self.hidden, self.heads
        bias = cfg.flag("attention_bias", False)
        nope = cfg.get_int("qk_nope_head_dim")
        rope = layer.qk_rope_head_dim
        v_dim = cfg.get_int("v_head_dim")
        q_rank = cfg.opt_int("q_lora_rank")
        if q_rank is None:
            out.linear(f"{p}.q_proj", _A, heads * (nope + rope), h)
        else:
            out.linear(f"{p}.q_a_proj", _A, q_rank, h, bias=bias)
            out.norm(f"{p}.q_a_layernorm", _N, q_rank)
            out.linear(f"{p}.q_b_proj", _A, heads * (nope + rope), q_rank)
        rank = layer.kv_lora_rank
        out.linear(f"{p}.kv_a_proj_with_mqa", _A, rank + rope, h, bias=bias)
        out.norm(f"{p}.kv_a_layernorm", _N, rank)
        out.linear(f"{p}.kv_b_proj", _A, heads * (nope + v_dim), rank)
        out.linear(f"{p}.o_proj", _A, h, heads * v_dim, bias=bias)
        if layer.indexer_head_dim is not None:
            # vLLM deepseek_v2.py Indexer (DeepSeek sparse attention): wq_b from the q latent,
            # wk with a LayerNorm k_norm, and weights_proj scoring index_n_heads heads.
            if q_rank is None:
                raise SizingError(cfg.where("q_lora_rank"), "is required by the DSA indexer")
            ih = cfg.get_int("index_n_heads")
            idim = layer.indexer_head_dim
            out.linear(f"{p}.indexer.wq_b", _A, ih * idim, q_rank)
            out.linear(f"{p}.indexer.wk", _A, idim, h)
            out.norm(f"{p}.indexer.k_norm", _N, idim, bias=True)
            out.linear(f"{p}.indexer.weights_proj", _A, ih, h)

    def gated_delta_net(self, p: str, g: GatedDeltaNet) -> None:
        # transformers Qwen3NextGatedDeltaNet: in_proj_qkvz (q, k, v, z), in_proj_ba (b and a
        # per value head), a depthwise conv1d over q, k, v (no bias), dt_bias and A_log per value
        # head, a gated RMSNorm over value_head_dim, out_proj. Qwen3_5GatedDeltaNet splits the
        # same shapes into in_proj_qkv, in_proj_z, in_proj_b, in_proj_a.
        out, h = self.out, self.hidden
        lin = TensorClass.LINEAR_ATTENTION
        key_dim = g.num_key_heads * g.key_head_dim
        value_dim = g.num_value_heads * g.value_head_dim
        if self.mt == "qwen3_next":
            out.linear(f"{p}.in_proj_qkvz", lin, 2 * key_dim + 2 * value_dim, h)
            out.linear(f"{p}.in_proj_ba", lin, 2 * g.num_value_heads, h)
        else:
            out.linear(f"{p}.in_proj_qkv", lin, 2 * key_dim + value_dim, h)
            out.linear(f"{p}.in_proj_z", lin, value_dim, h)
            out.linear(f"{p}.in_proj_b", lin, g.num_value_heads, h)
            out.linear(f"{p}.in_proj_a", lin, g.num_value_heads, h)
        state = TensorClass.CONV_STATE
        out.vector(f"{p}.conv1d.weight", state, (2 * key_dim + value_dim, 1, g.conv_kernel))
        out.vector(f"{p}.dt_bias", state, (g.num_value_heads,))
        out.vector(f"{p}.A_log", state, (g.num_value_heads,))
        out.norm(f"{p}.norm", _N, g.value_head_dim)
        out.linear(f"{p}.out_proj", lin, h, value_dim)

    # -- feed-forward --------------------------------------------------------------------

    def _num_experts(self) -> int:
        for key in ("num_experts", "num_local_experts", "n_routed_experts"):
            if self.cfg.has(key):
                return self.cfg.get_int(key, minimum=0)
        return 0

    def is_moe(self, i: int, mtp: bool) -> bool:
        cfg, mt = self.cfg, self.mt
        if self.experts <= 1:
            return False
        if mt in _DEEPSEEK or mt in _GLM_MOE:
            # transformers DeepseekV3DecoderLayer: MoE from first_k_dense_replace on, every
            # moe_layer_freq layers (DeepseekV2DecoderLayer, Glm4MoeDecoderLayer the same).
            first = cfg.get_int("first_k_dense_replace", default=0, minimum=0)
            freq = cfg.get_int("moe_layer_freq", default=1)
            return i >= first and i % freq == 0
        if mt in _LLAMA4:
            # transformers Llama4TextConfig: moe_layers, default every
            # interleave_moe_layer_step-th layer (step - 1, 2 * step - 1, ...).
            listed = cfg.int_list("moe_layers")
            if listed is not None:
                return i in listed
            step = cfg.get_int("interleave_moe_layer_step", default=1)
            return (i + 1) % step == 0
        if mt in _QWEN2 or mt in _QWEN3 or mt in _QWEN_GDN:
            # transformers Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer / Qwen3NextDecoderLayer:
            # sparse iff not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
            if mtp:
                return True
            only = cfg.int_list("mlp_only_layers") or []
            step = cfg.get_int("decoder_sparse_step", default=1)
            return i not in only and (i + 1) % step == 0
        return True  # Mixtral, gpt-oss, MiniMax-M2: every layer is MoE

    def dense_mlp(self, p: str, i: int) -> None:
        cfg, out, h = self.cfg, self.out, self.hidden
        mlp = TensorClass.MLP
        if self.mt in _LLAMA4:
            # transformers Llama4TextDecoderLayer: dense layers' feed_forward is a Llama4TextMLP
            # of intermediate_size_mlp.
            _gated_mlp(out, f"{p}.feed_forward", mlp, h, cfg.get_int("intermediate_size_mlp"))
            return
        inter = cfg.get_int("intermediate_size")
        if self.mt == "phi3":
            # transformers Phi3MLP: fused gate_up_proj (2 x intermediate) and down_proj.
            out.linear(f"{p}.mlp.gate_up_proj", mlp, 2 * inter, h)
            out.linear(f"{p}.mlp.down_proj", mlp, h, inter)
            return
        _gated_mlp(out, f"{p}.mlp", mlp, h, inter, bias=cfg.flag("mlp_bias", False))

    def moe(self, p: str) -> None:
        cfg, out, h, mt, e = self.cfg, self.out, self.hidden, self.mt, self.experts
        experts, router = TensorClass.ROUTED_EXPERTS, TensorClass.ROUTER
        if mt in {"mixtral", "minimax_m2"}:
            # transformers MixtralSparseMoeBlock / MiniMaxM2SparseMoeBlock: block_sparse_moe
            # with a gate (router) and experts w1 (gate), w3 (up), w2 (down) of
            # intermediate_size.
            inter = cfg.get_int("intermediate_size")
            q = f"{p}.block_sparse_moe"
            out.linear(f"{q}.gate", router, e, h)
            out.linear(f"{q}.experts.0.w1", experts, inter, h, count=e)
            out.linear(f"{q}.experts.0.w3", experts, inter, h, count=e)
            out.linear(f"{q}.experts.0.w2", experts, h, inter, count=e)
            if mt == "minimax_m2" and cfg.flag("use_routing_bias", True):
                out.vector(f"{q}.e_score_correction_bias", router, (e,))
            return
        if mt == "gpt_oss":
            # transformers GptOssMLP: router (Linear with bias) and GptOssExperts with fused
            # gate_up_proj [E, hidden, 2 x intermediate] and down_proj, each with a bias.
            inter = cfg.get_int("intermediate_size")
            out.linear(f"{p}.mlp.router", router, e, h, bias=True)
            out.linear(f"{p}.mlp.experts.gate_up_proj", experts, 2 * inter, h, count=e)
            out.vector(f"{p}.mlp.experts.gate_up_proj_bias", experts, (2 * inter,), e)
            out.linear(f"{p}.mlp.experts.down_proj", experts, h, inter, count=e)
            out.vector(f"{p}.mlp.experts.down_proj_bias", experts, (h,), e)
            return
        if mt in _LLAMA4:
            # transformers Llama4TextMoe: router, experts (gate_up_proj, down_proj) of
            # intermediate_size, and one shared_expert MLP of intermediate_size.
            inter = cfg.get_int("intermediate_size")
            out.linear(f"{p}.feed_forward.router", router, e, h)
            out.linear(f"{p}.feed_forward.experts.gate_up_proj", experts, 2 * inter, h, count=e)
            out.linear(f"{p}.feed_forward.experts.down_proj", experts, h, inter, count=e)
            _gated_mlp(out, f"{p}.feed_forward.shared_expert", TensorClass.SHARED_EXPERTS, h, inter)
            return
        inter = cfg.get_int("moe_intermediate_size")
        q = f"{p}.mlp"
        out.linear(f"{q}.gate", router, e, h)
        _gated_mlp(out, f"{q}.experts.0", experts, h, inter, count=e)
        if mt in _DEEPSEEK or mt in _GLM_MOE:
            if mt in ("deepseek_v3", "kimi_k2", "kimi_k25", "deepseek_v32") or mt in _GLM_MOE:
                # transformers DeepseekV3TopkRouter / Glm4MoeTopkRouter: e_score_correction_bias.
                out.vector(f"{q}.gate.e_score_correction_bias", router, (e,))
            elif cfg.raw("topk_method") == "noaux_tc":
                # transformers DeepseekV2MoEGate: the bias only for topk_method noaux_tc.
                out.vector(f"{q}.gate.e_score_correction_bias", router, (e,))
            shared = cfg.get_int("n_shared_experts", default=0, minimum=0)
            if shared:
                # DeepseekV3MoE.shared_experts: one MLP of moe_intermediate_size x n_shared.
                shared_cls = TensorClass.SHARED_EXPERTS
                _gated_mlp(out, f"{q}.shared_experts", shared_cls, h, inter * shared)
            return
        shared_inter = cfg.get_int("shared_expert_intermediate_size", default=0, minimum=0)
        if shared_inter:
            # transformers Qwen2MoeSparseMoeBlock (Qwen3Next, Qwen3_5Moe): shared_expert MLP and
            # a one-output shared_expert_gate.
            shared_cls = TensorClass.SHARED_EXPERTS
            _gated_mlp(out, f"{q}.shared_expert", shared_cls, h, shared_inter)
            out.linear(f"{q}.shared_expert_gate", shared_cls, 1, h)

    # -- Gemma 4 -------------------------------------------------------------------------

    def _gemma4_per_layer_inputs(self, vocab: int) -> None:
        # transformers Gemma4TextModel: with hidden_size_per_layer_input, a second embedding
        # table of num_hidden_layers x that width, its projection from hidden and a norm.
        cfg, out = self.cfg, self.out
        width = cfg.get_int("hidden_size_per_layer_input", default=0, minimum=0)
        if not width:
            return
        layers = len(self.mixers)
        rows = cfg.get_int("vocab_size_per_layer_input", default=vocab)
        out.embedding(
            f"{self.prefix}.embed_tokens_per_layer", TensorClass.EMBEDDING, rows, layers * width
        )
        out.linear(
            f"{self.prefix}.per_layer_model_projection",
            TensorClass.EMBEDDING,
            layers * width,
            self.hidden,
        )
        out.norm(f"{self.prefix}.per_layer_projection_norm", _N, width)

    def _gemma4_layer_extras(self, p: str, i: int) -> None:
        # transformers Gemma4TextDecoderLayer: the dense MLP (double width on KV-shared layers
        # when use_double_wide_mlp), a persistent layer_scalar, the per-layer-input gate, and
        # with enable_moe_block a router (proj, scale, per_expert_scale), experts with fused
        # gate_up_proj, and three more norms.
        cfg, out, h = self.cfg, self.out, self.hidden
        n = len(self.mixers)
        shared = cfg.get_int("num_kv_shared_layers", default=0, minimum=0)
        wide = cfg.flag("use_double_wide_mlp", False) and 0 < n - shared <= i
        inter = cfg.get_int("intermediate_size") * (2 if wide else 1)
        _gated_mlp(out, f"{p}.mlp", TensorClass.MLP, h, inter)
        out.vector(f"{p}.layer_scalar", _N, (1,))
        width = cfg.get_int("hidden_size_per_layer_input", default=0, minimum=0)
        if width:
            out.linear(f"{p}.per_layer_input_gate", TensorClass.MLP, width, h)
            out.linear(f"{p}.per_layer_projection", TensorClass.MLP, h, width)
            out.norm(f"{p}.post_per_layer_input_norm", _N, h)
        if cfg.flag("enable_moe_block", False):
            e = self.experts
            moe_inter = cfg.get_int("moe_intermediate_size")
            router, experts = TensorClass.ROUTER, TensorClass.ROUTED_EXPERTS
            out.linear(f"{p}.router.proj", router, e, h)
            out.vector(f"{p}.router.scale", router, (h,))
            out.vector(f"{p}.router.per_expert_scale", router, (e,))
            out.linear(f"{p}.experts.gate_up_proj", experts, 2 * moe_inter, h, count=e)
            out.linear(f"{p}.experts.down_proj", experts, h, moe_inter, count=e)
            for norm in (
                "post_feedforward_layernorm_1",
                "post_feedforward_layernorm_2",
                "pre_feedforward_layernorm_2",
            ):
                out.norm(f"{p}.{norm}", _N, h)

    # -- multi-token prediction ------------------------------------------------------------

    def mtp(self, vocab: int) -> None:
        """The multi-token-prediction layers the checkpoint holds, by family (vLLM's *_mtp.py);
        the server does not load them (`_unserved_mtp`)."""
        cfg, mt = self.cfg, self.mt
        if mt in _DEEPSEEK or mt in _GLM_MOE:
            count = cfg.layer_count("num_nextn_predict_layers", default=0)
            if count:
                self._unserved_mtp(lambda: self._deepseek_mtp(vocab, count))
        elif mt in _QWEN_GDN:
            count = cfg.layer_count("mtp_num_hidden_layers", default=0)
            if count:
                attention = next(
                    (
                        m
                        for m in self.mixers
                        if isinstance(m, FullAttention | SlidingWindowAttention)
                    ),
                    None,
                )
                if attention is None:
                    raise SizingError(
                        cfg.where("layer_types"), "no attention layer to copy for MTP"
                    )
                self._unserved_mtp(lambda: self._qwen_next_mtp(count, attention))
        elif mt == "mimo":
            count = cfg.layer_count("num_nextn_predict_layers", default=0)
            self._unserved_mtp(lambda: self._mimo_mtp(count))

    def _unserved_mtp(self, build: Callable[[], None]) -> None:
        """The tensors `build` adds, marked not served and relabelled MTP."""
        out = self.out
        out.served = False
        start = len(out.items)
        build()
        self._relabel_mtp(start)
        out.served = True

    def _deepseek_mtp(self, vocab: int, count: int) -> None:
        out, h, n = self.out, self.hidden, len(self.mixers)
        for k in range(count):
            # vLLM deepseek_mtp.py DeepSeekMultiTokenPredictorLayer (glm4_moe_mtp.py the
            # same): checkpoint layer num_hidden_layers + k holds its own embed_tokens,
            # enorm, hnorm, eh_proj (2 x hidden -> hidden), a full decoder layer and a
            # shared_head (norm + head).
            p = f"{self.prefix}.layers.{n + k}"
            out.embedding(f"{p}.embed_tokens", TensorClass.EMBEDDING, vocab, h)
            out.norm(f"{p}.enorm", _N, h)
            out.norm(f"{p}.hnorm", _N, h)
            out.linear(f"{p}.eh_proj", TensorClass.MLP, h, 2 * h)
            self.layer(p, n + k, self.mixers[-1], mtp=True)
            out.norm(f"{p}.shared_head.norm", _N, h)
            out.linear(f"{p}.shared_head.head", TensorClass.LM_HEAD, vocab, h)

    def _qwen_next_mtp(self, count: int, attention: Layer) -> None:
        # transformers Qwen3_5 / vLLM qwen3_next_mtp.py Qwen3NextMultiTokenPredictor:
        # mtp.fc (2 x hidden -> hidden), pre_fc_norm_embedding, pre_fc_norm_hidden,
        # mtp.layers.k (full-attention decoder layers) and mtp.norm; embeddings shared.
        out, h, n = self.out, self.hidden, len(self.mixers)
        out.linear("mtp.fc", TensorClass.MLP, h, 2 * h)
        out.norm("mtp.pre_fc_norm_embedding", _N, h)
        out.norm("mtp.pre_fc_norm_hidden", _N, h)
        for k in range(count):
            self.layer(f"mtp.layers.{k}", n + k, attention, mtp=True)
        out.norm("mtp.norm", _N, h)

    def _mimo_mtp(self, count: int) -> None:
        out, h, n = self.out, self.hidden, len(self.mixers)
        for k in range(count):
            # vLLM mimo_mtp.py MiMoMultiTokenPredictorLayer: token_layernorm,
            # hidden_layernorm, input_proj (2 x hidden -> hidden), a Qwen2 decoder layer,
            # final_layernorm.
            p = f"model.mtp_layers.{k}"
            out.norm(f"{p}.token_layernorm", _N, h)
            out.norm(f"{p}.hidden_layernorm", _N, h)
            out.linear(f"{p}.input_proj", TensorClass.MLP, h, 2 * h)
            self.layer(p, n + k, self.mixers[-1], mtp=True)
            out.norm(f"{p}.final_layernorm", _N, h)

    def _relabel_mtp(self, start: int) -> None:
        items = self.out.items
        items[start:] = [
            Tensor(t.name, TensorClass.MTP, t.role, t.shape, t.count, False, t.tensor_class)
            for t in items[start:]
        ]


# ---------------------------------------------------------------------------------------------
# other layouts


def _attention_of(mixers: Sequence[Layer], cfg: ConfigView) -> FullAttention:
    for m in mixers:
        if isinstance(m, FullAttention):
            return m
    raise SizingError(cfg.where("num_attention_heads"), "the model has no attention layer")


def _falcon(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    # transformers FalconModel: word_embeddings, h.{i} with self_attention.query_key_value
    # (heads + 2 x kv heads, fused), self_attention.dense, mlp.dense_h_to_4h / dense_4h_to_h
    # (ffn_hidden_size, default 4 x hidden), all with `bias`; LayerNorms (weight and bias):
    # ln_attn and ln_mlp in the new decoder architecture (num_ln_in_parallel_attn 2), else
    # input_layernorm (+ post_attention_layernorm without parallel_attn); ln_f.
    h = _hidden(cfg)
    heads = cfg.first_int(("num_attention_heads", "n_head"))
    att = _attention_of(mixers, cfg)
    hd, kv = att.head_dim, att.num_kv_heads
    bias = cfg.flag("bias", False)
    ffn = cfg.get_int("ffn_hidden_size", default=4 * h)
    # the RefinedWeb remote-code configs imply the new architecture at hidden 8192 (Falcon-40B),
    # as hf_config's KV-head rule does.
    legacy = cfg.model_type != "falcon"
    new_arch = cfg.flag("new_decoder_architecture", False) or (legacy and h == 8192)
    parallel = cfg.flag("parallel_attn", True)
    vocab = _vocab(cfg)
    out.embedding("transformer.word_embeddings", TensorClass.EMBEDDING, vocab, h)
    for i in range(len(mixers)):
        p = f"transformer.h.{i}"
        out.linear(f"{p}.self_attention.query_key_value", _A, (heads + 2 * kv) * hd, h, bias=bias)
        out.linear(f"{p}.self_attention.dense", _A, h, heads * hd, bias=bias)
        out.linear(f"{p}.mlp.dense_h_to_4h", TensorClass.MLP, ffn, h, bias=bias)
        out.linear(f"{p}.mlp.dense_4h_to_h", TensorClass.MLP, h, ffn, bias=bias)
        lns = cfg.get_int("num_ln_in_parallel_attn", default=2)
        if new_arch and lns == 2:
            norms = ["ln_attn", "ln_mlp"]
        else:
            norms = (
                ["input_layernorm"] if parallel else ["input_layernorm", "post_attention_layernorm"]
            )
        for norm in norms:
            out.norm(f"{p}.{norm}", _N, h, bias=True)
    out.norm("transformer.ln_f", _N, h, bias=True)
    if not _tied(cfg):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)
    elif "tie_word_embeddings" not in cfg.lm:
        # The tiiuae checkpoints (falcon-7b/40b/180b, configs without tie_word_embeddings) store
        # lm_head.weight beside the embeddings (the Falcon-180B-chat index lists it); vLLM
        # FalconForCausalLM ties them and does not load it.
        out.served = False
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)
        out.served = True


def _qwen_v1(cfg: HFConfig, out: TensorList) -> None:
    # Qwen (v1) remote code, modeling_qwen.py QWenBlock: attn.c_attn (3 x hidden, with bias),
    # attn.c_proj (no bias, `no_bias`), mlp.w1 / mlp.w2 (intermediate_size / 2 each) and
    # mlp.c_proj, RMSNorms ln_1, ln_2; transformer.wte, ln_f, an untied lm_head.
    h = _hidden(cfg)
    inter = cfg.get_int("intermediate_size")
    vocab = cfg.first_int(("padded_vocab_size", "vocab_size"))
    kv_channels = cfg.get_int("kv_channels", default=h // cfg.get_int("num_attention_heads"))
    proj = kv_channels * cfg.get_int("num_attention_heads")
    out.embedding("transformer.wte", TensorClass.EMBEDDING, vocab, h)
    for i in range(cfg.layer_count("num_hidden_layers")):
        p = f"transformer.h.{i}"
        out.linear(f"{p}.attn.c_attn", _A, 3 * proj, h, bias=True)
        out.linear(f"{p}.attn.c_proj", _A, h, proj)
        out.linear(f"{p}.mlp.w1", TensorClass.MLP, inter // 2, h)
        out.linear(f"{p}.mlp.w2", TensorClass.MLP, inter // 2, h)
        out.linear(f"{p}.mlp.c_proj", TensorClass.MLP, h, inter // 2)
        out.norm(f"{p}.ln_1", _N, h)
        out.norm(f"{p}.ln_2", _N, h)
    out.norm("transformer.ln_f", _N, h)
    out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)


def _molmo(cfg: HFConfig, out: TensorList) -> None:
    # allenai Molmo remote code, modeling_molmo.py (vLLM molmo.py MolmoModel the same shapes):
    # wte.embedding (embedding_size) plus wte.new_embedding (additional_vocab_size, 128), blocks
    # with a fused att_proj (qkv, bias qkv_bias), attn_out, ff_proj (intermediate_size, the
    # gate and up halves fused) and ff_out (intermediate_size / 2 -> hidden), RMSNorms
    # attn_norm / ff_norm, ln_f, and ff_out as the lm head unless weight_tying.
    h = _hidden(cfg)
    heads = cfg.get_int("num_attention_heads")
    kv = cfg.get_int("num_key_value_heads", default=heads)
    hd = h // heads
    inter = cfg.get_int("intermediate_size")
    rows = cfg.first_int(("embedding_size", "vocab_size"))
    extra = cfg.get_int("additional_vocab_size", default=128)
    t = "model.transformer"
    out.table(f"{t}.wte.embedding", TensorClass.EMBEDDING, rows, h)
    out.table(f"{t}.wte.new_embedding", TensorClass.EMBEDDING, extra, h)
    qkv_bias = cfg.flag("qkv_bias", False)
    for i in range(cfg.layer_count("num_hidden_layers")):
        p = f"{t}.blocks.{i}"
        out.linear(f"{p}.att_proj", _A, (heads + 2 * kv) * hd, h, bias=qkv_bias)
        out.linear(f"{p}.attn_out", _A, h, heads * hd)
        out.linear(f"{p}.ff_proj", TensorClass.MLP, inter, h)
        out.linear(f"{p}.ff_out", TensorClass.MLP, h, inter // 2)
        out.norm(f"{p}.attn_norm", _N, h)
        out.norm(f"{p}.ff_norm", _N, h)
    out.norm(f"{t}.ln_f", _N, h)
    if not cfg.flag("weight_tying", False):
        out.linear(f"{t}.ff_out", TensorClass.LM_HEAD, rows, h)


def _mamba2(out: TensorList, p: str, m: Mamba2, h: int, *, bias: bool, conv_bias: bool) -> None:
    # transformers NemotronHMamba2Mixer (Mamba2Mixer, GraniteMoeHybridMambaLayer): in_proj to
    # x, z, B, C and dt (2 x intermediate + 2 x n_groups x state + heads), a depthwise conv1d
    # over x, B, C (with bias when use_conv_bias), dt_bias / A_log / D per head, a gated RMSNorm
    # over intermediate, out_proj.
    inner = m.num_heads * m.head_dim
    groups_state = m.n_groups * m.state_size
    mamba, state = TensorClass.MAMBA, TensorClass.CONV_STATE
    out.linear(f"{p}.in_proj", mamba, 2 * inner + 2 * groups_state + m.num_heads, h, bias=bias)
    conv_dim = inner + 2 * groups_state
    out.vector(f"{p}.conv1d.weight", state, (conv_dim, 1, m.conv_kernel))
    if conv_bias:
        out.vector(f"{p}.conv1d.bias", state, (conv_dim,))
    for name in ("dt_bias", "A_log", "D"):
        out.vector(f"{p}.{name}", state, (m.num_heads,))
    out.norm(f"{p}.norm", _N, inner)
    out.linear(f"{p}.out_proj", mamba, h, inner, bias=bias)


def _nemotron_h(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    # transformers NemotronHModel: backbone.embeddings, backbone.layers.{i} each a pre-norm and
    # one mixer (M Mamba-2, * attention, - MLP, E MoE), backbone.norm_f, lm_head.
    h = _hidden(cfg)
    pattern = cfg.raw("hybrid_override_pattern")
    if isinstance(pattern, str):
        blocks = [{"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}[c] for c in pattern]
    else:
        blocks = cfg.str_list("layers_block_type") or []
    vocab = _vocab(cfg)
    out.embedding("backbone.embeddings", TensorClass.EMBEDDING, vocab, h)
    heads = cfg.get_int("num_attention_heads")
    mlp_bias = cfg.flag("mlp_bias", False)
    for i, (block, mixer) in enumerate(zip(blocks, mixers, strict=True)):
        p = f"backbone.layers.{i}"
        out.norm(f"{p}.norm", _N, h)
        m = f"{p}.mixer"
        if block == "mamba" and isinstance(mixer, Mamba2):
            bias = cfg.flag("use_bias", cfg.flag("mamba_proj_bias", False))
            _mamba2(out, m, mixer, h, bias=bias, conv_bias=cfg.flag("use_conv_bias", True))
        elif block == "attention" and isinstance(mixer, FullAttention):
            bias = cfg.flag("attention_bias", False)
            hd, kv = mixer.head_dim, mixer.num_kv_heads
            out.linear(f"{m}.q_proj", _A, heads * hd, h, bias=bias)
            out.linear(f"{m}.k_proj", _A, kv * hd, h, bias=bias)
            out.linear(f"{m}.v_proj", _A, kv * hd, h, bias=bias)
            out.linear(f"{m}.o_proj", _A, h, heads * hd, bias=bias)
        elif block == "mlp":
            # NemotronHMLP: up_proj / down_proj, squared-ReLU, not gated.
            inter = cfg.get_int("intermediate_size")
            out.linear(f"{m}.up_proj", TensorClass.MLP, inter, h, bias=mlp_bias)
            out.linear(f"{m}.down_proj", TensorClass.MLP, h, inter, bias=mlp_bias)
        elif block == "moe":
            # NemotronHMOE: a router gate with e_score_correction_bias, n_routed_experts
            # ungated experts (up_proj, down_proj) of moe_intermediate_size and one shared MLP
            # of moe_shared_expert_intermediate_size.
            e = cfg.get_int("n_routed_experts")
            inter = cfg.get_int("moe_intermediate_size")
            shared = cfg.get_int("moe_shared_expert_intermediate_size")
            router, experts = TensorClass.ROUTER, TensorClass.ROUTED_EXPERTS
            out.linear(f"{m}.gate", router, e, h)
            out.vector(f"{m}.gate.e_score_correction_bias", router, (e,))
            # vLLM nemotron_h.py NemotronHMoE: with moe_latent_size (Nemotron 3 Super/Ultra)
            # the routed experts work in the latent width, entered through fc1_latent_proj
            # (hidden -> latent) and left through fc2_latent_proj (latent -> hidden).
            width = _nemotron_latent(cfg, out, m, h, mlp_bias)
            out.linear(f"{m}.experts.0.up_proj", experts, inter, width, bias=mlp_bias, count=e)
            out.linear(f"{m}.experts.0.down_proj", experts, width, inter, bias=mlp_bias, count=e)
            shared_cls = TensorClass.SHARED_EXPERTS
            out.linear(f"{m}.shared_experts.up_proj", shared_cls, shared, h, bias=mlp_bias)
            out.linear(f"{m}.shared_experts.down_proj", shared_cls, h, shared, bias=mlp_bias)
        else:
            raise SizingError(cfg.where("hybrid_override_pattern"), f"block {i} is {block!r}")
    out.norm("backbone.norm_f", _N, h)
    if not _tied(cfg):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)


def _nemotron_latent(cfg: HFConfig, out: TensorList, m: str, h: int, bias: bool) -> int:
    latent = cfg.opt_int("moe_latent_size")
    if latent is None:
        return h
    out.linear(f"{m}.fc1_latent_proj", TensorClass.ROUTED_EXPERTS, latent, h, bias=bias)
    out.linear(f"{m}.fc2_latent_proj", TensorClass.ROUTED_EXPERTS, h, latent, bias=bias)
    return latent


def _jamba(cfg: HFConfig, mixers: Sequence[Layer], out: TensorList) -> None:
    # transformers JambaModel: per layer an attention (q/k/v/o, no bias) or a Mamba-1 mixer
    # (JambaMambaMixer: in_proj to 2 x inner, conv1d with bias, x_proj to dt_rank + 2 x state,
    # dt_proj with bias, A_log [inner, state], D, out_proj, and RMSNorms on dt, B and C), then a
    # dense MLP or, every expert_layer_period layers from expert_layer_offset, a router and
    # num_experts gated experts; input_layernorm / pre_ff_layernorm; final_layernorm.
    h = _hidden(cfg)
    heads = cfg.get_int("num_attention_heads")
    vocab = _vocab(cfg)
    inter = cfg.get_int("intermediate_size")
    experts = cfg.get_int("num_experts", default=16)
    period = cfg.get_int("expert_layer_period", default=2)
    offset = cfg.get_int("expert_layer_offset", default=1, minimum=0)
    out.embedding("model.embed_tokens", TensorClass.EMBEDDING, vocab, h)
    for i, mixer in enumerate(mixers):
        p = f"model.layers.{i}"
        if isinstance(mixer, FullAttention):
            hd, kv = mixer.head_dim, mixer.num_kv_heads
            out.linear(f"{p}.self_attn.q_proj", _A, heads * hd, h)
            out.linear(f"{p}.self_attn.k_proj", _A, kv * hd, h)
            out.linear(f"{p}.self_attn.v_proj", _A, kv * hd, h)
            out.linear(f"{p}.self_attn.o_proj", _A, h, heads * hd)
        elif isinstance(mixer, Mamba1):
            _mamba1(cfg, out, f"{p}.mamba", mixer, h)
        else:
            raise SizingError(cfg.where("layers_block_type"), f"layer {i} has no rules")
        out.norm(f"{p}.input_layernorm", _N, h)
        out.norm(f"{p}.pre_ff_layernorm", _N, h)
        if experts > 1 and i % period == offset:
            out.linear(f"{p}.feed_forward.router", TensorClass.ROUTER, experts, h)
            experts_cls = TensorClass.ROUTED_EXPERTS
            _gated_mlp(out, f"{p}.feed_forward.experts.0", experts_cls, h, inter, count=experts)
        else:
            _gated_mlp(out, f"{p}.feed_forward", TensorClass.MLP, h, inter)
    out.norm("model.final_layernorm", _N, h)
    if not _tied(cfg):
        out.linear("lm_head", TensorClass.LM_HEAD, vocab, h)


def _mamba1(cfg: HFConfig, out: TensorList, p: str, m: Mamba1, h: int) -> None:
    inner, state = m.intermediate_size, m.state_size
    dt_rank_raw = cfg.raw("mamba_dt_rank")
    dt_rank = -(-h // 16) if dt_rank_raw in (None, "auto") else cfg.get_int("mamba_dt_rank")
    proj_bias = cfg.flag("mamba_proj_bias", False)
    mamba, conv = TensorClass.MAMBA, TensorClass.CONV_STATE
    out.linear(f"{p}.in_proj", mamba, 2 * inner, h, bias=proj_bias)
    out.vector(f"{p}.conv1d.weight", conv, (inner, 1, m.conv_kernel))
    if cfg.flag("mamba_conv_bias", True):
        out.vector(f"{p}.conv1d.bias", conv, (inner,))
    out.linear(f"{p}.x_proj", mamba, dt_rank + 2 * state, inner)
    out.linear(f"{p}.dt_proj", mamba, inner, dt_rank, bias=True)
    out.vector(f"{p}.A_log", conv, (inner, state))
    out.vector(f"{p}.D", conv, (inner,))
    out.linear(f"{p}.out_proj", mamba, h, inner, bias=proj_bias)
    for name, dim in (("dt_layernorm", dt_rank), ("b_layernorm", state), ("c_layernorm", state)):
        out.norm(f"{p}.{name}", _N, dim)


__all__ = [
    "ParameterCount",
    "Tensor",
    "TensorClass",
    "TensorRole",
    "count_parameters",
]
