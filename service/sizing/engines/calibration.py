"""Every constant the engine profiles use that is not a formula, with where it came from.

Version milestones are the first vLLM release whose code has the behaviour (read from the
released wheels, vllm 0.6.2 ... 0.33.0). Memory constants were measured from public engine
logs (service/calibration/engine_logs.json); `make bench` prints the error they give on each
logged case. What each milestone changes, and where in the engine it was read:
docs/engines/vllm.md#release-milestones, docs/engines/sglang.md#release-milestones and
docs/engines/trtllm.md#release-milestones.
"""

from __future__ import annotations

from typing import Final

from ..model.dtypes import FloatDtype
from ..units import GiB, MiB

Version = tuple[int, int, int]

# --- vLLM version milestones -------------------------------------------------------------
VLLM_PER_INSTANCE_BUDGET: Final[Version] = (0, 6, 5)  # V0: context no longer in non-torch
VLLM_V0_CHUNKED_MNBT_2048: Final[Version] = (0, 6, 5)  # V0 chunked-prefill budget 512 -> 2048
VLLM_V1_DEFAULT: Final[Version] = (0, 8, 0)  # V1 engine by default
VLLM_BATCH_BY_MEMORY: Final[Version] = (0, 8, 5)  # batch defaults by >= 70 GiB, not by name
VLLM_A100_SMALL_TIER: Final[Version] = (0, 9, 0)  # A100 kept in the small batch tier
VLLM_V1_PER_INSTANCE: Final[Version] = (0, 9, 2)  # V1 budget: weights + peak + non-torch growth
VLLM_HYBRID_ALLOCATOR: Final[Version] = (0, 9, 2)  # hybrid KV-cache manager, sliding groups
VLLM_MAMBA_IN_POOL: Final[Version] = (0, 10, 2)  # Mamba/GDN state pages in the KV pool
VLLM_GROUPS_MAX_125: Final[Version] = (0, 12, 0)  # G = max layers when max < 1.25 x min
VLLM_MAMBA_CACHE_MODES: Final[Version] = (0, 15, 0)  # 'align' keeps 2 state blocks per request
VLLM_GROUPS_MAX_15: Final[Version] = (0, 18, 0)  # ... 1.5 x min
VLLM_MLA_BACKEND_BLOCK: Final[Version] = (0, 18, 0)  # MLA block size = backend preference
VLLM_UTILIZATION_092: Final[Version] = (0, 20, 0)  # CacheConfig default 0.9 -> 0.92
VLLM_CUDAGRAPH_IN_BUDGET: Final[Version] = (0, 20, 0)  # graph estimate subtracted by default
VLLM_TOKENS_FROM_CONCURRENCY: Final[Version] = (0, 21, 0)  # tokens = int(concurrency x M)
VLLM_IN_FLIGHT_BATCHES: Final[Version] = (0, 26, 0)  # windows keep 2 x mnbt (async scheduling)
VLLM_HYBRID_PREFIX_CACHING: Final[Version] = (0, 28, 0)  # hybrids cache prefixes by default
VLLM_BATCH_160_GIB_TIER: Final[Version] = (0, 28, 0)  # >= 160 GiB: 16384 tokens for serve
VLLM_ONE_LOG_LINE: Final[Version] = (0, 28, 0)  # size and concurrency on one line
VLLM_CONCURRENCY_FROM_BLOCKS: Final[Version] = (0, 9, 1)  # concurrency = blocks / per request
VLLM_WHOLE_MODEL_GROUPS: Final[Version] = (0, 11, 0)  # groups on the whole model, layers[i::n]
VLLM_REQUEST_CEIL: Final[Version] = (0, 14, 0)  # requested = ceil(total x util), worker/utils.py
VLLM_PAD_ATTENTION_PAGES: Final[Version] = (0, 29, 0)  # non-dividing attention pages padded
VLLM_FIT_CHECK_RESERVES_NULL_BLOCK: Final[Version] = (0, 29, 0)  # fit check on blocks - 1
# --kv-cache-dtype auto takes the KV cache the checkpoint declares
# (docs/engines/vllm.md#kv-cache-dtype-auto):
# modelopt through resolve_kv_cache_dtype_string (vllm/utils/torch_utils.py, called by
# EngineArgs.create_engine_config), fp8 from 0.14.0, nvfp4 from 0.20.0; compressed-tensors in
# Attention.__init__ (vllm/attention/layer.py, later model_executor/layers/attention/attention.py),
# fp8 over any flag from 0.15.0, only over auto from 0.22.0.
VLLM_MODELOPT_KV_AUTO: Final[Version] = (0, 14, 0)
VLLM_MODELOPT_NVFP4_KV: Final[Version] = (0, 20, 0)
VLLM_COMPRESSED_TENSORS_KV_FP8: Final[Version] = (0, 15, 0)
VLLM_COMPRESSED_TENSORS_KV_AUTO_ONLY: Final[Version] = (0, 22, 0)
# --dtype auto: a float32 checkpoint runs as the platform's first supported dtype (bfloat16 on a
# GPU that has it) instead of float16, and bfloat16 on a GPU without it falls back to float16
# instead of being refused: vllm-project/vllm#18751 "[Core] Rework dtype resolution" (merged
# 2025-05-30, after v0.9.0), `_resolve_auto_dtype` (vllm/config.py; docs/engines/vllm.md#dtype).
VLLM_AUTO_DTYPE_PLATFORM_PREFERRED: Final[Version] = (0, 9, 1)
LATEST_VLLM_VERSION: Final = "0.33.0"  # the newest release whose arithmetic kvplan models

