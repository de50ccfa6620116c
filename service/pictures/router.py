"""GET and POST /v1/pictures/...: the capacity question drawn, as SVG or PNG.

GET takes exactly the query parameters of GET /v1/capacity (a capacity URL works here with
only its path changed), so a spreadsheet's `IMAGE()` can show one; POST takes the body of POST
/v1/capacity (a model inline or as a config.json). Each asks the planning use case
(`planning.service.capacity`) and draws its answer; bad input is a problem, never an image.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import ConfigDict, Field

from ..catalog.snapshot import CatalogSnapshot
from ..kit.answer_headers import (
    ANSWER_HEADERS_DOC,
    WARNINGS_HEADER,
    WARNINGS_HEADER_DOC,
    answer_headers,
)
from ..kit.conditional import etag_for, etag_matches
from ..kit.deps import CatalogDep, SettingsDep, refuse_misspelt_parameters
from ..kit.engine_flags import ignored
from ..kit.errors import InvalidRequest, NotAcceptable
from ..kit.security import READ, READ_OPENAPI
from ..planning import service
from ..planning.schemas import (
    MAX_SIMULATED_REQUESTS,
    CapacityDetail,
    CapacityField,
    CapacityFields,
    CapacityQuery,
    CapacityRequest,
    WorkloadIn,
)
from ..planning.service import CapacityQuestion
from ..simulations import service as simulations
from ..simulations.schemas import SimulationRequest
from ..sizing import SizingError
from .charts import ContextPoint, context_lengths, context_scene, memory_budget_scene
from .scene import Scene
from .speed import speed_scene
from .svg import render_svg
from .traffic import RatePoint, RateSweep, latency_scene, timeline_scene, traffic_subtitle

# The capacity's own guards: a read key where KVPLAN_READ_KEYS is set, and a near-miss of a
# parameter name refused (any other unknown parameter is ignored, as a sheet's `&_=2`).
router = APIRouter(
    prefix="/v1/pictures",
    tags=["pictures"],
    dependencies=[*READ, Depends(refuse_misspelt_parameters)],
)

PictureFormat = Literal["svg", "png"]
MEDIA = {"svg": "image/svg+xml", "png": "image/png"}
PICTURE_FORMAT_DOC = (
    "svg or png; overrides Accept (`image/svg+xml` or `image/png`). Without either: png, "
    "which every spreadsheet IMAGE() function shows."
)

MAX_TPOT_DOC = (
    "A latency target to draw: the longest time per output token, ms (as POST /v1/plans "
    "`max_tpot_ms`); the largest batch that meets it is marked."
)

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "A read key is needed (KVPLAN_READ_KEYS) and none was given"},
    404: {"description": "Unknown model or GPU slug"},
    406: {"description": "Accept names neither image/svg+xml nor image/png"},
    422: {"description": "Invalid input; `field` names it"},
    503: {"description": "Database unreachable"},
}
_PICTURE: dict[str, Any] = {
    "description": "The picture",
    "content": {
        "image/svg+xml": {"schema": {"type": "string"}},
        "image/png": {"schema": {"type": "string", "format": "binary"}},
    },
}
# A POST's picture says the warnings of the answer it draws; a GET's also the parameters it
# ignored (answer_headers).
IMAGES: dict[int | str, dict[str, Any]] = {
    200: {**_PICTURE, "headers": {WARNINGS_HEADER: WARNINGS_HEADER_DOC}},
}
CACHED_IMAGES: dict[int | str, dict[str, Any]] = {
    200: {**_PICTURE, "headers": ANSWER_HEADERS_DOC},
    304: {"description": "Not modified"},
}


class PictureQuery(CapacityQuery):
    """GET /v1/pictures/...: the GET /v1/capacity parameters; `format` picks the image type."""

    format: PictureFormat | None = Field(None, description=PICTURE_FORMAT_DOC)  # type: ignore[assignment]
    field: CapacityField | None = Field(
        None, description="Ignored here: accepted so that a /v1/capacity URL draws as it is."
    )


class SpeedPictureQuery(PictureQuery):
    """GET /v1/pictures/speed-by-batch: the capacity parameters and a latency target to draw."""

    max_tpot_ms: float | None = Field(None, gt=0, le=1_000_000, description=MAX_TPOT_DOC)


def _parameters(query: type[PictureQuery]) -> frozenset[str]:
    """A GET's query parameters: what it reads (the rest it ignores, and names)."""
    return frozenset(info.alias or name for name, info in query.model_fields.items())


