"""Plans for a rate simulate candidates by branch and bound on a lower bound (issue 23 item 2).

The whole-catalog plan of bench/rate_plan.py: 20 requests/s of 2,000 input and 300 output
tokens, p99 TTFT 2 s and TPOT 50 ms, Llama-3.1-8B-Instruct at max_model_len 8192.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from bench.rate_plan import BODY
from service.catalog.seed import offline_snapshot
from service.planning import disaggregated, rate
from service.planning.schemas import PlanAnswer, PlanRequestBody
from service.planning.service import PlanQuestion, plan


def _plan(**change: object) -> PlanAnswer:
    question = PlanQuestion.from_body(PlanRequestBody.model_validate({**BODY, **change}))
    return plan(question, offline_snapshot())


def test_one_gb200_the_analytic_pass_sizes_at_two_is_shown() -> None:
    # The analytic pass (UTILISATION 0.8) gives GB200 two replicas ($9.08 an hour), beyond the
    # four cheapest by that pass; its lower bound (utilisation 1) is one replica, $4.54, below
    # the fourth cheapest simulated, so it is simulated, and one replica meets the targets.
    answer = _plan()
    options = [answer.recommendation, *answer.alternatives]
    gb200 = [o for o in options if o is not None and o.gpu == "gb200" and o.kind == "aggregated"]
    assert len(gb200) == 1
    assert gb200[0].replicas == 1
    # the catalog's GB200 price, $4.54 an hour, over 20 x 300 x 3,600 / 10^6 = 21.6 million
    # output tokens an hour: 4.54 / 21.6 = 0.2102
    assert gb200[0].cost_per_hour_usd == pytest.approx(4.54)
    assert gb200[0].cost_per_million_output_tokens_usd == pytest.approx(0.2102, abs=1e-4)
    assert gb200[0].ttft_ms.p99 is not None
    assert gb200[0].ttft_ms.p99 <= 2000
    assert gb200[0].tpot_ms.p99 is not None
    assert gb200[0].tpot_ms.p99 <= 50
    note = next(w for w in answer.warnings if w.startswith("a plan for a rate:"))
    assert "none of them could beat those" in note


def _spy(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, bounds: Callable[[Any], Any]
) -> list[tuple[list[float | None], rate.Bounded]]:
    """Each call of module.name: the lower bounds of the candidates it left, and its outcome."""
    calls: list[tuple[list[float | None], rate.Bounded]] = []
    original = getattr(module, name)

    def spy(candidates: Sequence[Any], *args: Any) -> rate.Bounded:
        outcome: rate.Bounded = original(candidates, *args)
        calls.append(([bounds(c) for c in candidates[outcome.simulated :]], outcome))
        return outcome

    monkeypatch.setattr(module, name, spy)
    return calls


def test_no_unsimulated_lower_bound_is_below_a_shown_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    single = _spy(monkeypatch, rate, "_simulated", lambda c: c.bound)
    split = _spy(monkeypatch, disaggregated, "simulated", lambda p: p.bound)
    answer = _plan(max_alternatives=100)
    for calls in (single, split):
        (left, outcome) = calls[0]
        assert not outcome.capped  # the bound closed before the cap on simulations
        assert left  # some candidates were left unsimulated
        shown = [c.option.cost_per_hour_usd for c in outcome.chosen]
        priced = [b for b in left if b is not None]
        assert shown
        assert all(cost is not None for cost in shown)
        assert min(priced) >= max(c for c in shown if c is not None)
    # every simulated option the bound keeps is shown (max_alternatives 100 omits none)
    assert answer.alternatives_omitted == 0
    assert 1 + len(answer.alternatives) == len(single[0][1].chosen) + len(split[0][1].chosen)
