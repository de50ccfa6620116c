"""Expert parallelism, data-parallel attention and decode context parallelism (issue 21).

vLLM, read in the 0.33.0 wheel (the same rules in the 0.11.0 wheel unless a line says otherwise):

* `data_parallel_size` DP engine cores each run their own scheduler and KV pool over their own
  sequences; inside each, attention and the dense layers are sharded over its
  `tensor_parallel_size` TP ranks (whole on every DP rank at TP 1), and an MLA latent is
  replicated over those TP ranks, never over the DP ranks.
* A MoE layer's experts span every GPU of the deployment: vllm/model_executor/layers/fused_moe/
  config.py `FusedMoEParallelConfig.make` flattens TP across DP (`flatten_tp_across_dp_and_pcp`:
  DP x TP ranks). Without `enable_expert_parallel` each expert is tensor-sharded over those
  DP x TP ranks; with it (`use_ep`) the expert-parallel size is DP x TP and each rank holds
  whole experts: fused_moe/expert_map_manager.py `determine_expert_map` gives rank r
  `global // ep (+1 while r < global % ep)` of the `global = num_experts +
  num_redundant_experts` experts (fused_moe/layer.py `determine_expert_map` callers:
  `global_num_experts = num_experts + num_redundant_experts`). Rank 0 holds the most: it is
  the rank whose pool binds, so kvplan sizes it.
* `enable_eplb` needs `enable_expert_parallel` and TP x DP > 1, redundant experts need
  `enable_eplb` (vllm/config/parallel.py `ParallelConfig._validate_parallel_config`), and EPLB
  needs the experts to divide evenly over the ranks (fused_moe/layer.py: "EPLB currently only
  supports even distribution of experts across ranks").
* `decode_context_parallel_size` (DCP) reuses the TP ranks (`tp_size` must be divisible by
  `dcp_size`, parallel.py) and interleaves one sequence's tokens over them: each rank keeps
  cdiv(max_model_len, dcp) tokens of a request (v1/kv_cache_interface.py
  `FullAttentionSpec.max_memory_usage_bytes`, `AttentionSpec.max_num_blocks_per_req`), and the
  "GPU KV cache size" line counts the tokens of all DCP ranks: multiplied by dcp before 0.21
  (v1/core/kv_cache_utils.py, "Multiplying the GPU KV cache size by the dcp_world_size"), and
  from 0.21 as int(concurrency x max_model_len), where the concurrency already holds the
  factor. MLA backends serve DCP from 0.11.0 (v1/attention/backends/mla/common.py); the
  FlashAttention (GQA) backend kvplan read it in is 0.14.0's (flash_attn.py `dcp_world_size`);
  sliding windows are refused by 0.11 (`SlidingWindowSpec.max_memory_usage_bytes`: "DCP not
  support sliding window") and hybrid groups by 0.20 (kv_cache_utils.py: "Hybrid KV cache
  groups with multiple block sizes do not support context parallelism").

SGLang's `enable_dp_attention` / `ep_size` are modelled in sglang_dp.py; TensorRT-LLM's
attention DP is refused by name (kit/engine_flags.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import (
    FullAttention,
    ModelArchitecture,
    MultiHeadLatentAttention,
    RoutedExperts,
)
from ..model.dtypes import WeightFormat
from ..units import cdiv

if TYPE_CHECKING:  # common.py holds an ExpertParallel in EngineOptions
    from .common import Parallelism

Version = tuple[int, int, int]

# FusedMoEParallelConfig.make and determine_expert_map as above, read in the 0.11.0 and 0.33.0
# wheels; earlier releases are sized by the same rule, with a warning saying so.
VLLM_EXPERT_PLACEMENT_READ: Version = (0, 11, 0)
VLLM_DCP_MLA: Version = (0, 11, 0)  # MLA common backend's dcp_world_size, first in 0.11.0
VLLM_DCP_GQA: Version = (0, 14, 0)  # FlashAttention backend's dcp_world_size, read in 0.14.0
VLLM_DCP_SPARSE_MLA: Version = (0, 33, 0)  # flashmla_sparse.py supports_dcp, read in 0.33.0
VLLM_DCP_TOKENS_FROM_CONCURRENCY: Version = (0, 21, 0)  # calibration.VLLM_TOKENS_FROM_CONCURRENCY


@frozen
class ExpertParallel:
    """vLLM's expert- and context-parallel flags, as `vllm serve` spells them."""

    enable_expert_parallel: bool = False
    # EPLBConfig.num_redundant_experts (--eplb-config '{"num_redundant_experts": N}'; a flag of
    # its own, --num-redundant-experts, in earlier releases)
    num_redundant_experts: int = 0
    enable_eplb: bool = False
    decode_context_parallel_size: int = 1
    # --all2all-backend (VLLM_ALL2ALL_BACKEND before 0.12); None: the release's default
    # (engines/all2all.py)
    all2all_backend: str | None = None

    def __post_init__(self) -> None:
        if self.num_redundant_experts < 0:
            raise SizingError("num_redundant_experts", "must be 0 or more")
        if self.decode_context_parallel_size < 1:
            raise SizingError("decode_context_parallel_size", "must be at least 1")

    @property
    def asked(self) -> bool:
        return self != NO_EXPERT_PARALLEL


