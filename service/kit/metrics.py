"""Prometheus metrics: the HTTP metrics, a lean pure-ASGI layer, plus kvplan's own.

The HTTP metrics keep the names, labels and buckets prometheus-fastapi-instrumentator's default
set gave (`prometheus_fastapi_instrumentator.metrics.default`, 7.x and 8.x), so dashboards and
alerts built on them keep working:

- `http_requests_total` (`method`, `status` grouped as `2xx`, `handler`);
- `http_request_size_bytes` and `http_response_size_bytes` (`handler`): summaries of the
  `Content-Length` headers;
- `http_request_duration_highr_seconds`: a histogram of many buckets, no labels;
- `http_request_duration_seconds` (`method`, `handler`): a histogram of buckets 0.1, 0.5, 1.

`handler` is the route's template (`/v1/models/{slug}`), never the raw path, so the label set is
bounded; a path no route matches is `none`; `/metrics`, `/healthz` and `/readyz` are left out.
The instrumentator's middleware found the route by matching every route again on every request
and built a Request and a Response object for each; this layer reads the route the router
already matched (or the one a layer that answers by itself names, `HANDLER_KEY`) and keeps each
label set's children, which took it from a third of the throughput to a few microseconds.
"""

from __future__ import annotations

import gzip
import time
from collections.abc import Sequence

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    generate_latest,
)
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .middleware import AccessLog

# A layer that answers a request itself (without the router) names its route template here.
HANDLER_KEY = "kvplan.handler"
EXCLUDED_HANDLERS = frozenset({"/metrics", "/healthz", "/readyz"})
# prometheus_fastapi_instrumentator.metrics.default's buckets
HIGHR_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1,
    1.5,
    2,
    2.5,
    3,
    3.5,
    4,
    4.5,
    5,
    7.5,
    10,
    30,
    60,
)
LOWR_BUCKETS = (0.1, 0.5, 1)


