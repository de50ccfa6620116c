"""Prometheus metrics: HTTP metrics from prometheus-fastapi-instrumentator, plus kvplan's own."""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_fastapi_instrumentator import Instrumentator


class Metrics:
    """One registry per app, so several apps (tests, workers) never collide."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
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

    def install(self, app: FastAPI) -> None:
        Instrumentator(
            registry=self.registry,
            excluded_handlers=["/metrics", "/healthz", "/readyz"],
        ).instrument(app).expose(app, endpoint="/metrics", include_in_schema=False)
