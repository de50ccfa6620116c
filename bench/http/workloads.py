"""What the benchmark asks: the repeated question, questions never asked before, the plan."""

from __future__ import annotations

import json
import random
from urllib.parse import urlencode

from service.catalog.seed import offline_snapshot
from service.kit.errors import Problem
from service.planning import service
from service.planning.schemas import CapacityQuery
from service.planning.service import CapacityQuestion
from service.sizing import SizingError

from .loadgen import Request

# An autoscaler's question: one deployment, asked again and again.
REPEATED = Request(
    "GET",
    "/v1/capacity?"
    + urlencode(
        {
            "model": "llama-3.1-70b",
            "gpu": "h100-sxm-80gb",
            "tensor_parallel_size": 4,
            "max_model_len": 32768,
            "kv_cache_dtype": "fp8",
        }
    ),
)
# The three sizing questions over every GPU of the catalog.
PLAN = Request(
    "POST",
    "/v1/plans",
    json.dumps(
        {
            "model": "llama-3.1-70b",
            "max_model_len": 32768,
            "peak_concurrency": 256,
            "kv_cache_dtype": "fp8",
        }
    ).encode(),
    "application/json",
)
# The whole catalog for a model no single node of any catalog GPU holds at its full context:
# every GPU's single-node layouts are sized, then its 2 ... 4-node layouts (planner.py).
PLAN_MULTINODE = Request(
    "POST",
    "/v1/plans",
    json.dumps(
        {"model": "llama-3.1-405b", "max_model_len": 131072, "peak_concurrency": 16}
    ).encode(),
    "application/json",
)
# More questions than GET /v1/capacity's answer cache holds (2048, least recently used
# dropped first): asked in turn, each one has been forgotten by the time it comes round again.
VARIED_COUNT = 6000
_LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def varied(count: int = VARIED_COUNT, seed: int = 9) -> list[Request]:
    """`count` different capacity questions over the shipped catalog, each one kvplan answers
    with a 200 (checked here with the endpoint's own use case, so none is a 422)."""
    snapshot = offline_snapshot()
    models, gpus = sorted(snapshot.models), sorted(snapshot.gpus)
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Request] = []
    while len(out) < count:
        params = {
            "model": rng.choice(models),
            "gpu": rng.choice(gpus),
            "tensor_parallel_size": rng.choice((1, 1, 2, 4, 8)),
            "max_model_len": rng.choice(_LENGTHS) - rng.randrange(0, 512, 16),
            "kv_cache_dtype": rng.choice(("auto", "fp8")),
        }
        target = "/v1/capacity?" + urlencode(params)
        if target in seen:
            continue
        seen.add(target)
        try:
            query = CapacityQuery.model_validate(params)
            service.require_fit(service.capacity(CapacityQuestion.from_query(query), snapshot))
        except (SizingError, Problem, ValueError):
            continue
        out.append(Request("GET", target))
    return out


def soak(questions: list[Request]) -> list[Request]:
    """The long run's mix: the repeated question, the varied ones, now and then a plan."""
    mixed: list[Request] = []
    for number, question in enumerate(questions):
        mixed += [REPEATED, question]
        if number % 32 == 0:
            mixed.append(PLAN)
    return mixed