class HttpMetrics:
    """The HTTP metrics' families and their children, one per label set seen."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "http_requests_total",
            "Total number of requests by method, status and handler.",
            ["method", "status", "handler"],
            registry=registry,
        )
        self.request_size = Summary(
            "http_request_size_bytes",
            "Content length of incoming requests by handler. Only value of header is "
            "respected. Otherwise ignored. No percentile calculated. ",
            ["handler"],
            registry=registry,
        )
        self.response_size = Summary(
            "http_response_size_bytes",
            "Content length of outgoing responses by handler. Only value of header is "
            "respected. Otherwise ignored. No percentile calculated. ",
            ["handler"],
            registry=registry,
        )
        self.latency_highr = Histogram(
            "http_request_duration_highr_seconds",
            "Latency with many buckets but no API specific labels. Made for more accurate "
            "percentile calculations. ",
            buckets=HIGHR_BUCKETS,
            registry=registry,
        )
        self.latency = Histogram(
            "http_request_duration_seconds",
            "Latency with only few buckets by handler. Made to be only used if aggregation "
            "by handler is important. ",
            ["method", "handler"],
            buckets=LOWR_BUCKETS,
            registry=registry,
        )
        # (method, status class, handler) -> the children to update; bounded by the routes
        self._children: dict[tuple[str, str, str], tuple[Counter, Summary, Summary, Histogram]] = {}

    def observe(
        self,
        method: str,
        status: int,
        handler: str,
        *,
        seconds: float,
        request_bytes: int,
        response_bytes: int,
    ) -> None:
        key = (method, f"{str(status)[0]}xx", handler)
        children = self._children.get(key)
        if children is None:
            children = (
                self.total.labels(method, key[1], handler),
                self.request_size.labels(handler),
                self.response_size.labels(handler),
                self.latency.labels(method, handler),
            )
            self._children[key] = children
        total, request_size, response_size, latency = children
        total.inc()
        request_size.observe(request_bytes)
        response_size.observe(response_bytes)
        self.latency_highr.observe(seconds)
        latency.observe(seconds)


def _content_length(headers: Sequence[tuple[bytes, bytes]]) -> int:
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


class MeasureRequests:
    """Pure ASGI: counts and times every HTTP request by its route template."""

    def __init__(
        self,
        app: ASGIApp,
        http: HttpMetrics,
        routes: Sequence[BaseRoute],
        access_log: AccessLog | None = None,
    ) -> None:
        self.app = app
        self.http = http
        self.routes = routes
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        response_bytes = 0

        async def measured(message: Message) -> None:
            nonlocal status, response_bytes
            if message["type"] == "http.response.start":
                status = message["status"]
                response_bytes = _content_length(message.get("headers", ()))
            await send(message)

        try:
            await self.app(scope, receive, measured)
        finally:
            seconds = time.perf_counter() - start
            handler = self._handler(scope)
            if handler not in EXCLUDED_HANDLERS:
                self.http.observe(
                    scope["method"],
                    status,
                    handler,
                    seconds=seconds,
                    request_bytes=_content_length(scope["headers"]),
                    response_bytes=response_bytes,
                )
            if self.access_log is not None:
                self.access_log.answered(scope, status, seconds)

    def _handler(self, scope: Scope) -> str:
        """The route template that answered: the one the router matched (it leaves it in the
        scope), one a layer named, or, for routes the router does not record (the OpenAPI
        document, mounted files), the first route that matches; `none` when none does."""
        named: str | None = scope.get(HANDLER_KEY)
        if named is not None:
            return named
        path: str | None = getattr(scope.get("route"), "path", None)
        if path is not None:
            return path
        partial = None
        for route in self.routes:
            template: str | None = getattr(route, "path", None)
            if template is None:
                continue
            match, _ = route.matches(scope)
            if match is Match.NONE:
                continue
            if match is Match.FULL:
                return template
            partial = partial or template
        return partial or "none"


class Metrics:
    """One registry per app, so several apps (tests, workers) never collide."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.http = HttpMetrics(self.registry)
        self.plans = Counter(
            "kvplan_plans_total",
            "Plans computed, by outcome (feasible, infeasible, invalid).",
            ["outcome"],
            registry=self.registry,
        )
        self.capacity_requests = Counter(
            "kvplan_capacity_requests_total",
            "Capacity answers, by method and response format.",
            ["method", "format"],
            registry=self.registry,
        )
        self._capacity_children: dict[tuple[str, str], Counter] = {}
        self.catalog_entries = Gauge(
            "kvplan_catalog_entries",
            "Entries in this replica's catalog snapshot, by kind (model, gpu).",
            ["kind"],
            registry=self.registry,
        )
        self.catalog_version = Gauge(
            "kvplan_catalog_version",
            "Catalog version this replica's snapshot was loaded at.",
            registry=self.registry,
        )

        self.catalog_stale = Gauge(
            "kvplan_catalog_stale",
            "1 while the database is unreachable and the last catalog snapshot is being served.",
            registry=self.registry,
        )

        self.writes_rate_limited = Counter(
            "kvplan_write_rate_limited",
            "Writes refused (429) because their admin token wrote more than "
            "KVPLAN_WRITE_RATE_PER_SECOND and KVPLAN_WRITE_BURST allow.",
            registry=self.registry,
        )

    def capacity_request(self, method: str, fmt: str) -> None:
        """Count one capacity answer (`kvplan_capacity_requests_total`)."""
        child = self._capacity_children.get((method, fmt))
        if child is None:
            child = self._capacity_children[method, fmt] = self.capacity_requests.labels(
                method, fmt
            )
        child.inc()

    def install(self, app: FastAPI, access_log: AccessLog | None = None) -> None:
        """The measuring layer (which also writes the access log), and /metrics (the text
        format; gzip where Prometheus asks)."""
        app.add_middleware(
            MeasureRequests, http=self.http, routes=app.router.routes, access_log=access_log
        )

        # A worker thread: collecting asks the database for the deployment profiles' gauges.
        @app.get("/metrics", include_in_schema=False)
        def metrics(request: Request) -> Response:
            body = generate_latest(self.registry)
            headers = {"Content-Type": CONTENT_TYPE_LATEST}
            if "gzip" in request.headers.get("accept-encoding", ""):
                body = gzip.compress(body)
                headers["Content-Encoding"] = "gzip"
            return Response(body, headers=headers)
