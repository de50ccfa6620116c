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


def test_lfm2_350m_by_class_and_against_liquidai() -> None:
    counts = checkpoint_weights(load("LiquidAI--LFM2-350M")).parameters
    by = dict(counts.by_class)
    # vLLM 0.33.0 lfm2.py; config: hidden 1024, vocab 65536, 16 layers, full_attn_idxs
    # [2, 5, 8, 10, 12, 14] (6 attention, 10 conv), 16 heads, 8 KV heads, conv_dim 1024,
    # conv_L_cache 3, conv_bias false, block_ff_dim 6656 with block_auto_adjust_ff_dim.
    # embed_tokens 65536 x 1024 = 67_108_864; lm_head tied (Lfm2ForCausalLM.tie_weights).
    assert by[TensorClass.EMBEDDING] == 67_108_864
    assert TensorClass.LM_HEAD not in by
    # Lfm2MLP width: int(2 * 6656 / 3) = 4437, x 1.0, up to a multiple of 256: 4608.
    # w1 + w3 + w2 = 3 * 1024 * 4608 = 14_155_776 per layer, x 16 = 226_492_416.
    assert by[TensorClass.MLP] == 226_492_416
    # Attention (head_dim 1024 / 16 = 64): q 1024 * 1024 + k 512 * 1024 + v 512 * 1024 +
    # out 1024 * 1024 = 3_145_728 per layer, x 6 = 18_874_368.
    assert by[TensorClass.ATTENTION] == 18_874_368
    # ShortConv: in_proj 3 * 1024 * 1024 + out_proj 1024 * 1024 = 4_194_304, x 10 =
    # 41_943_040; the depthwise conv 1024 x 1 x 3 = 3_072, x 10 = 30_720.
    assert by[TensorClass.LINEAR_ATTENTION] == 41_943_040
    assert by[TensorClass.CONV_STATE] == 30_720
    # Norms: operator_norm + ffn_norm 2 * 1024 * 16 = 32_768, q/k_layernorm 2 * 64 * 6 = 768,
    # embedding_norm 1024: 34_560.
    assert by[TensorClass.NORM] == 34_560
    # Sum 354_483_968: LiquidAI's LFM2-350M model card ("Parameters | 354,483,968"), exactly.
    assert counts.total == 354_483_968 == counts.served_total


