"""Benchmark result files as the tools write them, read into one shape (`BenchRun`). Pure.

* `vllm bench serve --save-result` (vLLM vllm/benchmarks/serve.py `main_async`, which dumps
  `benchmark()`'s result dict beside the run's arguments): `num_prompts`, `request_rate`
  (a number, or "inf"), `max_concurrency` (null without `--max-concurrency`), `duration`,
  `completed`, `total_input_tokens`, `total_output_tokens`, `request_throughput`,
  `output_throughput`, `mean_ttft_ms`, `mean_tpot_ms`, `mean_itl_ms`, their median and p99,
  and, with `--save-detailed`, the per-request `input_lens`, `output_lens`, `ttfts`, `itls`.
* genai-perf's `profile_export_genai_perf.json` (and AIPerf's `profile_export_aiperf.json`, its
  successor, the same metric objects): `time_to_first_token`, `inter_token_latency`,
  `output_token_throughput`, `request_throughput`, `input_sequence_length`,
  `output_sequence_length`, each an object with `avg` (and `unit`); the concurrency is read
  from `input_config.perf_analyzer.stimulus.concurrency` (genai-perf) or `concurrency`
  where the file carries it.
* guidellm's report (`guidellm benchmark ... --output-path benchmarks.json`; guidellm
  src/guidellm/benchmark/schemas/report.py `GenerativeBenchmarksReport`, before 0.4
  src/guidellm/benchmark/benchmark.py): a `benchmarks` list, one benchmark per strategy run
  (a sweep runs several), each with `metrics.<name>.successful`, a distribution summary
  (`mean`, `median`, `percentiles.p99`, `count`), of `time_to_first_token_ms`,
  `inter_token_latency_ms` (per request (last token - first token) / (output - 1), the mean
  weighted by output - 1: vLLM's TPOT and mean ITL), `request_latency` (seconds),
  `requests_per_second`, `output_tokens_per_second`, `prompt_token_count` and
  `output_token_count`. `time_per_output_token_ms` is not read: guidellm's counts the first
  token's wait in it (request latency / output tokens). The strategy (`config.strategy`, before
  0.4 `args.strategy`; guidellm src/guidellm/scheduler/strategies.py) says how it loaded the
  server: `synchronous` one request at a time, `concurrent` `streams` clients, `throughput`
  everything at once up to `max_concurrency` (a closed loop there, else open), `constant` and
  `poisson` a `rate` (open: requests in flight by Little's law). Each benchmark is one
  `BenchRun`; one that cannot be read is `NotCompared`, the rest of the report still is.

Anything else is refused by name (`InvalidRequest`, field `result`): a figure kvplan would
compare must be a positive number, never guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..kit.errors import InvalidRequest

VLLM_REQUIRED = ("completed", "total_input_tokens", "total_output_tokens", "mean_tpot_ms")
GENAI_PERF_REQUIRED = (
    "time_to_first_token",
    "inter_token_latency",
    "input_sequence_length",
    "output_sequence_length",
)


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One benchmark run: how it loaded the server, and what it measured (ms, tokens/s)."""

    tool: str  # "vllm bench serve" or "genai-perf"
    model_id: str | None
    completed: int | None
    mean_input_tokens: float
    mean_output_tokens: float
    max_concurrency: int | None  # a closed loop of this many clients, else None
    request_rate: float | None  # requests/s offered (Poisson), None for "inf" or unknown
    request_throughput: float | None
    mean_ttft_ms: float | None
    mean_tpot_ms: float | None
    mean_itl_ms: float | None
    output_throughput: float | None
    mean_e2el_ms: float | None
    strategy: str | None = None  # guidellm's, as it names it (concurrent@8, poisson@2.00)

    @property
    def mean_concurrency(self) -> float | None:
        """Requests in flight on average: the clients of a closed loop, else Little's law,
        request throughput x mean end-to-end latency (requests/s x s)."""
        if self.max_concurrency is not None:
            return float(self.max_concurrency)
        latency = self.mean_e2el_ms
        if latency is None and self.mean_ttft_ms is not None and self.mean_tpot_ms is not None:
            latency = self.mean_ttft_ms + (self.mean_output_tokens - 1) * self.mean_tpot_ms
        if self.request_throughput is None or latency is None:
            return None
        return self.request_throughput * latency / 1e3


