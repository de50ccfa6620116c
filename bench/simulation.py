"""The traffic simulator's speed: simulated requests per second of wall time.

python -m bench.simulation [--requests N]

Llama-3.1-8B-Instruct on one H100 SXM (vLLM 0.33.0, then SGLang's scheduler: max_model_len
8192, the pool and flags each engine's capacity answer gives), Poisson arrivals at 5 and at 20
requests/s (under and over what one replica serves), prompts {50: 1000, 90: 4000, 99: 7000}
tokens, answers {50: 200, 99: 800}, a third of each prompt a shared prefix.
"""

from __future__ import annotations

import argparse
import time

from service.catalog.seed import offline_snapshot
from service.planning.schemas import CapacityRequest
from service.planning.service import CapacityQuestion, sized_deployment
from service.simulation import Lengths, Workload, engine_config, run, step_table

MODEL = "llama-3.1-8b-instruct"
GPU = "h100-sxm"
ENGINES = ("vllm", "sglang")


def bench_simulation(requests: int = 100_000) -> None:
    for engine in ENGINES:
        _bench_engine(engine, requests)


def _bench_engine(engine: str, requests: int) -> None:
    body = CapacityRequest.model_validate(
        {"model": MODEL, "gpu": GPU, "max_model_len": 8192, "engine": engine}
    )
    deployment = sized_deployment(CapacityQuestion.from_body(body), offline_snapshot())
    config = engine_config(deployment.capacity)
    table = step_table(deployment.arch, deployment.gpu, deployment.capacity, config)
    print(
        f"\nTraffic simulator ({engine}'s scheduler): {MODEL} on one {GPU}, {requests:,} requests"
    )
    for rate in (5.0, 20.0):
        workload = Workload(
            Lengths.of("input_tokens", {"50": 1000, "90": 4000, "99": 7000}),
            Lengths.of("output_tokens", {"50": 200, "99": 800}),
            request_rate=rate,
            num_requests=requests,
            prefix_cache_hit_rate=0.33,
        )
        start, cpu = time.perf_counter(), time.process_time()
        summary = run(config, table, workload)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(
            f"  rate {rate:g}/s: {wall:.2f} s wall ({cpu:.2f} s CPU), "
            f"{summary.completed_requests / wall:,.0f} "
            f"simulated requests/s, {summary.steps:,} engine steps "
            f"({summary.steps / wall:,.0f}/s); "
            f"served {summary.throughput.requests_per_second:.2f} req/s, TTFT p99 "
            f"{summary.ttft_ms.p99:,.0f} ms, TPOT p50 {summary.tpot_ms.p50:.1f} ms, "
            f"{summary.preemptions} preemptions"
            f" ({'retractions' if engine == 'sglang' else 'recompute'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    bench_simulation(parser.parse_args().requests)


if __name__ == "__main__":
    main()
