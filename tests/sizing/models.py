"""The GPUs and model architectures the sizing tests share, each with its source once.

GPU totals are memory as the CUDA runtime reports it, the figure vLLM and SGLang size their
pools from (docs/catalog-sources.md#gpu-memory-as-torch-reports-it); `gib_to_bytes` turns the
two-decimal GiB a log prints into bytes. Model geometries are the published config.json values
as ../shared/catalog/models.json (next to the repository) records them.
"""

from __future__ import annotations

from dataclasses import replace

from service.sizing.capacity import Gpu
from service.sizing.model.architecture import (
    FullAttention,
    GatedDeltaNet,
    Mamba2,
    ModelArchitecture,
    NoCache,
    SlidingWindowAttention,
)
from service.sizing.units import GiB, gib_to_bytes

# --- GPUs, total memory as torch reports it -------------------------------------------------

# 79.21 GiB = 85,051,089,879 B: jobs labelled 8xH100 HBM3 (nvidia-smi shows 79.65 GiB).
H100_TORCH = Gpu(gib_to_bytes(79.21), "NVIDIA H100 80GB HBM3")
H200_TORCH = Gpu(gib_to_bytes(139.80), "NVIDIA H200")
B200_TORCH = Gpu(gib_to_bytes(178.36), "NVIDIA B200")
# vllm#10533: "total_gpu_memory=79.15GiB" on one 80 GB A100.
A100_80GB_TORCH = Gpu(gib_to_bytes(79.15), "NVIDIA A100-SXM4-80GB")
L40S_TORCH = Gpu(gib_to_bytes(44.39), "NVIDIA L40S")

# An H100 taken as a round 80 GiB = 85,899,345,920 B, for tests that hand the engine its pool
# (kv_pool_bytes) so that the total never reaches the numbers under test; not a real reading.
H100_80_GIB = Gpu(80 * GiB, "NVIDIA H100 80GB HBM3")

# --- models ---------------------------------------------------------------------------------

# Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 128, hidden 4096, intermediate 14336,
# vocab 128256, bf16; checkpoint 16,060,522,496 B (docs/catalog-sources.md#checkpoint-sizes).
LLAMA_LAYER = FullAttention(num_kv_heads=8, head_dim=128)
LLAMA_31_8B = ModelArchitecture(
    layers=(LLAMA_LAYER,) * 32,
    num_attention_heads=32,
    hidden_size=4096,
    intermediate_size=14336,
    vocab_size=128_256,
    weight_bytes=16_060_522_496,
)

# gpt-oss-120b: 36 layers alternating sliding (window 128) / full, 8 KV heads, head_dim 64.
GPT_OSS_SLIDING = SlidingWindowAttention(num_kv_heads=8, head_dim=64, sliding_window=128)
GPT_OSS_FULL = FullAttention(num_kv_heads=8, head_dim=64)
GPT_OSS_120B = ModelArchitecture(
    layers=(GPT_OSS_SLIDING, GPT_OSS_FULL) * 18, num_attention_heads=64
)
# The same layers with a round 60 GiB of weights (the checkpoint is 65,248,815,744 B), for
# tests that give the engine its pool.
GPT_OSS_120B_60_GIB = replace(GPT_OSS_120B, weight_bytes=60 * GiB)

# Gemma-3-27B: 62 layers, 5 sliding (window 1024) then 1 full; 16 KV heads, head_dim 128.
GEMMA3_SLIDING = SlidingWindowAttention(num_kv_heads=16, head_dim=128, sliding_window=1024)
GEMMA3_FULL = FullAttention(num_kv_heads=16, head_dim=128)
GEMMA_3_27B = ModelArchitecture(
    layers=((GEMMA3_SLIDING,) * 5 + (GEMMA3_FULL,)) * 10 + (GEMMA3_SLIDING,) * 2,
    num_attention_heads=32,
)

# Qwen3-Next's gated delta net: 16 key heads, 32 value heads, 128 x 128, conv kernel 4.
QWEN3_NEXT_GDN = GatedDeltaNet(
    num_key_heads=16, num_value_heads=32, key_head_dim=128, value_head_dim=128, conv_kernel=4
)
# Qwen3-Next-80B: 48 layers, 3 gated delta net then 1 full attention (2 KV heads, head_dim 256).
QWEN3_NEXT_80B = ModelArchitecture(
    layers=((QWEN3_NEXT_GDN,) * 3 + (FullAttention(2, 256),)) * 12, num_attention_heads=16
)
# Qwen3.5-35B-A3B: the same layer kinds over 40 layers (30 gated delta net + 10 full), with a
# round 60 GiB of weights for tests that give the engine its pool.
QWEN35_35B_A3B_60_GIB = ModelArchitecture(
    layers=(QWEN3_NEXT_GDN, QWEN3_NEXT_GDN, QWEN3_NEXT_GDN, FullAttention(2, 256)) * 10,
    num_attention_heads=16,
    weight_bytes=60 * GiB,
)

# Qwen3.5-27B: 64 layers, 3 gated delta net (48 value heads) then 1 full (4 KV heads, 256).
QWEN35_GDN = GatedDeltaNet(
    num_key_heads=16, num_value_heads=48, key_head_dim=128, value_head_dim=128, conv_kernel=4
)
QWEN35_27B = ModelArchitecture(
    layers=((QWEN35_GDN,) * 3 + (FullAttention(4, 256),)) * 16, num_attention_heads=24
)

# Nemotron-H-56B: Mamba2 (256 heads x 64, state 256, 8 groups, conv 4) and attention
# (8 KV heads, head_dim 128); 54 Mamba2 + 10 attention + 54 MLP blocks. The order below is
# not the checkpoint's pattern; the block size does not depend on it.
NEMOTRON_MAMBA = Mamba2(num_heads=256, head_dim=64, state_size=256, n_groups=8, conv_kernel=4)
NEMOTRON_H_56B = ModelArchitecture(
    layers=(NEMOTRON_MAMBA, NoCache()) * 54 + (FullAttention(8, 128),) * 10,
    num_attention_heads=64,
)
