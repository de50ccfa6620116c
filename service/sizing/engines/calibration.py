"""Every constant the engine profiles use that is not a formula, with where it came from.

Version milestones are the first vLLM release with the behaviour. Memory constants were
measured from public engine logs (../shared/calibration/engine_logs.json) or read from source;
`make bench` prints the prediction error they give on each logged case.
"""

from __future__ import annotations

from typing import Final

from ..units import GiB, MiB

# --- vLLM version milestones -----------------------------------------------------------
VLLM_PER_INSTANCE_BUDGET: Final = (0, 6, 5)  # vllm PR #10511: context / other processes outside
VLLM_V1_DEFAULT: Final = (0, 8, 0)  # V1 engine on by default
VLLM_HYBRID_ALLOCATOR: Final = (0, 10, 0)  # hybrid KV-cache manager (sliding + full, Mamba)
VLLM_TOKENS_FROM_CONCURRENCY: Final = (0, 11, 1)  # "GPU KV cache size" = int(concurrency x M)
VLLM_UTILIZATION_092: Final = (0, 21, 0)  # CacheConfig default 0.9 -> 0.92
VLLM_CUDAGRAPH_PROFILING_DEFAULT: Final = (0, 21, 0)  # graph memory subtracted from the budget
DEFAULT_VLLM_VERSION: Final = "0.11.0"

VLLM_DEFAULT_UTILIZATION_OLD: Final = 0.9
VLLM_DEFAULT_UTILIZATION_NEW: Final = 0.92
VLLM_DEFAULT_BLOCK_SIZE: Final = 16  # CacheConfig.DEFAULT_BLOCK_SIZE on CUDA
VLLM_MLA_BLOCK_SIZE: Final = 64  # FlashMLA forces 64 ("Forcing kv cache block size to 64")
VLLM_MAMBA_BLOCK_ALIGNMENT: Final = 16  # attention block raised in multiples of this
VLLM_V0_CHUNKED_PREFILL_ABOVE: Final = 32 * 1024

# --- vLLM memory constants -------------------------------------------------------------
# vllm#10517 (RTX 3090, TP1, v0.6.4-era): "non_torch_memory=0.35GiB" with the CUDA context.
VLLM_NON_TORCH_WITH_CONTEXT: Final = round(0.35 * GiB)
# vllm#13061 (RTX 4090, TP2): the reporter's non-torch increase, 0.25 GiB.
VLLM_NON_TORCH_INCREASE: Final = round(0.25 * GiB)
# Extra NCCL / custom all-reduce buffers that appear during a TP>1 profile run (estimate).
VLLM_NCCL_BUFFERS: Final = 0
# V0 sampler with the profile's top_p=0.99, top_k=vocab-1: sorted logits, indices, softmax,
# cumsum, gathered copies. vllm#13061: rank 0 (sampler) had 1.22 GiB less KV than rank 1
# (8.69 GiB vs 81,536 tokens x 98,304 B = 7.46 GiB); with 256 rows x 152,064 vocab x 4 B
# (0.145 GiB) per copy and rank 1's 0.19 GiB forward peak, the sampler peak is 9.76 copies.
VLLM_V0_SAMPLER_FP32_COPIES: Final = 9.76
# V1 dummy sampler run (greedy + random, no top-k/top-p sort): logits, probabilities,
# exponential noise and the quotient.
VLLM_V1_SAMPLER_FP32_COPIES: Final = 4.0


def cudagraph_estimate(forward_bytes_per_token: int, max_num_seqs: int) -> int:
    """vLLM >= 0.21 profiles graph memory; kvplan estimates it when no measurement is given.

    Largest captured batch (min(max_num_seqs, 512) tokens, vLLM's default capture ceiling)
    for PIECEWISE and FULL graphs, plus a fixed pool overhead. Logs put it at 0.3-1.5 GiB
    (engine-memory.md 1.2); pass `cudagraph_memory_bytes` from "Estimated CUDA graph memory".
    """
    largest = min(max_num_seqs, 512)
    return 2 * largest * forward_bytes_per_token + 256 * MiB


# --- SGLang ---------------------------------------------------------------------------
# Memory gone before SGLang's first free-memory reading (CUDA context, NCCL init).
SGLANG_STARTUP_RESERVED: Final = round(0.75 * GiB)
# Memory taken while loading weights beyond the weights themselves.
SGLANG_LOAD_OVERHEAD: Final = 0

# --- TensorRT-LLM -----------------------------------------------------------------------
TRTLLM_DEFAULT_FREE_FRACTION: Final = 0.9  # KvCacheConfig.free_gpu_memory_fraction
TRTLLM_TOKENS_PER_BLOCK: Final = 32  # KvCacheConfig.tokens_per_block
TRTLLM_NON_TORCH: Final = round(0.5 * GiB)  # context + NCCL + graphs outside torch (estimate)
