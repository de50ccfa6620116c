"""Disaggregated prefill/decode options in plans for a rate (issue 23 item 2).

The KV transfer and each pool's analytic sizing are checked by hand on Llama-3.1-8B and on a
replica whose step times are written by hand (test_plan_for_rate.py's); the chained run of the
two pools at light load; then whole plans over HTTP and the CLI: a prefill-heavy workload
(long prompts, short answers, a tight TPOT) gets a cheaper disaggregated option, the issue's
example does not, and the plan says by how much either way.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from service.planning.disaggregated import decode_replicas, prefill_replicas
from service.planning.rate import Load, Means, Target
from service.simulation import Lengths, Pool, Workload, draw_requests, run_disaggregated
from service.sizing import Parallelism, compute_capacity, kv_transfer
from service.sizing import Workload as SizingWorkload
from tests.planning.test_plan_for_rate import CONFIG, TABLE
from tests.sizing.models import H100_TORCH, LLAMA_31_8B

TARGETS = (Target("ttft_ms", "99", 5000.0), Target("tpot_ms", "99", 100.0))


def test_a_prompts_kv_over_the_inter_node_link_worked_by_hand() -> None:
    # Llama-3.1-8B, bf16 KV, TP1: K and V x 32 layers x 8 KV heads x 128 dims x 2 B = 131,072 B
    # a token (tests/sizing/models.py LLAMA_31_8B). A 2,000-token prompt: 262,144,000 B, sent
    # over one 400 Gb/s NIC = 50 GB/s (sizing/engines/multinode.py INTERNODE_GB_S):
    # 262,144,000 / 50e9 s = 5.24288 ms.
    capacity = compute_capacity(LLAMA_31_8B, H100_TORCH, SizingWorkload(8192))
    sent = kv_transfer(capacity, H100_TORCH, H100_TORCH, 2000)
    assert sent.bytes_per_gpu == 262_144_000
    assert sent.link_gb_s == 50.0
    assert sent.transfer_ms == pytest.approx(5.24288)
    # TP2: each GPU holds 4 of the 8 KV heads and sends them over its own NIC, half as long
    two = compute_capacity(LLAMA_31_8B, H100_TORCH, SizingWorkload(8192), Parallelism(2))
    assert kv_transfer(two, H100_TORCH, H100_TORCH, 2000).transfer_ms == pytest.approx(2.62144)


def test_each_pool_is_sized_for_its_own_step() -> None:
    # TABLE: prefill(P) = 10 + (P - 1) x 0.01 ms, every decode step 20 ms; CONFIG: 10,000 blocks
    # of 16 tokens, max_num_seqs 4. Mean request 1,000 in, 100 out, at 50 requests/s.
    load = Load(50.0, Means(1000.0, 100.0), TARGETS)
    # Prefill pool: prefill(1000) = 19.99 ms of work per request; 50 x 19.99 / 1000 = 0.9995
    # replicas busy, / 0.8 utilisation = 1.249 -> 2 replicas.
    assert prefill_replicas(TABLE, load) == 2
    # Decode pool: a request holds ceil(1100 / 16) = 69 blocks, 10,000 // 69 = 144 fit,
    # max_num_seqs caps the batch at 4 (decode(4) = 20 ms is within the 100 ms TPOT). Each
    # request holds a slot 100 x 20 = 2,000 ms: 50 x 2,000 / 4 / 1000 = 25 replicas busy,
    # / 0.8 = 31.25 -> 32. (One pool of the same replica needs both: test_plan_for_rate.)
    assert decode_replicas(TABLE, CONFIG, load) == 32
    tight = Load(50.0, Means(1000.0, 100.0), (Target("tpot_ms", "99", 10.0),))
    assert decode_replicas(TABLE, CONFIG, tight) == (
        "tpot_p99_ms: one sequence's decode step takes 20.0 ms"
    )


def test_one_request_waits_for_its_prefill_transfer_and_first_decode_step() -> None:
    # One request of 1,000 in and 100 out; the link 0.001 ms a token. Prefill replica: one
    # step of the whole prompt, prefill(1000) = 19.99 ms; the transfer 1,000 x 0.001 = 1 ms.
    # Decode replica: its prompt arrives computed; the step that admits it has no decode, so it
    # is the one-token pass, prefill(1) = 10 ms, and samples the first token:
    # TTFT = 19.99 + 1 + 10 = 30.99 ms. Then 99 decode steps of 20 ms: TPOT 20 ms.
    workload = Workload(
        Lengths.of("input_tokens", 1000),
        Lengths.of("output_tokens", 100),
        request_rate=1.0,
        num_requests=1,
    )
    result = run_disaggregated(Pool(CONFIG, TABLE), Pool(CONFIG, TABLE), workload, (1, 1), 0.001)
    assert result.summary.ttft_ms.p99 == pytest.approx(30.99)
    assert result.summary.tpot_ms.p99 == pytest.approx(20.0)
    assert result.before_decode_ms.p99 == pytest.approx(20.99)
    assert result.summary.e2e_latency_ms.p99 == pytest.approx(30.99 + 99 * 20)


PREFILL_HEAVY = {
    "model": "llama-3.1-8b-instruct",
    "max_model_len": 16384,
    "gpus": ["h100-sxm-80gb"],
    "workload": {"request_rate": 10, "input_tokens": 8000, "output_tokens": 100},
    "ttft_p99_ms": 3000,
    "tpot_p99_ms": 25,
}


def test_a_prefill_heavy_workload_is_cheaper_disaggregated(client: TestClient) -> None:
    response = client.post("/v1/plans", json=PREFILL_HEAVY)
    assert response.status_code == 200, response.text
    answer = response.json()
    best = answer["recommendation"]
    assert best["kind"] == "disaggregated"
    pools = best["disaggregated"]
    prefill, decode = pools["prefill_pool"], pools["decode_pool"]
    assert best["total_gpus"] == prefill["total_gpus"] + decode["total_gpus"]
    assert best["cost_per_hour_usd"] == pytest.approx(
        prefill["cost_per_hour_usd"] + decode["cost_per_hour_usd"]
    )
    # 10 requests/s x 100 output tokens x 3,600 s = 3.6 million output tokens an hour
    assert best["cost_per_million_output_tokens_usd"] == pytest.approx(
        best["cost_per_hour_usd"] / 3.6, abs=1e-4
    )
    assert best["ttft_ms"]["p99"] <= 3000
    assert best["tpot_ms"]["p99"] <= 25
    # 8,000 tokens x 131,072 B (TP1) = 1,048,576,000 B over 50 GB/s = 20.97152 ms
    if prefill["tensor_parallel_size"] == 1:
        assert pools["kv_transfer_bytes_per_gpu"] == 1_048_576_000
        assert pools["kv_transfer_ms"] == pytest.approx(20.972, abs=1e-3)
    assert prefill["max_num_seqs"] == 16  # disaggregated.PREFILL_MAX_NUM_SEQS
    assert "--max-num-seqs 16 " in prefill["engine_flags"]["vllm"]
    assert "--max-num-batched-tokens 16384" in prefill["engine_flags"]["vllm"]
    assert "NixlConnector" in decode["engine_flags"]["vllm"]
    # vLLM's flags alone: split pools are simulated on vLLM's scheduler (rate.SPLIT_VLLM_ONLY)
    assert set(prefill["engine_flags"]) == set(decode["engine_flags"]) == {"vllm"}
    assert set(pools["router"]) == {"vllm"}
    # each pool's memory is kvplan's capacity answer for its own settings
    for pool, settings in ((prefill, {"max_num_seqs": 16, "max_num_batched_tokens": 16384}),
                           (decode, {})):  # fmt: skip
        question = {
            "model": "llama-3.1-8b-instruct", "gpu": pool["gpu"], "max_model_len": 16384,
            "tensor_parallel_size": pool["tensor_parallel_size"], **settings,
        }  # fmt: skip
        sized = client.post("/v1/capacity", json=question).json()
        assert sized["kv_pool_bytes"] == pool["kv_pool_bytes"]
        assert sized["num_gpu_blocks"] == pool["num_gpu_blocks"]
    said = answer["disaggregation"]
    one, split = (
        said["aggregated_cost_per_million_output_tokens_usd"],
        said["disaggregated_cost_per_million_output_tokens_usd"],
    )
    assert split == best["cost_per_million_output_tokens_usd"]
    assert said["cheaper_fraction"] == pytest.approx((one - split) / one, abs=1e-4)
    assert said["cheaper_fraction"] > 0
    assert f"{said['cheaper_fraction']:.1%} cheaper than one pool" in said["statement"]
    assert said["statement"] in answer["warnings"]


def test_the_issues_example_is_not_cheaper_split_and_says_so(client: TestClient) -> None:
    body = {
        "model": "llama-3.1-8b-instruct",
        "max_model_len": 8192,
        "gpus": ["h100-sxm-80gb"],
        "workload": {"request_rate": 20, "input_tokens": 2000, "output_tokens": 300},
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 50,
    }
    answer = client.post("/v1/plans", json=body).json()
    said = answer["disaggregation"]
    # on H100s alone the split pools buy nothing here: 4 GPUs either way at best (the pool
    # running each step's prefill chunks beside its decodes still meets the 50 ms TPOT), so
    # one pool ranks first and the statement says the split is not cheaper, or costs the same
    assert answer["recommendation"]["kind"] == "aggregated"
    assert said["cheaper_fraction"] <= 0
    assert said["statement"].startswith(
        "disaggregated prefill/decode costs the same"
        if said["cheaper_fraction"] == 0
        else "disaggregated prefill/decode is not cheaper"
    )
    kinds = {o["kind"] for o in [answer["recommendation"], *answer["alternatives"]]}
    assert kinds == {"aggregated", "disaggregated"}  # both shown, ranked by cost


def test_never_and_only_keep_one_kind(client: TestClient) -> None:
    never = client.post("/v1/plans", json={**PREFILL_HEAVY, "disaggregated": "never"}).json()
    options = [never["recommendation"], *never["alternatives"]]
    assert {o["kind"] for o in options} == {"aggregated"}
    assert never["disaggregation"] is None
    only = client.post("/v1/plans", json={**PREFILL_HEAVY, "disaggregated": "only"}).json()
    options = [only["recommendation"], *only["alternatives"]]
    assert {o["kind"] for o in options} == {"disaggregated"}
    assert only["disaggregation"]["aggregated_cost_per_million_output_tokens_usd"] is None


def test_sglang_plans_single_pools_and_says_why(client: TestClient) -> None:
    """SGLang's disaggregated decode loop is not simulated: never planned, said, or refused."""
    auto = client.post("/v1/plans", json={**PREFILL_HEAVY, "engine": "sglang"})
    assert auto.status_code == 200, auto.text
    answer = auto.json()
    options = [answer["recommendation"], *answer["alternatives"]]
    assert {o["kind"] for o in options} == {"aggregated"}
    assert any("vLLM's scheduler only" in w for w in answer["warnings"])
    only = client.post(
        "/v1/plans", json={**PREFILL_HEAVY, "engine": "sglang", "disaggregated": "only"}
    )
    assert only.status_code == 422
    assert only.json()["field"] == "disaggregated"


