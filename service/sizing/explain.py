"""The explanation a person can check by hand: every number with the factors that made it."""

from __future__ import annotations

from typing import Any

from .capacity import Capacity
from .units import GiB


def _gib(n: int) -> float:
    return round(n / GiB, 3)


def explain(capacity: Capacity) -> dict[str, Any]:
    """Per-token bytes -> per-sequence bytes -> memory budget -> blocks -> max_num_seqs."""
    tp = capacity.parallel.tensor_parallel_size
    per_token = [
        {
            "kind": line.kind,
            "layers": line.layers,
            "bytes_per_token_per_layer": line.bytes_per_token_per_layer,
            "bytes_per_token": line.layers * line.bytes_per_token_per_layer,
        }
        for line in capacity.sequence
        if line.bytes_per_token_per_layer
    ]
    per_sequence = [
        {
            "kind": line.kind,
            "layers": line.layers,
            "tokens_held": line.tokens_held,
            "state_bytes_per_layer": line.state_bytes_per_layer or None,
            "bytes": line.bytes_per_sequence,
            "formula": line.formula,
        }
        for line in capacity.sequence
    ]
    budget = [
        {"name": line.name, "bytes": line.bytes, "gib": _gib(line.bytes), "note": line.note}
        for line in capacity.budget.lines
    ]
    layout = capacity.layout
    report = capacity.report
    groups = [
        {
            "kind": group.kind,
            "layers": group.layers,
            "block_size": group.block_size,
            "page_bytes": group.page_bytes,
            "blocks_per_request": group.blocks_per_request,
        }
        for group in layout.groups
    ]
    pool = max(0, capacity.kv_pool_bytes)
    return {
        "kv_bytes_per_token": {
            "value": capacity.kv_bytes_per_token,
            "kv_cache_dtype": capacity.kv_cache_dtype,
            "element_bytes": capacity.kv_element_bytes,
            "by_layer_kind": per_token,
            "rule": "2 (K and V) x kv_heads x head_dim x bytes per attention layer; MLA: "
            "(kv_lora_rank + qk_rope_head_dim) x bytes (fp8_ds_mla: 656-B packed rows), plus "
            "132 B of sparse-attention indexer key where the model has one; linear/Mamba layers "
            "keep a fixed state instead",
        },
        "kv_bytes_per_sequence": {
            "value": capacity.kv_bytes_per_sequence,
            "context_tokens": capacity.max_model_len,
            "by_layer_kind": per_sequence,
        },
        "per_gpu": {
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": capacity.parallel.pipeline_parallel_size,
            "kv_bytes_per_token_per_gpu": capacity.kv_bytes_per_token_per_gpu,
            "weights_bytes_total": capacity.weights_bytes,
            "weights_bytes_per_gpu": capacity.weights_bytes_per_gpu,
            "rule": "KV heads per GPU = max(1, kv_heads // tp) (replicated past tp = kv_heads); "
            "MLA latents are not split; weights divide by tp x pp",
        },
        "memory_budget": {
            "lines": budget,
            "kv_pool_bytes": capacity.kv_pool_bytes,
            "given": capacity.budget.pool_given,
        },
        "blocks": {
            "groups": groups,
            "bytes_per_block": layout.bytes_per_block,
            "num_gpu_blocks": report.num_gpu_blocks,
            "formula": f"{pool} B // {layout.bytes_per_block} B per block = "
            f"{pool // layout.bytes_per_block if layout.bytes_per_block else 0} blocks"
            + (
                f" (the smallest of the pipeline stages: {list(capacity.per_stage_blocks)})"
                if len(capacity.per_stage_blocks) > 1
                else ""
            ),
            "blocks_per_request": layout.blocks_per_request,
        },
        "concurrency": {
            "kv_cache_tokens": report.kv_cache_tokens,
            "max_concurrency": capacity.max_concurrency,
            "max_num_seqs": report.max_num_seqs,
            "formula": f"{report.num_gpu_blocks} blocks / {layout.blocks_per_request} blocks per "
            f"request = {report.max_concurrency:.2f}; whole sequences (one block is the null "
            f"block in vLLM): {report.max_num_seqs}",
        },
        "engine_log": list(report.log_lines),
        "engine_settings": dict(capacity.engine_settings),
        "fits": capacity.fits,
        "reason": capacity.reason,
        "warnings": list(capacity.warnings),
    }
