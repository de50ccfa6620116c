"""Which tensor / pipeline layouts a model allows, and what each GPU then holds."""

from __future__ import annotations

from functools import lru_cache

from ..errors import InvalidParallelism
from ..model.architecture import (
    ChunkedLocalAttention,
    FullAttention,
    GatedDeltaNet,
    Mamba1,
    Mamba2,
    ModelArchitecture,
    SlidingWindowAttention,
)


@lru_cache(maxsize=4096)
def check_tensor_parallel(arch: ModelArchitecture, tensor_parallel_size: int) -> tuple[str, ...]:
    """Raise if `tp` cannot shard this model; return warnings for what it replicates."""
    tp = tensor_parallel_size
    if tp < 1:
        raise InvalidParallelism("tensor_parallel_size", "must be at least 1")
    # vLLM ModelConfig.verify_with_parallel_config: heads must divide evenly across ranks.
    if arch.num_attention_heads % tp != 0:
        raise InvalidParallelism(
            "tensor_parallel_size",
            f"{tp} does not divide the {arch.num_attention_heads} attention heads",
        )
    warnings: list[str] = []
    for layer, _ in arch.cache_layer_counts:
        if isinstance(layer, FullAttention | SlidingWindowAttention | ChunkedLocalAttention):
            kv = layer.num_kv_heads
            # vLLM QKVParallelLinear: kv heads split when kv >= tp, else replicated tp/kv times.
            if kv >= tp and kv % tp != 0:
                raise InvalidParallelism(
                    "tensor_parallel_size", f"{tp} does not divide the {kv} KV heads"
                )
            if kv < tp:
                if tp % kv != 0:
                    raise InvalidParallelism(
                        "tensor_parallel_size",
                        f"{tp} is neither a divisor nor a multiple of the {kv} KV heads",
                    )
                message = (
                    f"tensor_parallel_size {tp} > {kv} KV heads ({layer.kind.value}): each KV head "
                    f"is replicated on {tp // kv} GPUs, so every GPU still holds 1 head; TP beyond "
                    f"{kv} adds no KV capacity per GPU"
                )
                if message not in warnings:
                    warnings.append(message)
        elif isinstance(layer, GatedDeltaNet):
            if layer.num_value_heads % tp or layer.num_key_heads % tp:
                raise InvalidParallelism(
                    "tensor_parallel_size",
                    f"{tp} does not divide the linear-attention heads "
                    f"({layer.num_key_heads} key, {layer.num_value_heads} value)",
                )
        elif isinstance(layer, Mamba2):
            if layer.num_heads % tp:
                raise InvalidParallelism(
                    "tensor_parallel_size",
                    f"{tp} does not divide the {layer.num_heads} Mamba heads",
                )
            # vLLM MambaMixer2.__init__: "n_groups % tp_size == 0 or n_groups == 1".
            if layer.n_groups % tp and layer.n_groups != 1:
                raise InvalidParallelism(
                    "tensor_parallel_size",
                    f"{tp} does not divide the {layer.n_groups} Mamba groups (only a single "
                    "group may be replicated across ranks)",
                )
        elif isinstance(layer, Mamba1) and layer.intermediate_size % tp:
            raise InvalidParallelism(
                "tensor_parallel_size",
                f"{tp} does not divide the Mamba inner size {layer.intermediate_size}",
            )
    return tuple(warnings)


def pipeline_stage_sizes(num_layers: int, pipeline_parallel_size: int) -> list[int]:
    """Layers per PP stage; the remainder goes to the stages before the last.

    Follows vLLM `get_pp_indices` (vllm/distributed/utils.py): the last stage also runs the
    LM head, so it is the one kept short.
    """
    pp = pipeline_parallel_size
    if pp < 1:
        raise InvalidParallelism("pipeline_parallel_size", "must be at least 1")
    if pp > num_layers:
        raise InvalidParallelism(
            "pipeline_parallel_size", f"{pp} stages for {num_layers} layers leaves a stage empty"
        )
    sizes = [num_layers // pp] * pp
    for i in range(num_layers % pp):
        sizes[-(i + 2) if pp > 1 else 0] += 1
    return sizes


def pipeline_stages(
    arch: ModelArchitecture, pipeline_parallel_size: int
) -> list[ModelArchitecture]:
    """The model each pipeline stage holds (the whole model when there is one stage)."""
    if pipeline_parallel_size == 1:
        return [arch]
    stages: list[ModelArchitecture] = []
    start = 0
    for size in pipeline_stage_sizes(arch.num_layers, pipeline_parallel_size):
        stages.append(arch.with_layers(arch.layers[start : start + size]))
        start += size
    return stages
