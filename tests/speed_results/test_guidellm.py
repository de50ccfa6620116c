"""guidellm's report (`guidellm benchmark ... --output-path benchmarks.json`) read, and set
against kvplan's estimate at the same doors as vLLM's and genai-perf's files.

The file is guidellm's own test asset, a real run with its backend's model stripped
(tests/fixtures/bench_results/SOURCES.md): one synchronous benchmark, 46 requests of about
256 tokens in and 128 out. Its figures, read from the file (`benchmarks[0].metrics.<name>
.successful`): inter_token_latency_ms mean 4.941609043733832, time_to_first_token_ms mean
16.792535781860348, request_latency mean 0.6444743664368339 s, prompt_token_count mean
257.1086956521739 (total_sum 11827 / count 46), output_token_count mean 127.99999999999999
(5888 / 46), requests_per_second mean 1.5481806532737452, output_tokens_per_second mean
198.13346751788123, request_totals.successful 46. They hold together: TTFT + 127 x ITL =
16.7925 + 627.5843 = 644.377 ms against the request latency's 644.474 ms.

No public report of several benchmarks (a sweep) was found; the sweep below is built from this
benchmark, each change said beside it. The stripped model is named by the tests' deployment
(llama-3.1-8b-instruct on an H100): they check the file's reading and the comparison's
arithmetic, and that the estimate is the one POST /v1/capacity gives at the run's shape.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from service.kit.errors import InvalidRequest
from service.speed_results.parser import NotCompared, choose, parse_report, parse_result
from tests.conftest import ADMIN
from tests.helpers import problem
from tests.speed_results.test_speed_results_api import FIXTURES

GUIDELLM = json.loads((FIXTURES / "guidellm-0.3.0-benchmarks_stripped.json").read_text())
DEPLOYMENT = {"model": "llama-3.1-8b-instruct", "gpu": "h100-sxm-80gb"}
ITL_MS = 4.941609043733832  # benchmarks[0].metrics.inter_token_latency_ms.successful.mean


def _benchmark(strategy: dict[str, Any] | None = None, itl: float | None = None) -> Any:
    """The fixture's benchmark, its strategy (args.strategy) or mean ITL replaced."""
    bench = copy.deepcopy(GUIDELLM["benchmarks"][0])
    if strategy is not None:
        bench["args"]["strategy"] = strategy
    if itl is not None:
        bench["metrics"]["inter_token_latency_ms"]["successful"]["mean"] = itl
    return bench


# A sweep built from the one benchmark: [0] as written; [1] its strategy made 4 concurrent
# streams; [2] a Poisson rate of 1.5 req/s; [3] an ITL of 0, as guidellm writes when no
# request gave two tokens.
SWEEP = {
    "benchmarks": [
        _benchmark(),
        _benchmark({"type_": "concurrent", "streams": 4}),
        _benchmark({"type_": "poisson", "rate": 1.5}),
        _benchmark(itl=0.0),
    ]
}


def test_the_report_is_read_as_guidellm_wrote_it() -> None:
    run = parse_result(GUIDELLM)
    assert run.tool == "guidellm"
    assert run.strategy == "synchronous"
    assert run.model_id == "example_model"  # worker.backend_model, as stripped
    assert run.completed == 46
    assert run.max_concurrency == 1  # synchronous: one request at a time
    assert run.request_rate is None
    assert run.mean_input_tokens == pytest.approx(257.1086956521739)
    assert run.mean_output_tokens == pytest.approx(128)
    # inter_token_latency_ms is vLLM's TPOT and mean ITL; time_per_output_token_ms (4.903,
    # which counts the first token's wait) is not read.
    assert run.mean_tpot_ms == run.mean_itl_ms == pytest.approx(ITL_MS)
    assert run.mean_ttft_ms == pytest.approx(16.792535781860348)
    assert run.mean_e2el_ms == pytest.approx(644.4743664368339)  # 0.6444743664368339 s
    assert run.request_throughput == pytest.approx(1.5481806532737452)
    assert run.output_throughput == pytest.approx(198.13346751788123)
    assert run.mean_concurrency == 1.0


