"""Parameter counts of the 2026 layouts `param_count_2026` writes, from their configs verbatim
(tests/fixtures/hf_configs, sources in SOURCES.md), checked tensor class by tensor class
against hand arithmetic from vLLM's model file and in total against the published figure
(residual stated beside it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.sizing.model.hf_config import checkpoint_weights
from service.sizing.model.param_count import TensorClass

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def test_mimo_v2_flash_by_class_and_against_the_model_card() -> None:
    counts = checkpoint_weights(load("XiaomiMiMo--MiMo-V2-Flash")).parameters
    by = dict(counts.by_class)
    # vLLM mimo_v2.py; config: hidden 4096, vocab 152576, 48 layers, hybrid_layer_pattern with
    # 9 full layers (0, 5, 11, 17, 23, 29, 35, 41, 47) and 39 sliding ones.
    # embed_tokens and the untied lm_head: 152576 x 4096 = 624_951_296 each.
    assert by[TensorClass.EMBEDDING] == 624_951_296
    assert by[TensorClass.LM_HEAD] == 624_951_296
    # Full layer (64 heads, 4 KV heads, K 192, V 128): q 64*192*4096 = 50_331_648,
    # k 4*192*4096 = 3_145_728, v 4*128*4096 = 2_097_152, o 4096*64*128 = 33_554_432
    # -> 89_128_960. Sliding layer (64 heads, 8 KV heads, K 192, V 128, sink per head):
    # 50_331_648 + 6_291_456 + 4_194_304 + 33_554_432 + 64 = 94_371_904.
    # 9 * 89_128_960 + 39 * 94_371_904 = 802_160_640 + 3_680_504_256 = 4_482_664_896.
    assert by[TensorClass.ATTENTION] == 4_482_664_896
    # moe_layer_freq[0] = 0: one dense MiMoV2MLP, 3 * 4096 * 16384 = 201_326_592.
    assert by[TensorClass.MLP] == 201_326_592
    # 47 MoE layers of 256 experts (3 * 4096 * 2048 = 25_165_824 each):
    # 47 * 256 * 25_165_824 = 302_795_194_368; gate 256 * 4096 + bias 256 = 1_048_832, x 47.
    assert by[TensorClass.ROUTED_EXPERTS] == 302_795_194_368
    assert by[TensorClass.ROUTER] == 47 * 1_048_832
    # Two RMSNorms per layer and the final one: (2 * 48 + 1) * 4096 = 397_312.
    assert by[TensorClass.NORM] == 397_312
    # Sum: 308_778_780_864. github:XiaomiMiMo/MiMo-V2-Flash README.md: "309B total parameters"
    # (the 3 MTP layers, "0.33B params/block", are released apart and vLLM skips "mtp" names:
    # MiMoV2Model.load_weights). Residual (308.78 - 309) / 309 = -0.07 %.
    assert counts.total == 308_778_780_864 == counts.served_total
    assert abs(counts.total - 309e9) <= 309e9 * 0.001


def test_nemotron_3_super_latent_moe_against_nvidia() -> None:
    # NVIDIA-Nemotron-3-Super-120B-A12B-FP8 config.json: hidden 4096, vocab 131072,
    # hybrid_override_pattern of 88 blocks: 40 M, 40 E, 8 *. vLLM nemotron_h.py NemotronHMoE with
    # moe_latent_size 1024: routed experts in the latent width (fc1/fc2_latent_proj around them),
    # the shared expert and the router in the hidden width.
    counts = checkpoint_weights(load("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8")).parameters
    by = dict(counts.by_class)
    assert by[TensorClass.EMBEDDING] == by[TensorClass.LM_HEAD] == 131_072 * 4_096
    # per E block: fc1 + fc2 2 x 1024 x 4096 = 8,388,608 and 512 experts x (up 2688 x 1024 +
    # down 1024 x 2688) = 2,818,572,288 -> 2,826,960,896; x 40 = 113,078,435,840 (without the
    # latent the experts would be 512 x 2 x 2688 x 4096 a block: 451B in all)
    assert by[TensorClass.ROUTED_EXPERTS] == 40 * (2 * 1_024 * 4_096 + 512 * 2 * 2_688 * 1_024)
    assert by[TensorClass.ROUTED_EXPERTS] == 113_078_435_840
    # shared expert up + down 2 x 5376 x 4096 = 44,040,192; router 512 x 4096 + 512 bias
    assert by[TensorClass.SHARED_EXPERTS] == 40 * 44_040_192
    assert by[TensorClass.ROUTER] == 40 * (512 * 4_096 + 512)
    # * block: q, o 32 x 128 x 4096 = 16,777,216 each; k, v 2 x 128 x 4096 = 1,048,576 each
    assert by[TensorClass.ATTENTION] == 8 * (2 * 16_777_216 + 2 * 1_048_576)
    # M block (inner 128 x 64 = 8192, 8 groups of state 128): in_proj (2 x 8192 + 2 x 8 x 128
    # + 128 = 18,560) x 4096 + out_proj 4096 x 8192 = 109,576,192
    assert by[TensorClass.MAMBA] == 40 * (18_560 * 4_096 + 4_096 * 8_192)
    # Sum 120,668,707,840. research.nvidia.com/labs/nemotron/Nemotron-3-Super: "12B active 120B
    # total parameter" model. Residual (120.669 - 120) / 120 = +0.56 % (MTP block, "*E",
    # not counted: vLLM loads it only as a speculative draft).
    assert counts.total == 120_668_707_840
    assert abs(counts.total - 120e9) <= 120e9 * 0.01


def test_nemotron_3_ultra_latent_moe_against_its_name() -> None:
    # NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 config.json: hidden 8192, layers_block_type of 108
    # blocks: 48 mamba, 48 moe, 12 attention; moe_latent_size 2048, 512 experts of 5120.
    counts = checkpoint_weights(load("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")).parameters
    by = dict(counts.by_class)
    # fc1 + fc2 2 x 2048 x 8192 = 33,554,432; experts 512 x 2 x 5120 x 2048 = 10,737,418,240
    assert by[TensorClass.ROUTED_EXPERTS] == 48 * (33_554_432 + 10_737_418_240)
    assert by[TensorClass.SHARED_EXPERTS] == 48 * 2 * 10_240 * 8_192
    # Sum 549,308,993,536 against the checkpoint's name, 550B: residual -0.13 %.
    assert counts.total == 549_308_993_536
    assert abs(counts.total - 550e9) <= 550e9 * 0.01


def test_minimax_m3_by_class_and_against_the_published_total() -> None:
    counts = checkpoint_weights(load("MiniMaxAI--MiniMax-M3")).parameters
    by = dict(counts.by_class)
    # vLLM 0.33.0 models/minimax_m3/nvidia/model.py; config: hidden 6144, vocab 200064, 60
    # layers, 64 heads, 4 KV heads of 128, sparse_attention_freq 1 on layers 3..59 (57 layers),
    # moe_layer_freq 0 on layers 0..2.
    # embed_tokens and the untied lm_head: 200064 x 6144 = 1_229_193_216 each.
    assert by[TensorClass.EMBEDDING] == by[TensorClass.LM_HEAD] == 1_229_193_216
    # Every layer: q 64*128*6144 = 50_331_648, k and v 4*128*6144 = 3_145_728 each, o 50_331_648
    # -> 106_954_752; a sparse layer adds index_q 4*128*6144 = 3_145_728 and one index_k head
    # 128*6144 = 786_432 (MinimaxM3QKVParallelLinearWithIndexer) -> 3_932_160.
    # 60 * 106_954_752 + 57 * 3_932_160 = 6_417_285_120 + 224_133_120 = 6_641_418_240.
    assert by[TensorClass.ATTENTION] == 6_641_418_240
    # Three dense MiniMaxM3MLP of dense_intermediate_size 12288: 3 * 3 * 6144 * 12288.
    assert by[TensorClass.MLP] == 3 * 226_492_416 == 679_477_248
    # 57 MoE layers of 128 experts w1/w2/w3 of intermediate_size 3072 (3 * 6144 * 3072 =
    # 56_623_104 each): 57 * 128 * 56_623_104 = 413_122_166_784; the shared expert
    # (intermediate_size x n_shared_experts 1) 57 * 56_623_104 = 3_227_516_928; the fp32 gate
    # 128 x 6144 and e_score_correction_bias 128: 57 * 786_560 = 44_833_920.
    assert by[TensorClass.ROUTED_EXPERTS] == 413_122_166_784
    assert by[TensorClass.SHARED_EXPERTS] == 3_227_516_928
    assert by[TensorClass.ROUTER] == 44_833_920
    # Norms: per layer q_norm, k_norm 128 each and two of 6144 -> 12_544, x 60 = 752_640; the
    # index_q_norm and index_k_norm 128 each on 57 layers = 14_592; the final 6144.
    assert by[TensorClass.NORM] == 752_640 + 14_592 + 6_144
    # Sum 426_174_572_928. The release's "total parameter count of 428 billion" is the
    # multimodal checkpoint's (vision tower included); "mtp." weights vLLM loads only as a
    # draft (MiniMaxM3Model.load_weights) are not counted. Residual (426.17 - 428) / 428 =
    # -0.43 %.
    assert counts.total == 426_174_572_928 == counts.served_total
    assert abs(counts.total - 428e9) <= 428e9 * 0.005
