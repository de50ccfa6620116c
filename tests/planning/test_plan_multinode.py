"""Plans across nodes: a replica of pipeline stages, one per node, TP within each node.

Llama-3.1-405B (meta-llama/Llama-3.1-405B config.json, shared/catalog/models.json): 126
layers, hidden_size 16,384, 128 attention heads, 8 KV heads, head_dim 128, intermediate_size
53,248, vocab 128,256, untied embeddings, bfloat16. Worked by hand:
  one layer: q + o 2 x 16,384^2 = 536,870,912; k + v 2 x 16,384 x 1,024 = 33,554,432;
             MLP 3 x 16,384 x 53,248 = 2,617,245,696; two norms 32,768 -> 3,187,703,808
  embed_tokens = lm_head = 128,256 x 16,384 = 2,101,346,304; final norm 16,384
  total = 126 x 3,187,703,808 + 2 x 2,101,346,304 + 16,384 = 405,853,388,800 (the catalog's)
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.sizing.engines.multinode import pipeline_hops_ms
from service.sizing.engines.parallel import pipeline_stage_sizes
from tests.sizing.models import H100_80_GIB, LLAMA_31_8B

QUESTION: dict[str, Any] = {
    "model": "llama-3.1-405b",
    "max_model_len": 131072,
    "peak_concurrency": 4,
    "gpus": ["h100-sxm-80gb"],
    "engine_version": "0.20.0",
}
LAYER_PARAMS = 3_187_703_808
EMBED_PARAMS = 128_256 * 16_384
# One 16-token block on one GPU of a stage: 63 layers x (K + V) x 1 KV head (8 heads / TP 8)
# x 128 x 2 B x 16 tokens.
BLOCK_BYTES = 63 * 2 * 1 * 128 * 2 * 16
BLOCKS_PER_SEQUENCE = 131_072 // 16


def _plan(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/plans", json={**QUESTION, **overrides})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_vllm_splits_layers_as_get_pp_indices_does() -> None:
    # vllm/distributed/utils.py get_pp_indices without VLLM_PP_LAYER_PARTITION: 126 // 2 = 63
    # each; 126 // 4 = 31 rem 2, one more layer to partitions[-2] and [-3] (the last stage,
    # which also runs the norm and lm_head, stays short).
    assert pipeline_stage_sizes(126, 2) == [63, 63]
    assert pipeline_stage_sizes(126, 4) == [31, 32, 32, 31]


def test_llama_405b_at_full_context_on_h100_spans_two_nodes(client: TestClient) -> None:
    answer = _plan(client)
    best = answer["recommendation"]
    assert best is not None, answer["warnings"]
    assert (best["gpu"], best["tensor_parallel_size"], best["pipeline_parallel_size"]) == (
        "h100-sxm-80gb",
        8,
        2,
    )
    assert (best["nodes_per_replica"], best["gpus_per_node"]) == (2, 8)
    assert (best["replicas"], best["total_gpus"]) == (1, 16)
    # No node of 8 H100s holds the weights: every single-node layout is rejected.
    single = [r for r in answer["rejected"] if r["pipeline_parallel_size"] == 1]
    assert {r["tensor_parallel_size"] for r in single} == {1, 2, 4, 8}
    assert {r["code"] for r in single} == {"weights-do-not-fit"}

    # Each stage's weights on one of its 8 GPUs, bf16 (2 B):
    #   stage 0: 63 layers + embed_tokens = 202,926,686,208 params -> 50,731,671,552 B per GPU
    #   stage 1: 63 layers + norm + lm_head = 202,926,702,592 params -> 50,731,675,648 B per GPU
    stage0 = (63 * LAYER_PARAMS + EMBED_PARAMS) * 2 // 8
    stage1 = (63 * LAYER_PARAMS + 16_384 + EMBED_PARAMS) * 2 // 8
    assert (stage0, stage1) == (50_731_671_552, 50_731_675_648)
    # The answer sizes each stage with its own weights (model/stage_weights.py) and reports the
    # heavier, the last stage's; its pool is 4,096 B smaller than the first stage's, less than
    # one 516,096 B block, so both stages hold the same blocks and the last stage's pool is the
    # one answered.
    weights = answer["explanation"]["per_gpu"]["weights_bytes_per_gpu"]
    assert weights == stage1
    pool = best["kv_pool_bytes"]
    assert best["num_gpu_blocks"] == pool // BLOCK_BYTES
    assert (pool + (stage1 - stage0)) // BLOCK_BYTES == best["num_gpu_blocks"]
    # vLLM hands out every block but the null one: (blocks - 1) // 8,192 blocks per sequence.
    assert best["max_num_seqs"] == (best["num_gpu_blocks"] - 1) // BLOCKS_PER_SEQUENCE == 4


def test_every_node_gets_its_flags(client: TestClient) -> None:
    best = _plan(client)["recommendation"]
    vllm0, vllm1 = best["node_flags"]["vllm"]
    for rank, flags in enumerate((vllm0, vllm1)):
        assert "--tensor-parallel-size 8" in flags
        assert "--pipeline-parallel-size 2 --nnodes 2" in flags
        assert f"--node-rank {rank} --master-addr $NODE0_IP --master-port 29500" in flags
        assert "--max-num-seqs 4" in flags
    # The other nodes run no API server.
    assert "--headless" in vllm1
    assert "--headless" not in vllm0
    assert best["engine_flags"]["vllm"] == vllm0
    sglang0, sglang1 = best["node_flags"]["sglang"]
    for rank, flags in enumerate((sglang0, sglang1)):
        assert "--tp 8" in flags
        assert f"--pp-size 2 --nnodes 2 --node-rank {rank} --dist-init-addr $NODE0_IP:50000" in (
            flags
        )


def test_the_capacity_of_the_same_layout_is_the_plans(client: TestClient) -> None:
    """Every door: GET /v1/capacity at TP 8 x PP 2 answers what the plan's option says."""
    best = _plan(client)["recommendation"]
    params = {
        "model": "llama-3.1-405b",
        "gpu": "h100-sxm-80gb",
        "max_model_len": 131072,
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 2,
        "engine_version": "0.20.0",
    }
    response = client.get("/v1/capacity", params=params)
    assert response.status_code == 200, response.text
    capacity = response.json()
    for name in ("max_num_seqs", "kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens"):
        assert capacity[name] == best[name], name
    # Both time 4 sequences per replica (the plan's peak is 4), the hops included.
    assert capacity["decode_ms_per_token"] == best["decode_ms_per_token"]
    assert capacity["prefill_ms"] == best["prefill_ms"]


