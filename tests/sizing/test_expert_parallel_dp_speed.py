"""Expert parallelism over data-parallel ranks in the step-time model (vLLM
enable_expert_parallel with data_parallel_size: EP = DP x TP, vllm/model_executor/layers/
fused_moe/config.py FusedMoEParallelConfig.make): one DP rank's decode step reads its own
attention and dense weights, its busiest expert shard, its own batch's cache, and sends its
tokens' dispatch and combine over the link (performance.all_to_all_bytes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing.errors import SizingError
from service.sizing.model.hf_config import architecture_from_hf_config
from service.sizing.speed.performance import (
    GpuPerformance,
    ParameterSplit,
    decode_cost,
    fitted_efficiency,
    parameter_split,
    step_time,
)

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"
DEEPSEEK_V3 = architecture_from_hf_config(
    json.loads((CONFIGS / "deepseek-ai--DeepSeek-V3.json").read_text(encoding="utf-8"))
)
# service/catalog/data/gpus.json h200-141gb: 4.8 TB/s, 989 BF16 and 1,978 FP8 dense TFLOPS,
# NVLink 450 GB/s one way per GPU.
H200 = GpuPerformance(4.8, 989, 1978, 450, "NVIDIA H200 141GB")


def test_dp_ranks_share_the_experts_and_each_reads_its_own_dense_part() -> None:
    # dense 100, 2 MoE layers of 4 experts of 10 parameters, 1 per token; 1 token per rank.
    split = ParameterSplit(180, 100, 10, 2, 4, 1)
    # DP 2 x TP 1, no EP: the experts see 2 tokens, 4 x (1 - (3/4)^2) = 1.75 touched, each
    # tensor-sharded over DP x TP = 2 GPUs: 100 / 1 + 2 x 10 x 1.75 / 2 = 117.5.
    assert split.read_per_gpu(1, 1, 1, 2) == pytest.approx(117.5)
    # DP 2 x TP 1, EP 2: q = 1 - (3/4)^2 = 0.4375, a rank of 2 experts is Binomial(2, q):
    # F(0) = 0.5625^2 = 0.31640625, F(1) = F(0) + 2 x 0.4375 x 0.5625 = 0.80859375. The
    # busiest of two: (1 - 0.31640625^2) + (1 - 0.80859375^2) = 0.89988708 + 0.34617615
    # = 1.24606323 experts, whole on the rank: 100 + 2 x 10 x 1.24606323 x 2 / 2 = 124.921265.
    assert split.read_per_gpu(1, 1, 2, 2) == pytest.approx(124.921265, abs=1e-6)


def test_deepseek_v3_on_8_h200_dp_8_with_ep_against_tp_8() -> None:
    # DeepSeek-V3 (tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V3.json): 671,026,419,200
    # parameters, 673,150,582,112 B of checkpoint (block FP8), so 1.0031655 B a parameter;
    # 17,117,648,384 dense, 58 MoE layers of 256 experts of 3 x 7168 x 2048 = 44,040,192,
    # 8 per token; MLA latent 512 + 64 rope, bf16: 61 x 576 x 2 = 70,272 B a cached token.
    split = parameter_split(DEEPSEEK_V3)
    assert (split.dense, split.per_expert, split.moe_layers) == (17_117_648_384, 44_040_192, 58)
    # 256 sequences at 1,024 tokens on 8 GPUs either way.
    tp8 = decode_cost(DEEPSEEK_V3, H200, 256, 1024, tensor_parallel_size=8)
    rank = decode_cost(DEEPSEEK_V3, H200, 32, 1024, expert_parallel_size=8, data_parallel_size=8)
    # TP 8: 256 tokens touch 256 x (1 - (31/32)^256) = 256 x (1 - 2.9525e-4) = 255.92441
    # experts a layer; (17,117,648,384 + 58 x 44,040,192 x 255.92441) / 8 = (17,117,648,384
    # + 653,715,700,132) / 8 = 83,854,168,565; x 1.0031655 = 84,119,612,532 B (to 1e-6).
    assert tp8.weight_bytes == pytest.approx(84_119_612_532, rel=1e-6)
    # DP 8 + EP 8 (TP 1 in each rank): the 8 ranks' 256 tokens touch every expert of the busiest
    # rank's 256 / 8 = 32 (q = 0.99970, P(a rank misses one) x 8 ranks ~ 1e-16): 17,117,648,384
    # dense whole + 58 x 32 x 44,040,192 = 81,738,596,352 experts = 98,856,244,736 parameters
    # x 673,150,582,112 / 671,026,419,200 = 99,169,178,419 B.
    assert rank.weight_bytes == pytest.approx(99_169_178_419, abs=2)
    # The cache: the latent whole on every TP rank, so TP 8 reads all 256 sequences' on each
    # GPU, 256 x 1,024 x 70,272 = 18,421,383,168 B; a DP rank its own 32: 2,302,672,896 B.
    assert (tp8.kv_bytes, rank.kv_bytes) == (18_421_383_168, 2_302_672_896)
    # FLOPs per GPU are the same: 256 / 8 sequences' worth either way.
    assert rank.flops == tp8.flops
    # The all-to-all: 2 (dispatch + combine) x 8 experts x 7,168 x 2 B x 58 layers
    # = 13,303,808 B a token, 7/8 of it to other ranks = 11,640,832; x 32 tokens = 372,506,624.
    assert (tp8.all_to_all_bytes, rank.all_to_all_bytes) == (0, 372_506_624)
    # The steps (the NVIDIA fit, performance.FITTED: bandwidth 0.84, FP8 linear 0.413, BF16
    # attention 0.787, overlap 0, 80.25 us a layer, no all-reduce latency):
    # compute, both: 2,403,347,038,208 / (1,978e12 x 0.413) + 556,735,135,744 / (989e12 x
    # 0.787) = 2.94198 + 0.71528 = 3.65726 ms; overhead 61 x 80.25 us = 4.89525 ms.
    # TP 8: memory 102,540,995,700 B / (4.8e12 x 0.84) = 25.43179 ms; link 122 all-reduces x
    # 2 x 7/8 x 256 x 7,168 x 2 B / 450e9 = 1.74122 ms; 25.43179 + 3.65726 + 1.74122 +
    # 4.89525 = 35.72552 ms.
    # DP 8 + EP: memory 101,471,851,315 / 4.032e12 = 25.16663 ms; link 372,506,624 / 450e9 =
    # 0.82779 ms (no all-reduce at TP 1); 25.16663 + 3.65726 + 0.82779 + 4.89525 = 34.54693.
    efficiency = fitted_efficiency(H200)
    assert step_time(tp8, efficiency).ms == pytest.approx(35.72552, abs=1e-4)
    assert step_time(rank, efficiency).ms == pytest.approx(34.54693, abs=1e-4)
    lines = step_time(rank, efficiency).steps(efficiency)
    assert any("expert all-to-all (dispatch + combine): 372,506,624 B" in line for line in lines)


def test_an_ep_size_that_does_not_divide_dp_x_tp_is_refused_by_name() -> None:
    with pytest.raises(SizingError) as raised:
        decode_cost(DEEPSEEK_V3, H200, 1, 1, expert_parallel_size=16, data_parallel_size=8)
    assert raised.value.field == "expert_parallel_size"
