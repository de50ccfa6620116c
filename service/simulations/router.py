"""POST /v1/simulations: a deployment under traffic. HTTP only: the JSON question FastAPI
validates, or a trace as the body (`text/csv` in the public traces' columns, Mooncake's JSON
lines) with the deployment in the query string, as GET /v1/capacity takes it."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ..kit.answer_headers import answer_headers
from ..kit.deps import get_catalog, misspelling_of
from ..kit.engine_flags import ignored
from ..kit.errors import InvalidRequest, validation_problem
from ..kit.security import READ, READ_OPENAPI, check_read_key
from ..planning.schemas import WorkloadIn
from ..planning.service import CapacityQuestion
from . import service
from .schemas import MAX_TRACE_BYTES, SimulationAnswer, SimulationQuery, SimulationRequest
from .schemas import Targets as TargetsIn

router = APIRouter(prefix="/v1", dependencies=[*READ])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "KVPLAN_READ_KEYS is set and no read key was presented"},
    404: {"description": "The model or GPU named (`model`, `gpu`) is not in the catalog"},
    422: {
        "description": "A field of the deployment, the workload or the trace is invalid (named "
        "in `field`), or the layout holds no sequence"
    },
}

TRACE_MEDIA = ("text/csv", "application/jsonl", "application/x-ndjson")
AZURE_EXAMPLE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
)
MOONCAKE_EXAMPLE = (
    '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, '
    "49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}\n"
)


# What a trace's query string reads: the deployment, as GET /v1/capacity, and goodput's
# targets. The traffic is the body's rows: a workload's field there is refused by name.
TRACE_PARAMETERS = frozenset(
    info.alias or name for name, info in SimulationQuery.model_fields.items()
)
_TRAFFIC_FIELDS = (frozenset(WorkloadIn.model_fields) | {"workload", "trace", "targets"}) - (
    TRACE_PARAMETERS
)


def _json(answer: SimulationAnswer, ignored_names: tuple[str, ...] = ()) -> Response:
    return Response(
        answer.model_dump_json(),
        media_type="application/json",
        headers={"Cache-Control": "no-store", **answer_headers((), ignored_names)},
    )


def _trace_query(request: Request) -> tuple[SimulationQuery, tuple[str, ...]]:
    """A trace's query string as GET /v1/capacity reads its own: a near-miss of a parameter
    or a workload's field is a 422 naming it (ignored, it would answer a question nobody
    asked); other unknown names are ignored and said in Kvplan-Ignored-Parameters."""
    for name in request.query_params:
        if name in _TRAFFIC_FIELDS:
            raise InvalidRequest(
                f"{name}: the trace's rows are the traffic; the query string takes the "
                "deployment and goodput's max_ttft_ms, max_tpot_ms, max_e2e_latency_ms",
                field=name,
            )
        close = misspelling_of(name, TRACE_PARAMETERS)
        if close is not None:
            raise InvalidRequest(
                f"{name}: not a parameter of this request; did you mean {close}?",
                field=name,
                suggestions=[close],
            )
    try:
        query = SimulationQuery.model_validate(dict(request.query_params))
    except ValidationError as exc:
        raise validation_problem(exc) from exc
    return query, ignored(request.query_params.keys(), TRACE_PARAMETERS)


async def _post_trace(request: Request, media: str) -> Response:
    check_read_key(request)
    raw = await request.body()
    if len(raw) > MAX_TRACE_BYTES:
        raise InvalidRequest(
            f"the trace is {len(raw)} bytes; at most {MAX_TRACE_BYTES}", field="body"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidRequest("the trace is not UTF-8 text", field="body") from exc
    query, ignored_names = _trace_query(request)
    trace = service.trace_of(text, media)
    targets = service.targets_of(
        TargetsIn(
            max_ttft_ms=query.max_ttft_ms,
            max_tpot_ms=query.max_tpot_ms,
            max_e2e_latency_ms=query.max_e2e_latency_ms,
        )
    )
    catalog = await get_catalog(request)
    question = CapacityQuestion.from_query(query)
    answer = await run_in_threadpool(service.simulation, question, trace, targets, catalog)
    return _json(answer, ignored_names)


class SimulationRoute(APIRoute):
    """A trace body (CSV or JSON lines) goes to `_post_trace`; JSON to the declared route."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def dispatch(request: Request) -> Response:
            media = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if request.method == "POST" and media in TRACE_MEDIA:
                return await _post_trace(request, media)
            return await handler(request)

        return dispatch


async def post_simulation(request: Request, body: SimulationRequest) -> Response:
    catalog = await get_catalog(request)
    traffic = service.traffic_of(body)
    targets = service.targets_of(body.targets)
    question = CapacityQuestion.from_body(body)
    # A worker thread: a simulation is up to seconds of arithmetic, not microseconds.
    answer = await run_in_threadpool(service.simulation, question, traffic, targets, catalog)
    return _json(answer)


router.add_api_route(
    "/simulations",
    post_simulation,
    methods=["POST"],
    tags=["simulations"],
    operation_id="createSimulation",
    summary="A deployment under traffic -> latency percentiles, throughput, KV usage",
    description="One replica of the deployment (the capacity question's fields: model, GPU, "
    "layout, engine flags, release) under a `workload` (Poisson `request_rate` or a closed "
    "loop of `max_concurrency`; lengths as a number, percentiles or a histogram) or a `trace` "
    "of rows, stepped as the deployment's engine schedules: `engine=vllm`, vLLM's V1 "
    "scheduler (decodes first, chunked prefill within `max_num_batched_tokens` and "
    "`max_num_seqs`, blocks from the pool kvplan sizes, recompute preemption of the last "
    "admitted, prefix-cache hits of whole blocks); `engine=sglang`, SGLang's (a prefill batch "
    "runs as its own step while decodes wait, admission against max_total_num_tokens less "
    "the running requests' outputs x new_token_ratio, chunks of chunked_prefill_size, "
    "retraction of the requests with the fewest output tokens when decode runs out, radix-cache "
    "hits); another engine is refused (422, `engine`). Each step timed by kvplan's speed "
    "model. A trace may be posted as the body instead: "
    "`text/csv` in Azure's (`TIMESTAMP,ContextTokens,GeneratedTokens`), BurstGPT's or kvplan's "
    "(`arrival_s,input_tokens,output_tokens`) columns, or Mooncake's JSON lines "
    "(`application/jsonl`), with the deployment in the query string as GET /v1/capacity takes "
    "it (and `max_ttft_ms`, `max_tpot_ms`, `max_e2e_latency_ms` for goodput).",
    response_model=SimulationAnswer,
    responses={**PROBLEMS},
    route_class_override=SimulationRoute,
    openapi_extra={
        **READ_OPENAPI,
        "requestBody": {
            "content": {
                "text/csv": {"schema": {"type": "string"}, "example": AZURE_EXAMPLE},
                "application/jsonl": {"schema": {"type": "string"}, "example": MOONCAKE_EXAMPLE},
            }
        },
    },
)
