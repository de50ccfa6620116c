"""LoRA buffers (engines/lora.py), worked by hand from vLLM 0.33.0's create_lora_weights.

Shapes: vllm/lora/layers/base_linear.py and column_parallel_linear.py (lora_a_stacked
(max_loras, 1, max_lora_rank, input_size), lora_b_stacked (max_loras, 1, output_size,
max_lora_rank) per slice), row_parallel_linear.py (input_size_per_partition),
vocab_parallel_embedding.py and logits_processor.py; punica_wrapper/punica_base.py, punica_gpu.py
and ops/triton_ops/lora_kernel_metadata.py for the metadata.
"""

from __future__ import annotations

import pytest

from service.sizing.capacity import Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.lora import punica_bytes, vllm_lora_buffers
from service.sizing.errors import SizingError
from service.sizing.model.architecture import ModelArchitecture, MultiHeadLatentAttention

from .models import H100_TORCH, LLAMA_31_8B

FOUR_RANK_16 = EngineOptions(
    engine_version="0.33.0", enable_lora=True, max_loras=4, max_lora_rank=16
)


def test_four_rank_16_slots_on_llama_3_1_8b_module_by_module() -> None:
    # Llama-3.1-8B (tests/sizing/models.py): H 4096, I 14336, 32 heads x 128 = 4096 (q),
    # 8 KV heads x 128 = 1024 (k, v), vocab 128,256, 32 layers, bf16 (2 B), TP 1, L = 4, r = 16.
    buffers = vllm_lora_buffers(
        LLAMA_31_8B,
        FOUR_RANK_16,
        tensor_parallel_size=1,
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
    )
    assert buffers is not None
    per_module = {m.name: m.bytes(buffers.element_bytes) for m in buffers.modules}
    # qkv_proj, 3 slices: A 3 x 4 x 16 x 4096 = 786,432; B 4 x (4096 + 1024 + 1024) x 16 =
    # 393,216; (786,432 + 393,216) x 32 layers x 2 B = 75,497,472
    assert per_module["qkv_proj"] == 75_497_472
    # o_proj (row): A 4 x 16 x 4096 = 262,144; B 4 x 4096 x 16 = 262,144; x 32 x 2 = 33,554,432
    assert per_module["o_proj"] == 33_554_432
    # gate_up_proj, 2 slices: A 2 x 4 x 16 x 4096 = 524,288; B 2 x 4 x 14336 x 16 = 1,835,008;
    # (524,288 + 1,835,008) x 32 x 2 = 150,994,944
    assert per_module["gate_up_proj"] == 150_994_944
    # down_proj (row): A 4 x 16 x 14336 = 917,504; B 4 x 4096 x 16 = 262,144; x 32 x 2 =
    # 75,497,472
    assert per_module["down_proj"] == 75_497_472
    # embed_tokens: A 4 x 128,256 x 16 = 8,208,384; B 4 x 4096 x 16 = 262,144; x 2 = 16,941,056
    assert per_module["embed_tokens"] == 16_941_056
    # lm_head (LogitsProcessorWithLoRA): A 4 x 16 x 4096, B 4 x 128,256 x 16: the same 16,941,056
    assert per_module["lm_head"] == 16_941_056
    # 75,497,472 x 2 + 33,554,432 + 150,994,944 + 16,941,056 x 2 = 369,426,432 B (352.3 MiB)
    assert buffers.adapter_bytes == 369_426_432
    # punica: 4 x 8192 x 8 + 3 x 1024 x 8 = 286,720; two kernel metas of 2 x 8192 x 4 +
    # (5 + 5 + 6) x 4 = 65,600 each: 286,720 + 131,200 = 417,920
    assert buffers.punica_bytes == punica_bytes(4, 8192, 1024) == 417_920


