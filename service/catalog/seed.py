"""The shipped catalog (data/models.json, data/gpus.json) into the database, idempotently.

Adds what is missing; refreshes an entry only while it is still exactly what an earlier seed
wrote (origin "seed"); never touches an entry a user created or edited. A deletion through the
API is a user edit too: the slug is tombstoned and the seed does not add it back (otherwise every
`kvplan seed`, which the Helm chart runs on each upgrade, would undo it, and the planner would
again offer a GPU the operator removed). To restore an entry, POST it again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from sqlalchemy.orm import Session

from . import repository
from .models import GpuRow, ModelRow, utcnow
from .records import copy_gpu_record, copy_model_record, gpu_row_from_record, model_row_from_record
from .snapshot import CatalogSnapshot, gpu_entry, model_entry, shared_layers


def load_seed(name: str) -> list[dict[str, Any]]:
    text = resources.files("service.catalog").joinpath("data", name).read_text("utf-8")
    records: list[dict[str, Any]] = json.loads(text)
    return records


# Loaded once per process: the shipped catalog does not change while it runs, and one set of
# architecture objects keeps the sizing core's memos (keyed by them) at identity comparisons.
@lru_cache(maxsize=1)
def offline_snapshot() -> CatalogSnapshot:
    """The shipped catalog as a snapshot, without a database (`kvplan --offline`, the bench)."""
    models = shared_layers(
        {r["slug"]: model_entry(model_row_from_record(r, "seed")) for r in load_seed("models.json")}
    )
    gpus = {r["slug"]: gpu_entry(gpu_row_from_record(r, "seed")) for r in load_seed("gpus.json")}
    return CatalogSnapshot(version=0, changed_at=utcnow(), models=models, gpus=gpus)


def digest(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class SeedReport:
    added: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    kept_user_edits: list[str] = field(default_factory=list)
    kept_user_deletions: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.refreshed)


def seed_catalog(session: Session) -> SeedReport:
    """Seed models and GPUs; the caller commits (the CLI, or a test's fixture)."""
    report = SeedReport()
    deleted = repository.tombstoned_slugs(session, GpuRow)
    for record in load_seed("gpus.json"):
        _seed_one(session, GpuRow, record, report, deleted)
    deleted = repository.tombstoned_slugs(session, ModelRow)
    for record in load_seed("models.json"):
        _seed_one(session, ModelRow, record, report, deleted)
    if report.changed:
        repository.bump_catalog_version(session)
    session.flush()
    return report


def _seed_one(
    session: Session,
    table: type[GpuRow] | type[ModelRow],
    record: dict[str, Any],
    report: SeedReport,
    deleted: set[str],
) -> None:
    slug = record["slug"]
    record_digest = digest(record)
    row = repository.get_by_slug(session, table, slug)
    if row is None and slug in deleted:
        report.kept_user_deletions.append(f"{table.__tablename__}:{slug}")
        return
    if row is None:
        new = (
            gpu_row_from_record(record, origin="seed")
            if table is GpuRow
            else model_row_from_record(record, origin="seed")
        )
        new.seed_digest = record_digest
        repository.add(session, new)
        report.added.append(f"{table.__tablename__}:{slug}")
        return
    if row.origin != "seed":
        report.kept_user_edits.append(f"{table.__tablename__}:{slug}")
        return
    if row.seed_digest == record_digest:
        report.unchanged += 1
        return
    if isinstance(row, GpuRow):
        copy_gpu_record(row, record)
    else:
        copy_model_record(row, record)
    row.seed_digest = record_digest
    row.revision += 1
    row.updated_at = utcnow()
    session.flush()
    report.refreshed.append(f"{table.__tablename__}:{slug}")
