"""vLLM's all-to-all backends for a MoE under data parallelism: their buffers and the profile
run's all-gathered activations (issue 21).

Read in the vLLM wheels 0.9.2, 0.10.2, 0.11.0, 0.12.0, 0.14.0-0.20.0, 0.25.0 and 0.33.0, and in
DeepEP v1.2.1 (deepseek-ai/DeepEP, the tag of 2025-09-15):

* The backend: `VLLM_ALL2ALL_BACKEND` (vllm/envs.py), default "naive" up to 0.10.2 and
  "allgather_reducescatter" from 0.11.0; from 0.12.0 also `--all2all-backend`
  (config/parallel.py `ParallelConfig.all2all_backend`, the same default from 0.14.0). "pplx"
  falls back to allgather_reducescatter with a warning from 0.17.0, "naive" from 0.19.0
  (`ParallelConfig.__post_init__`: "The '%s' all2all backend has been removed").
* It is used only with `data_parallel_size` > 1 (`ParallelConfig.use_all2all`); the DeepEP
  kernels only with expert parallelism too (fused_moe/config.py `FusedMoEParallelConfig`
  `use_all2all_kernels`: dp_size > 1 and use_ep); otherwise a MoE under DP gathers its tokens
  (fused_moe/all2all_utils.py `maybe_make_prepare_finalize`: "Falling back to
  AllGather+ReduceScatter dispatch/combine").
* naive and allgather_reducescatter (device_communicators/all2all.py `NaiveAll2AllManager`,
  `AgRsAll2AllManager.dispatch`) keep no buffer: every MoE layer gathers the hidden states of
  all DP ranks, so in the profile run (each rank's dummy batch of max_num_batched_tokens) a
  rank holds DP x max_num_batched_tokens x hidden x the activation dtype beside its own forward.
* deepep_high_throughput (`DeepEPHTAll2AllManager._make_all2all_kwargs`): num_nvl_bytes =
  VLLM_DEEPEP_BUFFER_SIZE_MB (1024) MiB (1 GiB written out in 0.9.2-0.10.2); num_rdma_bytes 0
  inside one node, the same 1 GiB across nodes. CUDA graphs are turned off with DP > 1
  (platforms/cuda.py up to 0.12, config/compilation.py from 0.14: "DeepEP high-throughput
  kernels ... are incompatible with CUDA Graphs").
* deepep_low_latency (`DeepEPLLAll2AllManager._make_all2all_kwargs`): the same num_nvl_bytes
  and num_rdma_bytes = `deep_ep.Buffer.get_low_latency_rdma_size_hint(max_num_tokens_per_dp_rank,
  hidden, num_ep_ranks, num_global_experts)`, where max_num_tokens_per_dp_rank is
  `FusedMoEConfig.max_num_tokens`: VLLM_MOE_DP_CHUNK_SIZE (256) up to 0.19, the scheduler's
  max_num_batched_tokens from 0.20.0, whose default is then 256 for this backend with EP and
  DP > 1 (engine/arg_utils.py `_set_default_max_num_seqs_and_batched_tokens_args`,
  `SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`).
* DeepEP's `Buffer` (csrc/deep_ep.cpp `Buffer::Buffer`, v1.2.1) cudaMallocs num_nvl_bytes plus
  160 B of barrier and pointer slots (NUM_MAX_NVL_PEERS 8 x (4 + 8 + 8) B) and a 32 MiB
  workspace (NUM_WORKSPACE_BYTES), and takes num_rdma_bytes from NVSHMEM's symmetric heap
  (`internode::alloc`). csrc/config.hpp `LowLatencyLayout` / `get_low_latency_rdma_size_hint`:
  per token a dispatch message of 16 + max(2 x hidden, hidden + 4 x hidden / 128) B and a
  combine message of 4 x hidden / 128 + 2 x hidden B; two send buffers of max(T x dispatch,
  E x T x combine), two receive buffers of E x T x max(dispatch, combine), two signalling
  buffers of E x 4 B aligned to 128; the sum rounded up past the next 128 B
  ((n + 128) // 128 x 128).
* When: the buffers are built as the MoE layers' kernels are made, in load_model
  (`prepare_communication_buffer_for_model` to 0.14, the quantization oracles'
  `maybe_make_prepare_finalize` after it), after the worker's start-up snapshot and outside
  torch's allocator: vLLM's profile counts them in its non-torch increase, so they come off the
  KV pool (v1/worker/gpu_worker.py `determine_available_memory`).

SGLang's `--moe-a2a-backend deepep` is at the end of this module (`sglang_deepep`): its
buffer is made at the first dispatch, after the pool, out of the reserve.

Not modelled: NVSHMEM's own memory beside the RDMA buffer (a warning says so), the EP group's
NCCL communicators (non-torch memory is charged as for the rank's TP), the experts' workspace
over the gathered tokens, and the other backends (refused by name).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import ModelArchitecture
from ..units import MiB, cdiv
from .common import BudgetLine

if TYPE_CHECKING:
    from .common import Parallelism
    from .expert_parallel import ExpertParallel

Version = tuple[int, int, int]

VLLM_ALL2ALL_READ: Version = (0, 9, 2)  # the first wheel read; earlier ones are sized as it
VLLM_AGRS_DEFAULT: Version = (0, 11, 0)  # envs.py: "allgather_reducescatter" (0.10.2: "naive")
VLLM_PPLX_FALLS_BACK: Version = (0, 17, 0)  # config/parallel.py: "pplx" -> allgather_reducescatter
VLLM_NAIVE_FALLS_BACK: Version = (0, 19, 0)  # config/parallel.py: "naive" too
VLLM_LL_TOKENS_FROM_BUDGET: Version = (0, 20, 0)  # FusedMoEConfig max_num_tokens, batched DP
# DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES (deepep_ll_prepare_finalize.py; from 0.20
# prepare_finalize/deepep_ll.py): a hidden size outside the list is refused by its assert; from
# 0.12.0 `maybe_roundup_layer_hidden_size` rounds it up to the next one first.
VLLM_LL_HIDDEN_ROUNDED: Version = (0, 12, 0)
VLLM_LL_HIDDEN_SIZES: tuple[tuple[Version, tuple[int, ...]], ...] = (
    ((0, 12, 0), (2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192)),
    ((0, 11, 0), (2048, 2560, 4096, 5120, 6144, 7168)),
    ((0, 0, 0), (2048, 2560, 4096, 5120, 7168)),  # 0.9.2
)

NAIVE = "naive"
AGRS = "allgather_reducescatter"
DEEPEP_HT = "deepep_high_throughput"
DEEPEP_LL = "deepep_low_latency"
GATHERING = frozenset({NAIVE, AGRS})
# Backends vLLM offers whose buffers kvplan has not read: refused by name.
UNMODELLED_BACKENDS = frozenset(
    {
        "flashinfer_all2allv",
        "flashinfer_nvlink_one_sided",
        "flashinfer_nvlink_two_sided",
        "mori",
        "mori_high_throughput",
        "mori_low_latency",
        "nixl_ep",
        "deepep_v2",
        "moonep",
    }
)
VLLM_BACKENDS = frozenset({NAIVE, "pplx", AGRS, DEEPEP_HT, DEEPEP_LL}) | UNMODELLED_BACKENDS

DEEPEP_BUFFER_BYTES = 1024 * MiB  # VLLM_DEEPEP_BUFFER_SIZE_MB's default, 1024
DEEPEP_NVL_SLOTS_BYTES = 8 * (4 + 8 + 8)  # Buffer::Buffer: barrier signals, buffer and signal ptrs
DEEPEP_WORKSPACE_BYTES = 32 * MiB  # configs.cuh NUM_WORKSPACE_BYTES
DEEPEP_ALIGNMENT = 128  # configs.cuh NUM_BUFFER_ALIGNMENT_BYTES
NVL_PEERS = 8  # configs.cuh NUM_MAX_NVL_PEERS: ranks one node's NVLink buffer spans
VLLM_MOE_DP_CHUNK_SIZE = 256  # envs.py, to 0.19
VLLM_BATCHED_DP_TOKENS = 256  # SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP

NVSHMEM_WARNING = (
    "{flag} {backend}: NVSHMEM holds the {rdma} B RDMA buffer in its symmetric heap, "
    "which it maps in NVSHMEM_CUMEM_GRANULARITY chunks (512 MiB, set by deep_ep/buffer.py) "
    "beside its own state; that rounding and state depend on the NVSHMEM build and the NICs "
    "and are not counted"
)


@frozen
class All2All:
    """One rank's memory for the all-to-all backend vLLM runs: its buffers (taken from the
    pool through vLLM's non-torch increase) and the profile run's gathered activations."""

    backend: str
    buffer_bytes: int
    gathered_bytes: int
    note: str
    warnings: tuple[str, ...] = ()
    cuda_graphs_off: bool = False

    def budget_lines(self) -> tuple[BudgetLine, ...]:
        lines = []
        if self.buffer_bytes:
            lines.append(BudgetLine("all2all_buffers", -self.buffer_bytes, self.note))
        if self.gathered_bytes:
            lines.append(BudgetLine("all2all_activations", -self.gathered_bytes, self.note))
        return tuple(lines)


def deepep_low_latency_rdma_bytes(tokens: int, hidden: int, num_experts: int) -> int:
    """DeepEP v1.2.1 csrc/config.hpp `get_low_latency_rdma_size_hint` (the rank count does not
    enter the layout)."""
    scales = hidden // 128
    dispatch_msg = 16 + max(2 * hidden, hidden + 4 * scales)
    combine_msg = 4 * scales + 2 * hidden
    send = max(tokens * dispatch_msg, num_experts * tokens * combine_msg)
    recv = num_experts * tokens * max(dispatch_msg, combine_msg)
    signalling = cdiv(num_experts * 4, DEEPEP_ALIGNMENT) * DEEPEP_ALIGNMENT
    total = 2 * send + 2 * recv + 2 * signalling
    return (total + DEEPEP_ALIGNMENT) // DEEPEP_ALIGNMENT * DEEPEP_ALIGNMENT


def vllm_backend(asked: str | None, version: Version, label: str) -> tuple[str, tuple[str, ...]]:
    """The backend a release runs for `asked` (None: its default), and the warning where it
    falls back; a name it does not know, or kvplan does not size, is refused by name."""
    field = "all2all_backend"
    if asked is None:
        return (AGRS if version >= VLLM_AGRS_DEFAULT else NAIVE), ()
    if asked not in VLLM_BACKENDS:
        raise SizingError(field, f"{asked!r} is not one of vLLM's all2all backends")
    if asked == AGRS and version < VLLM_AGRS_DEFAULT:
        raise SizingError(field, f"vLLM {label}: allgather_reducescatter is new in 0.11.0")
    if asked in UNMODELLED_BACKENDS:
        raise SizingError(
            field,
            f"vLLM's {asked} backend's buffers are not modelled yet; kvplan sizes naive, "
            "allgather_reducescatter, deepep_high_throughput and deepep_low_latency",
        )
    if (asked == "pplx" and version >= VLLM_PPLX_FALLS_BACK) or (
        asked == NAIVE and version >= VLLM_NAIVE_FALLS_BACK
    ):
        return AGRS, (
            f"all2all_backend {asked}: vLLM {label} has removed it and runs "
            "allgather_reducescatter (ParallelConfig.__post_init__)",
        )
    if asked == "pplx":
        raise SizingError(field, "vLLM's pplx backend's buffers are not modelled yet")
    return asked, ()


# Memoised: plans ask the same layouts of a model many times.
@lru_cache(maxsize=4096)
def vllm_all2all(
    arch: ModelArchitecture,
    parallel: Parallelism,
    flags: ExpertParallel,
    *,
    version: Version,
    label: str,
    max_num_batched_tokens: int,
) -> All2All | None:
    """One rank's all-to-all memory, or None where vLLM runs no all-to-all (a dense model, or
    DP 1)."""
    dp, tp = parallel.data_parallel_size, parallel.tensor_parallel_size
    if flags.all2all_backend is None and (arch.moe is None or dp == 1):
        return None
    backend, warnings = vllm_backend(flags.all2all_backend, version, label)
    if arch.moe is None or dp == 1:
        return All2All(
            backend=backend,
            buffer_bytes=0,
            gathered_bytes=0,
            note="",
            warnings=(
                f"all2all_backend {flags.all2all_backend}: vLLM runs an all-to-all only for a "
                "MoE model with data_parallel_size > 1 (ParallelConfig.use_all2all); it changes "
                "nothing here",
            ),
        )
    if version < VLLM_ALL2ALL_READ:
        warnings += (
            f"vLLM {label}: the all-to-all backends were read from vLLM 0.9.2 on and are "
            "applied to this earlier release",
        )
    ep = dp * tp
    if backend in (DEEPEP_HT, DEEPEP_LL) and flags.enable_expert_parallel:
        return _deepep(
            arch,
            flags,
            backend,
            ep=ep,
            version=version,
            max_num_batched_tokens=max_num_batched_tokens,
            warnings=warnings,
        )
    if backend not in GATHERING:
        warnings += (
            f"all2all_backend {backend}: its kernels need enable_expert_parallel; without it "
            "vLLM gathers the tokens of every DP rank (maybe_make_prepare_finalize)",
        )
    gathered = dp * max_num_batched_tokens * (arch.hidden_size or 0) * arch.dtype.element_bytes
    return All2All(
        backend=backend,
        buffer_bytes=0,
        gathered_bytes=gathered,
        note=(
            f"{backend if backend in GATHERING else 'gather'}: each MoE layer of the profile "
            f"run gathers DP {dp} x {max_num_batched_tokens} tokens x hidden "
            f"{arch.hidden_size} x {arch.dtype.element_bytes} B (the experts' own workspace "
            "over those tokens is not counted)"
        ),
        warnings=warnings,
    )


def _deepep(
    arch: ModelArchitecture,
    flags: ExpertParallel,
    backend: str,
    *,
    ep: int,
    version: Version,
    max_num_batched_tokens: int,
    warnings: tuple[str, ...],
) -> All2All:
    """DeepEP's Buffer as vLLM's managers size it: NVLink buffer and workspace, and the RDMA
    buffer (across nodes for high throughput, always for low latency)."""
    nvl = DEEPEP_BUFFER_BYTES + DEEPEP_NVL_SLOTS_BYTES
    if backend == DEEPEP_HT:
        rdma = DEEPEP_BUFFER_BYTES if ep > NVL_PEERS else 0
        how = f"NVLink buffer {DEEPEP_BUFFER_BYTES} B + {DEEPEP_NVL_SLOTS_BYTES} B slots"
        how += f", RDMA {rdma} B" + (" (EP group past one node)" if rdma else " (one node)")
    else:
        tokens = (
            max_num_batched_tokens
            if version >= VLLM_LL_TOKENS_FROM_BUDGET
            else VLLM_MOE_DP_CHUNK_SIZE
        )
        experts = (arch.moe.num_experts if arch.moe else 0) + flags.num_redundant_experts
        hidden = deepep_ll_hidden(arch.hidden_size or 0, version)
        rdma = deepep_low_latency_rdma_bytes(tokens, hidden, experts)
        how = (
            f"NVLink buffer {DEEPEP_BUFFER_BYTES} B + {DEEPEP_NVL_SLOTS_BYTES} B slots, RDMA "
            f"get_low_latency_rdma_size_hint({tokens} tokens, hidden {hidden}, {ep} ranks, "
            f"{experts} experts) = {rdma} B"
        )
    if rdma:
        warnings += (NVSHMEM_WARNING.format(flag="all2all_backend", backend=backend, rdma=rdma),)
    return All2All(
        backend=backend,
        buffer_bytes=nvl + DEEPEP_WORKSPACE_BYTES + rdma,
        gathered_bytes=0,
        note=(
            f"{backend}: DeepEP Buffer, {how}, {DEEPEP_WORKSPACE_BYTES} B workspace (vLLM's "
            "profile counts it in its non-torch memory)"
        ),
        warnings=warnings,
        cuda_graphs_off=backend == DEEPEP_HT,
    )


def deepep_ll_hidden(hidden: int, version: Version) -> int:
    """The hidden size DeepEP's low-latency kernels run at in this release, or refused."""
    sizes = next(sizes for first, sizes in VLLM_LL_HIDDEN_SIZES if version >= first)
    if version >= VLLM_LL_HIDDEN_ROUNDED:
        larger = [size for size in sizes if size >= hidden]
        if larger:
            return larger[0]
    elif hidden in sizes:
        return hidden
    raise SizingError(
        "all2all_backend",
        f"vLLM's deepep_low_latency kernels take hidden sizes {', '.join(map(str, sizes))} "
        f"in this release (DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES); this model's is "
        f"{hidden}",
    )


