"""vLLM's budget terms on their own: what the engine loads, the profile run's buffers, non-torch
memory and the CUDA-graph estimate (docs/engines/vllm.md#weights-as-loaded,
docs/engines/vllm.md#profile-run, docs/engines/vllm.md#non-torch-memory,
docs/engines/vllm.md#cuda-graph-memory). Figures worked by hand beside each number; the logs
named are in service/calibration/engine_logs.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.sizing import architecture_from_hf_config
from service.sizing.capacity import compute_capacity
from service.sizing.engines import calibration as cal
from service.sizing.engines.activation import moe_workspace_bytes, triton_sampler_bytes
from service.sizing.engines.common import Gpu, Workload
from service.sizing.engines.vllm import (
    model_memory_usage,
    mxfp4_moe_bytes,
    parse_vllm_version,
    rotary_cos_sin_cache_bytes,
    vllm_budget,
    vllm_cudagraph_estimate,
    vllm_non_torch_bytes,
    vllm_release,
    vocab_padding_bytes,
)
from service.sizing.model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    MixtureOfExperts,
    ModelArchitecture,
)
from service.sizing.units import GiB, MiB

CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
FULL = FullAttention(num_kv_heads=8, head_dim=128)


def config(name: str) -> ModelArchitecture:
    return architecture_from_hf_config(json.loads((CONFIGS / f"{name}.json").read_text("utf-8")))


def test_llama_3_1_8b_loads_its_checkpoint_and_a_32_mib_rotary_cache() -> None:
    llama = config("meta-llama--Meta-Llama-3.1-8B")
    # RotaryEmbedding.__init__: cos_sin_cache of max_position_embeddings 131,072 x head_dim 128
    # in bf16 = 33,554,432 B
    assert rotary_cos_sin_cache_bytes(llama) == 131_072 * 128 * 2 == 33_554_432
    # checkpoint 16,060,522,496 B (model.safetensors.index.json total_size) + 33,554,432 B =
    # 16,094,076,928 B = 14.98885 GiB: vllm#10517's "Loading model weights took 14.9888 GB"
    loaded = model_memory_usage(llama, 16_060_522_496, 1)
    assert loaded == 16_094_076_928
    assert round(loaded / GiB, 4) == 14.9888


def test_no_rotary_cache_without_a_context_length() -> None:
    bare = ModelArchitecture(layers=(FULL,) * 2, num_attention_heads=8)
    assert rotary_cos_sin_cache_bytes(bare) == 0


def test_gpt_oss_20b_mxfp4_experts_as_vllm_holds_them() -> None:
    gpt_oss = config("openai--gpt-oss-20b")
    # Per expert, hidden 2,880, against the checkpoint's 13,236,480 B (5,760 x 2,880 +
    # 2,880 x 2,880 values at 17/32 B, 8,640 bf16 biases) over TP. vLLM 0.19.0, Hopper Triton
    # backend (engines/vllm.py mxfp4_moe_bytes names the functions): w13 values swizzled to
    # 64|1,440 x 64|2I B, w2 values to 64|I/2 x 2,880 B, scales swizzled (rows to 256s) beside
    # the loaded ones, biases in fp32.
    # TP2, I 1,440 -> 1,472: tests/sizing/test_vllm_loaded_weights.py works it per layer,
    # 236,285,952 - 211,783,680 = 24,502,272 B, x 24 layers
    assert mxfp4_moe_bytes(gpt_oss, 2) == 24 * 24_502_272 == 588_054_528
    # TP1, I 2,880 (45 x 64, not padded): values 1,472 x 5,760 + 1,472 x 2,880 = 12,718,080;
    # scales swizzled 5,888 x 90 + 3,072 x 90 = 806,400, loaded 5,760 x 90 + 2,880 x 90 =
    # 777,600; biases 8,640 x 4 = 34,560: 14,336,640 - 13,236,480 = 1,100,160 B x 768
    assert mxfp4_moe_bytes(gpt_oss, 1) == 1_100_160 * 768 == 844_922_880
    # TP4, I 720 -> 768: values 1,472 x 1,536 + 384 x 2,880 = 3,366,912; scales swizzled
    # 1,536 x 90 + 3,072 x 24 = 211,968, loaded 1,536 x 90 + 2,880 x 24 = 207,360; biases
    # (1,536 + 2,880) x 4 = 17,664: 3,803,904 - 13,236,480 / 4 = 494,784 B x 768
    assert mxfp4_moe_bytes(gpt_oss, 4) == 494_784 * 768 == 379_994_112
    # no MXFP4 experts, nothing added
    assert mxfp4_moe_bytes(config("Qwen--Qwen3-30B-A3B"), 1) == 0


def test_a_vocabulary_is_padded_to_a_multiple_of_64() -> None:
    # 32,001 -> 32,064: 63 padding rows of 4,096 bf16 values, for the embedding and the
    # lm_head, over TP2: 2 x 63 x 4,096 x 2 / 2 = 516,096 B
    odd = ModelArchitecture(
        layers=(FULL,), num_attention_heads=32, hidden_size=4096, vocab_size=32_001
    )
    assert vocab_padding_bytes(odd, 2) == 516_096


def test_the_moe_workspace_kept_between_passes() -> None:
    # Qwen3-30B-A3B (hidden 2,048, 8 of 128 experts, moe_intermediate 768) over 8,192 tokens:
    # 8,192 x 8 x (max(768, 2,048) + max(1,536, 2,048)) x 2 B = 536,870,912 B = 0.5 GiB;
    # llm-d-planner's Qwen3-30B-A3B log peaks 0.54 GiB above its dense-model sampler figure.
    qwen = config("Qwen--Qwen3-30B-A3B")
    assert qwen.moe == MixtureOfExperts(128, 8, 768, 0)
    assert moe_workspace_bytes(qwen, 1, 8192) == 536_870_912


def test_the_0_17_sampler_at_one_row_per_sm() -> None:
    # 100 rows of a 1,000-entry vocabulary with bf16 logits: 100 x 1,000 x (2 + 3 x 4) B =
    # 1,400,000 B, and min(100, 132) x 1,000 x 4 B = 400,000 B of Triton scratch
    assert triton_sampler_bytes(1000, 100, 2, 132) == 1_800_000
    # 1,024 rows: the scratch stays at 132 rows
    assert triton_sampler_bytes(1000, 1024, 2, 132) == 1024 * 14_000 + 132 * 4_000


@pytest.mark.parametrize(
    ("version", "tp", "pp", "expected"),
    [
        # V0 before 0.6.5 and V1 before 0.9.2 charge everything, the CUDA context included
        ("0.6.4", 1, 1, cal.VLLM_NON_TORCH_WITH_CONTEXT),
        ("0.8.5", 2, 1, cal.VLLM_NON_TORCH_WITH_CONTEXT),
        # V0 per instance: vllm#13061's 0.25 GiB, at any TP
        ("0.7.3", 2, 1, cal.VLLM_NON_TORCH_INCREASE),
        # V1 per instance: 0.25 GiB at TP1, 0.07 GiB with a pipeline, 2.07 GiB at TP2 and
        # 2.07 + 2 x 0.05 = 2.17 GiB at TP4 (llm-d-planner 0.19 logs)
        ("0.19.0", 1, 1, cal.VLLM_NON_TORCH_INCREASE),
        ("0.19.0", 1, 2, cal.VLLM_NON_TORCH_PIPELINE),
        ("0.19.0", 2, 1, cal.VLLM_NON_TORCH_TP2),
        ("0.33.0", 4, 1, cal.VLLM_NON_TORCH_TP2 + 2 * cal.VLLM_NON_TORCH_PER_TP_RANK),
    ],
)
def test_non_torch_memory_by_release_and_layout(
    version: str, tp: int, pp: int, expected: int
) -> None:
    assert vllm_non_torch_bytes(vllm_release(parse_vllm_version(version)), tp, pp) == expected


def test_the_tp4_non_torch_is_the_logged_2_17_gib() -> None:
    # llm-d-planner Llama-4 Scout TP4: "non-torch forward increase memory: 2.17GiB"
    tp4 = vllm_non_torch_bytes(vllm_release(parse_vllm_version("0.19.0")), 4, 1)
    assert round(tp4 / GiB, 2) == 2.17


def test_the_cuda_graph_estimate_counts_graphs_and_layers() -> None:
    llama = config("meta-llama--Meta-Llama-3.1-8B")
    at = vllm_release(parse_vllm_version("0.19.0"))
    # max_num_seqs 1,024: PIECEWISE sizes up to min(2 x 1,024, 512) = 512: 1, 2, 4, 8 ... 248
    # (31), 256 ... 512 (17) = 51; FULL decode sizes up to min(1,024, 512) = 512: 51 more.
    # 102 graphs x 32 layers x 276,300 B = 901,843,200 B = 0.84 GiB, the 0.84 GiB the
    # llm-d-planner Llama-3.1-8B TP1 log estimates
    estimate = vllm_cudagraph_estimate(
        llama,
        at,
        pipeline_parallel_size=1,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        enforce_eager=False,
    )
    assert cal.VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER == 276_300
    assert estimate == 102 * 32 * 276_300 == 901_843_200
    assert round(estimate / GiB, 2) == 0.84
    # --enforce-eager captures nothing; 0.17 did not profile graphs at all
    none = {"pipeline_parallel_size": 1, "max_num_seqs": 1024, "max_num_batched_tokens": 8192}
    assert vllm_cudagraph_estimate(llama, at, **none, enforce_eager=True) == 0
    old = vllm_release(parse_vllm_version("0.17.0"))
    assert vllm_cudagraph_estimate(llama, old, **none, enforce_eager=False) == 0


def test_max_num_seqs_32_captures_11_piecewise_and_7_full_graphs() -> None:
    # The DGX Spark gemma-4 log (vLLM 0.25.1, max_num_seqs 32): "PIECEWISE=11 (largest=64),
    # FULL=7 (largest=32)": 1, 2, 4, 8 ... 64 and 1, 2, 4, 8, 16, 24, 32.
    one_layer = ModelArchitecture(layers=(FULL,), num_attention_heads=8)
    estimate = vllm_cudagraph_estimate(
        one_layer,
        vllm_release(parse_vllm_version("0.25.1")),
        pipeline_parallel_size=1,
        max_num_seqs=32,
        max_num_batched_tokens=2496,
        enforce_eager=False,
    )
    assert estimate == (11 + 7) * cal.VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER


def test_chunked_local_attention_captures_piecewise_graphs_only() -> None:
    # llm-d-planner Llama-4 Scout: "Profiling CUDA graph memory: PIECEWISE=51 (largest=512)"
    chunked = ChunkedLocalAttention(num_kv_heads=8, head_dim=128, attention_chunk_size=8192)
    scout_like = ModelArchitecture(layers=(chunked, FULL), num_attention_heads=40)
    estimate = vllm_cudagraph_estimate(
        scout_like,
        vllm_release(parse_vllm_version("0.19.0")),
        pipeline_parallel_size=1,
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        enforce_eager=False,
    )
    assert estimate == 51 * 2 * cal.VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER


def test_the_estimate_is_subtracted_from_0_20_only() -> None:
    # envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: default "0" in the 0.19.0 wheel (the
    # estimate is printed, gpu_worker.py "In v0.19, CUDA graph memory profiling will be enabled
    # by default"), "1" in the 0.20.0 wheel
    assert cal.VLLM_CUDAGRAPH_PROFILED == (0, 18, 0)
    assert cal.VLLM_CUDAGRAPH_IN_BUDGET == (0, 20, 0)
    assert not vllm_release(parse_vllm_version("0.19.0")).cudagraph_in_budget
    assert vllm_release(parse_vllm_version("0.20.0")).cudagraph_in_budget
    assert MiB == 1 << 20


def test_a_layout_asked_at_another_max_model_len_reuses_its_budget() -> None:
    # The budget's inputs (the V1 scheduler's defaults included) do not read max_model_len, so
    # vllm_budget is memoised per layout (issue 18): the second length of the same layout is a
    # hit, the same budget. A MiniMax refusal inserted between the decorator and vllm_budget
    # once memoised the refusal instead (make bench's cold runs then failed on cache_clear).
    llama = config("meta-llama--Meta-Llama-3.1-8B")
    gpu = Gpu(memory_bytes=85_051_089_879, name="NVIDIA H100 80GB HBM3", slug="h100-sxm-80gb")
    vllm_budget.cache_clear()
    short = compute_capacity(llama, gpu, Workload(8192))
    hits = vllm_budget.cache_info().hits
    long = compute_capacity(llama, gpu, Workload(16384))
    assert vllm_budget.cache_info().hits == hits + 1
    assert long.budget == short.budget
