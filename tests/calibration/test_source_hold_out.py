"""The speed model held out by source (issue 22): the closed-loop rule, the AMD efficiencies
and the error band of each class are re-derived from the data file, none is typed by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.calibration.performance import (
    catalog_gpus,
    catalog_models,
    load_document,
    load_points,
    run_source_hold_out,
)
from service.sizing.speed.performance import (
    ERROR_BAND_ANY_CLASS,
    ERROR_BAND_BY_CLASS,
    FITTED,
    FITTED_AMD,
    Efficiency,
    GpuPerformance,
    error_band_for,
    fitted_efficiency,
    is_amd,
    layer_kind,
)
from service.sizing.speed.performance_fit import (
    FIT_SOURCES,
    Metric,
    SourceHoldOut,
    percentile,
    point_costs,
    predict,
    vendor_efficiency,
)

POINTS = load_points()


@pytest.fixture(scope="module")
def held_out() -> tuple[SourceHoldOut, ...]:
    return run_source_hold_out()


def test_sources_outside_the_fit_cover_both_vendors_and_every_kind_of_layer() -> None:
    models = catalog_models()
    outside = [p for p in POINTS if p.source_id not in FIT_SOURCES]
    assert len({p.source_id for p in outside}) >= 5
    assert {p.vendor for p in outside} == {"NVIDIA", "AMD"}
    assert {layer_kind(models[p.model]) for p in outside} == {"dense", "MoE", "MoE+MLA"}


def test_a_closed_loop_tpot_is_a_decode_step_plus_its_share_of_the_prefills() -> None:
    # gpt-fast's Llama-2-7B bf16 point on one A100 read as a closed loop at concurrency 1
    # (tests/calibration/test_performance_fit.py works its two passes with bandwidth 1,
    # compute 1, no overhead, overlap 1): decode step at context 105 = 6.63653 ms, prefill of
    # the 5-token prompt = 6.60953 ms. One request prefills once per 200 output tokens:
    # TPOT = 6.63653 + 1 / 200 x 6.60953 = 6.63653 + 0.03305 = 6.66958 ms.
    static = next(p for p in POINTS if p.id == "gpt-fast-a100-330w-llama2-7b-bfloat16-tp1-bs1")
    point = replace(static, metric=Metric.TPOT_MS, measured=6.67)
    costs = point_costs(point, catalog_models()[point.model], catalog_gpus()[point.gpu])
    ideal = Efficiency(1.0, 1.0, step_overhead_ms=0.0, allreduce_latency_us=0.0, overlap=1.0)
    assert predict(costs, ideal) == pytest.approx(6.66958, abs=1e-4)
    # Closed-loop throughput per GPU: one request = prefill + 199 x TPOT
    # = 6.60953 + 199 x 6.66958 = 1333.86 ms for 200 tokens: 149.94 tokens/s.
    rate = replace(point, metric=Metric.CLOSED_LOOP_OUTPUT_TOKENS_PER_SECOND_PER_GPU)
    costs = point_costs(rate, catalog_models()[rate.model], catalog_gpus()[rate.gpu])
    assert predict(costs, ideal) == pytest.approx(149.94, abs=0.01)


def test_expert_parallel_points_carry_the_layout_their_source_states() -> None:
    # InferenceX #870's B200 run: 'TP=8 EP=8'; SGLang #31044's 'TP x EP' column: 2x2 and 4x4
    # (each point's quote); InferenceX #870's H200 run: 'TP=8, EP=1'. Every other point is TP.
    by_source: dict[str, set[tuple[int, int]]] = {}
    for p in POINTS:
        by_source.setdefault(p.source_id, set()).add(
            (p.tensor_parallel_size, p.expert_parallel_size)
        )
    assert by_source.pop("inferencex-870-b200-dsr1-fp4") == {(8, 8)}
    assert by_source.pop("sglang-31044-mi300x-minimax-m2.7") == {(2, 2), (4, 4)}
    assert all(ep == 1 for layouts in by_source.values() for _, ep in layouts)
    minimax = [p for p in POINTS if p.source_id == "sglang-31044-mi300x-minimax-m2.7"]
    for p in minimax:
        quote = json_quote(p.id)
        tp = p.tensor_parallel_size
        assert f"| {tp}x{tp} |" in quote


def json_quote(point_id: str) -> str:
    return next(p["quote"] for p in load_document()["points"] if p["id"] == point_id)


def test_refitting_the_amd_points_reproduces_fitted_amd() -> None:
    models, gpus = catalog_models(), catalog_gpus()
    amd = [point_costs(p, models[p.model], gpus[p.gpu]) for p in POINTS if p.vendor == "AMD"]
    assert len(amd) == 17
    assert vendor_efficiency(amd, FITTED) == FITTED_AMD


def test_each_class_band_is_the_80th_percentile_of_its_held_out_errors(
    held_out: tuple[SourceHoldOut, ...],
) -> None:
    models = catalog_models()
    by_class: dict[str, list[float]] = {}
    for e in held_out:
        key = f"{e.point.vendor} {layer_kind(models[e.point.model])}"
        by_class.setdefault(key, []).append(abs(e.error))
    bands = {k: round(percentile(v, 0.8), 2) for k, v in by_class.items()}
    assert bands == ERROR_BAND_BY_CLASS
    assert round(percentile([abs(e.error) for e in held_out], 0.8), 2) == ERROR_BAND_ANY_CLASS


def test_no_point_is_predicted_by_a_fit_on_its_own_source(
    held_out: tuple[SourceHoldOut, ...],
) -> None:
    # Holding a source out changes the fit: two sources of one vendor are predicted by
    # different efficiencies.
    assert len(held_out) == len(POINTS)
    by_source = {e.point.source_id: e.efficiency for e in held_out if e.point.vendor == "NVIDIA"}
    assert len(set(by_source.values())) == len(by_source)


def test_an_answer_takes_its_vendor_efficiencies_and_its_class_band() -> None:
    models = catalog_models()
    mi300x = catalog_gpus()["mi300x"]
    h100 = catalog_gpus()["h100-sxm-80gb"]
    assert is_amd(mi300x.name)
    assert not is_amd(h100.name)
    assert fitted_efficiency(mi300x) == FITTED_AMD
    assert fitted_efficiency(h100) == FITTED
    assert error_band_for(models["llama-3.1-8b"], h100) == ERROR_BAND_BY_CLASS["NVIDIA dense"]
    assert error_band_for(models["gpt-oss-120b"], mi300x) == ERROR_BAND_BY_CLASS["AMD MoE"]
    # No AMD point has MLA: such an answer gets the band of every point.
    assert error_band_for(models["deepseek-r1"], mi300x) == ERROR_BAND_ANY_CLASS
    inline = GpuPerformance(memory_bandwidth_tb_s=5.3, dense_bf16_tflops=1307.4, name="")
    assert fitted_efficiency(inline) == FITTED
