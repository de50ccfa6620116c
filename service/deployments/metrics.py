"""Per-profile gauges on /metrics, computed at scrape time from the catalog snapshot.

    kvplan_deployment_max_num_seqs{deployment, model, gpu, workload_namespace, workload}
    kvplan_deployment_kv_cache_tokens{...}
    kvplan_deployment_calibrated{..., calibration_id}   1 where the figures use a calibration
    kvplan_deployment_errors

so that KEDA's `prometheus` scaler, or an HPA through prometheus-adapter, can divide vLLM's live
`vllm:num_requests_running` by what one replica holds (helm/kvplan/examples/). Each profile is
sized by the same use case as its capacity endpoint (answers cached by catalog version), so the
gauge and the endpoint never disagree. A profile that cannot be sized (it does not fit, its model
left the catalog, ...) has no samples, so a query on it finds nothing rather than a 0, and is
counted in `kvplan_deployment_errors`; its capacity endpoint says why.

The workload's namespace is the label `workload_namespace`: a `namespace` label would clash with
the one Prometheus gives every target (and be renamed `exported_namespace`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from fastapi.exceptions import RequestValidationError
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import DBAPIError

from ..catalog.snapshot import CatalogCache
from ..kit.db import Database
from ..kit.errors import Problem
from ..planning.cache import AnswerCache
from ..sizing import SizingError
from . import repository, service
from .models import DeploymentRow

log = logging.getLogger("kvplan.deployments")

LABELS = ("deployment", "model", "gpu", "workload_namespace", "workload")


class DeploymentGauges(Collector):
    """A prometheus_client collector: the registry calls `collect` on every scrape."""

    def __init__(self, database: Database, catalog: CatalogCache, answers: AnswerCache) -> None:
        self._db = database
        self._catalog = catalog
        self._answers = answers
        # The profiles last read, served while the database is away (as the catalog is).
        self._profiles: Sequence[DeploymentRow] | None = None

    def _read_profiles(self) -> Sequence[DeploymentRow] | None:
        try:
            with self._db.session() as session:
                rows = repository.all_rows(session)
                session.expunge_all()
        except DBAPIError as exc:
            log.warning("deployment profiles unreadable, exporting the last ones: %s", exc.orig)
            return self._profiles
        self._profiles = rows
        return rows

    def collect(self) -> Iterator[Metric]:
        max_num_seqs = GaugeMetricFamily(
            "kvplan_deployment_max_num_seqs",
            "Whole sequences at max_model_len one engine replica of the profile holds "
            "(GET /v1/deployments/{deployment}/capacity, max_num_seqs).",
            labels=LABELS,
        )
        kv_cache_tokens = GaugeMetricFamily(
            "kvplan_deployment_kv_cache_tokens",
            "Tokens the KV cache of one engine replica of the profile holds, as the engine logs "
            "'GPU KV cache size'.",
            labels=LABELS,
        )
        calibrated = GaugeMetricFamily(
            "kvplan_deployment_calibrated",
            "1 for a profile whose figures use a calibration (the engine's own measured KV "
            "pool; calibrated_from of its capacity answer), labelled with its calibration_id.",
            labels=[*LABELS, "calibration_id"],
        )
        errors = 0
        try:
            catalog = self._catalog.get()
            profiles = self._read_profiles()
        except DBAPIError as exc:  # no catalog was ever loaded: nothing can be sized
            log.warning("no catalog to size deployment profiles with: %s", exc.orig)
            yield max_num_seqs
            yield kv_cache_tokens
            return
        for row in profiles or ():
            try:
                detail = service.capacity(row, catalog, answers=self._answers)
            except (Problem, SizingError, RequestValidationError):
                errors += 1
                continue
            labels = [row.name, row.model, row.gpu, row.namespace or "", row.workload or ""]
            max_num_seqs.add_metric(labels, detail.max_num_seqs)
            kv_cache_tokens.add_metric(labels, detail.kv_cache_tokens)
            if detail.calibrated_from is not None:
                used = str(detail.calibrated_from.calibration_id)
                calibrated.add_metric([*labels, used], 1)
        yield max_num_seqs
        yield kv_cache_tokens
        yield calibrated
        yield GaugeMetricFamily(
            "kvplan_deployment_errors",
            "Deployment profiles that could not be sized at this scrape (no samples above); "
            "their capacity endpoint answers why.",
            value=errors,
        )
