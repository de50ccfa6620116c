"""Capacity and plans as tables (CSV, TSV) and as one bare value, as spreadsheets read them."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from service.planning.schemas import plan_table_columns
from tests.planning.test_capacity_api import BASE

MiB = 1 << 20
POOL_BLOCKS = 28_006
# Llama-3.1-8B on an H100 or an L4, the pool fixed at 28,006 blocks of 2 MiB (worked example A
# of ../shared/design/engine-memory.md); test_plans_api works the plan: 1 GPU, the L4.
PLAN = {
    "model": "llama-3.1-8b",
    "max_model_len": 8192,
    "peak_concurrency": 50,
    "gpus": "h100-sxm-80gb,l4",
    "kv_pool_bytes": POOL_BLOCKS * 2 * MiB,
    "engine_version": "0.20.0",
    "headroom_fraction": 0.0,  # as test_plans_api: the worked pool, none kept free
}


def rows(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


def test_format_text_without_field_is_the_capacity_headline(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "format": "text"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "3"  # max_num_seqs of worked example A at 131,072 tokens


def test_format_text_without_field_is_the_plans_headline(client: TestClient) -> None:
    response = client.get("/v1/plans", params={**PLAN, "format": "text"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "1"  # total_gpus: 50 sequences of 512 blocks fit one GPU


def test_accept_text_plain_is_the_headline_too(client: TestClient) -> None:
    response = client.get("/v1/capacity", params=BASE, headers={"Accept": "text/plain"})
    assert response.text == "3"
    posted = client.post("/v1/capacity", json=BASE, headers={"Accept": "text/plain"})
    assert posted.text == "3"


def test_capacity_as_tsv_carries_units_in_its_column_names(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={**BASE, "format": "tsv"})
    assert response.headers["content-type"].startswith("text/tab-separated-values")
    (row,) = rows(response.text, "\t")
    # 28,006 blocks x 2 MiB = 58,732,838,912 B = 56,012 MiB = 54.699 GiB -> 54.7
    assert row["kv_pool_bytes"] == "58732838912"
    assert row["kv_pool_gib"] == "54.7"
    # an H100 as the runtime reports it: 85,051,089,879 B / 2^30 = 79.21 GiB
    assert row["gpu_memory_gib"] == "79.21"
    # one 131,072-token sequence at 131,072 B per token: 16 GiB
    assert row["kv_gib_per_sequence"] == "16.0"
    assert "kv_gib_per_token" not in row  # per-token sizes stay in bytes
    assert row["max_num_seqs"] == "3"


def test_accept_tab_separated_values_is_tsv(client: TestClient) -> None:
    response = client.get(
        "/v1/capacity", params=BASE, headers={"Accept": "text/tab-separated-values"}
    )
    assert response.headers["content-type"].startswith("text/tab-separated-values")
    assert rows(response.text, "\t")[0]["max_num_seqs"] == "3"


@pytest.mark.parametrize(("fmt", "delimiter"), [("csv", ","), ("tsv", "\t")])
def test_a_plan_table_has_one_flat_row_per_option(
    client: TestClient, fmt: str, delimiter: str
) -> None:
    response = client.get("/v1/plans", params={**PLAN, "format": fmt})
    table = rows(response.text, delimiter)
    assert list(table[0]) == plan_table_columns(ranked=True)
    best = table[0]
    assert (best["rank"], best["gpu"], best["total_gpus"]) == ("1", "l4", "1")
    assert best["kv_pool_gib"] == "54.7"  # the fixed pool, as above
    assert best["cost_per_hour_usd"] == "0.44"  # the L4's catalog price
    assert best["vllm_flags"].startswith("--tensor-parallel-size 1")
    assert "--max-running-requests" in best["sglang_flags"]


def test_a_plan_without_a_feasible_option_is_still_a_header(client: TestClient) -> None:
    # 100,000 sequences of 512 blocks on at most one replica of one GPU: nothing fits
    params = {**PLAN, "peak_concurrency": 100_000, "max_replicas": 1, "format": "csv"}
    response = client.get("/v1/plans", params=params)
    assert response.status_code == 200
    assert response.text == ",".join(plan_table_columns(ranked=True)) + "\n"
    # as text, why (issue 17: an empty 200 was a blank cell in a sheet)
    text = client.get("/v1/plans", params={**params, "format": "text"})
    assert text.status_code == 200
    assert text.text.startswith("no plan: ")
    assert "more than max_replicas 1" in text.text


def test_post_plan_answers_a_table_or_the_headline_by_accept(client: TestClient) -> None:
    body = {**PLAN, "gpus": ["h100-sxm-80gb", "l4"]}
    tsv = client.post("/v1/plans", json=body, headers={"Accept": "text/tab-separated-values"})
    assert rows(tsv.text, "\t")[0]["gpu"] == "l4"
    text = client.post("/v1/plans", json=body, headers={"Accept": "text/plain"})
    assert text.text == "1"