_PICTURE_PARAMETERS = _parameters(PictureQuery)
_SPEED_PARAMETERS = _parameters(SpeedPictureQuery)


def _quality(accept: str, media: str) -> tuple[float, int]:
    """The q an Accept header gives `media`, and how specific the range that gave it was."""
    best = (0.0, -1)
    kind = media.split("/", maxsplit=1)[0]
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        name, q = pieces[0].lower(), 1.0
        for param in pieces[1:]:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        specificity = {media: 2, f"{kind}/*": 1, "*/*": 0}.get(name, -1)
        if specificity > best[1]:
            best = (q, specificity)
    return best


def picture_format(request: Request, explicit: PictureFormat | None) -> PictureFormat:
    """`format=` wins; then Accept (the best q, an exact type before a wildcard); else PNG."""
    if explicit is not None:
        return explicit
    accept = request.headers.get("accept", "").strip()
    if not accept:
        return "png"
    ranked = sorted(
        (
            (*_quality(accept, media), -order, fmt)
            for order, (fmt, media) in enumerate((("png", MEDIA["png"]), ("svg", MEDIA["svg"])))
        ),
        reverse=True,
    )
    q, _, _, fmt = ranked[0]
    if q <= 0:
        raise NotAcceptable(
            f"cannot answer {accept!r} with a picture: ask for image/svg+xml or image/png "
            "(or give format=svg|png)",
            field="Accept",
        )
    return "svg" if fmt == "svg" else "png"


def _picture(
    request: Request,
    drawn: Drawn,
    fmt: PictureFormat,
    token: str,
    max_age: int | None,
    *,
    parameters: frozenset[str] = frozenset(),
) -> Response:
    """The rendered picture, saying the warnings of the answer drawn (and, for a GET, the query
    parameters outside `parameters` it ignored); a GET (`max_age` given) is cacheable and
    answers 304 on its ETag."""
    scene, warnings = drawn
    if fmt == "svg":
        body = render_svg(scene)
    else:
        # Pillow is imported with the first PNG asked for, not with the app
        from .png import render_png  # noqa: PLC0415

        body = render_png(scene)
    if max_age is None:
        headers = {"Cache-Control": "no-store", **answer_headers(warnings)}
        return Response(body, media_type=MEDIA[fmt], headers=headers)
    etag = etag_for(token, body)
    headers = {"ETag": etag, "Cache-Control": f"public, max-age={max_age}", "Vary": "Accept"}
    if etag_matches(request, etag):
        return Response(status_code=304, headers=headers)
    headers.update(answer_headers(warnings, ignored(request.query_params.keys(), parameters)))
    return Response(body, media_type=MEDIA[fmt], headers=headers)


def _question(
    question: CapacityQuestion, fields: CapacityFields, **changes: Any
) -> CapacityQuestion:
    """The same question at another context length; only its headline figures are drawn."""
    return CapacityQuestion(
        question.model,
        question.gpu,
        fields.model_copy(update=changes),
        gpu_memory_bytes=question.gpu_memory_bytes,
        explain=False,
    )


def _model_max_context(
    question: CapacityQuestion, fields: CapacityFields, catalog: CatalogSnapshot
) -> int | None:
    """The model's longest context: what the capacity answer takes when none is asked."""
    try:
        default = service.capacity(_question(question, fields, max_model_len=None), catalog)
    except SizingError:
        return None
    return default.max_model_len


def _curve(
    question: CapacityQuestion,
    fields: CapacityFields,
    catalog: CatalogSnapshot,
    requested: CapacityDetail,
) -> list[ContextPoint]:
    points = []
    model_max = _model_max_context(question, fields, catalog)
    for length in context_lengths(requested.max_model_len, model_max):
        if length == requested.max_model_len:
            continue
        try:
            answer = service.capacity(_question(question, fields, max_model_len=length), catalog)
        except SizingError:
            continue  # a length these flags refuse is left out of the curve, not drawn as 0
        points.append(ContextPoint(length, answer.max_num_seqs))
    return points


