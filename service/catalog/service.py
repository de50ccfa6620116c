"""Catalog use cases: read, list, create, replace, patch, delete, import. No SQL here.

Each write takes the request's session, raises a Problem when it cannot proceed and never
commits: the session dependency does (`deps.WriteSessionDep`). Every write bumps the catalog
version in the same transaction, so every replica reloads its snapshot.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlmodel import SQLModel

from ..kit.conditional import check_if_match, decode_cursor, encode_cursor, etag, if_match_tags
from ..kit.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed
from ..sizing import LayerKind, ModelArchitecture
from . import repository
from .hf_import import imported_model
from .models import GpuRow, ModelRow
from .records import apply_architecture, copy_gpu_record, new_model_row
from .repository import Row
from .schemas import (
    SLUG_RE,
    GpuCreate,
    GpuPatch,
    GpuReplace,
    ModelCreate,
    ModelImport,
    ModelPatch,
    ModelReplace,
)
from .snapshot import closest
from .validation import merge_patch, out_of_bounds, parse_architecture


def _kind(table: type[SQLModel]) -> str:
    return "GPU" if table is GpuRow else "model"


# ---- reads ----------------------------------------------------------------------------------


def _get(session: Session, table: type[Row], slug: str) -> Row:
    """The entry, or 404 with the closest slugs."""
    row = repository.get_by_slug(session, table, slug) if SLUG_RE.fullmatch(slug) else None
    if row is None:
        raise NotFound(
            f"no {_kind(table)} {slug!r} in the catalog",
            field="slug",
            suggestions=closest(slug, sorted(repository.all_slugs(session, table))),
        )
    return row


def _get_for_update(session: Session, table: type[Row], slug: str, if_match: str | None) -> Row:
    """The entry a write applies to: 428 without If-Match, 404 without the entry, 412 if stale."""
    if_match_tags(if_match)
    row = _get(session, table, slug)
    check_if_match(if_match, row.revision, f"{_kind(table)} {row.slug!r}")
    return row


def get_gpu(session: Session, slug: str) -> GpuRow:
    return _get(session, GpuRow, slug)


def get_model(session: Session, slug: str) -> ModelRow:
    return _get(session, ModelRow, slug)


def _page(rows: list[Row], limit: int) -> tuple[list[Row], str | None]:
    """`rows` holds up to limit + 1 rows; the extra one's slug is where the next page starts."""
    if len(rows) > limit:
        return rows[:limit], encode_cursor(rows[limit].slug)
    return rows, None


def list_gpus(
    session: Session,
    *,
    limit: int,
    cursor: str | None,
    vendor: str | None = None,
    min_memory_bytes: int | None = None,
    max_price_usd_per_hour: float | None = None,
    fp8_support: bool | None = None,
) -> tuple[list[GpuRow], str | None]:
    rows = repository.list_gpus(
        session,
        vendor=vendor,
        min_memory_bytes=min_memory_bytes,
        max_price_usd_per_hour=max_price_usd_per_hour,
        fp8_support=fp8_support,
        start=decode_cursor(cursor, SLUG_RE),
        limit=limit + 1,
    )
    return _page(rows, limit)


def check_model_filters(layer_kind: LayerKind | None) -> None:
    """422 for a filter that could never match."""
    if layer_kind is LayerKind.NO_CACHE:
        # layer_kinds lists only the kinds that keep a cache: this filter would match nothing
        raise InvalidRequest(
            "layer_kind: no_cache layers keep no cache and are not indexed; filter on a kind "
            "that keeps one",
            field="layer_kind",
        )


