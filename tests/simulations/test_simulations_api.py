"""POST /v1/simulations: the same simulation through JSON, a CSV trace and the problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
DEPLOYMENT = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}


def test_a_light_workload_waits_about_one_prefill(client: TestClient) -> None:
    # One request every 100 s on average: almost never two at once, so TTFT is the
    # prefill of one 1,000-token prompt alone, and TPOT the decode step of one sequence.
    body = {
        **DEPLOYMENT,
        "workload": {
            "request_rate": 0.01,
            "input_tokens": 1000,
            "output_tokens": 50,
            "num_requests": 20,
        },
        "targets": {"max_ttft_ms": 10_000},
    }
    response = client.post("/v1/simulations", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["completed_requests"] == 20
    assert answer["engine"]["block_size"] == 16
    assert answer["engine"]["max_num_batched_tokens"] == 8192
    capacity = client.post("/v1/capacity", json={**DEPLOYMENT, "avg_prompt_tokens": 1000}).json()
    # The capacity answer's prefill_ms is the same speed model's prefill of one 1,000-token
    # prompt alone: the median TTFT of a request that finds the engine idle.
    assert abs(answer["ttft_ms"]["p50"] - capacity["prefill_ms"]) < 0.01 * capacity["prefill_ms"]
    assert answer["preemptions"] == 0
    assert answer["goodput"]["fraction"] == 1.0
    assert answer["time_series"]


def test_an_azure_trace_posted_as_csv_in_its_own_columns(client: TestClient) -> None:
    text = (TRACES / "azure_conv_2023_head.csv").read_text(encoding="utf-8")
    response = client.post(
        "/v1/simulations",
        params=DEPLOYMENT,
        content=text,
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["trace_format"], answer["completed_requests"]) == ("azure", 40)
    # The trace spans 24.1 s of arrivals (azure_conv_2023_head.csv, first to last row).
    assert answer["duration_s"] > 24.1


def test_the_same_trace_as_json_rows_gives_the_same_answer(client: TestClient) -> None:
    rows = [
        {"arrival_s": 0.0, "input_tokens": 374, "output_tokens": 44},
        {"arrival_s": 4.314579, "input_tokens": 396, "output_tokens": 109},
    ]
    csv = "arrival_s,input_tokens,output_tokens\n0,374,44\n4.314579,396,109\n"
    as_json = client.post("/v1/simulations", json={**DEPLOYMENT, "trace": rows}).json()
    as_csv = client.post(
        "/v1/simulations", params=DEPLOYMENT, content=csv, headers={"Content-Type": "text/csv"}
    ).json()
    assert as_json["ttft_ms"] == as_csv["ttft_ms"]
    assert as_json["e2e_latency_ms"] == as_csv["e2e_latency_ms"]


def test_bad_traffic_is_a_problem_naming_the_field(client: TestClient) -> None:
    no_traffic = client.post("/v1/simulations", json=DEPLOYMENT)
    assert no_traffic.status_code == 422
    assert no_traffic.json()["field"] == "workload"
    both_or_none = client.post(
        "/v1/simulations",
        json={
            **DEPLOYMENT,
            "workload": {"input_tokens": 10, "output_tokens": 10, "num_requests": 5},
        },
    )
    assert both_or_none.status_code == 422
    assert both_or_none.json()["field"] == "workload.request_rate"
    bad_csv = client.post(
        "/v1/simulations",
        params=DEPLOYMENT,
        content="when,prompt\n1,2\n",
        headers={"Content-Type": "text/csv"},
    )
    assert bad_csv.status_code == 422
    assert bad_csv.json()["field"] == "trace"
    assert bad_csv.headers["content-type"].startswith("application/problem+json")


def test_over_capacity_the_served_rate_falls_short_and_the_wait_grows(client: TestClient) -> None:
    # 20 requests/s of 2,000 + 300 tokens on one H100, about twice what one replica of these
    # lengths serves, so the served rate stays well under 20 and the p99 TTFT of twice the
    # requests (twice as long a queue) about doubles.
    def answer(num_requests: int) -> dict[str, Any]:
        workload = {
            "request_rate": 20,
            "input_tokens": 2000,
            "output_tokens": 300,
            "num_requests": num_requests,
        }
        response = client.post("/v1/simulations", json={**DEPLOYMENT, "workload": workload})
        assert response.status_code == 200, response.text
        return dict(response.json())

    short, long = answer(500), answer(1000)
    # well under the 20 offered: at most three quarters of it (about 10.4/s with the shipped fit)
    assert long["throughput"]["requests_per_second"] < 15
    assert long["ttft_ms"]["p99"] > 1.5 * short["ttft_ms"]["p99"]
    assert long["peak_kv_usage"] > 0.95


def test_engine_sglang_steps_sglangs_scheduler(client: TestClient) -> None:
    # As the light workload above, on SGLang: its pool is kvplan's SGLang capacity
    # (max_total_num_tokens), chunked_prefill_size 8,192 on an 80 GB H100 (server_args.py
    # _handle_gpu_memory_settings; docs/engines/sglang.md#default-mem-fraction-static), and a
    # request that finds the engine idle waits one prefill, the capacity answer's prefill_ms.
    body = {
        **DEPLOYMENT,
        "engine": "sglang",
        "workload": {
            "request_rate": 0.01,
            "input_tokens": 1000,
            "output_tokens": 50,
            "num_requests": 20,
        },
    }
    response = client.post("/v1/simulations", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    engine = answer["engine"]
    capacity = client.post(
        "/v1/capacity", json={**DEPLOYMENT, "engine": "sglang", "avg_prompt_tokens": 1000}
    ).json()
    assert engine["engine"] == "sglang"
    assert engine["max_total_num_tokens"] == capacity["kv_cache_tokens"]
    assert engine["num_gpu_blocks"] == capacity["kv_cache_tokens"] // 16
    assert engine["max_num_seqs"] == capacity["engine_settings"]["max_running_requests"]
    assert (engine["chunked_prefill_size"], engine["max_num_batched_tokens"]) == (8192, None)
    assert abs(answer["ttft_ms"]["p50"] - capacity["prefill_ms"]) < 0.01 * capacity["prefill_ms"]
    assert answer["completed_requests"] == 20
    assert any("SGLang's scheduler" in w for w in answer["warnings"])


def test_an_engine_not_simulated_is_refused_by_name(client: TestClient) -> None:
    body = {
        **DEPLOYMENT,
        "engine": "trtllm",
        "workload": {
            "request_rate": 1,
            "input_tokens": 100,
            "output_tokens": 10,
            "num_requests": 10,
        },
    }
    response = client.post("/v1/simulations", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "engine"
    # a trace posted as CSV: the same refusal, from the query string's engine
    text = (TRACES / "azure_conv_2023_head.csv").read_text(encoding="utf-8")
    csv = client.post(
        "/v1/simulations",
        params={**DEPLOYMENT, "engine": "trtllm"},
        content=text,
        headers={"Content-Type": "text/csv"},
    )
    assert (csv.status_code, csv.json()["field"]) == (422, "engine")


def test_sglang_with_vllms_token_budget_is_refused_by_name(client: TestClient) -> None:
    # SGLang has no --max-num-batched-tokens: its scheduler chunks prefills by
    # chunked_prefill_size (8,192 on this GPU, above), so a budget given for engine=sglang
    # was run without it, answering a question nobody asked; on every door it is a 422
    body = {
        **DEPLOYMENT,
        "engine": "sglang",
        "max_num_batched_tokens": 2048,
        "workload": {
            "request_rate": 1,
            "input_tokens": 100,
            "output_tokens": 10,
            "num_requests": 5,
        },
    }
    response = client.post("/v1/simulations", json=body)
    assert (response.status_code, response.json()["field"]) == (422, "max_num_batched_tokens")
    assert "chunked_prefill_size" in response.json()["detail"]
    csv = client.post(
        "/v1/simulations",
        params={**DEPLOYMENT, "engine": "sglang", "max_num_batched_tokens": 2048},
        content="arrival_s,input_tokens,output_tokens\n0,374,44\n",
        headers={"Content-Type": "text/csv"},
    )
    assert (csv.status_code, csv.json()["field"]) == (422, "max_num_batched_tokens")
    # vLLM's scheduler reads it: the same body on engine=vllm runs within 2,048 tokens a step
    vllm = client.post("/v1/simulations", json={**body, "engine": "vllm"})
    assert vllm.status_code == 200, vllm.text
    assert vllm.json()["engine"]["max_num_batched_tokens"] == 2048


def test_a_csv_trace_on_sglang_answers_as_its_json_rows(client: TestClient) -> None:
    text = "arrival_s,input_tokens,output_tokens\n0,374,44\n4.314579,396,109\n"
    csv = client.post(
        "/v1/simulations",
        params={**DEPLOYMENT, "engine": "sglang"},
        content=text,
        headers={"Content-Type": "text/csv"},
    ).json()
    rows = [
        {"arrival_s": 0.0, "input_tokens": 374, "output_tokens": 44},
        {"arrival_s": 4.314579, "input_tokens": 396, "output_tokens": 109},
    ]
    body = {**DEPLOYMENT, "engine": "sglang", "trace": rows}
    http = client.post("/v1/simulations", json=body).json()
    assert csv["engine"]["engine"] == http["engine"]["engine"] == "sglang"
    for name in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "steps"):
        assert csv[name] == http[name]


def test_a_csv_traces_query_string_is_read_as_get_capacity_reads_its_own(
    client: TestClient,
) -> None:
    # The trace's deployment is in the query string: a misspelt `max_model_length` was
    # ignored, the run sized at the model's own 131,072-token context, a question nobody
    # asked; a workload's field (the rows are the traffic) likewise. Both are 422s naming
    # the parameter, and a name kvplan does not read (`_`, a sheet's cache-buster) is said in
    # Kvplan-Ignored-Parameters, as on GET /v1/capacity.
    text = "arrival_s,input_tokens,output_tokens\n0,374,44\n"

    def post(**query: Any) -> Any:
        return client.post(
            "/v1/simulations",
            params={"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", **query},
            content=text,
            headers={"Content-Type": "text/csv"},
        )

    misspelt = post(max_model_length=4096)
    assert (misspelt.status_code, misspelt.json()["field"]) == (422, "max_model_length")
    assert misspelt.json()["suggestions"] == ["max_model_len"]
    for name, value in (("request_rate", 4), ("num_requests", 10), ("seed", 1)):
        refused = post(max_model_len=4096, **{name: value})
        assert (refused.status_code, refused.json()["field"]) == (422, name)
    read = post(max_model_len=4096, _=3)
    assert read.status_code == 200, read.text
    assert read.json()["engine"]["max_model_len"] == 4096
    assert read.headers["Kvplan-Ignored-Parameters"] == "_"
    # the engines' own spellings are read, as GET reads them: SGLang's tp_size is TP 2
    blocks = [
        post(max_model_len=4096, **{name: 2}).json()["engine"]["num_gpu_blocks"]
        for name in ("tp_size", "tensor_parallel_size")
    ]
    assert blocks[0] == blocks[1] > read.json()["engine"]["num_gpu_blocks"]
