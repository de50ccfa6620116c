"""Gauges in the Prometheus text exposition format (0.0.4) for answers other than /metrics.

KEDA's `metrics-api` scaler with `format: prometheus` parses such a body with Prometheus's own
text parser and reads the first sample that matches its `valueLocation`, a metric selector like
`kvplan_capacity_max_num_seqs{model="llama-3.1-8b"}` (github.com/kedacore/keda,
pkg/scalers/metrics_api_scaler.go, `getValueFromPrometheusResponse`): one typed gauge per figure,
one sample each. The text is written by prometheus_client, so names, label values and numbers are
escaped and formatted the way Prometheus's parsers expect.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Prometheus's text format as scrapers and KEDA read it (not OpenMetrics, not 1.0.0).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# How an answer in this format is documented in the OpenAPI spec.
OPENAPI_CONTENT = {
    "text/plain; version=0.0.4": {
        "schema": {"type": "string"},
        "example": "# HELP kvplan_capacity_max_num_seqs Whole sequences at max_model_len per "
        'replica.\n# TYPE kvplan_capacity_max_num_seqs gauge\nkvplan_capacity_max_num_seqs{model="'
        'llama-3.1-8b",gpu="h100-sxm-80gb",engine="vllm",kv_cache_dtype="fp8"} 109.0\n',
    }
}


@dataclass(frozen=True, slots=True)
class Gauge:
    """One gauge with one sample."""

    name: str
    help: str
    value: float
    labels: Mapping[str, str] = field(default_factory=dict)


class _Gauges(Collector):
    def __init__(self, gauges: Sequence[Gauge]) -> None:
        self._gauges = gauges

    def collect(self) -> Iterator[Metric]:
        for gauge in self._gauges:
            family = GaugeMetricFamily(gauge.name, gauge.help, labels=list(gauge.labels))
            family.add_metric(list(gauge.labels.values()), gauge.value)
            yield family


def exposition(gauges: Sequence[Gauge]) -> bytes:
    """The gauges as the body of a `text/plain; version=0.0.4` answer."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Gauges(gauges))
    return generate_latest(registry)
