"""Parameters of the vision towers and multimodal projectors a config.json describes.

One function per tower family, each naming the modelling code it follows (`transformers` paths
are under `src/transformers/models/`, vLLM paths under `vllm/model_executor/models/`). A tower
with no rules here -- or an audio tower -- raises `SizingError` naming the config key.
"""

from __future__ import annotations

from math import prod
from typing import Final

from ..errors import SizingError
from .architecture import EncoderGeometry
from .config_view import ConfigView, HFConfig
from .tensors import TensorClass, TensorList


def count_towers(cfg: HFConfig, out: TensorList, text_hidden: int) -> None:
    """The vision (or audio) tower and projector of a multimodal config, into `out`."""
    top = cfg.top_view()
    if cfg.model_type == "molmo":
        _molmo_vision(cfg, out, text_hidden)
        return
    audio = top.sub("audio_config")
    if audio is not None:
        raise SizingError(
            "audio_config", "kvplan has no parameter rules for audio towers; pass weight_bytes"
        )
    vision = top.sub("vision_config")
    if vision is None:
        return
    # vLLM EngineArgs.language_model_only (also read from the config, as the Qwen3.6 NVFP4
    # export writes it): the tower stays in the checkpoint but is not loaded.
    out.served = not top.flag("language_model_only", False)
    kind = vision.raw("model_type")
    top_type = cfg.top_model_type
    if top_type == "gemma3" and kind == "siglip_vision_model":
        _siglip(vision, out, "model.vision_tower.vision_model")
        _gemma3_projector(vision, out, text_hidden)
    elif top_type == "gemma4" and kind == "gemma4_vision":
        _gemma4_vision(vision, out, text_hidden)
    elif top_type in ("llava", "llava_next") and kind == "clip_vision_model":
        _clip(vision, out, "model.vision_tower.vision_model", _llava_loaded_layers(vision, top))
        _llava_projector(vision, out, text_hidden, top)
    elif top_type == "mistral3" and kind == "pixtral":
        _pixtral(vision, out)
        _mistral3_projector(vision, out, text_hidden, top)
    elif top_type == "llama4" and kind == "llama4_vision_model":
        _llama4_vision(vision, out, text_hidden)
    elif top_type == "kimi_vl" and kind == "moonvit":
        _moonvit(vision, out, text_hidden)
    elif top_type == "kimi_k3" and kind is None:
        _kimi_k3_vision(vision, out, text_hidden)
    elif top_type in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"):
        _qwen3_vision(vision, out)
    else:
        raise SizingError(
            vision.where("model_type"),
            f"vision tower {kind!r} of a {top_type!r} model: kvplan has no parameter rules "
            "for it; pass weight_bytes",
        )
    out.served = True


def _vit_layers(
    out: TensorList,
    vision: ConfigView,
    p: str,
    names: tuple[str, str, str, str, str, str, str, str],
    loaded_layers: int | None = None,
) -> None:
    """The pre-norm ViT block of CLIP / SigLIP / Llama 4: q, k, v, out projections and a
    two-layer MLP, all with biases, and two LayerNorms (weight and bias). Layers from
    `loaded_layers` on stay in the checkpoint but are not served."""
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    inter = vision.get_int("intermediate_size")
    q, k, val, o, fc1, fc2, ln1, ln2 = names
    outer = out.served
    for i in range(vision.layer_count("num_hidden_layers")):
        out.served = outer and (loaded_layers is None or i < loaded_layers)
        b = f"{p}.{i}"
        for proj in (q, k, val, o):
            out.linear(f"{b}.{proj}", v, h, h, bias=True)
        out.linear(f"{b}.{fc1}", v, inter, h, bias=True)
        out.linear(f"{b}.{fc2}", v, h, inter, bias=True)
        out.norm(f"{b}.{ln1}", v, h, bias=True)
        out.norm(f"{b}.{ln2}", v, h, bias=True)
    out.served = outer


_CLIP_NAMES: Final = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.out_proj",
    "mlp.fc1",
    "mlp.fc2",
    "layer_norm1",
    "layer_norm2",
)


