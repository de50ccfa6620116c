"""Sizing endpoints: /v1/capacity (autoscalers, sheets) and /v1/plans.

Thin: each endpoint negotiates the format, calls one planning use case (`service.capacity` or
`service.plan`), and renders the answer as JSON, CSV or one value; GET /v1/capacity also caches.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from .. import exposition
from ..deps import CatalogDep, MetricsDep, SettingsDep
from ..formats import csv_text, etag_for, etag_matches, negotiate, single_value
from . import service
from .cache import AnswerCache
from .exposition import capacity_exposition
from .schemas import (
    CapacityAnswer,
    CapacityDetail,
    CapacityQuery,
    CapacityRequest,
    PlanAnswer,
    PlanQuery,
    PlanRequestBody,
)
from .service import CapacityQuestion, PlanQuestion

router = APIRouter(prefix="/v1")

# Descriptions only: errors.document_problems gives every 4xx/5xx the one ProblemDetail body.
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "Unknown model or GPU slug"},
    406: {"description": "Unsupported Accept"},
    422: {"description": "Invalid input; `field` names it"},
    503: {"description": "Database unreachable"},
}
FIT_PROBLEMS = (
    "Invalid input (`field` names it), or a layout that does not fit: type "
    "`/problems/weights-do-not-fit` (no memory left for a KV cache) or "
    "`/problems/sequence-does-not-fit` (one sequence of max_model_len does not fit)"
)
ALT_FORMATS: dict[str, Any] = {
    "text/csv": {"schema": {"type": "string"}},
    "text/plain": {"schema": {"type": "string"}},
}


_ANSWER_FIELDS = set(CapacityAnswer.model_fields)


def _answers(request: Request) -> AnswerCache:
    cache: AnswerCache = request.app.state.capacity_answers
    return cache


def _answer_row(detail: CapacityDetail) -> dict[str, Any]:
    """The CapacityAnswer fields of a detail: GET's body and every CSV row."""
    return detail.model_dump(mode="json", include=_ANSWER_FIELDS)


def _respond(
    request: Request,
    *,
    fmt: str,
    json_body: dict[str, Any],
    csv_rows: list[dict[str, Any]],
    value: Any,
    token: str,
    cache_control: str,
) -> Response:
    if fmt == "csv":
        body, media = csv_text(csv_rows).encode(), "text/csv; charset=utf-8"
    elif fmt == "text":
        body, media = single_value(value).encode(), "text/plain; charset=utf-8"
    elif fmt == "prometheus":
        body, media = capacity_exposition(json_body), exposition.CONTENT_TYPE
    else:
        body, media = json.dumps(json_body, separators=(",", ":")).encode(), "application/json"
    etag = etag_for(token, body)
    headers = {"ETag": etag, "Cache-Control": cache_control, "Vary": "Accept"}
    if etag_matches(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media, headers=headers)