def test_the_csv_and_a_cell_carry_the_layout(client: TestClient) -> None:
    params = {**QUESTION, "gpus": "h100-sxm-80gb"}
    cell = client.get("/v1/plans", params={**params, "field": "pipeline_parallel_size"})
    assert cell.status_code == 200, cell.text
    assert cell.text == "2"
    table = client.get("/v1/plans", params={**params, "format": "csv"})
    assert table.status_code == 200, table.text
    first = next(csv.DictReader(io.StringIO(table.text)))
    assert (first["pipeline_parallel_size"], first["nodes_per_replica"]) == ("2", "2")
    nodes = first["vllm_node_flags"].split(" | ")
    assert [("--node-rank 0" in n, "--node-rank 1" in n) for n in nodes] == [
        (True, False),
        (False, True),
    ]


def test_a_gpu_too_small_for_four_nodes_is_rejected_at_four(client: TestClient) -> None:
    # 811.7 GB of weights over 4 nodes x 8 L4 (24 GB each, 768 GB in all) cannot fit.
    answer = _plan(client, gpus=["l4"])
    assert answer["recommendation"] is None
    across = [r for r in answer["rejected"] if r["pipeline_parallel_size"] > 1]
    assert [(r["tensor_parallel_size"], r["pipeline_parallel_size"]) for r in across] == [(8, 4)]
    assert across[0]["code"] == "weights-do-not-fit"


def test_a_model_one_node_serves_stays_on_one_node(client: TestClient) -> None:
    answer = _plan(client, model="llama-3.1-8b", max_model_len=8192)
    options = [answer["recommendation"], *answer["alternatives"]]
    assert {o["pipeline_parallel_size"] for o in options} == {1}
    assert all(o["node_flags"] == {} for o in options)


def test_a_hop_is_the_hidden_states_over_the_inter_node_link() -> None:
    # Llama-3.1-8B, hidden 4,096: 4 sequences' decode step sends 4,096 x 4 x 2 B = 32,768 B
    # per hop; over 50 GB/s (400 Gb/s NDR per GPU) that is 0.65536 us; 3 hops for 4 nodes.
    assert pipeline_hops_ms(LLAMA_31_8B, H100_80_GIB, 4, 4) == pytest.approx(3 * 32_768 / 50e6)
    # A 8,192-token prefill: 4,096 x 8,192 x 2 B = 67,108,864 B per hop, 1.342 ms over 50 GB/s.
    assert pipeline_hops_ms(LLAMA_31_8B, H100_80_GIB, 2, 8192) == pytest.approx(1.34217728)
    assert pipeline_hops_ms(LLAMA_31_8B, H100_80_GIB, 1, 8192) == 0.0
