"""vLLM's non-torch memory where the device decides it (issue 21 item 6), worked from vLLM's code.

The custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py
CustomAllreduce.__init__, wheels 0.11.0 ... 0.33.0) turns itself off for one rank, for a world
size outside [2, 4, 6, 8] (16 from 0.33.0), for a group spanning nodes, and "because it's not
supported on more than two PCIe-only GPUs"; `--disable-custom-all-reduce` keeps it from being
built (cuda_communicator.py). Its buffers are what the H100 tensor-parallel logs show growing
outside torch (engines/calibration.py VLLM_NON_TORCH_TP2, VLLM_NON_TORCH_PER_TP_RANK); without
it NCCL alone grows about as one GPU (VLLM_NON_TORCH_INCREASE, 0.25 GiB).

Intel XPU (vllm/v1/worker/xpu_worker.py): up to 0.15.x XPUWorker.determine_available_memory
charges a client GPU exactly 128 MiB (xpu_get_mem_info); from 0.16.0 gpu_worker.py's profile
measures it as on CUDA, 1.50 GiB on issue 21's Arc Pro B60 log.
"""

from __future__ import annotations

import pytest

from service.sizing.engines import calibration as cal
from service.sizing.engines.common import EngineOptions, Gpu
from service.sizing.engines.vllm import parse_vllm_version, vllm_non_torch_bytes, vllm_release
from service.sizing.engines.vllm_platform import device_memory
from service.sizing.units import GiB, MiB

H100 = Gpu(memory_bytes=85_029_158_912, name="NVIDIA H100 80GB HBM3", fully_connected=True)
L40S = Gpu(memory_bytes=47_663_399_567, name="NVIDIA L40S", fully_connected=False)
B60 = Gpu(memory_bytes=24 * GiB, name="Intel(R) Arc(TM) Pro B60 Graphics")
MAX_1550 = Gpu(memory_bytes=128 * GiB, name="Intel(R) Data Center GPU Max 1550")


def _non_torch(gpu: Gpu, tp: int, version: str = "0.19.0", *, disable: bool = False) -> int:
    release = vllm_release(parse_vllm_version(version))
    options = EngineOptions(disable_custom_all_reduce=disable)
    device = device_memory(gpu, tp, options, release.version)
    return vllm_non_torch_bytes(release, tp, 1, device)


def test_eight_pcie_l40s_lose_the_custom_all_reduce_buffers() -> None:
    # issue 21: an 8 x L40S TP 8 log shows 0.21 GiB of non-torch memory where kvplan charged
    # the H100 figure, 2.07 + 6 x 0.05 = 2.37 GiB: round(2.07 x 2^30) = 2,222,645,576 B plus
    # 6 x round(0.05 x 2^30) = 6 x 53,687,091 = 322,122,546 B: 2,544,768,122 B.
    assert _non_torch(H100, 8) == 2_544_768_122
    assert round(2_544_768_122 / GiB, 2) == 2.37
    # Eight PCIe-only GPUs: world_size 8 > 2 and not fully connected -> NCCL alone, charged as
    # one GPU's growth, 0.25 GiB = 268,435,456 B: 0.04 GiB above the log's 0.21, not 2.16.
    assert _non_torch(L40S, 8) == 268_435_456 == cal.VLLM_NON_TORCH_INCREASE


def test_two_pcie_gpus_keep_it_and_the_flag_turns_it_off_anywhere() -> None:
    # world_size 2 passes the PCIe check (it needs `world_size > 2`): 2.07 GiB on two L40S too
    assert _non_torch(L40S, 2) == cal.VLLM_NON_TORCH_TP2 == 2_222_645_576
    # --disable-custom-all-reduce on NVLink: no buffers
    assert _non_torch(H100, 8, disable=True) == cal.VLLM_NON_TORCH_INCREASE


@pytest.mark.parametrize(
    ("tp", "version", "on"),
    [
        (3, "0.19.0", False),  # _SUPPORTED_WORLD_SIZES [2, 4, 6, 8]: 3 is not one
        (6, "0.19.0", True),
        (16, "0.20.0", False),  # 16 GPUs of 8 per node: the group spans nodes
        (16, "0.33.0", False),  # 0.33.0 lists 16, but H100 nodes hold 8: still two nodes
    ],
)
def test_world_sizes_and_nodes(tp: int, version: str, on: bool) -> None:
    release = vllm_release(parse_vllm_version(version))
    assert device_memory(H100, tp, EngineOptions(), release.version).custom_all_reduce is on


def test_a_gpu_whose_links_are_not_known_is_taken_as_linked() -> None:
    unknown = Gpu(memory_bytes=H100.memory_bytes, name="NVIDIA H100 80GB HBM3")
    assert _non_torch(unknown, 8) == _non_torch(H100, 8)


def test_an_intel_client_gpu_before_0_16_charges_the_xpu_workers_128_mib() -> None:
    # xpu_worker.py xpu_get_mem_info (0.11.0 ... 0.15.0): a client GPU's free memory is
    # total - (torch allocated + 128 MiB), so determine_available_memory's non-torch term,
    # (total - free) - torch allocated, is 128 x 2^20 = 134,217,728 B at any TP.
    assert _non_torch(B60, 1, "0.14.0") == 134_217_728 == 128 * MiB
    assert _non_torch(B60, 2, "0.15.0") == 134_217_728


def test_an_intel_gpu_from_0_16_charges_what_the_b60_log_printed() -> None:
    # 0.16.0 dropped the XPU worker's own profile: gpu_worker.py measures the growth, which
    # issue 21's Arc Pro B60 log prints as 1.50 GiB (kvplan charged CUDA's 0.25):
    # round(1.5 x 2^30) = 1,610,612,736 B.
    assert _non_torch(B60, 1, "0.16.0") == 1_610_612_736
    assert _non_torch(B60, 1, "0.33.0") == 1_610_612_736
    # A Data Center GPU Max measured everything before 0.16; no log of one is known, so it
    # is charged the B60's figure and its budget line says so.
    release = vllm_release(parse_vllm_version("0.14.0"))
    device = device_memory(MAX_1550, 1, EngineOptions(), release.version)
    assert device.non_torch_bytes == 1_610_612_736
    assert "no Data Center GPU log known" in device.why