VLLM_DEFAULT_UTILIZATION_OLD: Final = 0.9
VLLM_DEFAULT_UTILIZATION_NEW: Final = 0.92
VLLM_DEFAULT_BLOCK_SIZE: Final = 16  # CacheConfig.DEFAULT_BLOCK_SIZE on CUDA
VLLM_SPARSE_MLA_BLOCK_SIZE: Final = 64  # FlashMLA-sparse pages (DeepSeek-V3.2, GLM-5)
# platforms/cuda.py sparse-MLA backend priorities by compute capability and
# mla_attention.py _canonicalize_sparse_mla_kv_cache_dtype: the same from 0.24.0 to 0.33.0.
VLLM_SPARSE_MLA_BACKENDS: Final[Version] = (0, 24, 0)
VLLM_SPARSE_MLA: Final[Version] = (0, 11, 0)  # DeepseekV32IndexerCache first in the 0.11 wheel
VLLM_V0_SWAP_SPACE_BYTES: Final = 4 * GiB  # EngineArgs.swap_space = 4 GiB: V0 "# CPU blocks"
VLLM_MAMBA_BLOCK_ALIGNMENT: Final = 16  # FlashAttention / FlashInfer kernel block multiple
# Kimi (MLA + KDA) and MiniMax-M3, read in the 0.26.0-0.33.0 wheels (docs/engines/vllm.md#kda):
# KimiK3ForConditionalGeneration first in the 0.27.0 model registry, whose
# platforms/interface.py `_align_hybrid_block_size` already aligns MLA hybrids to 128 tokens
# (also max(kernel block, block_size)); kvplan sizes KDA from there (Kimi-Linear ran from
# 0.11.1 with a 64/128 MLA alignment in models/config.py it does not model).
VLLM_KDA: Final[Version] = (0, 27, 0)
VLLM_MLA_HYBRID_ALIGNMENT: Final = 128
# mamba_utils.py `kda_state_dtype` takes mamba_ssm_cache_dtype (auto -> float32, or float32 /
# bfloat16) from 0.30.0; before, the recurrent state is float32 whatever the flag says.
VLLM_KDA_SSM_DTYPE: Final[Version] = (0, 30, 0)
# DeepSeek-V4 (models/deepseek_v4*): first in the 0.20.0 wheel. Its pool as kvplan models it:
# layer tuples in one packed block (kv_cache_utils.py _get_kv_cache_config_packed, 0.24.0) up
# to 0.26.x; 0.27.0-0.32.0 regroup it unpadded, then per kind (not modelled); 0.33.0's
# kv_cache_planning.py _get_packed_kv_cache_groups (engines/vllm_deepseek_v4.py).
VLLM_DEEPSEEK_V4: Final[Version] = (0, 20, 0)
VLLM_DEEPSEEK_V4_TUPLES: Final[Version] = (0, 24, 0)
VLLM_DEEPSEEK_V4_REGROUPED: Final[Version] = (0, 27, 0)
VLLM_DEEPSEEK_V4_PLANNED: Final[Version] = (0, 33, 0)
VLLM_MINIMAX_M3: Final[Version] = (0, 33, 0)  # MiniMaxM3ForCausalLM first in the 0.33.0 registry
# MiniMax-Text-01 / MiniMax-M1 (lightning attention): models/minimax_text_01.py is in the 0.23.0
# wheel and gone from 0.24.0, whose models/registry.py _PREVIOUSLY_SUPPORTED_MODELS lists
# "MiniMaxText01ForCausalLM" and "MiniMaxM1ForCausalLM": "0.23.0".
VLLM_MINIMAX_LIGHTNING_GONE: Final[Version] = (0, 24, 0)
# engines/vllm_platform.py: custom_all_reduce.py CustomAllreduce lists world size 16 and keeps
# multi-node NVLink (MNNVL) groups in 0.33.0, the first wheel kvplan read with them (0.20.0 has
# neither; the release between is not pinned). xpu_worker.py XPUWorker has its own
# determine_available_memory (fixed 128 MiB for client GPUs) in 0.15.0, none from 0.16.0.
VLLM_CUSTOM_AR_16_RANKS: Final[Version] = (0, 33, 0)
VLLM_MNNVL_ALL_REDUCE: Final[Version] = (0, 33, 0)
VLLM_XPU_GPU_WORKER_PROFILE: Final[Version] = (0, 16, 0)
VLLM_V0_CHUNKED_PREFILL_ABOVE: Final = 32 * 1024  # "enabled by default for max_model_len > 32K"