def vllm_batched_dp_tokens(
    arch: ModelArchitecture, parallel: Parallelism, flags: ExpertParallel, version: Version
) -> int | None:
    """max_num_batched_tokens's default where vLLM lowers it for a batched DP MoE (0.20+:
    deepep_low_latency with expert parallelism and DP > 1, `ParallelConfig.use_batched_dp_moe`),
    else None."""
    if (
        version < VLLM_LL_TOKENS_FROM_BUDGET
        or arch.moe is None
        or flags.all2all_backend != DEEPEP_LL
        or not flags.enable_expert_parallel
        or parallel.data_parallel_size == 1
    ):
        return None
    return VLLM_BATCHED_DP_TOKENS


# --- SGLang --moe-a2a-backend deepep ---------------------------------------------------------
# Read in the SGLang 0.5.5 and 0.5.23 wheels (python/sglang/srt/...):
# layers/moe/token_dispatcher/deepep.py `DeepEPBuffer.get_deepep_buffer`: normal mode takes
# num_nvl_bytes = the larger of DeepEP's dispatch and combine configs'
# `get_nvl_buffer_size_hint(hidden x 2 B, ranks)`; low latency num_rdma_bytes =
# `get_low_latency_rdma_size_hint(SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK (128), hidden,
# ranks, num_experts)`; auto both. The buffer is made at the first dispatch (`_get_buffer`),
# after the pool is sized, so it comes out of the memory mem_fraction_static leaves; 0.5.23's
# default fraction reserves 2048 MiB for it while decode CUDA graphs run
# (arg_groups/memory_hook.py `reserve_for_deepep_a2a_mb`), 0.5.5's reserves nothing.
# --deepep-mode normal turns CUDA graphs off (server_args.py 0.5.5, moe_hook.py 0.5.23).

