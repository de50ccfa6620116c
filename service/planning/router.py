"""Sizing endpoints: /v1/capacity (autoscalers, sheets) and /v1/plans.

Thin: each endpoint negotiates the format, calls one planning use case (`service.capacity`,
`service.plan`, or `service.plan_scenarios` for a table of questions), and renders the answer as
JSON, a CSV or TSV table, or one value; GET /v1/capacity also caches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from ..catalog.reads import STALE_HEADER, STALE_HEADER_DOC
from ..catalog.snapshot import CatalogSnapshot
from ..kit import exposition
from ..kit.answer_headers import (
    ANSWER_HEADERS_DOC,
    WARNINGS_HEADER,
    WARNINGS_HEADER_DOC,
    answer_headers,
)
from ..kit.deps import CatalogDep, MetricsDep, SettingsDep, get_catalog, refuse_misspelt_parameters
from ..kit.engine_flags import ignored
from ..kit.errors import InvalidRequest
from ..kit.formats import (
    MEDIA_TYPES,
    TABLE_FORMATS,
    TableFormat,
    etag_for,
    etag_matches,
    gib_twins,
    negotiate,
    negotiate_accept,
    parse_table,
    render_table,
    single_value,
    table_kind,
)
from ..kit.security import READ, READ_OPENAPI, check_read_key
from ..kit.settings import Settings
from . import service
from .cache import CapacityKey, EncodedAnswer, EncodedAnswers
from .exposition import capacity_exposition
from .schemas import (
    CAPACITY_HEADLINE,
    DISTRIBUTION_STATS,
    MAX_SCENARIO_BYTES,
    MAX_SCENARIOS,
    OPTION_DISTRIBUTIONS,
    OPTION_GIB_COLUMNS,
    PLAN_HEADLINE,
    PLAN_TABLE_EXAMPLE,
    CapacityAnswer,
    CapacityDetail,
    CapacityQuery,
    CapacityRequest,
    PlanAnswer,
    PlanOptionOut,
    PlanQuery,
    PlanRequestBody,
    WorkloadIn,
    disaggregated_row,
    distribution_columns,
    no_plan_reason,
    plan_table_columns,
    table_row,
)
from .service import CapacityQuestion, PlanQuestion, ScenarioOutcome

router = APIRouter(prefix="/v1", dependencies=[*READ, Depends(refuse_misspelt_parameters)])

# Descriptions only: errors.document_problems gives every 4xx/5xx the one ProblemDetail body.
PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "KVPLAN_READ_KEYS is set and no read key was presented"},
    404: {"description": "Unknown model or GPU slug"},
    406: {"description": "Unsupported Accept"},
    422: {"description": "Invalid input; `field` names it"},
    503: {"description": "Database unreachable"},
}
_TEXT = {"schema": {"type": "string"}}
# Every sizing answer reads the replica's catalog snapshot; this says when it is a stale one.
STALE: dict[str, Any] = {STALE_HEADER: STALE_HEADER_DOC}
# A GET's 200 also says its warnings and the query parameters it ignored; a POST's its warnings.
ANSWERED: dict[str, Any] = {**STALE, **ANSWER_HEADERS_DOC}
WARNED: dict[str, Any] = {**STALE, WARNINGS_HEADER: WARNINGS_HEADER_DOC}
TABLES: dict[str, Any] = {"text/csv": _TEXT, "text/tab-separated-values": _TEXT}
ALT_FORMATS: dict[str, Any] = {**TABLES, "text/plain": _TEXT}
# Answers that are tables get these GiB twins of their byte columns (formats.gib_twins).
_CAPACITY_GIB = ("gpu_memory_bytes", "kv_bytes_per_sequence", "kv_pool_bytes")
FIT_PROBLEMS = (
    "Invalid input (`field` names it), or a layout that does not fit: type "
    "`/problems/weights-do-not-fit` (no memory left for a KV cache) or "
    "`/problems/sequence-does-not-fit` (one sequence of max_model_len does not fit)"
)


_ANSWER_FIELDS = set(CapacityAnswer.model_fields)
# A table row, a text value or a gauge has no room for the warnings: the header carries them.
_ROW_FIELDS = _ANSWER_FIELDS - {"warnings"}
# GET /v1/capacity's query parameters (what its answer reads; the rest it ignores and names).
CAPACITY_PARAMETERS = frozenset(
    info.alias or name for name, info in CapacityQuery.model_fields.items()
)
_PLAN_PARAMETERS = frozenset(info.alias or name for name, info in PlanQuery.model_fields.items())
# A workload's own fields as query parameters: GET takes the workload as one JSON text, so
# `request_rate=20` alone would be ignored and a plan for a peak (or none) answered.
_FLAT_WORKLOAD = frozenset(WorkloadIn.model_fields) - _PLAN_PARAMETERS
# json.dumps(body, separators=(",", ":")) without building an encoder per answer: the same
# encoder (json/__init__.py `dumps` makes one with these arguments), so the same bytes.
_JSON = json.JSONEncoder(separators=(",", ":"))


def _answer_row(detail: CapacityAnswer) -> dict[str, Any]:
    """The CapacityAnswer fields of a detail but its warnings: every CSV row, the text and
    Prometheus answers."""
    return detail.model_dump(mode="json", include=_ROW_FIELDS)


# What `model_dump_json` calls, called straight: bytes as it writes them, without the text it
# decodes them to and the `include` set it walks (a CapacityAnswer has no other field).
_ANSWER_SERIALIZER = CapacityAnswer.__pydantic_serializer__


def _answer_json(detail: CapacityAnswer) -> bytes:
    """GET's JSON body: the CapacityAnswer fields serialised by pydantic straight from the
    detail (its warnings included), the bytes `_JSON.encode` writes of the same fields for
    every answer kvplan computes (ASCII text, finite numbers), without building a dict."""
    if type(detail) is CapacityAnswer:
        return _ANSWER_SERIALIZER.to_json(detail)
    return detail.model_dump_json(include=_ANSWER_FIELDS).encode()


def _cache_control(settings: Settings) -> str:
    """Shared caches may keep an answer only while reads need no key."""
    scope = "private" if settings.read_key_list else "public"
    return f"{scope}, max-age={settings.capacity_max_age_seconds}"


def _encode(
    *,
    fmt: str,
    json_body: dict[str, Any],
    json_bytes: bytes | None = None,  # the JSON answer already serialised (`_answer_json`)
    table: list[dict[str, Any]],
    columns: list[str] | None = None,
    value: Any,
    token: str,
    cache_control: str,
    warnings: Sequence[str] = (),
) -> EncodedAnswer:
    if fmt in ("csv", "tsv"):
        body = render_table(table, "tsv" if fmt == "tsv" else "csv", columns).encode()
    elif fmt == "text":
        body = single_value(value).encode()
    elif fmt == "prometheus":
        body = capacity_exposition(json_body)
    elif json_bytes is not None:
        body = json_bytes
    else:
        body = _JSON.encode(json_body).encode()
    media = exposition.CONTENT_TYPE if fmt == "prometheus" else MEDIA_TYPES[fmt]
    return EncodedAnswer.of(
        body,
        etag=etag_for(token, body),
        media_type=media,
        cache_control=cache_control,
        warnings=warnings,
    )


def _sent(
    request: Request, answer: EncodedAnswer, parameters: frozenset[str] | None = None
) -> Response:
    """The answer, or a 304 where If-None-Match names it; marked stale where the catalog is.
    The 200 says its warnings, and for a GET (`parameters`: those it reads) the query
    parameters it ignored."""
    headers = {name.decode(): value.decode() for name, value in answer.validators}
    if request.app.state.catalog.stale:
        headers[STALE_HEADER] = "true"
    if etag_matches(request, answer.etag):
        return Response(status_code=304, headers=headers)
    headers.update((name.decode(), value.decode()) for name, value in answer.said)
    if parameters is not None:
        headers.update(answer_headers((), ignored(request.query_params.keys(), parameters)))
    return Response(answer.body, media_type=answer.media_type, headers=headers)


def _respond(
    request: Request, parameters: frozenset[str] | None = None, **encoding: Any
) -> Response:
    return _sent(request, _encode(**encoding), parameters)


@router.get(
    "/capacity",
    tags=["capacity"],
    operation_id="getCapacity",
    summary="max_num_seqs for one deployment (for autoscalers and spreadsheets)",
    description="One model on one GPU type with one layout. Small and cacheable: `ETag` changes "
    "when the catalog or the answer does; `If-None-Match` gets a 304. `format=csv` or `tsv` "
    "(or `Accept: text/csv`, `text/tab-separated-values`) gives a header row and one row "
    "(bytes columns with a `_gib` twin); `format=text` the bare `max_num_seqs`, "
    "`field=<name>` another bare value (Google Sheets `IMPORTDATA`, Excel `WEBSERVICE`). "
    "The engines' own names for its parameters are read as its own (SGLang `context_length`, "
    "`tp_size`; TensorRT-LLM `max_seq_len`, `max_batch_size`; ...: `service/kit/engine_flags.py`); "
    "an engine flag that changes memory kvplan does not model (`enable_lora`, "
    "`speculative_config`, ...) is a 422 naming it. Other parameters it does not know are "
    "ignored (a cache-busting `_=123`) and named in `Kvplan-Ignored-Parameters`, except a "
    "near-miss of one it knows, which is a 422 naming it. Warnings are in `warnings` and, in "
    "every format, the `Kvplan-Warnings` header. For KEDA's `metrics-api` scaler the number is the "
    "top-level `max_num_seqs` (`valueLocation: max_num_seqs`; with `peak_concurrency`, "
    "`replicas_for_peak_concurrency`), or with `format=prometheus` the gauge "
    "`kvplan_capacity_max_num_seqs`. A layout that does not fit is a 422, never a 200 with 0.",
    response_model=CapacityAnswer,
    responses={
        **PROBLEMS,
        200: {"content": {**ALT_FORMATS, **exposition.OPENAPI_CONTENT}, "headers": ANSWERED},
        304: {"description": "Not modified", "headers": STALE},
        422: {"description": FIT_PROBLEMS},
    },
    openapi_extra=READ_OPENAPI,
)
async def get_capacity(
    request: Request,
    query: Annotated[CapacityQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    # A coroutine: a warm answer is microseconds of arithmetic, not worth a worker thread.
    # hot_path.CapacityHotPath answers a valid question before it gets here; this route answers
    # the rest (its problems), and is the one OpenAPI describes.
    key = CapacityKey.of(query, capacity_format(query, request.headers.get("accept")))
    answer = capacity_answer(request.app.state, query, key, catalog, settings)
    metrics.capacity_request("GET", key.fmt)
    return _sent(request, answer, CAPACITY_PARAMETERS)


def capacity_answer(
    state: State,
    query: CapacityQuery,
    key: CapacityKey,
    catalog: CatalogSnapshot,
    settings: Settings,
) -> EncodedAnswer:
    """GET /v1/capacity's answer to a valid question, encoded and kept for the next time it is
    asked; raises the question's problem (an unknown slug, a layout that does not fit). The
    route and `hot_path.CapacityHotPath` both answer with it.

    Only the encoded answer is kept (`EncodedAnswers`), not the detail it came from: a question
    asked again in the same format never gets here, and one asked in another format is
    computed again (tens of microseconds), which costs less than keeping every detail."""
    question = CapacityQuestion.from_query(query)
    detail = service.require_fit(service.capacity_answer(question, catalog))
    # Only the form asked for is built: a row (for a table, a text value or Prometheus) is not
    # free, and the JSON answer needs none.
    data = {} if key.fmt == "json" else _answer_row(detail)
    answer = _encode(
        fmt=key.fmt,
        json_body=data,
        json_bytes=_answer_json(detail) if key.fmt == "json" else None,
        table=[gib_twins(table_row(data), _CAPACITY_GIB)] if key.fmt in TABLE_FORMATS else [],
        value=data.get(query.field or CAPACITY_HEADLINE),
        token=catalog.token,
        cache_control=_cache_control(settings),
        warnings=detail.warnings,
    )
    encoded: EncodedAnswers = state.capacity_encoded
    encoded.put(catalog.token, key, answer)
    return answer


def capacity_format(query: CapacityQuery, accept: str | None) -> str:
    """The format GET /v1/capacity answers in: `format=`, `field=`, then Accept (406)."""
    if query.format == "prometheus":
        return "prometheus"
    return negotiate_accept(accept, query.format, query.field)


@router.post(
    "/capacity",
    tags=["capacity"],
    operation_id="computeCapacity",
    summary="Capacity with the explanation; model and GPU may be inline",
    description="The GET fields as a JSON body. `model` may be a catalog slug, an inline spec "
    "or `{hf_config: {...}}` (a config.json as it is); `gpu` a slug or `{memory_bytes: N}`; "
    "`kv_pool_bytes` replaces the computed pool. Answers with the hand-checkable explanation; "
    "`Accept: text/csv` (or TSV) gives the GET's table row, `text/plain` `max_num_seqs`.",
    response_model=CapacityDetail,
    responses={**PROBLEMS, 200: {"content": ALT_FORMATS, "headers": WARNED}},
    openapi_extra=READ_OPENAPI,
)
def post_capacity(
    request: Request, body: CapacityRequest, catalog: CatalogDep, metrics: MetricsDep
) -> Response:
    fmt = negotiate(request, None, None)
    detail = service.capacity(CapacityQuestion.from_body(body), catalog)
    metrics.capacity_requests.labels("POST", fmt).inc()
    table = fmt in TABLE_FORMATS
    # Only the form asked for is built: the JSON of an explanation or a table row is not free.
    return _respond(
        request,
        fmt=fmt,
        json_body=detail.model_dump(mode="json") if fmt == "json" else {},
        table=[gib_twins(table_row(_answer_row(detail)), _CAPACITY_GIB)] if table else [],
        value=getattr(detail, CAPACITY_HEADLINE),
        token=catalog.token,
        cache_control="no-store",
        warnings=detail.warnings,
    )


def option_row(option: PlanOptionOut) -> dict[str, Any]:
    """One plan option as a flat table row: flags per engine, warnings joined, GiB twins."""
    data = table_row(
        option.model_dump(mode="json", exclude={"engine_flags", "node_flags", "warnings"})
    )
    data = gib_twins(data, OPTION_GIB_COLUMNS)
    data.pop("disaggregated", None)
    data |= disaggregated_row(option.disaggregated)
    for name in OPTION_DISTRIBUTIONS:  # a plan for a rate's percentiles, one column each
        values = data.pop(name, None) or {}
        for stat, column in zip(DISTRIBUTION_STATS, distribution_columns(name), strict=True):
            data[column] = values.get(stat)
    for engine in ("vllm", "sglang"):
        data[f"{engine}_flags"] = option.engine_flags.get(engine, "")
        # every node's flags, node rank 0 first, one " | " apart (empty on one node)
        data[f"{engine}_node_flags"] = " | ".join(option.node_flags.get(engine, []))
    data["warnings"] = " | ".join(option.warnings)
    return data


def _plan_rows(answer: PlanAnswer) -> list[dict[str, Any]]:
    options = ([answer.recommendation] if answer.recommendation else []) + answer.alternatives
    return [{"rank": rank, **option_row(o)} for rank, o in enumerate(options, start=1)]


def _plan_response(
    request: Request,
    answer: PlanAnswer,
    *,
    fmt: str,
    field: str | None,
    token: str,
    cache: str,
    parameters: frozenset[str] | None = None,
) -> Response:
    best = answer.recommendation
    value = getattr(best, field or PLAN_HEADLINE) if best is not None else no_plan_reason(answer)
    table = fmt in ("csv", "tsv")
    # Only the form asked for is built: a whole-catalog plan's JSON or rows are not free.
    return _respond(
        request,
        parameters,
        fmt=fmt,
        json_body={} if table or fmt == "text" else answer.model_dump(mode="json"),
        table=_plan_rows(answer) if table else [],
        columns=plan_table_columns(ranked=True),
        value=value,
        token=token,
        cache_control=cache,
        warnings=answer.warnings,
    )


def _scenario_row(number: int, outcome: ScenarioOutcome) -> dict[str, Any]:
    """One answer row of a table of questions: the question's key facts, the plan, or why not."""
    row: dict[str, Any] = {"row": number, **outcome.asked}
    answer = outcome.answer
    if answer is not None:
        row.update(
            model=answer.model,
            max_model_len=answer.max_model_len,
            peak_concurrency=answer.peak_concurrency,
            kv_cache_dtype=answer.kv_cache_dtype,
            engine=answer.engine,
        )
        if answer.recommendation is not None:
            row.update(option_row(answer.recommendation))
        # the plan's own warnings too (flags left out, unpriced GPUs, the model's limit): a
        # row is the whole answer to its question, as the JSON's two lists are
        said = [
            *answer.warnings,
            *(answer.recommendation.warnings if answer.recommendation else []),
        ]
        row["warnings"] = " | ".join(dict.fromkeys(said))
    row["status"] = outcome.status
    row["error"] = outcome.error
    return row


