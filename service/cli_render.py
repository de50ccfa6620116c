"""What `kvplan` prints: a table for a person at a terminal, or the API's own JSON, CSV or text.

`--format` picks one; without it a terminal gets `table` and a pipe or file `json`. `json`,
`csv` and `text` are the bytes the HTTP API answers for the same question (POST /v1/capacity's
and POST /v1/plans' JSON, GET's CSV rows and `format=text` value, the catalog lists' CSV), so
a script that reads one door reads the other. `table` is for reading, not parsing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TextIO

from .kit.formats import GIB, render_table, single_value
from .planning.router import capacity_table_row, plan_table_rows
from .planning.schemas import (
    CAPACITY_HEADLINE,
    DISTRIBUTION_STATS,
    OPTION_DISTRIBUTIONS,
    PLAN_HEADLINE,
    CapacityAnswer,
    CapacityDetail,
    DisaggregatedOut,
    PlanAnswer,
    distribution_columns,
    no_plan_reason,
    plan_table_columns,
)
from .simulations.schemas import SimulationAnswer

OutputFormat = Literal["table", "json", "csv", "text"]
FORMATS: tuple[OutputFormat, ...] = ("table", "json", "csv", "text")
# The options a person compares in a plan (the CSV has every column).
_PLAN_COLUMNS = (
    "rank",
    "gpu",
    "tensor_parallel_size",
    "replicas",
    "nodes_per_replica",
    "total_gpus",
    "max_num_seqs",
    "sequences_per_replica",
    "kv_pool_gib",
    "cost_per_hour_usd",
    "decode_ms_per_token",
)
# A plan for a rate's: the simulated percentiles and the price of its tokens instead of a
# decode step at a peak. A disaggregated option's gpu, tensor_parallel_size and replicas are
# its decode pool's; its prefill pool's stand beside them.
_RATE_PLAN_COLUMNS = (
    *_PLAN_COLUMNS[:-1],
    "kind",
    "prefill_gpu",
    "prefill_tensor_parallel_size",
    "prefill_replicas",
    "cost_per_million_output_tokens_usd",
    "ttft_p99_ms",
    "tpot_p99_ms",
)


def default_format(stream: TextIO) -> OutputFormat:
    return "table" if stream.isatty() else "json"


def _cell(name: str, value: Any) -> str:
    """A value as a person reads it: thousands separated, bytes also in GiB, None as `-`."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = f"{value:,}"
        if name.endswith("_bytes") or name.endswith("_bytes_per_sequence"):
            text += f" ({value / GIB:,.2f} GiB)"
        return text
    if isinstance(value, float):
        return f"{value:,}"
    return str(value)


