"""A plan says how it ranked, what it left out, whose prices it used (issue 20 items 2 and 5).

The README's 70B question (32,768 tokens, 64 at the peak, fp8 KV) is asked of the whole catalog:
every GPU that can serve it is listed or named, every layout that cannot is rejected once.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.catalog.seed import load_seed
from tests.helpers import problem

MiB = 1 << 20
GiB = 1 << 30
README_70B = {
    "model": "llama-3.1-70b",
    "max_model_len": 32768,
    "peak_concurrency": 64,
    "kv_cache_dtype": "fp8",
    "explain": False,
}
OMITTED = re.compile(r"^(\d+) more feasible options? not shown \(max_alternatives \d+\), on (.+);")


def plan(client: TestClient, **fields: Any) -> dict[str, Any]:
    response = client.post("/v1/plans", json={**README_70B, **fields})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def options(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [answer["recommendation"], *answer["alternatives"]]


def omitted_gpus(answer: dict[str, Any]) -> set[str]:
    """The GPUs the warning names for the options not shown (empty when none is left out)."""
    found = [m for w in answer["warnings"] if (m := OMITTED.match(w))]
    if not found:
        return set()
    (match,) = found
    assert int(match.group(1)) == answer["alternatives_omitted"]
    return set(match.group(2).split(", "))


def test_the_readme_70b_plan_lists_or_counts_every_gpu_that_can_serve_it(
    client: TestClient,
) -> None:
    short = plan(client)
    every = plan(client, max_alternatives=100)
    assert short["rank_by"] == every["rank_by"] == "cost"
    feasible = options(every)
    assert every["alternatives_omitted"] == 0
    # the default answer shows 1 + 10 options and counts the rest
    assert len(options(short)) == 11
    assert short["alternatives_omitted"] == len(feasible) - 11
    # the same ranking: the short list is the head of the long one
    key = ("gpu", "tensor_parallel_size", "replicas")
    assert [tuple(o[k] for k in key) for o in options(short)] == [
        tuple(o[k] for k in key) for o in feasible[:11]
    ]
    # every GPU with a feasible layout is shown or named, B200 among them
    serving = {o["gpu"] for o in feasible}
    assert {o["gpu"] for o in options(short)} | omitted_gpus(short) == serving
    assert "b200" in serving
    # and every catalog GPU is either among the options or rejected with a reason
    rejected = {r["gpu"] for r in every["rejected"]}
    assert serving | rejected == {g["slug"] for g in load_seed("gpus.json")}


def test_rejected_keeps_one_entry_per_gpu_and_layout(client: TestClient) -> None:
    answer = plan(client, max_alternatives=100)

    # a layout is a GPU, a tensor-parallel size and a number of pipeline stages (one per node:
    # a GPU whose largest single-node layout lacks memory is tried across nodes, issue 20)
    def layout(entry: dict[str, Any]) -> tuple[str, int, int]:
        return entry["gpu"], entry["tensor_parallel_size"], entry["pipeline_parallel_size"]

    layouts = [layout(r) for r in answer["rejected"]]
    assert len(layouts) == len(set(layouts))
    assert all(r["reason"] for r in answer["rejected"])
    # a layout is either an option or rejected, never both
    assert not set(layouts) & {layout(o) for o in options(answer)}


def test_cost_ranking_puts_the_unpriced_catalog_gpus_last_and_says_so(
    client: TestClient,
) -> None:
    answer = plan(client, max_alternatives=100)
    costs = [o["cost_per_hour_usd"] for o in options(answer)]
    priced = [c for c in costs if c is not None]
    assert priced == sorted(priced)
    assert costs == priced + [None] * (len(costs) - len(priced))
    # docs/catalog-sources.md#gpu-prices: GB300 and H20 have no published price, and a GB10
    # (DGX Spark) is bought, not rented
    unpriced = {o["gpu"] for o in options(answer) if o["cost_per_hour_usd"] is None}
    assert unpriced <= {"gb10", "gb300", "h20"}
    (warning,) = [w for w in answer["warnings"] if "no price" in w]
    assert all(slug in warning for slug in unpriced)
    assert "rank_by cost" in warning


def test_an_unpriced_inline_gpu_ranks_after_priced_ones_with_a_warning(
    client: TestClient,
) -> None:
    # Llama-3.1-8B, 50 sequences: both 80 GiB GPUs hold them; "free" has no price.
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 50,
        "gpus": [
            {"memory_bytes": 80 * GiB, "name": "free"},
            {"memory_bytes": 80 * GiB, "name": "paid", "price_usd_per_hour": 9.0},
        ],
    }
    answer = client.post("/v1/plans", json=body).json()
    assert answer["recommendation"]["gpu"] == "paid"
    assert answer["recommendation"]["price_origin"] == "caller's override"
    assert answer["alternatives"][-1]["cost_per_hour_usd"] is None
    (warning,) = [w for w in answer["warnings"] if "no price" in w]
    assert warning.startswith("free has no price, so its options rank after every priced option")
    # ranked by GPU count, price only breaks ties; the plan still says which GPU is unpriced
    # and where its options went (issue 20: never an unpriced GPU ranked without a word)
    by_count = client.post("/v1/plans", json={**body, "rank_by": "gpu_count"}).json()
    assert by_count["rank_by"] == "gpu_count"
    (said,) = [w for w in by_count["warnings"] if "no price" in w]
    assert said.startswith(
        "free has no price, so its options rank by GPU count, after priced options of as many "
        "GPUs (rank_by gpu_count)"
    )


def test_gpu_count_ranking_puts_the_fewest_gpus_first(client: TestClient) -> None:
    answer = plan(client, rank_by="gpu_count", max_alternatives=100)
    counts = [o["total_gpus"] for o in options(answer)]
    assert counts == sorted(counts)
    assert answer["rank_by"] == "gpu_count"


def test_tokens_per_dollar_ranking_and_its_arithmetic(client: TestClient) -> None:
    answer = plan(client, rank_by="tokens_per_dollar", max_alternatives=100)
    values = [o["tokens_per_dollar"] for o in options(answer)]
    known = [v for v in values if v is not None]
    assert known == sorted(known, reverse=True)
    assert values == known + [None] * (len(values) - len(known))
    for option in options(answer):
        if option["tokens_per_dollar"] is None:
            continue
        # tokens an hour over dollars an hour: output_tokens_per_second of one replica x
        # replicas x 3,600 s / cost_per_hour_usd. The answer rounds output_tokens_per_second
        # to 0.1 (up to 0.05 off a replica) and tokens_per_dollar to 0.1.
        per_dollar_hour = option["replicas"] * 3600 / option["cost_per_hour_usd"]
        expected = option["output_tokens_per_second"] * per_dollar_hour
        slack = 0.05 * per_dollar_hour + 0.05
        assert option["tokens_per_dollar"] == pytest.approx(expected, abs=slack)


def test_get_takes_rank_by_and_refuses_an_unknown_one_by_name(client: TestClient) -> None:
    params = {**README_70B, "rank_by": "gpu_count"}
    got = client.get("/v1/plans", params=params).json()
    posted = plan(client, rank_by="gpu_count")
    assert got["recommendation"] == posted["recommendation"]
    assert got["alternatives_omitted"] == posted["alternatives_omitted"]
    bad = client.post("/v1/plans", json={**README_70B, "rank_by": "vibes"})
    assert problem(bad, 422)["field"] == "rank_by"


def test_sequences_per_replica_and_the_share_of_the_peak_are_both_said(
    client: TestClient,
) -> None:
    # Worked example A's pool (28,006 blocks of 2 MiB; test_plans_api): a sequence of 8,192
    # tokens holds 512 blocks, so a replica holds (28,006 - 1) // 512 = 54 sequences. Keeping
    # 20% free: 28,005 x 0.8 = 22,404 blocks < 50 x 512 = 25,600 -> 2 replicas, each serving
    # ceil(50 / 2) = 25 sequences of the peak.
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 50,
        "gpus": [{"memory_bytes": 48 * GiB, "name": "gpu-b", "price_usd_per_hour": 1.0}],
        "kv_pool_bytes": 28_006 * 2 * MiB,
        "engine_version": "0.20.0",
        "headroom_fraction": 0.2,
    }
    best = client.post("/v1/plans", json=body).json()["recommendation"]
    assert best["replicas"] == 2
    assert best["sequences_per_replica"] == 54
    assert best["concurrency_per_replica"] == math.ceil(50 / 2) == 25


def test_the_default_headroom_is_a_tenth_of_the_blocks(client: TestClient) -> None:
    # As above without headroom_fraction: 28,005 x 0.9 = 25,204.5 < 25,600 -> 2 replicas;
    # the free share is then 1 - 25,600 / (2 x 28,005) = 0.54294 -> 0.5429.
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 50,
        "gpus": [{"memory_bytes": 48 * GiB, "name": "gpu-b", "price_usd_per_hour": 1.0}],
        "kv_pool_bytes": 28_006 * 2 * MiB,
        "engine_version": "0.20.0",
    }
    best = client.post("/v1/plans", json=body).json()["recommendation"]
    assert best["replicas"] == 2
    assert best["headroom_fraction"] == 0.5429
