"""How fast one replica decodes and prefills: a roofline estimate with fitted efficiencies.

One forward pass (a decode step for B sequences, or a prefill) on each GPU of a tensor-parallel
group costs

    memory   = bytes it reads / (peak bandwidth x efficiency.bandwidth)
    compute  = linear FLOPs / (peak FLOPs at the weights' precision x efficiency.compute, or
               x efficiency.compute_low_precision on an FP8/FP4 peak)
               + attention FLOPs / (BF16 peak x efficiency.compute)
    link     = its all-reduces over the interconnect (ring) + a latency per all-reduce
    overhead = efficiency.step_overhead_ms + layers x efficiency.layer_overhead_us
    time     = max(memory, compute) + (1 - efficiency.overlap) x min(memory, compute)
               + link + overhead

The roofline model (Williams, Waterman and Patterson, "Roofline: an insightful visual
performance model for multicore architectures", CACM 52(4), 2009,
https://doi.org/10.1145/1498765.1498785) takes the larger of memory and compute, i.e.
overlap = 1; a pass whose kernels neither stream at full bandwidth nor compute at full rate
(decode near the ridge point) takes longer, up to the sum (overlap = 0). The overlap is fitted
with the other efficiencies on published measurements (service/calibration/
performance_points.json, `make bench`), never set by hand: see `FITTED` and
service/sizing/speed/performance_fit.py. The bound is whichever of memory, compute and link is
largest.

Costs (`StepCost`) depend only on the model, the GPU, the batch and the context; times
(`StepTime`) apply the efficiencies to them, so a fit can reuse the costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Final

from ..engines.kv import (
    state_bytes_per_sequence,
    state_dtype_bytes,
    state_shape,
    token_bytes_per_layer,
)
from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import (
    ChunkedLocalAttention,
    GatedDeltaNet,
    Mamba1,
    Mamba2,
    MixtureOfExperts,
    ModelArchitecture,
    MultiHeadLatentAttention,
    NoCache,
    SlidingWindowAttention,
    StateLayer,
    TokenLayer,
)
from ..model.dtypes import KvCacheDtype, WeightFormat
from ..model.weights import weight_bytes_total

TB: Final = 10**12  # memory bandwidth figures are TB/s = 10^12 B/s
GB: Final = 10**9  # link figures are GB/s = 10^9 B/s, one direction, per GPU
TERA: Final = 10**12  # TFLOPS = 10^12 FLOP/s


class PerformanceBound(StrEnum):
    BANDWIDTH = "bandwidth"
    COMPUTE = "compute"
    INTERCONNECT = "interconnect"


# Per-GPU, one-direction link bandwidth in GB/s, by catalog slug. The catalog records the link
# by name only; these figures are ../shared/catalog/gpus.json
# `interconnect_bw_gb_s_per_gpu_unidirectional`, which takes them from ai-dynamo/aiconfigurator
# src/aiconfigurator/systems/<gpu>.yaml (`node.intra_node_bw`, or `node.pcie_bw` for the
# PCIe-only cards; e.g. h100_sxm.yaml intra_node_bw 450000000000, a100_sxm.yaml 300000000000,
# l40s.yaml pcie_bw 32000000000 "pcie 4.0").
LINK_GB_S: Final[dict[str, float]] = {
    "l4": 32,
    "l40s": 32,
    "a100-sxm-80gb": 300,
    "h100-sxm-80gb": 450,
    "h100-pcie-80gb": 64,
    "h200-141gb": 450,
    "b200": 900,
    "b300": 900,
    "gb200": 900,
    "gb300": 900,
    "rtx-pro-6000-blackwell-server": 64,
    # aiconfigurator has no AMD system file. An MI300X has seven Infinity Fabric (xGMI) links,
    # one to each other GPU of an 8-GPU platform, 16 lanes at 32 Gb/s: 128 GB/s per link both
    # ways together, 64 GB/s one way; 7 x 64 = 448 GB/s one way per GPU (Wheeler's Network,
    # "AMD Looks to Infinity for AI Interconnects", https://www.wheelersnetwork.com/2024/01/).
    # A ring over fewer than eight GPUs drives fewer of those links, so below TP 8 this is an
    # upper bound.
    "mi300x": 448,
}

# Weight formats whose matmuls run on low-precision tensor cores where the GPU has them
# (`peak_flops_per_s`): FP8 on an FP8 peak, NVFP4 and MXFP4 on an FP4 peak.
FP8_COMPUTE_FORMATS: Final = frozenset({WeightFormat.FP8})
FP4_FORMATS: Final = frozenset({WeightFormat.NVFP4, WeightFormat.MXFP4})


@dataclass(frozen=True, slots=True)
class GpuPerformance:
    """The figures the estimate needs: catalog bandwidth and FLOPs (BF16; FP8 and FP4 where the
    GPU has those tensor cores), and the link per GPU."""

    memory_bandwidth_tb_s: float
    dense_bf16_tflops: float
    dense_fp8_tflops: float | None = None
    interconnect_gb_s: float | None = None
    name: str = ""
    dense_fp4_tflops: float | None = None

    def __post_init__(self) -> None:
        for field_name in ("memory_bandwidth_tb_s", "dense_bf16_tflops"):
            value = getattr(self, field_name)
            if not value > 0:
                raise SizingError(f"gpu.{field_name}", f"must be a positive number, got {value}")
        for field_name in ("dense_fp8_tflops", "interconnect_gb_s", "dense_fp4_tflops"):
            value = getattr(self, field_name)
            if value is not None and not value > 0:
                raise SizingError(f"gpu.{field_name}", f"must be a positive number, got {value}")


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Achievable fractions of peak and the fixed costs, as fitted on measured points."""

    bandwidth: float  # achievable fraction of peak memory bandwidth
    compute: float  # achievable fraction of peak dense FLOPs
    step_overhead_ms: float  # per forward pass: launches, sampling, scheduling
    allreduce_latency_us: float  # per all-reduce, on top of its bytes over the link
    overlap: float  # share of the smaller of memory and compute time hidden under the larger
    # Per block of the model in each pass: the launch and fixed cost of the block's own kernels
    # (norms, rotary, the attention kernel, quantisation), which no byte or FLOP accounts for.
    layer_overhead_us: float = 0.0
    # Achievable fraction of the FP8 (or FP4) tensor-core peak, for the linear layers of a
    # checkpoint that runs on it; None takes `compute`. FP8 matmuls reach a smaller share of
    # their (doubled) peak than BF16 ones of theirs: in the data file TensorRT-LLM 0.9.0 prefills
    # 2,048 tokens of Llama-2-7B in 30.8 ms on an H100 in FP8 (28.7 TFLOP: 0.47 of 1978 TFLOPS)
    # and in 132.4 ms on an A100 in FP16 (0.70 of 312).
    compute_low_precision: float | None = None


