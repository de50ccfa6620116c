"""Catalog rules: what a valid entry is, and how records become rows. No SQL here."""

from __future__ import annotations

import copy
import logging
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlmodel import SQLModel

from ..conditional import check_if_match, decode_cursor, encode_cursor, etag, if_match_tags
from ..errors import Conflict, InvalidRequest, NotFound, PreconditionFailed
from ..sizing import SizingError, architecture_from_dict, architecture_to_dict
from ..sizing.architecture import LayerKind, ModelArchitecture
from ..sizing.hf_config import architecture_from_hf_config
from ..sizing.kv import kv_bytes_per_token
from . import repository
from .models import GpuRow, ModelRow
from .repository import Row
from .schemas import (
    MAX_PARAMETERS,
    MAX_POSITION_EMBEDDINGS,
    MAX_WEIGHT_BYTES,
    SLUG_PATTERN,
    GpuCreate,
    GpuPatch,
    GpuRead,
    GpuReplace,
    ModelCreate,
    ModelImport,
    ModelPatch,
    ModelRead,
    ModelReplace,
)
from .snapshot import closest

GPU_FIELDS = (
    "name",
    "vendor",
    "memory_bytes",
    "memory_source",
    "nvidia_smi_memory_mib",
    "memory_marketed_gb",
    "memory_type",
    "memory_bandwidth_tb_s",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "fp8_support",
    "interconnect",
    "max_gpus_per_node",
    "tdp_w",
    "price_usd_per_hour",
    "price_date",
    "price_examples",
    "sources",
    "notes",
)
MODEL_FIELDS = ("name", "hf_id", "family", "sources", "notes")


def layer_kinds(arch: ModelArchitecture) -> str:
    """Comma-separated kinds, sorted, without the state-free blocks (for list filters)."""
    return ",".join(sorted(k.value for k in arch.kinds if k is not LayerKind.NO_CACHE))


def apply_architecture(row: ModelRow, arch: ModelArchitecture) -> None:
    """Store an architecture and the columns denormalised from it."""
    row.architecture = architecture_to_dict(arch)
    row.num_layers = arch.num_layers
    row.layer_kinds = layer_kinds(arch)
    row.max_position_embeddings = arch.max_position_embeddings
    row.num_parameters = arch.num_parameters
    row.weight_bytes = arch.weight_bytes


def model_row_from_record(record: Mapping[str, Any], origin: str = "user") -> ModelRow:
    arch = architecture_from_dict(record["architecture"])
    row = ModelRow(
        slug=record["slug"],
        name=record.get("name") or record["slug"],
        hf_id=record.get("hf_id"),
        family=record.get("family"),
        sources=list(record.get("sources") or []),
        notes=record.get("notes"),
        origin=origin,
        architecture={},
        num_layers=0,
        layer_kinds="",
    )
    apply_architecture(row, arch)
    return row


def gpu_row_from_record(record: Mapping[str, Any], origin: str = "user") -> GpuRow:
    row = GpuRow(slug=record["slug"], name=record["slug"], memory_bytes=0, origin=origin)
    copy_gpu_record(row, record)
    return row


def copy_model_record(row: ModelRow, record: Mapping[str, Any]) -> None:
    for key in MODEL_FIELDS:
        setattr(row, key, record.get(key) if key != "sources" else list(record.get(key) or []))
    if not row.name:
        row.name = row.slug
    apply_architecture(row, architecture_from_dict(record["architecture"]))


def copy_gpu_record(row: GpuRow, record: Mapping[str, Any]) -> None:
    for key in GPU_FIELDS:
        value = record.get(key)
        if key == "name" and not value:
            value = row.slug
        if key == "sources":
            value = list(value or [])
        elif key == "max_gpus_per_node" and value is None:
            value = 8
        setattr(row, key, value)


# ---------------------------------------------------------------------------------------------
# The API's writes. Each takes the request's session, raises a Problem when it cannot proceed,
# and leaves the commit to the router. Every write bumps the catalog version in the same
# transaction, so every replica reloads its snapshot.

log = logging.getLogger("kvplan.catalog")

_SLUG_RE = re.compile(SLUG_PATTERN)
_NOT_SLUG = re.compile(r"[^a-z0-9._-]+")
# Ints inside an architecture other than the counts below are geometry: bounded well above any
# real model, so nothing downstream overflows a float or a BIGINT.
_MAX_GEOMETRY = 2**40
_INT_BOUNDS: dict[str, int] = {
    "num_parameters": MAX_PARAMETERS,
    "weight_bytes": MAX_WEIGHT_BYTES,
    "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
}
_ARCH_STR_FIELDS = ("dtype", "state_dtype", "weight_format")
_ARCH_INT_FIELDS = (
    "num_attention_heads",
    "hidden_size",
    "intermediate_size",
    "vocab_size",
    "num_parameters",
    "weight_bytes",
    "max_position_embeddings",
)
# The (lowercase) HF config keys under which multimodal configs nest the language model.
_NESTED_LM_KEYS = ("text_config", "llm_config", "language_config")