def _siglip(vision: ConfigView, out: TensorList, p: str) -> None:
    # transformers SiglipVisionTransformer: patch_embedding Conv2d with bias, a learned
    # position_embedding per patch, encoder layers, post_layernorm; the attention-pooling head
    # only with vision_use_head (Gemma 3 sets it false).
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    patch = vision.get_int("patch_size")
    channels = vision.get_int("num_channels", default=3)
    positions = (vision.get_int("image_size") // patch) ** 2
    out.vector(f"{p}.embeddings.patch_embedding.weight", v, (h, channels, patch, patch))
    out.vector(f"{p}.embeddings.patch_embedding.bias", v, (h,))
    out.vector(f"{p}.embeddings.position_embedding.weight", v, (positions, h))
    _vit_layers(out, vision, f"{p}.encoder.layers", _CLIP_NAMES)
    out.norm(f"{p}.post_layernorm", v, h, bias=True)
    if vision.flag("vision_use_head", True):
        raise SizingError(
            vision.where("vision_use_head"), "the SigLIP pooling head is not counted by kvplan"
        )


def _gemma3_projector(vision: ConfigView, out: TensorList, text_hidden: int) -> None:
    # transformers Gemma3MultiModalProjector: mm_input_projection_weight (vision hidden x text
    # hidden) and mm_soft_emb_norm (RMSNorm over vision hidden).
    # (a bare Parameter multiplied in, not an nn.Linear: no quantizer targets it)
    h = vision.get_int("hidden_size")
    proj = TensorClass.PROJECTOR
    out.vector("model.multi_modal_projector.mm_input_projection_weight", proj, (h, text_hidden))
    out.norm("model.multi_modal_projector.mm_soft_emb_norm", proj, h)


def _llava_loaded_layers(vision: ConfigView, top: ConfigView) -> int:
    """The CLIP layers vLLM builds for LLaVA: up to the one `vision_feature_layer` reads
    (vLLM llava.py `_get_num_hidden_layers` / `get_layer_index`: a negative index counts
    from the end, -2 by transformers LlavaConfig's default, so 23 of CLIP-L's 24)."""
    layers = vision.layer_count("num_hidden_layers")
    raw = top.raw("vision_feature_layer")
    indexes = raw if isinstance(raw, list) else [-2 if raw is None else raw]
    deepest = 0
    for index in indexes:
        if isinstance(index, bool) or not isinstance(index, int) or not -layers <= index <= layers:
            raise SizingError(
                top.where("vision_feature_layer"),
                f"must be a layer index of the {layers}-layer vision tower, got {index!r}",
            )
        deepest = max(deepest, layers + index + 1 if index < 0 else index)
    return deepest


def _clip(vision: ConfigView, out: TensorList, p: str, loaded_layers: int | None = None) -> None:
    # transformers CLIPVisionTransformer: class_embedding, patch_embedding Conv2d without bias,
    # position_embedding for the patches + class token, pre_layrnorm, encoder, post_layernorm.
    # vLLM's LLaVA builds the tower only up to its feature layer, without post_layernorm
    # (llava.py `init_vision_tower_for_llava(..., require_post_norm=False)`): the rest is in
    # the checkpoint but not loaded.
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    patch = vision.get_int("patch_size")
    channels = vision.get_int("num_channels", default=3)
    positions = (vision.get_int("image_size") // patch) ** 2 + 1
    out.vector(f"{p}.embeddings.class_embedding", v, (h,))
    out.vector(f"{p}.embeddings.patch_embedding.weight", v, (h, channels, patch, patch))
    out.vector(f"{p}.embeddings.position_embedding.weight", v, (positions, h))
    out.norm(f"{p}.pre_layrnorm", v, h, bias=True)
    _vit_layers(out, vision, f"{p}.encoder.layers", _CLIP_NAMES, loaded_layers)
    outer = out.served
    out.served = outer and loaded_layers is None
    out.norm(f"{p}.post_layernorm", v, h, bias=True)
    out.served = outer


def _llava_projector(
    vision: ConfigView, out: TensorList, text_hidden: int, top: ConfigView
) -> None:
    # transformers LlavaMultiModalProjector: linear_1 (vision -> text), linear_2 (text -> text),
    # biases with multimodal_projector_bias (default true).
    bias = top.flag("multimodal_projector_bias", True)
    h = vision.get_int("hidden_size")
    proj = TensorClass.PROJECTOR
    out.linear("model.multi_modal_projector.linear_1", proj, text_hidden, h, bias=bias)
    out.linear("model.multi_modal_projector.linear_2", proj, text_hidden, text_hidden, bias=bias)


def _pixtral(vision: ConfigView, out: TensorList) -> None:
    # transformers PixtralVisionModel: patch_conv without bias, ln_pre (RMSNorm), and per layer
    # attention_norm, q/k/v/o without bias, ffn_norm and a gated feed_forward.
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    inter = vision.get_int("intermediate_size")
    patch = vision.get_int("patch_size")
    channels = vision.get_int("num_channels", default=3)
    heads = vision.get_int("num_attention_heads")
    hd = vision.get_int("head_dim", default=h // heads)
    p = "model.vision_tower"
    out.vector(f"{p}.patch_conv.weight", v, (h, channels, patch, patch))
    out.norm(f"{p}.ln_pre", v, h)
    for i in range(vision.layer_count("num_hidden_layers")):
        b = f"{p}.transformer.layers.{i}"
        out.norm(f"{b}.attention_norm", v, h)
        for proj in ("q_proj", "k_proj", "v_proj"):
            out.linear(f"{b}.attention.{proj}", v, heads * hd, h)
        out.linear(f"{b}.attention.o_proj", v, h, heads * hd)
        out.norm(f"{b}.ffn_norm", v, h)
        out.linear(f"{b}.feed_forward.gate_proj", v, inter, h)
        out.linear(f"{b}.feed_forward.up_proj", v, inter, h)
        out.linear(f"{b}.feed_forward.down_proj", v, h, inter)


def _mistral3_projector(
    vision: ConfigView, out: TensorList, text_hidden: int, top: ConfigView
) -> None:
    # transformers Mistral3MultiModalProjector: RMSNorm over the vision hidden, the patch
    # merger (spatial_merge_size^2 patches -> one, no bias), linear_1 and linear_2 (biases with
    # multimodal_projector_bias).
    h = vision.get_int("hidden_size")
    merge = top.get_int("spatial_merge_size", default=2)
    bias = top.flag("multimodal_projector_bias", False)
    proj = TensorClass.PROJECTOR
    p = "model.multi_modal_projector"
    out.norm(f"{p}.norm", proj, h)
    out.linear(f"{p}.patch_merger.merging_layer", proj, h, h * merge * merge)
    out.linear(f"{p}.linear_1", proj, text_hidden, h, bias=bias)
    out.linear(f"{p}.linear_2", proj, text_hidden, text_hidden, bias=bias)


def _llama4_vision(vision: ConfigView, out: TensorList, text_hidden: int) -> None:
    # vLLM mllama4.py Llama4VisionModel: patch_embedding (an unfold + Linear without bias),
    # class_embedding, positional_embedding_vlm (patches + 1), layernorm_pre/post, encoder layers
    # (qkv/o and fc1/fc2 with biases, two LayerNorms), the vision_adapter pixel-shuffle MLP
    # (fc1: intermediate_size -> projector_input_dim, fc2 -> projector_output_dim, biases with
    # multi_modal_projector_bias); Llama4MultiModalProjector.linear_1 (vision_output_dim -> text).
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    patch = vision.get_int("patch_size")
    channels = vision.get_int("num_channels", default=3)
    positions = (vision.get_int("image_size") // patch) ** 2 + 1
    p = "vision_model"
    out.linear(f"{p}.patch_embedding.linear", v, h, channels * patch * patch)
    out.vector(f"{p}.class_embedding", v, (h,))
    out.vector(f"{p}.positional_embedding_vlm", v, (positions, h))
    out.norm(f"{p}.layernorm_pre", v, h, bias=True)
    out.norm(f"{p}.layernorm_post", v, h, bias=True)
    names = (
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.o_proj",
        "mlp.fc1",
        "mlp.fc2",
        "input_layernorm",
        "post_attention_layernorm",
    )
    _vit_layers(out, vision, f"{p}.model.layers", names)
    bias = vision.flag("multi_modal_projector_bias", False)
    inter = vision.get_int("intermediate_size")
    proj_in = vision.get_int("projector_input_dim")
    proj_out = vision.get_int("projector_output_dim")
    out.linear(f"{p}.vision_adapter.mlp.fc1", v, proj_in, inter, bias=bias)
    out.linear(f"{p}.vision_adapter.mlp.fc2", v, proj_out, proj_in, bias=bias)
    vision_out = vision.get_int("vision_output_dim")
    out.linear("multi_modal_projector.linear_1", TensorClass.PROJECTOR, text_hidden, vision_out)


def _moonvit(vision: ConfigView, out: TensorList, text_hidden: int) -> None:
    # vLLM moonvit.py MoonVitPretrainedModel: patch_embed.proj Conv2d with bias, a learned 2-D
    # pos_emb (init_pos_emb_height x init_pos_emb_width), blocks (norm0, norm1 LayerNorms, wqkv
    # and wo with biases, mlp fc0/fc1 with biases), final_layernorm; kimi_vl.py
    # KimiVLMultiModalProjector: pre_norm LayerNorm, linear_1 (merged patches, square) and
    # linear_2 (-> text hidden), with biases.
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    inter = vision.get_int("intermediate_size")
    patch = vision.get_int("patch_size")
    p = "vision_tower"
    out.vector(f"{p}.patch_embed.proj.weight", v, (h, 3, patch, patch))
    out.vector(f"{p}.patch_embed.proj.bias", v, (h,))
    rows = vision.get_int("init_pos_emb_height")
    cols = vision.get_int("init_pos_emb_width")
    out.vector(f"{p}.patch_embed.pos_emb.weight", v, (rows, cols, h))
    for i in range(vision.layer_count("num_hidden_layers")):
        b = f"{p}.encoder.blocks.{i}"
        out.norm(f"{b}.norm0", v, h, bias=True)
        out.norm(f"{b}.norm1", v, h, bias=True)
        out.linear(f"{b}.wqkv", v, 3 * h, h, bias=True)
        out.linear(f"{b}.wo", v, h, h, bias=True)
        out.linear(f"{b}.mlp.fc0", v, inter, h, bias=True)
        out.linear(f"{b}.mlp.fc1", v, h, inter, bias=True)
    out.norm(f"{p}.encoder.final_layernorm", v, h, bias=True)
    merge = vision.int_list("merge_kernel_size") or [2, 2]
    merged = h * prod(merge)
    proj = TensorClass.PROJECTOR
    out.norm("multi_modal_projector.pre_norm", proj, h, bias=True)
    out.linear("multi_modal_projector.linear_1", proj, merged, merged, bias=True)
    out.linear("multi_modal_projector.linear_2", proj, text_hidden, merged, bias=True)


def _kimi_k3_vision(vision: ConfigView, out: TensorList, text_hidden: int) -> None:
    # vLLM 0.33.0 kimi_k25_vit.py MoonViT3dPretrainedModel as models/kimi_k3/nvidia/model.py
    # KimiK3ForConditionalGeneration builds it from transformers_utils/configs/kimi_k3.py
    # KimiK3VisionConfig (hidden_size = vt_hidden_size, ...): patch_embed.proj Conv2d (bias when
    # patch_embed_proj_bias), a divided_fixed pos_emb of init_pos_emb_height x width x hidden
    # (its time table is a buffer); blocks of norm0/norm1, wqkv (hidden -> 3 x qkv_hidden_size)
    # and wo (attn_bias), MLP2 fc0/fc1 (linear_bias); final_layernorm.
    # KimiK25MultiModalProjector "patchmergerv2": linear_1 (merged, square) and linear_2
    # (-> text hidden) without bias, post_norm RMSNorm over the text hidden size.
    v = TensorClass.VISION
    h = vision.get_int("vt_hidden_size")
    inter = vision.get_int("vt_intermediate_size")
    qkv = vision.get_int("qkv_hidden_size", default=h)
    patch = vision.get_int("patch_size")
    for key, want in (("pos_emb_type", "divided_fixed"), ("mlp_type", "mlp2")):
        if vision.raw(key) not in (None, want):
            raise SizingError(vision.where(key), f"only {want!r} has parameter rules in kvplan")
    norm_type = vision.raw("norm_type") or "layernorm"
    if norm_type not in ("layernorm", "rmsnorm"):
        raise SizingError(vision.where("norm_type"), "must be layernorm or rmsnorm")
    norm_bias = norm_type == "layernorm"
    attn_bias = vision.flag("attn_bias", True)
    linear_bias = vision.flag("linear_bias", True)
    p = "vision_tower"
    out.vector(f"{p}.patch_embed.proj.weight", v, (h, 3, patch, patch))
    if vision.flag("patch_embed_proj_bias", True):
        out.vector(f"{p}.patch_embed.proj.bias", v, (h,))
    rows = vision.get_int("init_pos_emb_height")
    cols = vision.get_int("init_pos_emb_width")
    out.vector(f"{p}.patch_embed.pos_emb.weight", v, (rows, cols, h))
    for i in range(vision.layer_count("vt_num_hidden_layers")):
        b = f"{p}.encoder.blocks.{i}"
        out.norm(f"{b}.norm0", v, h, bias=norm_bias)
        out.norm(f"{b}.norm1", v, h, bias=norm_bias)
        out.linear(f"{b}.wqkv", v, 3 * qkv, h, bias=attn_bias)
        out.linear(f"{b}.wo", v, h, qkv, bias=attn_bias)
        out.linear(f"{b}.mlp.fc0", v, inter, h, bias=linear_bias)
        out.linear(f"{b}.mlp.fc1", v, h, inter, bias=linear_bias)
    out.norm(f"{p}.encoder.final_layernorm", v, h, bias=norm_bias)
    if vision.raw("mm_projector_type") != "patchmergerv2":
        raise SizingError(
            vision.where("mm_projector_type"), "only 'patchmergerv2' has parameter rules in kvplan"
        )
    merged = h * prod(vision.int_list("merge_kernel_size") or [2, 2])
    proj = TensorClass.PROJECTOR
    out.linear("mm_projector.linear_1", proj, merged, merged)
    out.linear("mm_projector.linear_2", proj, text_hidden, merged)
    out.norm("mm_projector.post_norm", proj, text_hidden)


def _gemma4_vision(vision: ConfigView, out: TensorList, text_hidden: int) -> None:
    # transformers Gemma4VisionModel: patch_embedder (input_proj from 3 x patch^2, a 2 x
    # position_embedding_size x hidden position table), encoder layers (q/k/v/o without bias,
    # q_norm/k_norm over head_dim, a gated MLP, four RMSNorms), std_bias/std_scale when
    # standardize; Gemma4MultimodalEmbedder.embedding_projection (vision hidden -> text hidden).
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    inter = vision.get_int("intermediate_size")
    heads = vision.get_int("num_attention_heads")
    kv = vision.get_int("num_key_value_heads", default=heads)
    hd = vision.get_int("head_dim", default=h // heads)
    patch = vision.get_int("patch_size")
    p = "model.vision_tower"
    out.linear(f"{p}.patch_embedder.input_proj", v, h, 3 * patch * patch)
    table = vision.get_int("position_embedding_size")
    out.vector(f"{p}.patch_embedder.position_embedding_table", v, (2, table, h))
    for i in range(vision.layer_count("num_hidden_layers")):
        b = f"{p}.encoder.layers.{i}"
        out.linear(f"{b}.self_attn.q_proj.linear", v, heads * hd, h)
        out.linear(f"{b}.self_attn.k_proj.linear", v, kv * hd, h)
        out.linear(f"{b}.self_attn.v_proj.linear", v, kv * hd, h)
        out.linear(f"{b}.self_attn.o_proj.linear", v, h, heads * hd)
        out.norm(f"{b}.self_attn.q_norm", v, hd)
        out.norm(f"{b}.self_attn.k_norm", v, hd)
        out.linear(f"{b}.mlp.gate_proj.linear", v, inter, h)
        out.linear(f"{b}.mlp.up_proj.linear", v, inter, h)
        out.linear(f"{b}.mlp.down_proj.linear", v, h, inter)
        for norm in (
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ):
            out.norm(f"{b}.{norm}", v, h)
    if vision.flag("standardize", False):
        out.vector(f"{p}.std_bias", v, (h,))
        out.vector(f"{p}.std_scale", v, (h,))
    out.linear("model.embed_vision.embedding_projection", TensorClass.PROJECTOR, text_hidden, h)


def _qwen3_vision(vision: ConfigView, out: TensorList) -> None:
    # transformers Qwen3VLVisionModel (Qwen3_5 uses it): patch_embed Conv3d with bias over
    # temporal_patch_size x patch x patch, pos_embed (num_position_embeddings), blocks (norm1,
    # norm2 LayerNorms, attn.qkv and attn.proj, mlp linear_fc1/fc2, all with biases), the merger
    # (LayerNorm, linear_fc1 over spatial_merge_size^2 patches, linear_fc2 -> out_hidden_size)
    # and one such merger per deepstack_visual_indexes entry (norm after the shuffle).
    v = TensorClass.VISION
    h = vision.get_int("hidden_size")
    inter = vision.get_int("intermediate_size")
    patch = vision.get_int("patch_size")
    temporal = vision.get_int("temporal_patch_size", default=2)
    channels = vision.get_int("in_channels", default=3)
    p = "model.visual"
    out.vector(f"{p}.patch_embed.proj.weight", v, (h, channels, temporal, patch, patch))
    out.vector(f"{p}.patch_embed.proj.bias", v, (h,))
    out.vector(f"{p}.pos_embed.weight", v, (vision.get_int("num_position_embeddings"), h))
    for i in range(vision.layer_count("depth")):
        b = f"{p}.blocks.{i}"
        out.norm(f"{b}.norm1", v, h, bias=True)
        out.norm(f"{b}.norm2", v, h, bias=True)
        out.linear(f"{b}.attn.qkv", v, 3 * h, h, bias=True)
        out.linear(f"{b}.attn.proj", v, h, h, bias=True)
        out.linear(f"{b}.mlp.linear_fc1", v, inter, h, bias=True)
        out.linear(f"{b}.mlp.linear_fc2", v, h, inter, bias=True)
    merge = vision.get_int("spatial_merge_size", default=2)
    merged = h * merge * merge
    text = vision.get_int("out_hidden_size")
    mergers = [("merger", h)] + [
        (f"deepstack_merger_list.{k}", merged)
        for k in range(len(vision.int_list("deepstack_visual_indexes") or []))
    ]
    for name, norm_dim in mergers:
        out.norm(f"{p}.{name}.norm", TensorClass.PROJECTOR, norm_dim, bias=True)
        out.linear(f"{p}.{name}.linear_fc1", TensorClass.PROJECTOR, merged, merged, bias=True)
        out.linear(f"{p}.{name}.linear_fc2", TensorClass.PROJECTOR, text, merged, bias=True)


def _molmo_vision(cfg: HFConfig, out: TensorList, text_hidden: int) -> None:
    # vLLM molmo.py VisionBackboneConfig: the Molmo config.json carries no vision geometry; the
    # model code fixes a CLIP ViT-L/14 at 336 px cut to 23 layers (image_emb_dim 1024, 16 heads,
    # mlp 4096, 577 positions), image_pooling_2d attention over two concatenated ViT layers,
    # an image_projector gated MLP (w1, w3 of intermediate_size / 2, w2 -> hidden) and a
    # pad_embed of 2 x (2 x 1024).
    text_inter = cfg.get_int("intermediate_size")
    v = TensorClass.VISION
    dim, layers, mlp, patch, positions = 1024, 23, 4096, 14, 577
    b = "model.vision_backbone"
    vit = f"{b}.image_vit"
    out.vector(f"{vit}.class_embedding", v, (dim,))
    out.vector(f"{vit}.positional_embedding", v, (positions, dim))
    out.linear(f"{vit}.patch_embedding", v, dim, patch * patch * 3)
    out.norm(f"{vit}.pre_ln", v, dim, bias=True)
    for i in range(layers):
        p = f"{vit}.transformer.resblocks.{i}"
        for proj in ("wq", "wk", "wv", "wo"):
            out.linear(f"{p}.attention.{proj}", v, dim, dim, bias=True)
        out.linear(f"{p}.feed_forward.w1", v, mlp, dim, bias=True)
        out.linear(f"{p}.feed_forward.w2", v, dim, mlp, bias=True)
        out.norm(f"{p}.attention_norm", v, dim, bias=True)
        out.norm(f"{p}.ffn_norm", v, dim, bias=True)
    pool = f"{b}.image_pooling_2d"
    for proj in ("wq", "wk", "wv"):
        out.linear(f"{pool}.{proj}", v, dim, 2 * dim, bias=True)
    out.linear(f"{pool}.wo", v, dim, dim, bias=True)
    proj_cls = TensorClass.PROJECTOR
    out.linear(f"{b}.image_projector.w1", proj_cls, text_inter // 2, dim)
    out.linear(f"{b}.image_projector.w3", proj_cls, text_inter // 2, dim)
    out.linear(f"{b}.image_projector.w2", proj_cls, text_hidden, text_inter // 2)
    out.vector(f"{b}.pad_embed", v, (2, 2 * dim))


# transformers Llama4ImageProcessorFast: `max_patches` = 16 tiles (preprocessor_config.json of
# meta-llama/Llama-4-Scout-17B-16E-Instruct; config.json does not carry it). vLLM
# mllama4.py Mllama4ProcessingInfo.get_image_size_with_most_features: 16 tiles high, one wide.
LLAMA4_MAX_TILES: Final = 16


def encoder_geometry(cfg: HFConfig, text_hidden: int | None) -> EncoderGeometry | None:
    """The dummy image vLLM's encoder profile runs through the tower, by family (issue 21).

    Read from vLLM 0.19.0 `vllm/model_executor/models/`: each model's ProcessingInfo
    `get_image_size_with_most_features` (the dummy image) and `get_num_image_tokens` (the
    embeddings one image returns). None for a text-only config, a tower without such rules here
    (the profile is then left out of the activation peak, as before), or no text hidden size.
    """
    vision = cfg.top_view().sub("vision_config")
    if vision is None or text_hidden is None or cfg.top_view().flag("language_model_only", False):
        return None
    kind, top_type = vision.raw("model_type"), cfg.top_model_type
    h = vision.get_int("hidden_size")
    inter = vision.get_int("intermediate_size")
    size = vision.get_int("image_size")
    patch = vision.get_int("patch_size")
    channels = vision.get_int("num_channels", default=3)
    grid = -(-size // patch)

    def geometry(tokens: int, images: int, source: str) -> EncoderGeometry:
        return EncoderGeometry(
            modality="image",
            tokens=tokens,
            output_width=text_hidden,
            pixel_elements=images * channels * size * size,
            patches=images * grid * grid,
            hidden_size=h,
            intermediate_size=inter,
            source=source,
        )

    if top_type == "gemma3" and kind == "siglip_vision_model":
        # gemma3_mm.py: no pan-and-scan by default, one 896 x 896 crop of
        # `mm_tokens_per_image` embeddings (Gemma3MultiModalProjector pools 64 x 64 to 16 x 16)
        tokens = cfg.top_view().get_int("mm_tokens_per_image", default=256)
        return geometry(tokens, 1, "gemma3_mm.py Gemma3ProcessingInfo")
    if top_type == "llava" and kind == "clip_vision_model":
        # llava.py get_num_image_tokens: the patch grid; the CLS token is dropped by the
        # 'default' feature select strategy and kept by 'full'
        strategy = cfg.top_view().raw("vision_feature_select_strategy") or "default"
        tokens = grid * grid + (1 if strategy == "full" else 0)
        return geometry(tokens, 1, "llava.py LlavaProcessingInfo")
    if top_type == "mistral3" and kind == "pixtral":
        # mistral3.py: a square image of image_size, patches merged spatial_merge_size^2 to one
        # embedding; the [IMG_BREAK] rows come from the text embedding, not the tower
        merge = cfg.top_view().get_int("spatial_merge_size", default=1)
        side = grid // merge
        return geometry(side * side, 1, "mistral3.py Mistral3ProcessingInfo")
    if top_type == "llama4" and kind == "llama4_vision_model":
        # mllama4.py: 16 tiles and the global tile, each (image/patch)^2 / (1 / ratio^2)
        ratio = vision.raw("pixel_shuffle_ratio")
        if not isinstance(ratio, int | float) or isinstance(ratio, bool) or ratio <= 0:
            raise SizingError(vision.where("pixel_shuffle_ratio"), "must be a positive number")
        per_tile = grid * grid // round(1.0 / (ratio * ratio))
        tiles = LLAMA4_MAX_TILES + 1
        return geometry(per_tile * tiles, tiles, "mllama4.py Mllama4ProcessingInfo")
    return None


__all__ = ["count_towers", "encoder_geometry"]
