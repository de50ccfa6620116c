"""The performance model's formulas (service/sizing/speed/performance.py) on examples worked by
hand.

GPU figures are the catalog's (service/catalog/data/gpus.json): H100 SXM 3.35 TB/s, 989 dense
BF16 TFLOPS, 1978 FP8; A100 SXM 80GB 2.039 TB/s, 312 BF16, no FP8; L40S 0.864 TB/s, 362.05
BF16; links from ../shared/catalog/gpus.json (`interconnect_bw_gb_s_per_gpu_unidirectional`):
H100 450 GB/s, L40S 32 GB/s (PCIe Gen4). The efficiencies are chosen here, never the fitted
ones, so the arithmetic beside each test stays true when the fit moves.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    MixtureOfExperts,
    ModelArchitecture,
    MultiHeadLatentAttention,
    SlidingWindowAttention,
)
from service.sizing.model.dtypes import WeightFormat
from service.sizing.speed.performance import (
    Efficiency,
    GpuPerformance,
    PerformanceBound,
    causal_pairs,
    decode_cost,
    estimate_performance,
    expected_experts,
    parameter_split,
    prefill_cost,
    queue_wait_ms,
    step_time,
)

from .models import LLAMA_31_8B, QWEN3_NEXT_GDN

H100 = GpuPerformance(3.35, 989, 1978, 450, "NVIDIA H100 SXM 80GB")
A100 = GpuPerformance(2.039, 312, None, 300, "NVIDIA A100 80GB SXM")
L40S = GpuPerformance(0.864, 362.05, 733, 32, "NVIDIA L40S")
# Peak figures as they are: the roofline's own bound (overlap 1: the larger term wins).
IDEAL = Efficiency(
    bandwidth=1.0, compute=1.0, step_overhead_ms=0.0, allreduce_latency_us=0.0, overlap=1.0
)

# Mixtral-8x7B (catalog mixtral-8x7b-v0.1): 32 layers, 8 KV heads x 128, hidden 4096, 8 experts
# of intermediate 14336, 2 per token, 46,702,792,704 parameters, bf16.
MIXTRAL = ModelArchitecture(
    layers=(FullAttention(8, 128),) * 32,
    num_attention_heads=32,
    hidden_size=4096,
    num_parameters=46_702_792_704,
    moe=MixtureOfExperts(num_experts=8, experts_per_token=2, moe_intermediate_size=14336),
)

# Llama-3.1-70B (catalog llama-3.1-70b): 80 layers, 8 KV heads x 128, 64 heads, hidden 8192,
# 70,553,706,496 parameters, bf16.
LLAMA_70B = ModelArchitecture(
    layers=(FullAttention(8, 128),) * 80,
    num_attention_heads=64,
    hidden_size=8192,
    num_parameters=70_553_706_496,
)


def test_llama_8b_at_batch_1_reads_its_weights_once_per_token() -> None:
    # 16,060,522,496 B of bf16 weights + one token of KV: 32 layers x 8 KV heads x (128 + 128)
    # x 2 B = 131,072 B; / 3.35e12 B/s = 4.794 ms, the lower bound on a token.
    cost = decode_cost(LLAMA_31_8B, H100, batch=1, context_tokens=1)
    assert cost.weight_bytes == 16_060_522_496
    assert cost.kv_bytes == 131_072
    t = step_time(cost, IDEAL)
    assert t.memory_ms == pytest.approx(16_060_653_568 / 3.35e12 * 1e3)
    assert t.memory_ms == pytest.approx(4.794, abs=5e-4)
    # FLOPs: 2 x 8,030,261,248 parameters (16,060,522,496 B / 2) + attention over 1 token,
    # 32 layers x 2 x 32 heads x (128 + 128) = 524,288; / 989e12 = 0.0162 ms.
    assert cost.flops == 16_060_522_496 + 524_288
    assert t.compute_ms == pytest.approx(16_061_046_784 / 989e12 * 1e3)
    assert t.ms == pytest.approx(t.memory_ms)
    assert t.bound is PerformanceBound.BANDWIDTH


def test_kv_read_grows_with_batch_and_context() -> None:
    # 64 sequences at 4096 tokens: 64 x 4096 x 131,072 B = 34,359,738,368 B of KV per step.
    cost = decode_cost(LLAMA_31_8B, H100, batch=64, context_tokens=4096)
    assert cost.kv_bytes == 64 * 4096 * 131_072 == 34_359_738_368
    assert cost.weight_bytes == 16_060_522_496


def test_a_sliding_layer_reads_its_window_a_chunked_layer_its_chunk() -> None:
    # 4 KV heads x (64 + 64) x 2 B = 1,024 B per token per layer. At 10,000 tokens a full layer
    # reads 10,000 tokens, a window of 4,096 reads 4,096, a chunk of 8,192 reads 8,192.
    full = FullAttention(4, 64)
    sliding = SlidingWindowAttention(4, 64, sliding_window=4096)
    chunked = ChunkedLocalAttention(4, 64, attention_chunk_size=8192)
    model = ModelArchitecture(
        layers=(full, sliding, chunked), num_attention_heads=8, num_parameters=10**9
    )
    cost = decode_cost(model, H100, batch=2, context_tokens=10_000)
    assert cost.kv_bytes == 2 * 1024 * (10_000 + 4096 + 8192)


def test_mla_reads_one_latent_per_token_on_every_tp_rank() -> None:
    # DeepSeek-V3's latent: (512 + 64) x 2 B = 1,152 B per token per layer, the same on each of
    # 8 TP ranks (vLLM MLAAttentionSpec); 61 layers x 1,000 tokens x 1,152 B = 70,272,000 B.
    mla = MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64)
    model = ModelArchitecture(
        layers=(mla,) * 61, num_attention_heads=128, hidden_size=7168, num_parameters=10**9
    )
    cost = decode_cost(model, H100, batch=1, context_tokens=1000, tensor_parallel_size=8)
    assert cost.kv_bytes == 61 * 1000 * 1152 == 70_272_000


def test_a_linear_attention_layer_reads_and_writes_its_state_whatever_the_context() -> None:
    # Qwen3-Next's gated delta net: conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 24,576 elements,
    # recurrent 32 x 128 x 128 = 524,288; bf16: 1,097,728 B per sequence, read and written back
    # each step: 2,195,456 B, at 100 tokens as at 100,000.
    model = ModelArchitecture(
        layers=(QWEN3_NEXT_GDN,), num_attention_heads=16, num_parameters=10**9
    )
    short = decode_cost(model, H100, batch=1, context_tokens=100)
    long = decode_cost(model, H100, batch=1, context_tokens=100_000)
    assert short.kv_bytes == long.kv_bytes == 2 * (24_576 + 524_288) * 2 == 2_195_456


def test_expected_experts_touched() -> None:
    # E x (1 - (1 - k/E)^B). Mixtral, 8 experts, 2 per token: 1 token touches 2; 2 tokens
    # 8 x (1 - 0.75^2) = 3.5; 16 tokens 8 x (1 - 0.75^16) = 8 x (1 - 0.0100226) = 7.91982.
    assert expected_experts(8, 2, 1) == pytest.approx(2.0)
    assert expected_experts(8, 2, 2) == pytest.approx(3.5)
    assert expected_experts(8, 2, 16) == pytest.approx(7.91982, abs=1e-5)
    # DeepSeek-V3, 256 experts, 8 per token, 32 tokens: 256 x (1 - (31/32)^32)
    # = 256 x (1 - 0.362066) = 163.31.
    assert expected_experts(256, 8, 32) == pytest.approx(163.31, abs=0.01)


def test_mixtral_parameters_split_into_dense_and_experts() -> None:
    # An expert: 3 x 4096 x 14336 = 176,160,768; all experts: 32 x 8 x that = 45,097,156,608;
    # dense 46,702,792,704 - 45,097,156,608 = 1,605,636,096; active with 2 experts per layer:
    # 1,605,636,096 + 32 x 2 x 176,160,768 = 12,879,925,248 (the Mixtral paper's "13B active",
    # arXiv:2401.04088).
    split = parameter_split(MIXTRAL)
    assert split.per_expert == 176_160_768
    assert split.dense == 1_605_636_096
    assert split.active == 12_879_925_248


def test_a_model_with_dense_layers_keeps_their_parameters_out_of_the_experts() -> None:
    # DeepSeek-V3 (catalog deepseek-v3: 671,026,404,352 parameters, hidden 7168, 256 experts of
    # 2048, 8 per token; its config's first_k_dense_replace 3 leaves 58 of 61 layers MoE). An
    # expert: 3 x 7168 x 2048 = 44,040,192; routed: 58 x 256 x that = 653,908,770,816; dense
    # (attention, embeddings, 3 dense MLPs, shared experts) 671,026,404,352 - 653,908,770,816
    # = 17,117,633,536. Taking all 61 layers as MoE would price 687.7 B of experts, more than
    # the whole model, and leave no dense weights to read.
    moe = MixtureOfExperts(256, 8, 2048, shared_expert_intermediate_size=2048, num_moe_layers=58)
    mla = MultiHeadLatentAttention(kv_lora_rank=512, qk_rope_head_dim=64)
    v3 = ModelArchitecture(
        layers=(mla,) * 61,
        num_attention_heads=128,
        hidden_size=7168,
        num_parameters=671_026_404_352,
        moe=moe,
    )
    split = parameter_split(v3)
    assert split.moe_layers == 58
    assert split.dense == 671_026_404_352 - 58 * 256 * 44_040_192 == 17_117_633_536
    # Without num_moe_layers: as many MoE layers as the parameters hold, 671,026,404,352 //
    # (256 x 44,040,192 = 11,274,289,152) = 59 (59.5), below the 61 layers.
    guessed = parameter_split(replace(v3, moe=replace(moe, num_moe_layers=None)))
    assert guessed.moe_layers == 59
    assert guessed.dense == 671_026_404_352 - 59 * 11_274_289_152


def test_mixtral_decode_reads_only_the_experts_its_batch_touches() -> None:
    # Batch 1: dense + 32 layers x 2 experts = 12,879,925,248 parameters x 2 B = 25,759,850,496 B.
    one = decode_cost(MIXTRAL, H100, batch=1, context_tokens=1)
    assert one.weight_bytes == 25_759_850_496
    # Batch 2: 1,605,636,096 + 32 x 3.5 x 176,160,768 = 21,335,642,112 parameters, 2 B each.
    two = decode_cost(MIXTRAL, H100, batch=2, context_tokens=1)
    assert two.weight_bytes == 42_671_284_224
    # FLOPs still follow the active parameters: 2 x 12,879,925,248 per token.
    assert one.flops == 2 * 12_879_925_248 + 32 * 2 * 32 * 256


def test_each_layer_of_a_pass_adds_its_fixed_cost() -> None:
    # Efficiencies chosen here: 0.5 ms a step and 20 us a layer. Llama-3.1-70B's 80 layers:
    # 0.5 + 80 x 0.020 = 2.1 ms; Llama-3.1-8B's 32: 0.5 + 32 x 0.020 = 1.14 ms, in a decode
    # step as in a prefill.
    fixed = Efficiency(1.0, 1.0, 0.5, allreduce_latency_us=0.0, overlap=1.0, layer_overhead_us=20)
    big = step_time(decode_cost(LLAMA_70B, H100, batch=1, context_tokens=1), fixed)
    small = step_time(prefill_cost(LLAMA_31_8B, H100, 100), fixed)
    assert big.cost.layers == 80
    assert big.overhead_ms == pytest.approx(2.1)
    assert small.overhead_ms == pytest.approx(1.14)
    assert big.ms == pytest.approx(big.memory_ms + big.overhead_ms)


def test_tensor_parallel_all_reduces() -> None:
    # Llama-3.1-70B, TP 4, batch 64: 80 layers x 2 = 160 all-reduces of 64 x 8192 x 2 B =
    # 1,048,576 B; ring: 2 x 3/4 x 1,048,576 B / 450e9 B/s = 3.4953 us each, 0.55924 ms for
    # 160; with 10 us latency each, + 1.6 ms = 2.15924 ms.
    cost = decode_cost(LLAMA_70B, H100, batch=64, context_tokens=1, tensor_parallel_size=4)
    assert cost.allreduces == 160
    assert cost.allreduce_bytes == 1_048_576
    assert cost.link_seconds == pytest.approx(160 * 1.5 * 1_048_576 / 450e9)
    latency = Efficiency(1.0, 1.0, 0.0, allreduce_latency_us=10.0, overlap=1.0)
    assert step_time(cost, latency).interconnect_ms == pytest.approx(2.15924, abs=1e-5)
    # Weights shard 4 ways: 70,553,706,496 x 2 B / 4 = 35,276,853,248 B per GPU.
    assert cost.weight_bytes == 35_276_853_248


def test_pcie_tensor_parallelism_at_a_large_batch_is_interconnect_bound() -> None:
    # TP 8 over PCIe (32 GB/s), 1024 sequences: 160 all-reduces of 1024 x 8192 x 2 B =
    # 16,777,216 B, 2 x 7/8 x 16,777,216 / 32e9 = 0.91750 ms each: 146.8 ms a step, against
    # 17.6 GB of weights per GPU / 0.864 TB/s = 20.4 ms plus the KV.
    cost = decode_cost(LLAMA_70B, L40S, batch=1024, context_tokens=1, tensor_parallel_size=8)
    t = step_time(cost, IDEAL)
    assert t.interconnect_ms == pytest.approx(160 * 1.75 * 16_777_216 / 32e9 * 1e3)
    assert t.bound is PerformanceBound.INTERCONNECT


def test_prefill_counts_the_quadratic_attention() -> None:
    # Llama-3.1-8B, one prompt of 1,000 tokens: 2 x 8,030,261,248 x 1,000 =
    # 16,060,522,496,000 FLOPs in the matmuls; causal attention scores 1000 x 1001 / 2 =
    # 500,500 pairs per layer at 2 x 32 heads x (128 + 128) = 16,384 FLOPs each, x 32 layers
    # = 262,406,144,000; total 16,322,928,640,000 / 989e12 = 16.5045 ms, compute-bound
    # (the weights alone take 4.794 ms to read).
    cost = prefill_cost(LLAMA_31_8B, H100, 1000)
    assert cost.flops == 16_322_928_640_000
    t = step_time(cost, IDEAL)
    assert t.compute_ms == pytest.approx(16.5045, abs=1e-4)
    assert t.bound is PerformanceBound.COMPUTE


def test_fp8_weights_run_the_linear_layers_on_fp8_and_the_attention_on_bf16() -> None:
    # The same 1,000-token prefill with FP8 weights: the matmuls' 16,060,522,496,000 FLOPs at
    # the FP8 peak, 1978e12: 8.11958 ms; the attention's 262,406,144,000 at the BF16 peak,
    # 989e12 (its queries, keys and values are not FP8): 0.26532 ms; 8.38490 ms in all.
    cost = prefill_cost(LLAMA_31_8B, H100, 1000, weight_format=WeightFormat.FP8)
    assert cost.attention_flops == 262_406_144_000
    assert step_time(cost, IDEAL).compute_ms == pytest.approx(8.38490, abs=1e-5)
    # At half the FP8 peak (compute_low_precision 0.5, chosen here) the matmuls take twice
    # as long, 16.23915 ms, the attention still 0.26532 ms at the BF16 efficiency (1): 16.50448.
    half = Efficiency(1.0, 1.0, 0.0, 0.0, overlap=1.0, compute_low_precision=0.5)
    assert step_time(cost, half).compute_ms == pytest.approx(16.50448, abs=1e-5)


def test_fp4_weights_run_on_fp4_tensor_cores_where_the_gpu_has_them() -> None:
    # B200 (catalog b200): 2250 BF16, 4500 FP8, 9000 FP4 dense TFLOPS. NVFP4 linear layers run
    # at 9000 on it; on an H100 (no FP4 figure) the same weights are dequantised to BF16, 989.
    b200 = GpuPerformance(7.7, 2250, 4500, 900, "NVIDIA B200", dense_fp4_tflops=9000)
    on_b200 = prefill_cost(LLAMA_31_8B, b200, 1000, weight_format=WeightFormat.NVFP4)
    on_h100 = prefill_cost(LLAMA_31_8B, H100, 1000, weight_format=WeightFormat.NVFP4)
    assert on_b200.peak_flops_per_s == 9000e12
    assert on_b200.low_precision
    assert on_h100.peak_flops_per_s == 989e12
    assert not on_h100.low_precision


def test_causal_pairs_by_layer_kind() -> None:
    # 10 tokens: full 10 x 11 / 2 = 55; window 4: 1 + 2 + 3 + 4 + 6 x 4 = 34;
    # chunks of 4 (4, 4, 2 tokens): 10 + 10 + 3 = 23.
    assert causal_pairs(FullAttention(1, 8), 10) == 55
    assert causal_pairs(SlidingWindowAttention(1, 8, sliding_window=4), 10) == 34
    assert causal_pairs(ChunkedLocalAttention(1, 8, attention_chunk_size=4), 10) == 23


def test_fp8_weights_use_the_fp8_peak_where_the_gpu_has_one() -> None:
    # H100: 1978 TFLOPS for FP8, 989 for AWQ (dequantized to 16-bit); A100 has no FP8 units.
    fp8, awq = WeightFormat.FP8, WeightFormat.AWQ
    assert prefill_cost(LLAMA_31_8B, H100, 8, weight_format=fp8).peak_flops_per_s == 1978e12
    assert prefill_cost(LLAMA_31_8B, H100, 8, weight_format=awq).peak_flops_per_s == 989e12
    assert prefill_cost(LLAMA_31_8B, A100, 8, weight_format=fp8).peak_flops_per_s == 312e12
    # FP8 weights are 1 B per parameter: 8,030,261,248 B.
    assert prefill_cost(LLAMA_31_8B, H100, 8, weight_format=fp8).weight_bytes == 8_030_261_248


def test_overlap_chooses_between_the_roofline_max_and_the_sum() -> None:
    # Llama-3.1-8B at batch 1: memory 4.79422 ms, compute 0.016240 ms. Overlap 1: 4.79422;
    # overlap 0: 4.81046; with a 2 ms overhead on top: 6.81046.
    cost = decode_cost(LLAMA_31_8B, H100, batch=1, context_tokens=1)
    summed = Efficiency(1.0, 1.0, step_overhead_ms=2.0, allreduce_latency_us=0.0, overlap=0.0)
    memory = 16_060_653_568 / 3.35e12 * 1e3
    compute = 16_061_046_784 / 989e12 * 1e3
    assert step_time(cost, IDEAL).ms == pytest.approx(memory)
    assert step_time(cost, summed).ms == pytest.approx(memory + compute + 2.0)
    assert step_time(cost, summed).ms == pytest.approx(6.81046, abs=1e-5)


def test_estimate_carries_the_answer_fields() -> None:
    # Batch 32 at 2,048 tokens, efficiencies 0.8 / 0.5, 1 ms overhead, overlap 0:
    # bytes 16,060,522,496 + 32 x 2048 x 131,072 = 24,650,457,088; / (3.35e12 x 0.8) = 9.19793 ms
    # FLOPs 32 x (16,060,522,496 + 2048 x 16,384 x 32) = 548,296,458,240; / (989e12 x 0.5)
    # = 1.10879 ms; step 9.19793 + 1.10879 + 1 = 11.30672 ms; 32 x 1000 / 11.30672 =
    # 2,830.17 tokens/s per replica, 88.44 per user.
    eff = Efficiency(0.8, 0.5, step_overhead_ms=1.0, allreduce_latency_us=0.0, overlap=0.0)
    e = estimate_performance(
        LLAMA_31_8B,
        H100,
        batch=32,
        context_tokens=2048,
        prompt_tokens=1000,
        peak_batch=64,
        efficiency=eff,
        error_band=0.3,
    )
    assert e.decode.cost.flops == 548_296_458_240
    assert e.decode_ms_per_token == pytest.approx(11.30672, abs=1e-5)
    assert e.output_tokens_per_second == pytest.approx(2830.17, abs=0.01)
    assert e.output_tokens_per_second_per_user == pytest.approx(88.44, abs=0.01)
    assert e.performance_bound is PerformanceBound.BANDWIDTH
    assert e.decode_ms_per_token_at_peak is not None
    assert e.decode_ms_per_token_at_peak > e.decode_ms_per_token
    # Prefill 16,322,928,640,000 FLOPs / (989e12 x 0.5) = 33.0090 ms + 16,060,522,496 B /
    # (3.35e12 x 0.8) = 5.99273 ms + 1 ms = 40.0017 ms; no load given: TTFT = prefill.
    assert e.prefill_ms == pytest.approx(40.0017, abs=1e-4)
    assert e.ttft_ms == e.prefill_ms
    assert e.error_band == 0.3
    assert any("error band: +/-30%" in line for line in e.steps)


def test_ttft_waits_in_an_m_d_1_queue() -> None:
    # A 50 ms prefill with 10 prompts/s: rho = 0.5, wait 0.5 x 50 / (2 x 0.5) = 25 ms.
    assert queue_wait_ms(50.0, 10.0) == pytest.approx(25.0)
    assert queue_wait_ms(50.0, 20.0) is None  # rho = 1: the queue grows without bound
    e = estimate_performance(
        LLAMA_31_8B, H100, batch=1, context_tokens=1, prompt_tokens=1000, arrivals_per_second=1e6
    )
    assert e.ttft_ms is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"batch": 0}, "batch"),
        ({"context_tokens": 0}, "context_tokens"),
        ({"prompt_tokens": 0}, "prompt_tokens"),
        ({"arrivals_per_second": -1.0}, "arrivals_per_second"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict[str, int | float], field: str) -> None:
    args: dict[str, int | float] = {"batch": 1, "context_tokens": 1, "prompt_tokens": 1}
    args.update(kwargs)
    with pytest.raises(SizingError) as caught:
        estimate_performance(LLAMA_31_8B, H100, **args)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_tensor_parallelism_needs_the_link() -> None:
    no_link = GpuPerformance(3.35, 989, 1978, None)
    with pytest.raises(SizingError) as caught:
        decode_cost(LLAMA_70B, no_link, batch=1, context_tokens=1, tensor_parallel_size=2)
    assert caught.value.field == "gpu.interconnect_gb_s"


def test_gpu_figures_must_be_positive() -> None:
    with pytest.raises(SizingError) as caught:
        GpuPerformance(0.0, 989)
    assert caught.value.field == "gpu.memory_bandwidth_tb_s"
