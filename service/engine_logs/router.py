"""POST /v1/engine-logs (paste a start-up log, get its figures and kvplan's differences) and
/v1/calibrations (keep one as what it measured).

Thin: the body is the log as `text/plain` (hints as query parameters) or a JSON object; the
route turns a text body into the JSON one (`LogBodyRoute`), so both travel one way through
validation, the read key or admin token, and the use case (`service.explain_log`,
`calibrations.create`). Calibration writes are admin-only and take `WriteSessionDep`, like the
catalog's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.routing import APIRoute
from starlette.types import Message

from ..kit import conditional
from ..kit.deps import CatalogDep, SessionDep, WriteSessionDep, refuse_misspelt_parameters
from ..kit.errors import InvalidRequest
from ..kit.routes import (
    LINK_HEADER,
    IfMatch,
    IfNoneMatch,
    Responses,
    etag_header,
    next_page_url,
    problem_responses,
)
from ..kit.security import (
    READ,
    READ_OPENAPI,
    WRITE_METHODS,
    AdminRoute,
    bearer_scheme,
    require_admin,
)
from ..planning.schemas import EngineName
from . import calibrations, service
from .schemas import (
    LOG_EXAMPLE,
    MAX_LOG_BYTES,
    MAX_LOG_MIB,
    CalibrationCreate,
    CalibrationPage,
    CalibrationRead,
    EngineLogAnswer,
    EngineLogQuery,
    EngineLogRequest,
)
from .service import LogQuestion

router = APIRouter(prefix="/v1", dependencies=[*READ, Depends(refuse_misspelt_parameters)])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "KVPLAN_READ_KEYS is set and no read key was presented"},
    404: {"description": "The model or GPU named (`model`, `gpu`) is not in the catalog"},
    422: {
        "description": "Nothing in the log is a line kvplan reads (`log-not-recognised`, with "
        f"`looked_for`), the log is over {MAX_LOG_MIB} MiB, or another field is invalid"
    },
    503: {"description": "Database unreachable"},
}

_TEXT_MEDIA = ("text/plain", "text/x-log", "application/octet-stream")


def _is_text(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() in _TEXT_MEDIA


def _too_large(size: int) -> InvalidRequest:
    return InvalidRequest(
        f"the log is {size:,} bytes or more; at most {MAX_LOG_MIB} MiB: send the start-up part "
        "(up to the first request served)",
        field="log",
    )


async def read_limited(request: Request, limit: int = MAX_LOG_BYTES) -> bytes:
    """The body, refused (422, field `log`) as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size)
        chunks.append(chunk)
    return b"".join(chunks)


class LogBodyRoute(APIRoute):
    """A route whose body is a log: `text/plain` (or `text/x-log`) is read, at most
    MAX_LOG_BYTES of it, and handed on as the JSON body `{"log": "..."}`, so a pasted log and
    a JSON request are validated and answered alike. Bytes that are not UTF-8 are replaced.
    With `admin_writes`, a write needs an admin token before its body is read (AdminRoute)."""

    admin_writes = False

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def dispatch(request: Request) -> Response:
            if self.admin_writes and request.method in WRITE_METHODS:
                require_admin(request)
            if request.method != "POST" or not _is_text(request.headers.get("content-type")):
                return await handler(request)
            raw = await read_limited(request)
            text = raw.decode("utf-8-sig", errors="replace")
            data = json.dumps({"log": text}).encode()
            scope = dict(request.scope)
            scope["headers"] = [
                (name, value)
                for name, value in request.scope["headers"]
                if name not in (b"content-type", b"content-length")
            ] + [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
            sent = False

            async def receive() -> Message:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": data, "more_body": False}
                return await request.receive()

            return await handler(Request(scope, receive))

        return dispatch


class AdminLogBodyRoute(LogBodyRoute):
    admin_writes = True


def log_question(body: EngineLogRequest, query: EngineLogQuery) -> LogQuestion:
    """The body's fields, else the query's hints."""
    return LogQuestion(
        log=body.log,
        engine=body.engine or query.engine,
        engine_version=body.engine_version or query.engine_version,
        model=body.model or query.model,
        gpu=body.gpu or query.gpu,
        hf_config=body.hf_config,
    )


TEXT_BODY_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "content": {"text/plain": {"schema": {"type": "string"}, "example": LOG_EXAMPLE}}
    }
}


