"""Peak activation of an engine's profiling run, estimated from the model's shape.

vLLM measures (it does not compute) the torch peak of one dummy forward pass over
`max_num_batched_tokens` tokens followed by a dummy sampling step
(vllm/v1/worker/gpu_model_runner.py `profile_run`, `_dummy_run`, `_dummy_sampler_run`; V0
`worker.py determine_num_available_blocks`). kvplan estimates the two peaks from the layer shapes
and takes the larger one: the forward pass's temporaries are freed before the sampler runs, but
what the forward pass returns, and buffers it allocates for good, stay through the sampler.
Short names: T = max_num_batched_tokens, R = sampler rows, V = vocabulary, H = hidden size.
"""

from __future__ import annotations

from functools import lru_cache

from ..model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    ModelArchitecture,
    SlidingWindowAttention,
)


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
    return arch.dtype.element_bytes * (2 * hidden + max(widths))


def sampler_bytes(vocab_size: int | None, rows: int, fp32_copies: float) -> int:
    """Logits for `rows` requests in fp32 and the copies the sampler makes of them."""
    if vocab_size is None:
        return 0
    return int(rows * vocab_size * 4 * fp32_copies)


def triton_sampler_bytes(
    vocab_size: int | None, rows: int, logits_element_bytes: int, buffer_rows: int
) -> int:
    """The dummy sampler of vLLM 0.17+ at its peak, on `rows` requests of the full vocabulary.

    `_dummy_sampler_run` keeps the logits in the model dtype while `Sampler.forward` holds an
    fp32 copy (`logits.to(torch.float32)`); top-k/top-p runs in place in Triton
    (v1/sample/ops/topk_topp_triton.py `apply_top_k_top_p_triton`), whose cached scratch buffer
    is one fp32 row per program, min(SMs, rows) programs; `forward_native` then allocates the
    fp32 `probs` (softmax) and the exponential draws `q` of the same shape (`random_sample`).
    Every tensor-parallel rank gathers the whole vocabulary.
    """
    if vocab_size is None:
        return 0
    per_row = vocab_size * (logits_element_bytes + 3 * 4)
    return rows * per_row + min(rows, buffer_rows) * vocab_size * 4


def moe_workspace_bytes(arch: ModelArchitecture, tensor_parallel_size: int, tokens: int) -> int:
    """The fused-MoE workspace one forward pass over `tokens` leaves allocated.

    vllm/model_executor/layers/fused_moe/modular_kernel.py `_allocate_buffers` takes its buffers
    from the worker's `WorkspaceManager` (v1/worker/workspace.py), which keeps the largest it
    was asked for: `TritonExperts.workspace_shapes` (fused_moe.py) asks for M x top_k x max(I, H)
    (shared with the output) and M x top_k x max(2 I, H) elements, I the expert intermediate
    size per rank.
    """
    moe = arch.moe
    if moe is None or arch.hidden_size is None:
        return 0
    hidden = arch.hidden_size
    per_rank = moe.moe_intermediate_size // tensor_parallel_size
    elements = max(per_rank, hidden) + max(2 * per_rank, hidden)
    return tokens * moe.experts_per_token * elements * arch.dtype.element_bytes
