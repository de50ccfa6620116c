"""How KEDA's `metrics-api` scaler reads one number out of an answer, with real parsers.

KEDA's rule (github.com/kedacore/keda, pkg/scalers/metrics_api_scaler.go, `GetValueFromResponse`):
- `format: json`: `gjson.GetBytes(body, valueLocation)`; a JSON number is the value, a string
  must parse as a Kubernetes quantity, anything else (null, object, missing) is an error.
- `format: prometheus`: `valueLocation` is a metric selector (`ParseMetricSelector`); the body
  is parsed with Prometheus's text parser; the first sample of that family whose labels equal
  every matcher's value is the value (untyped, counter or gauge); none is an error.
Any status but 200 is an error before the body is read (`getMetricValueFromURL`).

Here GJSON is the `gjson` package (gjson-py), the selector is parsed by `promql-parser`
(Prometheus's grammar) and the exposition by prometheus_client's text parser.
"""

from __future__ import annotations

import json

import gjson
import promql_parser
from prometheus_client.parser import text_string_to_metric_families


class KedaError(Exception):
    """What KEDA would log before falling back (`fallback.replicas`)."""


def json_value(body: bytes, value_location: str) -> float:
    found = gjson.get(json.loads(body), value_location, quiet=True)
    # bool is an int in Python, but GJSON types true/false apart from numbers
    if isinstance(found, bool) or not isinstance(found, int | float):
        raise KedaError(f"valueLocation {value_location!r} must point to a number, got {found!r}")
    return float(found)


def prometheus_value(body: bytes, value_location: str) -> float:
    selector = promql_parser.parse(value_location)
    if not isinstance(selector, promql_parser.VectorSelector):
        raise KedaError(f"valueLocation {value_location!r} is not a metric selector")
    wanted = {m.name: m.value for m in selector.matchers.matchers}
    for family in text_string_to_metric_families(body.decode()):
        if family.name != selector.name:
            continue
        for sample in family.samples:
            if all(sample.labels.get(name) == value for name, value in wanted.items()):
                return float(sample.value)
    raise KedaError(f"value {value_location} not found")


def metrics_api_value(status: int, body: bytes, value_location: str, fmt: str) -> float:
    if status != 200:
        raise KedaError(f"api returned {status}")
    if fmt == "json":
        return json_value(body, value_location)
    if fmt == "prometheus":
        return prometheus_value(body, value_location)
    raise KedaError(f"format {fmt} not supported here")
