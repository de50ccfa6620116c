"""Deployment profile use cases: read, list, create, replace, patch, delete, and size. No SQL here.

Writes take the request's session, raise a Problem when they cannot proceed and never commit
(`deps.WriteSessionDep` does). A profile is sized by the planning slice's one capacity use case
(`planning.service.capacity`), the same that answers GET /v1/capacity: a profile is a stored
capacity question.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..catalog.schemas import SLUG_RE
from ..catalog.snapshot import CatalogSnapshot, closest
from ..kit.conditional import check_if_match, decode_cursor, encode_cursor, etag, if_match_tags
from ..kit.errors import Conflict, InvalidRequest, MissingCatalogEntry, NotFound, PreconditionFailed
from ..planning import service as planning
from ..planning.cache import AnswerCache
from ..planning.schemas import CapacityDetail
from ..planning.service import CapacityQuestion
from ..sizing import engines_releases as releases
from . import repository
from .models import DeploymentRow
from .schemas import DeploymentCreate, DeploymentPatch, DeploymentRead, DeploymentReplace

# Columns of their own; every other profile field is a sizing field, kept in `settings`.
_COLUMNS = ("model", "gpu", "namespace", "workload", "replicas", "calibration_id")
_REQUIRED = ("model", "gpu")


# ---- the stored profile ------------------------------------------------------------------------


def _validated(model: type[BaseModel], values: Mapping[str, Any], where: str) -> Any:
    """`values` as `model`, or the 422 a request with them would have got (fields under `where`)."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        errors = [{**error, "loc": (where, *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors) from None


def profile(row: DeploymentRow) -> DeploymentReplace:
    """The stored profile as the body that would replace it."""
    values = {**row.settings, **{name: getattr(row, name) for name in _COLUMNS}}
    spec: DeploymentReplace = _validated(DeploymentReplace, values, "stored")
    return spec


def read(row: DeploymentRow) -> DeploymentRead:
    return DeploymentRead.model_validate(
        {
            **profile(row).model_dump(),
            "name": row.name,
            "revision": row.revision,
            "created_at": row.created_at,
            "updated_at": row.updated_at,
        }
    )


def _store(row: DeploymentRow, spec: DeploymentReplace) -> None:
    for name in _COLUMNS:
        setattr(row, name, getattr(spec, name))
    row.settings = spec.model_dump(mode="json", exclude=set(_COLUMNS), exclude_defaults=True)


# ---- sizing ------------------------------------------------------------------------------------


def question(spec: DeploymentReplace, peak_concurrency: int | None = None) -> CapacityQuestion:
    """The capacity question a profile asks; `peak_concurrency` replaces the planned peak."""
    fields = spec
    if peak_concurrency is not None:
        fields = spec.model_copy(update={"peak_concurrency": peak_concurrency})
    return CapacityQuestion(
        model=spec.model,
        gpu=spec.gpu,
        fields=fields,
        calibration_id=spec.calibration_id,
        newest_release=releases.newest_release(spec.engine),
    )


def _resolved(spec: DeploymentReplace, catalog: CatalogSnapshot) -> DeploymentReplace:
    """The profile as stored: its model and GPU by catalog slug, however they were named
    (catalog.names: a Hugging Face id, nvidia-smi's name, `h100`), and its engine release
    pinned (a profile without `engine_version` stores the newest release kvplan models now,
    so a later kvplan keeps sizing it as it is sized today). 422 naming a field the catalog
    lacks."""
    slugs = {}
    for field, find in (("model", catalog.model), ("gpu", catalog.gpu)):
        name: str = getattr(spec, field)
        try:
            slugs[field] = find(name).slug
        except NotFound as exc:
            raise InvalidRequest(
                f"{field}: {exc.detail}", field=field, suggestions=exc.extra.get("suggestions")
            ) from None
    if spec.engine_version is None:
        slugs["engine_version"] = releases.newest_release(spec.engine)
    return spec.model_copy(update=slugs)


def _in_catalog(spec: DeploymentReplace, catalog: CatalogSnapshot) -> tuple[str, str] | None:
    """The first of (field, slug) the catalog lacks, if any."""
    for field, entries in (("model", catalog.models), ("gpu", catalog.gpus)):
        slug: str = getattr(spec, field)
        if slug not in entries:
            return field, slug
    return None