def test_disaggregated_without_a_workload_is_refused_by_name(client: TestClient) -> None:
    body = {"model": "llama-3.1-8b-instruct", "max_model_len": 8192, "peak_concurrency": 8}
    response = client.post("/v1/plans", json={**body, "disaggregated": "auto"})
    assert response.status_code == 422
    assert response.json()["field"] == "disaggregated"
    wrong = client.post("/v1/plans", json={**PREFILL_HEAVY, "disaggregated": "sometimes"})
    assert wrong.status_code == 422
    assert "disaggregated" in wrong.text


def test_the_shell_csv_and_http_give_the_same_split_plan(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "plan", "--offline", "--model", "llama-3.1-8b-instruct", "--max-model-len", "16384",
            "--gpu", "h100-sxm-80gb", "--rate", "10", "--input-tokens", "8000",
            "--output-tokens", "100", "--ttft-p99-ms", "3000", "--tpot-p99-ms", "25",
            "--disaggregated", "auto", "--format", "json",
        ]
    )  # fmt: skip
    assert code == 0
    shell = json.loads(capsys.readouterr().out)
    http = client.post("/v1/plans", json=PREFILL_HEAVY).json()
    assert shell["recommendation"]["disaggregated"] == http["recommendation"]["disaggregated"]
    assert shell["disaggregation"] == http["disaggregation"]
    query = {**PREFILL_HEAVY, "gpus": "h100-sxm-80gb", "format": "csv"}
    query["workload"] = json.dumps(PREFILL_HEAVY["workload"])
    table = client.get("/v1/plans", params=query)
    assert table.status_code == 200, table.text
    row = next(csv.DictReader(io.StringIO(table.text)))  # the flags' JSON is a quoted cell
    pools = http["recommendation"]["disaggregated"]
    assert row["kind"] == "disaggregated"
    assert int(row["prefill_replicas"]) == pools["prefill_pool"]["replicas"]
    assert int(row["decode_replicas"]) == pools["decode_pool"]["replicas"]
    assert float(row["kv_transfer_ms"]) == pools["kv_transfer_ms"]


