"""SGLang's LoRA memory pool (engines/lora.py sglang_lora_buffers), worked by hand from SGLang
0.5.23's python/sglang/srt/lora/mem_pool.py LoRAMemoryPool.init_buffers:

* get_lora_A_shape (slots, rank x c, input), c = utils.py get_stacked_multiply (qkv_proj 3,
  gate_up_proj 2); o_proj and down_proj (ROW_PARALLELISM_LINEAR_LORA_NAMES) take their TP share
  of the input;
* get_lora_B_shape (slots, output, rank), a column module's output its TP share;
* get_embedding_lora_A_shape / _B_shape: embed_tokens A (slots, rank, vocab), B (slots, hidden,
  rank); lm_head A (slots, rank, hidden), B (slots, the rank's vocab shard, rank);

one buffer per module per layer (num_hidden_layers), in the model's dtype. The dims are
utils.py get_default_hidden_dim's for Llama (qkv_proj: hidden -> head_dim x (heads + 2 x KV
heads); o_proj: heads x head_dim -> hidden; gate_up_proj: hidden -> 2 x intermediate;
down_proj: intermediate -> hidden).
"""

from __future__ import annotations

import pytest

from service.sizing.capacity import Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.engines.lora import sglang_lora_buffers, sglang_target_modules
from service.sizing.errors import SizingError

from .models import H100_TORCH, LLAMA_31_8B

V0523 = (0, 5, 23, 0)
FOUR_RANK_16 = EngineOptions(
    engine=Engine.SGLANG,
    engine_version="0.5.23",
    enable_lora=True,
    max_loras_per_batch=4,
    max_lora_rank=16,
    lora_target_modules="all",
)


def _per_module(options: EngineOptions, tp: int) -> tuple[dict[str, int], int]:
    buffers = sglang_lora_buffers(LLAMA_31_8B, options, version=V0523, tensor_parallel_size=tp)
    assert buffers is not None
    assert buffers.punica_bytes == 0  # SGLang's batch metadata is allocated with the graphs
    return {m.name: m.bytes(buffers.element_bytes) for m in buffers.modules}, buffers.bytes


def test_four_rank_16_slots_on_llama_3_1_8b_at_tp_1() -> None:
    # Llama-3.1-8B (tests/sizing/models.py): hidden 4096, intermediate 14336, 32 heads x 128 =
    # 4096 (q), 8 KV heads x 128 = 1024 (k, v), vocab 128,256, 32 layers, bf16 (2 B); 4 slots,
    # rank 16; `all` = qkv_proj, o_proj, gate_up_proj, down_proj, embed_tokens, lm_head.
    per_module, total = _per_module(FOUR_RANK_16, tp=1)
    # qkv_proj: A (4, 16 x 3, 4096) = 786,432; B (4, 4096 + 2 x 1024, 16) = 393,216;
    # (786,432 + 393,216) x 32 layers x 2 B = 75,497,472
    assert per_module["qkv_proj"] == 75_497_472
    # o_proj: A (4, 16, 4096) = 262,144; B (4, 4096, 16) = 262,144; 524,288 x 32 x 2 = 33,554,432
    assert per_module["o_proj"] == 33_554_432
    # gate_up_proj: A (4, 32, 4096) = 524,288; B (4, 28,672, 16) = 1,835,008;
    # 2,359,296 x 32 x 2 = 150,994,944
    assert per_module["gate_up_proj"] == 150_994_944
    # down_proj: A (4, 16, 14,336) = 917,504; B (4, 4096, 16) = 262,144; 1,179,648 x 64 =
    # 75,497,472
    assert per_module["down_proj"] == 75_497_472
    # embed_tokens: A (4, 16, 128,256) = 8,208,384; B (4, 4096, 16) = 262,144; x 2 B =
    # 16,941,056. lm_head: A (4, 16, 4096) = 262,144; B (4, 128,256, 16) = 8,208,384: the same.
    assert per_module["embed_tokens"] == per_module["lm_head"] == 16_941_056
    # 75,497,472 x 2 + 33,554,432 + 150,994,944 + 2 x 16,941,056 = 369,426,432 B (352.3 MiB)
    assert total == 369_426_432


