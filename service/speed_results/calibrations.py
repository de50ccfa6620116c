"""Speed calibration use cases: keep a benchmark run as the step-time scale it measured; list,
read, delete. No SQL.

A speed calibration is kept under the deployment's key (the memory calibrations' key:
`catalog.snapshot.CalibrationKey`), with the run's shape and `step_time_scale`, the measured
TPOT over kvplan's decode step at the run's batch. Capacity answers with that key put the
scale on their decode step and say `speed_calibrated_from` (planning.calibrated
`scaled_speed`). Writes take the request's session and never commit; they bump the catalog
version, since speed calibrations travel in the snapshot every replica reads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..catalog import repository as catalog_repository
from ..catalog.snapshot import CatalogSnapshot
from ..kit.conditional import check_if_match, decode_cursor, encode_cursor, if_match_tags
from ..kit.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed
from ..planning.service import CapacityQuestion
from . import repository
from .models import SpeedCalibrationRow
from .parser import choose, parse_report
from .schemas import SpeedCalibrationRead
from .service import compare

_ID = re.compile(r"[1-9]\d{0,17}")


def create(
    session: Session,
    result: object,
    question: CapacityQuestion,
    notes: str | None,
    catalog: CatalogSnapshot,
    *,
    benchmark: int | None = None,
) -> SpeedCalibrationRow:
    """Compare the run with kvplan's estimate and keep its scale under the deployment's key
    (409 if the key has one; 422 for an inline model or where there is no estimate). Of a
    guidellm report, the benchmark `benchmark` names (422 naming it when it holds several and
    none is named)."""
    comparison = compare(choose(parse_report(result), benchmark), question, catalog)
    if comparison.key is None:
        raise InvalidRequest(
            "an inline model has no calibration key: name a catalog model or attach its "
            "config.json",
            field="deployment.model",
        )
    scale = comparison.step_time_scale
    if comparison.estimate is None or scale is None:
        raise InvalidRequest(
            f"cannot calibrate: {comparison.unavailable or 'the run measured no TPOT'}",
            field="deployment" if comparison.unavailable else "result",
        )
    key = comparison.key
    existing = repository.get_by_key(session, key.digest)
    if existing is not None:
        raise Conflict(
            f"speed calibration {existing.id} already measured this deployment; DELETE "
            f"/v1/speed-calibrations/{existing.id} (with its ETag) to replace it",
            field="result",
            calibration_id=existing.id,
        )
    run, shape = comparison.run, comparison.shape
    assert run.mean_tpot_ms is not None  # scale is not None
    row = SpeedCalibrationRow(
        key_digest=key.digest,
        **dataclasses.asdict(key),
        tool=run.tool,
        batch=shape.batch,
        context_tokens=shape.context_tokens,
        prompt_tokens=shape.prompt_tokens,
        measured_tpot_ms=run.mean_tpot_ms,
        measured_ttft_ms=run.mean_ttft_ms,
        estimated_tpot_ms=comparison.estimate.decode_ms_per_token,
        step_time_scale=scale,
        result_sha256=hashlib.sha256(
            json.dumps(result, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest(),
        notes=notes,
    )
    try:
        repository.add(session, row)
    except IntegrityError as exc:  # a concurrent write stored the same key first
        raise Conflict(
            "this deployment was calibrated meanwhile; GET the list", field="result"
        ) from exc
    catalog_repository.bump_catalog_version(session)
    return row


def read(row: SpeedCalibrationRow) -> SpeedCalibrationRead:
    return SpeedCalibrationRead.model_validate(row, from_attributes=True)


def get(session: Session, calibration_id: int) -> SpeedCalibrationRow:
    row = repository.get(session, calibration_id)
    if row is None:
        raise NotFound(f"no speed calibration {calibration_id}", field="id")
    return row


def list_page(
    session: Session, *, limit: int, cursor: str | None, model: str | None = None
) -> tuple[list[SpeedCalibrationRow], str | None]:
    start = decode_cursor(cursor, _ID)
    rows = repository.list_page(
        session, model=model, start=None if start is None else int(start), limit=limit + 1
    )
    if len(rows) > limit:
        return rows[:limit], encode_cursor(str(rows[limit].id))
    return rows, None


def delete(session: Session, calibration_id: int, if_match: str | None) -> None:
    """428 without If-Match, 404 without it, 412 when stale."""
    if_match_tags(if_match)
    row = get(session, calibration_id)
    check_if_match(if_match, row.revision, f"speed calibration {calibration_id}")
    if not repository.delete_if_revision(session, calibration_id, row.revision):
        raise PreconditionFailed(
            f"speed calibration {calibration_id} changed or went meanwhile; GET it again",
            field="If-Match",
        )
    catalog_repository.bump_catalog_version(session)