def test_each_strategy_says_how_the_server_was_loaded() -> None:
    report = parse_report(SWEEP)
    assert [getattr(item, "strategy", None) for item in report] == [
        "synchronous",
        "concurrent@4",
        "poisson@1.50",
        "synchronous",
    ]
    concurrent, poisson = report[1], report[2]
    assert not isinstance(concurrent, NotCompared)
    assert not isinstance(poisson, NotCompared)
    assert concurrent.max_concurrency == 4
    assert poisson.max_concurrency is None
    assert poisson.request_rate == 1.5
    # Open loop: in flight by Little's law, 1.5481806532737452 req/s x 0.6444743664368339 s
    # = 0.99776 (guidellm's own request_concurrency mean is 0.9977627456483604).
    assert poisson.mean_concurrency == pytest.approx(0.9977627456483605)
    broken = report[3]
    assert isinstance(broken, NotCompared)
    assert broken.field == "result.benchmarks[3].metrics.inter_token_latency_ms.successful.mean"


def test_the_04_layout_reads_the_strategy_from_config() -> None:
    # guidellm 0.4 moved a benchmark's `args` to `config` (schemas/base.py BenchmarkConfig).
    bench = _benchmark()
    bench["config"] = {"strategy": {"type_": "throughput", "max_concurrency": 16}}
    del bench["args"]
    run = parse_result({"benchmarks": [bench]})
    assert run.strategy == "throughput@16"
    assert run.max_concurrency == 16