# --- the fit (service/sizing/speed/performance_fit.py; `make bench` prints it) ------------------
# Fitted by performance_fit.fit on the 41 calibration points of
# service/calibration/performance_points.json whose position in the file is not 2 mod 3
# (FIT_POINT_IDS); the 20 held back (HELD_BACK_POINT_IDS) give the error:
# 90% of them within +/-25%, median |error| 7.1%.
# tests/calibration/test_performance_fit.py re-runs the fit and must get these numbers.
# The overlap comes out 0: on these points memory and compute time add up rather than hide
# one another (the roofline max, overlap 1, fits the held-back points worse).
FITTED: Final = Efficiency(
    bandwidth=0.84,
    compute=0.787,
    step_overhead_ms=0.0,
    allreduce_latency_us=0.0,
    overlap=0.0,
    layer_overhead_us=80.25,
    compute_low_precision=0.413,
)
# The 80th percentile (nearest rank) of |predicted / measured - 1| over the held-back points:
# the +/- band an answer quotes with these estimates.
ERROR_BAND: Final = 0.15
# AMD Instinct GPUs (ROCm): FITTED with the achievable memory bandwidth refitted on the 17 AMD
# points of performance_points.json (performance_fit.vendor_efficiency: the other six kept,
# since refitting them too predicts a held-out AMD source worse): ROCm's kernels stream weights
# and cache at about 0.38 of the MI300X's 5.3 TB/s peak where NVIDIA's reach 0.84 of theirs.
# Sources: Oracle OCI's Llama-3.1-405B FP8 on 8 x MI300X (vLLM), InferenceX #1061's
# gpt-oss-120b on one MI300X (vLLM 0.17.0), SGLang #31044's MiniMax-M2.7 FP8 on 2 and 4 MI300X
# (SGLang 0.5.13, EP 2 and 4: the busiest rank's experts read); each predicted by a fit on the
# others: median 21.1%, 65% within 25%
# (`make bench`'s held-out table).
# tests/calibration/test_source_hold_out.py re-runs the fit and must get these numbers.
FITTED_AMD: Final = Efficiency(
    bandwidth=0.385,
    compute=0.787,
    step_overhead_ms=0.0,
    allreduce_latency_us=0.0,
    overlap=0.0,
    layer_overhead_us=80.25,
    compute_low_precision=0.413,
)
# The +/- band each answer quotes, by class (the GPU's vendor, and the model's layers: dense,
# MoE, MoE with MLA): the 80th percentile (nearest rank) of |predicted / measured - 1| over
# the class's published points, each predicted by efficiencies fitted without any point of its
# source (performance_fit.leave_one_source_out; `make bench` prints them). A class with no
# points gets the band of all 99, ERROR_BAND_ANY_CLASS.
ERROR_BAND_BY_CLASS: Final[dict[str, float]] = {
    "NVIDIA dense": 0.2,  # 52 points, 6 sources
    "NVIDIA MoE": 0.58,  # 22 points: Mixtral-8x7B (TensorRT-LLM 0.9.0), gpt-oss-120b (vLLM)
    "NVIDIA MoE+MLA": 0.14,  # 8 points: DeepSeek-R1 on H200 and B200 (SGLang 0.5)
    "AMD dense": 0.29,  # 9 points: Llama-3.1-405B FP8, 8 x MI300X
    "AMD MoE": 0.36,  # 8 points: gpt-oss-120b and MiniMax-M2.7 on MI300X
}
ERROR_BAND_ANY_CLASS: Final = 0.25


def is_amd(gpu_name: str) -> bool:
    """An AMD Instinct GPU (ROCm), by its catalog or inline name ("AMD Instinct MI300X")."""
    name = gpu_name.lower()
    return "amd" in name or "instinct" in name


def vendor(gpu: GpuPerformance) -> str:
    return "AMD" if is_amd(gpu.name) else "NVIDIA"


def fitted_efficiency(gpu: GpuPerformance) -> Efficiency:
    """The efficiencies fitted for the GPU's vendor: FITTED_AMD on AMD, FITTED elsewhere."""
    return FITTED_AMD if is_amd(gpu.name) else FITTED


def layer_kind(arch: ModelArchitecture) -> str:
    """The class of a model's layers the speed error is reported by: dense, MoE, MoE+MLA."""
    if arch.moe is None:
        return "dense"
    mla = any(isinstance(layer, MultiHeadLatentAttention) for layer, _ in arch.cache_layer_counts)
    return "MoE+MLA" if mla else "MoE"


def speed_class(arch: ModelArchitecture, gpu: GpuPerformance) -> str:
    return f"{vendor(gpu)} {layer_kind(arch)}"


# Memoised per model and GPU (both hashable by value, the model's hash kept): the class is read
# from the model's layers and the GPU's name, the same for every question on the pair.
@lru_cache(maxsize=1024)
def error_band_for(arch: ModelArchitecture, gpu: GpuPerformance) -> float:
    """The held-out error band of the answer's class (ERROR_BAND_BY_CLASS)."""
    return ERROR_BAND_BY_CLASS.get(speed_class(arch, gpu), ERROR_BAND_ANY_CLASS)


# The points FITTED was fitted on, in file order.
FIT_POINT_IDS: Final[tuple[str, ...]] = (
    "trtllm-0.9.0-h200-mistral-7b-tp1-bs896-128-128",
    "trtllm-0.9.0-h200-mistral-7b-tp1-bs120-128-2048",
    "trtllm-0.9.0-h200-mixtral-8x7b-tp2-bs1024-128-128",
    "trtllm-0.9.0-h200-mixtral-8x7b-tp2-bs256-128-2048",
    "trtllm-0.9.0-h200-llama2-7b-tp1-bs120-128-2048",
    "trtllm-0.9.0-h200-llama2-70b-tp1-bs1024-128-128",
    "trtllm-0.9.0-h100-mistral-7b-tp1-bs56-2048-2048",
    "trtllm-0.9.0-h100-mixtral-8x7b-tp2-bs128-128-2048",
    "trtllm-0.9.0-h100-llama2-7b-tp1-bs896-128-128",
    "trtllm-0.9.0-h100-llama2-7b-tp1-bs84-2048-128",
    "trtllm-0.9.0-h100-llama2-70b-tp2-bs96-2048-128",
    "trtllm-0.9.0-h100-llama2-70b-tp2-bs64-2048-2048",
    "trtllm-0.9.0-l40s-llama2-7b-tp1-bs256-128-128",
    "trtllm-0.9.0-l40s-llama2-7b-tp1-bs16-2048-2048",
    "trtllm-0.9.0-l40s-llama2-70b-tp4-bs64-2048-2048",
    "trtllm-0.9.0-a100-mistral-7b-tp1-bs120-128-2048",
    "trtllm-0.9.0-a100-llama2-7b-tp1-bs32-2048-128",
    "trtllm-0.9.0-a100-mixtral-8x7b-tp2-bs128-128-2048",
    "trtllm-0.9.0-a100-llama2-70b-tp4-bs64-2048-2048",
    "trtllm-0.9.0-h200-mixtral-8x7b-tp2-ttft-2048",
    "trtllm-0.9.0-h100-llama2-7b-tp1-ttft-2048",
    "trtllm-0.9.0-h100-mistral-7b-tp1-ttft-128",
    "trtllm-0.9.0-l40s-mistral-7b-tp1-ttft-2048",
    "trtllm-0.9.0-l40s-llama2-70b-tp4-ttft-2048",
    "trtllm-0.9.0-a100-mixtral-8x7b-tp2-ttft-128",
    "trtllm-0.7a-h200-llama2-70b-tp1-bs960-128-128",
    "trtllm-0.7a-h200-llama2-70b-tp1-bs96-128-4096",
    "lmdeploy-0.1.0a1-a100-llama2-7b-tp1-bs1-128-2048",
    "lmdeploy-0.1.0a1-a100-llama2-7b-tp1-bs64-128-128",
    "lmdeploy-0.1.0a1-a100-llama2-7b-tp1-bs1-2048-128",
    "lmdeploy-0.1.0a1-a100-llama2-13b-tp1-bs32-128-128",
    "lmdeploy-0.1.0a1-a100-llama2-13b-tp1-bs16-2048-128",
    "lmdeploy-0.1.0a1-a100-llama2-70b-tp4-bs16-128-2048",
    "lmdeploy-0.1.0a1-a100-llama2-70b-tp4-bs64-128-2048",
    "lmdeploy-0.1.0a1-a100-llama2-70b-tp4-ttft-2048",
    "gpt-fast-a100-330w-llama2-7b-bfloat16-tp1-bs1",
    "gpt-fast-a100-330w-llama2-7b-bfloat16-tp4-bs1",
    "gpt-fast-a100-330w-llama2-7b-bfloat16-tp8-bs1",
    "gpt-fast-a100-330w-llama2-70b-bfloat16-tp4-bs1",
    "gpt-fast-a100-330w-llama2-70b-bfloat16-tp8-bs1",
    "gpt-fast-a100-330w-llama2-70b-int8-tp1-bs1",
)
# The points held back from the fit, on which ERROR_BAND is measured.
HELD_BACK_POINT_IDS: Final[tuple[str, ...]] = (
    "trtllm-0.9.0-h200-mistral-7b-tp1-bs64-2048-128",
    "trtllm-0.9.0-h200-mixtral-8x7b-tp2-bs64-2048-2048",
    "trtllm-0.9.0-h200-llama2-70b-tp1-bs64-2048-2048",
    "trtllm-0.9.0-h100-mixtral-8x7b-tp2-bs64-2048-128",
    "trtllm-0.9.0-h100-llama2-70b-tp4-bs512-128-2048",
    "trtllm-0.9.0-l40s-mistral-7b-tp1-bs120-128-2048",
    "trtllm-0.9.0-l40s-mixtral-8x7b-tp4-bs256-128-2048",
    "trtllm-0.9.0-a100-llama2-7b-tp1-bs32-128-2048",
    "trtllm-0.9.0-a100-llama2-70b-tp8-bs512-128-2048",
    "trtllm-0.9.0-h200-llama2-70b-tp4-ttft-128",
    "trtllm-0.9.0-h100-llama2-70b-tp8-ttft-2048",
    "trtllm-0.9.0-a100-llama2-7b-tp1-ttft-2048",
    "trtllm-0.7a-h200-llama2-70b-tp1-bs192-128-2048",
    "lmdeploy-0.1.0a1-a100-llama2-7b-tp1-bs16-128-2048",
    "lmdeploy-0.1.0a1-a100-llama2-13b-tp1-bs1-128-128",
    "lmdeploy-0.1.0a1-a100-llama2-70b-tp4-bs1-128-2048",
    "lmdeploy-0.1.0a1-a100-llama2-13b-tp1-ttft-2048",
    "gpt-fast-a100-330w-llama2-7b-bfloat16-tp2-bs1",
    "gpt-fast-a100-330w-llama2-70b-bfloat16-tp2-bs1",
    "gpt-fast-a100-330w-llama2-7b-int8-tp1-bs1",
)