def test_the_buffers_come_out_of_the_pool_as_one_budget_line() -> None:
    plain = compute_capacity(
        LLAMA_31_8B,
        H100_TORCH,
        Workload(8192),
        Parallelism(),
        EngineOptions(engine_version="0.33.0"),
    )
    lora = compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), Parallelism(), FOUR_RANK_16)
    # H100 80 GB: vLLM's batch defaults 8192 tokens, 1024 sequences: the metadata above
    assert plain.kv_pool_bytes - lora.kv_pool_bytes == 369_426_432 + 417_920
    line = next(line for line in lora.budget.lines if line.name == "lora_adapters")
    assert line.bytes == -369_844_352
    assert lora.budget.weights_bytes - plain.budget.weights_bytes == 369_844_352


def test_tensor_parallel_shards_the_column_outputs_and_row_inputs() -> None:
    buffers = vllm_lora_buffers(
        LLAMA_31_8B,
        FOUR_RANK_16,
        tensor_parallel_size=2,
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
    )
    assert buffers is not None
    per_module = {m.name: m.bytes(buffers.element_bytes) for m in buffers.modules}
    # qkv at TP 2: A unchanged 786,432; B 4 x (2048 + 512 + 512) x 16 = 196,608;
    # (786,432 + 196,608) x 32 x 2 = 62,914,560
    assert per_module["qkv_proj"] == 62_914_560
    # down_proj at TP 2: A 4 x 16 x 7168 = 458,752; B 262,144; x 32 x 2 = 46,137,344
    assert per_module["down_proj"] == 46_137_344


def test_fully_sharded_loras_shard_the_rank_of_column_a_and_row_b() -> None:
    options = EngineOptions(
        enable_lora=True, max_loras=4, max_lora_rank=16, fully_sharded_loras=True
    )
    buffers = vllm_lora_buffers(
        LLAMA_31_8B, options, tensor_parallel_size=2, max_num_batched_tokens=8192, max_num_seqs=1
    )
    assert buffers is not None
    per_module = {m.name: m.bytes(buffers.element_bytes) for m in buffers.modules}
    # o_proj: A 4 x 16 x 2048 = 131,072; B 4 x 2048 x 16 = 131,072; x 32 x 2 = 16,777,216
    assert per_module["o_proj"] == 16_777_216
    # gate_up: A 2 x 4 x 8 x 4096 = 262,144; B 2 x 4 x 7168 x 16 = 917,504; x 64 = 75,497,472
    assert per_module["gate_up_proj"] == 75_497_472


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (EngineOptions(enable_lora=True, max_lora_rank=12), "max_lora_rank"),
        (EngineOptions(enable_lora=True, max_loras=4, max_cpu_loras=2), "max_cpu_loras"),
        (EngineOptions(enable_lora=True, lora_dtype="float32"), "lora_dtype"),
        (EngineOptions(max_loras=4), "max_loras"),
        # SGLang's pool is sized (test_sglang_lora.py); TensorRT-LLM's is not
        (EngineOptions(engine=Engine.TRTLLM, enable_lora=True), "enable_lora"),
    ],
)
def test_what_vllm_refuses_or_kvplan_does_not_model_is_named(
    options: EngineOptions, field: str
) -> None:
    with pytest.raises(SizingError) as refused:
        compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), Parallelism(), options)
    assert refused.value.field == field


def test_mla_layers_are_refused_not_sized_as_a_dense_decoder() -> None:
    mla = ModelArchitecture(
        layers=(MultiHeadLatentAttention(512, 64),) * 4,
        num_attention_heads=16,
        hidden_size=2048,
        intermediate_size=8192,
        vocab_size=1000,
        weight_bytes=10**9,
    )
    with pytest.raises(SizingError) as refused:
        compute_capacity(mla, H100_TORCH, Workload(4096), Parallelism(), FOUR_RANK_16)
    assert refused.value.field == "enable_lora"


def test_a_v0_release_is_refused_by_name() -> None:
    # vllm#14450: on V0 the KV block count did not move with the LoRA rank or slots
    v0 = EngineOptions(engine_version="0.7.3", enable_lora=True)
    with pytest.raises(SizingError) as refused:
        compute_capacity(LLAMA_31_8B, H100_TORCH, Workload(8192), Parallelism(), v0)
    assert refused.value.field == "engine_version"
