"""GET /v1/capacity answered before FastAPI is reached: a question asked before from its bytes,
a new one straight from the use case.

Autoscalers ask the same few questions many times a minute; dashboards and sheets ask new ones.
`CapacityHotPath` is a pure ASGI layer in front of the router that answers a valid question
with the checks the endpoint would make, in the same order, and otherwise hands the request on
untouched:

1. the read key, where `KVPLAN_READ_KEYS` is set (a request without one goes on to FastAPI,
   which answers 401: an answer never reaches a caller without a key);
2. the question: the raw query string and Accept header of a question answered before, or
   else the query parsed as FastAPI parses it (a near-miss of a parameter name, two spellings
   of one, an engine flag kvplan does not model, an invalid value or an Accept it cannot
   answer goes on to FastAPI, which answers the 422 or 406), validated with the endpoint's own
   model, which reads the engines' spellings as its fields (`engine_flags`), and made
   canonical (`cache.CapacityKey`), with the header naming the parameters it ignored
   (`cache.Asked`: that depends on the words, not on the question);
3. the catalog snapshot the request reads (its token is part of the key: a catalog change is a
   miss), then the answer, if this replica sent it for this catalog (`EncodedAnswers`);
4. otherwise the endpoint's own answer, `router.capacity_answer`, from the query validated in
   step 2: FastAPI's per-parameter extraction of the same query, its dependencies and its
   routing cost several times what the arithmetic does. A question that is a problem (an
   unknown slug, a layout that does not fit) goes on to FastAPI, which answers it as always.

The answer carries its warnings in a header encoded once with it (`EncodedAnswer.said`), and
the parameters its words ignored. It (or a 304 when If-None-Match names its ETag) is marked
stale when the catalog is (`KVPLAN-Catalog-Stale`) and counted in
`kvplan_capacity_requests_total` like any other; the security headers, CORS and the HTTP
metrics are the layers around this one. The route, its
parameters and its OpenAPI description are FastAPI's, unchanged, and it answers as this layer
does (tests/planning/test_capacity_hot_path.py sends each question to both).
"""

from __future__ import annotations

import types
import typing
from typing import Any
from urllib.parse import parse_qsl

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams, State
from starlette.types import ASGIApp, Receive, Scope, Send

from ..catalog.reads import STALE_HEADER
from ..catalog.snapshot import CatalogCache, CatalogSnapshot
from ..kit.conditional import none_match
from ..kit.deps import misspelling_of
from ..kit.engine_flags import ignored
from ..kit.errors import Problem
from ..kit.metrics import HANDLER_KEY, Metrics
from ..kit.security import READ_KEY_HEADER, READ_KEY_PARAMETER, read_key_presented
from ..kit.settings import Settings
from .cache import Asked, CapacityKey, EncodedAnswer, EncodedAnswers, RawQuestion, ignored_header
from .router import capacity_answer, capacity_format
from .schemas import CapacityQuery

PATH = "/v1/capacity"
_STALE = (STALE_HEADER.lower().encode("latin-1"), b"true")
_KEY_HEADER = READ_KEY_HEADER.lower().encode("latin-1")
_WANTED = frozenset({b"accept", b"if-none-match", _KEY_HEADER, b"authorization"})