# --- model constants from the architecture ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParameterSplit:
    """Parameters that every token uses, and the routed experts' share (MoE)."""

    total: int
    dense: int
    per_expert: int  # one routed expert of one layer
    moe_layers: int
    num_experts: int
    experts_per_token: int

    @property
    def active(self) -> int:
        """Parameters one token runs through: the dense part and k experts per MoE layer."""
        return self.dense + self.moe_layers * self.experts_per_token * self.per_expert

    def read(self, tokens: int) -> float:
        """Parameters a pass over `tokens` tokens reads: the dense part, and the experts touched."""
        return self.dense + self.moe_layers * self.per_expert * expected_experts(
            self.num_experts, self.experts_per_token, tokens
        )

    def read_per_gpu(self, tokens: int, tp: int, ep: int, dp: int = 1) -> float:
        """Parameters the slowest GPU of a TP group reads in a pass over `tokens` tokens.

        Tensor parallelism (ep 1) shards every weight over the tp ranks, so each reads
        `read(tokens)` / tp. Expert parallelism over ep ranks gives each rank E / ep whole
        experts (sharded tp / ep ways where ep < tp); the dense part stays TP-sharded. The
        step waits for the rank whose experts the batch touches most, so a rank reads the
        busiest rank's experts (`busiest_rank_experts`), not the average: at small batch the
        routed tokens fall unevenly over the ranks.

        `dp` data-parallel attention ranks (vLLM's data_parallel_size, SGLang's DP attention),
        each with its own `tokens`, share one set of experts over their dp x tp GPUs: the
        experts see dp x tokens tokens, sharded over dp x tp GPUs (ep 1: every expert
        tensor-sharded dp x tp ways, as vLLM's FusedMoE flattens DP x TP without EP) or placed
        whole on ep ranks (moe_tp = dp x tp / ep); the dense part stays over the rank's tp."""
        if self.num_experts == 0 or (ep == 1 and dp == 1):
            return self.read(tokens) / tp
        routed = tokens * dp
        if ep == 1:
            touched = expected_experts(self.num_experts, self.experts_per_token, routed)
            return self.dense / tp + self.moe_layers * self.per_expert * touched / (tp * dp)
        experts = busiest_rank_experts(
            self.num_experts // ep, self.num_experts, self.experts_per_token, routed, ep
        )
        return self.dense / tp + self.moe_layers * self.per_expert * experts * ep / (tp * dp)


def expected_experts(num_experts: int, experts_per_token: int, tokens: int) -> float:
    """Distinct experts a batch of `tokens` tokens touches in one MoE layer, on average.

    Each token picks k of the E experts; with routing uniform and independent across tokens, a
    given expert is missed by one token with probability 1 - k/E, by all B tokens with
    (1 - k/E)^B, so by linearity of expectation the number touched is E x (1 - (1 - k/E)^B).
    Real routers are skewed toward some experts, which touches fewer: this is an upper estimate.
    """
    if num_experts == 0:
        return 0.0
    return num_experts * (1 - (1 - experts_per_token / num_experts) ** tokens)


@lru_cache(maxsize=4096)
def busiest_rank_experts(
    per_rank: int, num_experts: int, experts_per_token: int, tokens: int, ranks: int
) -> float:
    """Expected distinct experts touched on the busiest of `ranks` ranks of `per_rank` experts
    each, in one MoE layer of a pass over `tokens` tokens.

    Routing uniform as in `expected_experts`: an expert is touched with probability
    q = 1 - (1 - k/E)^B, so a rank's count is taken as Binomial(per_rank, q) (experts touched
    independently: the sum over ranks keeps the mean E x q), and the expected largest of
    `ranks` such counts is sum over m = 1..per_rank of P(max >= m) = 1 - F(m - 1)^ranks,
    F the binomial's distribution function. One rank: per_rank x q; many tokens: per_rank."""
    q = 1 - (1 - experts_per_token / num_experts) ** tokens
    below = 0.0  # F(m - 1)
    total = 0.0
    for m in range(1, per_rank + 1):
        below += math.comb(per_rank, m - 1) * q ** (m - 1) * (1 - q) ** (per_rank - m + 1)
        total += 1 - min(1.0, below) ** ranks
    return total


@lru_cache(maxsize=256)
def parameter_split(arch: ModelArchitecture) -> ParameterSplit:
    """Dense and expert parameters; an expert is a SwiGLU MLP of 3 x hidden x moe_intermediate
    weights (gate, up and down projections). The dense part (attention, embeddings, the dense
    layers' MLPs, shared experts) is what the routed experts leave of the total
    (`_moe_layers`: DeepSeek-V3's 58 MoE layers of 61, not 61, else its 17 B dense parameters
    come out 0 and a decode step reads no attention weights)."""
    total = _parameters(arch)
    moe = arch.moe
    if moe is None:
        return ParameterSplit(total, total, 0, 0, 0, 0)
    if arch.hidden_size is None:
        raise SizingError("model.hidden_size", "an MoE model needs hidden_size to size experts")
    per_expert = 3 * arch.hidden_size * moe.moe_intermediate_size
    layers = _moe_layers(arch, moe, total, per_expert)
    dense = max(0, total - layers * moe.num_experts * per_expert)
    return ParameterSplit(total, dense, per_expert, layers, moe.num_experts, moe.experts_per_token)


