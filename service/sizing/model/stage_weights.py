"""Each pipeline stage's weights, as the engines place them (issue 20).

vLLM builds every stage's module tree from the whole config and leaves out what the stage does
not run (vllm/model_executor/models/llama.py `LlamaModel.__init__`, `LlamaForCausalLM.__init__`;
vllm/model_executor/models/utils.py `make_layers`, `PPMissingLayer`; release 0.33.0):

- `embed_tokens` on the first stage, and on the last stage too when `tie_word_embeddings` and
  there is more than one stage (the last stage's `lm_head` is tied to its own copy);
- the decoder layers `get_pp_indices` (vllm/distributed/utils.py) gives each stage;
- the final `norm` and `lm_head` on the last stage only.

SGLang builds its stages from the same pieces (python/sglang/srt/models/llama.py `LlamaModel`:
`pp_group.is_first_rank` for `embed_tokens`, `make_layers` with the pp rank, `is_last_rank` for
`norm` and `lm_head`); kvplan sizes its stages with vLLM's split (not checked line by line).

`weight_split` reads that split from a config's tensors (`param_count`); a tensor that is none
of the three (a vision tower, Gemma-4's per-layer input tables, a family whose names this module
does not know) leaves the split unknown. A catalog entry without a config is split by
`dense_decoder_split` where its parameter count is exactly a Llama-shaped decoder's. Otherwise
the stages get even shares of the weights, with a warning saying so (capacity.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ..units import cdiv
from .architecture import FullAttention, ModelArchitecture, WeightSplit
from .dtypes import WeightFormat
from .tensors import ParameterCount, TensorClass

# The decoder's module paths as param_count writes them (a causal LM, a multimodal model's
# language model, Nemotron-H's backbone).
_DECODER: Final = r"(?:model\.language_model|model|backbone)"
_LAYER: Final = re.compile(rf"^{_DECODER}\.layers\.(\d+)\.")
_EMBEDDING: Final = re.compile(rf"^{_DECODER}\.(?:embed_tokens|embeddings)\.weight$")
_FINAL_NORM: Final = re.compile(rf"^{_DECODER}\.(?:norm|norm_f)\.(?:weight|bias)$")


def weight_split(
    count: ParameterCount, sizes: Sequence[int], num_layers: int
) -> WeightSplit | None:
    """The served tensors of `count` (with `sizes`, each tensor's bytes) by where a stage holds
    them; None when a served tensor is not the embedding, the head or one decoder layer."""
    embedding = [0, 0]
    head = [0, 0]
    layers = [[0, 0] for _ in range(num_layers)]
    has_lm_head = False
    for tensor, size in zip(count.tensors, sizes, strict=True):
        if not tensor.served:
            continue
        layer = _LAYER.match(tensor.name)
        if layer is not None and int(layer.group(1)) < num_layers:
            slot = layers[int(layer.group(1))]
        elif tensor.tensor_class is TensorClass.EMBEDDING and _EMBEDDING.match(tensor.name):
            slot = embedding
        elif tensor.tensor_class is TensorClass.LM_HEAD and tensor.name == "lm_head.weight":
            slot, has_lm_head = head, True
        elif tensor.tensor_class is TensorClass.NORM and _FINAL_NORM.match(tensor.name):
            slot = head
        else:
            return None
        slot[0] += tensor.parameters
        slot[1] += size
    if embedding[0] == 0:
        return None
    return WeightSplit(
        embedding=(embedding[0], embedding[1]),
        head=(head[0], head[1]),
        layers=tuple((p, b) for p, b in layers),
        tied=not has_lm_head,
    )


def dense_decoder_split(arch: ModelArchitecture) -> WeightSplit | None:
    """The split of a model without a config (the catalog's stored form) whose parameter count
    is exactly a Llama-shaped decoder's, tied or untied; None otherwise.

    One layer (transformers LlamaDecoderLayer, no biases): q_proj and o_proj hidden x heads x
    head_dim, k_proj and v_proj hidden x kv_heads x head_dim, gate/up/down 3 x hidden x
    intermediate, two norms of hidden. The rest of num_parameters must be the embedding
    (vocab x hidden) and the final norm (hidden), plus lm_head (vocab x hidden) when untied.
    Only for weights priced from the parameter count (no `weight_bytes`), every tensor alike.
    """
    h, vocab, inter = arch.hidden_size, arch.vocab_size, arch.intermediate_size
    total = arch.num_parameters
    if h is None or vocab is None or inter is None or total is None:
        return None
    if arch.weight_bytes is not None or arch.moe is not None or len(arch.layer_counts) != 1:
        return None
    layer = arch.layers[0]
    if not isinstance(layer, FullAttention) or layer.v_head_dim is not None:
        return None
    q = arch.num_attention_heads * layer.head_dim
    one = 2 * h * q + 2 * h * layer.num_kv_heads * layer.head_dim + 3 * h * inter + 2 * h
    rest = total - arch.num_layers * one
    embedding = vocab * h
    if rest == 2 * embedding + h:
        tied = False
    elif rest == embedding + h:
        tied = True
    else:
        return None
    head = h + (0 if tied else embedding)
    bits = arch.weight_format.bits

    def priced(parameters: int) -> tuple[int, int]:
        return parameters, cdiv(parameters * bits.numerator, 8 * bits.denominator)

    return WeightSplit(
        embedding=priced(embedding),
        head=priced(head),
        layers=(priced(one),) * arch.num_layers,
        tied=tied,
    )


def stage_weight_bytes(
    arch: ModelArchitecture,
    weights_bytes: int,
    stage_sizes: Sequence[int],
    weight_format: WeightFormat | None = None,
) -> tuple[int, ...] | None:
    """Each stage's share of `weights_bytes` (the whole model's, `weight_bytes_total`), by the
    parameters (or, for the checkpoint's own format, the bytes) its tensors hold; None when the
    split is not known.

    The shares are the stage's tensors over all served tensors, scaled to `weights_bytes` (the
    same bytes when they are the config's own count; a caller's `weight_bytes` or a re-priced
    format keeps the stages' proportions). A tied embedding counts on the first and the last
    stage, so the stages add up to more than `weights_bytes` by one embedding.
    """
    # bytes for the checkpoint's own storage (a quantized checkpoint keeps its embedding in
    # bf16); parameters when another weight_format re-prices every tensor alike.
    split, index = arch.weight_split, 1 if weight_format is None else 0
    if split is None:
        split, index = dense_decoder_split(arch), 0
    if split is None or len(split.layers) != sum(stage_sizes):
        return None
    # the head holds lm_head only when untied (a tied model has no lm_head tensor)
    whole = split.embedding[index] + split.head[index] + sum(lay[index] for lay in split.layers)
    if whole == 0:
        return None
    last = len(stage_sizes) - 1
    shares: list[int] = []
    start = 0
    for stage, size in enumerate(stage_sizes):
        held = sum(layer[index] for layer in split.layers[start : start + size])
        start += size
        if stage == 0:
            held += split.embedding[index]
        if stage == last:
            held += split.head[index]
            if split.tied and last > 0:
                held += split.embedding[index]
        shares.append(cdiv(weights_bytes * held, whole))
    return tuple(shares)


__all__ = ["dense_decoder_split", "stage_weight_bytes", "weight_split"]