async def _plan_table(request: Request, fmt: TableFormat) -> Response:
    """POST /v1/plans with a CSV or TSV body: one plan per row, each row answered on its own."""
    check_read_key(request)
    raw = await request.body()
    if len(raw) > MAX_SCENARIO_BYTES:
        raise InvalidRequest(
            f"the table is {len(raw)} bytes; at most {MAX_SCENARIO_BYTES} per request",
            field="body",
        )
    try:
        text = raw.decode("utf-8-sig")  # Excel writes a byte-order mark before UTF-8 CSV
    except UnicodeDecodeError as exc:
        raise InvalidRequest("the table is not UTF-8 text", field="body") from exc
    header, rows = parse_table(text, fmt)
    # The answer is a table like the question, unless Accept names a kind of table first.
    accepted = (table_kind(media) for media in request.headers.get("accept", "").split(","))
    answer_fmt: TableFormat = next((kind for kind in accepted if kind is not None), fmt)
    catalog = await get_catalog(request)
    metrics = request.app.state.metrics
    outcomes = await run_in_threadpool(service.plan_scenarios, header, rows, catalog, metrics)
    table = [_scenario_row(number, o) for number, o in enumerate(outcomes, start=1)]
    body = render_table(table, answer_fmt, plan_table_columns(ranked=False, header=header))
    headers = {"Cache-Control": "no-store", "Vary": "Accept"}
    if request.app.state.catalog.stale:
        headers[STALE_HEADER] = "true"
    return Response(body, media_type=MEDIA_TYPES[answer_fmt], headers=headers)


