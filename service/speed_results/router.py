"""POST /v1/speed-results: a benchmark's result file against kvplan's estimate. Thin."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from ..kit.deps import CatalogDep, refuse_misspelt_parameters
from ..kit.security import READ, READ_OPENAPI
from ..planning.service import CapacityQuestion
from .schemas import SpeedResultAnswer, SpeedResultRequest
from .service import explain_result

router = APIRouter(prefix="/v1", dependencies=[*READ, Depends(refuse_misspelt_parameters)])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "KVPLAN_READ_KEYS is set and no read key was presented"},
    404: {"description": "The model or GPU named in `deployment` is not in the catalog"},
    422: {
        "description": "The result file is not one kvplan reads, or a figure it needs is "
        "missing or not a positive number (field `result`), or a deployment field is invalid"
    },
}


@router.post(
    "/speed-results",
    tags=["speed-results"],
    operation_id="explainSpeedResult",
    summary="Set a benchmark's measured speed against kvplan's estimate of the same run",
    description="`result`: `vllm bench serve --save-result` JSON or genai-perf's "
    "profile_export_genai_perf.json as written; `deployment`: the deployment that served it, "
    "as POST /v1/capacity asks it. Answers the run's shape (batch from its concurrency, "
    "context, prompt), each measured figure beside kvplan's estimate at that shape with the "
    "ratio measured / estimated, and `step_time_scale` (measured TPOT over the estimated "
    "decode step). Stores nothing.",
    response_model=SpeedResultAnswer,
    responses=PROBLEMS,
    openapi_extra=READ_OPENAPI,
)
def post_speed_result(body: SpeedResultRequest, catalog: CatalogDep) -> SpeedResultAnswer:
    question = CapacityQuestion.from_body(body.deployment)
    return explain_result(body.result, question, catalog)
