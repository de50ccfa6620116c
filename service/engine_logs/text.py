"""An engine-log answer as plain-text tables, for `kvplan explain-log` (people at a shell).

Memory is shown in GiB (2^30 bytes, two decimals) with the exact bytes beside it; counts with
thousands separators; shares as percentages. `--json` prints the API's body instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .schemas import Difference, EngineLogAnswer
from .service import answer_json

GIB = 2**30


def _bytes(value: int) -> str:
    return f"{value / GIB:,.2f} GiB ({value:,} B)"


def _figure(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if name.endswith("_bytes") and isinstance(value, int):
        return _bytes(value)
    return f"{value:,}"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _difference_cells(row: Difference) -> list[str]:
    def show(value: int | float | None) -> str:
        if value is None:
            return "-"
        if row.unit == "bytes":
            return f"{value / GIB:,.2f} GiB"
        return f"{value:,}"

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:+.2%}"

    return [
        row.line,
        show(row.predicted),
        show(row.reported),
        "-"
        if row.difference is None
        else ("+" if row.difference > 0 else "") + show(row.difference),
        share(row.share_of_budget),
        share(row.share_of_reported),
    ]


def render(answer: EngineLogAnswer) -> str:
    """The engine, the settings, every figure printed, then each budget line against kvplan's."""
    body = answer_json(answer)
    head = f"{answer.engine} {answer.engine_version or '(version not printed)'}"
    if answer.model is not None:
        head += f"  model {answer.model}  gpu {answer.gpu}"
    out = [head, "", "settings the log reveals:"]
    out += _table([[f"  {k}", str(v)] for k, v in body["settings"].items()] or [["  (none)"]])
    out += ["", "figures the engine printed:"]
    figures = [
        [f"  {k}", _figure(k, v)] for k, v in body["reported"].items() if not isinstance(v, list)
    ]
    out += _table(figures or [["  (none)"]])
    out.append("")
    if answer.prediction is None:
        out.append(f"no prediction: {answer.prediction_unavailable}")
    else:
        if answer.budget_bytes is not None:
            out.append(f"budget (utilization x total): {_bytes(answer.budget_bytes)}")
        header = ["line", "kvplan", "engine", "difference", "of budget", "of reported"]
        out += _table([header, *(_difference_cells(row) for row in answer.differences)])
    out += [f"warning: {warning}" for warning in answer.warnings]
    return "\n".join(out) + "\n"