NO_EXPERT_PARALLEL = ExpertParallel()


@frozen
class RankWeights:
    """One GPU's share of the checkpoint under a DP / EP layout, and how it was cut."""

    bytes_per_gpu: int
    expert_parallel_size: int  # 1: the experts are tensor-sharded, not placed whole
    local_num_experts: int | None  # experts on the rank that holds the most (EP only)
    note: str | None  # what the weights line of the budget adds to its own note
    warning: str | None = None


def check_vllm_expert_parallel(
    arch: ModelArchitecture, parallel: Parallelism, flags: ExpertParallel
) -> tuple[str, ...]:
    """Raise where vLLM refuses to start with these flags; return warnings where a flag
    changes nothing (vllm/config/parallel.py `_validate_parallel_config`, fused_moe/layer.py)."""
    tp, dp = parallel.tensor_parallel_size, parallel.data_parallel_size
    if flags.enable_eplb:
        if not flags.enable_expert_parallel:
            raise SizingError(
                "enable_eplb", "vLLM: enable_expert_parallel must be True to use EPLB"
            )
        if tp * dp <= 1:
            raise SizingError(
                "enable_eplb", f"vLLM: EPLB requires tensor or data parallelism (TP={tp}, DP={dp})"
            )
    elif flags.num_redundant_experts:
        raise SizingError(
            "num_redundant_experts",
            f"vLLM: num_redundant_experts is {flags.num_redundant_experts} but EPLB is not "
            "enabled (give enable_eplb=true)",
        )
    if not flags.enable_expert_parallel:
        return ()
    if arch.moe is None:
        return ("enable_expert_parallel: the model has no routed experts; it changes nothing",)
    ep = tp * dp
    experts = arch.moe.num_experts + flags.num_redundant_experts
    if flags.enable_eplb and experts % ep:
        raise SizingError(
            "num_redundant_experts",
            f"vLLM: EPLB supports only an even distribution of experts; {experts} experts "
            f"({arch.moe.num_experts} + {flags.num_redundant_experts} redundant) over {ep} "
            "EP ranks",
        )
    if ep == 1:
        return ("enable_expert_parallel at TP 1 and DP 1: one rank holds every expert",)
    return ()


def vllm_rank_weights(
    arch: ModelArchitecture,
    weights_total: int,
    parallel: Parallelism,
    flags: ExpertParallel,
    weight_format: WeightFormat | None,
) -> RankWeights | None:
    """One GPU's weights where DP or EP changes them (None: the plain TP x PP share).

    Dense layers, attention and embeddings: their share over TP x PP, whole on every DP rank.
    Routed experts over DP x TP ranks (and PP stages): tensor-sharded without EP, whole
    experts with it, rank 0 holding `global // ep` plus one where they do not divide.
    """
    tp, pp, dp = (
        parallel.tensor_parallel_size,
        parallel.pipeline_parallel_size,
        parallel.data_parallel_size,
    )
    use_ep = flags.enable_expert_parallel and tp * dp > 1
    if arch.moe is None or (dp == 1 and not use_ep):
        return None
    routed = _routed_bytes(arch, weights_total, weight_format)
    if routed is None:
        return _without_experts_share(arch, weights_total, parallel, flags, use_ep=use_ep)
    experts = arch.moe.num_experts
    dense_per_gpu = cdiv(weights_total - routed, tp * pp)
    if not use_ep:
        return RankWeights(
            bytes_per_gpu=dense_per_gpu + cdiv(routed, dp * tp * pp),
            expert_parallel_size=1,
            local_num_experts=None,
            note=(
                f"routed experts ({routed} B) tensor-sharded over DP x TP = {dp * tp} ranks, "
                f"the rest ({weights_total - routed} B) over TP {tp}"
            ),
        )
    ep = dp * tp
    global_experts = experts + flags.num_redundant_experts
    local = global_experts // ep + (1 if global_experts % ep else 0)
    return RankWeights(
        bytes_per_gpu=dense_per_gpu + cdiv(routed * local, experts * pp),
        expert_parallel_size=ep,
        local_num_experts=local,
        note=(
            f"expert parallel {ep} (DP {dp} x TP {tp}): {local} of {global_experts} experts "
            + (f"({flags.num_redundant_experts} redundant) " if flags.num_redundant_experts else "")
            + f"on this rank, {routed // experts} B each; attention, dense layers and "
            f"embeddings ({weights_total - routed} B) over TP {tp}"
            + (" (whole on every DP rank)" if tp == 1 else "")
        ),
    )


