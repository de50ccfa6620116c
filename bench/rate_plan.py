"""A plan for a rate over the whole catalog: the wall time of one POST /v1/plans with a workload.

python -m bench.rate_plan [--repeat N]

Llama-3.1-8B-Instruct, max_model_len 8192, every catalog GPU and layout; 20 requests/s of
2,000 input and 300 output tokens; p99 TTFT 2 s and p99 TPOT 50 ms (the issue's example).
The analytic pass sizes every candidate, the simulator runs them by branch and bound on their
lower bounds until none left could beat the four cheapest (service/planning/rate.py), and the
disaggregated pairs until none left could beat the two cheapest
(service/planning/disaggregated.py), 2,000 requests a run.
"""

from __future__ import annotations

import argparse
import time

from service.catalog.seed import offline_snapshot
from service.planning.schemas import PlanRequestBody
from service.planning.service import PlanQuestion, plan

BODY = {
    "model": "llama-3.1-8b-instruct",
    "max_model_len": 8192,
    "workload": {"request_rate": 20, "input_tokens": 2000, "output_tokens": 300},
    "ttft_p99_ms": 2000,
    "tpot_p99_ms": 50,
}


def bench_rate_plan(repeat: int = 3) -> None:
    catalog = offline_snapshot()
    question = PlanQuestion.from_body(PlanRequestBody.model_validate(BODY))
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        answer = plan(question, catalog)
        walls.append(time.perf_counter() - start)
    best = answer.recommendation
    found = (
        "no plan"
        if best is None
        else f"{best.replicas} x {best.gpu} TP{best.tensor_parallel_size} ({best.kind}), "
        f"${best.cost_per_million_output_tokens_usd} per million output tokens"
    )
    if answer.disaggregation is not None:
        found += f"; {answer.disaggregation.statement}"
    print(
        f"\nPlan for a rate (whole catalog, 20 req/s, 2000 in / 300 out, p99 TTFT 2 s, p99 "
        f"TPOT 50 ms): {min(walls):.2f} s best of {repeat} (first {walls[0]:.2f} s); {found}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    bench_rate_plan(parser.parse_args().repeat)


if __name__ == "__main__":
    main()
