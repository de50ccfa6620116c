"""Issue 19: DeepSeek-V4's parameters and checkpoint bytes from its published config.json,
worked by hand against vLLM 0.33.0 models/deepseek_v4 (param_count_2026.deepseek_v4 names
each tensor's source) and the published totals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.sizing.capacity import Gpu
from service.sizing.model.hf_config import architecture_from_hf_config, checkpoint_weights
from service.sizing.model.tensors import TensorClass
from service.sizing.speed.replica import NoEstimate, SpeedQuestion, replica_speed

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))
    return data


def flash_layer(ratio: int, *, hashed: bool) -> int:
    # V4-Flash: hidden 4,096, 64 heads of 512, q_lora 1,024, o_groups 8 x o_lora 1,024,
    # index 64 heads of 128, 256 experts + 1 shared of 2,048, hc_mult 4, vocab 129,280, top-6.
    attention = (
        4096 * (1024 + 512)  # fused_wqa_wkv
        + 1024  # q_norm
        + 1024 * 64 * 512  # wq_b
        + 512  # kv_norm
        + (64 * 512 // 8) * (8 * 1024)  # wo_a
        + 8 * 1024 * 4096  # wo_b
        + 64  # attn_sink
    )
    if ratio > 1:
        coff = 2 if ratio == 4 else 1  # compressor: ape, fused_wkv_wgate, norm
        attention += ratio * coff * 512 + 4096 * 2 * coff * 512 + 512
    if ratio == 4:  # indexer: wq_b, weights_proj, its compressor of 128
        attention += 1024 * 64 * 128 + 4096 * 64 + 4 * 2 * 128 + 4096 * 2 * 2 * 128 + 128
    ffn = 4096 * 256 + (129_280 * 6 if hashed else 256)  # gate + tid2eid or bias
    ffn += 256 * 3 * 4096 * 2048 + 3 * 4096 * 2048  # routed + shared experts
    mix = (2 + 4) * 4  # hyper-connection rows
    rest = 2 * 4096 + 2 * (mix * 4 * 4096 + mix + 3)
    return attention + ffn + rest


def test_v4_flash_counts_the_published_284b() -> None:
    ratios = [0, 0] + [4, 128] * 20 + [4]
    layers = sum(flash_layer(max(r, 1), hashed=i < 3) for i, r in enumerate(ratios))
    model = 2 * 129_280 * 4096 + 4096 + 4 * 4 * 4096 + 4 + 1  # embed, head, norm, hc_head
    weights = checkpoint_weights(load("deepseek-ai--DeepSeek-V4-Flash"))
    assert weights.parameters.served_total == layers + model == 284_334_567_511
    # 284B published (DeepSeek, vLLM blog "V4-Flash at 285B"); llama.cpp's loader prints
    # "model params = 284.33 B". The MTP layer (a window-only decoder layer, e_proj and
    # h_proj of 4,096 x 4,096, enorm / hnorm / norm, its hc_head) is in the checkpoint too.
    mtp = flash_layer(1, hashed=False) + 2 * 4096 * 4096 + 3 * 4096 + 4 * 4 * 4096 + 4 + 1
    assert weights.parameters.total - weights.parameters.served_total == mtp == 6_610_048_891
    arch = architecture_from_hf_config(load("deepseek-ai--DeepSeek-V4-Flash"))
    assert arch.num_parameters == 284_334_567_511


def test_v4_pro_counts_the_published_1_6t_with_its_mtp_layer() -> None:
    weights = checkpoint_weights(load("deepseek-ai--DeepSeek-V4-Pro"))
    # DeepSeek: "1.6T total parameters"; the checkpoint's count (MTP included) is
    # 1,598,839,674,782 = 1.599T (-0.07%); served (MTP left out) 1,572,999,528,803.
    assert weights.parameters.total == 1_598_839_674_782
    assert abs(weights.parameters.total - 1.6e12) / 1.6e12 < 0.001
    assert weights.parameters.served_total == 1_572_999_528_803


def test_v4_experts_are_priced_as_mxfp4_and_the_rest_as_fp8_blocks() -> None:
    # models/deepseek_v4/quant_config.py: expert_dtype "fp4" (the default): E2M1 values two a
    # byte + one UE8M0 scale per 32 = 17/32 B a parameter. Flash's served routed experts:
    # 43 x 256 x 3 x 4,096 x 2,048 = 277,025,390,592 -> x 17/32 = 147,169,738,752 B.
    weights = checkpoint_weights(load("deepseek-ai--DeepSeek-V4-Flash"))
    assert "fp4 experts" in weights.size.method
    experts = 43 * 256 * 3 * 4096 * 2048
    assert experts == 277_025_390_592
    by_class = dict(weights.size.by_class)
    assert by_class[TensorClass.ROUTED_EXPERTS] == experts * 17 // 32 == 147_169_738_752
    assert weights.size.served_bytes == 155_622_661_934


def test_v4_speed_is_not_estimated_rather_than_estimated_without_its_attention() -> None:
    # The roofline sums cache reads and attention FLOPs over per-token and state layers;
    # DeepSeek-V4's layers are neither, so the answer says why it has no speed.
    arch = architecture_from_hf_config(load("deepseek-ai--DeepSeek-V4-Flash"))
    gpu = Gpu(
        memory_bytes=141 * 2**30,
        name="NVIDIA H200",
        memory_bandwidth_tb_s=4.8,
        dense_bf16_tflops=989.0,
        dense_fp8_tflops=1979.0,
        interconnect_gb_s=450.0,
    )
    speed = replica_speed(
        arch,
        gpu,
        SpeedQuestion(tensor_parallel_size=8, batch=4, context_tokens=4096, prompt_tokens=4096),
    )
    assert isinstance(speed, NoEstimate)
    assert "DeepSeek-V4" in speed.reason