SglangVersion = tuple[int, int, int, int]
SGLANG_DEEPEP_RESERVE: SglangVersion = (0, 5, 23, 0)  # memory_hook.py reserve_for_deepep_a2a_mb
SGLANG_DEEPEP_RESERVE_MIB = 2048
SGLANG_DEEPEP_TOKENS = 128  # environ.py SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK
SGLANG_PARAM_BYTES = 2  # _DeepEPDispatcherImplBase.params_bytes
DEEPEP_NUM_SMS = 20  # deep_ep/buffer.py Buffer.num_sms
# deep_ep/buffer.py get_dispatch_config / get_combine_config inside one node: the
# num_max_nvl_chunked_recv_tokens of both configs (256 at 2, 4 and 8 ranks)
DEEPEP_NVL_RECV_TOKENS = {2: 256, 4: 256, 8: 256}
DEEPEP_SOURCE_META_BYTES = 8  # internode.cu SourceMeta: two ints
DEEPEP_MAX_TOPK = 128  # config.hpp kNumMaxTopK
DEEPEP_MAX_SCALES = 128  # config.hpp kNumMaxScales


def deepep_normal_nvl_bytes(hidden_bytes: int, num_ranks: int) -> int:
    """DeepEP v1.2.1 csrc/config.hpp `Config::get_nvl_buffer_size_hint`, one node (no RDMA
    ranks), at the recommended configs' recv tokens and Buffer.num_sms 20 (10 channels)."""
    channels, recv = DEEPEP_NUM_SMS // 2, DEEPEP_NVL_RECV_TOKENS[num_ranks]
    slots = channels * num_ranks * recv
    total = channels * num_ranks * (2 * 1 + 3) * 4
    total += slots * (hidden_bytes + DEEPEP_SOURCE_META_BYTES)
    total += slots * DEEPEP_MAX_TOPK * (8 + 4) + slots * DEEPEP_MAX_SCALES * 4
    return cdiv(total, DEEPEP_ALIGNMENT) * DEEPEP_ALIGNMENT


