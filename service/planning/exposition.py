"""A capacity answer as Prometheus gauges: `format=prometheus` of GET /v1/capacity and of a
deployment profile's capacity (`service.kit.exposition` writes the text).

Each figure of the answer that `field=` can name is one gauge, `kvplan_capacity_<field>`, so the
name says which JSON field it mirrors; a figure with no value (no `peak_concurrency` asked, so no
replica count) is left out rather than sent as 0. An answer that used a calibration adds
`kvplan_capacity_calibrated{..., calibration_id}` 1 (an info gauge), last.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from ..kit.exposition import Gauge, exposition
from .schemas import CapacityAnswer, CapacityField

PREFIX = "kvplan_capacity_"
FIGURES: tuple[str, ...] = get_args(CapacityField)
# Which deployment the figures describe: answer fields, copied by name.
LABELS = ("model", "gpu", "engine", "kv_cache_dtype")
# Present (1) only when the figures come from an engine's own log: which calibration.
CALIBRATED = "kvplan_capacity_calibrated"
CALIBRATED_HELP = (
    "1 when the figures use a calibration (the engine's own measured KV pool, "
    "calibrated_from in the JSON answer); its id is the calibration_id label."
)


def _help(figure: str) -> str:
    return CapacityAnswer.model_fields[figure].description or figure.replace("_", " ")


def capacity_exposition(
    answer: Mapping[str, Any], labels: Mapping[str, str] | None = None
) -> bytes:
    """One gauge per figure of a capacity answer (its JSON form); `labels` come first."""
    names = {**(labels or {}), **{name: str(answer[name]) for name in LABELS}}
    gauges = [
        Gauge(PREFIX + figure, _help(figure), float(answer[figure]), names)
        for figure in FIGURES
        if answer.get(figure) is not None
    ]
    used = answer.get("calibrated_from")
    if used:  # last, so a reader of the first matching sample (KEDA) is not moved
        calibration = {**names, "calibration_id": str(used["calibration_id"])}
        gauges.append(Gauge(CALIBRATED, CALIBRATED_HELP, 1.0, calibration))
    return exposition(gauges)
