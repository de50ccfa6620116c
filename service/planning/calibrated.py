"""The hook for calibrated figures: which stored calibration a capacity question matches.

A calibration (POST /v1/calibrations, `service.engine_logs`) is an engine's own measurement of
the memory outside its KV cache for one key (`catalog.snapshot.CalibrationKey`). A question
with the same key takes the measured pool, moved to its own fraction
(`CalibrationEntry.pool_for`), as the sizing core's given pool (`kv_pool_bytes`), so blocks,
tokens and max_num_seqs follow by the engine's arithmetic as for any given pool.

The key is built the same way for a question and for the log it is matched against: the model
as the question names it (a catalog slug, or the hash of a config.json), the GPU (a catalog
slug, the catalog GPU its bytes are, or `<bytes>B`), the weights' format (`weight_format_of`:
the question's own, else the model's), and the rest as the capacity answer resolves it
(release, layout, dtype, the flags' defaults).

`calibration_id` is the hook for a caller that names its calibration (a deployment profile
pointing at one: `CapacityQuestion.calibration_id`): that calibration is used, and a key that
differs from the question's is a 422 naming the first field that differs.

Plans use the same hook: the planner calls it for every GPU and tensor-parallel candidate
(`sizing.planning.planner.CalibratedPool`), so a calibrated candidate is ranked by its measured
pool.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..catalog.snapshot import (
    CalibrationEntry,
    CalibrationKey,
    CatalogSnapshot,
    SpeedCalibrationEntry,
    config_model_key,
)
from ..kit.errors import InvalidRequest
from ..sizing import (
    Capacity,
    Gpu,
    ModelArchitecture,
    PerformanceEstimate,
    WeightFormat,
    parse_weight_format,
)
from .schemas import CalibratedFrom, HfConfigModel, ModelRef, SpeedCalibratedFrom


def model_key(ref: ModelRef, label: str) -> str | None:
    """A catalog model by its slug, a config.json by its hash; an inline spec has no key."""
    if isinstance(ref, str):
        return label
    if isinstance(ref, HfConfigModel):
        return config_model_key(ref.hf_config)
    return None


def gpu_key(gpu: Gpu, catalog: CatalogSnapshot) -> str:
    """A catalog GPU by its slug; one given by bytes, by the catalog GPU whose total those
    bytes are, else as `<bytes>B`."""
    entry = catalog.gpus.get(gpu.slug)
    if entry is not None and entry.gpu.memory_bytes == gpu.memory_bytes:
        return gpu.slug
    known = catalog.gpu_by_memory(gpu.memory_bytes)
    return known.slug if known is not None else f"{gpu.memory_bytes}B"


def weight_format_of(asked: str | None, arch: ModelArchitecture) -> WeightFormat:
    """The format the weights are stored in: the question's `weight_format`, else the model's
    own (the catalog's, or what its config.json's quantization_config declares), by one name
    (`fp8_e4m3` and `fp8` are one format)."""
    return parse_weight_format(asked) if asked is not None else arch.weight_format


def key_of(model: str, gpu: str, capacity: Capacity, weight_format: str) -> CalibrationKey:
    return CalibrationKey.of(
        model,
        gpu,
        engine=capacity.engine.value,
        engine_version=capacity.engine_version,
        tensor_parallel_size=capacity.parallel.tensor_parallel_size,
        pipeline_parallel_size=capacity.parallel.pipeline_parallel_size,
        kv_cache_dtype=capacity.kv_cache_dtype,
        weight_format=weight_format,
        engine_settings=capacity.engine_settings,
    )


def matching(
    key: CalibrationKey | None, catalog: CatalogSnapshot, calibration_id: int | None = None
) -> CalibrationEntry | None:
    """The calibration for `key`, or the one named (404 unknown, 422 for another key)."""
    if calibration_id is None:
        return None if key is None else catalog.calibrations.get(key)
    entry = catalog.calibration(calibration_id)
    if key != entry.key:
        differs = next(
            (
                f"{field.name} {getattr(entry.key, field.name)!r}, the question "
                f"{getattr(key, field.name)!r}"
                for field in dataclasses.fields(CalibrationKey)
                if key is None or getattr(key, field.name) != getattr(entry.key, field.name)
            ),
            "an inline model, which no calibration measured",
        )
        raise InvalidRequest(
            f"calibration {entry.id} measured another deployment: {differs}",
            field="calibration_id",
        )
    return entry


@dataclass
class CalibrationHook:
    """The calibrations one question may use: called with a candidate sized as usual (the
    planner's `CalibratedPool`), it answers the pool of the calibration with that key, moved
    to the candidate's fraction, and remembers which it used for the answer to say so.

    `arch` and `weight_format` (the question's own, or None) give the key's weight format,
    read only when there is a calibration to match (an unknown format is then a 422 naming
    weight_format, as the weights' arithmetic answers it)."""

    catalog: CatalogSnapshot
    model: str | None
    arch: ModelArchitecture
    weight_format: str | None = None
    calibration_id: int | None = None
    applied: dict[tuple[str, int], tuple[CalibrationEntry, float | None]] = field(
        default_factory=dict
    )
    applied_speed: dict[tuple[str, int], SpeedCalibrationEntry] = field(default_factory=dict)

    @property
    def may_match(self) -> bool:
        """Whether any candidate could take a calibration: one is named, or the catalog holds
        one for this model. When not, every call answers None, and a plan leaves the hook out
        (the planner then remembers its search across plans)."""
        if self.calibration_id is not None:
            return True
        return self.model is not None and any(
            key.model == self.model for key in self.catalog.calibrations
        )

    def __call__(self, capacity: Capacity, gpu: Gpu) -> int | None:
        if self.calibration_id is None and (self.model is None or not self.catalog.calibrations):
            return None  # nothing to match: a plan asks this of every candidate
        key = None
        if self.model is not None:
            weights = weight_format_of(self.weight_format, self.arch)
            key = key_of(self.model, gpu_key(gpu, self.catalog), capacity, weights)
        entry = matching(key, self.catalog, self.calibration_id)
        if entry is None:
            return None
        fraction = capacity.budget.fraction
        self.applied[gpu.slug, capacity.parallel.tensor_parallel_size] = (entry, fraction)
        return entry.pool_for(fraction)

    @property
    def may_match_speed(self) -> bool:
        """Whether any candidate could take a speed calibration: the catalog holds one for
        this model (a plan leaves the speed hook out otherwise)."""
        return self.model is not None and any(
            key.model == self.model for key in self.catalog.speed_calibrations
        )

    def speed_scale(self, capacity: Capacity, gpu: Gpu) -> float | None:
        """The stored speed calibration's step-time scale for this candidate (the planner's
        `CalibratedSpeed`), remembered for the answer to say so; None when none matches."""
        entry = speed_calibration(
            self.catalog,
            model=self.model,
            arch=self.arch,
            weight_format=self.weight_format,
            capacity=capacity,
            gpu=gpu,
        )
        if entry is None:
            return None
        self.applied_speed[gpu.slug, capacity.parallel.tensor_parallel_size] = entry
        return entry.step_time_scale

    def speed_calibration_for(self, capacity: Capacity, gpu: Gpu) -> SpeedCalibrationEntry | None:
        """The speed calibration the candidate on `gpu` was checked with, if any."""
        return self.applied_speed.get((gpu.slug, capacity.parallel.tensor_parallel_size))

    def calibrated_from(self, capacity: Capacity, gpu: Gpu) -> CalibratedFrom | None:
        """What the answer for `capacity` on `gpu` says it used, if it used a calibration."""
        found = self.applied.get((gpu.slug, capacity.parallel.tensor_parallel_size))
        if found is None:
            return None
        entry, fraction = found
        return CalibratedFrom(
            calibration_id=entry.id,
            created_at=entry.created_at,
            replaced=list(entry.replaced),
            measured=dict(entry.measured),
            fraction_name=entry.fraction_name,
            calibrated_fraction=entry.fraction,
            fraction=fraction,
            kv_pool_bytes=capacity.kv_pool_bytes,
            reproduces=entry.reproduces,
            weight_format=entry.key.weight_format,
        )


# ---- speed: a benchmark's measured decode step (POST /v1/speed-calibrations) ------------------


def speed_calibration(
    catalog: CatalogSnapshot,
    *,
    model: str | None,
    arch: ModelArchitecture,
    weight_format: str | None,
    capacity: Capacity,
    gpu: Gpu,
) -> SpeedCalibrationEntry | None:
    """The stored speed calibration with this answer's key (the memory calibrations' key)."""
    if model is None or not catalog.speed_calibrations:
        return None
    weights = weight_format_of(weight_format, arch)
    key = key_of(model, gpu_key(gpu, catalog), capacity, weights)
    return catalog.speed_calibrations.get(key)


def scaled_speed(estimate: PerformanceEstimate, scale: float) -> PerformanceEstimate:
    """kvplan's estimate with the measured factor on its decode step: TPOT (and at peak) times
    `scale`, output tokens/s over it. The prefill (and TTFT) stay kvplan's: a run's TPOT says
    nothing of its prefill, whose measured TTFT includes the queue."""
    peak = estimate.decode_ms_per_token_at_peak
    return dataclasses.replace(
        estimate,
        decode_ms_per_token=estimate.decode_ms_per_token * scale,
        decode_ms_per_token_at_peak=None if peak is None else peak * scale,
        output_tokens_per_second=estimate.output_tokens_per_second / scale,
        output_tokens_per_second_per_user=estimate.output_tokens_per_second_per_user / scale,
    )


def speed_calibrated_from(entry: SpeedCalibrationEntry) -> SpeedCalibratedFrom:
    return SpeedCalibratedFrom(
        calibration_id=entry.id,
        created_at=entry.created_at,
        tool=entry.tool,
        result_sha256=entry.result_sha256,
        batch=entry.batch,
        step_time_scale=entry.step_time_scale,
    )
