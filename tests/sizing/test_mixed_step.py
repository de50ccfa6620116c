"""A step that decodes and prefills in one pass (performance.mixed_cost), and the closed loop's
rule (performance.closed_loop_tpot_ms), on examples worked by hand.

Llama-3.1-8B (tests/sizing/models.py LLAMA_31_8B): 16,060,522,496 B of bf16 weights, so
8,030,261,248 parameters and 2 x 8,030,261,248 = 16,060,522,496 FLOP per token; one token's KV
32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B; attention per (query, cached token)
pair 32 layers x 2 x 32 heads x (128 + 128) = 524,288 FLOP. H100 SXM: 3.35 TB/s, 989 BF16
TFLOPS (catalog service/catalog/data/gpus.json). The efficiencies are chosen here, never the
fitted ones, so the arithmetic stays true when the fit moves.
"""

from __future__ import annotations

import pytest

from service.sizing import PrefillChunk, SpeedQuestion, mixed_step_ms
from service.sizing.errors import SizingError
from service.sizing.speed.performance import (
    PEAK_STEP_NOTE,
    Efficiency,
    closed_loop_tpot_ms,
    decode_cost,
    estimate_performance,
    mixed_cost,
    prefill_cost,
    step_time,
)

from .models import LLAMA_31_8B
from .test_performance import H100
from .test_speed import H100 as SPEED_H100

# Memory and compute add up (overlap 0, as FITTED has it), with a fixed 2 ms per pass.
ADDITIVE = Efficiency(
    bandwidth=1.0, compute=1.0, step_overhead_ms=2.0, allreduce_latency_us=0.0, overlap=0.0
)


def test_a_mixed_step_reads_the_weights_once_and_does_both_passes_flops() -> None:
    # 4 decodes at 1,000 tokens and one chunk of 512 prompt tokens after 2,048 already cached.
    cost = mixed_cost(LLAMA_31_8B, H100, 4, 1000, (PrefillChunk(computed=2048, tokens=512),))
    assert cost.tokens == 4 + 512 == 516
    assert cost.weight_bytes == 16_060_522_496  # once for the step, not once per pass
    # Cache: the decodes' 4 x 1,000 tokens and the chunk's 2,048-token prefix, each read once:
    # (4,000 + 2,048) x 131,072 B = 6,048 x 131,072 = 792,723,456 B.
    assert cost.kv_bytes == 6048 * 131_072 == 792_723_456
    # Pairs: 4 x 1,000 for the decodes; the chunk's 512 queries over the 2,048 before them and
    # causally among themselves: 2,560 x 2,561 / 2 - 2,048 x 2,049 / 2 = 3,278,080 - 2,098,176
    # = 1,179,904; total 1,183,904 x 524,288 = 620,706,660,352 FLOP of attention.
    assert cost.attention_flops == 1_183_904 * 524_288 == 620_706_660_352
    # Plus 516 tokens x 16,060,522,496 = 8,287,229,607,936: 8,907,936,268,288 FLOP.
    assert cost.flops == 8_287_229_607_936 + 620_706_660_352 == 8_907_936_268_288


def test_without_chunks_it_is_the_decode_step_without_decodes_the_prefill() -> None:
    decode = decode_cost(LLAMA_31_8B, H100, 64, 4096)
    assert mixed_cost(LLAMA_31_8B, H100, 64, 4096) == decode
    prefill = prefill_cost(LLAMA_31_8B, H100, 2048)
    assert mixed_cost(LLAMA_31_8B, H100, 0, 0, (PrefillChunk(0, 2048),)) == prefill


def test_one_pass_saves_the_second_weight_read_and_the_second_overhead() -> None:
    # Memory and compute add (overlap 0), so the one pass is the two passes less the prefill's
    # weights read again (16,060,522,496 B / 3.35e12 B/s = 4.7942 ms) and its 2 ms overhead.
    decode = step_time(decode_cost(LLAMA_31_8B, H100, 8, 2000), ADDITIVE)
    prefill = step_time(prefill_cost(LLAMA_31_8B, H100, 1024), ADDITIVE)
    mixed = step_time(mixed_cost(LLAMA_31_8B, H100, 8, 2000, (PrefillChunk(0, 1024),)), ADDITIVE)
    weights_ms = 16_060_522_496 / 3.35e12 * 1e3
    assert weights_ms == pytest.approx(4.7942, abs=1e-4)
    assert mixed.ms == pytest.approx(decode.ms + prefill.ms - 2.0 - weights_ms)


def test_the_closed_loop_adds_the_steady_prefill_share() -> None:
    # 64 running requests of 256 output tokens: 64 / 256 = 0.25 prompts per step, each at its
    # prefill less the shared 2 ms overhead: TPOT = decode + 0.25 x (prefill - 2).
    decode = step_time(decode_cost(LLAMA_31_8B, H100, 64, 1152), ADDITIVE)
    prefill = step_time(prefill_cost(LLAMA_31_8B, H100, 1024), ADDITIVE)
    tpot = closed_loop_tpot_ms(decode, prefill, 64 / 256)
    assert tpot == pytest.approx(decode.ms + 0.25 * (prefill.ms - 2.0))
    assert closed_loop_tpot_ms(decode, prefill, 0) == decode.ms
    with pytest.raises(SizingError):
        closed_loop_tpot_ms(decode, prefill, -1)


def test_the_peak_figure_says_it_is_the_decode_only_step() -> None:
    estimate = estimate_performance(
        LLAMA_31_8B, H100, batch=8, context_tokens=2048, prompt_tokens=512, peak_batch=16
    )
    assert f"  {PEAK_STEP_NOTE}" in estimate.steps
    assert "decode-only" in PEAK_STEP_NOTE


@pytest.mark.parametrize(
    ("decodes", "chunks", "field"),
    [
        (-1, (), "decodes"),
        (0, (), "tokens"),
        (1, (PrefillChunk(0, 0),), "chunk.tokens"),
        (1, (PrefillChunk(-5, 3),), "chunk.computed"),
    ],
)
def test_bad_mixed_input_names_the_field(
    decodes: int, chunks: tuple[PrefillChunk, ...], field: str
) -> None:
    with pytest.raises(SizingError) as caught:
        mixed_cost(LLAMA_31_8B, H100, decodes, 100, chunks)
    assert caught.value.field == field


def test_the_facade_times_a_mixed_step_on_a_gpu() -> None:
    gpu = SPEED_H100
    question = SpeedQuestion(tensor_parallel_size=1, batch=8, context_tokens=2000, prompt_tokens=1)
    ms = mixed_step_ms(LLAMA_31_8B, gpu, question, 8, (PrefillChunk(0, 1024),))
    decode_only = mixed_step_ms(LLAMA_31_8B, gpu, question, 8, ())
    assert isinstance(ms, float)
    assert isinstance(decode_only, float)
    assert ms > decode_only
