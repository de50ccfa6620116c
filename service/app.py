"""The FastAPI application: wiring only. Each slice brings its router."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

from . import __version__
from .catalog.reads import STALE_HEADER
from .catalog.router import gpus_router, models_router
from .catalog.snapshot import CatalogCache, CatalogSnapshot
from .deployments.metrics import DeploymentGauges
from .deployments.router import router as deployments_router
from .engine_logs.router import calibrations_router
from .engine_logs.router import router as engine_logs_router
from .health.router import router as health_router
from .kit.db import Database
from .kit.docs import install_docs
from .kit.errors import install_problem_handlers, install_problem_openapi
from .kit.metrics import Metrics
from .kit.middleware import AccessLog, BodyLimit, SecurityHeaders
from .kit.ratelimit import WriteLimiter
from .kit.security import install_key_redaction
from .kit.settings import Settings
from .pictures.router import router as pictures_router
from .planning.cache import AnswerCache, EncodedAnswers
from .planning.hot_path import CapacityHotPath
from .planning.router import router as planning_router
from .simulations.router import router as simulations_router
from .speed_results.router import router as speed_results_router
from .speed_results.router import speed_calibrations_router
from .web.router import router as web_router

DESCRIPTION = """
**How many requests fit?** kvplan sizes the KV cache of an LLM deployment to the byte and
turns three questions (max context, peak concurrency, KV-cache precision) into a GPU plan.

* `GET /v1/capacity` answers autoscalers: one model, one GPU, one layout -> `max_num_seqs`.
  Small, cacheable (`Cache-Control`, `ETag`), also as CSV or a single value.
* `POST /v1/plans` searches every GPU and tensor-parallel layout for the cheapest plan.
* `/v1/models` and `/v1/gpus` are the catalog; reads are open, writes need an admin token.
* `/v1/deployments` stores deployment profiles; `/v1/deployments/{name}/capacity` sizes one for
  KEDA (`metrics-api`, JSON or `format=prometheus`), and `/metrics` exports their gauges.
* `POST /v1/engine-logs` reads an engine's start-up log and sets it against kvplan's own
  prediction, line by line; `/v1/calibrations` keeps one, and capacity questions for the same
  deployment then use what it measured.

Bytes are integers. GiB is 2^30 bytes, GB is 10^9; every field name says which.
Every error is an RFC 9457 problem (`application/problem+json`).
"""

TAGS = [
    {"name": "capacity", "description": "One deployment's capacity, for autoscalers and sheets."},
    {"name": "plans", "description": "The three sizing questions -> the cheapest plan."},
    {"name": "models", "description": "The model catalog: architectures with their sources."},
    {"name": "gpus", "description": "The GPU catalog: memory as the runtime reports it, prices."},
    {
        "name": "deployments",
        "description": "Stored deployment profiles and their capacity, for autoscalers.",
    },
    {"name": "pictures", "description": "A capacity drawn: memory budget, capacity by context."},
    {
        "name": "engine-logs",
        "description": "Engine start-up logs: their figures against kvplan's prediction.",
    },
    {
        "name": "calibrations",
        "description": "Logs kept as what they measured; capacity answers for them use it.",
    },
    {"name": "health", "description": "Liveness, readiness, problem types."},
]


class KvplanApp(FastAPI):
    """FastAPI with the security headers outside everything, even the 500 handler."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


def install_limits(app: FastAPI, settings: Settings) -> None:
    """The body limit, and CORS for the configured origins only (none: no CORS at all)."""
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origin_list),
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "If-None-Match"],
            expose_headers=["ETag", "Link", "Location", "Retry-After", STALE_HEADER],
            max_age=600,
        )