def list_models(
    session: Session,
    *,
    limit: int,
    cursor: str | None,
    family: str | None = None,
    layer_kind: LayerKind | None = None,
    q: str | None = None,
    min_parameters: int | None = None,
    max_parameters: int | None = None,
) -> tuple[list[ModelRow], str | None]:
    check_model_filters(layer_kind)
    rows = repository.list_models(
        session,
        family=family,
        layer_kind=layer_kind.value if layer_kind is not None else None,
        q=q,
        min_parameters=min_parameters,
        max_parameters=max_parameters,
        start=decode_cursor(cursor, SLUG_RE),
        limit=limit + 1,
    )
    return _page(rows, limit)


# ---- writes -------------------------------------------------------------------------------------


def _clone(row: Row) -> Row:
    """A detached copy to edit: the session's row stays as read until the guarded update."""
    table = type(row)
    columns = table.__table__.columns  # type: ignore[attr-defined]
    return table(**{c.name: copy.deepcopy(getattr(row, c.name)) for c in columns})


def _conflict(table: type[SQLModel], slug: str) -> Conflict:
    return Conflict(
        f"a {_kind(table)} with slug {slug!r} already exists; slugs are unique",
        field="slug",
    )


def _insert(session: Session, row: Row) -> Row:
    table = type(row)
    if repository.get_by_slug(session, table, row.slug) is not None:
        raise _conflict(table, row.slug)
    try:
        with session.begin_nested():  # a concurrent insert of the same slug loses here
            repository.add(session, row)
    except IntegrityError:
        raise _conflict(table, row.slug) from None
    # created again on purpose: from now on the seed treats it like any user entry
    repository.remove_tombstone(session, table, row.slug)
    repository.bump_catalog_version(session)
    return row


def _lost_race(session: Session, table: type[Row], slug: str, what: str) -> PreconditionFailed:
    """412 for an edit another writer overtook; names the revision to retry from, if any."""
    revision = repository.current_revision(session, table, slug)
    if revision is None:
        return PreconditionFailed(
            f"{_kind(table)} {slug!r} was deleted while this request ran", field="If-Match"
        )
    return PreconditionFailed(
        f"{_kind(table)} {slug!r} {what}; it is at revision {revision} now: GET it again and "
        "reapply your change",
        field="If-Match",
        headers={"ETag": etag(revision)},
        current_revision=revision,
    )


def _update(session: Session, slug: str, draft: Row, current: Row) -> Row:
    """Write `draft` over `current` only if nobody moved `current` since it was read."""
    draft.origin, draft.seed_digest = "user", None
    if not repository.update_if_revision(session, draft, current.revision):
        raise _lost_race(session, type(current), slug, "changed while this update was applied")
    repository.bump_catalog_version(session)
    return repository.refresh(session, current)


def _delete(session: Session, table: type[Row], slug: str, if_match: str | None) -> None:
    row = _get_for_update(session, table, slug, if_match)
    if not repository.delete_if_revision(session, table, slug, row.revision):
        raise _lost_race(session, table, slug, "changed while it was being deleted")
    # a deletion is a user edit too: `kvplan seed` must not bring the entry back
    repository.add_tombstone(session, table, slug)
    repository.bump_catalog_version(session)


def _gpu_values(body: GpuReplace) -> dict[str, Any]:
    values = body.model_dump(exclude={"slug"})
    if values["price_date"] is not None:
        values["price_date"] = values["price_date"].isoformat()
    return values


def create_gpu(session: Session, body: GpuCreate) -> GpuRow:
    row = GpuRow(slug=body.slug, name=body.name, memory_bytes=body.memory_bytes, origin="user")
    copy_gpu_record(row, _gpu_values(body))
    return _insert(session, row)


def replace_gpu(session: Session, slug: str, body: GpuReplace, if_match: str | None) -> GpuRow:
    current = _get_for_update(session, GpuRow, slug, if_match)
    draft = _clone(current)
    copy_gpu_record(draft, _gpu_values(body))
    return _update(session, slug, draft, current)


_GPU_REQUIRED = ("name", "memory_bytes", "max_gpus_per_node")
_MAX_PRICE_EXAMPLES = 100  # as GpuReplace.price_examples