def _without_experts_share(
    arch: ModelArchitecture,
    weights_total: int,
    parallel: Parallelism,
    flags: ExpertParallel,
    *,
    use_ep: bool,
) -> RankWeights:
    """A MoE whose experts' share of the weights is unknown (a catalog entry without a config
    or moe.num_moe_layers): answered where the share is not needed, refused or warned where
    it is."""
    tp, pp, dp = (
        parallel.tensor_parallel_size,
        parallel.pipeline_parallel_size,
        parallel.data_parallel_size,
    )
    experts = arch.moe.num_experts if arch.moe is not None else 1
    if dp == 1 and not flags.num_redundant_experts and experts % tp == 0:
        # EP over the TP ranks alone: experts / TP whole experts a rank hold the bytes 1/TP of
        # each would, so the experts' share is not needed
        return RankWeights(
            bytes_per_gpu=cdiv(weights_total, tp * pp),
            expert_parallel_size=tp,
            local_num_experts=experts // tp,
            note=f"expert parallel {tp} (TP {tp}): {experts // tp} of {experts} experts on this "
            "rank, the same bytes as 1/TP of every expert",
        )
    if use_ep:
        raise SizingError(
            "enable_expert_parallel",
            "the routed experts' share of the weights is unknown for this model (give it as an "
            "hf_config, or moe.num_moe_layers): kvplan cannot place them on EP ranks",
        )
    return RankWeights(
        bytes_per_gpu=cdiv(weights_total, tp * pp),
        expert_parallel_size=1,
        local_num_experts=None,
        note=None,
        warning=(
            f"vLLM shards a MoE model's experts over DP x TP = {dp * tp} GPUs; the experts' "
            "share of this model's weights is unknown, so each GPU is charged 1/TP of all its "
            "weights (more than it holds: the pool is understated)"
        ),
    )


def _routed_bytes(
    arch: ModelArchitecture, weights_total: int, weight_format: WeightFormat | None
) -> int | None:
    """The routed experts' bytes within `weights_total`: as the checkpoint stores them, or
    priced at the `weight_format` the whole model was re-priced at."""
    routed: RoutedExperts | None = arch.routed_experts
    if routed is None:
        return None
    if weights_total == arch.weight_bytes:
        return min(routed.bytes, weights_total)
    bits = (weight_format or arch.weight_format).bits
    return min(cdiv(routed.parameters * bits.numerator, 8 * bits.denominator), weights_total)


def check_vllm_dcp(
    arch: ModelArchitecture,
    tensor_parallel_size: int,
    decode_context_parallel_size: int,
    version: Version,
    label: str,
) -> None:
    """Raise where vLLM (or kvplan's reading of it) does not serve DCP for this model."""
    dcp = decode_context_parallel_size
    if dcp == 1:
        return
    field = "decode_context_parallel_size"
    if tensor_parallel_size % dcp:
        raise SizingError(
            field, f"vLLM: tensor_parallel_size {tensor_parallel_size} must be divisible by {dcp}"
        )
    kinds = {type(layer) for layer, _ in arch.cache_layer_counts}
    if not kinds <= {FullAttention, MultiHeadLatentAttention}:
        raise SizingError(
            field,
            "vLLM serves DCP for full-attention and MLA layers only (no sliding windows, "
            "chunked attention or recurrent state)",
        )
    if arch.has_mla:
        first = VLLM_DCP_SPARSE_MLA if arch.has_sparse_mla else VLLM_DCP_MLA
    else:
        first = VLLM_DCP_GQA
    if version < first:
        raise SizingError(
            field,
            f"vLLM {label}: kvplan sizes DCP for this attention from vLLM "
            f"{'.'.join(map(str, first))} (the first release it read DCP in for it)",
        )


def expert_placement_note(
    rank: RankWeights | None, version: Version, label: str
) -> tuple[str, ...]:
    """A warning where a release older than kvplan read places the experts."""
    if rank is None or version >= VLLM_EXPERT_PLACEMENT_READ:
        return ()
    return (
        f"vLLM {label}: the experts' placement over DP x TP ranks was read in vLLM 0.11.0 and "
        "0.33.0 (FusedMoEParallelConfig.make) and is applied to this earlier release",
    )


def dcp_tokens_per_rank(max_model_len: int, decode_context_parallel_size: int) -> int:
    """Tokens of one request a DCP rank keeps (FullAttentionSpec.max_memory_usage_bytes)."""
    return cdiv(max_model_len, decode_context_parallel_size)
