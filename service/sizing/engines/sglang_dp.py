"""SGLang's DP attention and expert parallelism (issue 21 item 1, SGLang's half).

Read in the SGLang 0.5.2 and 0.5.23 wheels (python/sglang/srt/...):

* One SGLang engine of `--tp-size` GPUs. With `--enable-dp-attention` (0.5.2 ... ; from 0.5.23
  also spelled `--attn-dp-size N`, server_args.py: "Use --attn-dp-size <dp-size> instead of
  --dp-size <dp-size> --enable-dp-attention") its attention runs `dp` data-parallel groups of
  tp / dp GPUs: layers/dp_attention.py `compute_dp_attention_world_info`
  (attn_tp_size = tp_size // dp_size; 0.5.23 runtime_context.py `derive_attn_tp_size`
  = tp // attn_dp // attn_cp). `tp_size % dp_size` must be 0 (server_args.py
  `_handle_data_parallelism`, an assert). `--dp-size 1` turns DP attention off (0.5.2).
* Each attention-DP group is a scheduler with its own token pool of its own requests
  (model_runner.py `profile_max_num_token` per rank; the KV heads of a GQA model split over
  the group's attn_tp ranks, an MLA latent whole on every rank and never shared across groups).
  `--max-running-requests` is the deployment's: each group gets max_running_requests //
  attn_dp_size (0.5.23 kv_cache_configurator.py `resolve_max_num_reqs`).
* Weights under DP attention (models/deepseek_v2.py): attention projections over attn_tp;
  the input embedding over attn_tp (0.5.23 vocab_parallel_embedding.py
  `get_embedding_tp_kwargs`: use_attn_tp_group) or whole on every rank (0.5.2:
  enable_tp=not is_dp_attention_enabled(): the same at attn_tp 1); the LM head over the full
  tp (`ParallelLMHead`), over attn_tp with `--enable-dp-lm-head`; dense MLPs over the full tp
  (whole with `--moe-dense-tp-size 1`); shared experts, routers and norms kvplan shares over
  tp as it does without DP attention.
* Routed experts: `--ep-size` ranks each hold num_physical_experts // ep_size whole experts
  (num_physical_experts = n_routed_experts + `--ep-num-redundant-experts`), each expert
  tensor-sharded over moe_tp = tp / ep (0.5.23 runtime_context.py `derive_parallel_widths`:
  moe_tp_size = tp_size // moe_ep_size // moe_dp_size): routed bytes x (E + R) / (E x tp) per
  GPU, the same as 1/tp of every expert when R = 0.
* The default mem_fraction_static (0.5.23 arg_groups/memory_hook.py `reserve_for_graph_mb`):
  DP attention reserves cuda_graph_max_bs x attn_dp_size x 3 MiB more, and x 1.5 more again
  where cuda_graph_max_bs > 300. 0.5.2 reserved a flat 4 GiB instead; kvplan's default
  fraction (sglang.py `default_mem_fraction_static`) follows the later formula for every
  release, and so does this term.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import AttentionShares, ModelArchitecture, RoutedExperts
from ..model.dtypes import WeightFormat
from ..units import cdiv
from .expert_parallel import RankWeights

if TYPE_CHECKING:
    from .common import Parallelism

SglangVersion = tuple[int, int, int, int]

# --attn-dp-size: read in the 0.5.23 wheel, absent from 0.5.2's (releases between them were not
# read: kvplan takes it from 0.5.23).
SGLANG_ATTN_DP_SIZE: SglangVersion = (0, 5, 23, 0)
# get_embedding_tp_kwargs (embedding over the attention-TP group), read in 0.5.23; 0.5.2
# replicates the embedding under DP attention.
SGLANG_EMBEDDING_OVER_ATTN_TP: SglangVersion = (0, 5, 23, 0)


@frozen
class SglangParallel:
    """SGLang's DP-attention and expert-parallel flags, as `sglang.launch_server` spells them."""

    enable_dp_attention: bool = False
    attn_dp_size: int = 1  # 0.5.23's spelling: the DP-attention width itself
    ep_size: int = 1
    ep_num_redundant_experts: int = 0
    enable_dp_lm_head: bool = False
    moe_dense_tp_size: int | None = None  # 1 or None (server_args.py: "only support 1 and None")
    # --moe-a2a-backend and --deepep-mode (engines/all2all.py: "none" and "deepep" are sized)
    moe_a2a_backend: str = "none"
    deepep_mode: str = "auto"

    def __post_init__(self) -> None:
        if self.attn_dp_size < 1:
            raise SizingError("attn_dp_size", "must be at least 1")
        if self.ep_size < 1:
            raise SizingError("ep_size", "must be at least 1")
        if self.ep_num_redundant_experts < 0:
            raise SizingError("ep_num_redundant_experts", "must be 0 or more")
        if self.moe_dense_tp_size not in (None, 1):
            raise SizingError(
                "moe_dense_tp_size", "SGLang: moe_dense_tp_size only supports 1 and None"
            )
        if self.deepep_mode not in ("auto", "normal", "low_latency"):
            raise SizingError(
                "deepep_mode", "SGLang: deepep_mode is one of auto, normal, low_latency"
            )
        if self.moe_a2a_backend not in ("none", "deepep"):
            raise SizingError(
                "moe_a2a_backend",
                f"SGLang's {self.moe_a2a_backend!r} all-to-all backend is not modelled (kvplan "
                "sizes none and deepep)",
            )

    @property
    def deepep(self) -> bool:
        return self.moe_a2a_backend == "deepep"

    @property
    def asked(self) -> bool:
        return self != NO_SGLANG_PARALLEL


