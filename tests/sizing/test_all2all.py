"""vLLM's all-to-all backends under DP + EP: DeepEP's buffers and the gathered activations
(issue 21, engines/all2all.py).

DeepSeek-V3 (tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V3.json: hidden_size 7168,
n_routed_experts 256) on 8 x H200 at DP 8 + EP, worked by hand from vLLM 0.33.0's
vllm/distributed/device_communicators/all2all.py (`DeepEPHTAll2AllManager._make_all2all_kwargs`,
`DeepEPLLAll2AllManager._make_all2all_kwargs`: num_nvl_bytes = VLLM_DEEPEP_BUFFER_SIZE_MB 1024
MiB; HT num_rdma_bytes 0 inside one node; LL num_rdma_bytes =
`get_low_latency_rdma_size_hint`) and DeepEP v1.2.1's csrc/config.hpp `LowLatencyLayout` and
csrc/deep_ep.cpp `Buffer::Buffer` (cudaMalloc of num_nvl_bytes + 8 x (4 + 8 + 8) = 160 B of
slots; a 32 MiB workspace).

The low-latency RDMA buffer at T = 256 tokens per rank (0.33.0: max_num_batched_tokens, whose
default is 256 for deepep_low_latency with EP and DP > 1, SchedulerConfig
DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP), hidden H = 7168, E = 256 experts:

* scales = 7168 / 128 = 56; dispatch message = 16 + max(2 x 7168, 7168 + 4 x 56)
  = 16 + 14,336 = 14,352 B; combine message = 4 x 56 + 2 x 7168 = 14,560 B;
* send = max(256 x 14,352, 256 x 256 x 14,560) = 954,204,160 B, twice;
* receive = 256 x 256 x max(14,352, 14,560) = 954,204,160 B, twice;
* signalling = 256 x 4 = 1,024 B (a multiple of 128), twice;
* total = 4 x 954,204,160 + 2,048 = 3,816,818,688 B; (total + 128) // 128 x 128
  = 3,816,818,816 B.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from service.sizing import architecture_from_hf_config
from service.sizing.capacity import Capacity, compute_capacity
from service.sizing.engines.all2all import (
    deepep_ll_hidden,
    deepep_low_latency_rdma_bytes,
    deepep_normal_nvl_bytes,
)
from service.sizing.engines.common import Engine, EngineOptions, Gpu, Parallelism, Workload
from service.sizing.engines.expert_parallel import ExpertParallel
from service.sizing.engines.sglang_dp import SglangParallel
from service.sizing.errors import SizingError
from service.sizing.model.architecture import ModelArchitecture

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
H200 = Gpu(memory_bytes=150_109_106_995, name="NVIDIA H200 141GB", slug="h200-141gb")
NVL = 1024 * 1024 * 1024 + 160  # num_nvl_bytes + the barrier and pointer slots
WORKSPACE = 32 * 1024 * 1024
LL_RDMA = 3_816_818_816


@pytest.fixture(scope="module")
def v3() -> ModelArchitecture:
    path = FIXTURES / "deepseek-ai--DeepSeek-V3.json"
    return architecture_from_hf_config(json.loads(path.read_text(encoding="utf-8")))


def dp8(
    arch: ModelArchitecture, backend: str | None, version: str | None = None, ep: bool = True
) -> Capacity:
    flags = ExpertParallel(enable_expert_parallel=ep, all2all_backend=backend)
    return compute_capacity(
        arch,
        H200,
        Workload(32768),
        Parallelism(1, 1, 8),
        EngineOptions(engine_version=version, expert_parallel=flags),
    )


def line(answer: Capacity, name: str) -> int:
    return next(item.bytes for item in answer.budget.lines if item.name == name)


def test_the_low_latency_rdma_hint_as_deepep_lays_it_out() -> None:
    assert deepep_low_latency_rdma_bytes(256, 7168, 256) == LL_RDMA
    assert 4 * 954_204_160 + 2_048 == 3_816_818_688


def test_deepep_low_latency_charges_its_buffers_to_the_pool(v3: ModelArchitecture) -> None:
    answer = dp8(v3, "deepep_low_latency")
    # 1,073,741,984 + 33,554,432 + 3,816,818,816 = 4,924,115,232 B (4.59 GiB)
    assert line(answer, "all2all_buffers") == -(NVL + WORKSPACE + LL_RDMA) == -4_924_115_232
    assert answer.engine_settings["max_num_batched_tokens"] == 256
    assert any("NVSHMEM" in warning for warning in answer.warnings)
    lines = {item.name: item.bytes for item in answer.budget.lines}
    assert "all2all_activations" not in lines
    # the pool is what the requested memory leaves after every line
    assert sum(lines.values()) - lines["total_memory"] == 2 * lines["kv_cache_memory"]


def test_deepep_high_throughput_keeps_one_nvlink_buffer_and_turns_graphs_off(
    v3: ModelArchitecture,
) -> None:
    answer = dp8(v3, "deepep_high_throughput")
    # 1,073,741,984 + 33,554,432 = 1,107,296,416 B; no RDMA buffer inside one node
    assert line(answer, "all2all_buffers") == -1_107_296_416
    assert answer.engine_settings["enforce_eager"] is True
    assert answer.budget.cudagraph_bytes == 0


def test_the_default_backend_gathers_every_ranks_tokens(v3: ModelArchitecture) -> None:
    answer = dp8(v3, None)
    # allgather_reducescatter (0.33.0's default): DP 8 x 8192 tokens (vllm serve on a >= 70 GiB
    # GPU) x hidden 7168 x 2 B (bf16) = 939,524,096 B
    assert line(answer, "all2all_activations") == -8 * 8192 * 7168 * 2 == -939_524_096
    assert answer.budget.activation_bytes >= 939_524_096
    # 0.10.2's default is naive, which gathers the same
    old = dp8(v3, None, "0.10.2")
    assert line(old, "all2all_activations") == -939_524_096
    assert "naive" in next(i.note for i in old.budget.lines if i.name == "all2all_activations")


def test_low_latency_before_020_sizes_the_rdma_buffer_at_the_dp_chunk(
    v3: ModelArchitecture,
) -> None:
    answer = dp8(v3, "deepep_low_latency", "0.14.0")
    # VLLM_MOE_DP_CHUNK_SIZE 256 tokens, the scheduler's budget left at 8192
    assert line(answer, "all2all_buffers") == -(NVL + WORKSPACE + LL_RDMA)
    assert answer.engine_settings["max_num_batched_tokens"] == 8192


def test_deepep_without_expert_parallel_gathers(v3: ModelArchitecture) -> None:
    answer = dp8(v3, "deepep_low_latency", ep=False)
    assert line(answer, "all2all_activations") == -939_524_096
    assert any("need enable_expert_parallel" in warning for warning in answer.warnings)


@pytest.mark.parametrize(
    ("backend", "version"),
    [
        ("pplx", "0.14.0"),
        ("nixl_ep", None),
        ("all_to_all", None),
        ("allgather_reducescatter", "0.10.2"),
    ],
)
def test_backends_kvplan_does_not_size_are_refused_by_name(
    v3: ModelArchitecture, backend: str, version: str | None
) -> None:
    with pytest.raises(SizingError) as refused:
        dp8(v3, backend, version)
    assert refused.value.field == "all2all_backend"


def test_removed_backends_fall_back_as_vllm_does(v3: ModelArchitecture) -> None:
    answer = dp8(v3, "pplx")
    assert line(answer, "all2all_activations") == -939_524_096
    assert any("runs allgather_reducescatter" in warning for warning in answer.warnings)


def test_no_all_to_all_at_dp_1(v3: ModelArchitecture) -> None:
    flags = ExpertParallel(enable_expert_parallel=True, all2all_backend="deepep_low_latency")
    answer = compute_capacity(
        v3, H200, Workload(32768), Parallelism(8), EngineOptions(expert_parallel=flags)
    )
    assert not any(item.name.startswith("all2all") for item in answer.budget.lines)
    assert any("changes nothing" in warning for warning in answer.warnings)


# ---- SGLang --moe-a2a-backend deepep (0.5.23 token_dispatcher/deepep.py get_deepep_buffer) ----
#
# At tp 8 (the EP group: server_args sets ep_size = tp_size), hidden 7168, 256 experts:
# * normal: get_nvl_buffer_size_hint(7168 x 2 B, 8 ranks) at DeepEP's 8-rank configs (recv
#   tokens 256; Buffer.num_sms 20 -> 10 channels): 10 x 8 x (2 + 3) x 4 = 1,600
#   + 10 x 8 x 256 x (14,336 + 8 SourceMeta) = 293,765,120 + 10 x 8 x 256 x 128 x (8 + 4)
#   = 31,457,280 + 10 x 8 x 256 x 128 x 4 = 10,485,760 -> 335,709,760, aligned up to 128:
#   335,709,824 B;
# * low latency at 128 tokens: send = receive = 256 x 128 x 14,560 = 477,102,080 B, twice
#   each, + 2 x 1,024 -> 1,908,410,368 + 128 = 1,908,410,496 B;
# * auto: 335,709,824 + 160 + 33,554,432 + 1,908,410,496 = 2,277,674,912 B.
# (sgl-project/sglang PR #28994 calls the 128-token low-latency buffer of a tp 8 / dp 8
# DeepSeek-V3.2, the same hidden size and experts, "~1.8 GiB": 1,908,410,496 B is 1.78 GiB.)
SGLANG_AUTO = 335_709_824 + 160 + 33_554_432 + 1_908_410_496


def sglang(
    arch: ModelArchitecture, flags: SglangParallel, version: str = "0.5.23", eager: bool = False
) -> Capacity:
    options = EngineOptions(
        engine=Engine.SGLANG, sglang_parallel=flags, engine_version=version, enforce_eager=eager
    )
    return compute_capacity(arch, H200, Workload(32768), Parallelism(8, 1, 8), options)


def test_sglang_deepep_buffers_by_mode() -> None:
    assert 1_600 + 293_765_120 + 31_457_280 + 10_485_760 == 335_709_760
    assert deepep_normal_nvl_bytes(7168 * 2, 8) == 335_709_824
    assert deepep_low_latency_rdma_bytes(128, 7168, 256) == 1_908_410_496
    assert SGLANG_AUTO == 2_277_674_912


def test_sglang_deepep_is_cut_out_of_the_reserve_which_grows_by_2_gib(
    v3: ModelArchitecture,
) -> None:
    dp8 = SglangParallel(enable_dp_attention=True, ep_size=8)
    plain = sglang(v3, dp8)
    deepep = sglang(v3, replace(dp8, moe_a2a_backend="deepep"))
    # memory_hook.py 0.5.23: reserved 33,280 MiB under DP attention 8 on this GPU
    # (143,155.57 MiB: mem_fraction_static 0.768), + 2048 MiB for DeepEP = 35,328 MiB:
    # round((143,155.57 - 35,328) / 143,155.57, 3) = 0.753
    assert plain.budget.fraction == 0.768
    assert deepep.budget.fraction == 0.753
    assert deepep.kv_pool_bytes < plain.kv_pool_bytes
    lines = {item.name: item.bytes for item in deepep.budget.lines}
    assert lines["all2all_buffers"] == -SGLANG_AUTO
    # the buffer does not come off the pool: reserved + buffers is the whole reserve
    assert lines["reserved"] + lines["all2all_buffers"] == -deepep.budget.activation_bytes
    assert deepep.engine_settings["ep_size"] == 8


def test_sglang_deepep_normal_keeps_no_graph_reserve(v3: ModelArchitecture) -> None:
    dp8 = SglangParallel(enable_dp_attention=True, ep_size=8, moe_a2a_backend="deepep")
    normal = sglang(v3, replace(dp8, deepep_mode="normal"))
    # normal mode turns CUDA graphs off: no 2048 MiB; its buffer is the NVLink one alone
    assert normal.budget.fraction == 0.768
    lines = {item.name: item.bytes for item in normal.budget.lines}
    assert lines["all2all_buffers"] == -(335_709_824 + 160 + 33_554_432)
    # 0.5.5 keeps no DeepEP reserve
    old = sglang(v3, dp8, version="0.5.5")
    assert old.budget.fraction == 0.768
    assert any("absent from 0.5.5" in warning for warning in old.warnings)


def test_sglang_backends_kvplan_does_not_size_are_refused(v3: ModelArchitecture) -> None:
    with pytest.raises(SizingError) as refused:
        sglang(v3, SglangParallel(moe_a2a_backend="mooncake"))
    assert refused.value.field == "moe_a2a_backend"


def test_low_latency_rounds_the_hidden_size_up_from_012() -> None:
    # DeepEPLLPrepareAndFinalize.maybe_roundup_layer_hidden_size (0.12.0+): gpt-oss's 2880
    # runs at 3072; 0.11.0's kernels take only the listed sizes (an assert)
    assert deepep_ll_hidden(2880, (0, 12, 0)) == 3072
    assert deepep_ll_hidden(7168, (0, 9, 2)) == 7168
    for hidden, version in ((2880, (0, 11, 0)), (6144, (0, 10, 2)), (12288, (0, 33, 0))):
        with pytest.raises(SizingError) as refused:
            deepep_ll_hidden(hidden, version)
        assert refused.value.field == "all2all_backend"