@router.get(
    "/capacity",
    tags=["capacity"],
    operation_id="getCapacity",
    summary="max_num_seqs for one deployment (for autoscalers and spreadsheets)",
    description="One model on one GPU type with one layout. Small and cacheable: `ETag` changes "
    "when the catalog or the answer does; `If-None-Match` gets a 304. Add `format=csv` for a "
    "CSV row, or `field=max_num_seqs` for the bare number (Google Sheets `IMPORTDATA`, Excel "
    "`WEBSERVICE`). For KEDA's `metrics-api` scaler the number is the top-level "
    "`max_num_seqs` (`valueLocation: max_num_seqs`; with `peak_concurrency`, "
    "`replicas_for_peak_concurrency`), or with `format=prometheus` the gauge "
    "`kvplan_capacity_max_num_seqs`. A layout that does not fit is a 422, never a 200 with 0.",
    response_model=CapacityAnswer,
    responses={
        **PROBLEMS,
        200: {"content": {**ALT_FORMATS, **exposition.OPENAPI_CONTENT}},
        304: {"description": "Not modified"},
        422: {"description": FIT_PROBLEMS},
    },
)
def get_capacity(
    request: Request,
    query: Annotated[CapacityQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    prometheus = query.format == "prometheus"
    fmt = "prometheus" if prometheus else negotiate(request, query.format, query.field)
    key = (catalog.token, query.model_dump_json(exclude={"format", "field"}))
    detail = _answers(request).get(key)
    if detail is None:
        detail = service.capacity(CapacityQuestion.from_query(query), catalog)
        _answers(request).put(key, detail)
    service.require_fit(detail)
    metrics.capacity_requests.labels("GET", fmt).inc()
    data = _answer_row(detail)
    return _respond(
        request,
        fmt=fmt,
        json_body=data,
        csv_rows=[data],
        value=data.get(query.field) if query.field else None,
        token=catalog.token,
        cache_control=f"public, max-age={settings.capacity_max_age_seconds}",
    )


@router.post(
    "/capacity",
    tags=["capacity"],
    operation_id="computeCapacity",
    summary="Capacity with the explanation; model and GPU may be inline",
    description="The GET fields as a JSON body. `model` may be a catalog slug, an inline spec "
    "or `{hf_config: {...}}` (a config.json as it is); `gpu` a slug or `{memory_bytes: N}`; "
    "`kv_pool_bytes` replaces the computed pool. Answers with the hand-checkable explanation.",
    response_model=CapacityDetail,
    responses={**PROBLEMS, 200: {"content": {"text/csv": {"schema": {"type": "string"}}}}},
)
def post_capacity(
    request: Request, body: CapacityRequest, catalog: CatalogDep, metrics: MetricsDep
) -> Response:
    fmt = negotiate(request, None, None)
    detail = service.capacity(CapacityQuestion.from_body(body), catalog)
    metrics.capacity_requests.labels("POST", fmt).inc()
    return _respond(
        request,
        fmt=fmt,
        json_body=detail.model_dump(mode="json"),
        csv_rows=[_answer_row(detail)],
        value=None,
        token=catalog.token,
        cache_control="no-store",
    )


def _plan_rows(answer: PlanAnswer) -> list[dict[str, Any]]:
    options = ([answer.recommendation] if answer.recommendation else []) + answer.alternatives
    rows = []
    for rank, option in enumerate(options, start=1):
        data = option.model_dump(mode="json", exclude={"engine_flags", "warnings"})
        rows.append({"rank": rank, **data, "vllm_flags": option.engine_flags.get("vllm", "")})
    return rows


def _plan_response(
    request: Request, answer: PlanAnswer, *, fmt: str, field: str | None, token: str, cache: str
) -> Response:
    best = answer.recommendation
    value = getattr(best, field) if (best is not None and field is not None) else None
    return _respond(
        request,
        fmt=fmt,
        json_body=answer.model_dump(mode="json"),
        csv_rows=_plan_rows(answer),
        value=value,
        token=token,
        cache_control=cache,
    )


@router.post(
    "/plans",
    tags=["plans"],
    operation_id="createPlan",
    summary="The three sizing questions -> the cheapest GPU plan",
    description="Max context, peak concurrency and KV precision (plus options) -> the cheapest "
    "feasible plan over every catalog GPU (or the ones given) x every tensor-parallel size a "
    "node holds x replicas; ranked alternatives; every rejected candidate with its reason; "
    "the explanation; engine flags to paste. `Accept: text/csv` gives one row per option.",
    response_model=PlanAnswer,
    responses={**PROBLEMS, 200: {"content": {"text/csv": {"schema": {"type": "string"}}}}},
)
def post_plan(
    request: Request, body: PlanRequestBody, catalog: CatalogDep, metrics: MetricsDep
) -> Response:
    fmt = negotiate(request, None, None)
    answer = service.plan(PlanQuestion.from_body(body), catalog, metrics)
    return _plan_response(
        request, answer, fmt=fmt, field=None, token=catalog.token, cache="no-store"
    )


@router.get(
    "/plans",
    tags=["plans"],
    operation_id="getPlan",
    summary="The plan as a GET, for spreadsheets (catalog models and GPUs)",
    description="The POST /v1/plans questions as query parameters. `format=csv` gives one row "
    "per option; `field=total_gpus` (or gpu, replicas, cost_per_hour_usd, ...) gives the "
    "recommendation's value as text/plain.",
    response_model=PlanAnswer,
    responses={**PROBLEMS, 200: {"content": ALT_FORMATS}, 304: {"description": "Not modified"}},
)
def get_plan(
    request: Request,
    query: Annotated[PlanQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    fmt = negotiate(request, query.format, query.field)
    answer = service.plan(PlanQuestion.from_query(query), catalog, metrics)
    return _plan_response(
        request,
        answer,
        fmt=fmt,
        field=query.field,
        token=catalog.token,
        cache=f"public, max-age={settings.capacity_max_age_seconds}",
    )