def _refuse(reason: str) -> InvalidRequest:
    return InvalidRequest(reason, field="result")


def _number(data: dict[str, Any], name: str, *, required: bool = False) -> float | None:
    value = data.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _refuse(f"result.{name} must be a finite number, got {value!r}")
    if value < 0:
        raise _refuse(f"result.{name} must not be negative, got {value!r}")
    return float(value)


def _positive(data: dict[str, Any], name: str) -> float:
    value = _number(data, name, required=True)
    assert value is not None
    if value <= 0:
        raise _refuse(f"result.{name} must be positive, got {value!r}")
    return value


def _rate(value: Any) -> float | None:
    """`request_rate` as vLLM writes it: a number, or "inf" (every request at once)."""
    if value is None or value == "inf" or value == float("inf"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise _refuse(f"result.request_rate must be a positive number or 'inf', got {value!r}")
    return float(value)


def _concurrency(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _refuse(f"result.{name} must be a positive integer or null, got {value!r}")
    return value


def parse_vllm(data: dict[str, Any]) -> BenchRun:
    """A `vllm bench serve --save-result` file."""
    completed = _positive(data, "completed")
    model = data.get("model_id")
    return BenchRun(
        tool="vllm bench serve",
        model_id=model if isinstance(model, str) else None,
        completed=int(completed),
        mean_input_tokens=_positive(data, "total_input_tokens") / completed,
        mean_output_tokens=_positive(data, "total_output_tokens") / completed,
        max_concurrency=_concurrency(data.get("max_concurrency"), "max_concurrency"),
        request_rate=_rate(data.get("request_rate")),
        request_throughput=_number(data, "request_throughput"),
        mean_ttft_ms=_number(data, "mean_ttft_ms"),
        mean_tpot_ms=_positive(data, "mean_tpot_ms"),
        mean_itl_ms=_number(data, "mean_itl_ms"),
        output_throughput=_number(data, "output_throughput"),
        mean_e2el_ms=_number(data, "mean_e2el_ms"),
    )


def _avg(data: dict[str, Any], name: str, *, required: bool = False) -> float | None:
    metric = data.get(name)
    if metric is None and not required:
        return None
    if not isinstance(metric, dict) or "avg" not in metric:
        raise _refuse(f"result.{name} must be an object with avg, got {metric!r}")
    unit = metric.get("unit")
    value = _number(metric, "avg", required=True)
    assert value is not None
    if unit in ("s", "sec") and name in ("time_to_first_token", "inter_token_latency"):
        return value * 1e3
    return value


def _genai_perf_concurrency(data: dict[str, Any]) -> int | None:
    config = data.get("input_config")
    if isinstance(config, dict):
        analyzer = config.get("perf_analyzer")
        stimulus = analyzer.get("stimulus") if isinstance(analyzer, dict) else None
        if isinstance(stimulus, dict) and "concurrency" in stimulus:
            return _concurrency(stimulus["concurrency"], "input_config.perf_analyzer.stimulus")
        if "concurrency" in config:
            return _concurrency(config["concurrency"], "input_config.concurrency")
    return _concurrency(data.get("concurrency"), "concurrency")


def parse_genai_perf(data: dict[str, Any]) -> BenchRun:
    """genai-perf's profile_export_genai_perf.json (or AIPerf's profile_export_aiperf.json)."""
    itl = _avg(data, "inter_token_latency", required=True)
    output_tokens = _avg(data, "output_sequence_length", required=True)
    input_tokens = _avg(data, "input_sequence_length", required=True)
    assert output_tokens is not None
    assert input_tokens is not None
    if output_tokens <= 0 or input_tokens <= 0:
        raise _refuse("result.input_sequence_length and output_sequence_length must be positive")
    count = _avg(data, "request_count")
    return BenchRun(
        tool="genai-perf",
        model_id=None,
        completed=None if count is None else int(count),
        mean_input_tokens=input_tokens,
        mean_output_tokens=output_tokens,
        max_concurrency=_genai_perf_concurrency(data),
        request_rate=None,
        request_throughput=_avg(data, "request_throughput"),
        mean_ttft_ms=_avg(data, "time_to_first_token", required=True),
        # genai-perf's inter-token latency is (request latency - TTFT) / (output tokens - 1),
        # per request: vLLM's TPOT.
        mean_tpot_ms=itl,
        mean_itl_ms=itl,
        output_throughput=_avg(data, "output_token_throughput"),
        mean_e2el_ms=_avg(data, "request_latency"),
    )


def parse_result(data: Any) -> BenchRun:
    """A file of one run. The tool is told by its keys: vLLM's flat `mean_tpot_ms`,
    genai-perf's metric objects (a guidellm report is `parse_report`'s)."""
    if not isinstance(data, dict):
        raise _refuse("the result file must be a JSON object as the tool writes it")
    if isinstance(data.get("benchmarks"), list):
        return choose(parse_report(data), None)
    if "mean_tpot_ms" in data or not isinstance(data.get("total_output_tokens", {}), dict):
        missing = [name for name in VLLM_REQUIRED if name not in data]
        if missing:
            raise _refuse(f"a vllm bench serve result lacks {', '.join(missing)}")
        return parse_vllm(data)
    if "inter_token_latency" in data or "time_to_first_token" in data:
        missing = [name for name in GENAI_PERF_REQUIRED if name not in data]
        if missing:
            raise _refuse(f"a genai-perf profile export lacks {', '.join(missing)}")
        return parse_genai_perf(data)
    raise _refuse(
        "not a result file kvplan reads: expected `vllm bench serve --save-result` JSON "
        "(mean_tpot_ms, total_output_tokens, ...) or genai-perf's profile_export_genai_perf.json "
        "(time_to_first_token, inter_token_latency, ...) or guidellm's benchmarks.json "
        "(benchmarks[].metrics)"
    )


# ---- guidellm: a report of several benchmarks -------------------------------------------------


@dataclass(frozen=True, slots=True)
class NotCompared:
    """A benchmark of a report that cannot be compared: why, and the field that says so."""

    strategy: str | None
    reason: str
    field: str


Report = tuple[BenchRun | NotCompared, ...]


def parse_report(data: Any) -> Report:
    """Every run the file holds: a guidellm report's benchmarks in its order, else the one run."""
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return (parse_result(data),)
    benchmarks = data["benchmarks"]
    if not benchmarks:
        raise _refuse("result.benchmarks is empty: the report holds no benchmark")
    return tuple(_guidellm_run(index, bench) for index, bench in enumerate(benchmarks))


def choose(report: Report, benchmark: int | None) -> BenchRun:
    """The run `benchmark` names (an index into the report), or the only one."""
    if benchmark is None and len(report) > 1:
        names = ", ".join(f"{i}: {item.strategy or '?'}" for i, item in enumerate(report))
        raise InvalidRequest(
            f"the report holds {len(report)} benchmarks ({names}); name one by its index",
            field="benchmark",
        )
    index = benchmark or 0
    if not 0 <= index < len(report):
        raise InvalidRequest(
            f"benchmark {index} is not in the file: it holds {len(report)}, from 0",
            field="benchmark",
        )
    item = report[index]
    if isinstance(item, NotCompared):
        raise InvalidRequest(item.reason, field=item.field)
    return item


def _guidellm_run(index: int, bench: Any) -> BenchRun | NotCompared:
    path = f"result.benchmarks[{index}]"
    if not isinstance(bench, dict):
        return NotCompared(None, f"{path} must be an object, got {bench!r}", path)
    try:
        strategy, concurrency, rate = _guidellm_strategy(bench, path)
    except InvalidRequest as exc:
        return NotCompared(None, exc.detail, exc.field or path)
    try:
        return _guidellm_metrics(bench, path, strategy, concurrency, rate)
    except InvalidRequest as exc:
        return NotCompared(strategy, exc.detail, exc.field or path)


def _guidellm_strategy(
    bench: dict[str, Any], path: str
) -> tuple[str | None, int | None, float | None]:
    """(guidellm's name for the strategy, the clients of a closed loop, the offered rate)."""
    holder = "config" if isinstance(bench.get("config"), dict) else "args"
    settings = bench.get(holder)
    strategy = settings.get("strategy") if isinstance(settings, dict) else None
    if not isinstance(strategy, dict):
        return None, None, None  # unnamed: counted by Little's law, as an open loop
    where = f"{path}.{holder}.strategy"
    kind = strategy.get("type_")
    if kind == "synchronous":
        return "synchronous", 1, None
    if kind == "concurrent":
        streams = _whole(strategy.get("streams"), f"{where}.streams", required=True)
        return f"concurrent@{streams}", streams, None
    if kind == "throughput":
        limit = _whole(strategy.get("max_concurrency"), f"{where}.max_concurrency")
        return f"throughput@{limit or 'unlimited'}", limit, None
    if kind in ("constant", "poisson"):
        rate = strategy.get("rate")
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise InvalidRequest(
                f"{where}.rate must be a positive number, got {rate!r}", field=f"{where}.rate"
            )
        return f"{kind}@{rate:.2f}", None, float(rate)
    return kind if isinstance(kind, str) else None, None, None


def _whole(value: Any, where: str, *, required: bool = False) -> int | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{where} must be a positive integer, got {value!r}", field=where)
    return value


def _summary(metrics: dict[str, Any], name: str, path: str) -> dict[str, Any]:
    """`metrics.<name>.successful`: the distribution over the requests that completed."""
    where = f"{path}.metrics.{name}.successful"
    metric = metrics.get(name)
    summary = metric.get("successful") if isinstance(metric, dict) else None
    if not isinstance(summary, dict):
        raise InvalidRequest(f"{where} is missing: a distribution summary is needed", field=where)
    return summary


def _mean(metrics: dict[str, Any], name: str, path: str, *, required: bool = True) -> float | None:
    """The successful requests' mean; guidellm writes 0 where no request measured it, so a
    figure kvplan compares must be above 0 (else, when not required, it is left out)."""
    if not required and name not in metrics:
        return None
    where = f"{path}.metrics.{name}.successful.mean"
    value = _summary(metrics, name, path).get("mean")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidRequest(f"{where} must be a finite number, got {value!r}", field=where)
    if value <= 0:
        if not required:
            return None
        raise InvalidRequest(
            f"{where} is {value!r}: no successful request measured it", field=where
        )
    return float(value)


def _required(metrics: dict[str, Any], name: str, path: str) -> float:
    value = _mean(metrics, name, path)
    assert value is not None  # required: refused above when absent or not above 0
    return value


def _completed(bench: dict[str, Any], metrics: dict[str, Any], path: str) -> int:
    """Successful requests: `request_totals.successful` (under `metrics` from 0.4, beside it
    before), else the count of the request latencies."""
    totals = metrics.get("request_totals", bench.get("request_totals"))
    count = totals.get("successful") if isinstance(totals, dict) else None
    if count is None:
        count = _summary(metrics, "request_latency", path).get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        where = f"{path}.metrics.request_totals.successful"
        raise InvalidRequest(f"{where}: no request completed ({count!r})", field=where)
    return count


def _guidellm_model(bench: dict[str, Any]) -> str | None:
    config, worker = bench.get("config"), bench.get("worker")
    backend = config.get("backend") if isinstance(config, dict) else None
    model = backend.get("model") if isinstance(backend, dict) else None
    if model is None and isinstance(worker, dict):
        model = worker.get("backend_model")
    return model if isinstance(model, str) else None


def _guidellm_metrics(
    bench: dict[str, Any],
    path: str,
    strategy: str | None,
    concurrency: int | None,
    rate: float | None,
) -> BenchRun:
    metrics = bench.get("metrics")
    if not isinstance(metrics, dict):
        raise InvalidRequest(f"{path}.metrics is missing", field=f"{path}.metrics")
    itl = _required(metrics, "inter_token_latency_ms", path)
    latency_s = _mean(metrics, "request_latency", path, required=False)
    return BenchRun(
        tool="guidellm",
        model_id=_guidellm_model(bench),
        completed=_completed(bench, metrics, path),
        mean_input_tokens=_required(metrics, "prompt_token_count", path),
        mean_output_tokens=_required(metrics, "output_token_count", path),
        max_concurrency=concurrency,
        request_rate=rate,
        request_throughput=_mean(metrics, "requests_per_second", path, required=False),
        mean_ttft_ms=_mean(metrics, "time_to_first_token_ms", path, required=False),
        mean_tpot_ms=itl,
        mean_itl_ms=itl,
        output_throughput=_mean(metrics, "output_tokens_per_second", path, required=False),
        mean_e2el_ms=None if latency_s is None else latency_s * 1e3,
        strategy=strategy,
    )