def aligned(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells in columns two spaces apart, the last cell not padded."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines) + "\n"


def _listed(title: str, items: Sequence[str]) -> str:
    return "".join(f"{title}: {item}\n" for item in items)


def capacity_table(detail: CapacityDetail) -> str:
    """One line per answer field that has a value, then the warnings and the engine's log."""
    row = detail.model_dump(include=set(CapacityAnswer.model_fields) - {"calibrated_from"})
    pairs = [[name, _cell(name, value)] for name, value in row.items() if value is not None]
    if detail.calibrated_from is not None:
        pairs.append(["calibrated_from", f"calibration {detail.calibrated_from.calibration_id}"])
    out = aligned(pairs)
    out += _listed("engine log", detail.engine_log)
    return out + _listed("warning", detail.warnings)


def plan_table(answer: PlanAnswer) -> str:
    """The question, the options side by side, the flags to paste, what was left out."""
    load = (
        f"peak_concurrency {answer.peak_concurrency:,}"
        if answer.peak_concurrency is not None
        else f"request_rate {answer.request_rate:g}/s"
    )
    head = (
        f"{answer.model}: max_model_len {answer.max_model_len:,}, {load}, "
        f"kv_cache_dtype {answer.kv_cache_dtype}, {answer.engine}\n"
    )
    best = answer.recommendation
    if best is None:
        return head + no_plan_reason(answer) + "\n" + _listed("warning", answer.warnings)
    rows = plan_table_rows(answer)
    columns = _PLAN_COLUMNS if answer.request_rate is None else _RATE_PLAN_COLUMNS
    cells = [list(columns)]
    cells += [[_cell(name, row.get(name)) for name in columns] for row in rows]
    out = head + aligned(cells)
    if best.node_flags:
        out += "".join(
            f"{engine} flags, node {rank}: {flags}\n"
            for engine, nodes in best.node_flags.items()
            for rank, flags in enumerate(nodes)
        )
    elif best.disaggregated is None:
        out += "".join(f"{engine} flags: {flags}\n" for engine, flags in best.engine_flags.items())
    else:
        out += _pools(best.disaggregated)
    if answer.rejected:
        out += f"{len(answer.rejected)} layouts rejected (--format json lists them with why)\n"
    # a fact every option carries is the plan's too (sizing planner `_shared_warnings`): once
    return out + _listed("warning", list(dict.fromkeys([*best.warnings, *answer.warnings])))


def _pools(pools: DisaggregatedOut) -> str:
    """A disaggregated recommendation: each pool's flags, and what fronts them."""
    out = ""
    for role, pool in (("prefill", pools.prefill_pool), ("decode", pools.decode_pool)):
        out += "".join(
            f"{role} pool ({pool.replicas} x {pool.gpu}) {engine} flags: {flags}\n"
            for engine, flags in pool.engine_flags.items()
        )
    return out + "".join(f"{engine} router: {line}\n" for engine, line in pools.router.items())


def capacity_output(detail: CapacityDetail, fmt: OutputFormat) -> str:
    if fmt == "json":
        return detail.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        return render_table([capacity_table_row(detail)], "csv")
    if fmt == "text":
        return single_value(getattr(detail, CAPACITY_HEADLINE)) + "\n"
    return capacity_table(detail)


def plan_output(answer: PlanAnswer, fmt: OutputFormat) -> str:
    if fmt == "json":
        return answer.model_dump_json(indent=2) + "\n"
    if fmt == "csv":
        return render_table(plan_table_rows(answer), "csv", plan_table_columns(ranked=True))
    if fmt == "text":
        best = answer.recommendation
        value = no_plan_reason(answer) if best is None else getattr(best, PLAN_HEADLINE)
        return single_value(value) + "\n"
    return plan_table(answer)


def catalog_output(
    items: Sequence[Mapping[str, Any]],
    csv_rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    fmt: OutputFormat,
    table_columns: Sequence[str],
) -> str:
    """A catalog list: the JSON items, the CSV table or how many (as GET's), or a table."""
    if fmt == "json":
        return json.dumps(list(items), indent=2) + "\n"
    if fmt == "csv":
        return render_table(csv_rows, "csv", columns)
    if fmt == "text":
        return single_value(len(items)) + "\n"
    cells = [list(table_columns)]
    cells += [[_cell(name, row.get(name)) for name in table_columns] for row in csv_rows]
    return aligned(cells)


def simulation_table(answer: SimulationAnswer) -> str:
    """The replica, the latency percentiles side by side, throughput and the engine's load."""
    e = answer.engine
    head = f"{answer.model} on {answer.gpu} ({e.engine}'s scheduler): {e.limits_text()}\n"
    cells = [["", "mean", "p50", "p90", "p99"]]
    for name in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "queue_time_ms"):
        d = getattr(answer, name)
        cells.append(
            [name, *("-" if v is None else f"{v:,.1f}" for v in (d.mean, d.p50, d.p90, d.p99))]
        )
    t = answer.throughput
    pairs = [
        ["completed_requests", f"{answer.completed_requests:,}"],
        ["requests_per_second", f"{t.requests_per_second:,.2f}"],
        ["output_tokens_per_second", f"{t.output_tokens_per_second:,.1f}"],
        ["mean_running", f"{answer.mean_running:,.1f}"],
        ["mean_waiting", f"{answer.mean_waiting:,.1f}"],
        ["peak_kv_usage", f"{answer.peak_kv_usage:.1%}"],
        ["preemptions", f"{answer.preemptions:,}"],
    ]
    if answer.goodput is not None:
        pairs.append(
            [
                "goodput",
                f"{answer.goodput.requests_per_second:,.2f}/s ({answer.goodput.fraction:.1%})",
            ]
        )
    return head + aligned(cells) + aligned(pairs) + _listed("warning", answer.warnings)


def simulation_output(answer: SimulationAnswer, fmt: OutputFormat) -> str:
    if fmt == "json":
        return answer.model_dump_json(indent=2) + "\n"
    if fmt == "text":
        return single_value(answer.ttft_ms.p99) + "\n"
    if fmt == "csv":
        row = {
            "completed_requests": answer.completed_requests,
            # named as a plan for a rate's row names them (ttft_ms's p99 is ttft_p99_ms)
            **{
                column: getattr(getattr(answer, n), stat)
                for n in OPTION_DISTRIBUTIONS
                for column, stat in zip(distribution_columns(n), DISTRIBUTION_STATS, strict=True)
            },
            "requests_per_second": answer.throughput.requests_per_second,
            "output_tokens_per_second": answer.throughput.output_tokens_per_second,
            "preemptions": answer.preemptions,
            # As a capacity table names its speed calibration: by id, empty without one.
            "speed_calibration_id": (
                None
                if answer.speed_calibrated_from is None
                else answer.speed_calibrated_from.calibration_id
            ),
        }
        return render_table([row], "csv")
    return simulation_table(answer)