def test_kimi_k3_text_model_by_class_and_against_its_published_size() -> None:
    config = load("moonshotai--Kimi-K3")
    # The text model alone (text_config: KimiLinearForCausalLM, vLLM 0.33.0
    # models/kimi_k3/nvidia/model.py): hidden 7168, vocab 163840, 93 layers, 69 KDA
    # (linear_attn_config.kda_layers) and 24 MLA, tie_word_embeddings false.
    counts = checkpoint_weights(config["text_config"]).parameters
    by = dict(counts.by_class)
    # embed_tokens and lm_head: 163840 x 7168 = 1_174_405_120 each.
    assert by[TensorClass.EMBEDDING] == by[TensorClass.LM_HEAD] == 1_174_405_120
    # KDA (96 heads x 128 = P 12_288, 4 conv taps), per layer: q/k/v/g_proj 4 x 12_288 x 7168
    # = 352_321_536, f_a_proj 128 x 7168 = 917_504, b_proj 96 x 7168 = 688_128, f_b_proj
    # 12_288 x 128 = 1_572_864, o_proj 7168 x 12_288 = 88_080_384 -> 443_580_416, x 69 =
    # 30_607_048_704.
    assert by[TensorClass.LINEAR_ATTENTION] == 30_607_048_704
    # q/k/v_conv1d 3 x 12_288 x 4 = 147_456, dt_bias 12_288, A_log 96 -> 159_840, x 69.
    assert by[TensorClass.CONV_STATE] == 69 * 159_840 == 11_028_960
    # MLA (96 heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128), per layer:
    # q_a 1536 x 7168 = 11_010_048, kv_a (512 + 64) x 7168 = 4_128_768, g 96 x 128 x 7168 =
    # 88_080_384, q_b 96 x 192 x 1536 = 28_311_552, kv_b 96 x 256 x 512 = 12_582_912,
    # o 7168 x 12_288 = 88_080_384 -> 232_194_048, x 24 = 5_572_657_152.
    assert by[TensorClass.ATTENTION] == 5_572_657_152
    # Layer 0 dense (first_k_dense_replace 1): 3 x 7168 x 33_792 = 726_663_168.
    assert by[TensorClass.MLP] == 726_663_168
    # 92 MoE layers. Router 896 x 7168 + bias 896 = 6_423_424 -> 590_955_008.
    assert by[TensorClass.ROUTER] == 92 * 6_423_424 == 590_955_008
    # Shared experts 2 x 3072 = 6144 wide at 7168: 3 x 7168 x 6144 = 132_120_576, x 92.
    assert by[TensorClass.SHARED_EXPERTS] == 92 * 132_120_576 == 12_155_092_992
    # Latent MoE (routed_expert_hidden_size 3584): down 3584 x 7168 + up 7168 x 3584 =
    # 51_380_224; 896 experts x 3 x 3584 x 3072 = 29_595_009_024 -> 29_646_389_248, x 92.
    assert by[TensorClass.ROUTED_EXPERTS] == 92 * 29_646_389_248 == 2_727_467_810_816
    # Norms per layer: input + post-attention + two attention-residual norms 4 x 7168 =
    # 28_672, two res projections 2 x 7168 = 14_336 -> 43_008, x 93 = 3_999_744; KDA o_norm
    # 128 x 69 = 8_832; MLA q_a 1536 + kv_a 512 = 2048, x 24 = 49_152; MoE routed_expert_norm
    # 3584 x 92 = 329_728; model.norm, output_attn_res_norm and its projection 3 x 7168 =
    # 21_504. Sum 4_408_960.
    assert by[TensorClass.NORM] == 4_408_960
    # Total 2_779_484_476_000: published as "2.8T" (ai-dynamo/aiconfigurator
    # aic-core/src/aiconfigurator_core/sdk/models/kimi_k3.py: "Kimi-K3 hybrid KDA + MLA
    # LatentMoE model (2.8T, 93 layers = 69 KDA + 24 MLA)"), the vision tower not counted
    # here. Residual (2.7795 - 2.8) / 2.8 = -0.7 %, inside the rounding of "2.8T".
    assert counts.total == 2_779_484_476_000 == counts.served_total
    assert 2.75e12 <= counts.total < 2.85e12
    # Bytes: quantization_config is compressed-tensors mxfp4-pack-quantized (4-bit values and
    # one 1-byte scale per 32: 17/32 B) on every Linear except self_attn, shared_experts, the
    # dense mlp and lm_head. So the routed experts and the latent down/up projections,
    # 2_727_467_810_816 parameters, take x 17 / 32 = 1_448_967_274_496 B; the router gate and
    # the residual projections are not Linear modules vLLM quantizes, and stay bf16 with the
    # other 2_779_484_476_000 - 2_727_467_810_816 = 52_016_665_184 parameters (x 2 B).
    size = checkpoint_weights(config["text_config"]).size
    assert size.of(TensorClass.ROUTED_EXPERTS) == 2_727_467_810_816 * 17 // 32
    assert size.total_bytes == 1_448_967_274_496 + 52_016_665_184 * 2 == 1_553_000_604_864


