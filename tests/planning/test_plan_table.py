"""POST /v1/plans with a table of questions (CSV or TSV): one plan per row, row for row; a row
that cannot be answered says why in its own `error` cell and never sinks the others."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.openapi_export import openapi_spec
from service.planning.schemas import MAX_SCENARIOS, PlanRequestBody, plan_table_columns
from tests.helpers import problem

MiB = 1 << 20
POOL = 28_006 * 2 * MiB  # worked example A's pool, as in test_plans_api
CSV = {"Content-Type": "text/csv"}
TSV = {"Content-Type": "text/tab-separated-values"}


def table(response: Any, delimiter: str = ",") -> list[dict[str, str]]:
    assert response.status_code == 200, response.text
    return list(csv.DictReader(io.StringIO(response.text), delimiter=delimiter))


def test_each_row_is_answered_and_a_bad_row_sinks_nothing(client: TestClient) -> None:
    # headroom_fraction 0: the worked pool, none kept free (the default keeps 10%)
    body = (
        "scenario,model,max_model_len,peak_concurrency,gpus,kv_pool_bytes,engine_version,"
        "headroom_fraction\n"
        f"fits,llama-3.1-8b,8192,50,h100-sxm-80gb;l4,{POOL},0.20.0,0\n"
        f"unknown model,llama-9,8192,50,l4,{POOL},0.20.0,0\n"
        f"no concurrency,llama-3.1-8b,8192,0,l4,{POOL},0.20.0,0\n"
        f"not a number,llama-3.1-8b,lots,50,l4,{POOL},0.20.0,0\n"
        f"too big,llama-3.1-8b,8192,100000,l4,{POOL},0.20.0,0\n"
    )
    answer = table(client.post("/v1/plans", content=body, headers=CSV))
    assert [row["row"] for row in answer] == ["1", "2", "3", "4", "5"]
    assert [row["scenario"] for row in answer] == [
        "fits",
        "unknown model",
        "no concurrency",
        "not a number",
        "too big",
    ]
    assert [row["status"] for row in answer] == ["ok", "error", "error", "error", "ok"]
    fits, unknown, zero, words, big = answer
    # as test_plans_api works it: 50 sequences of 512 blocks fit one L4, the cheaper GPU
    assert (fits["gpu"], fits["total_gpus"], fits["error"]) == ("l4", "1", "")
    assert fits["kv_pool_gib"] == "54.7"  # 28,006 x 2 MiB = 54.699 GiB
    assert unknown["error"].startswith("model:")
    assert "llama" in unknown["error"]
    assert unknown["gpu"] == ""
    assert zero["error"].startswith("peak_concurrency:")
    assert words["error"].startswith("max_model_len:")
    # a row answers as the same question in JSON does
    same = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 100_000}
    same |= {"gpus": ["l4"], "kv_pool_bytes": POOL, "engine_version": "0.20.0"}
    same |= {"headroom_fraction": 0.0}
    by_json = client.post("/v1/plans", json=same).json()["recommendation"]
    assert big["total_gpus"] == str(by_json["total_gpus"])
    assert big["tensor_parallel_size"] == str(by_json["tensor_parallel_size"])
    # the question's key facts are echoed, as asked where the row could not be read
    assert unknown["model"] == "llama-9"
    assert words["max_model_len"] == "lots"


def test_a_row_answers_as_the_json_question_does(client: TestClient) -> None:
    question = {
        "model": "llama-3.1-70b",
        "max_model_len": 32768,
        "peak_concurrency": 64,
        "kv_cache_dtype": "fp8",
        "max_gpus_per_node": 4,
        "headroom_fraction": 0.1,
    }
    by_json = client.post("/v1/plans", json=question).json()["recommendation"]
    header = ",".join(question)
    values = ",".join(str(v) for v in question.values())
    (row,) = table(client.post("/v1/plans", content=f"{header}\n{values}\n", headers=CSV))
    for name in ("gpu", "tensor_parallel_size", "replicas", "total_gpus", "max_num_seqs"):
        assert row[name] == str(by_json[name]), name
    assert row["headroom_bytes"] == str(by_json["headroom_bytes"])


def test_a_tsv_table_is_answered_as_tsv(client: TestClient) -> None:
    body = "model\tmax_model_len\tpeak_concurrency\tgpus\nllama-3.1-8b\t8192\t50\tl4\n"
    response = client.post("/v1/plans", content=body, headers=TSV)
    assert response.headers["content-type"].startswith("text/tab-separated-values")
    (row,) = table(response, "\t")
    assert (row["status"], row["gpu"]) == ("ok", "l4")
    as_csv = client.post("/v1/plans", content=body, headers={**TSV, "Accept": "text/csv"})
    assert as_csv.headers["content-type"].startswith("text/csv")


def test_an_infeasible_row_says_why(client: TestClient) -> None:
    body = "model,max_model_len,peak_concurrency,gpus,max_replicas\nllama-3.1-70b,131072,500,l4,1\n"
    (row,) = table(client.post("/v1/plans", content=body, headers=CSV))
    assert row["status"] == "infeasible"
    assert row["gpu"] == ""
    assert row["error"].startswith("no GPU and layout fits")


def test_a_list_cell_may_be_comma_separated_when_quoted(client: TestClient) -> None:
    body = 'model,max_model_len,peak_concurrency,gpus\nllama-3.1-8b,8192,8,"h100-sxm-80gb,l4"\n'
    (row,) = table(client.post("/v1/plans", content=body, headers=CSV))
    assert row["gpu"] in ("h100-sxm-80gb", "l4")


def test_excels_byte_order_mark_and_blank_lines_are_fine(client: TestClient) -> None:
    body = "\ufeffmodel,max_model_len,peak_concurrency,gpus\r\nllama-3.1-8b,8192,8,l4\r\n,,,\r\n"
    answer = table(client.post("/v1/plans", content=body.encode("utf-8"), headers=CSV))
    assert [row["status"] for row in answer] == ["ok"]


def test_a_row_with_more_cells_than_the_header_is_its_own_error(client: TestClient) -> None:
    body = "model,max_model_len,peak_concurrency\nllama-3.1-8b,8192,8,l4\nllama-3.1-8b,8192,8\n"
    first, second = table(client.post("/v1/plans", content=body, headers=CSV))
    assert first["status"] == "error"
    assert "more cells" in first["error"]
    assert second["status"] == "ok"


def test_every_json_field_is_a_column(client: TestClient) -> None:
    first = ["model", "max_model_len", "peak_concurrency"]
    names = first + [name for name in PlanRequestBody.model_fields if name not in first]
    header = ",".join(names)
    row = ",".join(["llama-3.1-8b", "8192", "8"] + [""] * (len(names) - 3))
    (answer,) = table(client.post("/v1/plans", content=f"{header}\n{row}\n", headers=CSV))
    assert answer["status"] == "ok", answer["error"]
    assert list(answer) == plan_table_columns(ranked=False)


@pytest.mark.parametrize(
    ("header", "field"),
    [("model,max_model_length,peak_concurrency", "max_model_length"), ("model,model", "model")],
)
def test_a_column_that_is_no_field_refuses_the_whole_table(
    client: TestClient, header: str, field: str
) -> None:
    response = client.post("/v1/plans", content=f"{header}\nllama-3.1-8b,1,1\n", headers=CSV)
    assert problem(response, 422)["field"] == field


def test_more_rows_than_allowed_is_a_422(client: TestClient) -> None:
    body = "model,max_model_len,peak_concurrency\n" + "x,1,1\n" * (MAX_SCENARIOS + 1)
    assert problem(client.post("/v1/plans", content=body, headers=CSV), 422)["field"] == "body"


def test_a_table_that_is_not_utf8_is_a_422(client: TestClient) -> None:
    body = "model\nqwen\xe9\n".encode("latin-1")
    assert problem(client.post("/v1/plans", content=body, headers=CSV), 422)["field"] == "body"


def test_the_spec_documents_the_table_bodies() -> None:
    operation = openapi_spec()["paths"]["/v1/plans"]["post"]
    content = operation["requestBody"]["content"]
    assert set(content) == {"application/json", "text/csv", "text/tab-separated-values"}
    example = content["text/csv"]["example"]
    header = next(csv.reader(io.StringIO(example)))
    assert set(header) - {"scenario"} <= set(PlanRequestBody.model_fields)
    answers = operation["responses"]["200"]["content"]
    assert {"text/csv", "text/tab-separated-values", "text/plain"} <= set(answers)


def test_the_spec_example_table_is_answered(client: TestClient) -> None:
    operation = openapi_spec()["paths"]["/v1/plans"]["post"]
    for media, delimiter in (("text/csv", ","), ("text/tab-separated-values", "\t")):
        example = operation["requestBody"]["content"][media]["example"]
        answer = table(
            client.post("/v1/plans", content=example, headers={"Content-Type": media}), delimiter
        )
        assert [row["status"] for row in answer] == ["ok", "ok"], answer
