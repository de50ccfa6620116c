"""POST /v1/engine-logs: paste a start-up log, get its figures and kvplan's differences.

Thin: the body is the log as `text/plain` (hints as query parameters) or a JSON object; the
route turns a text body into the JSON one (`LogBodyRoute`), so both travel one way through
validation, the read key and the use case (`service.explain_log`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.routing import APIRoute
from starlette.types import Message

from ..deps import CatalogDep, refuse_misspelt_parameters
from ..errors import InvalidRequest
from ..security import READ, READ_OPENAPI
from . import service
from .schemas import (
    LOG_EXAMPLE,
    MAX_LOG_BYTES,
    MAX_LOG_MIB,
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
    a JSON request are validated and answered alike. Bytes that are not UTF-8 are replaced."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def dispatch(request: Request) -> Response:
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