@frozen
class SglangDeepEP:
    """SGLang's DeepEP buffer on one rank and the reserve its default fraction keeps for it."""

    buffer_bytes: int
    reserve_mib: int
    note: str
    warnings: tuple[str, ...] = ()


def sglang_deepep(
    arch: ModelArchitecture,
    *,
    mode: str,
    ranks: int,
    redundant_experts: int,
    version: SglangVersion,
    graphs: bool,
) -> SglangDeepEP:
    """`DeepEPBuffer.get_deepep_buffer` for `ranks` EP ranks (SGLang's tp_size)."""
    if arch.moe is None:
        return SglangDeepEP(0, 0, "", ("moe_a2a_backend deepep: the model has no routed experts",))
    if ranks not in DEEPEP_NVL_RECV_TOKENS:
        raise SizingError(
            "moe_a2a_backend",
            f"kvplan sizes SGLang's DeepEP buffer inside one node, at tp_size 2, 4 or 8 (not "
            f"{ranks}): across nodes its RDMA buffer depends on the NICs",
        )
    hidden, experts = arch.hidden_size or 0, arch.moe.num_experts + redundant_experts
    nvl = rdma = 0
    parts = []
    if mode in ("auto", "normal"):
        nvl = deepep_normal_nvl_bytes(hidden * SGLANG_PARAM_BYTES, ranks)
        parts.append(f"NVLink buffer get_nvl_buffer_size_hint({hidden * 2} B, {ranks}) = {nvl} B")
    if mode in ("auto", "low_latency"):
        if experts % ranks:
            raise SizingError(
                "deepep_mode",
                f"SGLang's low-latency DeepEP needs the {experts} experts to "
                f"divide over the {ranks} ranks",
            )
        rdma = deepep_low_latency_rdma_bytes(SGLANG_DEEPEP_TOKENS, hidden, experts)
        parts.append(
            f"RDMA get_low_latency_rdma_size_hint({SGLANG_DEEPEP_TOKENS}, {hidden}, {ranks}, "
            f"{experts}) = {rdma} B"
        )
    buffer = (nvl + DEEPEP_NVL_SLOTS_BYTES if nvl else 0) + DEEPEP_WORKSPACE_BYTES + rdma
    reserve = SGLANG_DEEPEP_RESERVE_MIB if version >= SGLANG_DEEPEP_RESERVE and graphs else 0
    warnings: tuple[str, ...] = ()
    if rdma:
        warnings += (NVSHMEM_WARNING.format(flag="moe_a2a_backend", backend="deepep", rdma=rdma),)
    if mode == "normal":
        warnings += (
            "deepep_mode normal: SGLang turns CUDA graphs off; kvplan's default "
            "mem_fraction_static still keeps its CUDA-graph term",
        )
    if version < SGLANG_DEEPEP_RESERVE:
        warnings += (
            "moe_a2a_backend deepep: the 2048 MiB reserve SGLang 0.5.23 keeps for DeepEP is "
            "absent from 0.5.5 and left out for this release (releases between were not read)",
        )
    note = (
        f"DeepEP ({mode}): {', '.join(parts)}, {DEEPEP_WORKSPACE_BYTES} B workspace; made at "
        "the first dispatch, after the pool, from the memory mem_fraction_static leaves"
    )
    return SglangDeepEP(buffer, reserve, note, warnings)