# --- vLLM memory constants -------------------------------------------------------------
# vllm#10517 (RTX 3090, TP1, v0.6.4): "non_torch_memory=0.35GiB", CUDA context included.
VLLM_NON_TORCH_WITH_CONTEXT: Final = round(0.35 * GiB)
# vllm#13061 (RTX 4090, TP2, V0 0.7): the reporter's non-torch growth, 0.25 GiB; the V1 0.19 logs
# at TP1 (planner-* fitted: 0.25 ... 0.27 GiB) show the same growth without parallelism.
VLLM_NON_TORCH_INCREASE: Final = round(0.25 * GiB)
# V0 sampler with the profile's top_p=0.99, top_k=vocab-1 (sorted logits, int64 indices,
# softmax, cumsum, gathered copies). vllm#13061: rank 0 (the sampler) kept 81,536 tokens x
# 98,304 B = 7.46 GiB of KV against rank 1's 8.69 GiB; with rank 1's 0.19 GiB forward peak the
# sampler peak is 1.415 GiB = 9.76 x (256 rows x 152,064 vocab x 4 B).
VLLM_V0_SAMPLER_FP32_COPIES: Final = 9.76
# V1 dummy sampler before 0.17 (fp32 logits, penalties with int64 bin counts and masks,
# temperature, sort-based top-k/top-p): fitted to PR #12569 (Llama-3.1-70B w8a8, 1,381 blocks at
# util 0.98) on an 80 GB H100, the only 80 GB GPU that log fits; the PR does not name the GPU.
VLLM_V1_SAMPLER_FP32_COPIES: Final = 5.5
# From 0.17 top-k/top-p runs in Triton, in place (v1/sample/ops/topk_topp_triton.py, first in
# the 0.17.0 wheel; absent from 0.16.0): activation.triton_sampler_bytes.
VLLM_TRITON_TOP_K_TOP_P: Final[Version] = (0, 17, 0)
# The Triton kernel's cached scratch rows: one per program, min(SMs, rows) programs; 132 is the
# H100 SXM's SM count, the GPU of every log that shows the sampler's peak (llm-d-planner 0.19).
VLLM_TOPK_TOPP_BUFFER_ROWS: Final = 132
# From 0.13 the fused-MoE workspace is the worker's WorkspaceManager's, kept between passes
# (v1/worker/workspace.py first in the 0.13.0 wheel, absent from 0.12.0): it is still allocated
# when the sampler peaks (activation.moe_workspace_bytes).
VLLM_PERSISTENT_MOE_WORKSPACE: Final[Version] = (0, 13, 0)
# What the profile run leaves allocated beyond the forward's outputs, the MoE workspace and the
# sampler (the cuBLAS workspace, inferred): the mean residual (logged peak - predicted peak
# without it) of the fitted llm-d-planner 0.19 logs whose predicted peak is the sampler's:
# planner-llama-3.1-8b-pp2, planner-llama-3.1-8b-kv-fp8, planner-qwen3-30b-a3b,
# planner-deepseek-v2-lite, planner-gemma-2-27b, planner-gpt-oss-20b-tp2,
# planner-llama-3.1-8b-w4a16 (29 ... 39 MiB each; Llama-4 Scout left out, its multimodal
# encoder's profile adds to the peak). service/calibration/fits.py refits it.
VLLM_PROFILE_OVERHEAD: Final = 34 * MiB
# The V1 forward pass runs under torch.compile: its peak over T tokens, as a multiple of the eager
# estimate (activation.forward_bytes_per_token, which matches V0's eager slope in vllm#10517).
# Fitted to the one log whose peak is a forward pass alone: planner-llama-3.1-8b-pp2's first
# stage (no sampler): 1.10 GiB at 8,192 tokens = the overhead + 0.8438 GiB eager x 1.26.
VLLM_V1_FORWARD_FACTOR: Final = 1.26
# Growth of non-torch memory during the V1 profile (0.9.2+) beyond VLLM_NON_TORCH_INCREASE, which
# the tensor-parallel-1 logs show (planner-* fitted at TP1: 0.25 ... 0.27 GiB): with a pipeline of
# one-GPU stages 0.07 GiB (planner-llama-3.1-8b-pp2, both stages); with tensor parallelism NCCL's
# and the custom all-reduce's buffers, allocated at the first collective, 2.07 GiB at TP2
# (planner-mixtral-8x7b-tp2, planner-gpt-oss-20b-tp2) and 0.05 GiB more per further rank
# (planner-llama-4-scout-tp4: 2.17 GiB at TP4). All measured on H100 SXM (NVLink, NVSwitch);
# service/calibration/fits.py refits them.
VLLM_NON_TORCH_PIPELINE: Final = round(0.07 * GiB)
VLLM_NON_TORCH_TP2: Final = round(2.07 * GiB)
VLLM_NON_TORCH_PER_TP_RANK: Final = round(0.05 * GiB)
# "Estimated CUDA graph memory" (GPUModelRunner.profile_cudagraph_memory, first in the 0.18.0
# wheel; subtracted from the budget by default from 0.20, VLLM_CUDAGRAPH_IN_BUDGET): vLLM
# captures the two largest sizes per mode and extrapolates. kvplan charges a fixed amount per
# captured graph and per layer of the stage: the median of the fitted llm-d-planner logs
# (0.25 ... 0.52 MiB per graph-layer).
VLLM_CUDAGRAPH_PROFILED: Final[Version] = (0, 18, 0)
VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER: Final = round(0.2635 * MiB)
VLLM_CUDAGRAPH_MAX_CAPTURE: Final = 512
# issue 21, KV tiers (engines/offload.py). vLLM --kv-offloading-size first sizes a host tier in
# the 0.14.0 wheel (vllm/v1/kv_offload/cpu.py CPUOffloadingSpec: cpu_bytes_to_use // one GPU
# block of every rank); 0.11.1 - 0.13.0 pass num_cpu_blocks=0 and the spec raises. Host blocks
# are rounded up to SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT (mmap.PAGESIZE) and a pure MLA
# model on tensor parallelism alone keeps one copy (`replicated_layout`) in the 0.30.0 and
# 0.33.0 wheels' vllm/v1/kv_offload/cpu/spec.py; the 0.26.0 wheel has BLOCK_SIZE_ALIGNMENT = 1
# and a copy per rank (0.27 - 0.29 not read: sized as 0.26).
VLLM_OFFLOAD_SIZED: Final[Version] = (0, 14, 0)
VLLM_OFFLOAD_ALIGNED: Final[Version] = (0, 30, 0)

