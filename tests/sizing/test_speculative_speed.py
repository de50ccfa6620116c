"""Speculative decoding's speed (issue 21 item 2): a verify step of 1 + k tokens per sequence,
acceptance_length tokens emitted per step (vLLM's "Mean acceptance length", vllm
vllm/v1/spec_decode/metrics.py, its log line: 1 + accepted / drafts).

Llama-3.1-8B on an H100 SXM, figures as in tests/sizing/test_mixed_step.py: 16,060,522,496 FLOP
per token, 131,072 B of KV per token, 524,288 FLOP per (query, cached token) pair.
"""

from __future__ import annotations

import pytest

from service.sizing import Speculation
from service.sizing.errors import SizingError
from service.sizing.speed.performance import (
    FITTED,
    estimate_performance,
    step_time,
    verify_cost,
)

from .models import LLAMA_31_8B
from .test_performance import H100


def test_a_verify_step_scores_one_plus_k_tokens_per_sequence() -> None:
    # 4 sequences at 1,000 tokens, k = 3: 4 x (1 + 3) = 16 tokens in the pass.
    cost = verify_cost(LLAMA_31_8B, H100, 4, 1000, Speculation(3, 2.5))
    assert cost.tokens == 16
    assert cost.weight_bytes == 16_060_522_496  # read once, as for one token
    # Each sequence's cache read once: 4 x 1,000 x 131,072 = 524,288,000 B.
    assert cost.kv_bytes == 524_288_000
    # Pairs per sequence: 1,004 x 1,005 / 2 - 1,000 x 1,001 / 2 = 504,510 - 500,500 = 4,010;
    # x 4 = 16,040 x 524,288 = 8,409,579,520; + 16 x 16,060,522,496 = 265,377,939,456 FLOP.
    assert cost.attention_flops == 16_040 * 524_288 == 8_409_579_520
    assert cost.flops == 265_377_939_456


def test_the_speed_is_per_emitted_token() -> None:
    plain = estimate_performance(LLAMA_31_8B, H100, batch=4, context_tokens=1000, prompt_tokens=1)
    spec = Speculation(3, 2.5)
    fast = estimate_performance(
        LLAMA_31_8B,
        H100,
        batch=4,
        context_tokens=1000,
        prompt_tokens=1,
        peak_batch=8,
        speculation=spec,
    )
    verify = step_time(verify_cost(LLAMA_31_8B, H100, 4, 1000, spec), FITTED).ms
    verify_8 = step_time(verify_cost(LLAMA_31_8B, H100, 8, 1000, spec), FITTED).ms
    # TPOT = verify step / 2.5; 4 sequences x 2.5 tokens per step.
    assert fast.decode_ms_per_token == pytest.approx(verify / 2.5)
    assert fast.decode_ms_per_token_at_peak == pytest.approx(verify_8 / 2.5)
    assert fast.output_tokens_per_second == pytest.approx(4 * 2.5 * 1e3 / verify)
    # Memory-bound at 4 sequences: 16 tokens cost little more than 4, so it is faster.
    assert fast.decode_ms_per_token < plain.decode_ms_per_token
    assert fast.prefill_ms == plain.prefill_ms
    assert any(line.startswith("  speculative: 4 sequences x (1 + 3)") for line in fast.steps)
    assert "decode step at 8 sequences (peak):" in fast.steps


@pytest.mark.parametrize("length", [0.5, 4.5, float("nan")])
def test_an_acceptance_length_beyond_one_plus_k_is_refused(length: float) -> None:
    with pytest.raises(SizingError) as caught:
        Speculation(3, length)
    assert caught.value.field == "acceptance_length"
