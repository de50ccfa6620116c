"""DP x EP timed as it runs on the HTTP doors (issues 21/22): the catalog's deepseek-v3 on the
catalog's h200-141gb at `vllm serve --data-parallel-size 8 --enable-expert-parallel`. The
capacity answer and a plan's option time one DP rank (speed/replica.py expert_layout): its own
batch, the busiest expert shard, and its tokens' all-to-all. The all-to-all a token sends is
2 (dispatch + combine) x 8 experts x 7,168 hidden x 2 B (bf16) x 58 MoE layers = 13,303,808 B,
7/8 of it to the other ranks: 11,640,832 B (tests/sizing/test_expert_parallel_dp_speed.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

V3 = {"model": "deepseek-v3", "gpu": "h200-141gb", "max_model_len": 32768}
PER_TOKEN = 11_640_832


def _arithmetic(explanation: dict[str, Any]) -> list[str]:
    lines: list[str] = explanation["performance"]["arithmetic"]
    return lines


def test_a_capacity_answer_times_one_dp_rank_with_its_all_to_all(client: TestClient) -> None:
    query = "&".join(f"{k}={v}" for k, v in V3.items())
    get = client.get(f"/v1/capacity?{query}&data_parallel_size=8&enable_expert_parallel=true")
    assert get.status_code == 200, get.text
    post = client.post(
        "/v1/capacity", json={**V3, "data_parallel_size": 8, "enable_expert_parallel": True}
    )
    assert post.status_code == 200, post.text
    body = post.json()
    assert body["decode_ms_per_token"] == get.json()["decode_ms_per_token"]
    # 13 sequences per DP rank (max_num_seqs, per rank), 8 ranks of them touching the experts.
    assert body["max_num_seqs"] == 13
    lines = _arithmetic(body["explanation"])
    assert lines[0] == "decode step at 13 sequences:"
    assert lines[1].startswith("  layout: one DP rank of 8: its 13 tokens")
    assert "placed whole on EP 8 ranks over 8 GPUs" in lines[1]
    assert "104 tokens (every DP rank's" in lines[1]  # 13 x 8
    # 13 x 11,640,832 = 151,330,816 B over the 450 GB/s NVLink
    assert any(
        "expert all-to-all (dispatch + combine): 151,330,816 B / 450 GB/s" in line for line in lines
    )
    assert 13 * PER_TOKEN == 151_330_816
    # TP 8 is timed as before: no layout line, no all-to-all.
    tp8 = client.post("/v1/capacity", json={**V3, "tensor_parallel_size": 8}).json()
    assert not any(
        "layout:" in line or "all-to-all" in line for line in _arithmetic(tp8["explanation"])
    )


def test_a_plans_dp8_option_is_timed_per_rank(client: TestClient) -> None:
    question = {
        "model": "deepseek-v3",
        "gpus": ["h200-141gb"],
        "max_model_len": 32768,
        "peak_concurrency": 256,
    }
    answer = client.post("/v1/plans", json=question)
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    option = plan["recommendation"]
    assert (option["data_parallel_size"], option["tensor_parallel_size"]) == (8, 1)
    # 256 sequences over 3 replicas: ceil(256 / 3) = 86 a replica, ceil(86 / 8) = 11 a DP rank.
    assert (option["replicas"], option["concurrency_per_replica"]) == (3, 86)
    assert option["decode_ms_per_token"] is not None
    assert not any("times tensor-parallel replicas only" in w for w in option["warnings"])
    lines = _arithmetic(plan["explanation"])
    assert lines[0] == "decode step at 11 sequences:"
    # 11 x 11,640,832 = 128,049,152 B
    assert any("expert all-to-all (dispatch + combine): 128,049,152 B" in line for line in lines)
    # tokens per dollar count every rank of every replica: a rank's tokens/s x 3 x 8 an hour
    per_hour = option["output_tokens_per_second"] * 3 * 8 * 3600
    assert option["tokens_per_dollar"] == pytest.approx(
        per_hour / option["cost_per_hour_usd"], rel=1e-3
    )
