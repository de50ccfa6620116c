"""`kvplan simulate`: the same use case as POST /v1/simulations, from the shell."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.cli import main

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
DEPLOYMENT = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--max-model-len", "8192"]


def test_the_shell_and_http_give_the_same_simulation(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "simulate", "--offline", *DEPLOYMENT, "--format", "json",
            "--request-rate", "3", "--input-tokens", '{"50": 1000, "99": 4000}',
            "--output-tokens", "200", "--num-requests", "300", "--seed", "5",
        ]
    )  # fmt: skip
    assert code == 0
    shell = json.loads(capsys.readouterr().out)
    body = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "max_model_len": 8192,
        "workload": {
            "request_rate": 3,
            "input_tokens": {"50": 1000, "99": 4000},
            "output_tokens": 200,
            "num_requests": 300,
            "seed": 5,
        },
    }
    http = client.post("/v1/simulations", json=body).json()
    for name in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "throughput", "completed_requests"):
        assert shell[name] == http[name]


def test_a_mooncake_trace_from_the_shell_hits_its_shared_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # mooncake_readme.jsonl: the second request shares 384 of its 404 blocks of 16 tokens
    # with the first (test_traces.py), so it prefills 6,472 - 6,144 = 328 tokens instead of
    # 6,472. The same rows without hash_ids prefill both prompts whole: a larger mean TTFT.
    def mean_ttft(path: Path) -> float:
        code = main(
            ["simulate", "--offline", *DEPLOYMENT, "--format", "json", "--trace", str(path)]
        )
        assert code == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["trace_format"] == "mooncake"
        return float(answer["ttft_ms"]["mean"])

    source = TRACES / "mooncake_readme.jsonl"
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    bare = tmp_path / "no_hashes.jsonl"
    bare.write_text("".join(json.dumps({**r, "hash_ids": None}) + "\n" for r in rows))
    shared, unshared = mean_ttft(source), mean_ttft(bare)
    # The first request is the same in both; the second's prefill drops by about 95%
    # (328 of 6,472 tokens), so the mean drops by over a third.
    assert shared < 0.7 * unshared


def test_bad_traffic_exits_2_naming_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "simulate",
            "--offline",
            *DEPLOYMENT,
            "--input-tokens",
            "10",
            "--output-tokens",
            "10",
            "--num-requests",
            "3",
        ]
    )
    assert code == 2
    assert json.loads(capsys.readouterr().err)["field"] == "workload.request_rate"


def test_the_shell_and_http_give_the_same_sglang_simulation(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "simulate", "--offline", *DEPLOYMENT, "--engine", "sglang", "--format", "json",
            "--request-rate", "3", "--input-tokens", "1500", "--output-tokens", "200",
            "--num-requests", "200", "--seed", "5",
        ]
    )  # fmt: skip
    assert code == 0
    shell = json.loads(capsys.readouterr().out)
    body = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "max_model_len": 8192,
        "engine": "sglang",
        "workload": {
            "request_rate": 3,
            "input_tokens": 1500,
            "output_tokens": 200,
            "num_requests": 200,
            "seed": 5,
        },
    }
    http = client.post("/v1/simulations", json=body).json()
    assert shell["engine"] == http["engine"]
    assert shell["engine"]["engine"] == "sglang"
    for name in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "throughput", "steps"):
        assert shell[name] == http[name]


def test_the_shell_refuses_an_engine_not_simulated_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        [
            "simulate", "--offline", *DEPLOYMENT, "--engine", "trtllm",
            "--request-rate", "1", "--input-tokens", "100", "--output-tokens", "10",
            "--num-requests", "10",
        ]
    )  # fmt: skip
    assert code != 0
    assert "engine" in capsys.readouterr().err


def test_the_shells_csv_names_each_percentile_as_a_rate_plans_row_does(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    # one name per quantity: a plan for a rate's CSV row calls ttft_ms's p99 `ttft_p99_ms`
    # (the name of its target), so the simulation's row does too, each cell the JSON's figure
    args = ["simulate", "--offline", *DEPLOYMENT, "--request-rate", "2"]
    args += ["--input-tokens", "500", "--output-tokens", "100", "--num-requests", "50"]
    assert main([*args, "--format", "csv"]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert main([*args, "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    for name in ("ttft", "tpot", "e2e_latency"):
        for stat in ("mean", "p50", "p90", "p99"):
            assert float(row[f"{name}_{stat}_ms"]) == answer[f"{name}_ms"][stat]
    plan = {
        "model": "llama-3.1-8b",
        "gpus": "h100-sxm-80gb",
        "max_model_len": 8192,
        "workload": json.dumps({"request_rate": 2, "input_tokens": 500, "output_tokens": 100}),
        "ttft_p99_ms": 2000,
        "format": "csv",
    }
    header = client.get("/v1/plans", params=plan).text.splitlines()[0].split(",")
    percentiles = [c for c in row if c.endswith("_ms")]
    assert set(percentiles) <= set(header)


def test_the_shells_engine_help_says_it_picks_the_scheduler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--engine` on simulate picks the scheduler stepped, not only the memory arithmetic
    # (capacity's help), and says which engine is not simulated
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "vllm or sglang: whose scheduler steps the replica" in text
    assert "trtllm's scheduler is not simulated" in text
    traffic = ["--request-rate", "1", "--input-tokens", "10", "--output-tokens", "5"]
    code = main(
        [
            "simulate",
            "--offline",
            *DEPLOYMENT,
            *traffic,
            "--num-requests",
            "2",
            "--engine",
            "trtllm",
        ]
    )
    assert code == 2
    assert json.loads(capsys.readouterr().err)["field"] == "engine"