# A picture, and the warnings of the capacity answer it draws.
Drawn = tuple[Scene, list[str]]
Draw = Callable[[CapacityQuestion, CapacityFields, CatalogSnapshot], Drawn]


def draw_memory_budget(
    question: CapacityQuestion, fields: CapacityFields, catalog: CatalogSnapshot
) -> Drawn:
    detail = service.capacity(question, catalog)
    return memory_budget_scene(detail), detail.warnings


def draw_capacity_by_context(
    question: CapacityQuestion, fields: CapacityFields, catalog: CatalogSnapshot
) -> Drawn:
    detail = service.capacity(question, catalog)
    return context_scene(detail, _curve(question, fields, catalog, detail)), detail.warnings


def _get(
    draw: Draw, request: Request, query: PictureQuery, catalog: CatalogSnapshot, max_age: int
) -> Response:
    fmt = picture_format(request, query.format)
    question = CapacityQuestion(
        query.model, query.gpu, query, gpu_memory_bytes=query.gpu_memory_bytes, explain=True
    )
    drawn = draw(question, query, catalog)
    return _picture(request, drawn, fmt, catalog.token, max_age, parameters=_PICTURE_PARAMETERS)


def _post(
    draw: Draw,
    request: Request,
    body: CapacityRequest,
    fmt: PictureFormat | None,
    catalog: CatalogSnapshot,
) -> Response:
    picked = picture_format(request, fmt)
    question = CapacityQuestion(body.model, body.gpu, body, explain=True)
    return _picture(request, draw(question, body, catalog), picked, catalog.token, None)


FormatParam = Annotated[PictureFormat | None, Query(description=PICTURE_FORMAT_DOC)]

MEMORY_DOC = (
    "One stacked bar of one GPU's memory as the engine splits it: weights, engine overhead "
    "(activation peak, non-torch memory, CUDA graphs, or SGLang's reserve), the KV cache in use "
    "at `peak_concurrency` (at max_num_seqs without it) and the free headroom, each labelled in "
    "GiB. "
)
CONTEXT_DOC = (
    "max_num_seqs per replica at each context length from 1K tokens (doubling) to the model's "
    "maximum, on a log-scale axis, with the requested `max_model_len` marked. "
)
GET_DOC = (
    "The GET /v1/capacity query parameters, as they are. SVG or PNG (`format`, or Accept); "
    "cacheable like the capacity (`ETag`, `If-None-Match` -> 304). For spreadsheets: "
    '`=IMAGE("https://kvplan.example/v1/pictures/...?model=...&gpu=...&format=png")`.'
)
POST_DOC = (
    "The POST /v1/capacity body: the model may be inline or a config.json, the GPU "
    "`{memory_bytes: N}`. SVG or PNG (`format`, or Accept)."
)


@router.get(
    "/memory-budget",
    operation_id="getMemoryBudgetPicture",
    summary="Picture: one GPU's memory budget (SVG or PNG)",
    description=MEMORY_DOC + GET_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **CACHED_IMAGES},
)
def get_memory_budget(
    request: Request,
    query: Annotated[PictureQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
) -> Response:
    return _get(draw_memory_budget, request, query, catalog, settings.capacity_max_age_seconds)


@router.post(
    "/memory-budget",
    operation_id="drawMemoryBudgetPicture",
    summary="Picture: one GPU's memory budget for an inline model or GPU",
    description=MEMORY_DOC + POST_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **IMAGES},
)
def post_memory_budget(
    request: Request, body: CapacityRequest, catalog: CatalogDep, format: FormatParam = None
) -> Response:
    return _post(draw_memory_budget, request, body, format, catalog)


@router.get(
    "/capacity-by-context",
    operation_id="getCapacityByContextPicture",
    summary="Picture: sequences that fit against context length (SVG or PNG)",
    description=CONTEXT_DOC + GET_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **CACHED_IMAGES},
)
def get_capacity_by_context(
    request: Request,
    query: Annotated[PictureQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
) -> Response:
    return _get(
        draw_capacity_by_context, request, query, catalog, settings.capacity_max_age_seconds
    )


@router.post(
    "/capacity-by-context",
    operation_id="drawCapacityByContextPicture",
    summary="Picture: sequences against context for an inline model or GPU",
    description=CONTEXT_DOC + POST_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **IMAGES},
)
def post_capacity_by_context(
    request: Request, body: CapacityRequest, catalog: CatalogDep, format: FormatParam = None
) -> Response:
    return _post(draw_capacity_by_context, request, body, format, catalog)