class PlanRoute(APIRoute):
    """POST /v1/plans: a CSV or TSV body is a table of questions; anything else is the JSON
    question FastAPI validates as declared."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def dispatch(request: Request) -> Response:
            kind = table_kind(request.headers.get("content-type"))
            if request.method == "POST" and kind is not None:
                return await _plan_table(request, kind)
            return await handler(request)

        return dispatch


_TABLE_BODY_DOC = (
    "A table of questions (`text/csv`, or `text/tab-separated-values`): a header row naming "
    "the columns as the JSON fields are named (`model`, `max_model_len`, `peak_concurrency`, "
    "`kv_cache_dtype`, `gpus`, `engine`, `gpu_memory_utilization`, ...), then one question per "
    "row. An empty cell is the field's default; list fields (`gpus`, `max_attention_window`) "
    "take their items `;`-separated; an optional `scenario` column is a label copied to the "
    f"answer. At most {MAX_SCENARIOS} rows. The answer is a table in the same format, row for "
    "row: `row`, the question's key facts, the recommendation's columns, `status` (`ok`, "
    "`infeasible`, `error`) and `error`, the message of a row that cannot be answered (the "
    "other rows are answered all the same)."
)


async def post_plan(
    request: Request, body: PlanRequestBody, catalog: CatalogDep, metrics: MetricsDep
) -> Response:
    # A coroutine: a whole-catalog plan is a few milliseconds of arithmetic with no I/O. In
    # worker threads, concurrent plans take the GIL from one another, and each one that lets
    # it go (hashing the answer does) waits a switch interval (5 ms) to get it back: p99 at 8
    # connections was three times the time of eight plans one after another.
    fmt = negotiate(request, None, None)
    answer = service.plan(PlanQuestion.from_body(body), catalog, metrics)
    return _plan_response(
        request, answer, fmt=fmt, field=None, token=catalog.token, cache="no-store"
    )


router.add_api_route(
    "/plans",
    post_plan,
    methods=["POST"],
    tags=["plans"],
    operation_id="createPlan",
    summary="The three sizing questions -> the cheapest GPU plan (or a table of them)",
    description="Max context, peak concurrency and KV precision (plus options) -> the cheapest "
    "feasible plan over every catalog GPU (or the ones given) x every tensor-parallel size a "
    "node holds x replicas; ranked alternatives; every rejected candidate with its reason; "
    "the explanation; engine flags to paste. `Accept: text/csv` (or TSV) gives one row per "
    "option, `text/plain` the recommendation's `total_gpus`.\n\n" + _TABLE_BODY_DOC,
    response_model=PlanAnswer,
    responses={**PROBLEMS, 200: {"content": ALT_FORMATS, "headers": WARNED}},
    route_class_override=PlanRoute,
    openapi_extra={
        **READ_OPENAPI,
        "requestBody": {
            "content": {
                media: {"schema": {"type": "string"}, "example": example}
                for media, example in (
                    ("text/csv", PLAN_TABLE_EXAMPLE),
                    ("text/tab-separated-values", PLAN_TABLE_EXAMPLE.replace(",", "\t")),
                )
            }
        },
    },
)


@router.get(
    "/plans",
    tags=["plans"],
    operation_id="getPlan",
    summary="The plan as a GET, for spreadsheets (catalog models and GPUs)",
    description="The POST /v1/plans questions as query parameters (`gpus` comma-separated). "
    "`format=csv` or `tsv` gives one row per option; `format=text` the recommendation's "
    "`total_gpus`, `field=gpu` (or replicas, cost_per_hour_usd, ...) another of its values "
    "as text/plain. Parameters it does not know are ignored, except a near-miss of one it "
    "knows (422).",
    response_model=PlanAnswer,
    responses={
        **PROBLEMS,
        200: {"content": ALT_FORMATS, "headers": ANSWERED},
        304: {"description": "Not modified", "headers": STALE},
    },
    openapi_extra=READ_OPENAPI,
)
def get_plan(
    request: Request,
    query: Annotated[PlanQuery, Query()],
    catalog: CatalogDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> Response:
    fmt = negotiate(request, query.format, query.field)
    for name in request.query_params:
        if name in _FLAT_WORKLOAD:
            raise InvalidRequest(
                f"{name}: a workload's field; GET takes the workload as its JSON text "
                f'(workload={{"{name}": ...}})',
                field=name,
            )
    answer = service.plan(PlanQuestion.from_query(query), catalog, metrics)
    return _plan_response(
        request,
        answer,
        fmt=fmt,
        field=query.field,
        token=catalog.token,
        cache=_cache_control(settings),
        parameters=_PLAN_PARAMETERS,
    )


# The rows the tables above are made of, for the CLI's `--format csv` (the same bytes as here).
def capacity_table_row(detail: CapacityAnswer) -> dict[str, Any]:
    """GET /v1/capacity's CSV row of an answer."""
    return gib_twins(table_row(_answer_row(detail)), _CAPACITY_GIB)


def plan_table_rows(answer: PlanAnswer) -> list[dict[str, Any]]:
    """GET /v1/plans' CSV rows: one per option, `rank` 1 the recommendation."""
    return _plan_rows(answer)