def _kind(table: type[SQLModel]) -> str:
    return "GPU" if table is GpuRow else "model"


# ---- reads ----------------------------------------------------------------------------------


def _get(session: Session, table: type[Row], slug: str) -> Row:
    """The entry, or 404 with the closest slugs."""
    row = repository.get_by_slug(session, table, slug) if _SLUG_RE.fullmatch(slug) else None
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
        start=decode_cursor(cursor, _SLUG_RE),
        limit=limit + 1,
    )
    return _page(rows, limit)


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
    if layer_kind is LayerKind.NO_CACHE:
        # layer_kinds lists only the kinds that keep a cache: this filter would match nothing
        raise InvalidRequest(
            "layer_kind: no_cache layers keep no cache and are not indexed; filter on a kind "
            "that keeps one",
            field="layer_kind",
        )
    rows = repository.list_models(
        session,
        family=family,
        layer_kind=layer_kind.value if layer_kind is not None else None,
        q=q,
        min_parameters=min_parameters,
        max_parameters=max_parameters,
        start=decode_cursor(cursor, _SLUG_RE),
        limit=limit + 1,
    )
    return _page(rows, limit)


# ---- rows -> answers --------------------------------------------------------------------------


def gpu_read(row: GpuRow) -> GpuRead:
    values = {name: getattr(row, name) for name in GpuRead.model_fields}
    return GpuRead.model_validate(values)


