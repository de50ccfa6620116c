"""Disaggregated prefill and decode: the KV transfer between the pools, and each pool's flags.

A disaggregated deployment runs two pools of engine instances: a prefill pool that computes each
prompt's KV cache and its first token, and a decode pool that receives that cache over the
network and generates the answer. vLLM does it with a KV connector on both instances
(`--kv-transfer-config`; docs.vllm.ai "NixlConnector Usage Guide",
https://docs.vllm.ai/en/stable/features/nixl_connector_usage.html: NixlConnector with
`"kv_role":"kv_both"` on the prefiller and the decoder alike, and a proxy in front, vllm
tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, that sends each request to a
prefiller with max_tokens 1 and `kv_transfer_params.do_remote_decode`, then to a decoder with
the returned params). The older P2pNcclConnector takes `"kv_role":"kv_producer"` on the
prefiller and `"kv_consumer"` on the decoder (vllm docs/design/p2p_nccl_connector.md).
SGLang starts each instance with `--disaggregation-mode prefill|decode`,
`--disaggregation-transfer-backend mooncake|nixl` (default mooncake),
`--disaggregation-ib-device` (the RDMA NICs) and a bootstrap port on the prefiller (default
8998), all in python/sglang/srt/server_args.py `ServerArgs`; its router fronts both pools
(`python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP_PORT
--decode URL`, docs.sglang.io advanced_features/pd_disaggregation).

The transfer. Each of a prefill replica's GPUs holds its own shard of every token's KV (its
heads, its layers: `Capacity.kv_bytes_per_token_per_gpu`) and sends it to the decode replica
over its own inter-node NIC (NIXL and Mooncake move each rank's blocks rank to rank), so

    bytes per GPU = input_tokens x kv_bytes_per_token_per_gpu
    transfer_ms   = bytes per GPU / (inter-node GB/s x 10^9) x 10^3

The pools are taken to be on different nodes (each pool's replicas scale on their own), so the
link is the inter-node one (`multinode.internode_gb_s`: one 400 Gb/s NIC per GPU, 50 GB/s),
the slower of the two pools' GPUs; NVLink is never assumed. Two approximations, said here:
recurrent state (Mamba layers) travels too and is not counted (it is per sequence, not per
token), and a sliding-window layer is counted for every prompt token though only the blocks
its window holds need to travel (an upper bound for such models).

The pools are paired within one platform (`platform`: CUDA or ROCm): the connectors move
blocks between GPU memories registered with one transfer library (NIXL over UCX, Mooncake), and
neither engine's guide shows a prefill pool of one vendor feeding a decode pool of the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final, Literal

from ..speed.performance import is_amd
from .common import Capacity, Gpu
from .multinode import GB, internode_gb_s

Role = Literal["prefill", "decode"]

# vLLM's connector for disaggregated serving across nodes, as its NIXL guide starts it.
VLLM_KV_TRANSFER_CONFIG: Final = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
# SGLang's defaults (server_args.py ServerArgs): the transfer backend and the bootstrap port.
SGLANG_TRANSFER_BACKEND: Final = "mooncake"
SGLANG_BOOTSTRAP_PORT: Final = 8998
VLLM_PORT: Final = 8000  # vllm serve's default --port
SGLANG_PORT: Final = 30000  # sglang.launch_server's default --port
IB_DEVICE: Final = "$IB_DEVICE"  # the RDMA NICs, e.g. mlx5_0,mlx5_1 (set on each node)
PREFILL_HOST: Final = "$PREFILL_IP"
DECODE_HOST: Final = "$DECODE_IP"


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """One request's KV sent from the prefill pool to the decode pool."""

    bytes_per_gpu: int
    link_gb_s: float
    transfer_ms: float


def kv_transfer(
    prefill: Capacity, prefill_gpu: Gpu, decode_gpu: Gpu, input_tokens: int
) -> KvTransfer:
    """The transfer of a prompt of `input_tokens` (module docstring)."""
    link = min(internode_gb_s(prefill_gpu), internode_gb_s(decode_gpu))
    sent = input_tokens * prefill.kv_bytes_per_token_per_gpu
    return KvTransfer(sent, link, sent / (link * GB) * 1e3)


def platform(gpu: Gpu) -> str:
    """The platform a pool runs on: pools are paired within one (module docstring)."""
    return "rocm" if is_amd(gpu.name) else "cuda"


def disaggregation_flags(role: Role) -> dict[str, list[str]]:
    """The flags each engine adds to an instance of the `role` pool (module docstring)."""
    config = json.dumps(VLLM_KV_TRANSFER_CONFIG, separators=(",", ":"))
    sglang = [
        f"--disaggregation-mode {role}",
        f"--disaggregation-transfer-backend {SGLANG_TRANSFER_BACKEND}",
        f"--disaggregation-ib-device {IB_DEVICE}",
    ]
    if role == "prefill":
        sglang.append(f"--disaggregation-bootstrap-port {SGLANG_BOOTSTRAP_PORT}")
    return {"vllm": [f"--kv-transfer-config '{config}'"], "sglang": sglang}


def router_commands() -> dict[str, str]:
    """What fronts the two pools: SGLang's router in PD mode; vLLM's proxy (its repository's
    toy proxy, or llm-d / Dynamo in production) takes the prefill and decode addresses."""
    prefill = f"http://{PREFILL_HOST}:{SGLANG_PORT}"
    decode = f"http://{DECODE_HOST}:{SGLANG_PORT}"
    return {
        "sglang": f"python -m sglang_router.launch_router --pd-disaggregation --prefill "
        f"{prefill} {SGLANG_BOOTSTRAP_PORT} --decode {decode}",
        "vllm": "python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py "
        f"--prefiller-hosts {PREFILL_HOST} --prefiller-ports {VLLM_PORT} "
        f"--decoder-hosts {DECODE_HOST} --decoder-ports {VLLM_PORT}",
    }
