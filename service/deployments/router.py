"""Deployment profile endpoints: /v1/deployments and each profile's capacity.

Thin, as the catalog's: each endpoint parses, calls one use case and renders. Writes need an
admin token (`AdminRoute`, before the body is read) and commit through `WriteSessionDep`;
updates and deletes need the profile's `ETag` in `If-Match`. The capacity endpoint answers as
GET /v1/capacity does (JSON, CSV, one value, Prometheus text; `Cache-Control`, `ETag`, 304).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ..catalog.reads import STALE_HEADER, STALE_HEADER_DOC
from ..kit import conditional, exposition
from ..kit.answer_headers import answer_headers
from ..kit.db import Database
from ..kit.deps import (
    CatalogDep,
    MetricsDep,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    refuse_misspelt_parameters,
)
from ..kit.formats import csv_text, etag_for, etag_matches, negotiate, single_value
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
from ..planning.cache import AnswerCache
from ..planning.exposition import capacity_exposition
from ..planning.schemas import CAPACITY_FORMAT_DOC, CapacityField, CapacityFormat, table_row
from ..sizing import MAX_PEAK_CONCURRENCY
from . import service
from .models import DeploymentRow
from .schemas import (
    NAMESPACE_PATTERN,
    DeploymentCapacity,
    DeploymentCreate,
    DeploymentPage,
    DeploymentPatch,
    DeploymentRead,
    DeploymentReplace,
)

router = APIRouter(prefix="/v1/deployments", tags=["deployments"], route_class=AdminRoute)
# Reads: the read key where one is configured, and no misspelt query parameter (as the catalog).
READS: dict[str, Any] = {
    "dependencies": [*READ, Depends(refuse_misspelt_parameters)],
    "openapi_extra": READ_OPENAPI,
}

# Documents the bearer scheme on write operations (AdminRoute does the checking).
WRITE = [Depends(bearer_scheme)]

# Descriptions only: errors.document_problems gives every 4xx/5xx the one ProblemDetail body.
_PROBLEMS: dict[int, str] = {
    401: "A write without an admin token (`Authorization: Bearer`), checked before the body is "
    "read; or, where KVPLAN_READ_KEYS is set, a read without a read key.",
    404: "No profile with this name; `suggestions` lists the closest names.",
    406: "The Accept header asks for a format this endpoint cannot produce.",
    409: "A profile with this name already exists (names are unique), or the calibration "
    "`calibration_id` names was deleted while the request ran.",
    412: "`If-Match` names a stale revision: someone changed the profile since you read it. "
    "GET it again (the current `ETag` is in this answer's headers) and reapply your change.",
    422: "A field is missing, malformed or out of bounds (`field` names it), the catalog has "
    "no such model or GPU, `calibration_id` names no calibration or one that measured another "
    "deployment, or the sizing arithmetic refuses the inputs (the problem's type says which).",
    428: "`If-Match` is missing: updates and deletes must send the profile's `ETag`.",
    503: "The database is unreachable; retry later (`Retry-After`).",
}
_CAPACITY_422 = (
    "The profile cannot be sized now, with a type an autoscaler can act on: "
    "`/problems/missing-catalog-entry` (its model or GPU left the catalog), "
    "`/problems/weights-do-not-fit` (no memory left for a KV cache), "
    "`/problems/sequence-does-not-fit` (one sequence of max_model_len does not fit), or the "
    "sizing error's own type. Never a 200 with a made-up number."
)
_ETAG_HEADER = etag_header("profile")


def _responses(*problems: int, ok: Responses | None = None) -> Responses:
    return problem_responses(_PROBLEMS, *problems, ok=ok)


_UPDATED: dict[int | str, dict[str, Any]] = {
    200: {"description": "The profile as now stored.", "headers": {"ETag": _ETAG_HEADER}}
}

NamePath = Annotated[
    str,
    Path(description="The profile's name. An unknown one is a 404 that suggests the closest."),
]


def _entity(response: Response, row: DeploymentRow) -> DeploymentRead:
    response.headers["ETag"] = conditional.etag(row.revision)
    return service.read(row)


@router.get(
    "",
    operation_id="listDeployments",
    **READS,
    summary="List deployment profiles",
    response_model=DeploymentPage,
    responses=_responses(
        401,
        422,
        ok={
            200: {
                "description": "One page.",
                "headers": {"Link": LINK_HEADER},
            }
        },
    ),
)
def list_deployments(
    *,
    request: Request,
    response: Response,
    session: SessionDep,
    catalog: CatalogDep,
    limit: Annotated[int, Query(ge=1, le=500, description="Profiles per page (at most 500).")] = 50,
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="The `next_cursor` of the previous page (opaque)."),
    ] = None,
    model: Annotated[
        str | None,
        Query(max_length=100, description="Only profiles of this model (slug or HF id)."),
    ] = None,
    gpu: Annotated[
        str | None, Query(max_length=100, description="Only profiles on this GPU (slug or name).")
    ] = None,
    namespace: Annotated[
        str | None,
        Query(max_length=63, pattern=NAMESPACE_PATTERN, description="Only workloads in this one."),
    ] = None,
) -> DeploymentPage:
    """Profiles in name order, one page at a time; follow `next` (or the `Link` header)."""
    rows, next_cursor = service.list_profiles(
        session,
        limit=limit,
        cursor=cursor,
        model=None if model is None else service.stored_name(catalog, "model", model),
        gpu=None if gpu is None else service.stored_name(catalog, "gpu", gpu),
        namespace=namespace,
    )
    return DeploymentPage(
        items=[service.read(row) for row in rows],
        limit=limit,
        next_cursor=next_cursor,
        next=next_page_url(request, response, next_cursor),
    )


@router.post(
    "",
    status_code=201,
    operation_id="createDeployment",
    summary="Describe a deployment",
    response_model=DeploymentRead,
    dependencies=WRITE,
    responses=_responses(
        401,
        409,
        422,
        ok={
            201: {
                "description": "Created.",
                "headers": {
                    "ETag": _ETAG_HEADER,
                    "Location": {
                        "description": "Where the new profile lives.",
                        "schema": {"type": "string"},
                    },
                },
            }
        },
    ),
)
def create_deployment(
    *,
    body: DeploymentCreate,
    request: Request,
    response: Response,
    session: WriteSessionDep,
    catalog: CatalogDep,
) -> DeploymentRead:
    """A name, a catalog model and GPU, and the engine flags it runs with. Needs an admin token.

    The model and the GPU must be in the catalog and the arithmetic must accept the fields; a
    layout that does not fit is stored, and its capacity answers 422 until it does.
    """
    row = service.create(session, body, catalog)
    response.headers["Location"] = f"{request.scope.get('root_path', '')}{router.prefix}/{row.name}"
    return _entity(response, row)


@router.get(
    "/{name}",
    operation_id="getDeployment",
    **READS,
    summary="One deployment profile",
    response_model=DeploymentRead,
    responses=_responses(
        401,
        404,
        ok={
            200: {"description": "The profile.", "headers": {"ETag": _ETAG_HEADER}},
            304: {"description": "`If-None-Match` names the current revision: no body."},
        },
    ),
)
def get_deployment(
    *, name: NamePath, response: Response, session: SessionDep, if_none_match: IfNoneMatch = None
) -> DeploymentRead | Response:
    """The profile with its `ETag` (its revision), to send back in `If-Match` when editing it."""
    row = service.get(session, name)
    not_modified = conditional.revision_read(response, row.revision, if_none_match)
    return _entity(response, row) if not_modified is None else not_modified


@router.put(
    "/{name}",
    operation_id="replaceDeployment",
    summary="Replace a deployment profile",
    response_model=DeploymentRead,
    dependencies=WRITE,
    responses=_responses(401, 404, 409, 412, 422, 428, ok=_UPDATED),
)
def replace_deployment(
    *,
    name: NamePath,
    body: DeploymentReplace,
    response: Response,
    session: WriteSessionDep,
    catalog: CatalogDep,
    if_match: IfMatch = None,
) -> DeploymentRead:
    """Every field is replaced (omitted ones take their defaults). Needs `If-Match`."""
    return _entity(response, service.replace(session, name, body, if_match, catalog))


@router.patch(
    "/{name}",
    operation_id="patchDeployment",
    summary="Change some fields of a deployment profile",
    response_model=DeploymentRead,
    dependencies=WRITE,
    responses=_responses(401, 404, 409, 412, 422, 428, ok=_UPDATED),
)
def patch_deployment(
    *,
    name: NamePath,
    body: DeploymentPatch,
    response: Response,
    session: WriteSessionDep,
    catalog: CatalogDep,
    if_match: IfMatch = None,
) -> DeploymentRead:
    """JSON merge patch: send only what changes; `null` restores a default. Needs `If-Match`."""
    return _entity(response, service.patch(session, name, body, if_match, catalog))


@router.delete(
    "/{name}",
    status_code=204,
    operation_id="deleteDeployment",
    summary="Remove a deployment profile",
    response_class=Response,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 428),
)
def delete_deployment(
    *, name: NamePath, session: WriteSessionDep, if_match: IfMatch = None
) -> Response:
    """Needs `If-Match`. Its gauges leave /metrics at the next scrape."""
    service.delete(session, name, if_match)
    return Response(status_code=204)


@router.get(
    "/{name}/capacity",
    operation_id="getDeploymentCapacity",
    **READS,
    summary="max_num_seqs for a stored deployment (for autoscalers)",
    description="The GET /v1/capacity answer for the profile's model, GPU and flags, plus its "
    "name and revision. For KEDA's `metrics-api` scaler: `valueLocation: max_num_seqs` (or "
    "`replicas_for_peak_concurrency`, for the profile's planned peak or `peak_concurrency`); "
    "with `format=prometheus`, `valueLocation: kvplan_capacity_max_num_seqs`. Cacheable: "
    "`ETag` changes when the catalog, the profile or the answer does; `If-None-Match` gets a "
    "304. An unknown name is a 404; a profile that cannot be sized is a 422 whose type says "
    "why, never a 200 with a made-up number.",
    response_model=DeploymentCapacity,
    responses={
        **_responses(401, 404, 406),
        200: {
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                "text/plain": {"schema": {"type": "string"}},
                **exposition.OPENAPI_CONTENT,
            },
            "headers": {STALE_HEADER: STALE_HEADER_DOC},
        },
        304: {"description": "Not modified", "headers": {STALE_HEADER: STALE_HEADER_DOC}},
        422: {"description": _CAPACITY_422},
    },
)
async def get_deployment_capacity(
    *,
    name: NamePath,
    request: Request,
    catalog: CatalogDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    peak_concurrency: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_PEAK_CONCURRENCY,
            description="Size for this peak instead of the profile's: the answer's "
            "`replicas_for_peak_concurrency` holds it.",
        ),
    ] = None,
    format: Annotated[CapacityFormat | None, Query(description=CAPACITY_FORMAT_DOC)] = None,
    field: Annotated[
        CapacityField | None,
        Query(description="Answer with this one value as text/plain (spreadsheets)."),
    ] = None,
) -> Response:
    # A coroutine: the one worker thread it takes is the database read of the profile.
    fmt = "prometheus" if format == "prometheus" else negotiate(request, format, field)
    row = await run_in_threadpool(_profile, request.app.state.db, name)
    answers: AnswerCache = request.app.state.capacity_answers
    detail = service.capacity(row, catalog, peak_concurrency, answers)
    metrics.capacity_request("GET", fmt)
    data = {
        **detail.model_dump(mode="json", include=set(DeploymentCapacity.model_fields)),
        "deployment": row.name,
        "revision": row.revision,
    }
    if fmt == "prometheus":
        body, media = capacity_exposition(data, {"deployment": row.name}), exposition.CONTENT_TYPE
    elif fmt == "csv":  # the warnings go in the header (a row has no room for a list)
        cells = table_row({k: v for k, v in data.items() if k != "warnings"})
        body, media = csv_text([cells]).encode(), "text/csv; charset=utf-8"
    elif fmt == "text":
        body, media = (
            # the headline number unless `field` names another
            single_value(data.get(field or "max_num_seqs")).encode(),
            "text/plain; charset=utf-8",
        )
    else:
        body, media = json.dumps(data, separators=(",", ":")).encode(), "application/json"
    tag = etag_for(f"{catalog.token}.{row.revision}", body)
    headers = {
        "ETag": tag,
        "Cache-Control": f"public, max-age={settings.capacity_max_age_seconds}",
        "Vary": "Accept",
    }
    if request.app.state.catalog.stale:
        headers[STALE_HEADER] = "true"
    if etag_matches(request, tag):
        return Response(status_code=304, headers=headers)
    headers.update(answer_headers(detail.warnings))  # as GET /v1/capacity says them
    return Response(body, media_type=media, headers=headers)


def _profile(database: Database, name: str) -> DeploymentRow:
    """The stored profile, read in a session of its own (from a worker thread)."""
    with database.session() as session:
        return service.get(session, name)
