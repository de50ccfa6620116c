"""vLLM's "Model loading took X GiB" for quantized and multimodal checkpoints, from the config.

Each case asks what a user pasting the checkpoint's config.json would ask: the config in
tests/fixtures/hf_configs (byte for byte, sources in its SOURCES.md) with the checkpoint's
quantization section, sized by `checkpoint_weights` and then by vLLM's `model_memory_usage`
(the shard of the served checkpoint plus the buffers vLLM adds: here the rotary cos/sin cache).
The expected bytes are worked by hand, tensor by tensor, in the comments; the logged figures are
the calibration file's quotes (service/calibration/engine_logs.json), vLLM 0.19.0 on H100 from
github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/ @ d3121e0, and vLLM 0.16.0 on L40S
from github:kagaho/VLLM_Serve_llama3-70b-awq_on_L40S_with_Tensor_Parallelism_2 README.md.

Why these rules are the engine's:

* compressed-tensors w8a8 (int8 or fp8, strategy "channel"): vLLM
  compressed_tensors/schemes/compressed_tensors_w8a8_int8.py and _w8a8_fp8.py `create_weights`
  allocate the 8-bit weight (out x in) and a ChannelQuantScaleParameter (out x 1); the
  quantization config's `ignore` list (and every module that is not a Linear: embeddings,
  norms) stays in the model dtype through `CompressedTensorsConfig.get_quant_method`.
* AWQ: vLLM awq_marlin.py `AWQMarlinLinearMethod.create_weights` allocates qweight int32
  (in, out / 8), qzeros int32 (in / group, out / 8) and scales fp16 (in / group, out);
  `process_weights_after_loading` repacks each into a Marlin tensor of the same size (g_idx
  tensors are empty for AWQ). Only LinearBase layers are quantized (`get_quant_method`), so the
  embeddings and the ParallelLMHead keep fp16.
* multimodal towers: vLLM's Mistral3ForConditionalGeneration (models/mistral3.py) and
  Llama4ForConditionalGeneration (models/mllama4.py) build the vision tower and projector
  beside the language model and load them; their linears are Column/RowParallelLinear, sharded
  over the TP ranks like the decoder's.
* MXFP4 experts on Hopper (gpt-oss): vLLM 0.19.0's Triton backend swizzles the values and
  scales into new tensors through its vendored triton_kernels (triton v3.6.0), padding them,
  keeps the loaded scales and widens the biases to fp32 (engines/vllm.py `mxfp4_moe_bytes`
  names each function).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.sizing import architecture_from_hf_config
from service.sizing.engines.vllm import model_memory_usage
from service.sizing.model.hf_config import checkpoint_weights
from service.sizing.model.param_count import TensorClass
from service.sizing.model.weights import weight_bytes_per_gpu, weight_bytes_total

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
GIB = 2**30


def config(name: str, quantization: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    if quantization is not None:
        data["quantization_config"] = quantization
    return data


def loaded_bytes(cfg: dict[str, Any], tensor_parallel_size: int) -> int:
    arch = architecture_from_hf_config(cfg)
    per_gpu = weight_bytes_per_gpu(weight_bytes_total(arch), tensor_parallel_size)
    return model_memory_usage(arch, per_gpu, tensor_parallel_size)


# The scheme RedHatAI's w8a8 and fp8-dynamic model cards state ("Only weights and activations
# of the linear operators within transformers blocks are quantized"; weights symmetric per
# channel, activations dynamic per token), as llm-compressor writes it (calibration cases.json).
W8A8_INT8 = {
    "quant_method": "compressed-tensors",
    "format": "int-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
            "input_activations": {
                "num_bits": 8,
                "type": "int",
                "strategy": "token",
                "dynamic": True,
            },
        }
    },
    "ignore": ["lm_head", "re:vision_tower.*", "re:multi_modal_projector.*"],
}
FP8_DYNAMIC = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
            "input_activations": {
                "num_bits": 8,
                "type": "float",
                "strategy": "token",
                "dynamic": True,
            },
        }
    },
    "ignore": ["lm_head"],
}
# AutoAWQ's defaults (TechxGenus/Meta-Llama-3-70B-Instruct-AWQ's section is not in the repository)
AWQ_GEMM = {
    "quant_method": "awq",
    "bits": 4,
    "group_size": 128,
    "zero_point": True,
    "version": "gemm",
}

# Llama-3.3-70B: hidden 8192, 80 layers, 64 q heads and 8 kv heads of 128, MLP 28672, vocab
# 128256, lm_head untied; one layer's linears, out x in:
#   q 8192x8192 = 67,108,864   k, v 1024x8192 = 8,388,608 each   o 8192x8192 = 67,108,864
#   gate, up 28672x8192 = 234,881,024 each   down 8192x28672 = 234,881,024
#   = 855,638,016 parameters, with 8192+1024+1024+8192+28672+28672+8192 = 83,968 output rows
LLAMA70_LINEAR = 855_638_016
LLAMA70_ROWS = 83_968
LLAMA70_TABLE = 128_256 * 8_192 * 2  # embed_tokens (and lm_head) at 2 B: 2,101,346,304
LLAMA70_NORMS = (2 * 80 + 1) * 8_192 * 2  # input/post-attention per layer + final: 2,637,824
# RotaryEmbedding cos_sin_cache: max_position_embeddings 131072 x head 128 x 2 B = 32 MiB
LLAMA_ROTARY = 131_072 * 128 * 2


def test_w8a8_int8_mistral_small_keeps_head_and_pixtral_tower_bf16() -> None:
    # Mistral-Small-3.1-24B (hidden 5120, 40 layers, 32 q / 8 kv heads of 128, MLP 32768,
    # vocab 131072, lm_head untied). One layer's linears: q 4096x5120 20,971,520; k, v
    # 1024x5120 5,242,880 each; o 5120x4096 20,971,520; gate, up, down 32768x5120
    # 167,772,160 each = 555,745,280 int8 bytes, plus one bf16 scale per output row:
    # (4096+1024+1024+5120+32768+32768+5120) x 2 = 163,840 -> 555,909,120 a layer, x 40.
    decoder = 40 * (555_745_280 + 163_840)
    tables = 2 * 131_072 * 5_120 * 2  # embed_tokens and the ignored lm_head, bf16
    norms = (2 * 40 + 1) * 5_120 * 2
    # Pixtral (hidden 1024, 24 layers, heads 16x64, MLP 4096, patch 14, no biases): patch_conv
    # 1024x3x14x14 = 602,112 + ln_pre 1024 + 24 x (4 x 1024^2 + 3 x 1024x4096 + 2 x 1024)
    # = 24 x 16,779,264 -> 403,305,472 parameters, bf16 (ignored by the w8a8 recipe).
    vision = (602_112 + 1_024 + 24 * 16_779_264) * 2
    # Mistral3MultiModalProjector: norm 1024, patch_merger.merging_layer 4096 -> 1024,
    # linear_1 1024 -> 5120 and linear_2 5120 -> 5120 (multimodal_projector_bias false).
    projector = (1_024 + 4_096 * 1_024 + 1_024 * 5_120 + 5_120 * 5_120) * 2
    total = decoder + tables + norms + vision + projector  # 25,799,464,960 B
    cfg = config("mistralai--Mistral-Small-3.1-24B-Instruct-2503", W8A8_INT8)
    weights = checkpoint_weights(cfg)
    assert weights.size.served_bytes == total
    assert weights.size.of(TensorClass.VISION) == vision
    assert weights.size.of(TensorClass.PROJECTOR) == projector
    # + the rotary cache, 131072 x 128 x 2 B: 25,833,019,392 B = 24.06 GiB; the log
    # (w8a8-mistral-small-24b--h100-80gb--tp1pp1dp1--8192.log): "Model loading took 24.07 GiB".
    loaded = loaded_bytes(cfg, 1)
    assert loaded == total + 131_072 * 128 * 2
    assert abs(loaded / GIB - 24.07) <= 24.07 * 0.02


def test_fp8_dynamic_llama_70b_keeps_embeddings_and_head_bf16_at_tp4() -> None:
    # FP8 e4m3 values (1 B) and one bf16 scale per output row; embed_tokens (not a Linear) and
    # the ignored lm_head at 2 B; every tensor split over the 4 ranks.
    decoder = 80 * (LLAMA70_LINEAR + LLAMA70_ROWS * 2)  # 68,464,476,160
    total = decoder + 2 * LLAMA70_TABLE + LLAMA70_NORMS  # 72,669,806,592
    cfg = config("meta-llama--Llama-3.3-70B-Instruct", FP8_DYNAMIC)
    assert checkpoint_weights(cfg).size.served_bytes == total
    # total / 4 + 32 MiB = 18,201,006,080 B = 16.95 GiB; the log
    # (fp8dyn-llama-3-3-70b--h100-80gb--tp4pp1dp1--8192.log): "Model loading took 16.96 GiB",
    # where every parameter at 1 B would give 16.46.
    loaded = loaded_bytes(cfg, 4)
    assert loaded == total // 4 + LLAMA_ROTARY
    assert abs(loaded / GIB - 16.96) <= 16.96 * 0.02


def test_awq_llama_70b_keeps_embeddings_and_head_fp16_at_tp2() -> None:
    # AWQ int4, group 128, zero points: a linear of out x in stores qweight in x out / 2 B,
    # qzeros in / 128 x out / 8 x 4 B = in x out / 256 and scales in / 128 x out x 2 B =
    # in x out / 64, so in x out x 133 / 256: 855,638,016 x 133 / 256 = 444,530,688 a layer.
    decoder = 80 * LLAMA70_LINEAR * 133 // 256  # 35,562,455,040
    total = decoder + 2 * LLAMA70_TABLE + LLAMA70_NORMS  # 39,767,785,472
    cfg = config("meta-llama--Llama-3.3-70B-Instruct", AWQ_GEMM)
    assert checkpoint_weights(cfg).size.served_bytes == total
    # total / 2 + 32 MiB = 19,917,447,168 B = 18.55 GiB; the L40S log (Meta-Llama-3-70B AWQ,
    # the same tensor shapes, TP2): "Model loading took 18.55 GiB", where every parameter
    # priced as AWQ would give 17.07.
    loaded = loaded_bytes(cfg, 2)
    assert loaded == total // 2 + LLAMA_ROTARY
    assert abs(loaded / GIB - 18.55) <= 18.55 * 0.02


@pytest.mark.parametrize(("tensor_parallel_size", "logged_gib"), [(4, 53.12)])
def test_llama_4_scout_loads_its_vision_tower_sharded(
    tensor_parallel_size: int, logged_gib: float
) -> None:
    # vLLM mllama4.py Llama4VisionModel (hidden 1408, 34 layers, MLP 5632, 16 heads, patch
    # 14 of 336): patch_embedding 588 -> 1408 without bias 827,904; class_embedding 1,408;
    # positional_embedding_vlm (24^2 + 1) x 1408 = 812,416; layernorm_pre/post 2 x 2,816; per
    # layer q/k/v/o 4 x (1408^2 + 1408) = 7,935,488, fc1 1408x5632 + 5632 = 7,935,488, fc2
    # 5632x1408 + 1408 = 7,931,264, two LayerNorms 5,632 -> 23,807,872, x 34; the vision
    # adapter's fc1 5632 -> 4096 and fc2 4096 -> 4096 without bias 39,845,888. Total
    # 850,960,896 parameters, bf16; Llama4MultiModalProjector.linear_1 4096 -> 5120.
    # The trimmed copy this fixture replaced lacked the vision_config (0.41 GiB per GPU at TP4).
    # The log (meta-llama-llama-4-scout--h100-80gb--tp4pp1dp1--8192.log): "Model loading took
    # 53.12 GiB"; the text model alone with its 2.5 GiB rotary cache gave 52.68.
    cfg = config("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    weights = checkpoint_weights(cfg)
    assert weights.size.of(TensorClass.VISION) == 850_960_896 * 2
    assert weights.size.of(TensorClass.PROJECTOR) == 4_096 * 5_120 * 2
    loaded = loaded_bytes(cfg, tensor_parallel_size)
    # rotary: max_position_embeddings 10,485,760 x 128 x 2 B = 2.5 GiB, held once per GPU
    assert loaded == -(-weights.size.served_bytes // tensor_parallel_size) + 10_485_760 * 128 * 2
    assert abs(loaded / GIB - logged_gib) <= logged_gib * 0.02


def test_gpt_oss_20b_mxfp4_experts_as_the_hopper_triton_backend_holds_them_at_tp2() -> None:
    # vLLM 0.19.0 on H100 picks the TRITON MXFP4 backend (fused_moe/oracle/mxfp4.py
    # select_mxfp4_moe_backend); its triton_kernels is the copy the wheel vendors
    # (vllm/third_party/triton_kernels, triton tag v3.6.0). gpt-oss-20b: 24 layers, 32 experts,
    # hidden 2880, expert intermediate 2880, so 1,440 per rank at TP2, rounded up to 64: 1,472.
    # One layer on one rank, bytes (all uint8 except the biases):
    #   w13 values, swizzled (HopperMXValueLayout pads the transposed 1,440 x 2,944 to
    #     multiples of 64): 32 x 1,472 x 2,944 = 138,674,176
    #   w2 values, swizzled (736 x 2,880 -> 768 x 2,880): 32 x 768 x 2,880 = 70,778,880
    #   w13 scales as loaded, kept: 32 x 2,944 x 90 = 8,478,720
    #   w2 scales as loaded, kept: 32 x 2,880 x 46 = 4,239,360
    #   w13 scales swizzled (HopperMXScaleLayout pads 2,944 rows to 256s): 32 x 3,072 x 90
    #     = 8,847,360
    #   w2 scales swizzled (2,880 rows -> 3,072): 32 x 3,072 x 46 = 4,521,984
    #   w13 bias in fp32: 32 x 2,944 x 4 = 376,832; w2 bias in fp32, whole: 32 x 2,880 x 4
    #     = 368,640
    #   = 236,285,952 held, against the checkpoint's experts over 2: 32 x (5,760 x 2,880 +
    #     2,880 x 2,880) x 17/32 B + 32 x (5,760 + 2,880) x 2 B = 423,567,360 / 2 = 211,783,680
    values = 138_674_176 + 70_778_880
    scales = 8_478_720 + 4_239_360 + 8_847_360 + 4_521_984
    held = values + scales + 376_832 + 368_640
    extra = 24 * (held - 211_783_680)  # 588,054,528 B = 0.548 GiB
    cfg = config("openai--gpt-oss-20b")
    weights = checkpoint_weights(cfg)
    assert weights.size.of(TensorClass.ROUTED_EXPERTS) == 24 * 423_567_360
    # checkpoint 13,761,264,768 B / 2 + rotary 131,072 x 64 x 2 B + the experts' extra
    # = 7,485,464,128 B = 6.97 GiB; the log (openai-gpt-oss-20b--h100-80gb--tp2pp1dp1--8192.log):
    # "Model loading took 7.01 GiB", where the values and swizzled scales unpadded gave 6.82.
    loaded = loaded_bytes(cfg, 2)
    assert loaded == weights.size.served_bytes // 2 + 131_072 * 64 * 2 + extra
    assert abs(loaded / GIB - 7.01) <= 7.01 * 0.02