def _is_sequence(annotation: Any) -> bool:
    """A list-typed query field (FastAPI reads every value of it, `getlist`)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_sequence(arg) for arg in typing.get_args(annotation))
    return origin in (list, tuple, set, frozenset)


# The endpoint's query parameters: names, and which take every value given.
FIELDS: tuple[tuple[str, bool], ...] = tuple(
    (info.alias or name, _is_sequence(info.annotation))
    for name, info in CapacityQuery.model_fields.items()
)
DECLARED: frozenset[str] = frozenset(name for name, _ in FIELDS)
_SEQUENCES: frozenset[str] = frozenset(name for name, sequence in FIELDS if sequence)


def query_pairs(query: str) -> list[tuple[str, str]]:
    """`parse_qsl(query, keep_blank_values=True)`, the pairs Starlette's `QueryParams` holds.

    A query with no escape (`%`) and no `+` decodes to itself: its pairs are its `&`-separated
    parts split at the first `=` (a part without one is a name with a blank value, an empty
    part is skipped), which is what parse_qsl does before unquoting (urllib/parse.py). Others
    go to parse_qsl itself."""
    if "%" in query or "+" in query:
        return parse_qsl(query, keep_blank_values=True)
    pairs = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((name, value))
    return pairs


def canonical(query_string: bytes, accept: str | None) -> tuple[Asked, CapacityQuery] | None:
    """The canonical question of a query string (with the parameters it ignores), and the query
    validated, or None where FastAPI would refuse it (a misspelt parameter name, two spellings
    of one, an engine flag kvplan does not model, an invalid value, an Accept it cannot
    answer): those go on to it.

    The values are picked as FastAPI picks them for a query model (`fastapi.dependencies.utils`,
    `_request_param_model_to_args`, from Starlette's `QueryParams`, which splits the query
    string with `parse_qsl(..., keep_blank_values=True)` after decoding it as latin-1): every
    value of a list field, the last one of any other, and the parameters the model does not
    declare handed to it too (one value, or a list of the values of a repeated one), where
    the engines' spellings become its fields (`EngineFields`) and the rest are left to its
    `extra="ignore"`.
    """
    values: dict[str, Any] = {}
    extras: dict[str, list[str]] = {}
    for name, value in query_pairs(query_string.decode("latin-1")):
        if name in _SEQUENCES:
            values.setdefault(name, []).append(value)
        elif name in DECLARED:
            values[name] = value
        elif misspelling_of(name, DECLARED) is not None:
            return None
        else:
            extras.setdefault(name, []).append(value)
    for name, given in extras.items():
        values[name] = given[0] if len(given) == 1 else given
    try:
        query = CapacityQuery.model_validate(values)
        key = CapacityKey.of(query, capacity_format(query, accept))
    except (ValidationError, Problem):
        return None
    return Asked(key, ignored_header(ignored(extras, DECLARED))), query


class CapacityHotPath:
    """Answers a valid GET /v1/capacity question itself (see the module docstring)."""

    def __init__(self, app: ASGIApp, state: State) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == PATH:
            headers: dict[bytes, bytes] = {}
            for name, value in scope["headers"]:
                if name in _WANTED and name not in headers:  # the first, as Starlette reads
                    headers[name] = value
            answered = await self._answer(scope, headers)
            if answered is not None:
                await self._send(scope, send, *answered, headers.get(b"if-none-match"))
                return
        await self.app(scope, receive, send)

    async def _answer(
        self, scope: Scope, headers: dict[bytes, bytes]
    ) -> tuple[Asked, EncodedAnswer] | None:
        settings: Settings = self.state.settings
        if settings.read_key_list and not _key_presented(settings, scope, headers):
            return None
        answers: EncodedAnswers = self.state.capacity_encoded
        accept = _text(headers.get(b"accept"))
        raw: RawQuestion = (scope["query_string"], headers.get(b"accept"))
        asked = answers.question(raw)
        query = None
        if asked is None:
            validated = canonical(scope["query_string"], accept)
            if validated is None:
                return None
            asked, query = validated
        snapshot = await _snapshot(self.state.catalog)
        if snapshot is None:
            return None
        answer = answers.get(snapshot.token, asked.key)
        if answer is not None:
            if query is not None:
                # A spelling is remembered once its question is asked again: most questions
                # never asked twice are not worth an entry, and a poller asks a third time.
                answers.remember(raw, asked)
            return asked, answer
        if query is None:  # asked before in these words, its answer since forgotten
            validated = canonical(scope["query_string"], accept)
            if validated is None:
                return None
            query = validated[1]
        try:
            return asked, capacity_answer(self.state, query, asked.key, snapshot, settings)
        except Exception:  # a problem (or a fault): FastAPI meets it again and answers it
            return None

    async def _send(
        self,
        scope: Scope,
        send: Send,
        asked: Asked,
        answer: EncodedAnswer,
        if_none_match: bytes | None,
    ) -> None:
        scope[HANDLER_KEY] = PATH  # the HTTP metrics' `handler` label, as if routed
        metrics: Metrics = self.state.metrics
        metrics.capacity_request("GET", asked.key.fmt)
        stale = [_STALE] if self.state.catalog.stale else []
        if if_none_match is not None and none_match(_text(if_none_match), answer.etag):
            headers = [*answer.validators, *stale]
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = [*answer.headers(), *asked.ignored, *stale]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})


def _text(value: bytes | None) -> str | None:
    """A header value as Starlette reads it (latin-1)."""
    return None if value is None else value.decode("latin-1")


def _key_presented(settings: Settings, scope: Scope, headers: dict[bytes, bytes]) -> bool:
    return read_key_presented(
        settings,
        header=_text(headers.get(_KEY_HEADER)),
        query=QueryParams(scope["query_string"]).get(READ_KEY_PARAMETER),
        authorization=_text(headers.get(b"authorization")),
    )


async def _snapshot(catalog: CatalogCache) -> CatalogSnapshot | None:
    """The snapshot the endpoint would read (`deps.get_catalog`); None where it cannot be had
    (FastAPI then answers the 503)."""
    snapshot = catalog.get_nowait()
    if snapshot is not None:
        return snapshot
    try:
        return await run_in_threadpool(catalog.get)
    except Exception:  # the endpoint meets the same failure and answers it
        return None
