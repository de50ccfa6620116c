"""vLLM expert parallelism, DP over a MoE's experts and decode context parallelism (issue 21).

DeepSeek-V3 (tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V3.json, its SOURCES.md) on
8 x H200 at DP 8 + EP against TP 8, worked by hand from the engine's code (vLLM 0.33.0):
vllm/model_executor/layers/fused_moe/config.py `FusedMoEParallelConfig.make` (experts over
DP x TP ranks, whole experts with --enable-expert-parallel), fused_moe/expert_map_manager.py
`determine_expert_map` (global // ep experts per rank, one more on the first global % ep
ranks), v1/kv_cache_interface.py `FullAttentionSpec.max_memory_usage_bytes` and
v1/core/kv_cache_utils.py `get_kv_cache_capacity` (DCP: cdiv(max_model_len, dcp) tokens per
rank, tokens = int(concurrency x max_model_len)).

The checkpoint, by hand (config: hidden_size 7168, moe_intermediate_size 2048,
n_routed_experts 256, num_hidden_layers 61, first_k_dense_replace 3, fp8 with 128 x 128 block
scales, kv_lora_rank 512, qk_rope_head_dim 64):

* one expert matrix 2048 x 7168: 14,680,064 fp8 values + (2048/128) x (7168/128) = 896 fp32
  scales = 3,584 B -> 14,683,648 B; gate, up, down: 44,050,944 B per expert per layer;
* routed experts: 44,050,944 x 256 experts x 58 MoE layers = 654,068,416,512 B; one expert
  over the 58 layers: 654,068,416,512 / 256 = 2,554,954,752 B;
* the served checkpoint (MTP layer left out) is 673,150,582,112 B, so everything but the routed
  experts (attention, the 3 dense MLPs, shared experts, routers, embeddings, lm_head, norms) is
  673,150,582,112 - 654,068,416,512 = 19,082,165,600 B.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from service.sizing import architecture_from_hf_config
from service.sizing.capacity import Capacity, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions, Gpu, Parallelism, Workload
from service.sizing.engines.expert_parallel import NO_EXPERT_PARALLEL, ExpertParallel
from service.sizing.errors import SizingError
from service.sizing.model.architecture import ModelArchitecture
from service.sizing.planning.planner import PlanRequest, plan

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
# the catalog's h200-141gb: total memory as the CUDA runtime reports it
H200 = Gpu(memory_bytes=150_109_106_995, name="NVIDIA H200 141GB", slug="h200-141gb")
ROUTED = 654_068_416_512
REST = 19_082_165_600
PER_EXPERT = 2_554_954_752
# vLLM's model_memory_usage adds the rotary cos/sin cache: max_position_embeddings 163,840 x
# qk_rope_head_dim 64 x 2 B = 20,971,520 B (vocab 129,280 is a multiple of 64: no padding).
ROTARY = 163_840 * 64 * 2
# MLA: one latent of 512 + 64 values per token per layer, bf16, whole on every TP rank:
# 61 x 576 x 2 = 70,272 B per token per GPU; a block of 16 tokens (FLASH_ATTN_MLA on Hopper)
# is 1,124,352 B.
BLOCK_BYTES = 16 * 61 * 576 * 2
EP = ExpertParallel(enable_expert_parallel=True)


@pytest.fixture(scope="module")
def v3() -> ModelArchitecture:
    path = FIXTURES / "deepseek-ai--DeepSeek-V3.json"
    return architecture_from_hf_config(json.loads(path.read_text(encoding="utf-8")))


def size(
    arch: ModelArchitecture,
    parallel: Parallelism,
    flags: ExpertParallel = NO_EXPERT_PARALLEL,
    max_model_len: int = 32768,
) -> Capacity:
    return compute_capacity(
        arch, H200, Workload(max_model_len), parallel, EngineOptions(expert_parallel=flags)
    )


def test_the_routed_experts_share_is_read_from_the_config(v3: ModelArchitecture) -> None:
    routed = v3.routed_experts
    assert routed is not None
    # 3 x 2048 x 7168 parameters per expert per layer x 256 x 58 = 653,908,770,816
    assert routed.parameters == 3 * 2048 * 7168 * 256 * 58 == 653_908_770_816
    assert routed.bytes == ROUTED == 44_050_944 * 256 * 58
    assert v3.weight_bytes == ROUTED + REST


def test_dp8_ep_holds_32_whole_experts_and_the_rest_whole_on_every_rank(
    v3: ModelArchitecture,
) -> None:
    dp8 = size(v3, Parallelism(1, 1, 8), EP)
    # 256 experts / EP 8 = 32 per rank: 32 x 2,554,954,752 = 81,758,552,064 B, plus the rest
    # whole at TP 1: 19,082,165,600 -> 100,840,717,664 B (93.92 GiB)
    assert dp8.weights_bytes_per_gpu == 32 * PER_EXPERT + REST == 100_840_717_664
    assert dp8.budget.weights_bytes == 100_840_717_664 + ROTARY
    assert dp8.engine_settings["expert_parallel_size"] == 8
    assert dp8.engine_settings["local_num_experts"] == 32
    weights_line = next(line for line in dp8.budget.lines if line.name == "weights")
    assert "32 of 256 experts" in weights_line.note
    assert "whole on every DP rank" in weights_line.note


def test_tp8_shards_every_weight_eightfold(v3: ModelArchitecture) -> None:
    tp8 = size(v3, Parallelism(8, 1, 1))
    # 673,150,582,112 / 8 = 84,143,822,764 B (78.37 GiB)
    assert tp8.weights_bytes_per_gpu == -(-(ROUTED + REST) // 8) == 84_143_822_764
    assert tp8.budget.weights_bytes == 84_143_822_764 + ROTARY


def test_dp8_holds_eight_pools_of_its_own_sequences_tp8_one(v3: ModelArchitecture) -> None:
    dp8 = size(v3, Parallelism(1, 1, 8), EP)
    tp8 = size(v3, Parallelism(8, 1, 1))
    for answer in (dp8, tp8):
        # the MLA latent is whole on every GPU: a block costs 1,124,352 B at TP 8 as at TP 1
        assert answer.layout.bytes_per_block == BLOCK_BYTES
        assert answer.num_gpu_blocks == answer.kv_pool_bytes // BLOCK_BYTES
        # 0.33: concurrency = blocks / cdiv(32768, 16) = blocks / 2048; tokens = int(c x M)
        assert answer.report.max_concurrency == answer.num_gpu_blocks / 2048
        assert answer.kv_cache_tokens == int(answer.num_gpu_blocks / 2048 * 32768)
    # each DP rank its own pool: the deployment's tokens are 8 x one rank's
    assert dp8.kv_cache_tokens_total == 8 * dp8.kv_cache_tokens
    assert dp8.max_concurrency_total == round(8 * dp8.report.max_concurrency, 2)
    assert dp8.total_max_num_seqs == 8 * dp8.max_num_seqs
    # TP 8 is one engine: its 8 GPUs hold one pool of replicated latents
    assert tp8.kv_cache_tokens_total == tp8.kv_cache_tokens
    # DP 8 spends 100,840,717,664 - 84,143,822,764 = 16,696,894,900 B more on weights per
    # GPU (the 19,082,165,600 B of attention, dense layers and embeddings whole, where TP 8
    # holds an eighth of everything), so each rank's pool is smaller; yet 8 pools of whole
    # latents hold more than TP 8's one (8 x 30.33 GB against 45.69 GB on this GPU: 5.3x; each
    # rank's pool also gives 0.33's default allgather_reducescatter its 939,524,096-B gather)
    assert dp8.kv_pool_bytes < tp8.kv_pool_bytes
    assert dp8.kv_cache_tokens_total > 5 * tp8.kv_cache_tokens_total


def test_dp8_without_ep_tensor_shards_the_experts_over_the_8_ranks(
    v3: ModelArchitecture,
) -> None:
    dp8 = size(v3, Parallelism(1, 1, 8))
    # FusedMoEParallelConfig.make without use_ep: MoE TP = DP x TP = 8; experts / 8 =
    # 81,758,552,064 B, the same bytes as 32 whole experts
    assert dp8.weights_bytes_per_gpu == ROUTED // 8 + REST
    assert "expert_parallel_size" not in dp8.engine_settings


def test_redundant_experts_add_experts_per_rank(v3: ModelArchitecture) -> None:
    flags = ExpertParallel(enable_expert_parallel=True, enable_eplb=True, num_redundant_experts=32)
    dp8 = size(v3, Parallelism(1, 1, 8), flags)
    # (256 + 32) / 8 = 36 experts per rank
    assert dp8.engine_settings["local_num_experts"] == 36
    assert dp8.weights_bytes_per_gpu == 36 * PER_EXPERT + REST


def test_experts_that_do_not_divide_give_rank_0_one_more(v3: ModelArchitecture) -> None:
    # DP 3 x TP 1 = 3 EP ranks: 256 = 3 x 85 + 1 -> rank 0 holds 86 (determine_expert_map)
    dp3 = size(v3, Parallelism(1, 1, 3), EP)
    assert dp3.engine_settings["local_num_experts"] == 86
    assert dp3.weights_bytes_per_gpu == 86 * PER_EXPERT + REST


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (ExpertParallel(enable_eplb=True), "enable_eplb"),
        (
            ExpertParallel(enable_expert_parallel=True, num_redundant_experts=8),
            "num_redundant_experts",
        ),
        # 256 + 4 = 260 experts over 8 ranks do not divide: EPLB refuses
        (
            ExpertParallel(enable_expert_parallel=True, enable_eplb=True, num_redundant_experts=4),
            "num_redundant_experts",
        ),
    ],
)
def test_what_vllm_refuses_is_refused_by_name(
    v3: ModelArchitecture, flags: ExpertParallel, field: str
) -> None:
    with pytest.raises(SizingError) as refused:
        size(v3, Parallelism(1, 1, 8), flags)
    assert refused.value.field == field


def test_other_engines_refuse_vllms_flags(v3: ModelArchitecture) -> None:
    with pytest.raises(SizingError) as refused:
        compute_capacity(
            v3,
            H200,
            Workload(32768),
            Parallelism(8),
            EngineOptions(engine=Engine.SGLANG, expert_parallel=EP),
        )
    assert refused.value.field == "enable_expert_parallel"


def test_dcp_8_keeps_an_eighth_of_each_sequence_per_rank(v3: ModelArchitecture) -> None:
    tp8 = size(v3, Parallelism(8, 1, 1))
    dcp8 = size(v3, Parallelism(8, 1, 1), ExpertParallel(decode_context_parallel_size=8))
    # the same pool and blocks: DCP changes what a request holds, not the budget
    assert dcp8.num_gpu_blocks == tp8.num_gpu_blocks
    # one request: cdiv(cdiv(32768, 8), 16) = 256 blocks per rank, against 2048
    assert dcp8.layout.blocks_per_request == 256
    assert dcp8.report.max_concurrency == dcp8.num_gpu_blocks / 256
    assert dcp8.kv_cache_tokens == int(dcp8.num_gpu_blocks / 256 * 32768)
    assert dcp8.max_num_seqs == (dcp8.num_gpu_blocks - 1) // 256


def test_dcp_before_021_multiplies_the_logged_tokens(v3: ModelArchitecture) -> None:
    answer = compute_capacity(
        v3,
        H200,
        Workload(32768),
        Parallelism(8),
        EngineOptions(
            engine_version="0.11.0", expert_parallel=ExpertParallel(decode_context_parallel_size=8)
        ),
    )
    # 0.11.0 kv_cache_utils: num_tokens = blocks x block_size, then x dcp_world_size
    assert answer.kv_cache_tokens == answer.num_gpu_blocks * answer.layout.block_size * 8


def test_dcp_must_divide_tp_and_needs_a_release_that_serves_it(v3: ModelArchitecture) -> None:
    with pytest.raises(SizingError) as refused:
        size(v3, Parallelism(4), ExpertParallel(decode_context_parallel_size=8))
    assert refused.value.field == "decode_context_parallel_size"
    with pytest.raises(SizingError) as old:
        compute_capacity(
            v3,
            H200,
            Workload(32768),
            Parallelism(8),
            EngineOptions(
                engine_version="0.10.1",
                expert_parallel=ExpertParallel(decode_context_parallel_size=8),
            ),
        )
    assert old.value.field == "decode_context_parallel_size"


# ---- the planner tries DP + EP beside the TP layouts --------------------------------------


def test_the_plan_offers_dp8_ep_beside_tp8(v3: ModelArchitecture) -> None:
    priced = replace(H200, price_usd_per_hour=3.0)
    answer = plan(v3, [priced], PlanRequest(max_model_len=32768, peak_concurrency=256))
    options = [answer.recommendation, *answer.alternatives]
    dp8 = next(o for o in options if o is not None and o.data_parallel_size == 8)
    tp8 = next(o for o in options if o is not None and o.tensor_parallel_size == 8)
    rank = size(v3, Parallelism(1, 1, 8), EP)
    # a replica is the 8 DP ranks: 8 x the sequences one rank's pool holds
    assert dp8.sequences_per_replica == 8 * rank.max_num_seqs
    assert dp8.gpus_per_node == 8
    assert dp8.total_gpus == 8 * dp8.replicas
    # max_num_seqs is per DP rank, as vLLM's --max-num-seqs is
    assert dp8.max_num_seqs == rank.max_num_seqs
    vllm = dp8.engine_flags["vllm"]
    assert "--data-parallel-size 8" in vllm
    assert "--enable-expert-parallel" in vllm
    assert "--tensor-parallel-size 1" in vllm
    assert "sglang" not in dp8.engine_flags  # SGLang's DP attention is not modelled
    # fewer GPUs for the same peak: DP 8 holds 8 pools of whole latents, TP 8 one
    assert dp8.total_gpus < tp8.total_gpus
    assert answer.recommendation is dp8


def test_without_the_experts_share_ep_over_tp_alone_still_answers(v3: ModelArchitecture) -> None:
    unknown = replace(v3, routed_experts_known=None)
    assert unknown.routed_experts is None
    # EP 8 over TP 8: 256 / 8 = 32 whole experts a rank, the bytes of 1/8 of every expert
    tp8_ep = size(unknown, Parallelism(8), EP)
    assert tp8_ep.weights_bytes_per_gpu == size(v3, Parallelism(8)).weights_bytes_per_gpu
    assert tp8_ep.engine_settings["local_num_experts"] == 32
    # across DP ranks the dense layers are not sharded like the experts: the share is needed
    with pytest.raises(SizingError) as refused:
        size(unknown, Parallelism(1, 1, 8), EP)
    assert refused.value.field == "enable_expert_parallel"
    # DP without EP is answered at 1/TP of every weight, with a warning saying it is more
    dp8 = size(unknown, Parallelism(1, 1, 8))
    assert dp8.weights_bytes_per_gpu == ROUTED + REST
    assert any("experts' share" in warning for warning in dp8.warnings)


def test_a_release_before_the_ones_read_is_sized_with_a_warning(v3: ModelArchitecture) -> None:
    old = compute_capacity(
        v3,
        H200,
        Workload(32768),
        Parallelism(1, 1, 8),
        EngineOptions(engine_version="0.10.2", expert_parallel=EP),
    )
    assert old.weights_bytes_per_gpu == 32 * PER_EXPERT + REST
    assert any("read in vLLM 0.11.0 and 0.33.0" in warning for warning in old.warnings)
    assert not any("read in vLLM" in w for w in size(v3, Parallelism(1, 1, 8), EP).warnings)
