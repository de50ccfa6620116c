"""Weights from a config.json alone: parameters by tensor class, and checkpoint bytes by the
quantization the config declares.

Every config here is a file in tests/fixtures/hf_configs, byte for byte as published (sources in
tests/fixtures/hf_configs/SOURCES.md). The figures it is checked against are published ones,
named beside each: the `total_size` / `total_parameters` of the same checkpoint's
model.safetensors.index.json, a model card, or the "Model loading took X GiB" line of a vLLM
start-up log (the calibration file's quote). Per-tensor figures are worked by hand from the
modelling code the rule cites.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.sizing.engines.kv import kv_bytes_per_token
from service.sizing.errors import SizingError
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.model.hf_config import architecture_from_hf_config, checkpoint_weights
from service.sizing.model.param_count import TensorClass
from service.sizing.model.weight_format import LinearStorage, Storage, matches

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GIB = 2**30


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def by_class(counts: tuple[tuple[TensorClass, int], ...]) -> dict[str, int]:
    return {cls.value: n for cls, n in counts}


# ---------------------------------------------------------------------------------------------
# published checkpoint totals (model.safetensors.index.json `total_size`, `total_parameters`),
# as catalogued with their sources; the index of each sits beside the config in the repository
# SOURCES.md names.

PUBLISHED_TOTALS = [
    # github:fetchwiki/mistralai-Devstral-Small-2507 index @ 2074b22
    ("mistralai--Devstral-Small-2507", 47_144_806_400, 23_572_403_200),
    # github:tbressers/WizardLM-2-8x22B index @ c209267
    ("microsoft--WizardLM-2-8x22B", 281_241_268_224, None),
    # github:MiMiGame-1/Reflection-Llama-3.1-70B index @ 458962e (float32 checkpoint)
    ("mattshumer--Reflection-Llama-3.1-70B", 282_215_219_200, None),
    # github:mapengAdam/qianwen-72B index @ c677f29 (legacy QWen, no torch_dtype: bf16)
    ("Qwen--Qwen-72B", 144_575_840_256, None),
    # github:ashishn-08/granite-3b-code-instruct-128k index @ 6c20608
    ("ibm-granite--granite-3b-code-instruct-128k", 6_965_007_360, None),
    # github:fetchwiki/deepcogito-cogito-v1-preview-qwen-14B index @ 3ebd2c0
    ("deepcogito--cogito-v1-preview-qwen-14B", 29_531_895_808, None),
    # github:reubzdubz/Molmo7B_D_NF4Quant index @ 6afb2ae (bitsandbytes nf4, vision kept fp16)
    ("reubzdubz--Molmo7B_D_NF4Quant", 6_661_964_712, 8_021_025_280),
    # github:PANDASANG1231/llama_3.2-3B-huggingface-shard0 index @ 76307d2
    ("PANDASANG1231--llama_3.2-3B-huggingface-shard0", 6_425_499_648, None),
    # github:jeevanchaps/Meta-Llama3.1-8B-Instruct-assessment index @ 3c36ac6 (bnb int8, fp16)
    ("jeevanchaps--Meta-Llama3.1-8B-Instruct-assessment", 9_086_705_888, None),
    # github:IrfanUruchi/Llama-3.1-8B-Computer-Networks-LLM index @ 8289f9e (bnb int8, fp32)
    ("Irfanuruchi--Llama-3.1-8B-Computer-Networks-LLM", 11_188_584_672, None),
    # github:kleberbaum/Pygmalion-7b-Merged-Safetensors index @ 346339b
    ("kleberbaum--Pygmalion-7b-Merged-Safetensors", 13_476_835_328, None),
    # github:stvlynn/Qwen-7B-Chat-Cantonese index @ 83aed4a (legacy QWen, fp16)
    ("stvlynn--Qwen-7B-Chat-Cantonese", 15_442_649_088, None),
    # github:ananddhanabal/gemma index @ 718cb18 (GemmaConfig ties lm_head by default)
    ("ananddhanabal--gemma", 5_012_344_832, None),
    # github:YouriLalain/1PARAMMYL-8B-ModelStock index @ 4ce556d
    ("YouriLalain--1PARAMMYL-8B-ModelStock", 16_060_522_496, None),
    # github:IrfanUruchi/Llama-2-13B-Computer-Engineering- index @ 42888e5 (nf4, double quant)
    ("IrfanUruchi--Llama-2-13B-Computer-Engineering-", 7_201_770_923, 13_015_864_320),
    # github:Ibtasam-98/medgemma-27b-it index @ 351f31d (its total_parameters: see below)
    ("google--medgemma-27b-it", 54_864_813_280, None),
    # github:Alikhan13r/falcon-180B-chat index @ b872674 (lm_head stored: see below)
    ("tiiuae--falcon-180B-chat", 359_045_130_240, None),
]


@pytest.mark.parametrize(("name", "total_size", "total_parameters"), PUBLISHED_TOTALS)
def test_checkpoint_bytes_match_the_published_total_size(
    name: str, total_size: int, total_parameters: int | None
) -> None:
    weights = checkpoint_weights(load(name))
    assert abs(weights.size.total_bytes - total_size) <= total_size * 0.005
    if total_parameters is not None:
        assert weights.parameters.total == total_parameters


def test_medgemma_index_counts_the_tied_lm_head_once_more() -> None:
    # The medgemma-27b-it index gives total_parameters 28,842,036,848 while its total_size
    # (54,864,813,280 B) is 27,432,406,640 bf16 parameters: the difference, 1,409,630,208, is
    # vocab_size 262208 x hidden_size 5376 -- the lm_head Gemma3 ties to the embeddings
    # (Gemma3TextConfig tie_word_embeddings=True), counted by the index but not stored.
    weights = checkpoint_weights(load("google--medgemma-27b-it"))
    assert weights.parameters.total == 54_864_813_280 // 2
    assert weights.parameters.total + 262_208 * 5_376 == 28_842_036_848
    assert weights.parameters.of(TensorClass.LM_HEAD) == 0
    # SigLIP tower (27 layers of 1152) and Gemma3MultiModalProjector are in the checkpoint.
    assert weights.parameters.of(TensorClass.VISION) > 0
    assert weights.parameters.of(TensorClass.PROJECTOR) == 1152 * 5376 + 1152


def test_falcon_checkpoint_stores_the_lm_head_vllm_ties() -> None:
    # The Falcon-180B-chat index lists lm_head.weight; its config has no tie_word_embeddings, so
    # FalconConfig ties (PretrainedConfig default) and vLLM FalconForCausalLM does not load it:
    # served = total - 65024 x 14848 x 2 B.
    weights = checkpoint_weights(load("tiiuae--falcon-180B-chat"))
    assert weights.size.total_bytes == 359_045_130_240
    assert weights.size.served_bytes == 359_045_130_240 - 65_024 * 14_848 * 2


def test_reap_checkpoint_left_out_the_mtp_layer_its_config_declares() -> None:
    # Qwen3.5-18B-REAP-A3B: config.json keeps mtp_num_hidden_layers 1, but the index
    # (github:bryce-hoehn/Qwen3.5-18B-REAP-A3B-Coding @ 1dfb29a) lists no mtp.* tensor. Its
    # total_size, 37,087,995,136, is what the engine serves: everything but the MTP layer.
    weights = checkpoint_weights(load("bryce-hoehn--Qwen3.5-18B-REAP-A3B-Coding"))
    published = 37_087_995_136
    assert abs(weights.size.served_bytes - published) <= published * 0.005
    mtp = weights.size.of(TensorClass.MTP)
    assert weights.size.total_bytes == weights.size.served_bytes + mtp
    assert mtp > published * 0.005  # the MTP layer alone is more than the 0.5% allowed


@pytest.mark.parametrize(
    ("name", "field"),
    [
        # LogicsForConditionalGeneration (remote code): model_type "logics" and a ConvNeXt tower
        # named only as "convnext-1024" -- no geometry in the config.
        ("alibaba--Logics-Thinking", "model_type"),
        # DeepSeek-OCR-2: the deepencoderv2 tower's Qwen2-0.5B encoder has only its width in
        # the config.
        ("sen-ye--DeepSeek-OCR2-query-ablation", "vision_config.model_type"),
    ],
)
def test_configs_without_the_geometry_are_refused_by_name(name: str, field: str) -> None:
    with pytest.raises(SizingError) as caught:
        checkpoint_weights(load(name))
    assert caught.value.field == field
    # The cache is still sized; the reason waits for the answers that need weights.
    arch = architecture_from_hf_config(load(name))
    assert arch.num_parameters is None
    assert arch.weights_unknown is not None
    assert arch.weights_unknown[0] == field


def test_deepseek_v3_main_model_and_mtp_module_match_the_readme() -> None:
    # github:deepseek-ai/DeepSeek-V3 README.md: "The total size of DeepSeek-V3 models on
    # HuggingFace is 685B, which includes 671B of the Main Model weights and 14B of the
    # Multi-Token Prediction (MTP) Module weights." (rounded figures)
    weights = checkpoint_weights(load("deepseek-ai--DeepSeek-V3"))
    assert abs(weights.parameters.served_total - 671e9) <= 671e9 * 0.005
    assert abs(weights.parameters.total - 685e9) <= 685e9 * 0.005
    assert weights.parameters.of(TensorClass.MTP) == (
        weights.parameters.total - weights.parameters.served_total
    )


# ---------------------------------------------------------------------------------------------
# vLLM's "Model loading took X GiB": the served bytes of one GPU's shard


LOADED = [
    # (config, tensor parallel, pipeline parallel, logged GiB) -- vLLM 0.19.0 on H100, logs of
    # github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/ @ d3121e0 (calibration file).
    # The logged checkpoints are the -Instruct releases: same tensor shapes as these configs.
    ("meta-llama--Meta-Llama-3.1-8B", 1, 1, 14.99),  # meta-llama-llama-3-1-8b---h100-80gb--tp1pp1
    ("meta-llama--Meta-Llama-3.1-8B", 2, 1, 7.51),  # ...--tp2pp1dp1--8192.log
    ("meta-llama--Meta-Llama-3.1-8B", 1, 2, 7.51),  # ...--tp1pp2dp1--8192.log
    ("Qwen--Qwen3-30B-A3B", 1, 1, 56.88),  # qwen-qwen3-30b-a3b--h100-80gb--tp1pp1dp1--8192.log
    ("Qwen--Qwen3-8B", 1, 1, 15.27),  # qwen-qwen3-8b--h100-80gb--tp1pp1dp1--8192.log
    ("mistralai--Mixtral-8x7B-v0.1", 2, 1, 43.51),  # mistralai-mixtral-8x7b-i--...--tp2pp1
    ("Qwen--Qwen2.5-72B", 2, 1, 67.8),  # qwen-qwen2-5-72b-instruc--h100-80gb--tp2pp1dp1
    # vLLM 0.25.1, github:sapir-pirski/h100-fp8-quantization-benchmark results/q2/vllm_bf16.log
    # @ 9143925
    ("Qwen--Qwen2.5-7B", 1, 1, 14.29),
    # vLLM 0.10.2, github:mrpid12org/imageworks nohup.out @ 6f4c54f ("Model loading took 4.2530
    # GiB"): the AWQ Llama-2-7B with its fp16 CLIP tower and projector, the config committed in
    # the same repository
    ("ybelkada--llava-1.5-7b-hf-awq", 1, 1, 4.253),
]


@pytest.mark.parametrize(("name", "tp", "pp", "logged_gib"), LOADED)
def test_served_bytes_per_gpu_match_vllm_model_loading(
    name: str, tp: int, pp: int, logged_gib: float
) -> None:
    # vLLM shards weights over TP ranks and PP stages; its figure also holds the rotary cos/sin
    # cache (max_position_embeddings x rotary dim, a few MiB here), inside the 2% asked.
    weights = checkpoint_weights(load(name))
    per_gpu_gib = weights.size.served_bytes / (tp * pp) / GIB
    assert abs(per_gpu_gib - logged_gib) <= logged_gib * 0.02


# ---------------------------------------------------------------------------------------------
# parameters by tensor class, by hand


def test_llama_3_1_8b_by_class() -> None:
    # transformers LlamaModel; meta-llama--Meta-Llama-3.1-8B: hidden 4096, 32 layers, 32 heads,
    # 8 KV heads of 128, intermediate 14336, vocab 128256, untied.
    counts = checkpoint_weights(load("meta-llama--Meta-Llama-3.1-8B")).parameters
    assert by_class(counts.by_class) == {
        "embedding": 128_256 * 4096,  # 525,336,576
        "lm_head": 128_256 * 4096,
        # q and o 4096 x 4096, k and v 1024 x 4096, per layer
        "attention": 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096),  # 1,342,177,280
        "mlp": 32 * 3 * 4096 * 14_336,  # 5,637,144,576
        "norm": (2 * 32 + 1) * 4096,  # 266,240
    }
    assert counts.total == 8_030_261_248


def test_mixtral_experts_and_router_by_class() -> None:
    # transformers MixtralSparseMoeBlock; WizardLM-2-8x22B: 56 layers, hidden 6144, 8 experts of
    # intermediate 16384, 48 heads / 8 KV heads of 128, vocab 32000.
    classes = by_class(checkpoint_weights(load("microsoft--WizardLM-2-8x22B")).parameters.by_class)
    assert classes["routed_experts"] == 56 * 8 * 3 * 6144 * 16_384  # 135,291,469,824
    assert classes["router"] == 56 * 8 * 6144  # 2,752,512
    assert classes["attention"] == 56 * (2 * 6144 * 6144 + 2 * 1024 * 6144)  # 4,932,501,504


def test_deepseek_v3_mla_projections() -> None:
    # transformers DeepseekV3Attention; DeepSeek-V3: hidden 7168, 128 heads, q_lora_rank 1536,
    # kv_lora_rank 512, qk_nope 128 + qk_rope 64, v_head_dim 128.
    tensors = checkpoint_weights(load("deepseek-ai--DeepSeek-V3")).parameters.tensors
    layer0 = {t.name: t.shape for t in tensors if t.name.startswith("model.layers.0.self_attn.")}
    assert layer0 == {
        "model.layers.0.self_attn.q_a_proj.weight": (1536, 7168),
        "model.layers.0.self_attn.q_a_layernorm.weight": (1536,),
        "model.layers.0.self_attn.q_b_proj.weight": (128 * (128 + 64), 1536),
        "model.layers.0.self_attn.kv_a_proj_with_mqa.weight": (512 + 64, 7168),
        "model.layers.0.self_attn.kv_a_layernorm.weight": (512,),
        "model.layers.0.self_attn.kv_b_proj.weight": (128 * (128 + 128), 512),
        "model.layers.0.self_attn.o_proj.weight": (7168, 128 * 128),
    }
    # first_k_dense_replace 3: layers 0-2 dense, from layer 3 on 256 experts + 1 shared.
    experts = [t for t in tensors if t.name.startswith("model.layers.3.mlp.experts.")]
    assert {t.count for t in experts} == {256}
    assert not any(t.name.startswith("model.layers.2.mlp.experts.") for t in tensors)


def test_gated_delta_net_projections_and_state() -> None:
    # transformers Qwen3_5GatedDeltaNet; Qwen3.5-18B-REAP: hidden 2048, 16 key heads and 32
    # value heads of 128, conv kernel 4. key_dim = 2048, value_dim = 4096.
    tensors = checkpoint_weights(load("bryce-hoehn--Qwen3.5-18B-REAP-A3B-Coding")).parameters
    prefix = "model.language_model.layers.0.linear_attn."
    layer0 = {t.name.removeprefix(prefix): t.shape for t in tensors.tensors if prefix in t.name}
    assert layer0 == {
        "in_proj_qkv.weight": (2 * 2048 + 4096, 2048),
        "in_proj_z.weight": (4096, 2048),
        "in_proj_b.weight": (32, 2048),
        "in_proj_a.weight": (32, 2048),
        "conv1d.weight": (2 * 2048 + 4096, 1, 4),
        "dt_bias": (32,),
        "A_log": (32,),
        "norm.weight": (128,),
        "out_proj.weight": (2048, 4096),
    }
    # 30 linear-attention layers: conv (8192 x 4) + dt_bias + A_log (32 each)
    assert tensors.of(TensorClass.CONV_STATE) == 30 * (8192 * 4 + 2 * 32)


def test_mamba2_mixer_projections_and_state() -> None:
    # transformers NemotronHMamba2Mixer; Nemotron-H-56B: hidden 8192, 256 Mamba heads of 64
    # (inner 16384), 8 groups, state 256, conv 4, conv bias. in_proj = 2 x 16384 + 2 x 8 x 256
    # + 256 = 37120 rows; conv over 16384 + 2 x 8 x 256 = 20480 channels.
    tensors = checkpoint_weights(load("nvidia--Nemotron-H-56B-Base-8K")).parameters.tensors
    layer0 = {t.name: t.shape for t in tensors if t.name.startswith("backbone.layers.0.")}
    assert layer0 == {
        "backbone.layers.0.norm.weight": (8192,),
        "backbone.layers.0.mixer.in_proj.weight": (37_120, 8192),
        "backbone.layers.0.mixer.conv1d.weight": (20_480, 1, 4),
        "backbone.layers.0.mixer.conv1d.bias": (20_480,),
        "backbone.layers.0.mixer.dt_bias": (256,),
        "backbone.layers.0.mixer.A_log": (256,),
        "backbone.layers.0.mixer.D": (256,),
        "backbone.layers.0.mixer.norm.weight": (16_384,),
        "backbone.layers.0.mixer.out_proj.weight": (8192, 16_384),
    }


def test_mtp_layers_are_in_the_checkpoint_but_not_served() -> None:
    # Qwen3.5-35B-A3B: mtp_num_hidden_layers 1 (vLLM qwen3_next_mtp.py loads it only as a
    # speculative draft); its mtp.fc is 2 x 2048 -> 2048.
    counts = checkpoint_weights(load("Qwen--Qwen3.5-35B-A3B")).parameters
    fc = next(t for t in counts.tensors if t.name == "mtp.fc.weight")
    assert (fc.shape, fc.served, fc.tensor_class) == ((2048, 4096), False, TensorClass.MTP)
    assert counts.total - counts.served_total == counts.of(TensorClass.MTP)


def test_gemma4_global_layers_share_k_and_v() -> None:
    # transformers Gemma4TextAttention: sliding layers have 8 KV heads of 256 with q/k/v/o;
    # global layers (layer 5, every sixth) have 2 KV heads of global_head_dim 512 and, with
    # attention_k_eq_v, no v_proj. Every layer also runs 128 experts (gate_up 2 x 704) beside
    # its dense MLP of 2112.
    tensors = checkpoint_weights(load("google--gemma-4-26B-A4B")).parameters.tensors
    shapes = {t.name.removeprefix("model.language_model.layers."): t.shape for t in tensors}
    assert shapes["0.self_attn.q_proj.weight"] == (16 * 256, 2816)
    assert shapes["0.self_attn.v_proj.weight"] == (8 * 256, 2816)
    assert shapes["5.self_attn.q_proj.weight"] == (16 * 512, 2816)
    assert shapes["5.self_attn.k_proj.weight"] == (2 * 512, 2816)
    assert "5.self_attn.v_proj.weight" not in shapes
    assert shapes["5.experts.gate_up_proj.weight"] == (2 * 704, 2816)
    assert shapes["5.mlp.gate_proj.weight"] == (2112, 2816)


def test_qwen3_vision_tower_blocks_and_merger() -> None:
    # transformers Qwen3VLVisionModel (Qwen3.5-35B-A3B vision_config: hidden 1152, 27 blocks,
    # intermediate 4304, patch 16, temporal patch 2, 2304 positions, merge 2, out 2048, no
    # deepstack mergers).
    tensors = checkpoint_weights(load("Qwen--Qwen3.5-35B-A3B")).parameters.tensors
    shapes = {t.name.removeprefix("model.visual."): t.shape for t in tensors}
    assert shapes["patch_embed.proj.weight"] == (1152, 3, 2, 16, 16)
    assert shapes["pos_embed.weight"] == (2304, 1152)
    assert shapes["blocks.26.attn.qkv.weight"] == (3 * 1152, 1152)
    assert shapes["blocks.26.mlp.linear_fc1.weight"] == (4304, 1152)
    assert "blocks.27.attn.qkv.weight" not in shapes
    # the merger takes 2 x 2 patches (4608) to the text hidden size
    assert shapes["merger.linear_fc1.weight"] == (4608, 4608)
    assert shapes["merger.linear_fc2.weight"] == (2048, 4608)


def test_gemma4_vision_tower_and_embedder() -> None:
    # transformers Gemma4VisionModel (hidden 1152, 16 heads of 72, intermediate 4304, patch 16,
    # 10240 positions per axis, standardize) and Gemma4MultimodalEmbedder (1152 -> 2816).
    tensors = checkpoint_weights(load("google--gemma-4-26B-A4B")).parameters.tensors
    shapes = {t.name.removeprefix("model."): t.shape for t in tensors}
    tower = "vision_tower."
    assert shapes[tower + "patch_embedder.input_proj.weight"] == (1152, 3 * 16 * 16)
    assert shapes[tower + "patch_embedder.position_embedding_table"] == (2, 10_240, 1152)
    assert shapes[tower + "encoder.layers.0.self_attn.q_norm.weight"] == (72,)
    assert shapes[tower + "encoder.layers.0.mlp.gate_proj.linear.weight"] == (4304, 1152)
    assert shapes[tower + "std_scale"] == (1152,)
    assert shapes["embed_vision.embedding_projection.weight"] == (2816, 1152)


# ---------------------------------------------------------------------------------------------
# storage of one quantized (out x in) weight, by hand


@pytest.mark.parametrize(
    ("storage", "shape", "expected"),
    [
        # DeepSeek-V3 expert gate_proj 2048 x 7168 in e4m3 + float32 per 128 x 128 block:
        # 14,680,064 + 16 x 56 x 4
        (LinearStorage(Storage.FP8_BLOCK), (2048, 7168), 2048 * 7168 + 16 * 56 * 4),
        # compressed-tensors w8a8 channel: int8 + a bf16 scale per row
        (LinearStorage(Storage.INT8_CHANNEL, scale_bytes=2), (4096, 4096), 4096 * 4096 + 4096 * 2),
        # compressed-tensors w4a16 group 128: int32-packed values [4096, 512], bf16 scales
        # [4096, 32], weight_shape int64[2]
        (
            LinearStorage(Storage.INT_PACKED, bits=4, group_size=128, scale_bytes=2),
            (4096, 4096),
            4096 * 512 * 4 + 4096 * 32 * 2 + 16,
        ),
        # AutoAWQ GEMM, group 128: qweight [4096, 512] + qzeros [32, 512] int32, scales [32, 4096]
        # fp16
        (
            LinearStorage(Storage.AWQ, bits=4, group_size=128, zero_points=True),
            (4096, 4096),
            4096 * 512 * 4 + 32 * 512 * 4 + 32 * 4096 * 2,
        ),
        # AutoGPTQ: qweight [512, 4096] + qzeros [32, 512] int32, scales [32, 4096] fp16,
        # g_idx int32 [4096]
        (
            LinearStorage(Storage.GPTQ, bits=4, group_size=128),
            (4096, 4096),
            512 * 4096 * 4 + 32 * 512 * 4 + 32 * 4096 * 2 + 4096 * 4,
        ),
        # bitsandbytes nf4 with double quant: 16,777,216 values / 2, 262,144 uint8 absmax,
        # 1024 float32 nested_absmax, 256-entry nested_quant_map, 16-entry quant_map
        (
            LinearStorage(Storage.BNB_4BIT, bits=4, double_quant=True),
            (4096, 4096),
            16_777_216 // 2 + 262_144 + 1024 * 4 + 256 * 4 + 16 * 4,
        ),
        # bitsandbytes int8: values, float32 SCB per row, one weight_format byte
        (LinearStorage(Storage.BNB_8BIT), (4096, 4096), 4096 * 4096 + 4096 * 4 + 1),
        # gpt-oss expert gate_up 5760 x 2880 in MXFP4: values / 2 + one uint8 per 32
        (LinearStorage(Storage.MXFP4, bits=4), (5760, 2880), 5760 * 2880 // 2 + 5760 * 2880 // 32),
        # NVFP4: values / 2, FP8 scale per 16, float32 global and input scales
        (
            LinearStorage(Storage.NVFP4, bits=4, input_scale=True),
            (4096, 4096),
            4096 * 4096 // 2 + 4096 * 4096 // 16 + 4 + 4,
        ),
    ],
)
def test_storage_of_one_weight(
    storage: LinearStorage, shape: tuple[int, int], expected: int
) -> None:
    assert storage.bytes(*shape) == expected


# ---------------------------------------------------------------------------------------------
# which tensors a config's quantization reaches


def test_gpt_oss_mxfp4_reaches_only_the_experts() -> None:
    # gpt-oss-20b quantization_config: quant_method mxfp4, modules_to_not_convert self_attn,
    # router, embed_tokens, lm_head. 24 layers of 32 experts: gate_up 5760 x 2880 and down
    # 2880 x 2880 in MXFP4, their biases (5760 + 2880 per expert) bf16.
    size = checkpoint_weights(load("openai--gpt-oss-20b")).size
    gate_up = 5760 * 2880 // 2 + 5760 * 2880 // 32
    down = 2880 * 2880 // 2 + 2880 * 2880 // 32
    assert size.of(TensorClass.ROUTED_EXPERTS) == 24 * 32 * (gate_up + down + 2 * (5760 + 2880))
    counts = checkpoint_weights(load("openai--gpt-oss-20b")).parameters
    for cls in (TensorClass.ATTENTION, TensorClass.EMBEDDING, TensorClass.ROUTER):
        assert size.of(cls) == 2 * counts.of(cls)


def test_fp8_block_checkpoint_keeps_router_and_embeddings_bf16() -> None:
    # DeepSeek-V3 quantization_config: fp8, weight_block_size [128, 128]. MoE layer 3's
    # experts: gate/up 2048 x 7168 and down 7168 x 2048, each 2048 x 7168 + 16 x 56 x 4 bytes.
    weights = checkpoint_weights(load("deepseek-ai--DeepSeek-V3"))
    size, counts = weights.size, weights.parameters
    per_expert = 3 * (2048 * 7168 + 16 * 56 * 4)
    moe_layers = 61 - 3
    assert size.of(TensorClass.ROUTED_EXPERTS) == moe_layers * 256 * per_expert
    assert size.of(TensorClass.ROUTER) == 2 * counts.of(TensorClass.ROUTER)
    assert size.of(TensorClass.EMBEDDING) == 2 * counts.of(TensorClass.EMBEDDING)


def test_fp8_modules_to_not_convert_stay_bf16() -> None:
    # Qwen3-30B-A3B-FP8 lists every layer's mlp.gate (and norms) in modules_to_not_convert.
    weights = checkpoint_weights(load("Qwen--Qwen3-30B-A3B-FP8"))
    assert weights.size.of(TensorClass.ROUTER) == 2 * weights.parameters.of(TensorClass.ROUTER)
    assert weights.size.method == "fp8 (128x128 block scales)"


def test_modelopt_exclude_modules_keep_attention_and_dense_mlp_bf16() -> None:
    # nvidia Gemma-4-26B-A4B-NVFP4: quant_algo NVFP4 on "Linear" with every layer's self_attn*,
    # mlp* and router* (and the vision tower) in `ignore`: only the experts are NVFP4.
    weights = checkpoint_weights(load("nvidia--Gemma-4-26B-A4B-NVFP4"))
    size, counts = weights.size, weights.parameters
    for cls in (TensorClass.ATTENTION, TensorClass.MLP, TensorClass.VISION):
        assert size.of(cls) == 2 * counts.of(cls)
    # 30 layers x 128 experts: gate_up 1408 x 2816, down 2816 x 704 in NVFP4 with input scale
    gate_up = 1408 * 2816 // 2 + 1408 * 2816 // 16 + 8
    down = 2816 * 704 // 2 + 2816 * 704 // 16 + 8
    assert size.of(TensorClass.ROUTED_EXPERTS) == 30 * 128 * (gate_up + down)


def test_modelopt_mixed_precision_per_layer() -> None:
    # nvidia Qwen3.6-27B-NVFP4 (hidden 5120; 48 linear-attention layers with 16 key heads and 48
    # value heads of 128; 16 attention layers of 24 heads / 4 KV heads of 256 with the output
    # gate; intermediate 17408; vocab 248320): quantized_layers gives in_proj_qkv, in_proj_z,
    # out_proj and q/k/v/o FP8 (values + float32 weight and input scales), the MLP and lm_head
    # W4A16_NVFP4 (values / 2 + an FP8 scale per 16 + a float32 global scale); in_proj_a/b are
    # not listed and `ignore` keeps mtp* -- both stay bf16.
    size = checkpoint_weights(load("nvidia--Qwen3.6-27B-NVFP4")).size
    assert size.method == "modelopt mixed precision"

    def fp8(out: int, inp: int) -> int:
        return out * inp + 4 + 4

    def nvfp4(out: int, inp: int) -> int:
        return out * inp // 2 + out * inp // 16 + 4

    # in_proj_qkv 2 x 2048 + 6144 = 10240 rows; in_proj_z and out_proj 6144; b and a 48 rows
    linear = fp8(10_240, 5120) + fp8(6144, 5120) + fp8(5120, 6144) + 2 * 2 * 48 * 5120
    assert size.of(TensorClass.LINEAR_ATTENTION) == 48 * linear
    # q_proj 24 x 256 x 2 (gate) rows, k/v 4 x 256, o_proj 5120 x 6144
    attention = fp8(12_288, 5120) + 2 * fp8(1024, 5120) + fp8(5120, 6144)
    assert size.of(TensorClass.ATTENTION) == 16 * attention
    assert size.of(TensorClass.MLP) == 64 * (2 * nvfp4(17_408, 5120) + nvfp4(5120, 17_408))
    assert size.of(TensorClass.LM_HEAD) == nvfp4(248_320, 5120)
    counts = checkpoint_weights(load("nvidia--Qwen3.6-27B-NVFP4")).parameters
    assert size.of(TensorClass.MTP) == 2 * counts.of(TensorClass.MTP)


# Quantization sections below are written the way each quantizer writes them into config.json
# (keys from the quantizer's config class), on the Llama-3.1-8B shapes: per layer q and o are
# 4096 x 4096, k and v 1024 x 4096, gate/up 14336 x 4096, down 4096 x 14336.
LLAMA_ATTENTION_SHAPES = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096)]


def llama_with(quantization: dict[str, Any]) -> dict[str, Any]:
    return {**load("meta-llama--Meta-Llama-3.1-8B"), "quantization_config": quantization}


def test_awq_gemm_with_zero_points() -> None:
    # AutoAWQ config: bits 4, group_size 128, zero_point true, version gemm.
    config = llama_with(
        {"bits": 4, "group_size": 128, "quant_method": "awq", "version": "gemm", "zero_point": True}
    )
    size = checkpoint_weights(config).size

    def awq(out: int, inp: int) -> int:
        # qweight [in, out / 8] + qzeros [in / 128, out / 8] int32, scales [in / 128, out] fp16
        return inp * out // 8 * 4 + inp // 128 * out // 8 * 4 + inp // 128 * out * 2

    assert size.of(TensorClass.ATTENTION) == 32 * sum(awq(o, i) for o, i in LLAMA_ATTENTION_SHAPES)
    # 32 x (2 x 8,716,288 + 2 x 2,179,072)
    assert size.of(TensorClass.ATTENTION) == 697_303_040
    # lm_head and embeddings stay bf16
    assert size.of(TensorClass.LM_HEAD) == 2 * 128_256 * 4096


def test_gptq_lm_head_flag_quantizes_the_head_too() -> None:
    # AutoGPTQ / GPTQModel config: bits 4, group_size 128, desc_act true, lm_head true.
    config = llama_with(
        {
            "bits": 4,
            "group_size": 128,
            "desc_act": True,
            "sym": True,
            "lm_head": True,
            "quant_method": "gptq",
        }
    )
    size = checkpoint_weights(config).size
    # lm_head 128256 x 4096: qweight [512, 128256] + qzeros [32, 16032] int32, scales
    # [32, 128256] fp16, g_idx [4096] int32
    head = 512 * 128_256 * 4 + 32 * 16_032 * 4 + 32 * 128_256 * 2 + 4096 * 4
    assert size.of(TensorClass.LM_HEAD) == head == 272_945_152


def test_compressed_tensors_w4a16_packs_every_linear_but_the_ignored_head() -> None:
    # llm-compressor W4A16: one group targeting Linear, int 4-bit symmetric, strategy group 128,
    # format pack-quantized, ignore lm_head.
    config = llama_with(
        {
            "config_groups": {
                "group_0": {
                    "input_activations": None,
                    "output_activations": None,
                    "targets": ["Linear"],
                    "weights": {
                        "dynamic": False,
                        "group_size": 128,
                        "num_bits": 4,
                        "strategy": "group",
                        "symmetric": True,
                        "type": "int",
                    },
                }
            },
            "format": "pack-quantized",
            "ignore": ["lm_head"],
            "kv_cache_scheme": None,
            "quant_method": "compressed-tensors",
            "quantization_status": "compressed",
        }
    )
    size = checkpoint_weights(config).size
    linear = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14_336)  # 6,979,321,856
    # weight_packed: 4 bits each; weight_scale: one bf16 per 128; weight_shape: 7 x 32 x 16 B
    packed = linear // 2 + linear // 128 * 2 + 7 * 32 * 16
    unquantized = 2 * (2 * 128_256 * 4096 + 65 * 4096)  # embeddings, lm_head, norms in bf16
    assert size.total_bytes == packed + unquantized == 5_700_595_200


@pytest.mark.parametrize(("kind", "strategy"), [("int", "channel"), ("float", "channel")])
def test_compressed_tensors_eight_bit_channel_scales(kind: str, strategy: str) -> None:
    # llm-compressor W8A8 (int, dynamic per-token activations) and FP8_DYNAMIC (float): 8-bit
    # weights with one bf16 scale per output row.
    config = llama_with(
        {
            "config_groups": {
                "group_0": {
                    "input_activations": {
                        "dynamic": True,
                        "num_bits": 8,
                        "strategy": "token",
                        "symmetric": True,
                        "type": kind,
                    },
                    "targets": ["Linear"],
                    "weights": {
                        "dynamic": False,
                        "num_bits": 8,
                        "strategy": strategy,
                        "symmetric": True,
                        "type": kind,
                    },
                }
            },
            "format": "int-quantized" if kind == "int" else "float-quantized",
            "ignore": ["lm_head"],
            "quant_method": "compressed-tensors",
        }
    )
    size = checkpoint_weights(config).size
    rows = 4096 + 1024 + 1024 + 4096
    assert size.of(TensorClass.ATTENTION) == 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + rows * 2)


def test_sparse_compressed_tensors_are_refused_by_name() -> None:
    config = llama_with(
        {
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 4,
                        "type": "int",
                        "strategy": "group",
                        "group_size": 128,
                    },
                }
            },
            "format": "marlin-24",
            "quant_method": "compressed-tensors",
        }
    )
    with pytest.raises(SizingError) as caught:
        checkpoint_weights(config)
    assert caught.value.field == "quantization_config.sparsity_config"


def test_bitsandbytes_skip_modules_keep_the_vision_backbone_fp16() -> None:
    # Molmo7B_D_NF4Quant: llm_int8_skip_modules model.vision_backbone, model.transformer.ff_out
    # (the lm head) and ln_f stay float16.
    weights = checkpoint_weights(load("reubzdubz--Molmo7B_D_NF4Quant"))
    size, counts = weights.size, weights.parameters
    assert size.of(TensorClass.VISION) == 2 * counts.of(TensorClass.VISION)
    assert size.of(TensorClass.LM_HEAD) == 2 * counts.of(TensorClass.LM_HEAD)
    assert size.of(TensorClass.ATTENTION) < counts.of(TensorClass.ATTENTION)


@pytest.mark.parametrize(
    ("pattern", "module", "expected"),
    [
        ("lm_head", "lm_head", True),
        ("gate", "model.layers.3.block_sparse_moe.gate", True),
        ("gate", "model.layers.3.mlp.gate_proj", False),  # a component, not a substring
        ("model.vision_backbone", "model.vision_backbone.image_vit.pre_ln", True),
        ("re:.*mlp.gate$", "model.layers.0.mlp.gate", True),
        ("re:vision_tower.*", "model.vision_tower.transformer.layers.0.attention.q_proj", True),
        ("model.layers.*.self_attn", "model.layers.11.self_attn", True),
        ("model.language_model.layers.0.mlp*", "language_model.model.layers.0.mlp.up_proj", True),
        ("mtp*", "mtp.layers.0.self_attn.q_proj", True),
    ],
)
def test_ignore_entries_match_the_way_each_quantizer_reads_them(
    pattern: str, module: str, expected: bool
) -> None:
    assert matches(pattern, module) is expected


# ---------------------------------------------------------------------------------------------
# what the architecture gets, and what a config that lacks a number gets


def test_architecture_takes_the_served_weights_from_the_config() -> None:
    config = load("deepseek-ai--DeepSeek-V3")
    weights = checkpoint_weights(config)
    arch = architecture_from_hf_config(config)
    assert arch.num_parameters == weights.parameters.served_total
    assert arch.weight_bytes == weights.size.served_bytes
    assert arch.weights_unknown is None


def test_explicit_weights_win() -> None:
    config = load("meta-llama--Meta-Llama-3.1-8B")
    derived = checkpoint_weights(config)
    given_bytes = architecture_from_hf_config(config, weight_bytes=1000)
    assert (given_bytes.weight_bytes, given_bytes.num_parameters) == (
        1000,
        derived.parameters.served_total,
    )
    # A given parameter count is priced by the weight format, not by derived bytes.
    given_count = architecture_from_hf_config(config, num_parameters=7)
    assert (given_count.num_parameters, given_count.weight_bytes) == (7, None)


@pytest.mark.parametrize(
    ("name", "drop", "field"),
    [
        ("meta-llama--Meta-Llama-3.1-8B", "intermediate_size", "intermediate_size"),
        ("meta-llama--Meta-Llama-3.1-8B", "vocab_size", "vocab_size"),
        (
            "google--medgemma-27b-it",
            "text_config.intermediate_size",
            "text_config.intermediate_size",
        ),
        ("deepseek-ai--DeepSeek-V3", "moe_intermediate_size", "moe_intermediate_size"),
        ("deepseek-ai--DeepSeek-V3", "v_head_dim", "v_head_dim"),
        ("google--medgemma-27b-it", "vision_config.image_size", "vision_config.image_size"),
    ],
)
def test_a_missing_number_is_named_not_guessed(name: str, drop: str, field: str) -> None:
    config = load(name)
    *parents, key = drop.split(".")
    holder = config
    for parent in parents:
        holder = holder[parent]
    del holder[key]
    with pytest.raises(SizingError) as caught:
        checkpoint_weights(config)
    assert caught.value.field == field
    arch = architecture_from_hf_config(config)
    assert arch.weights_unknown is not None
    assert arch.weights_unknown[0] == field
    assert (arch.num_parameters, arch.weight_bytes) == (None, None)
    assert kv_bytes_per_token(arch, KvCacheDtype.AUTO) > 0


def test_unknown_quantization_method_is_named() -> None:
    config = load("meta-llama--Meta-Llama-3.1-8B")
    config["quantization_config"] = {"quant_method": "hqq", "nbits": 4}
    with pytest.raises(SizingError) as caught:
        checkpoint_weights(config)
    assert caught.value.field == "quantization_config.quant_method"


FIXTURE_NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
ODD_VALUES = st.sampled_from(
    [None, 0, -1, 1, 3, "x", "auto", [], {}, True, 1.5, 10**15, [1], ["a"], {"a": 1}]
)


def _paths(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for key, value in data.items():
        found.append((*prefix, key))
        if isinstance(value, dict):
            found.extend(_paths(value, (*prefix, key)))
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(FIXTURE_NAMES),
    edits=st.lists(st.tuples(st.integers(0, 10_000), ODD_VALUES, st.booleans()), max_size=3),
)
def test_a_mangled_config_is_a_sizing_error_or_an_answer(
    name: str, edits: list[tuple[int, Any, bool]]
) -> None:
    config = copy.deepcopy(load(name))
    for index, value, remove in edits:
        paths = _paths(config)
        if not paths:
            break
        *parents, key = paths[index % len(paths)]
        holder = config
        for parent in parents:
            holder = holder[parent]
        if remove:
            holder.pop(key, None)
        else:
            # a copy: hypothesis hands out one `{}` object, which placed twice could hold itself
            holder[key] = copy.deepcopy(value)
    try:
        weights = checkpoint_weights(config)
    except SizingError:
        return
    assert weights.size.total_bytes >= weights.size.served_bytes > 0


def test_llava_serves_the_clip_layers_up_to_its_feature_layer() -> None:
    # vLLM llava.py builds CLIP up to vision_feature_layer (-2: 24 - 2 + 1 = 23 layers) and
    # without post_layernorm: one CLIP-L layer stays in the checkpoint unloaded, q/k/v/out
    # 4 x (1024 x 1024 + 1024), fc1 and fc2 2 x 1024 x 4096 + 4096 + 1024, two LayerNorms
    # 2 x 2 x 1024: 12,596,224, and post_layernorm's 2 x 1024.
    weights = checkpoint_weights(load("ybelkada--llava-1.5-7b-hf-awq"))
    assert weights.parameters.total - weights.parameters.served_total == 12_596_224 + 2_048


def test_llava_feature_layer_outside_the_tower_is_named() -> None:
    config = {**load("ybelkada--llava-1.5-7b-hf-awq"), "vision_feature_layer": 30}
    with pytest.raises(SizingError) as exc:
        checkpoint_weights(config)
    assert exc.value.field == "vision_feature_layer"