def create_app(settings: Settings | None = None, database: Database | None = None) -> FastAPI:
    """What `kvplan serve` runs: the catalog cache, the app and its state, the middleware
    layers, the routers (each step below)."""
    settings = settings or Settings()
    logging.basicConfig(level=settings.log_level.upper())
    install_key_redaction()  # an `api_key` in a URL never reaches the access log
    database = database or Database.from_settings(settings)
    metrics = Metrics()
    catalog = _catalog_cache(settings, database, metrics)
    app = KvplanApp(
        lifespan=_lifespan(settings, catalog),
        # kvplan exports Prometheus metrics and no OpenTelemetry: FastAPI's native telemetry
        # would look for OpenTelemetry providers on every request (three environment reads).
        telemetry={"tracing": False, "metrics": False, "logs": False},
        title="kvplan",
        version=__version__,
        summary="KV-cache capacity planning for LLM inference",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        license_info={"name": "Apache-2.0", "identifier": "Apache-2.0"},
        docs_url=None,
        redoc_url=None,
    )
    _install_state(app, settings, database, metrics, catalog)
    _install_layers(app, settings, metrics)
    _include_routers(app)
    return app


def _catalog_cache(settings: Settings, database: Database, metrics: Metrics) -> CatalogCache:
    """The catalog snapshot every request reads, its size and staleness in the metrics."""

    def on_load(snapshot: CatalogSnapshot) -> None:
        metrics.catalog_entries.labels("model").set(len(snapshot.models))
        metrics.catalog_entries.labels("gpu").set(len(snapshot.gpus))
        metrics.catalog_version.set(snapshot.version)

    catalog = CatalogCache(
        database,
        settings.catalog_ttl_seconds,
        on_load,
        wait_seconds=settings.db_answer_timeout_seconds or 2.0,
        wait_after_write_seconds=settings.catalog_wait_after_write_seconds,
    )
    metrics.catalog_stale.set_function(lambda: float(catalog.stale))
    return catalog


def _lifespan(
    settings: Settings, catalog: CatalogCache
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if settings.catalog_ttl_seconds > 0:
            # A replica loads the catalog before it takes requests, so that its first answer
            # is as fast as the others and reads survive an outage that begins before the
            # first capacity request. A database that cannot be read now (bounded by its
            # timeouts) leaves the load to the background, and /readyz says 503 until then.
            try:
                await asyncio.to_thread(catalog.get)
            except Exception as exc:
                logging.getLogger("kvplan.catalog").warning(
                    "catalog not loaded at start (%s); loading in the background", exc
                )
                catalog.warm()
        yield

    return lifespan


def _install_state(
    app: FastAPI, settings: Settings, database: Database, metrics: Metrics, catalog: CatalogCache
) -> None:
    """What the routers reach through `app.state`."""
    app.state.settings = settings
    app.state.db = database
    app.state.metrics = metrics
    app.state.write_limiter = WriteLimiter(settings.write_rate_per_second, settings.write_burst)
    app.state.catalog = catalog
    # Recent capacity answers, keyed by catalog token, one cache of each per app: the deployment
    # profiles' computed answers, and the bytes GET /v1/capacity sent.
    app.state.capacity_answers = AnswerCache()
    app.state.capacity_encoded = EncodedAnswers()
    metrics.registry.register(DeploymentGauges(database, catalog, app.state.capacity_answers))


def _install_layers(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    install_problem_handlers(app)
    install_problem_openapi(app)
    # Layers, innermost first: repeated capacity questions answered from their bytes, the HTTP
    # metrics around every answer (those included), then the body limit and CORS.
    app.add_middleware(CapacityHotPath, state=app.state)
    metrics.install(app, AccessLog(settings.access_log_sample))
    install_docs(app)
    install_limits(app, settings)


def _include_routers(app: FastAPI) -> None:
    app.include_router(health_router)
    app.include_router(planning_router)
    app.include_router(models_router)
    app.include_router(gpus_router)
    app.include_router(deployments_router)
    app.include_router(pictures_router)
    app.include_router(web_router)
    app.include_router(speed_results_router)
    app.include_router(speed_calibrations_router)
    app.include_router(engine_logs_router)
    app.include_router(calibrations_router)
    app.include_router(simulations_router)