SPEED_DOC = (
    "One replica's estimated decode time per output token (TPOT) and output tokens per second "
    "at batches of 1, 2, 4, ... sequences up to max_num_seqs (the engine's cap where lower), "
    "every sequence at max_model_len tokens of context, on a log-scale batch axis; the memory "
    "limit (max_num_seqs) is drawn, and `max_tpot_ms`, when given, with the largest batch "
    "that meets it. A GPU without bandwidth or FLOPs figures draws the reason instead. "
)
TargetParam = Annotated[float | None, Query(gt=0, le=1_000_000, description=MAX_TPOT_DOC)]


@router.get(
    "/speed-by-batch",
    operation_id="getSpeedByBatchPicture",
    summary="Picture: decode time and throughput against batch (SVG or PNG)",
    description=SPEED_DOC + GET_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **CACHED_IMAGES},
)
def get_speed_by_batch(
    request: Request,
    query: Annotated[SpeedPictureQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
) -> Response:
    fmt = picture_format(request, query.format)
    question = CapacityQuestion(
        query.model, query.gpu, query, gpu_memory_bytes=query.gpu_memory_bytes
    )
    curve = service.speed_by_batch(question, catalog, query.max_tpot_ms)
    drawn = speed_scene(curve), curve.detail.warnings
    max_age = settings.capacity_max_age_seconds
    return _picture(request, drawn, fmt, catalog.token, max_age, parameters=_SPEED_PARAMETERS)


@router.post(
    "/speed-by-batch",
    operation_id="drawSpeedByBatchPicture",
    summary="Picture: decode time and throughput against batch for an inline model or GPU",
    description=SPEED_DOC + POST_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **IMAGES},
)
def post_speed_by_batch(
    request: Request,
    body: CapacityRequest,
    catalog: CatalogDep,
    format: FormatParam = None,
    max_tpot_ms: TargetParam = None,
) -> Response:
    picked = picture_format(request, format)
    question = CapacityQuestion(body.model, body.gpu, body)
    curve = service.speed_by_batch(question, catalog, max_tpot_ms)
    drawn = speed_scene(curve), curve.detail.warnings
    return _picture(request, drawn, picked, catalog.token, None)


# ---- the traffic pictures: a simulation, and latency against request rate -----------------

MAX_SWEEP_RATES = 12


