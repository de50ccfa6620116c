"""POST /v1/speed-results: a benchmark's result file against kvplan's estimate. Thin."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from ..kit import conditional
from ..kit.deps import CatalogDep, SessionDep, WriteSessionDep, refuse_misspelt_parameters
from ..kit.routes import (
    LINK_HEADER,
    IfMatch,
    IfNoneMatch,
    Responses,
    etag_header,
    next_page_url,
    problem_responses,
)
from ..kit.security import READ, READ_OPENAPI, AdminRoute, bearer_scheme
from ..planning.service import CapacityQuestion
from . import calibrations
from .schemas import (
    SpeedCalibrationCreate,
    SpeedCalibrationPage,
    SpeedCalibrationRead,
    SpeedResultAnswer,
    SpeedResultRequest,
)
from .service import explain_result

router = APIRouter(prefix="/v1", dependencies=[*READ, Depends(refuse_misspelt_parameters)])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "KVPLAN_READ_KEYS is set and no read key was presented"},
    404: {"description": "The model or GPU named in `deployment` is not in the catalog"},
    422: {
        "description": "The result file is not one kvplan reads, or a figure it needs is "
        "missing or not a positive number (field `result`, or the path in it), `benchmark` is "
        "not in the report, or a deployment field is invalid"
    },
}


@router.post(
    "/speed-results",
    tags=["speed-results"],
    operation_id="explainSpeedResult",
    summary="Set a benchmark's measured speed against kvplan's estimate of the same run",
    description="`result`: `vllm bench serve --save-result` JSON, genai-perf's "
    "profile_export_genai_perf.json or guidellm's benchmarks.json as written; `deployment`: "
    "the deployment that served it, as POST /v1/capacity asks it. Answers the run's shape "
    "(batch from its concurrency, context, prompt), each measured figure beside kvplan's "
    "estimate at that shape with the ratio measured / estimated, and `step_time_scale` "
    "(measured TPOT over the estimated decode step). A guidellm report of several benchmarks "
    "(a sweep) is compared benchmark by benchmark in `benchmarks`; `benchmark` picks the one "
    "the top-level figures describe. Stores nothing.",
    response_model=SpeedResultAnswer,
    responses=PROBLEMS,
    openapi_extra=READ_OPENAPI,
)
def post_speed_result(body: SpeedResultRequest, catalog: CatalogDep) -> SpeedResultAnswer:
    question = CapacityQuestion.from_body(body.deployment)
    return explain_result(body.result, question, catalog, body.benchmark)


# ---------------------------------------------------------------------------------------------
# /v1/speed-calibrations: benchmark runs kept as the step-time scale they measured (admin writes)

speed_calibrations_router = APIRouter(
    prefix="/v1/speed-calibrations", tags=["speed-calibrations"], route_class=AdminRoute
)
WRITE = [Depends(bearer_scheme)]
READS: dict[str, Any] = {
    "dependencies": [*READ, Depends(refuse_misspelt_parameters)],
    "openapi_extra": READ_OPENAPI,
}
_ETAG = etag_header("speed calibration")
_PROBLEMS: dict[int, str] = {
    401: "A write without an admin token, or, where KVPLAN_READ_KEYS is set, a read without a "
    "read key.",
    404: "No such speed calibration; or the model or GPU the deployment names is not in the "
    "catalog.",
    409: "POST: this deployment (the same key) has a speed calibration already; "
    "`calibration_id` names it. DELETE it to replace it.",
    412: "`If-Match` names a stale revision.",
    422: "The result file is not one kvplan reads (field `result`), the deployment has no "
    "estimate or no key (an inline model), or another field is invalid.",
    428: "`If-Match` is missing: deletes must send the speed calibration's `ETag`.",
    503: "The database is unreachable; retry later.",
}
SpeedCalibrationId = Annotated[
    int, Path(ge=1, le=2**31 - 1, description="The speed calibration's id.")
]


def _problems(*codes: int, ok: Responses | None = None) -> Responses:
    return problem_responses(_PROBLEMS, *codes, ok=ok)


@speed_calibrations_router.post(
    "",
    status_code=201,
    operation_id="createSpeedCalibration",
    summary="Keep a benchmark run as a speed calibration",
    description="The body of POST /v1/speed-results plus `notes` (of a guidellm report of "
    "several benchmarks, `benchmark` names the one kept). The run is compared with "
    "kvplan's estimate and its `step_time_scale` (measured TPOT over kvplan's decode step at "
    "the run's batch) stored under the deployment's key, the memory calibrations' key (model, "
    "GPU, engine and release, tensor and pipeline parallel sizes, KV dtype, weights' format, "
    "max_num_batched_tokens, enforce_eager). From then on capacity answers with that key put "
    "the scale on their decode step (decode_ms_per_token, output_tokens_per_second) and say "
    "`speed_calibrated_from`. Needs an admin token.",
    response_model=SpeedCalibrationRead,
    dependencies=WRITE,
    responses=_problems(
        401,
        404,
        409,
        422,
        ok={
            201: {
                "description": "Stored.",
                "headers": {
                    "ETag": _ETAG,
                    "Location": {"description": "Where it lives.", "schema": {"type": "string"}},
                },
            }
        },
    ),
)
def post_speed_calibration(
    *,
    body: SpeedCalibrationCreate,
    request: Request,
    response: Response,
    session: WriteSessionDep,
    catalog: CatalogDep,
) -> SpeedCalibrationRead:
    question = CapacityQuestion.from_body(body.deployment)
    row = calibrations.create(
        session, body.result, question, body.notes, catalog, benchmark=body.benchmark
    )
    response.headers["ETag"] = conditional.etag(row.revision)
    root = request.scope.get("root_path", "")
    response.headers["Location"] = f"{root}{speed_calibrations_router.prefix}/{row.id}"
    return calibrations.read(row)


@speed_calibrations_router.get(
    "",
    operation_id="listSpeedCalibrations",
    summary="List speed calibrations",
    response_model=SpeedCalibrationPage,
    responses=_problems(
        401,
        422,
        ok={200: {"description": "One page, oldest first.", "headers": {"Link": LINK_HEADER}}},
    ),
    **READS,
)
def list_speed_calibrations(
    *,
    request: Request,
    response: Response,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=500, description="Entries per page (at most 500).")] = 50,
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="The `next_cursor` of the previous page (opaque)."),
    ] = None,
    model: Annotated[
        str | None, Query(min_length=1, max_length=100, description="Only this model key.")
    ] = None,
) -> SpeedCalibrationPage:
    rows, next_cursor = calibrations.list_page(session, limit=limit, cursor=cursor, model=model)
    return SpeedCalibrationPage(
        items=[calibrations.read(row) for row in rows],
        limit=limit,
        next_cursor=next_cursor,
        next=next_page_url(request, response, next_cursor),
    )


@speed_calibrations_router.get(
    "/{calibration_id}",
    operation_id="getSpeedCalibration",
    summary="One speed calibration",
    response_model=SpeedCalibrationRead,
    responses=_problems(
        401,
        404,
        ok={
            200: {"description": "The speed calibration.", "headers": {"ETag": _ETAG}},
            304: {"description": "`If-None-Match` names the current revision: no body."},
        },
    ),
    **READS,
)
def get_speed_calibration(
    *,
    calibration_id: SpeedCalibrationId,
    response: Response,
    session: SessionDep,
    if_none_match: IfNoneMatch = None,
) -> SpeedCalibrationRead | Response:
    row = calibrations.get(session, calibration_id)
    not_modified = conditional.revision_read(response, row.revision, if_none_match)
    return calibrations.read(row) if not_modified is None else not_modified


@speed_calibrations_router.delete(
    "/{calibration_id}",
    status_code=204,
    operation_id="deleteSpeedCalibration",
    summary="Remove a speed calibration",
    response_class=Response,
    dependencies=WRITE,
    responses=_problems(401, 404, 412, 428),
)
def delete_speed_calibration(
    *, calibration_id: SpeedCalibrationId, session: WriteSessionDep, if_match: IfMatch = None
) -> Response:
    """Needs `If-Match`. Questions with its key go back to kvplan's own step time."""
    calibrations.delete(session, calibration_id, if_match)
    return Response(status_code=204)
