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
    """The tool is told by its keys: vLLM's flat `mean_tpot_ms`, genai-perf's metric objects."""
    if not isinstance(data, dict):
        raise _refuse("the result file must be a JSON object as the tool writes it")
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
        "(time_to_first_token, inter_token_latency, ...)"
    )