def test_kimi_k3_whole_checkpoint_with_its_vision_tower() -> None:
    config = load("moonshotai--Kimi-K3")
    whole = checkpoint_weights(config)
    by = dict(whole.parameters.by_class)
    # vision_config (vLLM 0.33.0 kimi_k25_vit.py MoonViT3dPretrainedModel, KimiK3VisionConfig):
    # vt_hidden_size 1024, qkv_hidden_size 1536, vt_intermediate_size 4096, 27 layers, patch 14,
    # no biases (patch_embed_proj_bias, attn_bias, linear_bias false), rmsnorm.
    # patch_embed.proj 1024 x 3 x 14 x 14 = 602_112; pos_emb 64 x 64 x 1024 = 4_194_304;
    # per block: norm0 + norm1 2_048, wqkv 4608 x 1024 = 4_718_592, wo 1024 x 1536 = 1_572_864,
    # fc0 + fc1 2 x 4096 x 1024 = 8_388_608 -> 14_682_112, x 27 = 396_417_024; final norm 1024.
    assert by[TensorClass.VISION] == 602_112 + 4_194_304 + 396_417_024 + 1_024 == 401_214_464
    # patchmergerv2 projector: merged 1024 x 2 x 2 = 4096; linear_1 4096 x 4096 = 16_777_216,
    # linear_2 7168 x 4096 = 29_360_128, post_norm 7168.
    assert by[TensorClass.PROJECTOR] == 16_777_216 + 29_360_128 + 7_168 == 46_144_512
    assert whole.parameters.total == 2_779_484_476_000 + 447_358_976 == 2_779_931_834_976
    # The tower and projector match quantization_config's ignore ("re:.*vision_tower.*",
    # "re:.*mm_projector.*"): bf16, 447_358_976 x 2 B on top of the text model's bytes.
    assert whole.size.total_bytes == 1_553_000_604_864 + 447_358_976 * 2 == 1_553_895_322_816
    # SemiAnalysisAI/InferenceX#2351 (Kimi-K3 MXFP4 on MI355X): "the ~1.56 TB checkpoint"
    # (-0.4 %).
    assert abs(whole.size.total_bytes - 1.56e12) / 1.56e12 < 0.01


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


def test_minimax_m1_against_its_safetensors_index() -> None:
    """MiniMax-M1 (github:MiniMax-AI/MiniMax-M1 config.json, tests/fixtures/hf_configs): vLLM
    0.23.0 models/minimax_text_01.py; the published model.safetensors.index.json total_size
    912,210,767,872 B (docs/engines/vllm.md, MiniMax section)."""
    weights = checkpoint_weights(load("MiniMaxAI--MiniMax-M1"))
    by = dict(weights.parameters.by_class)
    # hidden 6144, vocab 200064: embed_tokens and the untied lm_head 200,064 x 6,144 each.
    assert by[TensorClass.EMBEDDING] == by[TensorClass.LM_HEAD] == 200_064 * 6_144 == 1_229_193_216
    # 70 lightning layers (attn_type_list 0), 64 heads x 128 = 8,192 wide: qkv_proj 6,144 x
    # 24,576 + output_gate 6,144 x 8,192 + out_proj 8,192 x 6,144 = 251,658,240 a layer.
    assert by[TensorClass.LINEAR_ATTENTION] == 70 * (6_144 * 40_960) == 17_616_076_800
    # 10 softmax layers: q 8,192 x 6,144 + k, v 1,024 x 6,144 + o 6,144 x 8,192 = 113,246,208.
    assert by[TensorClass.ATTENTION] == 10 * 113_246_208 == 1_132_462_080
    # 80 MoE blocks of 32 experts of 3 x 9,216 x 6,144, and a 32 x 6,144 router each.
    assert by[TensorClass.ROUTED_EXPERTS] == 80 * 32 * 3 * 9_216 * 6_144 == 434_865_438_720
    assert by[TensorClass.ROUTER] == 80 * 32 * 6_144 == 15_728_640
    # norms: two of 6,144 per layer, the final one, and the 70 lightning norms of 8,192.
    assert by[TensorClass.NORM] == 80 * 2 * 6_144 + 6_144 + 70 * 8_192 == 1_562_624
    # total: 2 x 1,229,193,216 + 17,616,076,800 + 1,132,462,080 + 434,865,438,720
    #   + 15,728,640 + 1,562,624 = 456,089,655,296 (the hand count the brief gives)
    assert weights.parameters.total == 456_089_655_296
    # bfloat16 (no torch_dtype: --dtype auto) but the routers float32, as the index counts:
    # 2 x 456,089,655,296 + 15,728,640 x 2 B more = 912,179,310,592 + 31,457,280
    assert weights.size.total_bytes == 2 * 456_089_655_296 + 2 * 15_728_640
    assert weights.size.total_bytes == 912_210_767_872
    assert dict(weights.size.by_class)[TensorClass.ROUTER] == 4 * 15_728_640
