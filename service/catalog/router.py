"""Catalog endpoints: /v1/models and /v1/gpus.

Thin: each endpoint parses, calls the service and renders its answer. Writes take
`WriteSessionDep`, which commits when the endpoint returns (and refreshes this replica's
snapshot); reads are open; writes pass `AdminRoute`'s token check before their body is even read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from ..kit import conditional
from ..kit.deps import CatalogCacheDep, SessionDep, WriteSessionDep, refuse_misspelt_parameters
from ..kit.errors import InvalidRequest
from ..kit.formats import MEDIA_TYPES, negotiate, render_table, single_value
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
from . import answers, reads, service
from .filters import (
    Family,
    Fp8Support,
    LayerKindFilter,
    MaxParameters,
    MaxPriceUsdPerHour,
    MinMemoryBytes,
    MinParameters,
    Search,
    Vendor,
)
from .reads import STALE_HEADER, STALE_HEADER_DOC
from .schemas import (
    GpuCreate,
    GpuPage,
    GpuPatch,
    GpuRead,
    GpuReplace,
    ModelCreate,
    ModelImport,
    ModelPage,
    ModelPatch,
    ModelRead,
    ModelReplace,
)

models_router = APIRouter(prefix="/v1/models", tags=["models"], route_class=AdminRoute)
gpus_router = APIRouter(prefix="/v1/gpus", tags=["gpus"], route_class=AdminRoute)

# Documents the bearer scheme on write operations (AdminRoute does the checking).
WRITE = [Depends(bearer_scheme)]
# Reads: the read key where one is configured, and no misspelt query parameter.
READS: dict[str, Any] = {
    "dependencies": [*READ, Depends(refuse_misspelt_parameters)],
    "openapi_extra": READ_OPENAPI,
}

# ---------------------------------------------------------------------------------------------
# OpenAPI documentation of answers

# Descriptions only: errors.document_problems gives every 4xx/5xx the one ProblemDetail body.
_PROBLEMS: dict[int, str] = {
    401: "A write without an admin token (`Authorization: Bearer`), checked before the body "
    "is read, so it takes precedence over any problem with the body; or, where "
    "KVPLAN_READ_KEYS is set, a read without a read key.",
    406: "`Accept` names no format the list has (JSON, CSV, TSV, plain text).",
    404: "No entry with this slug; `suggestions` lists the closest slugs that exist.",
    409: "An entry with this slug already exists (slugs are unique).",
    412: "`If-Match` names a stale revision: someone changed the entry since you read it. "
    "GET it again (the current `ETag` is in this answer's headers) and reapply your change.",
    422: "A field is missing, malformed or out of bounds: `field` names it, and each entry of "
    '`errors` says the bound it broke (`constraint`, e.g. `{"ge": 1}`).',
    428: "`If-Match` is missing: updates and deletes must send the entry's `ETag`.",
    503: "The database is unreachable; retry later (`Retry-After`).",
}
_ETAG_HEADER = etag_header("entry")
_LOCATION_HEADER = {"description": "Where the new entry lives.", "schema": {"type": "string"}}


def _responses(*problems: int, ok: Responses | None = None) -> Responses:
    return problem_responses(_PROBLEMS, *problems, ok=ok)


_READ_ONE = _responses(
    401,
    404,
    ok={
        200: {
            "description": "The entry.",
            "headers": {"ETag": _ETAG_HEADER, STALE_HEADER: STALE_HEADER_DOC},
        },
        304: {
            "description": "`If-None-Match` names the current revision: unchanged, no body.",
            "headers": {"ETag": _ETAG_HEADER, STALE_HEADER: STALE_HEADER_DOC},
        },
    },
)
_TEXT = {"schema": {"type": "string"}}


def _listed(what: str) -> Responses:
    return {
        200: {
            "description": f"One page of {what} (JSON); with `format=csv` or `tsv` (or `Accept: "
            "text/csv`, `text/tab-separated-values`) every match as one table, not paged; with "
            f"`format=text` how many {what} match.",
            "headers": {"Link": LINK_HEADER, STALE_HEADER: STALE_HEADER_DOC},
            "content": {
                "text/csv": _TEXT,
                "text/tab-separated-values": _TEXT,
                "text/plain": _TEXT,
            },
        }
    }


_CREATED: Responses = {
    201: {
        "description": "Created.",
        "headers": {"ETag": _ETAG_HEADER, "Location": _LOCATION_HEADER},
    }
}
_UPDATED: Responses = {
    200: {"description": "The entry as now stored.", "headers": {"ETag": _ETAG_HEADER}}
}

# ---------------------------------------------------------------------------------------------
# parameters

SlugPath = Annotated[
    str,
    Path(description="The entry's slug. An unknown one is a 404 that suggests the closest."),
]
Limit = Annotated[int, Query(ge=1, le=500, description="Entries per page (at most 500).")]
Cursor = Annotated[
    str | None,
    Query(
        max_length=200,
        description="Where to continue: the `next_cursor` of the previous page (opaque).",
    ),
]
# Tables are not paged: every match, up to this many (more is a 422 asking for filters).
MAX_TABLE_ROWS = 10_000
ListFormat = Annotated[
    Literal["json", "csv", "tsv", "text"] | None,
    Query(
        description="`json` (default: one page), `csv` or `tsv` (every match in one table, not "
        f"paged, at most {MAX_TABLE_ROWS} rows; `limit` and `cursor` apply to JSON pages "
        "only), or `text` (how many match, one bare number). Overrides Accept."
    ),
]


def _entity_headers(response: Response, revision: int, location: str | None = None) -> None:
    response.headers["ETag"] = conditional.etag(revision)
    if location is not None:
        response.headers["Location"] = location


def _location(request: Request, prefix: str, slug: str) -> str:
    return f"{request.scope.get('root_path', '')}{prefix}/{slug}"


def _stale(response: Response, stale: bool) -> None:
    if stale:
        response.headers[STALE_HEADER] = "true"


def _read_one(
    response: Response, revision: int, stale: bool, if_none_match: str | None
) -> Response | None:
    _stale(response, stale)
    if conditional.if_none_match(if_none_match, revision):
        headers = {"ETag": conditional.etag(revision), "Cache-Control": "no-cache"}
        return Response(status_code=304, headers={**headers, **response.headers})
    _entity_headers(response, revision)
    response.headers["Cache-Control"] = "no-cache"
    return None


def _table(
    fmt: str,
    page: reads.Page[Any],
    *,
    columns: Sequence[str],
    to_row: Callable[[Any], dict[str, Any]],
    headers: dict[str, str],
) -> Response:
    """Every match as one CSV/TSV table, or how many match as text; never a page."""
    rows = page.items
    if page.next_cursor is not None:
        raise InvalidRequest(
            f"more than {MAX_TABLE_ROWS} entries match: narrow the list with its filters",
            field="format",
        )
    if fmt == "text":
        body = single_value(len(rows))
    else:
        table = [to_row(row) for row in rows]
        body = render_table(table, "tsv" if fmt == "tsv" else "csv", columns)
    return Response(body, media_type=MEDIA_TYPES[fmt], headers={**headers, "Vary": "Accept"})


# ---------------------------------------------------------------------------------------------
# GPUs


@gpus_router.get(
    "",
    operation_id="listGpus",
    summary="List GPUs",
    response_model=GpuPage,
    responses=_responses(401, 406, 422, ok=_listed("GPUs")),
    **READS,
)
def list_gpus(
    *,
    request: Request,
    response: Response,
    session: SessionDep,
    catalog: CatalogCacheDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    vendor: Vendor = None,
    min_memory_bytes: MinMemoryBytes = None,
    max_price_usd_per_hour: MaxPriceUsdPerHour = None,
    fp8_support: Fp8Support = None,
    format: ListFormat = None,
) -> GpuPage | Response:
    """GPUs in slug order, one page at a time; follow `next` (or the `Link` header).

    As a table (`format=csv` or `tsv`): every matching GPU, one row each, memory in bytes and
    GiB, prices in US dollars per hour; for spreadsheets (`IMPORTDATA`, Power Query).
    """
    fmt = negotiate(request, format, None)
    table = fmt != "json"
    page = reads.gpus(
        session,
        catalog,
        limit=MAX_TABLE_ROWS if table else limit,
        cursor=None if table else cursor,
        vendor=vendor,
        min_memory_bytes=min_memory_bytes,
        max_price_usd_per_hour=max_price_usd_per_hour,
        fp8_support=fp8_support,
    )
    _stale(response, page.stale)
    if table:
        return _table(
            fmt,
            page,
            columns=answers.GPU_CSV_COLUMNS,
            to_row=answers.gpu_csv_row,
            headers=dict(response.headers),
        )
    next_url = next_page_url(request, response, page.next_cursor)
    return GpuPage(items=page.items, limit=limit, next_cursor=page.next_cursor, next=next_url)


@gpus_router.post(
    "",
    status_code=201,
    operation_id="createGpu",
    summary="Add a GPU",
    response_model=GpuRead,
    dependencies=WRITE,
    responses=_responses(401, 409, 422, ok=_CREATED),
)
def create_gpu(
    *, body: GpuCreate, request: Request, response: Response, session: WriteSessionDep
) -> GpuRead:
    """`slug`, `name` and `memory_bytes` are enough. Needs an admin token."""
    row = service.create_gpu(session, body)
    _entity_headers(response, row.revision, _location(request, gpus_router.prefix, row.slug))
    return answers.gpu_read(row)


@gpus_router.get(
    "/{slug}",
    operation_id="getGpu",
    summary="One GPU",
    response_model=GpuRead,
    responses=_READ_ONE,
    **READS,
)
def get_gpu(
    *,
    slug: SlugPath,
    response: Response,
    session: SessionDep,
    catalog: CatalogCacheDep,
    if_none_match: IfNoneMatch = None,
) -> GpuRead | Response:
    """The GPU with its `ETag` (its revision), to send back in `If-Match` when editing it."""
    entry, stale = reads.gpu(session, catalog, slug)
    return _read_one(response, entry.revision, stale, if_none_match) or entry


@gpus_router.put(
    "/{slug}",
    operation_id="replaceGpu",
    summary="Replace a GPU",
    response_model=GpuRead,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 422, 428, ok=_UPDATED),
)
def replace_gpu(
    *,
    slug: SlugPath,
    body: GpuReplace,
    response: Response,
    session: WriteSessionDep,
    if_match: IfMatch = None,
) -> GpuRead:
    """Every field is replaced (omitted optional fields are cleared). Needs `If-Match`."""
    row = service.replace_gpu(session, slug, body, if_match)
    _entity_headers(response, row.revision)
    return answers.gpu_read(row)


@gpus_router.patch(
    "/{slug}",
    operation_id="patchGpu",
    summary="Change some fields of a GPU",
    response_model=GpuRead,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 422, 428, ok=_UPDATED),
)
def patch_gpu(
    *,
    slug: SlugPath,
    body: GpuPatch,
    response: Response,
    session: WriteSessionDep,
    if_match: IfMatch = None,
) -> GpuRead:
    """JSON merge patch: send only what changes; `null` clears. Needs `If-Match`."""
    row = service.patch_gpu(session, slug, body, if_match)
    _entity_headers(response, row.revision)
    return answers.gpu_read(row)


@gpus_router.delete(
    "/{slug}",
    status_code=204,
    operation_id="deleteGpu",
    summary="Remove a GPU",
    response_class=Response,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 428),
)
def delete_gpu(*, slug: SlugPath, session: WriteSessionDep, if_match: IfMatch = None) -> Response:
    """Needs `If-Match`. Stays deleted: `kvplan seed` does not add it back (POST it to restore)."""
    service.delete_gpu(session, slug, if_match)
    return Response(status_code=204)


# ---------------------------------------------------------------------------------------------
# models


@models_router.get(
    "",
    operation_id="listModels",
    summary="List models",
    response_model=ModelPage,
    responses=_responses(401, 406, 422, ok=_listed("models")),
    **READS,
)
def list_models(
    *,
    request: Request,
    response: Response,
    session: SessionDep,
    catalog: CatalogCacheDep,
    limit: Limit = 50,
    cursor: Cursor = None,
    family: Family = None,
    layer_kind: LayerKindFilter = None,
    q: Search = None,
    min_parameters: MinParameters = None,
    max_parameters: MaxParameters = None,
    format: ListFormat = None,
) -> ModelPage | Response:
    """Models in slug order, one page at a time; follow `next` (or the `Link` header).

    Models whose parameter count is unknown are left out when `min_parameters` or
    `max_parameters` is given. As a table (`format=csv` or `tsv`): every matching model, one
    row each (layer kinds `;`-separated, KV bytes per token at bf16, weights in bytes and GiB).
    """
    fmt = negotiate(request, format, None)
    table = fmt != "json"
    page = reads.models(
        session,
        catalog,
        limit=MAX_TABLE_ROWS if table else limit,
        cursor=None if table else cursor,
        family=family,
        layer_kind=layer_kind,
        q=q,
        min_parameters=min_parameters,
        max_parameters=max_parameters,
    )
    _stale(response, page.stale)
    if table:
        return _table(
            fmt,
            page,
            columns=answers.MODEL_CSV_COLUMNS,
            to_row=answers.model_csv_row,
            headers=dict(response.headers),
        )
    return ModelPage(
        items=page.items,
        limit=limit,
        next_cursor=page.next_cursor,
        next=next_page_url(request, response, page.next_cursor),
    )


@models_router.post(
    "",
    status_code=201,
    operation_id="createModel",
    summary="Add a model",
    response_model=ModelRead,
    dependencies=WRITE,
    responses=_responses(401, 409, 422, ok=_CREATED),
)
def create_model(
    *, body: ModelCreate, request: Request, response: Response, session: WriteSessionDep
) -> ModelRead:
    """The slug and the architecture facts. Needs an admin token."""
    row = service.create_model(session, body)
    _entity_headers(response, row.revision, _location(request, models_router.prefix, row.slug))
    return answers.model_read(row)


@models_router.post(
    "/import",
    status_code=201,
    operation_id="importModel",
    summary="Import a model from a Hugging Face config.json",
    response_model=ModelRead,
    dependencies=WRITE,
    responses=_responses(
        401,
        409,
        422,
        ok={
            200: {"description": "`dry_run`: the derived model; nothing was stored."},
            201: {"description": "Derived and stored.", "headers": _CREATED[201]["headers"]},
        },
    ),
)
def import_model(
    *, body: ModelImport, request: Request, response: Response, session: WriteSessionDep
) -> ModelRead:
    """POST the parsed `config.json`; kvplan derives the layer schedule. Needs an admin token.

    With `dry_run` the derived model is returned (200) and nothing is stored. A config key
    kvplan cannot interpret is a 422 naming it (`hf_config.<key>`).
    """
    row = service.import_model(session, body)
    if body.dry_run:
        response.status_code = 200
        return answers.model_read(row)
    _entity_headers(response, row.revision, _location(request, models_router.prefix, row.slug))
    return answers.model_read(row)


@models_router.get(
    "/{slug}",
    operation_id="getModel",
    summary="One model",
    response_model=ModelRead,
    responses=_READ_ONE,
    **READS,
)
def get_model(
    *,
    slug: SlugPath,
    response: Response,
    session: SessionDep,
    catalog: CatalogCacheDep,
    if_none_match: IfNoneMatch = None,
) -> ModelRead | Response:
    """The model with its `ETag` (its revision), to send back in `If-Match` when editing it."""
    entry, stale = reads.model(session, catalog, slug)
    return _read_one(response, entry.revision, stale, if_none_match) or entry


@models_router.put(
    "/{slug}",
    operation_id="replaceModel",
    summary="Replace a model",
    response_model=ModelRead,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 422, 428, ok=_UPDATED),
)
def replace_model(
    *,
    slug: SlugPath,
    body: ModelReplace,
    response: Response,
    session: WriteSessionDep,
    if_match: IfMatch = None,
) -> ModelRead:
    """Every field is replaced (omitted optional fields are cleared). Needs `If-Match`."""
    row = service.replace_model(session, slug, body, if_match)
    _entity_headers(response, row.revision)
    return answers.model_read(row)


@models_router.patch(
    "/{slug}",
    operation_id="patchModel",
    summary="Change some fields of a model",
    response_model=ModelRead,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 422, 428, ok=_UPDATED),
)
def patch_model(
    *,
    slug: SlugPath,
    body: ModelPatch,
    response: Response,
    session: WriteSessionDep,
    if_match: IfMatch = None,
) -> ModelRead:
    """JSON merge patch: send only what changes; `null` clears. Needs `If-Match`."""
    row = service.patch_model(session, slug, body, if_match)
    _entity_headers(response, row.revision)
    return answers.model_read(row)


@models_router.delete(
    "/{slug}",
    status_code=204,
    operation_id="deleteModel",
    summary="Remove a model",
    response_class=Response,
    dependencies=WRITE,
    responses=_responses(401, 404, 412, 428),
)
def delete_model(*, slug: SlugPath, session: WriteSessionDep, if_match: IfMatch = None) -> Response:
    """Needs `If-Match`. Stays deleted: `kvplan seed` does not add it back (POST it to restore)."""
    service.delete_model(session, slug, if_match)
    return Response(status_code=204)