def test_at_tp_2_the_column_outputs_row_inputs_and_the_head_s_vocab_are_halved() -> None:
    per_module, total = _per_module(FOUR_RANK_16, tp=2)
    # qkv_proj: A unchanged 786,432; B (4, 6144 / 2, 16) = 196,608; 983,040 x 64 = 62,914,560
    assert per_module["qkv_proj"] == 62_914_560
    # o_proj: A (4, 16, 2048) = 131,072; B 262,144; 393,216 x 64 = 25,165,824
    assert per_module["o_proj"] == 25_165_824
    # gate_up_proj: A 524,288; B (4, 14,336, 16) = 917,504; 1,441,792 x 64 = 92,274,688
    assert per_module["gate_up_proj"] == 92_274_688
    # down_proj: A (4, 16, 7168) = 458,752; B 262,144; 720,896 x 64 = 46,137,344
    assert per_module["down_proj"] == 46_137_344
    # embed_tokens stays whole: 16,941,056. lm_head's B: 128,256 padded to 64 is 128,256
    # (2004 x 64), 64,128 a rank: (4, 64,128, 16) = 4,104,192; (262,144 + 4,104,192) x 2 =
    # 8,732,672
    assert per_module["embed_tokens"] == 16_941_056
    assert per_module["lm_head"] == 8_732_672
    # 62,914,560 + 25,165,824 + 92,274,688 + 46,137,344 + 16,941,056 + 8,732,672 = 252,166,144
    assert total == 252_166_144


def test_named_modules_are_normalised_as_sglang_does() -> None:
    # q_proj alone still allocates the whole stacked qkv_proj buffer (get_normalized_target_
    # modules maps q/k/v_proj to qkv_proj): 75,497,472 B as above
    options = EngineOptions(
        engine=Engine.SGLANG,
        enable_lora=True,
        max_loras_per_batch=4,
        max_lora_rank=16,
        lora_target_modules="q_proj,v_proj",
    )
    per_module, total = _per_module(options, tp=1)
    assert per_module == {"qkv_proj": 75_497_472}
    assert total == 75_497_472
    assert sglang_target_modules("gate_proj up_proj down_proj", V0523) == {
        "gate_up_proj",
        "down_proj",
    }


def test_the_pool_loses_exactly_the_buffers() -> None:
    # rest_memory is read after the LoRAManager allocated its pool (ModelRunner.initialize,
    # kv_cache_configurator.py _profile_available_bytes): the KV pool shrinks by 369,426,432 B
    workload = Workload(max_model_len=8192)
    plain = compute_capacity(
        LLAMA_31_8B,
        H100_TORCH,
        workload,
        Parallelism(),
        EngineOptions(engine=Engine.SGLANG, engine_version="0.5.23"),
    )
    lora = compute_capacity(LLAMA_31_8B, H100_TORCH, workload, Parallelism(), FOUR_RANK_16)
    assert plain.budget.pool_bytes - lora.budget.pool_bytes == 369_426_432
    (line,) = [x for x in lora.budget.lines if x.name == "lora_adapters"]
    assert line.bytes == -369_426_432
    # SGLang's pool is tokens of 131,072 B (32 layers x 2 x 8 x 128 x 2 B): the buffers are
    # 369,426,432 / 131,072 = 2818.5 tokens, so the pool holds 2818 or 2819 fewer
    assert plain.kv_cache_tokens - lora.kv_cache_tokens in (2818, 2819)


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"lora_target_modules": "all"}, "max_lora_rank", "--max-lora-rank"),
        ({"max_lora_rank": 16}, "lora_target_modules", "--lora-target-modules"),
        (
            {"max_lora_rank": 16, "lora_target_modules": "q_proj,kv_b_proj"},
            "lora_target_modules",
            "kv_b_proj",
        ),
        (
            {"max_lora_rank": 16, "lora_target_modules": "all q_proj"},
            "lora_target_modules",
            "alone",
        ),
        (
            {"max_lora_rank": 16, "lora_target_modules": "all", "engine_version": "0.5.10"},
            "lora_target_modules",
            "0.5.12",
        ),
        (
            {"max_lora_rank": 16, "lora_target_modules": "lm_head", "engine_version": "0.5.10"},
            "lora_target_modules",
            "0.5.12",
        ),
        (
            {"max_lora_rank": 16, "lora_target_modules": "q_proj", "engine_version": "0.4.10"},
            "enable_lora",
            "from 0.5.1",
        ),
        (
            {"max_lora_rank": 16, "lora_target_modules": "q_proj", "max_loras": 4},
            "max_loras",
            "engine=vllm",
        ),
    ],
)
def test_what_kvplan_does_not_size_is_refused_by_name(
    options: dict[str, object], field: str, words: str
) -> None:
    asked = EngineOptions(engine=Engine.SGLANG, enable_lora=True, **options)  # type: ignore[arg-type]
    with pytest.raises(SizingError) as raised:
        compute_capacity(
            LLAMA_31_8B, H100_TORCH, Workload(max_model_len=8192), Parallelism(), asked
        )
    assert raised.value.field == field
    assert words in raised.value.reason