def test_the_shells_table_names_both_pools_of_a_split_option(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    # the table a person reads at a terminal: a split option's gpu, tensor_parallel_size and
    # replicas are its decode pool's, and its prefill pool's GPU and TP stand beside them, so
    # two options that differ only in a pool's layout read apart (each cell as the JSON says)
    code = main(
        [
            "plan", "--offline", "--model", "llama-3.1-8b-instruct", "--max-model-len", "16384",
            "--gpu", "h100-sxm-80gb", "--rate", "10", "--input-tokens", "8000",
            "--output-tokens", "100", "--ttft-p99-ms", "3000", "--tpot-p99-ms", "25",
            "--format", "table",
        ]
    )  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    http = client.post("/v1/plans", json=PREFILL_HEAVY).json()
    options = [http["recommendation"], *http["alternatives"]]
    rows = [dict(zip(header, line.split(), strict=True)) for line in lines[2 : 2 + len(options)]]
    split = [(row, o) for row, o in zip(rows, options, strict=True) if o["disaggregated"]]
    assert split
    for row, option in split:
        prefill = option["disaggregated"]["prefill_pool"]
        decode = option["disaggregated"]["decode_pool"]
        assert row["kind"] == "disaggregated"
        assert row["prefill_gpu"] == prefill["gpu"]
        assert int(row["prefill_tensor_parallel_size"]) == prefill["tensor_parallel_size"]
        assert int(row["prefill_replicas"]) == prefill["replicas"]
        assert row["gpu"] == decode["gpu"]
        assert int(row["tensor_parallel_size"]) == decode["tensor_parallel_size"]
        assert int(row["replicas"]) == decode["replicas"]


def test_a_workload_given_by_duration_runs_the_same_requests_through_both_pools() -> None:
    # 60 s at 2 requests/s: the prefill replica (1 of 2) sees 1/s, the decode replica (the one)
    # 2/s; both runs are the same requests, so every one that finished is counted once.
    workload = Workload(
        Lengths.of("input_tokens", 1000),
        Lengths.of("output_tokens", 10),
        request_rate=2.0,
        duration_s=60.0,
    )
    result = run_disaggregated(Pool(CONFIG, TABLE), Pool(CONFIG, TABLE), workload, (2, 1), 0.001)
    prefill_share = len(draw_requests(replace(workload, request_rate=1.0), CONFIG.block_size))
    assert result.summary.completed_requests == prefill_share
    assert result.summary.rejected_requests == 0


def test_a_table_of_questions_answers_a_split_plan_as_the_json_door(client: TestClient) -> None:
    out = io.StringIO()
    writer = csv.writer(out)
    columns = ["model", "max_model_len", "gpus", "workload", "ttft_p99_ms", "tpot_p99_ms"]
    writer.writerow([*columns, "disaggregated"])
    workload = json.dumps(PREFILL_HEAVY["workload"])
    writer.writerow(["llama-3.1-8b-instruct", 16384, "h100-sxm-80gb", workload, 3000, 25, "auto"])
    csv_body = {"content": out.getvalue(), "headers": {"Content-Type": "text/csv"}}
    response = client.post("/v1/plans", **csv_body)
    assert response.status_code == 200, response.text
    row = next(csv.DictReader(io.StringIO(response.text)))
    pools = client.post("/v1/plans", json=PREFILL_HEAVY).json()["recommendation"]["disaggregated"]
    assert (row["status"], row["kind"]) == ("ok", "disaggregated")
    assert int(row["prefill_replicas"]) == pools["prefill_pool"]["replicas"]
    assert row["prefill_vllm_flags"] == pools["prefill_pool"]["engine_flags"]["vllm"]
