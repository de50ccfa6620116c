"""Answer formats for machines that are not JSON clients: CSV rows and single values.

Shared by every slice that answers spreadsheets (capacity, plans, the GPU list).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from fastapi import Request

# Their home is service.conditional; re-exported for the callers that still import them here.
from .conditional import etag_for, etag_matches
from .errors import InvalidRequest, NotAcceptable

__all__ = [
    "Format",
    "csv_cell",
    "csv_text",
    "etag_for",
    "etag_matches",
    "negotiate",
    "single_value",
]

Format = Literal["json", "csv", "text"]


def negotiate(request: Request, explicit: str | None, field: str | None) -> Format:
    """`format=` wins; then `field=` means a single value; then the Accept header."""
    if explicit == "text" and field is None:
        raise InvalidRequest("format=text answers one value: give `field` too", field="field")
    if explicit is not None:
        return "text" if explicit == "text" else ("csv" if explicit == "csv" else "json")
    if field is not None:
        return "text"
    accept = request.headers.get("accept", "*/*").lower()
    kinds = [part.split(";")[0].strip() for part in accept.split(",")]
    for kind in kinds:
        if kind in ("application/json", "application/problem+json", "*/*", "application/*", ""):
            return "json"
        if kind in ("text/csv", "text/*"):
            return "csv"
    raise NotAcceptable(
        f"cannot answer {accept!r}: ask for application/json or text/csv, or give `field` "
        "for a text/plain value"
    )


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


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0].keys()), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return out.getvalue()


def single_value(value: Any) -> str:
    """One bare value, as spreadsheet WEBSERVICE / IMPORTDATA calls want it."""
    return "" if value is None else str(value)