# issue 21, multimodal encoders: --skip-mm-profiling came with vLLM PR #22950 (merged
# 2025-08-15); the 0.10.1.1 and 0.10.2 wheels have MultiModalConfig.skip_mm_profiling, 0.10.0
# predates the PR.
VLLM_SKIP_MM_PROFILING: Final[Version] = (0, 10, 1)
# The model runner that profiles the encoder (vllm/config/vllm.py VllmConfig.use_v2_model_runner):
# 0.20.0 runs the V1 runner unless VLLM_USE_V2_MODEL_RUNNER=1; 0.25.1 makes Model Runner V2
# the default for a model that is not MoE (`_is_default_v2_model_runner_model`), and its
# profile_run (v1/worker/gpu/model_runner.py) runs no encoder; 0.30.0 (and 0.33.0) make it the
# default for every model and profile the encoder (gpu/mm/encoder_runner.py
# `profile_encoder_cache`), keeping the outputs but not the dummy batch, which
# `execute_mm_encoder` moves to the GPU inside its own frame. 0.21 - 0.24 and 0.26 - 0.29 not
# read: sized as 0.20 and 0.25.1.
VLLM_MRV2_DEFAULT_DENSE: Final[Version] = (0, 25, 0)
VLLM_MRV2_ENCODER_PROFILE: Final[Version] = (0, 30, 0)


