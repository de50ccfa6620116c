"""`architecture_from_hf_config`: Hub config.json files -> layer schedules, to the byte.

Each config below is written the way the published config.json spells it (keys and values from
../shared/catalog/models.json, next to the repository, and the source it names). Per-token
arithmetic sits next to each assertion. Long `layer_types` lists are built with list arithmetic
that reproduces the published list exactly.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from service.sizing.engines.kv import kv_bytes_per_token
from service.sizing.errors import SizingError, UnknownLayerKind
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Mamba1,
    Mamba2,
    MixtureOfExperts,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
)
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.hf_config import architecture_from_hf_config, detect_weight_format


def kinds(arch: ModelArchitecture) -> dict[str, int]:
    return dict(Counter(layer.kind.value for layer in arch.layers))


# ai-dynamo/aiconfigurator : aic-core/src/aiconfigurator_core/model_configs/
#   meta-llama--Meta-Llama-3.1-8B_config.json (models.json meta-llama/Llama-3.1-8B)
LLAMA_3_1_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}


def test_llama_3_1_8b_gqa_config_sizes_32_full_attention_layers() -> None:
    arch = architecture_from_hf_config(LLAMA_3_1_8B, name="meta-llama/Llama-3.1-8B")
    # 2 x 32 layers x 8 kv heads x 128 x 2 B = 131,072 (models.json meta-llama/Llama-3.1-8B)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 131_072
    assert kinds(arch) == {"full_attention": 32}
    assert arch.layers[0] == FullAttention(num_kv_heads=8, head_dim=128)
    assert (arch.num_attention_heads, arch.hidden_size, arch.intermediate_size) == (32, 4096, 14336)
    assert (arch.vocab_size, arch.max_position_embeddings) == (128256, 131072)
    assert (arch.dtype, arch.weight_format, arch.moe, arch.name) == (
        "bfloat16",
        "bfloat16",
        None,
        "meta-llama/Llama-3.1-8B",
    )


def test_missing_num_key_value_heads_means_multi_head_attention() -> None:
    # transformers LlamaConfig: num_key_value_heads None -> num_attention_heads (Llama-2 style).
    config = {**LLAMA_3_1_8B, "torch_dtype": "float16"}
    del config["num_key_value_heads"]
    arch = architecture_from_hf_config(config)
    # 2 x 32 layers x 32 kv heads x 128 x 2 B = 524,288 (seed example 1, Llama 2 7B shape)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 524_288


# aiconfigurator src/aiconfigurator/model_configs/Qwen--Qwen2.5-7B_config.json (read at the parent
# of commit c78d3fab; models.json Qwen/Qwen2.5-7B)
QWEN2_5_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 131072,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1",
    "use_cache": True,
    "use_mrope": False,
    "use_sliding_window": False,
    "vocab_size": 152064,
}


def test_qwen2_5_sliding_window_present_but_disabled_is_full_attention() -> None:
    arch = architecture_from_hf_config(QWEN2_5_7B)
    # 2 x 28 layers x 4 kv heads x 128 x 2 B = 57,344 (seed example 6)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 57_344
    assert kinds(arch) == {"full_attention": 28}


def test_qwen2_use_sliding_window_slides_layers_from_max_window_layers_on() -> None:
    # transformers Qwen2Config: with use_sliding_window, layers i >= max_window_layers slide.
    config = {**QWEN2_5_7B, "use_sliding_window": True, "max_window_layers": 20}
    arch = architecture_from_hf_config(config)
    assert kinds(arch) == {"full_attention": 20, "sliding_attention": 8}
    assert arch.layers[19] == FullAttention(num_kv_heads=4, head_dim=128)
    assert arch.layers[20] == SlidingWindowAttention(
        num_kv_heads=4, head_dim=128, sliding_window=131072
    )


# aiconfigurator aic-core/.../Qwen--Qwen3-32B_config.json (models.json Qwen/Qwen3-32B)
QWEN3_32B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "initializer_range": 0.02,
    "intermediate_size": 25600,
    "max_position_embeddings": 40960,
    "max_window_layers": 64,
    "model_type": "qwen3",
    "num_attention_heads": 64,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def test_qwen3_reads_explicit_head_dim_not_hidden_over_heads() -> None:
    arch = architecture_from_hf_config(QWEN3_32B)
    # head_dim 128, not 5120 / 64 = 80:
    # 2 x 64 layers x 8 kv heads x 128 x 2 B = 262,144 (the trap would give 163,840)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 262_144
    assert arch.layers[0] == FullAttention(num_kv_heads=8, head_dim=128)


# aiconfigurator src/aiconfigurator/model_configs/Qwen--Qwen3-Next-80B-A3B-Thinking_config.json
# (commit 1b7cfb10; models.json Qwen/Qwen3-Next-80B-A3B-Thinking)
QWEN3_NEXT_80B: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_next",
    "moe_intermediate_size": 512,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "output_router_logits": False,
    "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.57.0.dev0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def test_qwen3_next_full_attention_interval_gives_36_linear_and_12_full() -> None:
    arch = architecture_from_hf_config(QWEN3_NEXT_80B)
    # layer i is full iff (i + 1) % 4 == 0: 48 / 4 = 12 full, 36 Gated DeltaNet
    assert kinds(arch) == {"linear_attention": 36, "full_attention": 12}
    full = [i for i, layer in enumerate(arch.layers) if layer.kind.value == "full_attention"]
    assert full[:3] == [3, 7, 11]
    assert arch.layers[0] == GatedDeltaNet(
        num_key_heads=16, num_value_heads=32, key_head_dim=128, value_head_dim=128, conv_kernel=4
    )
    # only the 12 full layers grow: 2 x 12 x 2 kv heads x 256 x 2 B = 24,576
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 24_576
    assert arch.moe == MixtureOfExperts(
        num_experts=512,
        experts_per_token=10,
        moe_intermediate_size=512,
        shared_expert_intermediate_size=512,
    )


# aiconfigurator aic-core/.../Qwen--Qwen3.5-27B_config.json (models.json Qwen/Qwen3.5-27B);
# the vision_config is left out, it does not bear on the LM.
QWEN3_5_27B: dict[str, Any] = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "image_token_id": 248056,
    "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "dtype": "bfloat16",
        "eos_token_id": 248044,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 5120,
        "initializer_range": 0.02,
        "intermediate_size": 17408,
        # the published list: (3 x linear_attention, full_attention) repeated 16 times
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 262144,
        "mlp_only_layers": [],
        "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": 24,
        "num_hidden_layers": 64,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06,
        "use_cache": True,
        "vocab_size": 248320,
        "mamba_ssm_dtype": "float32",
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [11, 11, 10],
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
        },
    },
    "tie_word_embeddings": False,
    "transformers_version": "4.57.0.dev0",
    "video_token_id": 248057,
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053,
}
QWEN3_5_27B["text_config"]["layer_types"] = QWEN3_5_27B["text_config"]["layer_types"] * 16


def test_qwen3_5_27b_nested_text_config_is_48_linear_and_16_full_layers() -> None:
    arch = architecture_from_hf_config(QWEN3_5_27B)
    assert kinds(arch) == {"linear_attention": 48, "full_attention": 16}
    # seed example 15: 2 x 16 full layers x 4 kv heads x 256 x 1 B (fp8) = 32,768 = 32 KiB
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) == 32_768
    # the trap counts all 64 layers: 2 x 64 x 4 x 256 x 1 B = 131,072
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) * 4 == 131_072
    # dtype read from text_config.dtype; the recurrent state from mamba_ssm_dtype
    assert (arch.dtype, arch.state_dtype, arch.moe) == ("bfloat16", "float32", None)
    assert arch.layers[0] == GatedDeltaNet(
        num_key_heads=16, num_value_heads=48, key_head_dim=128, value_head_dim=128, conv_kernel=4
    )
    assert arch.layers[3] == FullAttention(num_kv_heads=4, head_dim=256)


def test_qwen3_5_without_layer_types_uses_full_attention_interval() -> None:
    config = copy.deepcopy(QWEN3_5_27B)
    del config["text_config"]["layer_types"]
    arch = architecture_from_hf_config(config)
    # transformers Qwen3_5TextConfig: (i + 1) % 4 == 0 -> full; same 48 + 16 split
    assert kinds(arch) == {"linear_attention": 48, "full_attention": 16}
    assert arch.layers == architecture_from_hf_config(QWEN3_5_27B).layers


# mistralai/Mistral-7B-v0.1 config.json (models.json mistralai/Mistral-7B-v0.1; mlc-ai/mlc-llm
# model_preset.py mistral_7b)
MISTRAL_7B_V0_1: dict[str, Any] = {
    "architectures": ["MistralForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 32000,
}


def test_mistral_7b_v0_1_slides_every_layer_at_4096() -> None:
    arch = architecture_from_hf_config(MISTRAL_7B_V0_1)
    assert kinds(arch) == {"sliding_attention": 32}
    assert set(arch.layers) == {
        SlidingWindowAttention(num_kv_heads=8, head_dim=128, sliding_window=4096)
    }
    # 2 x 32 layers x 8 kv heads x 128 x 2 B = 131,072 per token (capped at 4,096 tokens)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 131_072


def test_null_sliding_window_is_full_attention() -> None:
    # Mistral-7B-v0.3 / Mistral-Nemo publish "sliding_window": null
    arch = architecture_from_hf_config({**MISTRAL_7B_V0_1, "sliding_window": None})
    assert kinds(arch) == {"full_attention": 32}


# aiconfigurator aic-core/.../mistralai--Mixtral-8x7B-v0.1_config.json
MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}


def test_mixtral_experts_use_intermediate_size_and_attention_is_full() -> None:
    arch = architecture_from_hf_config(MIXTRAL_8X7B)
    # 2 x 32 layers x 8 kv heads x 128 x 2 B = 131,072
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 131_072
    assert kinds(arch) == {"full_attention": 32}
    assert arch.moe == MixtureOfExperts(
        num_experts=8, experts_per_token=2, moe_intermediate_size=14336
    )


# google/gemma-2-9b config.json, values from models.json google/gemma-2-9b (mlc-ai/mlc-llm
# gemma2_9b preset; maxtext hf_model_configs gemma2_9b_config). No layer_types in this release.
GEMMA_2_9B: dict[str, Any] = {
    "architectures": ["Gemma2ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0,
    "bos_token_id": 2,
    "cache_implementation": "hybrid",
    "eos_token_id": 1,
    "final_logit_softcapping": 30.0,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "gemma2",
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "pad_token_id": 0,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 256000,
}


def test_gemma2_9b_alternates_21_sliding_and_21_full_layers() -> None:
    arch = architecture_from_hf_config(GEMMA_2_9B)
    assert kinds(arch) == {"sliding_attention": 21, "full_attention": 21}
    # transformers Gemma2Config: (i + 1) % 2 != 0 slides -> layer 0 local, layer 1 global
    assert arch.layers[0] == SlidingWindowAttention(
        num_kv_heads=8, head_dim=256, sliding_window=4096
    )
    assert arch.layers[1] == FullAttention(num_kv_heads=8, head_dim=256)
    # head_dim 256 (not 3584 / 16 = 224): 2 x 42 layers x 8 x 256 x 2 B = 344,064
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 344_064


# google/gemma-3-27b-it config.json: the LM under text_config, torch_dtype only at the top
# (models.json google/gemma-3-27b-it; values as in NVIDIA-NeMo/Megatron-Bridge
# tests/unit_tests/models/gemma/test_gemma3_bridge.py gemma3_27b_config_dict).
GEMMA_3_27B: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "boi_token_index": 255999,
    "eoi_token_index": 256000,
    "eos_token_id": [1, 106],
    "image_token_index": 262144,
    "initializer_range": 0.02,
    "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {
        "head_dim": 128,
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "model_type": "gemma3_text",
        "num_attention_heads": 32,
        "num_hidden_layers": 62,
        "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
    },
    "torch_dtype": "bfloat16",
}
GEMMA_3_27B_SPLIT = {"sliding_attention": 52, "full_attention": 10}


def test_gemma3_27b_sliding_window_pattern_gives_52_sliding_and_10_full() -> None:
    arch = architecture_from_hf_config(GEMMA_3_27B)
    # layers with (i + 1) % 6 == 0 are global: 5, 11, ..., 59 -> 10; 62 - 10 = 52 local
    assert kinds(arch) == GEMMA_3_27B_SPLIT
    assert arch.layers[5] == FullAttention(num_kv_heads=16, head_dim=128)
    assert arch.layers[60] == SlidingWindowAttention(
        num_kv_heads=16, head_dim=128, sliding_window=1024
    )
    # head_dim 128 (not 5376 / 32 = 168): 2 x 62 layers x 16 x 128 x 2 B = 507,904
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 507_904
    assert arch.dtype == "bfloat16"  # from the top-level torch_dtype


def test_gemma3_27b_explicit_layer_types_give_the_same_split() -> None:
    # newer exports (models.json: translategemma-27b text_config) list 5 sliding then 1 full
    config = copy.deepcopy(GEMMA_3_27B)
    del config["text_config"]["sliding_window_pattern"]
    six = ["sliding_attention"] * 5 + ["full_attention"]
    config["text_config"]["layer_types"] = six * 10 + ["sliding_attention"] * 2
    arch = architecture_from_hf_config(config)
    assert kinds(arch) == GEMMA_3_27B_SPLIT
    assert arch.layers == architecture_from_hf_config(GEMMA_3_27B).layers


def test_gemma3_sliding_window_pattern_defaults_to_6_when_omitted() -> None:
    # flat form of Megatron-Bridge gemma3_27b_config_dict: no sliding_window_pattern, no
    # layer_types -> transformers Gemma3TextConfig default pattern 6
    flat = {
        "architectures": ["Gemma3ForCausalLM"],
        "head_dim": 128,
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "max_position_embeddings": 131072,
        "model_type": "gemma3",
        "num_attention_heads": 32,
        "num_hidden_layers": 62,
        "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168,
        "sliding_window": 1024,
        "torch_dtype": "bfloat16",
        "vocab_size": 262208,
    }
    assert kinds(architecture_from_hf_config(flat)) == GEMMA_3_27B_SPLIT


def test_layer_types_list_of_the_wrong_length_is_refused() -> None:
    config = copy.deepcopy(GEMMA_3_27B)
    config["text_config"]["layer_types"] = ["sliding_attention"] * 61
    with pytest.raises(SizingError) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "text_config.layer_types"


# aiconfigurator aic-core/.../google--gemma-4-26B-A4B_config.json text_config (models.json
# google/gemma-4-26B-A4B); vision/audio configs and token ids left out.
GEMMA_4_26B_A4B: dict[str, Any] = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "dtype": "bfloat16",
    "model_type": "gemma4",
    "text_config": {
        "attention_bias": False,
        "attention_k_eq_v": True,
        "dtype": "bfloat16",
        "enable_moe_block": True,
        "final_logit_softcapping": 30.0,
        "global_head_dim": 512,
        "head_dim": 256,
        "hidden_size": 2816,
        "intermediate_size": 2112,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
        "max_position_embeddings": 262144,
        "model_type": "gemma4_text",
        "moe_intermediate_size": 704,
        "num_attention_heads": 16,
        "num_experts": 128,
        "num_global_key_value_heads": 2,
        "num_hidden_layers": 30,
        "num_key_value_heads": 8,
        "num_kv_shared_layers": 0,
        "sliding_window": 1024,
        "tie_word_embeddings": True,
        "top_k_experts": 8,
        "use_bidirectional_attention": "vision",
        "vocab_size": 262144,
    },
    "tie_word_embeddings": True,
}


def test_gemma4_global_layers_use_global_head_dim_and_global_kv_heads() -> None:
    arch = architecture_from_hf_config(GEMMA_4_26B_A4B)
    assert kinds(arch) == {"sliding_attention": 25, "full_attention": 5}
    assert arch.layers[0] == SlidingWindowAttention(
        num_kv_heads=8, head_dim=256, sliding_window=1024
    )
    # attention_k_eq_v: global layers use num_global_key_value_heads and global_head_dim
    assert arch.layers[5] == FullAttention(num_kv_heads=2, head_dim=512)
    # 25 x 2 x 8 x 256 x 2 B = 204,800 + 5 x 2 x 2 x 512 x 2 B = 20,480 -> 225,280
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 225_280
    assert arch.moe == MixtureOfExperts(
        num_experts=128, experts_per_token=8, moe_intermediate_size=704
    )


def test_gemma4_kv_shared_layers_keep_no_cache() -> None:
    # transformers Gemma4TextAttention: the last num_kv_shared_layers layers reuse earlier K/V
    config = copy.deepcopy(GEMMA_4_26B_A4B)
    config["text_config"]["num_kv_shared_layers"] = 12
    arch = architecture_from_hf_config(config)
    assert kinds(arch) == {"sliding_attention": 15, "full_attention": 3, "no_cache": 12}


# aiconfigurator aic-core/.../deepseek-ai--DeepSeek-V3_config.json (models.json DeepSeek-V3)
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_deepseek.DeepseekV3Config",
        "AutoModel": "modeling_deepseek.DeepseekV3Model",
        "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
    },
    "bos_token_id": 0,
    "eos_token_id": 1,
    "ep_size": 1,
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "initializer_range": 0.02,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1",
    "use_cache": True,
    "v_head_dim": 128,
    "vocab_size": 129280,
}


# DeepSeek-V3.2's config.json is V3's plus the sparse-attention indexer fields.
DEEPSEEK_V32: dict[str, Any] = {
    **DEEPSEEK_V3,
    "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32",
    "index_head_dim": 128,
    "index_n_heads": 64,
    "index_topk": 2048,
}


def test_deepseek_v32_adds_the_indexer_key_to_every_layer() -> None:
    arch = architecture_from_hf_config(DEEPSEEK_V32)
    assert kinds(arch) == {"mla": 61}
    assert arch.layers[0] == MultiHeadLatentAttention(512, 64, indexer_head_dim=128)
    # vLLM DeepseekV32IndexerCache: 128 + 128 // 128 x 4 = 132 B (uint8) per token per layer
    # on top of the latent: 61 x (1,152 + 132) = 78,324 bf16; 61 x (576 + 132) = 43,188 fp8
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 78_324
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) == 43_188


def test_shared_indexer_layers_keep_no_indexer_key() -> None:
    # GLM-5.2 style: indexer_types marks layers that reuse another layer's top-k ("shared").
    config = {
        **DEEPSEEK_V32,
        "num_hidden_layers": 4,
        "indexer_types": ["full", "shared", "shared", "full"],
    }
    arch = architecture_from_hf_config(config)
    # 2 layers x (1,152 + 132) + 2 layers x 1,152 = 4,872
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 2 * 1284 + 2 * 1152 == 4872


def test_an_unknown_indexer_type_is_refused_by_name() -> None:
    config = {**DEEPSEEK_V32, "num_hidden_layers": 2, "indexer_types": ["full", "sparse"]}
    with pytest.raises(SizingError) as caught:
        architecture_from_hf_config(config)
    assert caught.value.field == "indexer_types"
    assert "sparse" in caught.value.reason


def test_deepseek_v3_mla_ignores_the_128_kv_heads() -> None:
    arch = architecture_from_hf_config(DEEPSEEK_V3)
    # 61 layers; the num_nextn_predict_layers MTP layer is not counted
    assert kinds(arch) == {"mla": 61}
    assert arch.layers[0] == MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64)
    # seed example 16: 61 x (512 + 64) x 2 B = 70,272 (bf16); x 1 B = 35,136 (fp8)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 70_272
    assert kv_bytes_per_token(arch, KvCacheDtype.FP8) == 35_136
    # the trap: 2 x 61 x 128 kv heads x (128 + 64) x 2 B = 5,996,544, about 85x more
    assert arch.weight_format == "fp8"
    # shared expert: n_shared_experts 1 x moe_intermediate_size 2048
    assert arch.moe == MixtureOfExperts(
        num_experts=256,
        experts_per_token=8,
        moe_intermediate_size=2048,
        shared_expert_intermediate_size=2048,
    )


# aiconfigurator aic-core/.../openai--gpt-oss-120b_config.json (models.json openai/gpt-oss-120b)
GPT_OSS_120B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": 200002,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "output_router_logits": False,
    "pad_token_id": 199999,
    "quantization_config": {
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
        "quant_method": "mxfp4",
    },
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "transformers_version": "4.55.0.dev0",
    "use_cache": True,
    "vocab_size": 201088,
}


def test_gpt_oss_120b_alternates_window_128_and_full_layers() -> None:
    arch = architecture_from_hf_config(GPT_OSS_120B)
    assert kinds(arch) == {"sliding_attention": 18, "full_attention": 18}
    assert arch.layers[0] == SlidingWindowAttention(num_kv_heads=8, head_dim=64, sliding_window=128)
    assert arch.layers[1] == FullAttention(num_kv_heads=8, head_dim=64)
    # head_dim 64 (not 2880 / 64 = 45): 2 x 36 x 8 x 64 x 2 B = 73,728 per token, half of it
    # in layers that keep only the last 128 tokens
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 73_728
    # no torch_dtype in this config -> bfloat16; experts are MXFP4
    assert (arch.dtype, arch.weight_format) == ("bfloat16", "mxfp4")
    assert arch.moe == MixtureOfExperts(
        num_experts=128, experts_per_token=4, moe_intermediate_size=2880
    )


# microsoft/Phi-3-mini-4k-instruct config.json (models.json; mlc-ai/mlc-llm phi-3 preset)
PHI_3_MINI_4K: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "embd_pdrop": 0.0,
    "eos_token_id": 32000,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "pad_token_id": 32000,
    "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 32064,
}


def test_phi3_mini_4k_sliding_window_2047_applies_to_every_layer() -> None:
    arch = architecture_from_hf_config(PHI_3_MINI_4K)
    # no layer_types: vLLM's Attention uses the model-level cache_config.sliding_window
    assert set(arch.layers) == {
        SlidingWindowAttention(num_kv_heads=32, head_dim=96, sliding_window=2047)
    }
    # MHA, head_dim 3072 / 32 = 96: 2 x 32 x 32 x 96 x 2 B = 393,216
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 393_216


def test_phi3_5_window_beyond_the_context_is_kept_as_a_window() -> None:
    # microsoft/Phi-3.5-mini-instruct: sliding_window 262144 >= max_position_embeddings 131072;
    # kept as sliding (what the config and vLLM say); it never caps a sequence the model accepts
    config = {**PHI_3_MINI_4K, "max_position_embeddings": 131072, "sliding_window": 262144}
    arch = architecture_from_hf_config(config)
    assert set(arch.layers) == {
        SlidingWindowAttention(num_kv_heads=32, head_dim=96, sliding_window=262144)
    }


# tiiuae/falcon-7b config.json after the transformers port (model_type falcon): key names from
# transformers FalconConfig, values from models.json tiiuae/falcon-7b (71 heads of 64, MQA).
FALCON_7B: dict[str, Any] = {
    "alibi": False,
    "apply_residual_connection_post_layernorm": False,
    "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0,
    "bias": False,
    "bos_token_id": 11,
    "eos_token_id": 11,
    "hidden_dropout": 0.0,
    "hidden_size": 4544,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "falcon",
    "multi_query": True,
    "new_decoder_architecture": False,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "parallel_attn": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 65024,
}
# the original remote-code release (model_type RefinedWebModel): n_head / n_layer
# (vLLM RWConfig attribute_map), same values.
FALCON_7B_RW: dict[str, Any] = {
    "alibi": False,
    "apply_residual_connection_post_layernorm": False,
    "architectures": ["RWForCausalLM"],
    "attention_dropout": 0.0,
    "bias": False,
    "bos_token_id": 11,
    "eos_token_id": 11,
    "hidden_dropout": 0.0,
    "hidden_size": 4544,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "RefinedWebModel",
    "multi_query": True,
    "n_head": 71,
    "n_layer": 32,
    "parallel_attn": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 65024,
}


@pytest.mark.parametrize("config", [FALCON_7B, FALCON_7B_RW], ids=["falcon", "RefinedWebModel"])
def test_falcon_multi_query_config_has_one_kv_head(config: dict[str, Any]) -> None:
    arch = architecture_from_hf_config(config)
    assert set(arch.layers) == {FullAttention(num_kv_heads=1, head_dim=64)}
    assert arch.num_attention_heads == 71
    # 4544 / 71 = 64: 2 x 32 layers x 1 kv head x 64 x 2 B = 8,192 (MHA would be 71x: 581,632)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 8_192


def test_falcon_new_decoder_architecture_reads_num_kv_heads() -> None:
    # transformers FalconConfig: new_decoder_architecture ignores multi_query, uses num_kv_heads
    config = {**FALCON_7B, "new_decoder_architecture": True, "num_kv_heads": 8}
    # 4544 is not a multiple of 8 x 64 but the KV width is what counts here
    arch = architecture_from_hf_config(config)
    assert set(arch.layers) == {FullAttention(num_kv_heads=8, head_dim=64)}


# aiconfigurator aic-core/.../nvidia--Nemotron-H-56B-Base-8K_config.json (models.json)
NEMOTRON_H_56B: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attention_head_dim": 128,
    "auto_map": {
        "AutoConfig": "configuration_nemotron_h.NemotronHConfig",
        "AutoModelForCausalLM": "modeling_nemotron_h.NemotronHForCausalLM",
    },
    "bos_token_id": 1,
    "chunk_size": 128,
    "conv_kernel": 4,
    "eos_token_id": 2,
    "expand": 2,
    "hidden_dropout": 0.0,
    "hidden_size": 8192,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*"
    "-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "initializer_range": 0.02,
    "intermediate_size": 32768,
    "layer_norm_epsilon": 1e-05,
    "mamba_head_dim": 64,
    "mamba_hidden_act": "silu",
    "mamba_num_heads": 256,
    "mamba_proj_bias": False,
    "max_position_embeddings": 8192,
    "mlp_bias": False,
    "mlp_hidden_act": "relu2",
    "model_type": "nemotron_h",
    "n_groups": 8,
    "num_attention_heads": 64,
    "num_hidden_layers": 118,
    "num_key_value_heads": 8,
    "num_logits_to_keep": 1,
    "pad_token_id": 0,
    "rescale_prenorm_residual": True,
    "residual_in_fp32": False,
    "rms_norm_eps": 1e-05,
    "sliding_window": None,
    "ssm_state_size": 256,
    "tie_word_embeddings": False,
    "time_step_floor": 0.0001,
    "time_step_limit": [0.0, float("inf")],
    "time_step_max": 0.1,
    "time_step_min": 0.001,
    "time_step_rank": 512,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.48.0.dev0",
    "use_bias": False,
    "use_cache": True,
    "use_conv_bias": True,
    "use_mamba_kernels": True,
    "vocab_size": 131072,
}


def test_nemotron_h_56b_pattern_has_10_attention_blocks_of_118() -> None:
    arch = architecture_from_hf_config(NEMOTRON_H_56B)
    # 54 'M' + 10 '*' + 54 '-' = 118 blocks
    assert kinds(arch) == {"mamba2": 54, "no_cache": 54, "full_attention": 10}
    assert arch.layers[7] == FullAttention(num_kv_heads=8, head_dim=128)  # "M-M-M-M*"
    assert arch.layers[0] == Mamba2(
        num_heads=256, head_dim=64, state_size=256, n_groups=8, conv_kernel=4
    )
    # only '*' grows: 2 x 10 x 8 kv heads x 128 x 2 B = 40,960
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 40_960
    # vLLM NemotronHForCausalLMConfig: SSM state float32 unless the config says otherwise
    assert arch.state_dtype == "float32"


def test_nemotron_h_pattern_longer_than_num_hidden_layers_is_refused() -> None:
    with pytest.raises(SizingError) as info:
        architecture_from_hf_config({**NEMOTRON_H_56B, "num_hidden_layers": 117})
    assert info.value.field == "hybrid_override_pattern"


def test_nemotron_h_unknown_block_character_is_an_unknown_layer_kind() -> None:
    config = {**NEMOTRON_H_56B, "hybrid_override_pattern": "M*X" + "-" * 115}
    with pytest.raises(UnknownLayerKind) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "hybrid_override_pattern[2]"


# ai21labs/Jamba-v0.1: models.json values, which are transformers JambaConfig defaults
# (documented as Jamba-v0.1-like), spelled as JambaConfig serializes them.
JAMBA_V0_1: dict[str, Any] = {
    "architectures": ["JambaForCausalLM"],
    "attn_layer_offset": 4,
    "attn_layer_period": 8,
    "expert_layer_offset": 1,
    "expert_layer_period": 2,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "mamba_conv_bias": True,
    "mamba_d_conv": 4,
    "mamba_d_state": 16,
    "mamba_dt_rank": 256,
    "mamba_expand": 2,
    "mamba_proj_bias": False,
    "max_position_embeddings": 262144,
    "model_type": "jamba",
    "num_attention_heads": 32,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 65536,
}


def test_jamba_attention_every_8th_layer_from_offset_4() -> None:
    arch = architecture_from_hf_config(JAMBA_V0_1)
    # i % 8 == 4 -> layers 4, 12, 20, 28 are attention; 28 Mamba layers
    assert kinds(arch) == {"mamba": 28, "full_attention": 4}
    attention = [i for i, layer in enumerate(arch.layers) if isinstance(layer, FullAttention)]
    assert attention == [4, 12, 20, 28]
    # Mamba-1 width: mamba_expand 2 x hidden_size 4096 = 8192
    assert arch.layers[0] == Mamba1(intermediate_size=8192, state_size=16, conv_kernel=4)
    # 2 x 4 attention layers x 8 kv heads x 128 x 2 B = 16,384
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 16_384
    assert arch.moe == MixtureOfExperts(
        num_experts=16, experts_per_token=2, moe_intermediate_size=14336
    )


# meta-llama/Llama-4-Scout-17B-16E-Instruct: aiconfigurator aic-core/.../
# meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json (models.json)
LLAMA_4_SCOUT: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "attention_bias": False,
        "attention_chunk_size": 8192,
        "attention_dropout": 0.0,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 5120,
        "interleave_moe_layer_step": 1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "max_position_embeddings": 10485760,
        "model_type": "llama4_text",
        "num_attention_heads": 40,
        "num_experts_per_tok": 1,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "num_local_experts": 16,
        "output_router_logits": False,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 16.0,
            "high_freq_factor": 1.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "rope_theta": 500000.0,
        "router_aux_loss_coef": 0.001,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_qk_norm": True,
        "vocab_size": 202048,
    },
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0.dev0",
}


def test_llama4_scout_three_chunked_layers_per_global_nope_layer() -> None:
    arch = architecture_from_hf_config(LLAMA_4_SCOUT)
    # transformers Llama4TextConfig: no_rope_layer_interval 4 -> layers 3, 7, ... are global
    assert kinds(arch) == {"chunked_attention": 36, "full_attention": 12}
    assert arch.layers[0] == ChunkedLocalAttention(
        num_kv_heads=8, head_dim=128, attention_chunk_size=8192
    )
    assert arch.layers[3] == FullAttention(num_kv_heads=8, head_dim=128)
    # 2 x 48 x 8 x 128 x 2 B = 196,608 per token; 36 of the 48 layers cap at 8,192 tokens
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 196_608
    # Llama4TextMoe: 16 experts of intermediate_size plus one shared expert of the same size
    assert arch.moe == MixtureOfExperts(
        num_experts=16,
        experts_per_token=1,
        moe_intermediate_size=8192,
        shared_expert_intermediate_size=8192,
    )


def test_llama4_explicit_no_rope_layers_decide_chunked_vs_global() -> None:
    config = copy.deepcopy(LLAMA_4_SCOUT)
    # 1 = uses RoPE = chunked local attention; 0 = NoPE global
    config["text_config"]["no_rope_layers"] = [1, 0] * 24
    arch = architecture_from_hf_config(config)
    assert kinds(arch) == {"chunked_attention": 24, "full_attention": 24}
    assert isinstance(arch.layers[1], FullAttention)


# Granite 4.0-H: key names from transformers GraniteMoeHybridConfig (layer_types, mamba_n_heads,
# mamba_d_head, mamba_d_state, mamba_n_groups, mamba_d_conv); the numbers are illustrative,
# no published config.json was available (models.json ibm-granite/granite-4.0-h-small: null).
GRANITE_HYBRID_SHAPE: dict[str, Any] = {
    "model_type": "granitemoehybrid",
    "hidden_size": 1536,
    "num_hidden_layers": 8,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "layer_types": ["mamba"] * 3 + ["attention"] + ["mamba"] * 3 + ["attention"],
    "mamba_n_heads": 48,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "num_local_experts": 0,
    "torch_dtype": "bfloat16",
}


def test_granite_hybrid_layer_types_pick_mamba2_or_attention() -> None:
    arch = architecture_from_hf_config(GRANITE_HYBRID_SHAPE)
    assert kinds(arch) == {"mamba2": 6, "full_attention": 2}
    assert arch.layers[0] == Mamba2(
        num_heads=48, head_dim=64, state_size=128, n_groups=1, conv_kernel=4
    )
    # 1536 / 12 = 128: 2 x 2 attention layers x 4 kv heads x 128 x 2 B = 4,096
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 4_096
    assert arch.moe is None  # num_local_experts 0: dense


# --- refusals -------------------------------------------------------------------------------


def test_unknown_layer_types_entry_raises_unknown_layer_kind_at_its_index() -> None:
    config = {**GPT_OSS_120B, "layer_types": list(GPT_OSS_120B["layer_types"])}
    config["layer_types"][3] = "mystery_attention"
    with pytest.raises(UnknownLayerKind) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "layer_types[3]"
    assert info.value.code == "unknown-layer-kind"


def test_unknown_layer_type_in_nested_text_config_names_the_nested_key() -> None:
    config = copy.deepcopy(QWEN3_5_27B)
    config["text_config"]["layer_types"][5] = "lightning_attention"
    with pytest.raises(UnknownLayerKind) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "text_config.layer_types[5]"


def test_config_with_neither_num_attention_heads_nor_n_head_names_num_attention_heads() -> None:
    config = dict(LLAMA_3_1_8B)
    del config["num_attention_heads"]
    with pytest.raises(SizingError) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "num_attention_heads"


@pytest.mark.parametrize("value", ["8", 8.5, True, [8], 0])
def test_non_integer_num_key_value_heads_names_the_key(value: object) -> None:
    with pytest.raises(SizingError) as info:
        architecture_from_hf_config({**LLAMA_3_1_8B, "num_key_value_heads": value})
    assert info.value.field == "num_key_value_heads"


def test_unknown_model_type_without_attention_fields_names_model_type() -> None:
    # a state-spaces/mamba-style config: no attention heads anywhere
    config = {
        "model_type": "mystery_ssm",
        "hidden_size": 2560,
        "num_hidden_layers": 64,
        "state_size": 128,
        "vocab_size": 50280,
    }
    with pytest.raises(SizingError) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "model_type"


def test_unknown_model_type_with_standard_attention_fields_is_sized_generically() -> None:
    arch = architecture_from_hf_config({**LLAMA_3_1_8B, "model_type": "some_llama_clone"})
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 131_072


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        # deepseek-ai/DeepSeek-V4-Flash config.json: compressed sparse attention
        ({"compress_ratios": [0, 4, 128]}, "compress_ratios"),
        # nvidia/Llama-3_3-Nemotron-Super-49B-v1: per-layer NAS blocks
        ({"block_configs": [{"attention": {"no_op": True}}]}, "block_configs"),
        # MiniMax-Text-01 style: 0 = lightning (linear) attention
        ({"attn_type_list": [1, 1, 0, 1]}, "attn_type_list[2]"),
    ],
)
def test_layouts_without_a_known_geometry_are_refused(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(UnknownLayerKind) as info:
        architecture_from_hf_config({**LLAMA_3_1_8B, **extra})
    assert info.value.field == field


def test_linear_attention_without_gated_deltanet_keys_is_refused() -> None:
    config = {**LLAMA_3_1_8B, "layer_types": ["linear_attention"] + ["full_attention"] * 31}
    with pytest.raises(UnknownLayerKind) as info:
        architecture_from_hf_config(config)
    assert info.value.field == "layer_types[0]"


def test_non_object_config_is_a_sizing_error_not_a_type_error() -> None:
    with pytest.raises(SizingError):
        architecture_from_hf_config(["not", "a", "config"])  # type: ignore[arg-type]


def test_unknown_torch_dtype_names_the_key() -> None:
    with pytest.raises(SizingError) as info:
        architecture_from_hf_config({**LLAMA_3_1_8B, "torch_dtype": "float9"})
    assert info.value.field == "torch_dtype"


# --- weight formats -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantization_config", "expected"),
    [
        # deepseek-ai/DeepSeek-V3 (block FP8)
        (DEEPSEEK_V3["quantization_config"], "fp8"),
        # openai/gpt-oss-120b
        (GPT_OSS_120B["quantization_config"], "mxfp4"),
        # AutoAWQ / AutoGPTQ exports
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "awq"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq"),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "int8"),
        # compressed-tensors W8A8 int8 and FP8-dynamic
        (
            {
                "quant_method": "compressed-tensors",
                "format": "int-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
                    }
                },
            },
            "int8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    }
                },
            },
            "fp8",
        ),
        # nvidia/GLM-5.1-NVFP4 config.json (modelopt, quant_algo NVFP4)
        (
            {
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {
                            "dynamic": False,
                            "num_bits": 4,
                            "type": "float",
                            "group_size": 16,
                        },
                    }
                },
                "quant_algo": "NVFP4",
                "quant_method": "modelopt",
            },
            "nvfp4",
        ),
        # nvidia/Qwen3.6-27B-NVFP4: MIXED_PRECISION, FP8 linear-attention, NVFP4 MLP
        (
            {
                "quant_algo": "MIXED_PRECISION",
                "quant_method": "modelopt",
                "quantized_layers": {
                    "model.language_model.layers.0.linear_attn.in_proj_qkv": {"quant_algo": "FP8"},
                    "model.language_model.layers.0.linear_attn.out_proj": {"quant_algo": "FP8"},
                    "model.language_model.layers.0.mlp.down_proj": {
                        "quant_algo": "W4A16_NVFP4",
                        "group_size": 16,
                    },
                    "model.language_model.layers.0.mlp.gate_proj": {
                        "quant_algo": "W4A16_NVFP4",
                        "group_size": 16,
                    },
                },
            },
            "nvfp4",
        ),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4"),
    ],
)
def test_detect_weight_format_reads_quantization_config(
    quantization_config: dict[str, Any], expected: str
) -> None:
    config = {**LLAMA_3_1_8B, "quantization_config": quantization_config}
    assert detect_weight_format(config) == expected
    assert architecture_from_hf_config(config).weight_format == expected


def test_detect_weight_format_reads_a_modelopt_hf_quant_config() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8 hf_quant_config.json shape
    hf_quant = {
        "producer": {"name": "modelopt", "version": "0.23.0"},
        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
    }
    assert detect_weight_format(hf_quant) == "fp8"


def test_detect_weight_format_without_quantization_is_the_model_dtype() -> None:
    assert detect_weight_format({**LLAMA_3_1_8B, "torch_dtype": "float16"}) == "float16"
    assert detect_weight_format(QWEN3_5_27B) == "bfloat16"  # text_config.dtype
    assert detect_weight_format({"model_type": "gpt_oss"}) == "bfloat16"


def test_detect_weight_format_refuses_an_unknown_method() -> None:
    with pytest.raises(SizingError) as info:
        detect_weight_format({**LLAMA_3_1_8B, "quantization_config": {"quant_method": "q9"}})
    assert info.value.field == "quantization_config.quant_method"


def test_a_nested_llama_text_config_without_shapes_reads_llamaconfig_defaults() -> None:
    # ybelkada/llava-1.5-7b-hf-awq (tests/fixtures/hf_configs): text_config names model_type
    # "llama", the vocabulary and the context only; transformers LlavaConfig builds it as
    # LlamaConfig(**text_config), so the rest are LlamaConfig.__init__'s defaults (the
    # Llama-2-7B shape: 32 layers, 32 heads, hidden 4096, MLP 11008, KV heads = heads).
    config = {
        "model_type": "llava",
        "text_config": {
            "model_type": "llama",
            "vocab_size": 32064,
            "max_position_embeddings": 4096,
        },
        "torch_dtype": "float16",
    }
    arch = architecture_from_hf_config(config)
    assert (arch.num_layers, arch.hidden_size, arch.intermediate_size) == (32, 4096, 11008)
    assert (arch.vocab_size, arch.max_position_embeddings) == (32064, 4096)
    assert set(arch.layers) == {FullAttention(num_kv_heads=32, head_dim=128)}
    # 2 x 32 layers x 32 heads x 128 x 2 B = 524,288
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) == 524_288


def test_a_top_level_llama_config_without_heads_is_still_refused() -> None:
    # Only a composite class fills a nested config's gaps; a bare config that leaves out its
    # heads is not a Llama-2-7B by default.
    config = {k: v for k, v in LLAMA_3_1_8B.items() if k != "num_attention_heads"}
    with pytest.raises(SizingError) as exc:
        architecture_from_hf_config(config)
    assert exc.value.field == "num_attention_heads"
