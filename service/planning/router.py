"""Sizing endpoints: /v1/capacity (autoscalers, sheets) and /v1/plans. Thin: parse, call, render."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from ..deps import CatalogDep, MetricsDep, SettingsDep
from ..formats import csv_text, etag_for, etag_matches, negotiate, single_value
from ..metrics import Metrics
from ..sizing import Parallelism, SizingError
from ..sizing.capacity import Gpu
from ..sizing.planner import Plan
from . import service
from .cache import AnswerCache
from .schemas import (
    CapacityAnswer,
    CapacityDetail,
    CapacityQuery,
    CapacityRequest,
    PlanAnswer,
    PlanQuery,
    PlanRequestBody,
)

router = APIRouter(prefix="/v1")

# Descriptions only: errors.document_problems gives every 4xx/5xx the one ProblemDetail body.
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "Unknown model or GPU slug"},
    406: {"description": "Unsupported Accept"},
    422: {"description": "Invalid input; `field` names it"},
    503: {"description": "Database unreachable"},
}
ALT_FORMATS: dict[str, Any] = {
    "text/csv": {"schema": {"type": "string"}},
    "text/plain": {"schema": {"type": "string"}},
}


def _answers(request: Request) -> AnswerCache:
    cache: AnswerCache = request.app.state.capacity_answers
    return cache


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
    "`WEBSERVICE`).",
    response_model=CapacityAnswer,
    responses={**PROBLEMS, 200: {"content": ALT_FORMATS}, 304: {"description": "Not modified"}},
)
def get_capacity(
    request: Request,
    query: Annotated[CapacityQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    fmt = negotiate(request, query.format, query.field)
    key = (catalog.token, query.model_dump_json(exclude={"format", "field"}))
    answer = _answers(request).get(key)
    if answer is None:
        entry = catalog.model(query.model)
        gpu = _query_gpu(query, catalog)
        capacity = service.capacity_for(
            arch=entry.architecture,
            gpu=gpu,
            max_model_len=service.default_context(entry.architecture, query.max_model_len),
            kv_cache_dtype=query.kv_cache_dtype,
            parallel=Parallelism(
                query.tensor_parallel_size, query.pipeline_parallel_size, query.data_parallel_size
            ),
            fields=query,
        )
        answer = service.capacity_answer(
            capacity, entry.slug, gpu, catalog.version, query.peak_concurrency
        )
        _answers(request).put(key, answer)
    metrics.capacity_requests.labels("GET", fmt).inc()
    data = answer.model_dump(mode="json")
    return _respond(
        request,
        fmt=fmt,
        json_body=data,
        csv_rows=[data],
        value=data.get(query.field) if query.field else None,
        token=catalog.token,
        cache_control=f"public, max-age={settings.capacity_max_age_seconds}",
    )


def _query_gpu(query: CapacityQuery, catalog: Any) -> Gpu:
    if query.gpu is not None:
        gpu: Gpu = catalog.gpu(query.gpu).gpu
        if query.gpu_memory_bytes is not None:
            raise SizingError("gpu_memory_bytes", "give either gpu or gpu_memory_bytes, not both")
        return gpu
    if query.gpu_memory_bytes is None:
        raise SizingError("gpu", "give a GPU slug or gpu_memory_bytes")
    return Gpu(memory_bytes=query.gpu_memory_bytes, slug=f"{query.gpu_memory_bytes}B")


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
    label, arch = service.resolve_model(body.model, catalog)
    gpu = service.resolve_gpu(body.gpu, catalog)
    capacity = service.capacity_for(
        arch=arch,
        gpu=gpu,
        max_model_len=service.default_context(arch, body.max_model_len),
        kv_cache_dtype=body.kv_cache_dtype,
        parallel=Parallelism(
            body.tensor_parallel_size, body.pipeline_parallel_size, body.data_parallel_size
        ),
        fields=body,
    )
    detail = service.capacity_detail(
        capacity,
        label,
        gpu,
        catalog.version,
        with_explanation=body.explain,
        peak_concurrency=body.peak_concurrency,
    )
    metrics.capacity_requests.labels("POST", fmt).inc()
    row = service.capacity_answer(
        capacity, label, gpu, catalog.version, body.peak_concurrency
    ).model_dump(mode="json")
    return _respond(
        request,
        fmt=fmt,
        json_body=detail.model_dump(mode="json"),
        csv_rows=[row],
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
    with _counted(metrics) as count:
        label, arch = service.resolve_model(body.model, catalog)
        gpus = service.candidate_gpus(body.gpus, catalog)
        result = count(service.plan_for(arch=arch, gpus=gpus, fields=body))
    answer = service.plan_answer(result, label, catalog.version, body.explain)
    return _plan_response(
        request, answer, fmt=fmt, field=None, token=catalog.token, cache="no-store"
    )


@contextmanager
def _counted(metrics: Metrics) -> Iterator[Callable[[Plan], Plan]]:
    """Counts the plan made inside the block by outcome; a sizing error counts as invalid."""

    def count(result: Plan) -> Plan:
        metrics.plans.labels("feasible" if result.recommendation else "infeasible").inc()
        return result

    try:
        yield count
    except SizingError:
        metrics.plans.labels("invalid").inc()
        raise


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
    entry = catalog.model(query.model)
    slugs = [s.strip() for s in (query.gpus or "").split(",") if s.strip()]
    gpus = service.candidate_gpus(slugs or None, catalog)
    with _counted(metrics) as count:
        result = count(service.plan_for(arch=entry.architecture, gpus=gpus, fields=query))
    answer = service.plan_answer(result, entry.slug, catalog.version, with_explanation=False)
    return _plan_response(
        request,
        answer,
        fmt=fmt,
        field=query.field,
        token=catalog.token,
        cache=f"public, max-age={settings.capacity_max_age_seconds}",
    )
