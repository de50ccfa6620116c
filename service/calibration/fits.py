"""The fitted constants of service/sizing/engines/calibration.py, fitted again from their logs.

Each fit names the logs it uses (all marked "fit" in cases.json) and the ones it leaves out,
with the reason. `make bench` prints the shipped value beside the refitted one, and
tests/calibration checks they agree, so a constant cannot drift from its logs unnoticed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..sizing import GiB, forward_bytes_per_token
from ..sizing import engines_calibration as cal
from . import Models, Row, case_model

MiB: Final = 1 << 20

# The multimodal encoder's profile (vLLM profiles it with dummy images before the forward pass)
# adds to the peak; it is worked from vLLM's code (sizing engines/encoder.py), not fitted, and
# this log stays out of the overhead's fit so the constant is fitted on text models alone.
MULTIMODAL: Final = "planner-llama-4-scout-tp4"
PIPELINE: Final = "planner-llama-3.1-8b-pp2"
TP2: Final = ("planner-mixtral-8x7b-tp2", "planner-gpt-oss-20b-tp2")
TP4: Final = "planner-llama-4-scout-tp4"


@dataclass(frozen=True)
class Fit:
    constant: str
    shipped: float
    refitted: float
    unit: str
    logs: tuple[str, ...]
    left_out: str

    @property
    def agrees(self) -> bool:
        """Shipped as the refit rounds it (to 1% or the unit's last digit)."""
        return abs(self.shipped - self.refitted) <= max(0.01 * abs(self.refitted), 0.005)


def _fitted(rows: Sequence[Row]) -> list[Row]:
    return [
        row
        for row in rows
        if row.item.role == "fit"
        and row.item.complete
        and row.predicted is not None
        and row.item.id.startswith("planner-")
    ]


def _sampler_bound(row: Row, models: Models) -> bool:
    """The prediction's peak is the sampler's side (the forward pass is smaller)."""
    arch = case_model(row.item.case, models)
    assert row.capacity is not None
    assert not isinstance(arch, str)
    settings = row.capacity.engine_settings
    tokens = int(str(settings["max_num_batched_tokens"]))
    tp = row.capacity.facts.parallel.tensor_parallel_size
    forward = (forward_bytes_per_token(arch, tp) or 0) * tokens * cal.VLLM_V1_FORWARD_FACTOR
    assert row.predicted is not None
    assert row.predicted.activation is not None
    return row.predicted.activation - cal.VLLM_PROFILE_OVERHEAD > forward


def fit_overhead(rows: Sequence[Row], models: Models) -> Fit:
    """VLLM_PROFILE_OVERHEAD: the mean of logged minus predicted peak, overhead left out."""
    used = [
        row for row in _fitted(rows) if row.item.id != MULTIMODAL and _sampler_bound(row, models)
    ]
    residuals = []
    for row in used:
        assert row.predicted is not None
        assert row.predicted.activation is not None
        assert row.logged.activation is not None
        without = row.predicted.activation - cal.VLLM_PROFILE_OVERHEAD
        residuals.append(row.logged.activation - without)
    return Fit(
        "VLLM_PROFILE_OVERHEAD",
        cal.VLLM_PROFILE_OVERHEAD / MiB,
        round(statistics.mean(residuals) / MiB),
        "MiB",
        tuple(row.item.id for row in used),
        f"{MULTIMODAL} (multimodal profile); logs whose predicted peak is the forward pass",
    )


def fit_forward_factor(rows: Sequence[Row], models: Models) -> Fit:
    """VLLM_V1_FORWARD_FACTOR: the pipeline's first stage, whose peak is a forward pass."""
    row = next(row for row in rows if row.item.id == PIPELINE)
    arch = case_model(row.item.case, models)
    assert not isinstance(arch, str)
    assert row.capacity is not None
    tokens = int(str(row.capacity.engine_settings["max_num_batched_tokens"]))
    eager = (forward_bytes_per_token(arch, 1) or 0) * tokens
    first_stage = int(row.item.parsed.by_rank("activation_peak_bytes")["PP0"])
    return Fit(
        "VLLM_V1_FORWARD_FACTOR",
        cal.VLLM_V1_FORWARD_FACTOR,
        round((first_stage - cal.VLLM_PROFILE_OVERHEAD) / eager, 2),
        "x",
        (PIPELINE,),
        "every other log: its peak is the sampler's",
    )


def _non_torch(rows: Sequence[Row], case_id: str) -> int:
    row = next(row for row in rows if row.item.id == case_id)
    assert row.logged.non_torch is not None
    return row.logged.non_torch


def fit_non_torch(rows: Sequence[Row]) -> list[Fit]:
    """The V1 non-torch growth with a pipeline and with tensor parallelism."""
    tp2 = statistics.mean(_non_torch(rows, case_id) for case_id in TP2)
    per_rank = (_non_torch(rows, TP4) - tp2) / 2
    return [
        Fit(
            "VLLM_NON_TORCH_PIPELINE",
            cal.VLLM_NON_TORCH_PIPELINE / GiB,
            round(_non_torch(rows, PIPELINE) / GiB, 2),
            "GiB",
            (PIPELINE,),
            "",
        ),
        Fit(
            "VLLM_NON_TORCH_TP2", cal.VLLM_NON_TORCH_TP2 / GiB, round(tp2 / GiB, 2), "GiB", TP2, ""
        ),
        Fit(
            "VLLM_NON_TORCH_PER_TP_RANK",
            cal.VLLM_NON_TORCH_PER_TP_RANK / GiB,
            round(per_rank / GiB, 2),
            "GiB",
            (TP4, *TP2),
            "",
        ),
    ]


def fit_cudagraph(rows: Sequence[Row]) -> Fit:
    """VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER: the median of logged estimate / graph-layers."""
    per: list[float] = []
    used: list[str] = []
    for row in _fitted(rows):
        predicted = row.predicted
        assert predicted is not None
        if row.logged.cudagraph_estimate is None or not predicted.cudagraph_estimate:
            continue
        graph_layers = predicted.cudagraph_estimate / cal.VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER
        per.append(row.logged.cudagraph_estimate / graph_layers)
        used.append(row.item.id)
    return Fit(
        "VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER",
        cal.VLLM_CUDAGRAPH_BYTES_PER_GRAPH_LAYER / MiB,
        round(statistics.median(per) / MiB, 4),
        "MiB",
        tuple(used),
        "",
    )


FITS: Final[tuple[Callable[[Sequence[Row], Models], list[Fit]], ...]] = (
    lambda rows, models: [fit_overhead(rows, models)],
    lambda rows, models: [fit_forward_factor(rows, models)],
    lambda rows, _: fit_non_torch(rows),
    lambda rows, _: [fit_cudagraph(rows)],
)


def refit(rows: Sequence[Row], models: Models) -> list[Fit]:
    return [fit for make in FITS for fit in make(rows, models)]
