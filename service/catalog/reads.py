"""Catalog reads: from the database, or from this replica's snapshot while it is unreachable.

A read asks the database first (a read right after a write through any replica sees it). When
the database cannot be reached, or has stopped answering (`DatabaseHealth`), a replica that
holds a catalog snapshot answers from it instead, with the same filters, order, cursors and
ETags (an entry's ETag is its revision, which the snapshot holds too), and says so: the answer
is marked stale (`STALE_HEADER`). Without a snapshot the read is a 503, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from ..kit.conditional import decode_cursor, encode_cursor
from ..kit.errors import NotFound, schema_missing
from ..sizing import LayerKind
from . import answers, service
from .schemas import SLUG_RE, GpuRead, ModelRead
from .snapshot import CatalogCache, CatalogSnapshot, closest

# Set to "true" on a catalog answer served from the snapshot because the database was away.
STALE_HEADER = "KVPLAN-Catalog-Stale"
STALE_HEADER_DOC = {
    "description": "`true` when the database was unreachable and this answer comes from the "
    "replica's in-memory copy of the catalog (which may miss the latest writes); absent "
    "otherwise. `kvplan_catalog_stale` is 1 meanwhile.",
    "schema": {"type": "string", "enum": ["true"]},
}

Read = TypeVar("Read", GpuRead, ModelRead)
T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[Read]):
    items: list[Read]
    next_cursor: str | None
    stale: bool


def _unreachable(exc: Exception) -> bool:
    """The database did not answer (as opposed to answering with an error, e.g. unmigrated)."""
    if isinstance(exc, PoolTimeout):
        return True
    if isinstance(exc, OperationalError):
        return not schema_missing(exc)
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _database_or_snapshot(
    catalog: CatalogCache,
    from_database: Callable[[], T],
    from_snapshot: Callable[[CatalogSnapshot], T],
) -> tuple[T, bool]:
    """The database's answer, or the snapshot's (and True) when the database is away."""
    held = catalog.current
    if held is not None and not catalog.database_answering:
        catalog.mark_stale("the database is not answering")
        return from_snapshot(held), True
    try:
        answer = from_database()
    except (DBAPIError, PoolTimeout) as exc:
        if held is None or not _unreachable(exc):
            raise
        catalog.mark_stale(str(exc))
        return from_snapshot(held), True
    if catalog.stale:
        catalog.get()  # the database is back: bring the snapshot (and the metric) up to date
    return answer, False


def _page(entries: Iterable[Read], start: str | None, limit: int) -> tuple[list[Read], str | None]:
    """Entries in byte order of slug from `start` on; the cursor of the entry after `limit`."""
    ordered = sorted(entries, key=lambda entry: entry.slug.encode())
    if start is not None:
        ordered = [e for e in ordered if e.slug.encode() >= start.encode()]
    if len(ordered) > limit:
        return ordered[:limit], encode_cursor(ordered[limit].slug)
    return ordered, None


def _one(reads: Mapping[str, Read], slug: str, kind: str) -> Read:
    entry = reads.get(slug) if SLUG_RE.fullmatch(slug) else None
    if entry is None:
        raise NotFound(
            f"no {kind} {slug!r} in the catalog",
            field="slug",
            suggestions=closest(slug, sorted(reads)),
        )
    return entry


def gpu(session: Session, catalog: CatalogCache, slug: str) -> tuple[GpuRead, bool]:
    return _database_or_snapshot(
        catalog,
        lambda: answers.gpu_read(service.get_gpu(session, slug)),
        lambda snapshot: _one(snapshot.gpu_reads, slug, "GPU"),
    )


def model(session: Session, catalog: CatalogCache, slug: str) -> tuple[ModelRead, bool]:
    return _database_or_snapshot(
        catalog,
        lambda: answers.model_read(service.get_model(session, slug)),
        lambda snapshot: _one(snapshot.model_reads, slug, "model"),
    )


def gpus(
    session: Session,
    catalog: CatalogCache,
    *,
    limit: int,
    cursor: str | None,
    vendor: str | None = None,
    min_memory_bytes: int | None = None,
    max_price_usd_per_hour: float | None = None,
    fp8_support: bool | None = None,
) -> Page[GpuRead]:
    start = decode_cursor(cursor, SLUG_RE)  # a bad cursor is a 422 either way

    def from_database() -> Page[GpuRead]:
        rows, next_cursor = service.list_gpus(
            session,
            limit=limit,
            cursor=cursor,
            vendor=vendor,
            min_memory_bytes=min_memory_bytes,
            max_price_usd_per_hour=max_price_usd_per_hour,
            fp8_support=fp8_support,
        )
        return Page([answers.gpu_read(row) for row in rows], next_cursor, stale=False)

    def keep(entry: GpuRead) -> bool:
        # the repository's filters, in memory (a NULL never matches a SQL comparison)
        return (
            (vendor is None or (entry.vendor or "").lower() == vendor.lower())
            and (min_memory_bytes is None or entry.memory_bytes >= min_memory_bytes)
            and (
                max_price_usd_per_hour is None
                or (
                    entry.price_usd_per_hour is not None
                    and entry.price_usd_per_hour <= max_price_usd_per_hour
                )
            )
            and (fp8_support is None or entry.fp8_support is fp8_support)
        )

    def from_snapshot(snapshot: CatalogSnapshot) -> Page[GpuRead]:
        items, next_cursor = _page(filter(keep, snapshot.gpu_reads.values()), start, limit)
        return Page(items, next_cursor, stale=True)

    page, _ = _database_or_snapshot(catalog, from_database, from_snapshot)
    return page


def models(
    session: Session,
    catalog: CatalogCache,
    *,
    limit: int,
    cursor: str | None,
    family: str | None = None,
    layer_kind: LayerKind | None = None,
    q: str | None = None,
    min_parameters: int | None = None,
    max_parameters: int | None = None,
) -> Page[ModelRead]:
    start = decode_cursor(cursor, SLUG_RE)

    def from_database() -> Page[ModelRead]:
        rows, next_cursor = service.list_models(
            session,
            limit=limit,
            cursor=cursor,
            family=family,
            layer_kind=layer_kind,
            q=q,
            min_parameters=min_parameters,
            max_parameters=max_parameters,
        )
        return Page([answers.model_read(row) for row in rows], next_cursor, stale=False)

    def keep(entry: ModelRead) -> bool:
        parameters = entry.num_parameters
        if parameters is None and (min_parameters is not None or max_parameters is not None):
            return False
        needle = None if q is None else q.lower()
        return (
            (family is None or (entry.family or "").lower() == family.lower())
            and (layer_kind is None or layer_kind.value in entry.layer_kinds)
            and (needle is None or needle in entry.slug.lower() or needle in entry.name.lower())
            and (min_parameters is None or (parameters or 0) >= min_parameters)
            and (max_parameters is None or (parameters or 0) <= max_parameters)
        )

    def from_snapshot(snapshot: CatalogSnapshot) -> Page[ModelRead]:
        service.check_model_filters(layer_kind)
        items, next_cursor = _page(filter(keep, snapshot.model_reads.values()), start, limit)
        return Page(items, next_cursor, stale=True)

    page, _ = _database_or_snapshot(catalog, from_database, from_snapshot)
    return page