NO_SGLANG_PARALLEL = SglangParallel()


def dp_attention_asked(flags: SglangParallel) -> bool:
    return flags.enable_dp_attention or flags.attn_dp_size > 1


@frozen
class SglangLayout:
    """One SGLang engine's widths: `tp_size` GPUs, attention in `attn_dp_size` groups of
    `attn_tp_size`, experts over `ep_size` ranks each sharded over `moe_tp_size`."""

    tp_size: int
    attn_dp_size: int
    ep_size: int

    @property
    def attn_tp_size(self) -> int:
        return self.tp_size // self.attn_dp_size

    @property
    def moe_tp_size(self) -> int:
        return self.tp_size // self.ep_size


def sglang_layout(
    parallel: Parallelism, flags: SglangParallel, version: SglangVersion, label: str
) -> tuple[SglangLayout, tuple[str, ...]]:
    """The engine's widths from the flags as given (`data_parallel_size` is SGLang's
    --dp-size), refused where SGLang refuses them; warnings where a flag changes nothing."""
    tp, dp = parallel.tensor_parallel_size, parallel.data_parallel_size
    notes: list[str] = []
    width = 1
    if flags.attn_dp_size > 1:
        if version < SGLANG_ATTN_DP_SIZE:
            raise SizingError(
                "attn_dp_size",
                f"SGLang {label}: --attn-dp-size was read in 0.5.23 (0.5.2 has only --dp-size "
                "with --enable-dp-attention); give those for this release",
            )
        if dp > 1:
            raise SizingError(
                "attn_dp_size",
                "give the DP-attention width once: attn_dp_size, or dp_size with "
                "enable_dp_attention (kvplan sizes DP attention inside one engine)",
            )
        width = flags.attn_dp_size
    elif flags.enable_dp_attention:
        if dp == 1:
            notes.append("enable_dp_attention with dp_size 1: SGLang turns DP attention off")
        width = dp
    if tp % width:
        raise SizingError(
            "attn_dp_size" if flags.attn_dp_size > 1 else "data_parallel_size",
            f"SGLang: tp_size {tp} must be divisible by the DP-attention size {width}",
        )
    ep_size = flags.ep_size
    if flags.deepep:
        # server_args.py (0.5.5) / arg_groups/overrides.py `_a2a_ep_size` (0.5.23)
        if ep_size not in (1, tp):
            notes.append(
                f"moe_a2a_backend deepep: SGLang sets ep_size to tp_size {tp} (ep_size "
                f"{ep_size} given)"
            )
        ep_size = tp
    if tp % ep_size:
        raise SizingError("ep_size", f"SGLang: tp_size {tp} must be divisible by ep_size")
    if flags.enable_dp_lm_head and width == 1:
        raise SizingError(
            "enable_dp_lm_head", "SGLang: enable_dp_lm_head needs DP attention enabled"
        )
    return SglangLayout(tp, width, ep_size), tuple(notes)


