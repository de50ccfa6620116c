"""Traces: requests as rows, in kvplan's own columns or in the public traces' own.

* kvplan's rows (JSON or CSV): `arrival_s`, `input_tokens`, `output_tokens`, optionally
  `hash_ids` (as Mooncake's);
* the Azure LLM inference traces (Azure/AzurePublicDataset, 2023 and 2024):
  `TIMESTAMP,ContextTokens,GeneratedTokens`, the time as `2023-11-16 18:15:46.6805900`;
* BurstGPT (HPMLL/BurstGPT): `Timestamp,Model,Request tokens,Response tokens,Total tokens,
  Log Type` (the third release adds `Session ID,Elapsed time`), `Timestamp` in seconds;
  rows of 0 response tokens (failed requests) are skipped and counted;
* Mooncake (kvcache-ai/Mooncake FAST25-release/traces, JSON lines): `timestamp` in
  milliseconds, `input_length`, `output_length`, `hash_ids`: one prefix-aware hash per
  512-token block (the README's "Open Source Trace").

Arrivals are taken from the first row's time (the first request arrives at 0). Mooncake's
512-token block hashes become the engine's block hashes: the engine's block k (tokens
k x block_size to (k + 1) x block_size) takes the hash of the 512-token block its last token
falls in, paired with k, so two requests share block k exactly when they share that 512-token
prefix block (each hash covers the whole prefix before it).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .errors import SimulationError
from .workload import Request

MOONCAKE_BLOCK_TOKENS = 512
EPOCH = datetime(1970, 1, 1)  # naive: the trace's times carry no zone, and only gaps count


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace before the engine's block size is known."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    hash_block_tokens: int = MOONCAKE_BLOCK_TOKENS


@dataclass(frozen=True, slots=True)
class Trace:
    rows: tuple[TraceRow, ...]
    skipped_rows: int = 0  # rows with no output (failed requests in BurstGPT)
    format: str = "kvplan"


def _whole(field: str, value: object, *, minimum: int = 1) -> int:
    try:
        number = float(str(value).strip()) if not isinstance(value, int | float) else float(value)
    except ValueError:
        raise SimulationError(field, f"must be a whole number, got {value!r}") from None
    if (
        isinstance(value, bool)
        or not math.isfinite(number)
        or number != int(number)
        or number < minimum
    ):
        raise SimulationError(field, f"must be a whole number of at least {minimum}, got {value!r}")
    return int(number)


def _seconds(field: str, value: object) -> float:
    try:
        number = float(str(value).strip()) if not isinstance(value, int | float) else float(value)
    except ValueError:
        raise SimulationError(field, f"must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise SimulationError(field, f"must be zero or a positive number, got {value!r}")
    return number


def _azure_time(field: str, text: str) -> float:
    """Seconds since the epoch of `2023-11-16 18:15:46.6805900` (100 ns digits: more than
    datetime's six, so the fraction is read apart)."""
    whole, _, fraction = text.strip().partition(".")
    try:
        stamp = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        return (stamp - EPOCH).total_seconds() + float(f"0.{fraction or 0}")
    except ValueError:
        raise SimulationError(
            field, f"is not a time like 2023-11-16 18:15:46.6805900: {text!r}"
        ) from None


def _relative(rows: list[TraceRow], skipped: int, fmt: str) -> Trace:
    if not rows:
        raise SimulationError("trace", "has no request")
    rows.sort(key=lambda r: r.arrival_s)
    start = rows[0].arrival_s
    return Trace(
        tuple(
            TraceRow(
                r.arrival_s - start,
                r.input_tokens,
                r.output_tokens,
                r.hash_ids,
                r.hash_block_tokens,
            )
            for r in rows
        ),
        skipped,
        fmt,
    )


def _hash_ids(field: str, value: object) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in value
    ):
        raise SimulationError(field, "must be a list of whole numbers")
    return tuple(value)


def rows_trace(rows: Sequence[Mapping[str, object]]) -> Trace:
    """JSON rows in kvplan's columns (`trace` in a POST body)."""
    out = []
    for i, row in enumerate(rows):
        out.append(
            TraceRow(
                _seconds(f"trace[{i}].arrival_s", row.get("arrival_s")),
                _whole(f"trace[{i}].input_tokens", row.get("input_tokens")),
                _whole(f"trace[{i}].output_tokens", row.get("output_tokens")),
                _hash_ids(f"trace[{i}].hash_ids", row.get("hash_ids")),
            )
        )
    return _relative(out, 0, "kvplan")


AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")
KVPLAN = ("arrival_s", "input_tokens", "output_tokens")


def csv_trace(text: str) -> Trace:
    """A CSV trace in Azure's, BurstGPT's or kvplan's columns, told apart by the header."""
    reader = csv.DictReader(text.splitlines())
    header = tuple(name.strip() for name in reader.fieldnames or ())
    reader.fieldnames = list(header)
    for fmt, (time, prompt, answer) in (
        ("azure", AZURE),
        ("burstgpt", BURSTGPT),
        ("kvplan", KVPLAN),
    ):
        if {time, prompt, answer} <= set(header):
            return _csv_rows(reader, fmt, time, prompt, answer)
    raise SimulationError(
        "trace",
        "a CSV trace has the columns TIMESTAMP,ContextTokens,GeneratedTokens (Azure), "
        "Timestamp,...,Request tokens,Response tokens (BurstGPT) or "
        f"arrival_s,input_tokens,output_tokens; this one has {','.join(header) or 'none'}",
    )


def _csv_rows(
    reader: Iterable[dict[str, str]], fmt: str, time: str, prompt: str, answer: str
) -> Trace:
    rows = []
    skipped = 0
    for line, row in enumerate(reader, start=2):
        where = f"trace line {line}"
        arrival = (
            _azure_time(f"{where} {time}", row[time] or "")
            if fmt == "azure"
            else _seconds(f"{where} {time}", row[time])
        )
        output = _whole(f"{where} {answer}", row[answer], minimum=0)
        if output == 0 and fmt == "burstgpt":
            skipped += 1
            continue
        rows.append(
            TraceRow(
                arrival,
                _whole(f"{where} {prompt}", row[prompt]),
                _whole(f"{where} {answer}", output),
            )
        )
    return _relative(rows, skipped, fmt)


def mooncake_trace(text: str) -> Trace:
    """Mooncake's JSON lines: timestamp (ms), input_length, output_length, hash_ids."""
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"trace line {line}"
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            raise SimulationError(where, "is not a JSON object") from None
        if not isinstance(row, dict):
            raise SimulationError(where, "is not a JSON object")
        rows.append(
            TraceRow(
                _seconds(f"{where} timestamp", row.get("timestamp")) / 1e3,
                _whole(f"{where} input_length", row.get("input_length")),
                _whole(f"{where} output_length", row.get("output_length")),
                _hash_ids(f"{where} hash_ids", row.get("hash_ids")),
            )
        )
    return _relative(rows, 0, "mooncake")


def requests_of(trace: Trace, block_size: int) -> list[Request]:
    """The trace's requests with the engine's block hashes (see the module docstring)."""
    out = []
    for row in trace.rows:
        hashes = None
        if row.hash_ids:
            covered = min(row.input_tokens, len(row.hash_ids) * row.hash_block_tokens)
            hashes = tuple(
                row.hash_ids[((k + 1) * block_size - 1) // row.hash_block_tokens] * 1_000_003 + k
                for k in range(covered // block_size)
            )
        out.append(Request(row.arrival_s, row.input_tokens, row.output_tokens, hashes))
    return out