class LatencySweepRequest(SimulationRequest):
    """POST /v1/pictures/latency-vs-rate: a simulation's body (with a `workload`) and the
    rates to simulate it at."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "llama-3.1-8b-instruct",
                    "gpu": "h100-sxm",
                    "max_model_len": 8192,
                    "workload": {"input_tokens": 2000, "output_tokens": 300, "num_requests": 500},
                    "request_rates": [1, 2, 4, 6, 8],
                    "targets": {"max_ttft_ms": 2000, "max_tpot_ms": 50},
                }
            ]
        },
    )

    request_rates: list[Annotated[float, Field(gt=0, le=1_000_000)]] = Field(
        ...,
        min_length=1,
        max_length=MAX_SWEEP_RATES,
        description="The Poisson rates (requests per second) to simulate the workload at, one "
        "simulation each; the workload's own `request_rate` is replaced by each in turn.",
    )


SIMULATION_DOC = (
    "A simulation drawn: one replica's running and waiting requests and the share of its KV "
    "pool's blocks in use against simulated time (the answer's `time_series`), with "
    "max_num_seqs and the peak KV usage marked. The body is POST /v1/simulations' (a "
    "`workload` or a `trace` of rows). SVG or PNG (`format`, or Accept); not cached."
)
LATENCY_DOC = (
    "TTFT and TPOT p50/p99 against the request rate: the POST /v1/simulations body with a "
    f"`workload`, simulated once at each of `request_rates` (at most {MAX_SWEEP_RATES}; the "
    f"requests of all of them at most {MAX_SIMULATED_REQUESTS:,}); the targets, when given, "
    "are drawn, and the first rate at which requests queue for room in the engine (at least one "
    "waiting on average: KV blocks or max_num_seqs) is marked as saturation. SVG or PNG "
    "(`format`, or Accept); not cached."
)


@router.post(
    "/simulation",
    operation_id="drawSimulationPicture",
    summary="Picture: a simulation's requests and KV usage over time (SVG or PNG)",
    description=SIMULATION_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **IMAGES},
)
def post_simulation_picture(
    request: Request, body: SimulationRequest, catalog: CatalogDep, format: FormatParam = None
) -> Response:
    picked = picture_format(request, format)
    traffic = simulations.traffic_of(body)
    question = CapacityQuestion.from_body(body)
    answer = simulations.simulation(
        question, traffic, simulations.targets_of(body.targets), catalog
    )
    return _picture(request, (timeline_scene(answer), answer.warnings), picked, catalog.token, None)


def _sweep_requests(body: LatencySweepRequest) -> WorkloadIn:
    """The workload to sweep, refused by name where a sweep cannot run it."""
    workload = body.workload
    if workload is None or body.trace is not None:
        raise InvalidRequest(
            "a sweep of rates simulates a workload: give `workload`, not a trace",
            field="workload",
        )
    if workload.max_concurrency is not None:
        raise InvalidRequest(
            "a sweep of rates replaces request_rate: give no max_concurrency",
            field="workload.max_concurrency",
        )
    if workload.num_requests is not None:
        total = workload.num_requests * len(body.request_rates)
    elif workload.duration_s is not None:
        total = math.ceil(workload.duration_s * sum(body.request_rates))
    else:
        raise InvalidRequest(
            "give num_requests (or duration_s): how many requests each rate simulates",
            field="workload.num_requests",
        )
    if total > MAX_SIMULATED_REQUESTS:
        raise InvalidRequest(
            f"the sweep simulates about {total:,} requests in all; at most "
            f"{MAX_SIMULATED_REQUESTS:,} (fewer rates or fewer requests each)",
            field="request_rates",
        )
    return workload


def rate_sweep(body: LatencySweepRequest, catalog: CatalogSnapshot) -> tuple[RateSweep, list[str]]:
    """One simulation per rate (rising), and the warnings of the first."""
    workload = _sweep_requests(body)
    question = CapacityQuestion.from_body(body)
    targets = simulations.targets_of(body.targets)
    points, warnings = [], []
    answer = None
    for rate in sorted(set(body.request_rates)):
        traffic = simulations.workload_of(workload.model_copy(update={"request_rate": rate}))
        answer = simulations.simulation(question, traffic, targets, catalog)
        warnings += [w for w in answer.warnings if w not in warnings]
        points.append(
            RatePoint(
                request_rate=rate,
                served_rate=answer.throughput.requests_per_second,
                mean_waiting=answer.mean_waiting,
                ttft_p50_ms=answer.ttft_ms.p50,
                ttft_p99_ms=answer.ttft_ms.p99,
                tpot_p50_ms=answer.tpot_ms.p50,
                tpot_p99_ms=answer.tpot_ms.p99,
            )
        )
    assert answer is not None  # request_rates holds at least one rate
    given = body.targets
    sweep = RateSweep(
        model=answer.model,
        gpu=answer.gpu,
        subtitle=traffic_subtitle(answer),
        points=tuple(points),
        max_ttft_ms=given.max_ttft_ms if given else None,
        max_tpot_ms=given.max_tpot_ms if given else None,
    )
    return sweep, warnings


@router.post(
    "/latency-vs-rate",
    operation_id="drawLatencyVsRatePicture",
    summary="Picture: TTFT and TPOT percentiles against request rate (SVG or PNG)",
    description=LATENCY_DOC,
    response_class=Response,
    openapi_extra=READ_OPENAPI,
    responses={**PROBLEMS, **IMAGES},
)
def post_latency_vs_rate(
    request: Request, body: LatencySweepRequest, catalog: CatalogDep, format: FormatParam = None
) -> Response:
    picked = picture_format(request, format)
    sweep, warnings = rate_sweep(body, catalog)
    return _picture(request, (latency_scene(sweep), warnings), picked, catalog.token, None)