def check_sglang_experts(
    arch: ModelArchitecture, layout: SglangLayout, flags: SglangParallel
) -> tuple[str, ...]:
    """Refuse experts that do not divide over the EP ranks; warn where EP changes nothing."""
    if layout.ep_size == 1 and not flags.ep_num_redundant_experts:
        return ()
    if arch.moe is None:
        return ("ep_size: the model has no routed experts; it changes nothing",)
    physical = arch.moe.num_experts + flags.ep_num_redundant_experts
    if physical % layout.ep_size:
        raise SizingError(
            "ep_num_redundant_experts" if flags.ep_num_redundant_experts else "ep_size",
            f"SGLang places num_physical_experts // ep_size experts per rank: {physical} "
            f"experts ({arch.moe.num_experts} + {flags.ep_num_redundant_experts} redundant) "
            f"do not divide over {layout.ep_size} EP ranks",
        )
    return ()


def sglang_rank_weights(
    arch: ModelArchitecture,
    weights_total: int,
    layout: SglangLayout,
    flags: SglangParallel,
    *,
    pipeline_parallel_size: int,
    weight_format: WeightFormat | None,
    version: SglangVersion,
) -> RankWeights | None:
    """One GPU's weights where DP attention or redundant experts change them (None: the plain
    1/(tp x pp) share)."""
    tp, attn_tp, pp = layout.tp_size, layout.attn_tp_size, pipeline_parallel_size
    redundant = flags.ep_num_redundant_experts if arch.moe is not None else 0
    if layout.attn_dp_size == 1 and not redundant:
        return None
    routed = _routed_bytes(arch, weights_total, weight_format, redundant)
    experts = arch.moe.num_experts if arch.moe is not None else 1
    routed_gpu = cdiv(routed * (experts + redundant), experts * tp * pp)
    if layout.attn_dp_size == 1:
        rest = weights_total - routed
        return _redundant_experts_only(
            layout, routed_gpu, rest, pp=pp, experts=experts, redundant=redundant
        )
    shares = _attention_shares(arch)
    attention = _priced(shares.attention, arch, weights_total, weight_format)
    embedding = _priced(shares.embedding, arch, weights_total, weight_format)
    lm_head = _priced(shares.lm_head, arch, weights_total, weight_format)
    dense = 0
    if flags.moe_dense_tp_size == 1:
        dense = _dense_mlp_bytes(arch, weights_total, weight_format)
    rest = weights_total - routed - attention - embedding - lm_head - dense
    embedding_group = attn_tp if version >= SGLANG_EMBEDDING_OVER_ATTN_TP else 1
    lm_group = attn_tp if flags.enable_dp_lm_head else tp
    per_gpu = (
        routed_gpu
        + cdiv(attention, attn_tp * pp)
        + cdiv(embedding, embedding_group * pp)
        + cdiv(lm_head, lm_group * pp)
        + cdiv(dense, pp)
        + cdiv(rest, tp * pp)
    )
    return RankWeights(
        bytes_per_gpu=per_gpu,
        expert_parallel_size=layout.ep_size,
        local_num_experts=(experts + redundant) // layout.ep_size,
        note=(
            f"DP attention {layout.attn_dp_size} x attention TP {attn_tp} over TP {tp}: "
            f"attention ({attention} B) over {attn_tp}, embedding ({embedding} B) over "
            f"{embedding_group}, lm_head ({lm_head} B) over {lm_group}"
            + (f", dense MLPs ({dense} B) whole" if dense else "")
            + f"; routed experts ({routed} B) over EP {layout.ep_size} x MoE TP "
            f"{layout.moe_tp_size}"
            + (f" with {redundant} redundant" if redundant else "")
            + f"; the rest ({rest} B) over TP {tp}"
        ),
    )


def _routed_bytes(
    arch: ModelArchitecture, weights_total: int, weight_format: WeightFormat | None, redundant: int
) -> int:
    """The routed experts' bytes (0 for a dense model); refused where redundant copies are
    asked of experts whose share is unknown."""
    share = arch.routed_experts
    if share is not None:
        return _priced(share, arch, weights_total, weight_format)
    if redundant:
        raise SizingError(
            "ep_num_redundant_experts",
            "the routed experts' share of the weights is unknown for this model (give it as "
            "an hf_config): kvplan cannot add redundant experts",
        )
    return 0


