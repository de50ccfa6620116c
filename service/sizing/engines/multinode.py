"""Layouts that span nodes: tensor parallelism inside a node, pipeline stages across nodes.

vLLM's parallelism guide ("Distributed inference and serving", docs/serving/
parallelism_scaling.md): a model too large for one node runs tensor parallel within a node
and pipeline parallel across nodes (`--tensor-parallel-size` GPUs per node,
`--pipeline-parallel-size` nodes). SGLang does the same with `--tp-size`, `--pp-size` and
`--nnodes` (sglang python/sglang/srt/server_args.py `ServerArgs`: tp_size, pp_size, nnodes,
node_rank, dist_init_addr; one node holds tp_size x pp_size / nnodes GPUs).

The planner tries these layouts only for a GPU none of whose single-node layouts fits: a
pipeline adds an inter-node hop to every step, so one node is preferred whenever it can
serve, and the search stays a handful of extra candidates per GPU (`MAX_PIPELINE_NODES`).

The speed of a pipeline of `pp` stages, one sequence's step: the stages run one after another,
each on its own layers, so the step is the whole model's step at the same TP (the layers' time
adds up) plus `pp - 1` hops of the hidden states between nodes:
    hop bytes = hidden_size x tokens x 2 B (bf16 activations), over one GPU's inter-node link.
vLLM overlaps microbatches of different requests across stages (virtual engines), which raises
throughput, not one sequence's time per token; this estimate does not count that overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from ..model.architecture import ModelArchitecture
from ..speed.performance import PerformanceEstimate
from .common import Gpu

# The most nodes one replica's pipeline spans in a plan's search.
MAX_PIPELINE_NODES: Final = 4

# Inter-node bandwidth per GPU, one direction, GB/s (10^9 B/s). An H100/H200/B200 HGX node
# has one 400 Gb/s InfiniBand NDR (ConnectX-7) port per GPU: NVIDIA DGX H100 User Guide,
# "Introduction to the NVIDIA DGX H100 System" (8 x single-port ConnectX-7 400 Gb/s for the
# compute fabric), 400 Gb/s / 8 = 50 GB/s. The catalog records no inter-node figure, so every
# GPU is timed with this one; a slower fabric (RoCE at 200 Gb/s, Ethernet) makes hops slower.
INTERNODE_GB_S: Final = 50.0
ACTIVATION_BYTES: Final = 2  # bf16 hidden states sent between stages
GB: Final = 10**9


def internode_gb_s(gpu: Gpu) -> float:
    """The inter-node link of one GPU (see INTERNODE_GB_S)."""
    del gpu  # one default for every GPU until the catalog records the fabric
    return INTERNODE_GB_S


def hop_bytes(arch: ModelArchitecture, tokens: int) -> int:
    """Bytes of hidden states one stage sends the next for `tokens` tokens."""
    return (arch.hidden_size or 0) * tokens * ACTIVATION_BYTES


def pipeline_hops_ms(
    arch: ModelArchitecture, gpu: Gpu, pipeline_parallel_size: int, tokens: int
) -> float:
    """The time of the `pp - 1` inter-node hops of one step of `tokens` tokens, ms."""
    hops = pipeline_parallel_size - 1
    if hops <= 0:
        return 0.0
    return hops * hop_bytes(arch, tokens) / (internode_gb_s(gpu) * GB) * 1e3


def nodes_to_try(pipeline_parallel_size_limit: int, num_layers: int) -> range:
    """PP sizes to try: 2 ... MAX_PIPELINE_NODES, never more stages than layers."""
    return range(2, min(pipeline_parallel_size_limit, num_layers) + 1)


VLLM_NODE0: Final = "$NODE0_IP"  # the first node's address, set on every node
VLLM_MASTER_PORT: Final = 29500  # vLLM's default --master-port
SGLANG_DIST_PORT: Final = 50000  # the port of SGLang's docs' multi-node example


def node_flags(
    flags: dict[str, list[str]], pipeline_parallel_size: int
) -> dict[str, list[list[str]]]:
    """The flags to paste on each node (node rank 0 first) of a `pp`-node replica.

    vLLM (EngineArgs nnodes, node_rank, master_addr, master_port, headless in vllm/engine/
    arg_utils.py; multiprocessing executor across nodes): every node runs the same
    `vllm serve` with its `--node-rank`; the other nodes run `--headless` (no API server).
    SGLang: every node runs the same server with its `--node-rank` and `--dist-init-addr`
    of node 0.
    """
    pp = pipeline_parallel_size

    def vllm(rank: int) -> list[str]:
        return [
            f"--pipeline-parallel-size {pp}",
            f"--nnodes {pp}",
            f"--node-rank {rank}",
            f"--master-addr {VLLM_NODE0}",
            f"--master-port {VLLM_MASTER_PORT}",
            *(["--headless"] if rank > 0 else []),
        ]

    def sglang(rank: int) -> list[str]:
        return [
            f"--pp-size {pp}",
            f"--nnodes {pp}",
            f"--node-rank {rank}",
            f"--dist-init-addr {VLLM_NODE0}:{SGLANG_DIST_PORT}",
        ]

    # Only the engines the flags are given for (a plan may leave one out by name).
    per_node: dict[str, Callable[[int], list[str]]] = {"vllm": vllm, "sglang": sglang}
    return {
        name: [[*flags[name], *node(rank)] for rank in range(pp)]
        for name, node in per_node.items()
        if name in flags
    }


def with_pipeline_hops(
    estimate: PerformanceEstimate, arch: ModelArchitecture, gpu: Gpu, pp: int
) -> PerformanceEstimate:
    """`estimate` (the whole model at its TP) with the pipeline's hops added to each step."""
    batch = estimate.decode.cost.tokens
    decode_ms = estimate.decode_ms_per_token + pipeline_hops_ms(arch, gpu, pp, batch)
    prompt = estimate.prefill.cost.tokens
    prefill_hops = pipeline_hops_ms(arch, gpu, pp, prompt)
    at_peak = estimate.decode_ms_per_token_at_peak
    if at_peak is not None and estimate.peak is not None:
        at_peak += pipeline_hops_ms(arch, gpu, pp, estimate.peak.cost.tokens)
    return replace(
        estimate,
        decode_ms_per_token=decode_ms,
        decode_ms_per_token_at_peak=at_peak,
        output_tokens_per_second=batch * 1e3 / decode_ms,
        output_tokens_per_second_per_user=1e3 / decode_ms,
        prefill_ms=estimate.prefill_ms + prefill_hops,
        ttft_ms=None if estimate.ttft_ms is None else estimate.ttft_ms + prefill_hops,
    )