def _moe_layers(arch: ModelArchitecture, moe: MixtureOfExperts, total: int, per_expert: int) -> int:
    """Layers whose MLP is routed experts: `moe.num_moe_layers` where the model gives it (a
    config's first_k_dense_replace, moe_layer_freq, moe_layers); else the routed experts'
    parameters read from the config's tensors over one layer's experts; else as many layers
    as the parameter count holds experts for, at most every layer (a model that interleaves
    dense and MoE layers, Llama-4-Maverick's 24 of 48, or keeps a few dense ones,
    Kimi-K2's 60 of 61, holds no more)."""
    one_layer = moe.num_experts * per_expert
    if moe.num_moe_layers is not None:
        return moe.num_moe_layers
    known = arch.routed_experts_known
    if known is not None:
        return min(arch.num_layers, max(1, round(known.parameters / one_layer)))
    return max(1, min(arch.num_layers, total // one_layer))


def _parameters(arch: ModelArchitecture) -> int:
    if arch.num_parameters is not None:
        return arch.num_parameters
    if arch.weight_bytes is not None:
        bits = arch.weight_format.bits
        return arch.weight_bytes * 8 * bits.denominator // bits.numerator
    raise SizingError(
        "model.num_parameters", "the model needs num_parameters or weight_bytes to estimate speed"
    )


# --- costs -----------------------------------------------------------------------------------


@frozen
class StepCost:
    """What one forward pass asks of each GPU of the TP group, before any efficiency."""

    tokens: int  # tokens in the pass: B for a decode step, prompts x P for a prefill
    weight_bytes: int  # weights read per GPU
    kv_bytes: int  # cache read per GPU (KV by layer kind; recurrent states read and written)
    flops: int  # per GPU, all of them
    attention_flops: int  # per GPU, the part spent scoring and reading the cache
    bandwidth_bytes_per_s: float  # peak
    peak_flops_per_s: float  # peak at the weights' precision, for the linear layers
    tensor_parallel_size: int
    allreduces: int  # per pass
    allreduce_bytes: int  # each all-reduce's message: tokens x hidden x activation bytes
    link_bytes_per_s: float | None
    layers: int = 0  # the model's blocks, each with its own kernels (layer_overhead_us)
    # Whether the linear layers run on a tensor-core peak below 16 bits (FP8, FP4): timed at
    # efficiency.compute_low_precision.
    low_precision: bool = False
    # The attention's peak (`attention_peak_flops_per_s`); 0 takes peak_flops_per_s.
    attention_flops_per_s: float = 0.0
    # Expert parallelism across DP ranks: the bytes one GPU sends over its link to dispatch
    # its tokens to the experts' ranks and combine their outputs (`_PassConstants.cost`).
    all_to_all_bytes: int = 0
    # The layout the pass was timed under (`ParameterSplit.read_per_gpu`): 1 and 1 for TP.
    expert_parallel_size: int = 1
    data_parallel_size: int = 1

    @property
    def attention_peak(self) -> float:
        return self.attention_flops_per_s or self.peak_flops_per_s

    @property
    def bytes_read(self) -> int:
        return self.weight_bytes + self.kv_bytes

    @property
    def link_seconds(self) -> float:
        """Ring all-reduce time without its latency: 2(tp-1)/tp x message / link bandwidth
        (NVIDIA/nccl-tests doc/PERFORMANCE.md: an all-reduce moves 2(n-1)/n of the data
        through each rank's link)."""
        tp = self.tensor_parallel_size
        if self.link_bytes_per_s is None:
            return 0.0
        all_to_all = self.all_to_all_bytes / self.link_bytes_per_s
        if tp == 1:
            return all_to_all
        per_call = 2 * (tp - 1) / tp * self.allreduce_bytes / self.link_bytes_per_s
        return self.allreduces * per_call + all_to_all


@frozen
class StepTime:
    """A pass's time in milliseconds, term by term, and which term bounds it."""

    cost: StepCost
    memory_ms: float
    compute_ms: float
    interconnect_ms: float
    overhead_ms: float
    overlap: float

    @property
    def ms(self) -> float:
        larger = max(self.memory_ms, self.compute_ms)
        smaller = min(self.memory_ms, self.compute_ms)
        return larger + (1 - self.overlap) * smaller + self.interconnect_ms + self.overhead_ms

    @property
    def bound(self) -> PerformanceBound:
        if self.interconnect_ms > max(self.memory_ms, self.compute_ms):
            return PerformanceBound.INTERCONNECT
        if self.compute_ms > self.memory_ms:
            return PerformanceBound.COMPUTE
        return PerformanceBound.BANDWIDTH

    def steps(self, efficiency: Efficiency) -> tuple[str, ...]:
        """The arithmetic, one line per term, for the explanation."""
        c = self.cost
        lines = [*_layout_lines(c)]
        lines += [
            f"bytes read per GPU: {c.weight_bytes:,} B weights + {c.kv_bytes:,} B cache "
            f"= {c.bytes_read:,} B",
            f"memory: {c.bytes_read:,} B / ({c.bandwidth_bytes_per_s / TB:g} TB/s x "
            f"{efficiency.bandwidth:g}) = {self.memory_ms:.3f} ms",
            f"compute: {c.flops - c.attention_flops:,} FLOP / ({c.peak_flops_per_s / TERA:g} "
            f"TFLOPS x {linear_efficiency(c, efficiency):g}) + {c.attention_flops:,} attention "
            f"FLOP / ({c.attention_peak / TERA:g} TFLOPS x {efficiency.compute:g}) = "
            f"{self.compute_ms:.3f} ms",
        ]
        if c.tensor_parallel_size > 1:
            tp = c.tensor_parallel_size
            link = "?" if c.link_bytes_per_s is None else f"{c.link_bytes_per_s / GB:g}"
            lines.append(
                f"interconnect: {c.allreduces} all-reduces x (2 x {tp - 1}/{tp} x "
                f"{c.allreduce_bytes:,} B / {link} GB/s + "
                f"{efficiency.allreduce_latency_us:g} us)"
                + ("" if c.all_to_all_bytes else f" = {self.interconnect_ms:.3f} ms")
            )
        if c.all_to_all_bytes:
            link = "?" if c.link_bytes_per_s is None else f"{c.link_bytes_per_s / GB:g}"
            lines.append(
                f"expert all-to-all (dispatch + combine): {c.all_to_all_bytes:,} B / {link} "
                f"GB/s (its latency not timed); interconnect in all {self.interconnect_ms:.3f} ms"
            )
        lines.append(
            f"overhead: {efficiency.step_overhead_ms:g} ms + {c.layers} layers x "
            f"{efficiency.layer_overhead_us:g} us = {self.overhead_ms:.3f} ms"
        )
        larger = max(self.memory_ms, self.compute_ms)
        smaller = min(self.memory_ms, self.compute_ms)
        lines.append(
            f"pass: {larger:.3f} + (1 - {self.overlap:g}) x {smaller:.3f} + "
            f"{self.interconnect_ms:.3f} link + {self.overhead_ms:.3f} overhead = "
            f"{self.ms:.3f} ms ({self.bound.value}-bound)"
        )
        return tuple(lines)


def _layout_lines(cost: StepCost) -> tuple[str, ...]:
    """What a pass under expert or data parallelism is timed as (none under plain TP)."""
    ep, dp, tp = cost.expert_parallel_size, cost.data_parallel_size, cost.tensor_parallel_size
    if ep == 1 and dp == 1:
        return ()
    experts = "tensor-sharded" if ep == 1 else f"placed whole on EP {ep} ranks"
    read = "those" if ep == 1 else "the busiest rank's of those"
    own = f"one DP rank of {dp}: its {cost.tokens:,} tokens, " if dp > 1 else ""
    every = " (every DP rank's, each with as many)" if dp > 1 else ""
    return (
        f"layout: {own}attention and dense weights over TP {tp}, routed experts {experts} "
        f"over {tp * dp} GPUs; read: {read} that {cost.tokens * dp:,} tokens{every} touch",
    )


def step_time(cost: StepCost, efficiency: Efficiency) -> StepTime:
    memory_s = cost.bytes_read / (cost.bandwidth_bytes_per_s * efficiency.bandwidth)
    linear_flops = cost.flops - cost.attention_flops
    compute_s = linear_flops / (
        cost.peak_flops_per_s * linear_efficiency(cost, efficiency)
    ) + cost.attention_flops / (cost.attention_peak * efficiency.compute)
    link_s = cost.link_seconds
    if cost.tensor_parallel_size > 1:
        link_s += cost.allreduces * efficiency.allreduce_latency_us * 1e-6
    return StepTime(
        cost,
        memory_s * 1e3,
        compute_s * 1e3,
        link_s * 1e3,
        efficiency.step_overhead_ms + efficiency.layer_overhead_us * cost.layers / 1e3,
        efficiency.overlap,
    )


def linear_efficiency(cost: StepCost, efficiency: Efficiency) -> float:
    """The linear layers' fraction of their peak: compute_low_precision on an FP8/FP4 peak."""
    if cost.low_precision and efficiency.compute_low_precision is not None:
        return efficiency.compute_low_precision
    return efficiency.compute


def peak_flops_per_s(gpu: GpuPerformance, weight_format: WeightFormat) -> float:
    """The linear layers' tensor-core peak at the weights' precision: FP8 checkpoints are W8A8
    (TensorRT-LLM docs/source/blogs/H100vsA100.md: "FP8 is a W8A8 format"), at the FP8 peak
    where the GPU has one; FP4 checkpoints (NVFP4, MXFP4) are W4A4 on a GPU with FP4 tensor
    cores (Blackwell: the catalog's dense_fp4_tflops) and weight-only elsewhere, their weights
    dequantised to 16 bits before the matmul as AWQ's and GPTQ's are, so at the BF16 peak."""
    if weight_format in FP4_FORMATS:
        if gpu.dense_fp4_tflops is not None:
            return gpu.dense_fp4_tflops * TERA
        return gpu.dense_bf16_tflops * TERA
    if weight_format in FP8_COMPUTE_FORMATS and gpu.dense_fp8_tflops is not None:
        return gpu.dense_fp8_tflops * TERA
    return gpu.dense_bf16_tflops * TERA


def attention_peak_flops_per_s(gpu: GpuPerformance) -> float:
    """The attention's matmuls (scores and values against the cache) run at the BF16 peak
    whatever the weights' format: an FP8 (or FP4) checkpoint quantises the linear layers'
    weights, not the queries, keys and values, and an FP8 KV cache is dequantised to BF16/FP16
    as the attention kernel reads it (sgl-project/sglang issue #10083: "dequantize to BF16/FP16
    at the reading time for attention calculation"; vLLM docs/features/quantization/
    quantized_kvcache.md, v0.11.2: "no latency improvements as the implementation does not yet
    include fused dequantization and attention operations")."""
    return gpu.dense_bf16_tflops * TERA


@lru_cache(maxsize=256)
def allreduces_per_pass(arch: ModelArchitecture) -> int:
    """Megatron-style tensor parallelism all-reduces twice per transformer layer, after the
    attention (or mixer) and after the MLP (Shoeybi et al., "Megatron-LM", arXiv:1909.08053,
    section 3); a block that keeps no cache (Nemotron-H's separate MLP blocks) counts once."""
    return sum(1 if isinstance(layer, NoCache) else 2 for layer in arch.layers)


def _link(gpu: GpuPerformance, tensor_parallel_size: int) -> float | None:
    if tensor_parallel_size == 1:
        return None
    if gpu.interconnect_gb_s is None:
        raise SizingError(
            "gpu.interconnect_gb_s",
            "tensor parallelism needs the GPU's link bandwidth to estimate all-reduce time",
        )
    return gpu.interconnect_gb_s * GB


def _ep(arch: ModelArchitecture, tp: int, expert_parallel_size: int, dp: int = 1) -> int:
    """The expert-parallel size, checked: 1, or a divisor of the dp x tp GPUs that share the
    experts (`ParameterSplit.read_per_gpu`) that divides the routed experts. vLLM's
    enable_expert_parallel makes it dp x tp (vllm/model_executor/layers/fused_moe/config.py
    FusedMoEParallelConfig.make: ep_size = dp_size x tp_size). SGLang's --ep-size splits the
    --tp-size ranks into expert-parallel groups, the attention staying tensor-parallel
    (sgl-project/sglang docs/advanced_features/expert_parallelism.md); within one TP group
    (dp 1) each MoE layer's output is summed over the TP group, so the all-reduces are counted
    as under TP; across DP ranks the tokens' all-to-all is added (`all_to_all_bytes`)."""
    ep = expert_parallel_size
    _positive_int("data_parallel_size", dp)
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
        raise SizingError("expert_parallel_size", f"must be a positive integer, got {ep!r}")
    if ep == 1:
        return ep
    if arch.moe is None:
        raise SizingError("expert_parallel_size", "expert parallelism needs an MoE model")
    if (tp * dp) % ep or arch.moe.num_experts % ep:
        raise SizingError(
            "expert_parallel_size",
            f"must divide data_parallel_size x tensor_parallel_size ({dp} x {tp}) and the "
            f"routed experts ({arch.moe.num_experts}), got {ep}",
        )
    return ep


def _check_tp(tensor_parallel_size: int) -> None:
    if isinstance(tensor_parallel_size, bool) or tensor_parallel_size < 1:
        raise SizingError("tensor_parallel_size", "must be a positive integer")


def _weight_format(arch: ModelArchitecture, weight_format: WeightFormat | None) -> WeightFormat:
    return weight_format or arch.weight_format


# Memoised: a constant of the model and its format, asked by every decode and prefill step.
@lru_cache(maxsize=512)
def _bytes_per_parameter(arch: ModelArchitecture, weight_format: WeightFormat | None) -> float:
    if weight_format is None or weight_format == arch.weight_format:
        return weight_bytes_total(arch) / parameter_split(arch).total
    return float(weight_format.bits) / 8


def _attention_flops_per_pair(layer: TokenLayer | StateLayer, heads: int) -> int:
    """FLOPs for one query token against one cached token in one layer (2 FLOPs a multiply-add):
    QK^T is heads x head_dim multiply-adds and softmax x V heads x v_head_dim, so
    2 x heads x (head_dim + v_head_dim). MLA with absorbed projections scores against the
    latent plus rope part and reads values from the latent."""
    if isinstance(layer, MultiHeadLatentAttention):
        return 2 * heads * (2 * layer.kv_lora_rank + layer.qk_rope_head_dim)
    if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
        return 0
    v_head_dim = layer.head_dim if layer.v_head_dim is None else layer.v_head_dim
    return 2 * heads * (layer.head_dim + v_head_dim)


def _state_flops_per_token(layer: StateLayer) -> int:
    """A recurrent layer updates and reads its state once per token: ~4 FLOPs per element."""
    return 4 * state_shape(layer, 1).ssm_elements


def _attended(layer: TokenLayer, context_tokens: int) -> int:
    """Cached tokens one new token attends to: all of them, its window, or its chunk."""
    if isinstance(layer, SlidingWindowAttention):
        return min(context_tokens, layer.sliding_window)
    if isinstance(layer, ChunkedLocalAttention):
        return min(context_tokens, layer.attention_chunk_size)
    return context_tokens


def causal_pairs(layer: TokenLayer, prompt_tokens: int) -> int:
    """(query, key) pairs a causal prefill of P tokens scores in one layer: P(P+1)/2 for full
    attention and MLA; at most `window` keys per query for a sliding layer; within each chunk
    for a chunked one."""
    p = prompt_tokens
    if isinstance(layer, SlidingWindowAttention) and p > layer.sliding_window:
        w = layer.sliding_window
        return w * (w + 1) // 2 + (p - w) * w
    if isinstance(layer, ChunkedLocalAttention) and p > layer.attention_chunk_size:
        c = layer.attention_chunk_size
        full, rest = divmod(p, c)
        return full * c * (c + 1) // 2 + rest * (rest + 1) // 2
    return p * (p + 1) // 2


def _kv_bytes_per_token_layer(
    arch: ModelArchitecture, layer: TokenLayer, kv_cache_dtype: KvCacheDtype, tp: int
) -> int:
    kv_bytes = kv_cache_dtype.bytes_at(arch.dtype)
    packed = (
        isinstance(layer, MultiHeadLatentAttention)
        and layer.indexer_head_dim is not None
        and kv_cache_dtype.packed_mla
    )
    return token_bytes_per_layer(layer, kv_bytes, tp, packed)


def decode_cost(
    arch: ModelArchitecture,
    gpu: GpuPerformance,
    batch: int,
    context_tokens: int,
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO,
    weight_format: WeightFormat | None = None,
    expert_parallel_size: int = 1,
    data_parallel_size: int = 1,
) -> StepCost:
    """One decode step: B sequences each add one token at context C.

    Bytes: weights per GPU (for an MoE the experts B tokens touch) plus each sequence's cache
    as the step reads it: C tokens for a full layer, min(C, window) for a sliding one, the chunk
    for a chunked one, the latent for MLA (kv.token_bytes_per_layer: not split by TP), and a
    recurrent layer's fixed state, read and written back. FLOPs: 2 x active parameters per
    token (Kaplan et al., "Scaling Laws for Neural Language Models", arXiv:2001.08361, section
    2.1: C_forward = 2N + 2 n_layer n_ctx d_attn) plus the attention over the cached tokens,
    split over the TP ranks.
    """
    _positive_int("batch", batch)
    _positive_int("context_tokens", context_tokens)
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    dp = data_parallel_size
    step = _pass_constants(
        arch, gpu, tp, weight_format, _ep(arch, tp, expert_parallel_size, dp), dp=dp
    )
    reads = _cache_reads(arch, kv_cache_dtype, tp)
    terms = step.attention
    # Integers throughout: the per-layer sums, grouped once per model, are the same numbers.
    kv = batch * (reads.state + context_tokens * reads.full)
    attention_flops = terms.state + context_tokens * terms.full
    if reads.windowed:  # sliding or chunked layers (most models have none)
        kv += sum(batch * _attended(layer, context_tokens) * b for layer, b in reads.windowed)
        attention_flops += sum(_attended(layer, context_tokens) * f for layer, f in terms.windowed)
    flops = (2 * step.split.active + attention_flops) * batch // tp
    return step.cost(batch, kv_bytes=kv, flops=flops, attention_flops=attention_flops * batch // tp)


def prefill_cost(
    arch: ModelArchitecture,
    gpu: GpuPerformance,
    prompt_tokens: int,
    *,
    prompts: int = 1,
    tensor_parallel_size: int = 1,
    weight_format: WeightFormat | None = None,
    expert_parallel_size: int = 1,
    data_parallel_size: int = 1,
) -> StepCost:
    """One prefill pass over `prompts` prompts of P tokens each (compute-bound for all but the
    shortest prompts). FLOPs: 2 x active parameters x P, plus the causal attention's quadratic
    part, 2 x heads x (head_dim + v_head_dim) x P(P+1)/2 per layer (about P^2/2 pairs); a
    recurrent layer is linear in P. Bytes: the weights the tokens touch, read once."""
    _positive_int("prompt_tokens", prompt_tokens)
    _positive_int("prompts", prompts)
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    dp = data_parallel_size
    step = _pass_constants(
        arch, gpu, tp, weight_format, _ep(arch, tp, expert_parallel_size, dp), dp=dp
    )
    terms = step.attention
    p = prompt_tokens
    attention_flops = p * terms.state + p * (p + 1) // 2 * terms.full
    if terms.windowed:
        attention_flops += sum(causal_pairs(layer, p) * f for layer, f in terms.windowed)
    tokens = prompts * prompt_tokens
    flops = prompts * (2 * step.split.active * prompt_tokens + attention_flops) // tp
    return step.cost(
        tokens, kv_bytes=0, flops=flops, attention_flops=prompts * attention_flops // tp
    )


@dataclass(frozen=True, slots=True)
class PrefillChunk:
    """One prompt's share of a step: `tokens` prompt tokens computed in this step after
    `computed` of its tokens already in the cache (vLLM's num_computed_tokens; 0 for a prompt's
    first chunk, the cached prefix for a prefix-cache hit)."""

    computed: int
    tokens: int


def mixed_cost(
    arch: ModelArchitecture,
    gpu: GpuPerformance,
    decodes: int,
    context_tokens: int,
    chunks: tuple[PrefillChunk, ...] = (),
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO,
    weight_format: WeightFormat | None = None,
    expert_parallel_size: int = 1,
    data_parallel_size: int = 1,
) -> StepCost:
    """One engine step that decodes `decodes` sequences at context C and computes prefill
    `chunks` in the same forward pass, as vLLM's V1 scheduler batches them (vllm
    vllm/v1/core/sched/scheduler.py Scheduler.schedule, release 0.11.0: the running requests'
    tokens first, then waiting prompts' chunks, all within max_num_batched_tokens, one forward).

    One roofline pass over D + sum(n_i) tokens: the weights read once (for an MoE, the experts
    all the step's tokens touch); cache bytes of the D decodes as `decode_cost` counts them plus,
    per chunk, the o_i tokens already cached before it, read once (a recurrent layer's state
    read and written once per chunk); FLOPs 2 x active parameters per token plus the decodes'
    attention over C tokens and each chunk's n_i queries over the o_i tokens before them and
    causally among themselves: causal_pairs(o_i + n_i) - causal_pairs(o_i) pairs per layer
    (chunks of different prompts do not attend to one another). The all-reduces carry every
    token of the step. With no chunk this is `decode_cost`; with no decode and one chunk
    (0, P), `prefill_cost` (plus a recurrent layer's state write)."""
    if isinstance(decodes, bool) or not isinstance(decodes, int) or decodes < 0:
        raise SizingError("decodes", f"must be zero or a positive integer, got {decodes!r}")
    for chunk in chunks:
        _positive_int("chunk.tokens", chunk.tokens)
        if isinstance(chunk.computed, bool) or chunk.computed < 0:
            raise SizingError("chunk.computed", "must be zero or a positive integer")
    tokens = decodes + sum(chunk.tokens for chunk in chunks)
    _positive_int("tokens", tokens)
    if decodes:
        _positive_int("context_tokens", context_tokens)
    _check_tp(tensor_parallel_size)
    tp = tensor_parallel_size
    dp = data_parallel_size
    step = _pass_constants(
        arch, gpu, tp, weight_format, _ep(arch, tp, expert_parallel_size, dp), dp=dp
    )
    reads = _cache_reads(arch, kv_cache_dtype, tp)
    terms = step.attention
    kv = decodes * (reads.state + context_tokens * reads.full) if decodes else 0
    attention_flops = decodes * (terms.state + context_tokens * terms.full) if decodes else 0
    for layer, b in reads.windowed if decodes else ():
        kv += decodes * _attended(layer, context_tokens) * b
    for layer, f in terms.windowed if decodes else ():
        attention_flops += decodes * _attended(layer, context_tokens) * f
    for chunk in chunks:
        o, n = chunk.computed, chunk.tokens
        kv += (reads.state if terms.state else 0) + o * reads.full
        kv += sum(_attended(layer, o) * b for layer, b in reads.windowed)
        pairs = (o + n) * (o + n + 1) // 2 - o * (o + 1) // 2
        attention_flops += n * terms.state + pairs * terms.full
        attention_flops += sum(
            (causal_pairs(layer, o + n) - causal_pairs(layer, o)) * f for layer, f in terms.windowed
        )
    flops = (2 * step.split.active * tokens + attention_flops) // tp
    return step.cost(tokens, kv_bytes=kv, flops=flops, attention_flops=attention_flops // tp)


def closed_loop_tpot_ms(decode: StepTime, prefill: StepTime, prefills_per_step: float) -> float:
    """Mean time per output token of a closed loop: each decode step also carries the prompts
    of the requests that replace finished ones. B running requests of `output` tokens each
    finish, and are replaced, B / output per step, so each step adds that many prefills; a
    prefill added to a step costs its own pass less the step's fixed overhead (the launches
    are shared):

        TPOT = decode step(B) + B / output x (prefill(prompt) - overhead)

    The rule the speed fit is fitted with (performance_fit.closed_loop_tpot_ms calls this one),
    so the answers' closed-loop TPOT and the fit's stay one rule. It prices a prompt's weights
    again for each prefill where one mixed pass (`mixed_cost`) reads them once per step: the
    fitted efficiencies absorb that, and a refit on `mixed_cost` is left to the fit's owner."""
    if not prefills_per_step >= 0:
        raise SizingError("prefills_per_step", "must be zero or a positive number")
    return decode.ms + prefills_per_step * (prefill.ms - prefill.overhead_ms)


@dataclass(frozen=True, slots=True)
class _PassConstants:
    """What every pass of one model on one TP group of one GPU shares, whatever its batch,
    context or prompt: the parameters and their bytes, the attention's per-layer sums, the
    GPU's peaks at the weights' precision, the all-reduces and the link."""

    split: ParameterSplit
    bytes_per_parameter: float
    tensor_parallel_size: int
    attention: _LayerSums
    bandwidth_bytes_per_s: float
    peak_flops_per_s: float
    allreduces: int
    allreduce_bytes_per_token: int  # one token's hidden state in the model's dtype
    link_bytes_per_s: float | None
    layers: int
    attention_flops_per_s: float
    low_precision: bool
    expert_parallel_size: int = 1
    data_parallel_size: int = 1
    # One token's dispatch and combine over every MoE layer, bytes, when the experts span
    # more than this DP rank's GPUs (`all_to_all_bytes`); 0 otherwise.
    all_to_all_bytes_per_token: int = 0

    def weights_read(self, tokens: int) -> int:
        """Weights a pass over `tokens` tokens reads per GPU: every dense weight, and the
        experts the tokens touch; all sharded over the TP ranks. Bytes per parameter are the
        checkpoint's average, or the asked-for format's (weights.weight_bytes_total re-prices
        the same way)."""
        parameters = self.split.read_per_gpu(
            tokens, self.tensor_parallel_size, self.expert_parallel_size, self.data_parallel_size
        )
        return round(parameters * self.bytes_per_parameter)

    def cost(self, tokens: int, *, kv_bytes: int, flops: int, attention_flops: int) -> StepCost:
        """A pass over `tokens` tokens that reads `kv_bytes` of cache and does `flops` (of
        which `attention_flops` score and read the cache), per GPU."""
        return StepCost(
            tokens=tokens,
            weight_bytes=self.weights_read(tokens),
            kv_bytes=kv_bytes,
            flops=flops,
            attention_flops=attention_flops,
            bandwidth_bytes_per_s=self.bandwidth_bytes_per_s,
            peak_flops_per_s=self.peak_flops_per_s,
            tensor_parallel_size=self.tensor_parallel_size,
            allreduces=self.allreduces,
            allreduce_bytes=tokens * self.allreduce_bytes_per_token,
            link_bytes_per_s=self.link_bytes_per_s,
            layers=self.layers,
            attention_flops_per_s=self.attention_flops_per_s,
            low_precision=self.low_precision,
            all_to_all_bytes=tokens * self.all_to_all_bytes_per_token,
            expert_parallel_size=self.expert_parallel_size,
            data_parallel_size=self.data_parallel_size,
        )


# Memoised per model, GPU, TP size and weights' format: a capacity answer times three passes
# and a plan dozens, each of which would otherwise look up every constant on its own.
@lru_cache(maxsize=4096)
def _pass_constants(
    arch: ModelArchitecture,
    gpu: GpuPerformance,
    tp: int,
    weight_format: WeightFormat | None,
    ep: int = 1,
    *,
    dp: int = 1,
) -> _PassConstants:
    fmt = _weight_format(arch, weight_format)
    terms = _attention_terms(arch)
    split = parameter_split(arch)
    peak = peak_flops_per_s(gpu, fmt)
    return _PassConstants(
        split=split,
        bytes_per_parameter=_bytes_per_parameter(arch, weight_format),
        tensor_parallel_size=tp,
        attention=terms,
        bandwidth_bytes_per_s=gpu.memory_bandwidth_tb_s * TB,
        peak_flops_per_s=peak,
        allreduces=allreduces_per_pass(arch),
        allreduce_bytes_per_token=_hidden(arch, tp) * arch.dtype.element_bytes,
        link_bytes_per_s=_link(gpu, tp * dp),
        layers=len(arch.layers),
        attention_flops_per_s=attention_peak_flops_per_s(gpu),
        low_precision=peak > gpu.dense_bf16_tflops * TERA,
        expert_parallel_size=ep,
        data_parallel_size=dp,
        all_to_all_bytes_per_token=all_to_all_bytes(arch, split, tp, ep, dp),
    )


def all_to_all_bytes(
    arch: ModelArchitecture, split: ParameterSplit, tp: int, ep: int, dp: int
) -> int:
    """Bytes one GPU sends per token of its DP rank to dispatch the token to its experts and
    combine their outputs, over every MoE layer, when the experts span more than the rank's
    own GPUs (dp > 1 with ep > 1); 0 otherwise (SGLang's EP within one TP group sums the
    experts' outputs in the TP all-reduces, `_ep`).

    Each token's hidden state goes to each of its top_k experts and each expert's output comes
    back (DeepSeek-V3 technical report, arXiv:2412.19437, section 3.2.2: tokens are dispatched
    to their routed experts and the outputs combined back), in the model's dtype: 2 x top_k x
    hidden x dtype bytes per MoE layer. With routing uniform over the ep ranks, (ep - 1) / ep
    of it leaves the GPU; a DP rank's tokens are taken as split evenly over its tp GPUs'
    links. The dispatch in FP8 that DeepEP offers is not counted (BF16 both ways)."""
    if dp == 1 or ep == 1 or split.num_experts == 0:
        return 0
    hidden = _hidden(arch, 2)
    per_token = 2 * split.experts_per_token * hidden * arch.dtype.element_bytes * split.moe_layers
    return per_token * (ep - 1) // (ep * tp)


@dataclass(frozen=True, slots=True)
class _LayerSums:
    """A model's per-layer constants summed over its layers (each layer's count times it):
    `state` for the recurrent layers, `full` for the layers that attend to every cached token
    (full attention, MLA), and one entry per sliding or chunked layer, whose tokens attended
    depend on the context (`_attended`, `causal_pairs`)."""

    state: int
    full: int
    windowed: tuple[tuple[TokenLayer, int], ...]


# Memoised per model: decode_cost and prefill_cost sum these over the layers for every step.
@lru_cache(maxsize=512)
def _attention_terms(arch: ModelArchitecture) -> _LayerSums:
    """FLOPs per (query, cached token) pair of the attention layers; per token of the
    recurrent ones (`_attention_flops_per_pair`, `_state_flops_per_token`)."""
    state = full = 0
    windowed: list[tuple[TokenLayer, int]] = []
    for layer, count in arch.cache_layer_counts:
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            state += count * _state_flops_per_token(layer)
            continue
        flops = count * _attention_flops_per_pair(layer, arch.num_attention_heads)
        if isinstance(layer, SlidingWindowAttention | ChunkedLocalAttention):
            windowed.append((layer, flops))
        else:
            full += flops
    return _LayerSums(state, full, tuple(windowed))


# Memoised per model, cache dtype and TP size, for the same reason as `_attention_terms`.
@lru_cache(maxsize=1024)
def _cache_reads(arch: ModelArchitecture, kv_cache_dtype: KvCacheDtype, tp: int) -> _LayerSums:
    """Cache bytes one decode step reads per sequence: per cached token attended for the
    attention layers (`_kv_bytes_per_token_layer`); a recurrent layer's whole state, read and
    written back (`state_bytes_per_sequence`, twice)."""
    conv_bytes, ssm_bytes = state_dtype_bytes(arch)
    state = full = 0
    windowed: list[tuple[TokenLayer, int]] = []
    for layer, count in arch.cache_layer_counts:
        if isinstance(layer, GatedDeltaNet | Mamba2 | Mamba1):
            state += count * 2 * state_bytes_per_sequence(layer, conv_bytes, ssm_bytes, tp)
            continue
        per_token = count * _kv_bytes_per_token_layer(arch, layer, kv_cache_dtype, tp)
        if isinstance(layer, SlidingWindowAttention | ChunkedLocalAttention):
            windowed.append((layer, per_token))
        else:
            full += per_token
    return _LayerSums(state, full, tuple(windowed))


def _hidden(arch: ModelArchitecture, tp: int) -> int:
    if arch.hidden_size is None:
        if tp == 1:
            return 0
        raise SizingError("model.hidden_size", "tensor parallelism needs hidden_size")
    return arch.hidden_size


def _positive_int(field_name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SizingError(field_name, f"must be a positive integer, got {value!r}")


# --- the estimate the answers carry ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Speculation:
    """Speculative decoding as the decode step is timed with it: each step verifies
    1 + num_speculative_tokens tokens per sequence (vLLM --speculative-config
    `num_speculative_tokens`), and emits `acceptance_length` of them on average: vLLM's
    "Mean acceptance length" (vllm vllm/v1/spec_decode/metrics.py, its "SpecDecoding
    metrics" log line: 1 + accepted tokens / drafts, the bonus token included), as the caller
    measured it. The drafter's own passes are not timed (an MTP or EAGLE head's k small
    steps), so the speed-up is an upper bound."""

    num_speculative_tokens: int
    acceptance_length: float

    def __post_init__(self) -> None:
        _positive_int("num_speculative_tokens", self.num_speculative_tokens)
        most = 1 + self.num_speculative_tokens
        if not 1 <= self.acceptance_length <= most:
            raise SizingError(
                "acceptance_length",
                f"must be between 1 and 1 + num_speculative_tokens ({most}), "
                f"got {self.acceptance_length}",
            )


def verify_cost(
    arch: ModelArchitecture,
    gpu: GpuPerformance,
    batch: int,
    context_tokens: int,
    speculation: Speculation,
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO,
    weight_format: WeightFormat | None = None,
    expert_parallel_size: int = 1,
    data_parallel_size: int = 1,
) -> StepCost:
    """A speculative decoding step: each of B sequences at context C scores its last token and
    k drafted ones, 1 + k queries over the C cached tokens and causally among themselves, in
    one pass (`mixed_cost` with one chunk of 1 + k tokens after C per sequence)."""
    _positive_int("batch", batch)
    chunk = PrefillChunk(computed=context_tokens, tokens=1 + speculation.num_speculative_tokens)
    return mixed_cost(
        arch,
        gpu,
        0,
        0,
        (chunk,) * batch,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        weight_format=weight_format,
        expert_parallel_size=expert_parallel_size,
        data_parallel_size=data_parallel_size,
    )


# What `decode_ms_per_token_at_peak` assumes, said in the answer's steps and its schema.
PEAK_STEP_NOTE: Final = (
    "decode_ms_per_token_at_peak is the decode-only step: no prefill in it; a closed loop's "
    "steady state adds peak sequences / output length prompts per step "
    "(closed_loop_tpot_ms), and a step with chunks is mixed_cost's"
)


@frozen
class PerformanceEstimate:
    """Decode and prefill speed of one replica; the names are the answers' field names."""

    decode_ms_per_token: float  # TPOT at `batch` sequences
    decode_ms_per_token_at_peak: float | None  # TPOT at the peak concurrency, when given
    output_tokens_per_second: float  # per replica, at `batch`
    output_tokens_per_second_per_user: float
    prefill_ms: float  # one prompt alone
    ttft_ms: float | None  # prefill plus the queue wait; None when prefill cannot keep up
    queue_wait_ms: float
    performance_bound: PerformanceBound  # of the decode step at `batch`
    error_band: float
    decode: StepTime
    peak: StepTime | None
    prefill: StepTime
    efficiency: Efficiency
    arrivals_per_second: float | None
    speculation: Speculation | None = None

    def sequences(self, decode: StepTime) -> int:
        """Sequences a decode step runs: its tokens, over 1 + k when it verifies drafts."""
        spec = self.speculation
        return decode.cost.tokens // (1 + (0 if spec is None else spec.num_speculative_tokens))

    @property
    def steps(self) -> tuple[str, ...]:
        e = self.efficiency
        d = self.decode
        batch = self.sequences(d)
        lines = [f"decode step at {batch} sequences:"]
        lines += [f"  {line}" for line in d.steps(e)]
        spec = self.speculation
        if spec is not None:
            lines.append(
                f"  speculative: {batch} sequences x (1 + {spec.num_speculative_tokens}) tokens "
                f"verified per step, acceptance_length {spec.acceptance_length:g} emitted: "
                f"{d.ms:.3f} ms / {spec.acceptance_length:g} = {self.decode_ms_per_token:.3f} ms "
                "per token (the drafter's passes not timed)"
            )
        lines.append(
            f"  {batch} x {1 if spec is None else spec.acceptance_length:g} tokens per "
            f"{d.ms:.3f} ms = {self.output_tokens_per_second:,.1f} output tokens/s per replica, "
            f"{self.output_tokens_per_second_per_user:.1f} per user"
        )
        if self.peak is not None:
            lines.append(f"decode step at {self.sequences(self.peak)} sequences (peak):")
            lines += [f"  {line}" for line in self.peak.steps(e)]
            lines.append(f"  {PEAK_STEP_NOTE}")
        lines.append(f"prefill of one {self.prefill.cost.tokens}-token prompt:")
        lines += [f"  {line}" for line in self.prefill.steps(e)]
        lines.append(self._ttft_line())
        lines.append(
            f"error band: +/-{self.error_band:.0%} (80th percentile of the held-back "
            "calibration points' error)"
        )
        return tuple(lines)

    def _ttft_line(self) -> str:
        if self.arrivals_per_second is None:
            return f"time to first token: the prefill alone, {self.prefill_ms:.3f} ms (no load)"
        rho = self.arrivals_per_second * self.prefill_ms / 1e3
        if self.ttft_ms is None:
            return (
                f"time to first token: prefill load {self.arrivals_per_second:g}/s x "
                f"{self.prefill_ms:.3f} ms = {rho:.2f} >= 1, the prompt queue grows without bound"
            )
        return (
            f"time to first token: M/D/1 wait {rho:.2f} x {self.prefill_ms:.3f} ms / "
            f"(2 x (1 - {rho:.2f})) = {self.queue_wait_ms:.3f} ms + prefill "
            f"{self.prefill_ms:.3f} ms = {self.ttft_ms:.3f} ms"
        )


def queue_wait_ms(service_ms: float, arrivals_per_second: float) -> float | None:
    """Mean wait of an M/D/1 queue (Pollaczek-Khinchine with deterministic service,
    https://en.wikipedia.org/wiki/M/D/1_queue): rho x S / (2 (1 - rho)), rho = lambda x S.

    Prompts arrive at random (Poisson) and each prefill takes the same S; decode steps that
    share the GPU are not counted. None when rho >= 1: the queue grows without bound."""
    rho = arrivals_per_second * service_ms / 1e3
    if rho >= 1:
        return None
    return rho * service_ms / (2 * (1 - rho))


def estimate_performance(
    arch: ModelArchitecture,
    gpu: GpuPerformance,
    *,
    batch: int,
    context_tokens: int,
    prompt_tokens: int,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO,
    weight_format: WeightFormat | None = None,
    peak_batch: int | None = None,
    arrivals_per_second: float | None = None,
    efficiency: Efficiency | None = None,
    error_band: float | None = None,
    speculation: Speculation | None = None,
    expert_parallel_size: int = 1,
    data_parallel_size: int = 1,
) -> PerformanceEstimate:
    """TPOT and throughput at `batch` sequences of `context_tokens`, prefill of one prompt of
    `prompt_tokens`, and TTFT with `arrivals_per_second` prompts arriving at this replica.
    Under DP x EP (`data_parallel_size` > 1) the replica is one DP rank: its batch, its TP
    group, the experts shared with the other ranks, each running as many sequences.
    The efficiencies default to the GPU vendor's (`fitted_efficiency`), the error band to the
    answer's class (`error_band_for`)."""
    if efficiency is None:
        efficiency = fitted_efficiency(gpu)
    if error_band is None:
        error_band = error_band_for(arch, gpu)
    _check_modelled(arch)

    def decode_at(sequences: int) -> StepTime:
        tp, dtype, fmt = tensor_parallel_size, kv_cache_dtype, weight_format
        ep, dp = expert_parallel_size, data_parallel_size
        if speculation is None:
            cost = decode_cost(
                arch, gpu, sequences, context_tokens, tensor_parallel_size=tp,
                kv_cache_dtype=dtype, weight_format=fmt, expert_parallel_size=ep,
                data_parallel_size=dp,
            )  # fmt: skip
        else:
            cost = verify_cost(
                arch, gpu, sequences, context_tokens, speculation, tensor_parallel_size=tp,
                kv_cache_dtype=dtype, weight_format=fmt, expert_parallel_size=ep,
                data_parallel_size=dp,
            )  # fmt: skip
        return step_time(cost, efficiency)

    decode = decode_at(batch)
    peak = None if peak_batch is None else decode_at(peak_batch)
    prefill = step_time(
        prefill_cost(
            arch, gpu, prompt_tokens, tensor_parallel_size=tensor_parallel_size,
            weight_format=weight_format, expert_parallel_size=expert_parallel_size,
            data_parallel_size=data_parallel_size,
        ),
        efficiency,
    )  # fmt: skip
    return _estimate(
        decode,
        peak,
        prefill,
        batch=batch,
        wait=_prefill_wait(prefill.ms, arrivals_per_second),
        arrivals_per_second=arrivals_per_second,
        efficiency=efficiency,
        error_band=error_band,
        speculation=speculation,
    )


def _check_modelled(arch: ModelArchitecture) -> None:
    if arch.has_compressed_attention:
        # Its cache reads and attention FLOPs are neither per cached token nor a fixed state:
        # the roofline's layer sums would count none of them.
        raise SizingError(
            "model",
            "the speed of DeepSeek-V4's compressed sparse attention (windows, compressed rows "
            "and indexer top-k) is not modelled",
        )


def _prefill_wait(prefill_ms: float, arrivals_per_second: float | None) -> float | None:
    """The wait before a prompt's prefill: 0 without an arrival rate, else the M/D/1 wait
    (`queue_wait_ms`; None when the queue grows without bound)."""
    if arrivals_per_second is None:
        return 0.0
    if not arrivals_per_second >= 0:
        raise SizingError("arrivals_per_second", "must be zero or a positive number")
    return queue_wait_ms(prefill_ms, arrivals_per_second)


def _estimate(
    decode: StepTime,
    peak: StepTime | None,
    prefill: StepTime,
    *,
    batch: int,
    wait: float | None,
    arrivals_per_second: float | None,
    efficiency: Efficiency,
    error_band: float,
    speculation: Speculation | None = None,
) -> PerformanceEstimate:
    """TPOT, throughput and TTFT from the decode and prefill step times and the wait; with
    speculative decoding a step emits acceptance_length tokens per sequence."""
    per_step = 1.0 if speculation is None else speculation.acceptance_length
    decode_ms, prefill_ms = decode.ms / per_step, prefill.ms
    return PerformanceEstimate(
        decode_ms_per_token=decode_ms,
        decode_ms_per_token_at_peak=None if peak is None else peak.ms / per_step,
        output_tokens_per_second=batch * 1e3 / decode_ms,
        output_tokens_per_second_per_user=1e3 / decode_ms,
        prefill_ms=prefill_ms,
        ttft_ms=None if wait is None else prefill_ms + wait,
        queue_wait_ms=0.0 if wait is None else wait,
        performance_bound=decode.bound,
        error_band=error_band,
        decode=decode,
        peak=peak,
        prefill=prefill,
        efficiency=efficiency,
        arrivals_per_second=arrivals_per_second,
        speculation=speculation,
    )