def model_read(row: ModelRow) -> ModelRead:
    kv_bytes: int | None = None
    counts: dict[str, int] = {}
    try:
        arch = architecture_from_dict(row.architecture)
        kv_bytes = kv_bytes_per_token(arch, "bfloat16")
        counts = dict(Counter(layer.kind.value for layer in arch.layers))
    except SizingError as exc:  # a stored row the arithmetic cannot read: show it, loudly
        log.error("model %s has an unreadable architecture: %s", row.slug, exc)
    return ModelRead(
        slug=row.slug,
        name=row.name,
        hf_id=row.hf_id,
        family=row.family,
        architecture=row.architecture,
        num_layers=row.num_layers,
        layer_kinds=[k for k in row.layer_kinds.split(",") if k],
        layer_counts=counts,
        kv_bytes_per_token_bf16=kv_bytes,
        max_position_embeddings=row.max_position_embeddings,
        num_parameters=row.num_parameters,
        weight_bytes=row.weight_bytes,
        sources=list(row.sources),
        notes=row.notes,
        origin=row.origin,
        revision=row.revision,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


# ---- validation the schemas cannot express ------------------------------------------------------


def _out_of_bounds(field: str, message: str, **constraint: int) -> InvalidRequest:
    bound = ", ".join(f"{k} {v}" for k, v in constraint.items())
    return InvalidRequest(
        f"{field}: {message} ({bound})" if bound else f"{field}: {message}",
        field=field,
        errors=[
            {
                "field": field,
                "in": "body",
                "message": message,
                "type": "value_error",
                **({"constraint": constraint} if constraint else {}),
            }
        ],
    )


def _check_ints(value: Any, path: str) -> None:
    """Every int of a (plain-dict) architecture within the bounds kvplan stores and computes."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_ints(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_ints(item, f"{path}[{index}]")
    elif isinstance(value, int) and not isinstance(value, bool):
        limit = _INT_BOUNDS.get(path.rsplit(".", 1)[-1], _MAX_GEOMETRY)
        if value > limit:
            raise _out_of_bounds(path, f"must be at most {limit}", le=limit)


def _check_moe(arch: ModelArchitecture, prefix: str) -> None:
    moe = arch.moe
    if moe is None:
        return
    minimums = {
        "num_experts": 1,
        "experts_per_token": 1,
        "moe_intermediate_size": 1,
        "shared_expert_intermediate_size": 0,
    }
    for name, minimum in minimums.items():
        value = getattr(moe, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _out_of_bounds(f"{prefix}.moe.{name}", f"must be an integer, got {value!r}")
        if value < minimum:
            raise _out_of_bounds(f"{prefix}.moe.{name}", f"must be >= {minimum}", ge=minimum)
    if moe.experts_per_token > moe.num_experts:
        raise _out_of_bounds(
            f"{prefix}.moe.experts_per_token",
            f"must be at most num_experts ({moe.num_experts})",
            le=moe.num_experts,
        )


def parse_architecture(data: Mapping[str, Any], prefix: str = "architecture") -> ModelArchitecture:
    """The plain-dict architecture of a request, checked; errors name `architecture.<field>`."""
    if data.get("num_attention_heads") is None:
        raise SizingError(f"{prefix}.num_attention_heads", "is required")
    for name in _ARCH_STR_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise SizingError(f"{prefix}.{name}", f"must be a string, got {value!r}")
    for name in _ARCH_INT_FIELDS:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise SizingError(f"{prefix}.{name}", f"must be an integer, got {value!r}")
    _check_ints(data, prefix)
    try:
        arch = architecture_from_dict(data)
    except SizingError as exc:
        raise type(exc)(f"{prefix}.{exc.field}", exc.reason) from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise InvalidRequest(f"{prefix}: cannot be read: {exc}", field=prefix) from None
    known = set(architecture_to_dict(arch)) | {"name"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SizingError(
            f"{prefix}.{unknown[0]}",
            f"not an architecture field; known: {', '.join(sorted(known))}",
        )
    _check_moe(arch, prefix)
    return arch


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out: dict[str, Any] = dict(copy.deepcopy(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


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
            raise _out_of_bounds(name, "cannot be cleared (null); it is required")
        if name == "price_examples" and value is not None:
            value = merge_patch(draft.price_examples or {}, value)
            if len(value) > _MAX_PRICE_EXAMPLES:
                raise _out_of_bounds(
                    name,
                    f"at most {_MAX_PRICE_EXAMPLES} providers after the merge",
                    max_length=_MAX_PRICE_EXAMPLES,
                )
        elif name == "price_date" and value is not None:
            value = value.isoformat()
        elif name == "sources" and value is None:
            value = []
        setattr(draft, name, value)
    return _update(session, slug, draft, current)


def delete_gpu(session: Session, slug: str, if_match: str | None) -> None:
    _delete(session, GpuRow, slug, if_match)


def _set_model(row: ModelRow, body: ModelReplace, arch: ModelArchitecture) -> None:
    row.name = body.name or row.slug
    row.hf_id, row.family, row.notes = body.hf_id, body.family, body.notes
    row.sources = list(body.sources)
    apply_architecture(row, arch)


def _new_model_row(slug: str) -> ModelRow:
    return ModelRow(
        slug=slug, name=slug, origin="user", architecture={}, num_layers=0, layer_kinds=""
    )


def create_model(session: Session, body: ModelCreate) -> ModelRow:
    arch = parse_architecture(body.architecture)
    row = _new_model_row(body.slug)
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
            raise _out_of_bounds("architecture", "cannot be cleared (null); it is required")
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


# The GPU list as spreadsheet columns: scalars only, memory also in GiB (2^30 B).
_GPU_CSV_FIELDS = (
    "slug",
    "name",
    "vendor",
    "memory_bytes",
    "memory_type",
    "memory_bandwidth_tb_s",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "fp8_support",
    "interconnect",
    "max_gpus_per_node",
    "tdp_w",
    "price_usd_per_hour",
    "price_date",
)


def gpu_csv_row(row: GpuRow) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(row, name) for name in _GPU_CSV_FIELDS}
    values["memory_gib"] = round(row.memory_bytes / 2**30, 2)
    return values


def slugify(text: str) -> str | None:
    """`meta-llama/Llama-3.1-8B` -> `llama-3.1-8b`; None when nothing usable is left."""
    slug = _NOT_SLUG.sub("-", text.rsplit("/", 1)[-1].lower()).lstrip("._-")[:100]
    return slug if _SLUG_RE.fullmatch(slug) else None


def _config_model_type(config: Mapping[str, Any]) -> str | None:
    lm: Mapping[str, Any] = config
    for key in _NESTED_LM_KEYS:
        if isinstance(config.get(key), Mapping):
            lm = config[key]
            break
    model_type = lm.get("model_type") or config.get("model_type")
    if isinstance(model_type, str) and 0 < len(model_type) <= 100 and "\x00" not in model_type:
        return model_type
    return None


def import_model(session: Session, body: ModelImport) -> ModelRow:
    """A Hugging Face config.json -> a model row; stored unless `dry_run` (then transient)."""
    try:
        arch = architecture_from_hf_config(
            body.hf_config, num_parameters=body.num_parameters, weight_bytes=body.weight_bytes
        )
    except SizingError as exc:
        raise type(exc)(f"hf_config.{exc.field}", exc.reason) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError) as exc:
        log.warning("hf_config import failed: %r", exc)
        raise InvalidRequest(
            f"hf_config: cannot be interpreted ({type(exc).__name__})", field="hf_config"
        ) from None
    _check_ints(architecture_to_dict(arch), "hf_config")
    _check_moe(arch, "hf_config")
    model_type = _config_model_type(body.hf_config)
    slug = body.slug or slugify(body.hf_id or body.name or "")
    chosen = slug is not None
    if slug is None:
        if not body.dry_run:
            raise _out_of_bounds("slug", "is required to store the model (or give hf_id or name)")
        slug = slugify(model_type or "") or "imported-model"
    row = _new_model_row(slug)
    row.name = body.name or body.hf_id or slug
    row.hf_id, row.family = body.hf_id, body.family or model_type
    row.sources, row.notes = list(body.sources), body.notes
    apply_architecture(row, arch)
    if body.dry_run:
        # Everything but the write: a slug that is taken fails now, as storing would.
        if chosen and repository.get_by_slug(session, ModelRow, slug) is not None:
            raise _conflict(ModelRow, slug)
        return row
    return _insert(session, row)