def post_engine_log(
    body: EngineLogRequest,
    query: Annotated[EngineLogQuery, Query()],
    catalog: CatalogDep,
) -> Response:
    answer = service.explain_log(log_question(body, query), catalog)
    return Response(
        json.dumps(service.answer_json(answer), separators=(",", ":")),
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


router.add_api_route(
    "/engine-logs",
    post_engine_log,
    methods=["POST"],
    tags=["engine-logs"],
    operation_id="explainEngineLog",
    summary="Read an engine's start-up log and set it against kvplan's prediction",
    description="The log as `text/plain` (as pasted from `kubectl logs`: timestamps, process "
    "prefixes, colours and interleaved ranks may stay; `engine`, `engine_version`, `model` and "
    "`gpu` as query parameters) or as JSON (`log` and the same hints, plus `hf_config` for a "
    "model the catalog lacks). Answers the engine and version, every flag the log reveals "
    "(`settings`), every figure it printed (`reported`, bytes and counts, absent when not "
    "printed), the lines it recognised, and, where the model and the GPU are known, kvplan's "
    "own `prediction` for the same settings and the `differences` line by line. Stores "
    f"nothing. At most {MAX_LOG_MIB} MiB.",
    response_model=EngineLogAnswer,
    responses=PROBLEMS,
    route_class_override=LogBodyRoute,
    openapi_extra={**READ_OPENAPI, **TEXT_BODY_OPENAPI},
)


# ---------------------------------------------------------------------------------------------
# /v1/calibrations: logs kept as what they measured (admin writes, like the catalog's)

calibrations_router = APIRouter(
    prefix="/v1/calibrations", tags=["calibrations"], route_class=AdminRoute
)

# Documents the bearer scheme on writes (AdminRoute and AdminLogBodyRoute do the checking).
WRITE = [Depends(bearer_scheme)]
READS: dict[str, Any] = {
    "dependencies": [*READ, Depends(refuse_misspelt_parameters)],
    "openapi_extra": READ_OPENAPI,
}
_ETAG = etag_header("calibration")
_CALIBRATION_PROBLEMS: dict[int, str] = {
    401: "A write without an admin token (checked before the body is read), or, where "
    "KVPLAN_READ_KEYS is set, a read without a read key.",
    404: "No such calibration; or a model or GPU slug the request names is not in the catalog.",
    409: "POST: this deployment (the same key) is calibrated already; `calibration_id` names "
    "it. DELETE it to replace it. DELETE: deployment profiles point at the calibration "
    "(`deployments` lists them); point them elsewhere first.",
    412: "`If-Match` names a stale revision.",
    422: "A field is missing or invalid; the log has no line kvplan reads, or no pool, "
    "blocks or tokens; or no prediction can be made (`field` says what to add).",
    428: "`If-Match` is missing: deletes must send the calibration's `ETag`.",
    503: "The database is unreachable; retry later.",
}


def _problems(*codes: int, ok: Responses | None = None) -> Responses:
    return problem_responses(_CALIBRATION_PROBLEMS, *codes, ok=ok)


# Ids are PostgreSQL `integer`s: a larger number is refused (422), never an overflow (500).
CalibrationId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The calibration's id.")]


def post_calibration(
    *,
    body: CalibrationCreate,
    query: Annotated[EngineLogQuery, Query()],
    request: Request,
    response: Response,
    session: WriteSessionDep,
    catalog: CatalogDep,
) -> CalibrationRead:
    """Store a log as a calibration. Needs an admin token."""
    row = calibrations.create(session, log_question(body, query), body.notes, catalog)
    response.headers["ETag"] = conditional.etag(row.revision)
    root = request.scope.get("root_path", "")
    response.headers["Location"] = f"{root}{calibrations_router.prefix}/{row.id}"
    return calibrations.read(row)


calibrations_router.add_api_route(
    "",
    post_calibration,
    methods=["POST"],
    status_code=201,
    operation_id="createCalibration",
    summary="Keep an engine's start-up log as a calibration",
    description="The log as POST /v1/engine-logs takes it (`text/plain` with the hints as query "
    "parameters, or JSON with `notes` beside them), read and stored as what it measured, "
    "keyed by the deployment it ran: the model (catalog slug, or the sha256 of the attached "
    "config.json), the GPU (slug, or its total bytes), the engine and its release, tensor and "
    "pipeline parallel sizes, the KV dtype, max_num_batched_tokens and enforce_eager. From "
    "then on a capacity question with that key takes the measured pool, moved to its own "
    "utilization (pool = utilization x total - measured non-KV memory), instead of kvplan's "
    "estimate, and says so in `calibrated_from`; blocks, tokens and max_num_seqs follow by "
    "the engine's arithmetic for the question's max_model_len and max_num_seqs. Needs an "
    "admin token.",
    response_model=CalibrationRead,
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
    route_class_override=AdminLogBodyRoute,
    openapi_extra=TEXT_BODY_OPENAPI,
)


@calibrations_router.get(
    "",
    operation_id="listCalibrations",
    summary="List calibrations",
    response_model=CalibrationPage,
    responses=_problems(
        401,
        422,
        ok={
            200: {
                "description": "One page, oldest first.",
                "headers": {"Link": LINK_HEADER},
            }
        },
    ),
    **READS,
)
def list_calibrations(
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
    gpu: Annotated[
        str | None, Query(min_length=1, max_length=100, description="Only this GPU key.")
    ] = None,
    engine: Annotated[EngineName | None, Query(description="Only this engine.")] = None,
) -> CalibrationPage:
    """Calibrations oldest first, one page at a time; follow `next` (or the `Link` header)."""
    rows, next_cursor = calibrations.list_page(
        session, limit=limit, cursor=cursor, model=model, gpu=gpu, engine=engine
    )
    return CalibrationPage(
        items=[calibrations.read(row) for row in rows],
        limit=limit,
        next_cursor=next_cursor,
        next=next_page_url(request, response, next_cursor),
    )


@calibrations_router.get(
    "/{calibration_id}",
    operation_id="getCalibration",
    summary="One calibration",
    response_model=CalibrationRead,
    responses=_problems(
        401,
        404,
        ok={
            200: {"description": "The calibration.", "headers": {"ETag": _ETAG}},
            304: {"description": "`If-None-Match` names the current revision: no body."},
        },
    ),
    **READS,
)
def get_calibration(
    *,
    calibration_id: CalibrationId,
    response: Response,
    session: SessionDep,
    if_none_match: IfNoneMatch = None,
) -> CalibrationRead | Response:
    """The calibration with its `ETag`, to send back in `If-Match` when deleting it."""
    row = calibrations.get(session, calibration_id)
    not_modified = conditional.revision_read(response, row.revision, if_none_match)
    return calibrations.read(row) if not_modified is None else not_modified


@calibrations_router.delete(
    "/{calibration_id}",
    status_code=204,
    operation_id="deleteCalibration",
    summary="Remove a calibration",
    response_class=Response,
    dependencies=WRITE,
    responses=_problems(401, 404, 409, 412, 428),
)
def delete_calibration(
    *, calibration_id: CalibrationId, session: WriteSessionDep, if_match: IfMatch = None
) -> Response:
    """Needs `If-Match`. Questions with its key go back to kvplan's own estimate. Refused
    (409, naming them) while deployment profiles point at it: their figures would change."""
    calibrations.delete(session, calibration_id, if_match)
    return Response(status_code=204)
