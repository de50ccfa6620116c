"""A plan leaves out a calibration hook that can match nothing, and then answers as before.

The planner remembers each GPU's search per question only without a calibrated-pool hook
(service/sizing/planning/planner.py `_Remembered`); the planning use case passes the hook only
when the catalog holds a calibration for the question's model, or the question names one
(service/planning/calibrated.py `CalibrationHook.may_match`).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from service.catalog.seed import offline_snapshot
from service.catalog.snapshot import CalibrationEntry, CalibrationKey
from service.planning import calibrated, service
from service.planning.schemas import PlanRequestBody
from service.planning.service import PlanQuestion


def _entry(model: str) -> CalibrationEntry:
    key = CalibrationKey(
        model=model,
        gpu="h100-sxm-80gb",
        engine="vllm",
        engine_version="0.33.0",
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        kv_cache_dtype="auto",
        max_num_batched_tokens=None,
        enforce_eager=False,
        weight_format="bf16",
    )
    return CalibrationEntry(
        id=1,
        created_at=datetime(2026, 11, 27, tzinfo=UTC),
        key=key,
        fraction_name="gpu_memory_utilization",
        fraction=0.9,
        fraction_base_bytes=None,
        kv_pool_bytes=40 * 2**30,
        reproduces=True,
        replaced=(),
        measured={},
    )


def test_a_hook_matches_only_where_a_calibration_could() -> None:
    bare = offline_snapshot()
    arch = bare.models["llama-3.1-8b"].architecture
    assert not calibrated.CalibrationHook(bare, "llama-3.1-8b", arch).may_match
    entry = _entry("llama-3.1-8b")
    held = dataclasses.replace(bare, calibrations={entry.key: entry})
    assert calibrated.CalibrationHook(held, "llama-3.1-8b", arch).may_match
    # another model's calibration, or an inline model (no key), cannot match
    assert not calibrated.CalibrationHook(held, "llama-3.1-70b", arch).may_match
    assert not calibrated.CalibrationHook(held, None, arch).may_match
    # a question that names its calibration always asks the hook (a wrong key is a 422)
    assert calibrated.CalibrationHook(bare, None, arch, calibration_id=7).may_match


def test_a_plan_beside_another_models_calibration_answers_as_without_it() -> None:
    bare = offline_snapshot()
    entry = _entry("llama-3.1-8b")
    held = dataclasses.replace(bare, calibrations={entry.key: entry})
    body = PlanRequestBody.model_validate(
        {"model": "llama-3.1-70b", "max_model_len": 32768, "peak_concurrency": 64}
    )
    question = PlanQuestion.from_body(body)
    without = service.plan(question, bare)
    beside = service.plan(question, held)
    assert beside.model_dump() == without.model_dump()
    assert beside.recommendation is not None
    assert beside.recommendation.calibrated_from is None
