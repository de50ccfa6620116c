"""Answer formats for machines that are not JSON clients: CSV and TSV tables, one bare value.

Shared by every slice that answers spreadsheets (capacity, plans, the catalog lists).

A table is flat: one header row, then one row per entry, scalars only. Column names carry their
unit as JSON fields do (`_bytes`, `_usd_per_hour`, `cost_per_hour_usd`); a column in bytes that
a person reads as memory (a GPU, a pool, a headroom, weights, one sequence) has a twin in GiB
(2^30 bytes, two decimals) named with `_gib` in place of `_bytes`: `kv_pool_bytes` and
`kv_pool_gib`, `kv_bytes_per_sequence` and `kv_gib_per_sequence`. Per-token sizes stay in bytes
only (they are kilobytes). The exact integer stays beside its GiB twin.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal, cast

from fastapi import Request

# Their home is service.kit.conditional; re-exported for the callers that still import them here.
from .conditional import etag_for, etag_matches
from .errors import InvalidRequest, NotAcceptable

__all__ = [
    "MEDIA_TYPES",
    "TABLE_FORMATS",
    "Format",
    "csv_cell",
    "csv_text",
    "etag_for",
    "etag_matches",
    "gib_twins",
    "negotiate",
    "negotiate_accept",
    "parse_table",
    "render_table",
    "single_value",
    "table_kind",
]

Format = Literal["json", "csv", "tsv", "text"]
TableFormat = Literal["csv", "tsv"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("csv", "tsv")

MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "tsv": "text/tab-separated-values; charset=utf-8",
    "text": "text/plain; charset=utf-8",
}
_DELIMITERS: dict[str, str] = {"csv": ",", "tsv": "\t"}

# Accept media ranges, in the order a client lists them, to the format they ask for.
_ACCEPTED: dict[str, Format] = {
    "application/json": "json",
    "application/problem+json": "json",
    "application/*": "json",
    "*/*": "json",
    "": "json",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "text/plain": "text",
    "text/*": "csv",
}


def negotiate(request: Request, explicit: str | None, field: str | None) -> Format:
    """`format=` wins; then `field=` means a single value; then the Accept header.

    `format=text` without `field` is the answer's headline value (the caller picks it).
    """
    return negotiate_accept(request.headers.get("accept"), explicit, field)


# Memoised: clients send a handful of Accept headers, each parsed once (a refused one, the
# NotAcceptable, is not kept).
@lru_cache(maxsize=256)
def negotiate_accept(accept_header: str | None, explicit: str | None, field: str | None) -> Format:
    """`negotiate`, given the Accept header itself (None when the request has none)."""
    if explicit is not None:
        return cast(Format, explicit) if explicit in MEDIA_TYPES else "json"
    if field is not None:
        return "text"
    accept = (accept_header or "*/*").lower()
    for part in accept.split(","):
        kind = part.split(";")[0].strip()
        if kind in _ACCEPTED:
            return _ACCEPTED[kind]
    raise NotAcceptable(
        f"cannot answer {accept!r}: ask for application/json, text/csv, "
        "text/tab-separated-values or text/plain"
    )


def table_kind(content_type: str | None) -> TableFormat | None:
    """`csv` or `tsv` when a request body's Content-Type is a table, else None."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "text/csv":
        return "csv"
    if media == "text/tab-separated-values":
        return "tsv"
    return None


# Spreadsheets run a cell that starts with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a spreadsheet should read it: text that looks like a formula stays text."""
    if value is None:
        return ""
    # Engine flags ("--tensor-parallel-size 4") are kvplan's own text, pasted as they are.
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not value.startswith("--"):
        return "'" + value
    return value


def render_table(
    rows: Sequence[Mapping[str, Any]],
    fmt: TableFormat = "csv",
    columns: Sequence[str] | None = None,
) -> str:
    """A header row, then one line per row; `columns` keeps the header when there are no rows."""
    names = list(columns) if columns is not None else (list(rows[0]) if rows else [])
    if not names:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(
        out,
        fieldnames=names,
        delimiter=_DELIMITERS[fmt],
        lineterminator="\n",
        extrasaction="ignore",
    )
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(row.get(k)) for k in names})
    return out.getvalue()


def csv_text(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    return render_table(rows, "csv", columns)


def parse_table(text: str, fmt: TableFormat) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV or TSV body: its header and its rows (blank lines skipped).

    A table the csv module cannot read (a carriage return alone inside an unquoted cell: RFC
    4180 allows line breaks only inside quotes) is a 422 naming the row, never a 500."""
    reader = csv.DictReader(io.StringIO(text), delimiter=_DELIMITERS[fmt], restkey="")
    rows: list[dict[str, str]] = []
    read = 0  # rows read so far, blank ones included: the row that failed is the next
    try:
        for row in reader:
            read += 1
            if any((v or "").strip() for v in row.values() if v):
                rows.append(row)
    except csv.Error as exc:
        raise InvalidRequest(
            f"row {read + 1} of the table cannot be read ({exc}); a cell that holds a line "
            "break must be quoted",
            field="body",
            row=read + 1,
        ) from exc
    return list(reader.fieldnames or []), rows


GIB = 2**30


def gib_name(bytes_name: str) -> str:
    """`kv_pool_bytes` -> `kv_pool_gib`, `kv_bytes_per_sequence` -> `kv_gib_per_sequence`."""
    if bytes_name.endswith("_bytes"):
        return bytes_name.removesuffix("_bytes") + "_gib"
    return bytes_name.replace("_bytes_", "_gib_", 1)


def gib_twins(row: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """`row` with a GiB column right after each of `names` (bytes, two decimals)."""
    wanted = set(names)
    out: dict[str, Any] = {}
    for key, value in row.items():
        out[key] = value
        if key in wanted:
            out[gib_name(key)] = None if value is None else round(value / GIB, 2)
    return out


def single_value(value: Any) -> str:
    """One bare value, as spreadsheet WEBSERVICE / IMPORTDATA calls want it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
