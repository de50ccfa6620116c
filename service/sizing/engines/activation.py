"""Peak activation of an engine's profiling run, estimated from the model's shape.

vLLM measures (it does not compute) the torch peak of one dummy forward pass over
`max_num_batched_tokens` tokens followed by a dummy sampling step
(vllm/v1/worker/gpu_model_runner.py `profile_run`; V0 `worker.py determine_num_available_blocks`).
kvplan estimates the same two peaks from the layer shapes and takes the larger one, because
the forward pass's buffers are freed before the sampler runs.
"""

from __future__ import annotations

from functools import lru_cache

from ..architecture import (
    ChunkedLocalAttention,
    FullAttention,
    ModelArchitecture,
    SlidingWindowAttention,
)
from ..dtypes import MODEL_DTYPE_BYTES


@lru_cache(maxsize=4096)
def forward_bytes_per_token(arch: ModelArchitecture, tensor_parallel_size: int) -> int | None:
    """Bytes live per token at the peak of one decoder layer, on one GPU; None if unknown.

    Eager PyTorch keeps every tensor a layer's `forward` still names: in the MLP that is the
    residual and the normed input (2 x hidden), the gate/up output (2 x I / tp), the
    activation (I / tp) and the down-projection output (hidden, full width before the
    all-reduce). Checked against vllm#10517: 110,592 B/token for Llama-3.1-8B against a
    measured slope of 109,760 B/token (peak_torch_memory at 20,000 and 29,000 tokens).
    """
    hidden = arch.hidden_size
    if hidden is None:
        return None
    tp = tensor_parallel_size
    widths: list[int] = []
    if arch.intermediate_size is not None and (arch.moe is None):
        widths.append(3 * arch.intermediate_size // tp + hidden)
    if arch.moe is not None:
        moe = arch.moe
        # fused_moe keeps three caches per routed token: gate/up (2N/tp), activation (N/tp)
        # and the per-expert output (hidden) (vllm/model_executor/layers/fused_moe).
        routed = moe.experts_per_token * (3 * moe.moe_intermediate_size // tp + hidden)
        shared = 3 * moe.shared_expert_intermediate_size // tp
        widths.append(routed + shared + hidden)
        if arch.intermediate_size is not None:
            widths.append(3 * arch.intermediate_size // tp + hidden)  # dense layers, if any
    for layer, _ in arch.cache_layer_counts:
        if isinstance(layer, FullAttention | SlidingWindowAttention | ChunkedLocalAttention):
            q = arch.num_attention_heads * layer.head_dim // tp
            kv = 2 * max(1, layer.num_kv_heads // tp) * layer.head_dim
            widths.append(2 * q + kv + hidden)  # qkv output, attention output, o_proj output
    if not widths:
        return None
    return MODEL_DTYPE_BYTES[arch.dtype] * (2 * hidden + max(widths))


def sampler_bytes(vocab_size: int | None, rows: int, fp32_copies: float) -> int:
    """Logits for `rows` requests in fp32 and the copies the sampler makes of them."""
    if vocab_size is None:
        return 0
    return int(rows * vocab_size * 4 * fp32_copies)