@pytest.mark.parametrize(
    ("benchmark", "field"),
    [(None, "benchmark"), (4, "benchmark"), (-1, "benchmark"), (3, "inter_token_latency_ms")],
)
def test_choosing_a_benchmark_is_refused_by_name(benchmark: int | None, field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        choose(parse_report(SWEEP), benchmark)
    assert field in (refused.value.field or "")


def _post(client: TestClient, result: Any, **extra: Any) -> Any:
    body = {"result": result, "deployment": DEPLOYMENT, **extra}
    return client.post("/v1/speed-results", json=body)


def test_a_guidellm_report_is_set_against_the_estimate(client: TestClient) -> None:
    response = _post(client, GUIDELLM)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["benchmark"] == 0  # the only one
    run = body["run"]
    assert (run["tool"], run["strategy"], run["batch"]) == ("guidellm", "synchronous", 1)
    assert run["context_tokens"] == 321  # 257.109 prompt + 128 / 2 = 321.109
    assert run["prompt_tokens"] == 257
    # kvplan's estimate at that shape, as POST /v1/capacity answers it: one sequence of 321
    # tokens, a 257-token prefill.
    same = client.post(
        "/v1/capacity",
        json={**DEPLOYMENT, "max_model_len": 321, "max_num_seqs": 1, "avg_prompt_tokens": 257},
    ).json()
    tpot = next(f for f in body["figures"] if f["name"] == "mean_tpot_ms")
    assert tpot["measured"] == pytest.approx(ITL_MS)
    assert tpot["estimated"] == pytest.approx(same["decode_ms_per_token"], rel=1e-3)
    assert body["step_time_scale"] == pytest.approx(ITL_MS / tpot["estimated"])
    ttft = next(f for f in body["figures"] if f["name"] == "mean_ttft_ms")
    assert ttft["estimated"] == pytest.approx(same["prefill_ms"], rel=1e-3)
    # A closed loop of one: its throughput is compared, 198.133 tokens/s measured.
    throughput = next(f for f in body["figures"] if f["name"] == "output_throughput")
    assert throughput["measured"] == pytest.approx(198.13346751788123)
    assert [b["index"] for b in body["benchmarks"]] == [0]
    assert body["benchmarks"][0]["figures"] == body["figures"]


def test_a_sweep_is_compared_benchmark_by_benchmark(client: TestClient) -> None:
    body = _post(client, SWEEP).json()
    assert body["benchmark"] is None  # none asked: no top-level run
    assert body["run"] is None
    assert body["figures"] == []
    assert body["step_time_scale"] is None
    benches = body["benchmarks"]
    assert [b["run"]["batch"] if b["run"] else None for b in benches] == [1, 4, 1, None]
    assert "inter_token_latency_ms.successful.mean" in benches[3]["not_compared"]
    # The same measured TPOT against a batch of 4 rather than 1: kvplan's step is longer at
    # 4, so the ratio is smaller.
    assert benches[1]["step_time_scale"] < benches[0]["step_time_scale"]
    # Asked by index, the top level is that benchmark's.
    chosen = _post(client, SWEEP, benchmark=1).json()
    assert chosen["benchmark"] == 1
    assert chosen["run"] == benches[1]["run"]
    assert chosen["step_time_scale"] == pytest.approx(benches[1]["step_time_scale"])


def test_a_benchmark_that_cannot_be_compared_is_refused_when_asked(client: TestClient) -> None:
    refused = problem(_post(client, SWEEP, benchmark=3), 422)
    assert refused["field"] == "result.benchmarks[3].metrics.inter_token_latency_ms.successful.mean"
    assert problem(_post(client, SWEEP, benchmark=9), 422)["field"] == "benchmark"
    assert problem(_post(client, {"benchmarks": []}), 422)["field"] == "result"


def test_the_cli_answers_as_the_api(
    client: TestClient, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(SWEEP))
    args = ["explain-bench", str(path), "--model", DEPLOYMENT["model"], "--gpu", DEPLOYMENT["gpu"]]
    assert main([*args, "--offline", "--benchmark", "1", "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    api = _post(client, SWEEP, benchmark=1).json()
    assert printed["run"] == api["run"]
    assert printed["benchmarks"] == api["benchmarks"]
    # The table: every benchmark on a line, the one that is not compared with its reason.
    assert main([*args, "--offline", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert "4 benchmarks (--benchmark N shows one):" in out
    assert "  1 concurrent@4             4       4.942" in out  # batch 4, the file's ITL
    assert "  3 synchronous         not compared: result.benchmarks[3].metrics" in out
    # An index the report does not hold: exit 2, the problem on stderr naming `benchmark`.
    assert main([*args, "--offline", "--benchmark", "7"]) == 2
    assert '"field": "benchmark"' in capsys.readouterr().err


def _without(path: tuple[str, ...]) -> Any:
    bench = _benchmark()
    holder = bench
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    return bench


@pytest.mark.parametrize(
    ("bench", "field"),
    [
        (1, "result.benchmarks[0]"),
        (_without(("metrics",)), "result.benchmarks[0].metrics"),
        (
            _without(("metrics", "prompt_token_count", "successful")),
            "result.benchmarks[0].metrics.prompt_token_count.successful",
        ),
        (
            _benchmark({"type_": "concurrent", "streams": "four"}),
            "result.benchmarks[0].args.strategy.streams",
        ),
        (
            _benchmark({"type_": "constant", "rate": -1}),
            "result.benchmarks[0].args.strategy.rate",
        ),
        (_benchmark(itl=float("nan")), "inter_token_latency_ms.successful.mean"),
    ],
)
def test_a_benchmark_that_cannot_be_read_is_refused_by_its_path(bench: Any, field: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_result({"benchmarks": [bench]})
    assert field in (refused.value.field or "")


def test_a_calibration_is_kept_from_the_benchmark_named(client: TestClient) -> None:
    body = {"result": SWEEP, "deployment": DEPLOYMENT}
    unnamed = client.post("/v1/speed-calibrations", json=body, headers=ADMIN)
    assert problem(unnamed, 422)["field"] == "benchmark"  # four benchmarks, none named
    kept = client.post("/v1/speed-calibrations", json={**body, "benchmark": 1}, headers=ADMIN)
    assert kept.status_code == 201, kept.text
    stored = kept.json()
    compared = _post(client, SWEEP, benchmark=1).json()
    assert (stored["tool"], stored["batch"]) == ("guidellm", 4)  # concurrent@4
    assert stored["measured_tpot_ms"] == pytest.approx(ITL_MS)
    assert stored["step_time_scale"] == pytest.approx(compared["step_time_scale"])