def _calibration_missing(spec: DeploymentReplace, catalog: CatalogSnapshot) -> bool:
    """Whether the profile names a calibration the catalog snapshot does not hold."""
    wanted = spec.calibration_id
    return wanted is not None and all(e.id != wanted for e in catalog.calibrations.values())


def capacity(
    row: DeploymentRow,
    catalog: CatalogSnapshot,
    peak_concurrency: int | None = None,
    answers: AnswerCache | None = None,
) -> CapacityDetail:
    """The profile's capacity now: 422 of its own type when it cannot be sized or does not fit.

    A missing catalog entry is `missing-catalog-entry`, an input the arithmetic refuses keeps
    its sizing code, and a layout that does not fit is `weights-do-not-fit` or
    `sequence-does-not-fit`, so an autoscaler never reads a made-up number.
    """
    spec = profile(row)
    missing = _in_catalog(spec, catalog)
    if missing is not None:
        field, slug = missing
        entries = catalog.models if field == "model" else catalog.gpus
        raise MissingCatalogEntry(
            f"deployment {row.name!r} names {field} {slug!r}, which is not in the catalog "
            "(any more): add it back, or point the profile at another",
            field=field,
            suggestions=closest(slug, list(entries)),
        )
    if _calibration_missing(spec, catalog):  # only while a replica's snapshot is behind
        raise MissingCatalogEntry(
            f"deployment {row.name!r} points at calibration {spec.calibration_id}, which this "
            "replica does not hold (yet): retry, or point the profile at another",
            field="calibration_id",
        )
    # the newest modelled release too: the answer warns when it would answer otherwise
    newest = releases.newest_release(spec.engine)
    key = (catalog.token, f"deployment:{spec.model_dump_json()}:{peak_concurrency}:{newest}")
    detail = answers.get(key) if answers is not None else None
    if detail is None:
        detail = planning.capacity(question(spec, peak_concurrency), catalog)
        if answers is not None:
            answers.put(key, detail)
    return planning.require_fit(detail)


def _check(spec: DeploymentReplace, catalog: CatalogSnapshot) -> DeploymentReplace:
    """The profile as stored (`_resolved`), or what a write refuses: names the catalog lacks, a
    calibration it lacks or that measured another deployment, inputs the arithmetic refuses.

    A layout that does not fit is stored (the catalog may change, or the profile describe a
    deployment being fixed); its capacity answers say so.
    """
    spec = _resolved(spec, catalog)
    if _calibration_missing(spec, catalog):
        raise InvalidRequest(
            f"calibration_id: no calibration {spec.calibration_id} (GET /v1/calibrations)",
            field="calibration_id",
        )
    if spec.calibration_id is not None and spec.kv_pool_bytes is not None:
        raise InvalidRequest(
            "calibration_id: a profile that gives its own kv_pool_bytes cannot also take a "
            "calibration's measured pool; drop one of the two",
            field="calibration_id",
        )
    # a SizingError is the answer's 422; a calibration that measured another deployment is a
    # 422 naming calibration_id (planning.calibrated.matching)
    planning.capacity(question(spec), catalog)
    return spec


# ---- reads -------------------------------------------------------------------------------------


def get(session: Session, name: str) -> DeploymentRow:
    """The profile, or 404 with the closest names."""
    row = repository.get_by_name(session, name) if SLUG_RE.fullmatch(name) else None
    if row is None:
        raise NotFound(
            f"no deployment profile {name!r}",
            field="name",
            suggestions=closest(name, sorted(repository.all_names(session))),
        )
    return row


def stored_name(catalog: CatalogSnapshot, field: str, name: str) -> str:
    """The slug a profile stores for a model or GPU name (catalog.names); a name the catalog
    does not resolve as it is (a profile may name an entry since removed)."""
    find = catalog.model if field == "model" else catalog.gpu
    try:
        return find(name).slug
    except NotFound:
        return name


def list_profiles(
    session: Session,
    *,
    limit: int,
    cursor: str | None,
    model: str | None = None,
    gpu: str | None = None,
    namespace: str | None = None,
) -> tuple[list[DeploymentRow], str | None]:
    rows = repository.list_page(
        session,
        model=model,
        gpu=gpu,
        namespace=namespace,
        start=decode_cursor(cursor, SLUG_RE),
        limit=limit + 1,
    )
    if len(rows) > limit:
        return rows[:limit], encode_cursor(rows[limit].name)
    return rows, None


