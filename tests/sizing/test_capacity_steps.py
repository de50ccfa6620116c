"""The steps every engine shares: the checks, the model's facts, a given pool, one-pool layouts;
and the vLLM pipeline's own flag and fit steps.

Sources: ../shared/design/engine-memory.md (section 1.2: --kv-cache-memory-bytes replaces the
budget, PR #21489; section 2: SGLang's token pool; section 3: TensorRT-LLM's 32-token blocks),
vllm/engine/arg_utils.py (the `vllm serve` batch defaults), vllm/v1/core/kv_cache_utils.py
`_check_enough_kv_cache_memory` (the start-up fit check and its longest-context hint).
Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.sizing.capacity import (
    Gpu,
    Parallelism,
    SizingInputs,
    Workload,
    _check_parallelism,
    _check_workload,
    compute_capacity,
    model_facts,
)
from service.sizing.engines.common import (
    CacheLayout,
    Engine,
    EngineOptions,
    given_pool_budget,
    single_group_layout,
)
from service.sizing.engines.vllm import (
    VllmBlocks,
    _does_not_fit,
    parse_vllm_version,
    vllm_budget,
    vllm_flags,
    vllm_release,
    worker_layouts,
)
from service.sizing.errors import InvalidDtype, InvalidParallelism, SizingError
from service.sizing.model.architecture import (
    FullAttention,
    ModelArchitecture,
    MultiHeadLatentAttention,
)
from service.sizing.units import GiB, MiB, cdiv, gib_to_bytes

H100 = Gpu(gib_to_bytes(79.21), "NVIDIA H100 80GB HBM3", slug="h100-sxm-80gb")
LLAMA_31_8B = ModelArchitecture(
    layers=(FullAttention(8, 128),) * 32,
    num_attention_heads=32,
    weight_bytes=16 * GiB,
    max_position_embeddings=131_072,
)


def inputs(
    options: EngineOptions, max_model_len: int = 8192, parallel: Parallelism | None = None
) -> SizingInputs:
    parallel, workload = parallel or Parallelism(), Workload(max_model_len)
    stages = _check_parallelism(LLAMA_31_8B, H100, parallel)
    return SizingInputs(
        arch=LLAMA_31_8B,
        stages=stages,
        gpu=H100,
        workload=workload,
        parallel=parallel,
        engine=options,
        facts=model_facts(LLAMA_31_8B, stages, workload, parallel, options),
        warnings=(),
    )


# --- the checks every engine shares ---------------------------------------------------------


def test_tensor_parallelism_stays_inside_one_node_and_data_parallelism_is_positive() -> None:
    with pytest.raises(InvalidParallelism, match="more GPUs than one node of h100-sxm-80gb"):
        _check_parallelism(LLAMA_31_8B, H100, Parallelism(tensor_parallel_size=16))
    with pytest.raises(SizingError, match="at least 1"):
        _check_parallelism(LLAMA_31_8B, H100, Parallelism(data_parallel_size=0))
    # two stages of 16 layers (vllm/distributed/utils.py get_pp_indices)
    stages = _check_parallelism(LLAMA_31_8B, H100, Parallelism(pipeline_parallel_size=2))
    assert [stage.num_layers for stage in stages] == [16, 16]


def test_a_context_beyond_the_model_is_refused_unless_allowed_and_a_vllm_only_cache_an_error() -> (
    None
):
    # vLLM's _get_and_verify_max_len (vllm/config/model.py) refuses a max_model_len above the
    # derived 131,072 (max_position_embeddings) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
    with pytest.raises(SizingError, match="above the 131072 tokens vLLM derives") as refused:
        _check_workload(LLAMA_31_8B, Workload(262_144), EngineOptions())
    assert refused.value.field == "max_model_len"
    allowed = EngineOptions(allow_long_max_model_len=True)
    (warning,) = _check_workload(LLAMA_31_8B, Workload(262_144), allowed)
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in warning
    assert _check_workload(LLAMA_31_8B, Workload(131_072), EngineOptions()) == []
    sparse = ModelArchitecture(
        layers=(MultiHeadLatentAttention(512, 64, indexer_head_dim=128),) * 4,
        num_attention_heads=128,
    )
    with pytest.raises(InvalidDtype, match="sglang has none"):
        _check_workload(sparse, Workload(8192, "fp8_ds_mla"), EngineOptions(engine=Engine.SGLANG))


def test_model_facts_per_gpu_divide_by_tensor_and_pipeline_ranks() -> None:
    parallel, workload = (
        Parallelism(tensor_parallel_size=2, pipeline_parallel_size=2),
        Workload(8192),
    )
    stages = _check_parallelism(LLAMA_31_8B, H100, parallel)
    facts = model_facts(LLAMA_31_8B, stages, workload, parallel, EngineOptions())
    assert facts.kv_bytes_per_token == 131_072
    # one stage of 16 layers on one of 2 TP ranks: 16 x 4 heads x 256 x 2 B = 32,768 B
    assert facts.kv_bytes_per_token_per_gpu == 32_768
    # 8,192 tokens x 131,072 B = 1 GiB; 16 GiB of weights over 4 GPUs = 4 GiB each
    assert facts.kv_bytes_per_sequence == GiB
    assert (facts.weights_bytes, facts.weights_bytes_per_gpu) == (16 * GiB, 4 * GiB)


# --- a given pool and one-pool layouts ------------------------------------------------------


def test_a_given_pool_is_the_budget_whatever_the_engine() -> None:
    budget = given_pool_budget(
        total_bytes=H100.memory_bytes,
        weights_per_gpu=16 * GiB,
        pool_bytes=10 * GiB,
        fraction_name="free_gpu_memory_fraction",
        note="given",
    )
    # design section 1.2: available_kv = the value given; no fraction applies
    assert (budget.pool_bytes, budget.requested_bytes, budget.fraction) == (
        10 * GiB,
        10 * GiB,
        None,
    )
    assert budget.pool_given
    assert [(line.name, line.bytes) for line in budget.lines] == [
        ("total_memory", H100.memory_bytes),
        ("kv_cache_memory", 10 * GiB),
    ]


@pytest.mark.parametrize(
    ("block", "bytes_per_block", "per_request"),
    [
        # design section 3: TensorRT-LLM's 32-token blocks, 32 x 131,072 B = 4 MiB;
        # a 1,000-token request holds cdiv(1,000, 32) = 32 blocks
        (32, 4 * MiB, 32),
        # design section 2: SGLang's default page of one token; 1,000 pages
        (1, 131_072, 1000),
    ],
)
def test_one_pool_for_every_layer(block: int, bytes_per_block: int, per_request: int) -> None:
    layout = single_group_layout(131_072, block, 1000)
    assert (layout.bytes_per_block, layout.blocks_per_request) == (bytes_per_block, per_request)
    assert [(g.kind, g.block_size) for g in layout.groups] == [("all_layers", block)]


# --- vLLM flags and the start-up check ------------------------------------------------------


def test_vllm_serve_defaults_on_an_h100_and_the_batch_cap() -> None:
    release = vllm_release(parse_vllm_version("0.33.0"))
    flags = vllm_flags(inputs(EngineOptions(engine_version="0.33.0")), release)
    # arg_utils: >= 70 GiB and not an A100 -> 8,192 batched tokens, 1,024 sequences; CUDA
    # block size 16; prefix caching on by default for attention models (V1)
    assert (flags.max_num_batched_tokens, flags.max_num_seqs, flags.block_size) == (8192, 1024, 16)
    assert flags.prefix_caching
    assert flags.hybrid_manager
    # SchedulerConfig: max_num_seqs never above max_num_batched_tokens
    capped = vllm_flags(
        inputs(EngineOptions(max_num_seqs=4096, max_num_batched_tokens=2048)), release
    )
    assert capped.max_num_seqs == 2048


def test_the_start_up_check_names_the_longest_context_that_fits() -> None:
    release = vllm_release(parse_vllm_version("0.33.0"))
    sized = inputs(EngineOptions(kv_pool_bytes=300 * 2 * MiB))
    budget = vllm_budget(
        LLAMA_31_8B,
        release=release,
        total_bytes=H100.memory_bytes,
        weights_per_gpu=16 * GiB,
        tensor_parallel_size=1,
        options=sized.engine,
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
    )
    layout = CacheLayout((), 2 * MiB, cdiv(8192, 16), 16, 0, ())
    blocks = VllmBlocks(per_stage=(300,), num_blocks=300, worker=0, layout=layout)
    reason, longest = _does_not_fit(
        budget,
        blocks,
        release,
        8192,
        lambda context: CacheLayout((), 2 * MiB, cdiv(context, 16), 16, 0, ()),
    )
    # 0.33 checks one request against 300 - 1 = 299 blocks (the null block); 299 x 16 = 4,784
    assert longest == 4784
    assert reason == (
        "one sequence of 8192 tokens needs 512 blocks but the pool holds 300 (one is the null "
        "block); the longest max_model_len that fits is 4784"
    )


def test_from_0_11_workers_group_the_whole_model_and_project_it_on_their_stages() -> None:
    two = Parallelism(pipeline_parallel_size=2)
    new = inputs(EngineOptions(engine_version="0.11.0"), parallel=two)
    release = vllm_release(parse_vllm_version("0.11.0"))
    stages, sizes, layout_at = worker_layouts(new, release, vllm_flags(new, release))
    # kv_cache_utils get_kv_cache_configs: the specs of all workers merged, groups formed on the
    # whole model, then projected on each worker: one 32-layer group, 16 layers per stage, so a
    # block costs each stage 16 x 65,536 B = 1 MiB
    assert ([stage.num_layers for stage in stages], sizes) == ([32], (16, 16))
    assert layout_at(stages[0], 8192).stage_bytes_per_block == (MiB, MiB)
    # before 0.11 each stage grouped its own 16 layers
    old = inputs(EngineOptions(engine_version="0.10.2"), parallel=two)
    release = vllm_release(parse_vllm_version("0.10.2"))
    stages, sizes, layout_at = worker_layouts(old, release, vllm_flags(old, release))
    assert ([stage.num_layers for stage in stages], sizes) == ([16, 16], ())
    assert layout_at(stages[1], 8192).bytes_per_block == MiB


def test_a_layout_checked_once_still_answers_each_model_in_its_own_words() -> None:
    # capacity.checked_layout is memoised by the model, and a ModelArchitecture compares without
    # its weights_unknown (nor its name): two such models are one architecture to the memo,
    # whose key names both, so each answer's weights note (capacity.weights_note) is its own.
    unknown = ModelArchitecture(
        layers=(FullAttention(8, 128),) * 32,
        num_attention_heads=32,
        max_position_embeddings=131_072,
    )
    a = replace(unknown, weights_unknown=("num_parameters", "no count in the config"))
    b = replace(unknown, weights_unknown=("hidden_size", "not in the config"))
    assert a == b
    pool = EngineOptions(kv_pool_bytes=10 * GiB)  # a given pool: the weights are not needed
    for arch, field in ((a, "num_parameters"), (b, "hidden_size"), (a, "num_parameters")):
        answer = compute_capacity(arch, H100, Workload(8192), Parallelism(), pool)
        assert [w for w in answer.warnings if w.startswith("weights unknown")] == [
            f"weights unknown ({field}: {arch.weights_unknown[1]}); not needed, since "  # type: ignore[index]
            "kv_pool_bytes gives the pool, and shown as 0 in the budget"
        ]
