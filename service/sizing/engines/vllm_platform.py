"""vLLM's non-torch memory where the device decides it (issue 21 item 6): the custom
all-reduce, off on PCIe-only nodes past two GPUs, and Intel XPUs, which measure their memory
their own way.

Sources, read in the released wheels 0.11.0, 0.14.0, 0.15.0, 0.16.0, 0.20.0 and 0.33.0:

- vllm/distributed/device_communicators/cuda_communicator.py `CudaCommunicator.__init__`: the
  custom all-reduce is built unless `--disable-custom-all-reduce`
  (parallel_state `_ENABLE_CUSTOM_ALL_REDUCE`); vllm/distributed/device_communicators/
  custom_all_reduce.py `CustomAllreduce.__init__` then turns itself off for one rank, for a
  world size outside `_SUPPORTED_WORLD_SIZES` ([2, 4, 6, 8] through 0.20.0; 0.33.0 adds 16),
  and "because it's not supported on more than two PCIe-only GPUs": `world_size > 2 and not
  fully_connected` (`current_platform.is_fully_connected`, NVLink between every pair). Off, it
  allocates none of its IPC buffers, and what the profile sees grow outside torch is NCCL's
  alone.
- vllm/v1/worker/xpu_worker.py `XPUWorker.determine_available_memory` (0.11.0 ... 0.15.0):
  util x total - (torch peak + non-torch), where non-torch is (total - free) - torch's
  allocated bytes after the profile; `xpu_get_mem_info` gives a client GPU (any name without
  "Data Center GPU", e.g. an Arc Pro B60) a free figure of total - (torch allocated + 128 MiB),
  so its non-torch memory is exactly 128 MiB ("FIXME ... we mark it as 128MB"). From 0.16.0
  the XPU worker has no `determine_available_memory` of its own: gpu_worker.py's profile runs
  with `current_platform.mem_get_info` (torch.xpu.mem_get_info), and the non-torch increase is
  what Level Zero and oneCCL took, measured like CUDA's.

Short local names: tp = tensor_parallel_size.
"""

from __future__ import annotations

from ..frozen import frozen
from ..units import GiB, MiB
from . import calibration as cal
from .common import EngineOptions, Gpu

Version = tuple[int, int, int]

# custom_all_reduce.py CustomAllreduce._SUPPORTED_WORLD_SIZES: [2, 4, 6, 8] in every wheel
# read through 0.20.0; 16 from cal.VLLM_CUSTOM_AR_16_RANKS.
CUSTOM_ALL_REDUCE_WORLD_SIZES = (2, 4, 6, 8)
XPU_CLIENT_NON_TORCH = 128 * MiB  # xpu_get_mem_info: "we mark it as 128MB"
# What gpu_worker.py's profile measures as non-torch growth on an Intel XPU (0.16+): issue 21's
# held-out Arc Pro B60 log prints 1.50 GiB (kvplan charged CUDA's 0.25 GiB). The log itself is
# not public; the figure is the issue's.
XPU_NON_TORCH_INCREASE = round(1.50 * GiB)


@frozen
class DeviceMemory:
    """What the device and the flags decide about one worker's non-torch memory."""

    platform: str  # "cuda" (NVIDIA, ROCm) or "xpu" (Intel)
    custom_all_reduce: bool
    why: str  # the reason, as the budget line says it
    # What the XPU worker charges in place of CUDA's figures (None on CUDA).
    non_torch_bytes: int | None = None


# What a question that names no device feature gets: NVLink-class links, flags as default.
LINKED = "custom all-reduce on (the GPUs' links taken as NVLink)"


def is_intel_xpu(gpu_name: str) -> bool:
    """An Intel GPU vLLM runs on its XPU platform (Arc, Arc Pro, Data Center GPU Max)."""
    name = gpu_name.lower()
    return "intel" in name or name.startswith("arc ") or "arc(tm)" in name


def is_xpu_data_center(gpu_name: str) -> bool:
    """platforms/xpu.py `is_data_center_gpu`: the device name says "Data Center GPU"."""
    return "data center gpu" in gpu_name.lower()


def custom_all_reduce_sizes(version: Version) -> tuple[int, ...]:
    if version >= cal.VLLM_CUSTOM_AR_16_RANKS:
        return (*CUSTOM_ALL_REDUCE_WORLD_SIZES, 16)
    return CUSTOM_ALL_REDUCE_WORLD_SIZES


def device_memory(gpu: Gpu, tp: int, options: EngineOptions, version: Version) -> DeviceMemory:
    """CudaCommunicator and CustomAllreduce.__init__'s decision for a tensor-parallel group of
    `tp` GPUs of one node (a pipeline stage's group is its TP group), or the XPU worker's."""
    if is_intel_xpu(gpu.name):
        return _xpu(gpu.name, version)
    if tp == 1:
        return DeviceMemory("cuda", False, "one GPU: no all-reduce")
    if options.disable_custom_all_reduce:
        return DeviceMemory("cuda", False, "custom all-reduce off (disable_custom_all_reduce)")
    if tp > gpu.max_gpus_per_node and not _rack_nvlink(gpu, version):
        return DeviceMemory(
            "cuda", False, f"custom all-reduce off: {tp} ranks span nodes (NCCL only)"
        )
    if tp not in custom_all_reduce_sizes(version):
        return DeviceMemory(
            "cuda", False, f"custom all-reduce off: it does not run on {tp} ranks (NCCL only)"
        )
    if tp > 2 and gpu.fully_connected is False:
        return DeviceMemory(
            "cuda", False, f"custom all-reduce off: {tp} PCIe-only GPUs (it needs NVLink past two)"
        )
    if gpu.fully_connected is None:
        return DeviceMemory("cuda", True, LINKED)
    return DeviceMemory("cuda", True, f"custom all-reduce on over {tp} GPUs")


def _rack_nvlink(gpu: Gpu, version: Version) -> bool:
    """GB200 / GB300 NVL72: NVLink across the rack's nodes, which the custom all-reduce uses
    from cal.VLLM_MNNVL_ALL_REDUCE (multi-node NVLink)."""
    rack = any(tag in gpu.name.lower() for tag in ("gb200", "gb300"))
    return rack and version >= cal.VLLM_MNNVL_ALL_REDUCE


def _xpu(gpu_name: str, version: Version) -> DeviceMemory:
    """The non-torch memory an XPU worker charges, by release and device."""
    if version < cal.VLLM_XPU_GPU_WORKER_PROFILE and not is_xpu_data_center(gpu_name):
        why = (
            "Intel client GPU before vLLM 0.16: the XPU worker's fixed 128 MiB "
            "(xpu_worker.py xpu_get_mem_info)"
        )
        return DeviceMemory("xpu", False, why, XPU_CLIENT_NON_TORCH)
    if version < cal.VLLM_XPU_GPU_WORKER_PROFILE:
        why = (
            "Intel Data Center GPU before vLLM 0.16: all memory outside torch, measured; "
            "kvplan charges the 1.50 GiB an Arc Pro B60 showed (no Data Center GPU log known)"
        )
        return DeviceMemory("xpu", False, why, XPU_NON_TORCH_INCREASE)
    why = (
        "Intel XPU: non-torch growth during profiling (Level Zero, oneCCL), "
        "1.50 GiB as an Arc Pro B60 log printed"
    )
    return DeviceMemory("xpu", False, why, XPU_NON_TORCH_INCREASE)
