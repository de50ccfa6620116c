"""The latency-target check (replica.pace) at a speed calibration's step-time scale: the decode
step times the scale, as a calibrated capacity answer's TPOT is (planning/calibrated.py
scaled_speed), the prefill kvplan's own.

Llama-3.1-8B at 8,192 tokens on an H100 SXM (3.35 TB/s, 989 BF16 TFLOPS), shipped fit
(bandwidth 0.84, compute 0.787, overlap 0, 32 layers x 80.25 us): a decode step of B sequences
reads 16,060,522,496 B of weights + B x 1,073,741,824 B of KV and does B x 20,355,489,792 FLOPs
(tests/planning/test_capacity_speed.py), 8.275 + 0.4077 B ms (tests/planning/
test_plan_latency_targets.py).
"""

from __future__ import annotations

import pytest

from service.sizing.errors import SizingError
from service.sizing.speed.performance import FITTED
from service.sizing.speed.replica import LatencyTargets, Paced, SpeedQuestion, pace
from tests.planning.test_capacity_speed import (
    FLOPS_TOKEN_8B,
    KV_SEQUENCE_8B,
    WEIGHTS_8B,
    overhead_ms,
)

from .models import LLAMA_31_8B
from .test_speed import H100


def step_ms(batch: int) -> float:
    memory = (WEIGHTS_8B + batch * KV_SEQUENCE_8B) / (3.35e12 * FITTED.bandwidth) * 1e3
    compute = batch * FLOPS_TOKEN_8B / (989e12 * FITTED.compute) * 1e3
    return max(memory, compute) + (1 - FITTED.overlap) * min(memory, compute) + overhead_ms(32)


def test_a_calibrated_step_holds_fewer_sequences_to_the_same_target() -> None:
    question = SpeedQuestion(1, batch=54, context_tokens=8192, prompt_tokens=1)
    targets = LatencyTargets(max_tpot_ms=50)
    # kvplan's own step at 54: 8.275 + 0.4077 x 54 = 30.3 ms, within 50 ms.
    assert step_ms(54) == pytest.approx(8.275 + 0.4077 * 54, abs=0.01)
    assert pace(LLAMA_31_8B, H100, question, targets) == Paced(54, None)
    # Measured 2x slower: 2 x (8.275 + 0.4077 B) <= 50 for B <= (25 - 8.275) / 0.4077 = 41.02,
    # so 41 sequences (2 x 24.99 = 49.98 ms), and 42 miss (2 x 25.40 = 50.80 ms).
    assert 2 * step_ms(41) <= 50 < 2 * step_ms(42)
    slowed = pace(LLAMA_31_8B, H100, question, targets, speed_scale=2.0)
    assert isinstance(slowed, Paced)
    assert slowed.batch == 41
    assert slowed.miss is not None
    assert slowed.miss.reason == (
        f"decode at 54 sequences takes {2 * step_ms(54):.1f} ms per token, over the 50 ms "
        "max_tpot_ms target"
    )


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan")])
def test_a_scale_must_be_positive(scale: float) -> None:
    question = SpeedQuestion(1, batch=4, context_tokens=8192, prompt_tokens=1)
    with pytest.raises(SizingError) as caught:
        pace(LLAMA_31_8B, H100, question, LatencyTargets(max_tpot_ms=50), speed_scale=scale)
    assert caught.value.field == "speed_scale"
