"""The catalog lists as spreadsheet tables: every match, not paged, units in the column names."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from service.catalog.answers import GPU_CSV_COLUMNS, MODEL_CSV_COLUMNS
from service.catalog.seed import load_seed
from tests.helpers import problem


def rows(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


@pytest.mark.parametrize(("fmt", "delimiter"), [("csv", ","), ("tsv", "\t")])
def test_a_gpu_table_holds_every_gpu_whatever_the_page_size(
    client: TestClient, fmt: str, delimiter: str
) -> None:
    response = client.get("/v1/gpus", params={"format": fmt, "limit": 3})
    assert response.status_code == 200
    assert "link" not in response.headers
    table = rows(response.text, delimiter)
    assert [row["slug"] for row in table] == sorted(g["slug"] for g in load_seed("gpus.json"))
    assert tuple(table[0]) == GPU_CSV_COLUMNS
    assert "price_usd_per_hour" in table[0]


def test_a_model_table_holds_every_model_with_units(client: TestClient) -> None:
    response = client.get("/v1/models", params={"format": "csv"})
    assert response.headers["content-type"].startswith("text/csv")
    table = rows(response.text)
    assert [row["slug"] for row in table] == sorted(m["slug"] for m in load_seed("models.json"))
    assert tuple(table[0]) == MODEL_CSV_COLUMNS
    by_slug = {row["slug"]: row for row in table}
    llama = by_slug["llama-3.1-8b"]
    # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token
    assert llama["kv_bytes_per_token_bf16"] == "131072"
    # seed weight_bytes 16,060,522,496 (2 B x 8,030,261,248 parameters) / 2^30 = 14.96 GiB
    assert llama["weight_bytes"] == "16060522496"
    assert llama["weight_gib"] == "14.96"
    # a hybrid lists its cache-keeping kinds in one cell
    assert by_slug["qwen3.5-27b"]["layer_kinds"] == "full_attention;linear_attention"


def test_a_table_keeps_the_filters(client: TestClient) -> None:
    table = rows(client.get("/v1/gpus", params={"format": "csv", "vendor": "amd"}).text)
    assert [row["slug"] for row in table] == ["mi250x", "mi300x", "mi325x", "mi355x"]


def test_accept_picks_the_table(client: TestClient) -> None:
    response = client.get("/v1/models", headers={"Accept": "text/tab-separated-values"})
    assert response.headers["content-type"].startswith("text/tab-separated-values")
    assert len(rows(response.text, "\t")) == len(load_seed("models.json"))


def test_format_text_is_how_many_match(client: TestClient) -> None:
    response = client.get("/v1/gpus", params={"format": "text", "vendor": "AMD"})
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "4"  # mi250x, mi300x, mi325x and mi355x
    everything = client.get("/v1/models", params={"format": "text"})
    assert everything.text == str(len(load_seed("models.json")))


def test_an_empty_table_is_still_its_header(client: TestClient) -> None:
    response = client.get("/v1/gpus", params={"format": "csv", "vendor": "nobody"})
    assert response.text == ",".join(GPU_CSV_COLUMNS) + "\n"


def test_an_accept_a_list_cannot_answer_is_406(client: TestClient) -> None:
    problem(client.get("/v1/gpus", headers={"Accept": "application/xml"}), 406)


def test_more_matches_than_a_table_holds_is_a_422_asking_for_filters(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("service.catalog.router.MAX_TABLE_ROWS", 4)
    body = problem(client.get("/v1/gpus", params={"format": "csv"}), 422)
    assert body["field"] == "format"
    assert "filters" in body["detail"]
    assert client.get("/v1/gpus", params={"format": "csv", "vendor": "amd"}).status_code == 200