def cudagraph_capture_count(largest: int) -> int:
    """How many capture sizes up to `largest`: 1, 2, 4, then multiples of 8 below 256, then
    multiples of 16 (vllm/config/vllm.py `VllmConfig._set_cudagraph_sizes`, 0.16 ... 0.21
    wheels). 512 -> 3 + 31 + 17 = 51; 64 -> 3 + 8 = 11; 32 -> 3 + 4 = 7."""
    small = sum(1 for size in (1, 2, 4) if size <= largest)
    eights = min(largest, 248) // 8 if largest >= 8 else 0
    sixteens = (largest - 256) // 16 + 1 if largest >= 256 else 0
    return small + eights + sixteens


# --- SGLang ---------------------------------------------------------------------------
# Memory already in use when SGLang first reads free memory (after distributed init): the
# CUDA context, plus NCCL / custom all-reduce buffers at TP > 1.
SGLANG_CONTEXT: Final = round(0.5 * GiB)
SGLANG_NCCL: Final = round(0.5 * GiB)
# Taken during weight loading beyond the weights (allocator slack, quantisation re-layout):
# fitted to vllm#21348's SGLang run (Qwen3-235B-A22B-FP8, TP4, H100, f=0.93, 367,404 tokens).
SGLANG_LOAD_OVERHEAD_FRACTION: Final = 0.015

