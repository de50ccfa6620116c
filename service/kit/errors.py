"""One error base, one renderer: every error is an RFC 9457 `application/problem+json`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..sizing import SizingError

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("kvplan")

# Problem types; `type` is a relative URI served by GET /problems/{code}. One entry per `code` of
# a Problem or SizingError class (tests/health/test_problem_types.py holds them together).
PROBLEM_TYPES: dict[str, str] = {
    "invalid-request": "A field is missing, malformed or out of bounds; `errors` says which.",
    "invalid-input": "The sizing arithmetic cannot answer for these inputs; `field` says which.",
    "unknown-layer-kind": "The model has a layer kind kvplan does not size; it is never guessed.",
    "invalid-dtype": "A dtype or weight format kvplan does not know; the detail lists them.",
    "invalid-parallelism": "The tensor/pipeline layout does not divide the model.",
    "log-not-recognised": "No line of the engine log is one kvplan reads; the detail lists them.",
    "weights-do-not-fit": "The weights and the engine's overheads leave no memory for a KV cache "
    "on this GPU and layout: use more GPUs per replica, a larger GPU or smaller weights.",
    "sequence-does-not-fit": "One sequence of max_model_len does not fit the KV pool; `detail` "
    "says the longest max_model_len that does.",
    "missing-catalog-entry": "A stored deployment names a model or GPU that is no longer in the "
    "catalog; `field` says which.",
    "not-found": "No such resource; `suggestions` lists the closest slugs.",
    "conflict": "A resource with that slug already exists.",
    "unauthorized": "Writes need `Authorization: Bearer <admin token>`.",
    "precondition-failed": "The If-Match revision is stale: someone changed the entry first.",
    "precondition-required": "Updates and deletes must send If-Match with the entry's ETag.",
    "not-acceptable": "The Accept header asks for a format kvplan cannot produce.",
    "service-unavailable": "The database is unreachable; retry later.",
    "method-not-allowed": "This path does not accept that method.",
    "unsupported-media-type": "The body's Content-Type is not one this path reads; `accepted` "
    "lists those it does (a JSON body must be sent as `application/json`).",
    "content-too-large": "The request body is larger than this server accepts "
    "(`KVPLAN_MAX_BODY_BYTES`, 1 MiB by default); it was not read.",
    "too-many-requests": "This admin token has written more than the replica allows "
    "(`KVPLAN_WRITE_RATE_PER_SECOND`, `KVPLAN_WRITE_BURST`); retry after `Retry-After` seconds.",
    "internal-error": "kvplan failed; this is a bug.",
}


class ProblemDetail(BaseModel):
    """An RFC 9457 problem, as every kvplan error is answered (`application/problem+json`)."""

    type: str = Field(description="Problem type, a relative URI; GET it to read what it means.")
    title: str = Field(description="Short summary of the problem type.")
    status: int = Field(description="The HTTP status code.")
    detail: str = Field(description="What went wrong this time, for people.")
    instance: str = Field(description="The request path.")
    field: str | None = Field(None, description="The input that is wrong, when one is.")
    errors: list[dict[str, Any]] | None = Field(
        None, description="Every validation error: field, message and the bound it broke."
    )
    suggestions: list[str] | None = Field(
        None, description="For an unknown slug: the closest slugs that exist."
    )
    accepted: list[str] | None = Field(
        None, description="For an unsupported Content-Type (415): the media types accepted."
    )
    row: int | None = Field(
        None, description="For a table that cannot be read: its row (1 is the first question)."
    )


class Problem(Exception):
    """Base of every error kvplan answers with.

    Each subclass fixes `status`, `code` and `title`; a problem whose type is only known at run
    time (a sizing error's code, an HTTP status Starlette raised) passes them in instead.
    """

    status = 500
    code = "internal-error"
    title = "Internal error"

    def __init__(
        self,
        detail: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        status: int | None = None,
        code: str | None = None,
        title: str | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.headers = headers or {}
        self.extra = extra
        self.status = type(self).status if status is None else status
        self.code = type(self).code if code is None else code
        self.title = type(self).title if title is None else title

    def body(self, instance: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": f"/problems/{self.code}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
        }
        if self.field is not None:
            out["field"] = self.field
        out.update(self.extra)
        return out


class InvalidRequest(Problem):
    status, code, title = 422, "invalid-request", "Invalid request"


class NotFound(Problem):
    status, code, title = 404, "not-found", "Not found"


class Conflict(Problem):
    status, code, title = 409, "conflict", "Conflict"


class Unauthorized(Problem):
    status, code, title = 401, "unauthorized", "Unauthorized"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": 'Bearer realm="kvplan"'})


class PreconditionFailed(Problem):
    status, code, title = 412, "precondition-failed", "Precondition failed"


class PreconditionRequired(Problem):
    status, code, title = 428, "precondition-required", "Precondition required"


class WeightsDoNotFit(Problem):
    status, code, title = 422, "weights-do-not-fit", "The weights leave no room for a KV cache"


class SequenceDoesNotFit(Problem):
    status, code, title = 422, "sequence-does-not-fit", "One sequence does not fit the KV cache"


class MissingCatalogEntry(Problem):
    status, code, title = 422, "missing-catalog-entry", "A catalog entry it names is gone"


class NotAcceptable(Problem):
    status, code, title = 406, "not-acceptable", "Not acceptable"


class MethodNotAllowed(Problem):
    status, code, title = 405, "method-not-allowed", "Method not allowed"


class UnsupportedMediaType(Problem):
    status, code, title = 415, "unsupported-media-type", "Unsupported media type"


class ContentTooLarge(Problem):
    status, code, title = 413, "content-too-large", "Content too large"


class TooManyRequests(Problem):
    status, code, title = 429, "too-many-requests", "Too many requests"

    def __init__(self, detail: str, *, retry_after: str) -> None:
        super().__init__(detail, headers={"Retry-After": retry_after})


class ServiceUnavailable(Problem):
    status, code, title = 503, "service-unavailable", "Service unavailable"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"Retry-After": "5"})


def problem_response(problem: Problem, request: Request) -> JSONResponse:
    return JSONResponse(
        problem.body(request.url.path),
        status_code=problem.status,
        media_type=PROBLEM_JSON,
        headers=problem.headers,
    )


def _field_name(loc: tuple[Any, ...]) -> str:
    parts = (
        [str(p) for p in loc[1:]]
        if loc and loc[0] in ("body", "query", "path", "header")
        else [str(p) for p in loc]
    )
    return ".".join(parts) or str(loc[0] if loc else "body")


def _json_syntax_message(err: dict[str, Any], document: Any) -> str:
    """A JSON syntax error at its line and column: FastAPI passes the offset json.loads gave
    (fastapi/routing.py `get_request_handler`: loc ("body", JSONDecodeError.pos), the
    decoder's message as ctx["error"], the text as the exception's body)."""
    loc = tuple(err.get("loc", ()))
    ctx = err.get("ctx")
    reason = ctx.get("error") if isinstance(ctx, dict) else None
    if len(loc) == 2 and isinstance(loc[1], int) and isinstance(document, str) and reason:
        offset = loc[1]
        line = document.count("\n", 0, offset) + 1
        column = offset - document.rfind("\n", 0, offset)
        return f"the body is not valid JSON: {reason} at line {line} column {column}"
    return f"the body is not valid JSON ({err.get('msg', 'invalid')})"


def _validation_problem(exc: RequestValidationError) -> InvalidRequest:
    errors: list[dict[str, Any]] = []
    for raw in exc.errors():
        err = dict(raw)
        loc = tuple(err.get("loc", ()))
        if err.get("type") == "json_invalid":
            # pydantic locates a JSON syntax error by character offset, not by field.
            err["msg"] = _json_syntax_message(err, exc.body)
            loc = ("body",)
        entry: dict[str, Any] = {
            "field": _field_name(loc),
            "in": str(loc[0]) if loc else "body",
            "message": err.get("msg", "invalid"),
            "type": err.get("type", "value_error"),
        }
        ctx = err.get("ctx")
        if isinstance(ctx, dict):
            bounds = {
                k: v
                for k, v in ctx.items()
                if k in ("gt", "ge", "lt", "le", "min_length", "max_length", "expected", "pattern")
            }
            if bounds:
                entry["constraint"] = {
                    k: v if isinstance(v, int | float | str) else str(v) for k, v in bounds.items()
                }
        errors.append(entry)
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    detail = f"{first['field']}: {first['message']}"
    constraint = first.get("constraint")
    if isinstance(constraint, dict):
        detail += f" ({', '.join(f'{k} {v}' for k, v in constraint.items())})"
    return InvalidRequest(detail, field=first["field"], errors=errors)


def _is_json(content_type: str) -> bool:
    """What FastAPI parses as JSON: application/json or application/*+json."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def accepted_media_types(route: Any) -> list[str]:
    """The body types a route reads: JSON, and those its spec's requestBody adds (a CSV table
    of questions for POST /v1/plans, a log as text/plain)."""
    extra = getattr(route, "openapi_extra", None) or {}
    return ["application/json", *extra.get("requestBody", {}).get("content", {})]


def unsupported_body(request: Request, exc: RequestValidationError) -> Problem | None:
    """A 415 for a body FastAPI did not parse as JSON because its Content-Type says it is
    something else (a JSON object sent as text/plain was a 422 "Input should be a valid
    dictionary"); None when the body was JSON, or the type is one the route reads."""
    content_type = request.headers.get("content-type")
    if not content_type or _is_json(content_type):
        return None
    if not any(tuple(e.get("loc", ())) == ("body",) for e in exc.errors()):
        return None
    accepted = accepted_media_types(request.scope.get("route"))
    media = content_type.split(";", 1)[0].strip()
    if media.lower() in accepted:
        return None
    return UnsupportedMediaType(
        f"the body is sent as {media}; {request.url.path} reads {', '.join(accepted)}",
        field="content-type",
        accepted=accepted,
    )


def validation_problem(exc: ValidationError) -> InvalidRequest:
    """A question pydantic refused outside a request (the CLI's): the problem HTTP answers."""
    return _validation_problem(RequestValidationError(exc.errors(include_url=False)))


def sizing_problem(exc: SizingError) -> Problem:
    """A 422 whose type is the sizing error's own code (`/problems/unknown-layer-kind`, ...)."""
    return InvalidRequest(
        exc.reason, field=exc.field, code=exc.code, title="The sizing inputs cannot be answered"
    )


_HTTP_PROBLEMS: dict[int, type[Problem]] = {
    404: NotFound,
    405: MethodNotAllowed,
    406: NotAcceptable,
}


def unreadable_body(cause: BaseException | None) -> InvalidRequest:
    """A body FastAPI could not parse (its 400) as the 422 a JSON syntax error gets."""
    if isinstance(cause, UnicodeDecodeError):
        message = f"the body is not valid JSON (not UTF-8: byte {cause.start})"
    elif isinstance(cause, RecursionError):
        message = "the body is not valid JSON kvplan reads (nested too deeply)"
    else:
        message = "the body is not valid JSON"
    error = {"field": "body", "in": "body", "message": message, "type": "json_invalid"}
    return InvalidRequest(f"body: {message}", field="body", errors=[error])


def http_problem(exc: StarletteHTTPException) -> Problem:
    """A Starlette/FastAPI HTTPException (unknown path, wrong method, ...) as a problem."""
    if exc.status_code == 400:
        # FastAPI's only 400: "There was an error parsing the body" (not UTF-8, too deep, ...)
        return unreadable_body(exc.__cause__)
    cls = _HTTP_PROBLEMS.get(exc.status_code)
    if cls is not None:
        return cls(str(exc.detail))
    return Problem(
        str(exc.detail), status=exc.status_code, code="invalid-request", title=str(exc.detail)
    )


def schema_missing(exc: DBAPIError) -> bool:
    """A table is missing: the database answers but was never migrated (or is mid-migration)."""
    # PostgreSQL's SQLSTATE undefined_table; SQLite says it in words
    return getattr(exc.orig, "sqlstate", None) == "42P01" or "no such table" in str(exc.orig)


def _not_migrated(exc: DBAPIError) -> ServiceUnavailable:
    log.warning("database not migrated: %s", exc.orig)
    return ServiceUnavailable("the database schema is not migrated: run `kvplan migrate`")


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problem = unsupported_body(request, exc) or _validation_problem(exc)
        return problem_response(problem, request)

    @app.exception_handler(SizingError)
    async def _sizing(request: Request, exc: SizingError) -> JSONResponse:
        return problem_response(sizing_problem(exc), request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem_response(http_problem(exc), request)

    @app.exception_handler(OperationalError)
    async def _db_down(request: Request, exc: OperationalError) -> JSONResponse:
        if schema_missing(exc):
            return problem_response(_not_migrated(exc), request)
        log.warning("database unreachable: %s", exc.orig)
        return problem_response(ServiceUnavailable("the database is unreachable"), request)

    @app.exception_handler(PoolTimeout)
    async def _pool_exhausted(request: Request, exc: PoolTimeout) -> JSONResponse:
        log.warning("no free database connection: %s", exc)
        return problem_response(
            ServiceUnavailable("every database connection is busy; the database is slow"), request
        )

    @app.exception_handler(DBAPIError)
    async def _db_error(request: Request, exc: DBAPIError) -> JSONResponse:
        if schema_missing(exc):
            return problem_response(_not_migrated(exc), request)
        if exc.connection_invalidated:
            return problem_response(ServiceUnavailable("the database connection was lost"), request)
        log.exception("database error")
        return problem_response(Problem("a database error occurred"), request)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return problem_response(Problem("an unexpected error occurred"), request)


_PROBLEM_REF = {"$ref": "#/components/schemas/ProblemDetail"}
_TOO_MANY_WRITES: dict[str, Any] = {
    "description": "This admin token has made more writes than this replica allows "
    "(`KVPLAN_WRITE_RATE_PER_SECOND` a second, in bursts of `KVPLAN_WRITE_BURST`; 10 and 100 "
    "by default); checked before the body is read. `detail` states the limit.",
    "headers": {
        "Retry-After": {
            "description": "Whole seconds until this token may write again.",
            "schema": {"type": "string"},
        }
    },
}
# `kvplan serve` answers a request line and headers longer than
# KVPLAN_H11_MAX_INCOMPLETE_EVENT_BYTES itself, before any route (service/kit/deadlines.py), in
# plain text; a GET /v1/capacity whose query string is that long gets it (h11 answers 400).
_HEAD_TOO_LARGE: dict[str, Any] = {
    "description": "The request line and headers are longer than the server reads "
    "(`KVPLAN_H11_MAX_INCOMPLETE_EVENT_BYTES`, 16 KiB by default): a query string that long. "
    "Answered by the server before the request reaches kvplan, as plain text, and the "
    "connection closed.",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}
_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


def document_problems(spec: dict[str, Any]) -> dict[str, Any]:
    """Every 4xx/5xx answer in the spec is one `ProblemDetail` schema, as problem+json.

    FastAPI documents its own `HTTPValidationError` for 422s; kvplan never answers with it.
    """
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    schemas["ProblemDetail"] = ProblemDetail.model_json_schema(
        ref_template="#/components/schemas/{model}"
    )
    for name in _FASTAPI_VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    for methods in spec.get("paths", {}).values():
        for operation in methods.values():
            if {"HTTPBearer": []} in operation.get("security", []):  # a write
                operation["responses"].setdefault("429", _TOO_MANY_WRITES)
            if "requestBody" in operation:
                operation["responses"].setdefault(
                    "415",
                    {
                        "description": "The body's Content-Type is not one this operation "
                        "reads; `accepted` lists those it does."
                    },
                )
                operation["responses"].setdefault(
                    "413",
                    {
                        "description": "The body is larger than the server accepts "
                        "(`KVPLAN_MAX_BODY_BYTES`, 1 MiB by default); it was not read."
                    },
                )
            for status, answer in operation.get("responses", {}).items():
                if status.isdigit() and int(status) >= 400:
                    answer["content"] = {PROBLEM_JSON: {"schema": dict(_PROBLEM_REF)}}
                    if answer.get("description") == "Validation Error":
                        answer["description"] = (
                            "Invalid input: `field` names it, `errors` lists each."
                        )
    capacity = spec.get("paths", {}).get("/v1/capacity", {}).get("get")
    if capacity is not None:
        capacity["responses"]["431"] = _HEAD_TOO_LARGE
    return spec


def install_problem_openapi(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_problems(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