def patch_gpu(session: Session, slug: str, body: GpuPatch, if_match: str | None) -> GpuRow:
    current = _get_for_update(session, GpuRow, slug, if_match)
    if not body.model_fields_set:
        # An empty merge patch changes nothing: no new revision, and a seeded entry stays seeded.
        return current
    draft = _clone(current)
    for name in body.model_fields_set:
        value = getattr(body, name)
        if value is None and name in _GPU_REQUIRED:
            raise out_of_bounds(name, "cannot be cleared (null); it is required")
        if name == "price_examples" and value is not None:
            value = merge_patch(draft.price_examples or {}, value)
            if len(value) > _MAX_PRICE_EXAMPLES:
                raise out_of_bounds(
                    name,
                    f"at most {_MAX_PRICE_EXAMPLES} providers after the merge",
                    max_length=_MAX_PRICE_EXAMPLES,
                )
        elif name == "price_date" and value is not None:
            value = value.isoformat()
        elif name == "sources" and value is None:
            value = []
        setattr(draft, name, value)
    _drop_stale_price_provenance(draft, current, body.model_fields_set)
    return _update(session, slug, draft, current)


def _drop_stale_price_provenance(draft: GpuRow, current: GpuRow, named: set[str]) -> None:
    """A new price without its own source or date drops the old ones: they described the price
    that was replaced, and a plan would show them beside the caller's."""
    if draft.price_usd_per_hour == current.price_usd_per_hour:
        return
    for name in ("price_source", "price_date"):
        if name not in named:
            setattr(draft, name, None)


def delete_gpu(session: Session, slug: str, if_match: str | None) -> None:
    _delete(session, GpuRow, slug, if_match)


def _set_model(row: ModelRow, body: ModelReplace, arch: ModelArchitecture) -> None:
    row.name = body.name or row.slug
    row.hf_id, row.family, row.notes = body.hf_id, body.family, body.notes
    row.sources = list(body.sources)
    apply_architecture(row, arch)


def create_model(session: Session, body: ModelCreate) -> ModelRow:
    arch = parse_architecture(body.architecture)
    row = new_model_row(body.slug)
    _set_model(row, body, arch)
    return _insert(session, row)


def replace_model(
    session: Session, slug: str, body: ModelReplace, if_match: str | None
) -> ModelRow:
    arch = parse_architecture(body.architecture)
    current = _get_for_update(session, ModelRow, slug, if_match)
    draft = _clone(current)
    _set_model(draft, body, arch)
    return _update(session, slug, draft, current)


def patch_model(session: Session, slug: str, body: ModelPatch, if_match: str | None) -> ModelRow:
    current = _get_for_update(session, ModelRow, slug, if_match)
    fields = body.model_fields_set
    if not fields:
        return current
    draft = _clone(current)
    if "architecture" in fields:
        if body.architecture is None:
            raise out_of_bounds("architecture", "cannot be cleared (null); it is required")
        apply_architecture(
            draft, parse_architecture(merge_patch(current.architecture, body.architecture))
        )
    if "name" in fields:
        draft.name = body.name or draft.slug
    if "sources" in fields:
        draft.sources = list(body.sources or [])
    for name in ("hf_id", "family", "notes"):
        if name in fields:
            setattr(draft, name, getattr(body, name))
    return _update(session, slug, draft, current)


def delete_model(session: Session, slug: str, if_match: str | None) -> None:
    _delete(session, ModelRow, slug, if_match)


def import_model(session: Session, body: ModelImport) -> ModelRow:
    """A Hugging Face config.json -> a model row; stored unless `dry_run` (then transient)."""
    row, chosen = imported_model(body)
    if body.dry_run:
        # Everything but the write: a slug that is taken fails now, as storing would.
        if chosen and repository.get_by_slug(session, ModelRow, row.slug) is not None:
            raise _conflict(ModelRow, row.slug)
        return row
    return _insert(session, row)