# SGLang hybrid pools. Milestones are the first release whose wheel has the behaviour, read
# from the released wheels 0.4.9 ... 0.5.23 (sglang/srt/model_executor/model_runner.py,
# model_runner_kv_cache_mixin.py, pool_configurator.py, mem_cache/kv_cache_configurator.py,
# server_args.py); (major, minor, patch, post).
SglangVersion = tuple[int, int, int, int]
LATEST_SGLANG_VERSION: Final = "0.5.23"  # the newest release whose arithmetic kvplan models
SGLANG_SWA_POOL: Final[SglangVersion] = (0, 4, 9, 3)  # SWAKVPool, --swa-full-tokens-ratio
SGLANG_GEMMA_SWA_OFF: Final[SglangVersion] = (0, 5, 1, 0)  # Gemma 2/3: hybrid SWA memory off
SGLANG_SWA_SPLIT_PAGE_ALIGNED: Final[SglangVersion] = (0, 5, 7, 0)  # both pools page-aligned
SGLANG_CHUNKED_AS_SWA: Final[SglangVersion] = (0, 5, 8, 0)  # Llama 4 chunks in the SWA pool
SGLANG_SWA_SPLIT_BY_MEMORY: Final[SglangVersion] = (0, 5, 9, 0)  # split by bytes, not layers
SGLANG_SWA_SPLIT_BY_COEFF: Final[SglangVersion] = (0, 5, 11, 0)  # pool_configurator.py
SGLANG_SWA_FLOOR_CHECK: Final[SglangVersion] = (0, 5, 20, 0)  # refuses SWA pool <= window+page
SGLANG_GDN: Final[SglangVersion] = (0, 5, 2, 0)  # Qwen3-Next: HybridLinearKVPool, MambaPool
SGLANG_MAMBA2: Final[SglangVersion] = (0, 5, 3, 0)  # Falcon-H1 (Nemotron-H from 0.5.4)
SGLANG_ATTENTION_FREE_MAMBA: Final[SglangVersion] = (0, 5, 20, 0)  # models/mamba.py, mamba2.py
SGLANG_MAMBA_MEMORY_RATIO: Final[SglangVersion] = (0, 5, 4, 0)  # --mamba-full-memory-ratio
SGLANG_GDN_RADIX: Final[SglangVersion] = (0, 5, 4, 0)  # MambaRadixCache for GDN models
SGLANG_MAMBA2_RADIX: Final[SglangVersion] = (0, 5, 7, 0)  # ... and for Mamba-2 models
SGLANG_MAMBA_FIT_WITHOUT_RADIX: Final[SglangVersion] = (0, 5, 9, 0)  # ratio split, radix off
SGLANG_REQS_FROM_FINAL_TOKENS: Final[SglangVersion] = (0, 5, 10, 0)  # _resolve_max_num_reqs
SGLANG_SSM_DTYPE_FROM_CONFIG: Final[SglangVersion] = (0, 5, 10, 0)  # config mamba_ssm_dtype
SGLANG_MAMBA_EXTRA_BUFFER: Final[SglangVersion] = (0, 5, 14, 0)  # "auto" -> extra_buffer
SGLANG_MAMBA_PADDING_SLOT: Final[SglangVersion] = (0, 5, 17, 0)  # slot 0 charged to the budget
# LoRA (engines/lora.py), read in the wheels 0.4.9 ... 0.5.23 (sglang/srt/lora/mem_pool.py,
# lora_manager.py, utils.py): 0.4.10 added --enable-lora, --max-lora-rank and
# --lora-target-modules but stacked B as (c, slots, output, rank); 0.5.1 has the layout kvplan
# sizes; 0.5.12 resolves `all` from the model, with embed_tokens and lm_head buffers, and gives
# qkv_proj's B one head_dim of K and V per rank where the KV heads are fewer than the ranks.
SGLANG_LORA_POOL: Final[SglangVersion] = (0, 5, 1, 0)
SGLANG_LORA_MODEL_TARGETS: Final[SglangVersion] = (0, 5, 12, 0)