# ---- writes ------------------------------------------------------------------------------------


def _conflict(name: str) -> Conflict:
    return Conflict(f"a deployment profile named {name!r} already exists", field="name")


def _calibration_gone(calibration_id: int | None) -> Conflict:
    return Conflict(
        f"calibration {calibration_id} was deleted while this request ran; point the profile "
        "at another",
        field="calibration_id",
    )


def create(session: Session, body: DeploymentCreate, catalog: CatalogSnapshot) -> DeploymentRow:
    spec = _check(DeploymentReplace.model_validate(body.model_dump(exclude={"name"})), catalog)
    if repository.get_by_name(session, body.name) is not None:
        raise _conflict(body.name)
    row = DeploymentRow(name=body.name, model=spec.model, gpu=spec.gpu)
    _store(row, spec)
    try:
        with session.begin_nested():  # a concurrent create of the same name loses here
            repository.add(session, row)
    except IntegrityError:
        # the name taken meanwhile, or (the foreign key) the calibration deleted meanwhile
        if repository.get_by_name(session, body.name) is not None:
            raise _conflict(body.name) from None
        raise _calibration_gone(spec.calibration_id) from None
    return row


def _for_update(session: Session, name: str, if_match: str | None) -> DeploymentRow:
    """428 without If-Match, 404 without the profile, 412 if If-Match is stale."""
    if_match_tags(if_match)
    row = get(session, name)
    check_if_match(if_match, row.revision, f"deployment profile {row.name!r}")
    return row


def _lost_race(session: Session, name: str, what: str) -> PreconditionFailed:
    revision = repository.current_revision(session, name)
    if revision is None:
        return PreconditionFailed(
            f"deployment profile {name!r} was deleted while this request ran", field="If-Match"
        )
    return PreconditionFailed(
        f"deployment profile {name!r} {what}; it is at revision {revision} now: GET it again "
        "and reapply your change",
        field="If-Match",
        headers={"ETag": etag(revision)},
        current_revision=revision,
    )


def _update(session: Session, row: DeploymentRow, spec: DeploymentReplace) -> DeploymentRow:
    draft = DeploymentRow(id=row.id, name=row.name, model=spec.model, gpu=spec.gpu)
    _store(draft, spec)
    try:
        with session.begin_nested():  # the foreign key refuses a calibration deleted meanwhile
            updated = repository.update_if_revision(session, draft, row.revision)
    except IntegrityError:
        raise _calibration_gone(spec.calibration_id) from None
    if not updated:
        raise _lost_race(session, row.name, "changed while this update was applied")
    return repository.refresh(session, row)


def replace(
    session: Session,
    name: str,
    body: DeploymentReplace,
    if_match: str | None,
    catalog: CatalogSnapshot,
) -> DeploymentRow:
    row = _for_update(session, name, if_match)
    return _update(session, row, _check(body, catalog))


def patch(
    session: Session,
    name: str,
    body: DeploymentPatch,
    if_match: str | None,
    catalog: CatalogSnapshot,
) -> DeploymentRow:
    row = _for_update(session, name, if_match)
    changes = body.model_dump(exclude_unset=True)
    if not changes:
        return row  # an empty merge patch changes nothing, not even the revision
    for field in _REQUIRED:
        if field in changes and changes[field] is None:
            raise InvalidRequest(f"{field}: cannot be cleared (null); it is required", field=field)
    # null restores the default: the field is left out of the merged profile
    stored = profile(row).model_dump(exclude_defaults=True)
    if "engine" in changes and "engine_version" not in changes:
        stored.pop("engine_version", None)  # another engine's release: pinned to its newest
    merged = {**stored, **changes}
    values = {key: value for key, value in merged.items() if value is not None}
    spec: DeploymentReplace = _validated(DeploymentReplace, values, "body")
    return _update(session, row, _check(spec, catalog))


def delete(session: Session, name: str, if_match: str | None) -> None:
    row = _for_update(session, name, if_match)
    if not repository.delete_if_revision(session, name, row.revision):
        raise _lost_race(session, name, "changed while it was being deleted")