def _attention_shares(arch: ModelArchitecture) -> AttentionShares:
    if arch.attention_shares_known is None:
        raise SizingError(
            "enable_dp_attention",
            "the attention and embedding weights of this model are unknown (give it as an "
            "hf_config): kvplan cannot place them on SGLang's attention-TP groups",
        )
    return arch.attention_shares_known


def _redundant_experts_only(
    layout: SglangLayout, routed_gpu: int, rest: int, *, pp: int, experts: int, redundant: int
) -> RankWeights:
    """No DP attention: the routed experts grow by the redundant copies, the rest over tp."""
    local = (experts + redundant) // layout.ep_size
    return RankWeights(
        bytes_per_gpu=routed_gpu + cdiv(rest, layout.tp_size * pp),
        expert_parallel_size=layout.ep_size,
        local_num_experts=local,
        note=f"{redundant} redundant experts over EP {layout.ep_size}: "
        f"{local} of {experts + redundant} experts per rank",
    )


def _priced(
    share: RoutedExperts,
    arch: ModelArchitecture,
    weights_total: int,
    weight_format: WeightFormat | None,
) -> int:
    """A share as the checkpoint stores it, or priced at the format the model was re-priced at."""
    if weights_total == arch.weight_bytes:
        return min(share.bytes, weights_total)
    bits = (weight_format or arch.weight_format).bits
    return min(cdiv(share.parameters * bits.numerator, 8 * bits.denominator), weights_total)


def _dense_mlp_bytes(
    arch: ModelArchitecture, weights_total: int, weight_format: WeightFormat | None
) -> int:
    """The dense layers' MLPs (moe_dense_tp_size 1 keeps them whole): gate, up and down of
    intermediate_size x hidden_size on every layer that is not a MoE layer."""
    moe, hidden, inner = arch.moe, arch.hidden_size, arch.intermediate_size
    if moe is None or moe.num_moe_layers is None or hidden is None or inner is None:
        raise SizingError(
            "moe_dense_tp_size", "the dense layers' MLP size is unknown for this model"
        )
    layers = arch.num_layers - moe.num_moe_layers
    parameters = layers * 3 * inner * hidden
    bits = (weight_format or arch.weight_format).bits
    return min(cdiv(parameters * bits.numerator, 8 * bits.denominator), weights_total)


def dp_attention_reserve_mib(cuda_graph_max_bs: int, attn_dp_size: int) -> float:
    """memory_hook.py reserve_for_graph_mb (0.5.23): DP attention's extra padding."""
    if attn_dp_size <= 1:
        return 0.0
    extra = cuda_graph_max_bs * attn_dp_size * 3.0
    if cuda_graph_max_bs > 300:
        extra += cuda_graph_max_bs * attn_dp_size * 1.5
    return extra


def per_rank_running_requests(requested: int | None, attn_dp_size: int) -> int | None:
    """--max-running-requests is the engine's: each attention-DP group gets its share."""
    if requested is None or attn_dp_size == 1:
        return requested
    return max(1, requested // attn_dp_size)


def sglang_parallel_settings(
    parallel: Parallelism, flags: SglangParallel, rank: RankWeights | None
) -> dict[str, int | str]:
    """The widths SGLang logs, for the answer's engine settings (kvplan's `parallel` is
    attention TP x attention DP under DP attention)."""
    if not flags.asked:
        return {}
    attn_dp = parallel.data_parallel_size if dp_attention_asked(flags) else 1
    tp = parallel.tensor_parallel_size * attn_dp
    ep = tp if flags.deepep else flags.ep_size
    settings: dict[str, int | str] = {
        "tp_size": tp,
        "attn_dp_size": attn_dp,
        "attn_tp_size": parallel.tensor_parallel_size,
        "ep_size": ep,
        "moe_tp_size": tp // ep,
    }
    if flags.deepep:
        settings["moe_a2a_backend"] = flags.moe_a2a_backend
        settings["deepep_mode"] = flags.deepep_mode
    if rank is not None and rank.local_num_experts is not None:
        settings["num_local_experts"] = rank.local_num_experts
    return settings