SGLANG_SWA_FULL_TOKENS_RATIO: Final = 0.8  # ServerArgs.swa_full_tokens_ratio (fallback 0.8)
SGLANG_MAMBA_FULL_MEMORY_RATIO: Final = 0.9  # ServerArgs.mamba_full_memory_ratio
SGLANG_MAMBA_FIXED_SLOTS: Final = 512  # max_mamba_cache_size without radix cache, < 0.5.9
SGLANG_MAMBA_SLOTS_PER_REQUEST: Final = 3  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
SGLANG_MAMBA_EXTRA_BUFFER_SLOTS: Final = 2  # MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP
SGLANG_MAMBA_CONV_BYTES: Final = 2  # mamba_utils.CONV_DTYPE = torch.bfloat16
SGLANG_MAMBA_SSM_DTYPE: Final = FloatDtype.FLOAT32  # ServerArgs.mamba_ssm_dtype default
# max_num_reqs = clamp(int(tokens / context_len x 512), 2048, 4096) (model_runner)
SGLANG_REQS_PER_CONTEXT: Final = 512
SGLANG_MIN_REQS: Final = 2048
SGLANG_MAX_REQS: Final = 4096

# --- TensorRT-LLM -----------------------------------------------------------------------
TRTLLM_DEFAULT_FREE_FRACTION: Final = 0.9  # KvCacheConfig.free_gpu_memory_fraction
TRTLLM_TOKENS_PER_BLOCK: Final = 32  # KvCacheConfig.tokens_per_block
TRTLLM_NON_TORCH: Final = round(0.5 * GiB)  # context + NCCL + graphs outside torch (estimate)
# Tokens of the warm-up batch when max_num_tokens is not given (kvplan's estimate).
TRTLLM_MAX_NUM_TOKENS: Final = 8192
# LLM API / trtllm-serve default max_batch_size (llmapi/llm_args.py BaseLlmArgs.max_batch_size):
# a Mamba hybrid's state slots.
TRTLLM_DEFAULT_MAX_BATCH_SIZE: Final = 2048

# TensorRT-LLM (PyTorch backend) hybrid pools. Milestones are the first release whose tag
# holds the change, placed from the PR's merge commit on main against the release tags
# (v1.0.0rc3 = cfcb97a, v1.2.0rc0 = 560ded5 "Bump version to 1.2.0rc0", v1.2.0rc1 = 796891b);
# (major, minor, patch, pre): pre = rc number, TRTLLM_FINAL for a final release.
TrtllmVersion = tuple[int, int, int, int]
TRTLLM_FINAL: Final = 1000
LATEST_TRTLLM_VERSION: Final = "1.2.0"  # the newest release whose hybrid arithmetic kvplan models
TRTLLM_MAMBA_HYBRID: Final[TrtllmVersion] = (0, 20, 0, 0)  # Nemotron-H, PR #3430 (2025-04-16)
# KvCacheCreator divides the budget by the attention layers' bytes only (get_num_attention_layers)
# instead of every hidden layer's: PR #5371, merged 2025-07-09.
TRTLLM_KV_SIZE_ATTENTION_ONLY: Final[TrtllmVersion] = (1, 0, 0, 3)
TRTLLM_GDN: Final[TrtllmVersion] = (1, 2, 0, 1)  # Qwen3-Next, PR #7892 (after the rc0 tag)
# KVCacheManager VSWA pools (calculate_max_num_blocks_from_cpp): PR #5151, 2025-07-02.
TRTLLM_PYTORCH_VSWA: Final[TrtllmVersion] = (1, 0, 0, 2)
# VSWA pools cut from the estimated KV budget (max_gpu_total_bytes), not from free memory
# capped by max_tokens: PR #5933, 2025-08-25.
TRTLLM_VSWA_FROM_BUDGET: Final[TrtllmVersion] = (1, 1, 0, 2)
# calculateMaxNumBlocks: equal share per window size instead of bytes x window (PR #7923).
TRTLLM_VSWA_EQUAL_SHARES: Final[TrtllmVersion] = (1, 2, 0, 0)
