"""Calibration use cases: keep a start-up log as what it measured; list, read, delete. No SQL.

A calibration is the engine's own KV pool for one deployment (model, GPU, engine release,
layout, KV dtype, the flags that change the memory outside the cache), stored so that capacity
questions with that key take it instead of kvplan's estimate (`planning.calibrated`).

Engines print the pool rounded (vLLM "Available KV cache memory: 58.11 GiB"), but they print
the blocks or tokens it was cut into exactly. The stored pool is the one that gives those
blocks and tokens by kvplan's own arithmetic: every pool within half a printed digit of the
figure is tried (a binary search, since blocks grow with the pool), and the middle of those
that give exactly the engine's blocks and tokens is kept. Where none does, kvplan's cache
layout differs from the engine's for this model; the printed pool is kept and the calibration
says it does not reproduce the log.

Writes take the request's session and never commit (`deps.WriteSessionDep` does). They bump
the catalog version: calibrations travel in the catalog snapshot every replica reads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..catalog import repository as catalog_repository
from ..catalog.snapshot import CalibrationKey, CatalogSnapshot
from ..deployments import repository as deployment_repository
from ..kit.conditional import check_if_match, decode_cursor, encode_cursor, if_match_tags
from ..kit.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed
from ..planning import calibrated
from ..planning import service as planning
from ..planning.schemas import CapacityDetail
from ..planning.service import CapacityQuestion
from . import repository
from .model import Figure, ParsedLog
from .models import CalibrationRow
from .schemas import CalibrationRead
from .service import LogQuestion, budget_lines, explain

FRACTION_OF = {
    "vllm": "gpu_memory_utilization",
    "sglang": "mem_fraction_static",
    "trtllm": "free_gpu_memory_fraction",
}
# Budget lines that are not memory taken outside the KV cache.
_NOT_REPLACED = frozenset({"total_memory", "requested", "free_after_warmup", "kv_cache_memory"})
_ID = re.compile(r"[1-9]\d{0,17}")


@dataclass(frozen=True, slots=True)
class PoolFit:
    """The pool a calibration keeps, and whether it gives the log's own blocks and tokens."""

    kv_pool_bytes: int
    reproduces: bool
    printed_bytes: int | None


# ---- the pool --------------------------------------------------------------------------------


def _chosen(parsed: ParsedLog, field: str) -> Figure | None:
    value = getattr(parsed.reported, field)
    found = [f for f in parsed.occurrences(field) if f.value == value]
    return found[-1] if found else None


def _half_digit(figure: Figure) -> Fraction:
    """Half the last printed digit, in bytes: the most the engine's rounding moved it."""
    decimals = len(figure.printed.split(".", 1)[1]) if "." in figure.printed else 0
    return Fraction(figure.unit_bytes, 2 * 10**decimals)


def printed_pool(parsed: ParsedLog) -> tuple[int, int, int] | None:
    """The printed pool, and the least and most bytes it can stand for (SGLang: K + V)."""
    names: tuple[str, ...] = ()
    if parsed.reported.kv_pool_bytes is not None:
        names = ("kv_pool_bytes",)
    if not names and parsed.reported.k_cache_bytes is not None:
        names = ("k_cache_bytes", "v_cache_bytes")
    figures = [figure for name in names if (figure := _chosen(parsed, name)) is not None]
    if not figures or len(figures) != len(names):
        return None
    value = sum(int(figure.value) for figure in figures)
    half = sum((_half_digit(figure) for figure in figures), Fraction(0))
    return value, math.ceil(value - half), math.floor(value + half)


def _targets(parsed: ParsedLog) -> tuple[tuple[str, int], ...]:
    """The exact counts the engine printed for its pool: blocks and tokens."""
    reported = parsed.reported
    tokens = reported.kv_cache_tokens or reported.max_total_num_tokens
    out = []
    if reported.num_gpu_blocks is not None:
        out.append(("num_gpu_blocks", reported.num_gpu_blocks))
    if tokens is not None:
        out.append(("kv_cache_tokens", tokens))
    return tuple(out)


def _first_true(low: int, high: int, test: Callable[[int], bool]) -> int:
    """The least value in [low, high] where `test` (false, then true) is true."""
    while low < high:
        middle = (low + high) // 2
        if test(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _concurrency_matches(parsed: ParsedLog, detail: CapacityDetail) -> bool:
    figure = _chosen(parsed, "max_concurrency")
    if figure is None:
        return True
    decimals = len(figure.printed.split(".", 1)[1]) if "." in figure.printed else 0
    return round(detail.max_concurrency, decimals) == float(figure.printed.replace(",", ""))


def fit_pool(
    parsed: ParsedLog, question: CapacityQuestion, catalog: CatalogSnapshot, gpu_bytes: int
) -> PoolFit:
    """The pool that gives the log's blocks and tokens within the printed pool's rounding."""
    printed = printed_pool(parsed)
    targets = _targets(parsed)
    if printed is None and not targets:
        raise InvalidRequest(
            "the log prints no KV cache pool, blocks or tokens: there is nothing to calibrate",
            field="log",
        )
    if not targets:
        assert printed is not None
        return PoolFit(printed[0], reproduces=False, printed_bytes=printed[0])

    def at(pool: int) -> CapacityDetail:
        fields = question.fields.model_copy(update={"kv_pool_bytes": pool})
        probe = dataclasses.replace(question, fields=fields, explain=False, calibrations=False)
        return planning.capacity(probe, catalog)

    def counts(pool: int) -> tuple[int, ...]:
        detail = at(pool)
        return tuple(int(getattr(detail, name)) for name, _ in targets)

    wanted = tuple(value for _, value in targets)
    # Without a printed pool, any pool the GPU could hold; also where the pool printed is not
    # every pipeline stage's: each stage sizes its own pool and the engine cuts every stage's
    # blocks from the smallest (vLLM `get_kv_cache_configs`), which the log may not print.
    stages = question.fields.pipeline_parallel_size
    bounded = printed is not None and len(parsed.reported.kv_pool_bytes_by_rank) >= stages
    low, high = (printed[1], printed[2]) if bounded and printed is not None else (0, gpu_bytes)

    def reaches(pool: int) -> bool:
        return all(got >= want for got, want in zip(counts(pool), wanted, strict=True))

    def passes(pool: int) -> bool:
        return any(got > want for got, want in zip(counts(pool), wanted, strict=True))

    if reaches(high) and not passes(low):
        first = _first_true(low, high, reaches)
        last = _first_true(low, high + 1, lambda pool: pool > high or passes(pool)) - 1
        if first <= last and counts(first) == wanted:
            pool = (first + last) // 2
            reproduces = _concurrency_matches(parsed, at(pool))
            return PoolFit(pool, reproduces, printed[0] if printed is not None else None)
    if printed is None:
        shown = ", ".join(f"{name} {value:,}" for name, value in targets)
        raise InvalidRequest(
            f"no KV pool gives the log's {shown} by kvplan's arithmetic for this model, and the "
            "log prints no pool to keep instead: nothing to calibrate",
            field="log",
        )
    return PoolFit(printed[0], reproduces=False, printed_bytes=printed[0])


# ---- the stored calibration ---------------------------------------------------------------------


def _fraction_base(engine: str, parsed: ParsedLog, detail: CapacityDetail, pool: int) -> int | None:
    """What the engine's fraction multiplies, as printed where the log prints it."""
    reported = parsed.reported
    lines = budget_lines(detail)
    if engine == "vllm":
        return reported.total_memory_bytes or detail.gpu_memory_bytes
    if engine == "sglang":
        if reported.free_memory_at_start_bytes is not None:
            return reported.free_memory_at_start_bytes
        return lines.get("total_memory", detail.gpu_memory_bytes) - lines.get("startup", 0)
    if reported.free_memory_before_kv_cache_bytes is not None:
        return reported.free_memory_before_kv_cache_bytes
    fraction = detail.engine_settings.get(FRACTION_OF[engine])
    return round(pool / fraction) if isinstance(fraction, int | float) and fraction else None


def calibration_key(
    model_key: str, gpu_key: str, detail: CapacityDetail, weight_format: str
) -> CalibrationKey:
    return CalibrationKey.of(
        model_key,
        gpu_key,
        engine=detail.engine,
        engine_version=detail.engine_version,
        tensor_parallel_size=detail.tensor_parallel_size,
        pipeline_parallel_size=detail.pipeline_parallel_size,
        kv_cache_dtype=detail.kv_cache_dtype,
        weight_format=weight_format,
        engine_settings=detail.engine_settings,
    )


def create(
    session: Session, question: LogQuestion, notes: str | None, catalog: CatalogSnapshot
) -> CalibrationRow:
    """Read the log, fit its pool, and store it under its key (409 if the key has one)."""
    explained = explain(question, catalog)
    detail = explained.answer.prediction
    target = explained.target
    if detail is None or explained.question is None or target is None:
        raise InvalidRequest(
            f"cannot calibrate: {explained.answer.prediction_unavailable}",
            field=explained.missing_field or "log",
        )
    parsed = explained.parsed
    model_key = calibrated.model_key(target.model_ref, target.model)
    assert model_key is not None  # a log is matched to a catalog slug or a config.json
    weight_format = planning.weight_format(explained.question, catalog)
    key = calibration_key(model_key, target.gpu, detail, weight_format)
    _refuse_calibrated(session, key)
    fit = fit_pool(parsed, explained.question, catalog, detail.gpu_memory_bytes)
    row = _calibration_row(key, detail, parsed, fit, log=question.log, notes=notes)
    try:
        repository.add(session, row)
    except IntegrityError as exc:  # a concurrent write stored the same key first
        raise Conflict(
            "this deployment was calibrated meanwhile; GET the list", field="log"
        ) from exc
    catalog_repository.bump_catalog_version(session)
    return row


def _refuse_calibrated(session: Session, key: CalibrationKey) -> None:
    """409 where this deployment (the same key) is calibrated already."""
    existing = repository.get_by_key(session, key.digest)
    if existing is not None:
        raise Conflict(
            f"calibration {existing.id} already measured this deployment; DELETE "
            f"/v1/calibrations/{existing.id} (with its ETag) to replace it",
            field="log",
            calibration_id=existing.id,
        )


def _calibration_row(
    key: CalibrationKey,
    detail: CapacityDetail,
    parsed: ParsedLog,
    fit: PoolFit,
    *,
    log: str,
    notes: str | None,
) -> CalibrationRow:
    """What the log measured, beside kvplan's prediction, as the row kept under `key`."""
    reported = parsed.reported
    fraction_name = FRACTION_OF[detail.engine]
    fraction = detail.engine_settings.get(fraction_name)
    return CalibrationRow(
        key_digest=key.digest,
        **dataclasses.asdict(key),
        fraction_name=fraction_name,
        fraction=fraction if isinstance(fraction, int | float) else None,
        fraction_base_bytes=_fraction_base(detail.engine, parsed, detail, fit.kv_pool_bytes),
        gpu_memory_bytes=detail.gpu_memory_bytes,
        kv_pool_bytes=fit.kv_pool_bytes,
        reproduces=fit.reproduces,
        weights_bytes=reported.weights_bytes
        or reported.model_loading_bytes
        or reported.engine_allocation_bytes,
        activation_peak_bytes=reported.activation_peak_bytes,
        non_torch_bytes=reported.non_torch_bytes,
        cudagraph_bytes=reported.cudagraph_bytes,
        reported_kv_pool_bytes=fit.printed_bytes,
        num_gpu_blocks=reported.num_gpu_blocks,
        kv_cache_tokens=reported.kv_cache_tokens or reported.max_total_num_tokens,
        max_concurrency=reported.max_concurrency,
        max_model_len=detail.max_model_len,
        replaced=[name for name in budget_lines(detail) if name not in _NOT_REPLACED],
        settings={
            name: value
            for name, value in dataclasses.asdict(parsed.settings).items()
            if value is not None
        },
        log_sha256=hashlib.sha256(log.encode("utf-8", errors="replace")).hexdigest(),
        notes=notes,
    )


def read(row: CalibrationRow) -> CalibrationRead:
    return CalibrationRead.model_validate(row, from_attributes=True)


def get(session: Session, calibration_id: int) -> CalibrationRow:
    row = repository.get(session, calibration_id)
    if row is None:
        raise NotFound(f"no calibration {calibration_id}", field="id")
    return row


def list_page(
    session: Session,
    *,
    limit: int,
    cursor: str | None,
    model: str | None = None,
    gpu: str | None = None,
    engine: str | None = None,
) -> tuple[list[CalibrationRow], str | None]:
    start = decode_cursor(cursor, _ID)
    rows = repository.list_page(
        session,
        model=model,
        gpu=gpu,
        engine=engine,
        start=None if start is None else int(start),
        limit=limit + 1,
    )
    if len(rows) > limit:
        return rows[:limit], encode_cursor(str(rows[limit].id))
    return rows, None


def _in_use(session: Session, calibration_id: int) -> Conflict | None:
    names = deployment_repository.names_pointing_at(session, calibration_id)
    if not names:
        return None
    shown = ", ".join(repr(name) for name in names[:10]) + (" ..." if len(names) > 10 else "")
    return Conflict(
        f"calibration {calibration_id} is in use: deployment profiles {shown} are sized with "
        "it; point them at another calibration (or none: PATCH calibration_id null) first",
        field="calibration_id",
        deployments=names,
    )


def delete(session: Session, calibration_id: int, if_match: str | None) -> None:
    """428 without If-Match, 404 without the calibration, 412 when stale, 409 (naming them)
    while deployment profiles point at it.

    Refused rather than letting those profiles fall back to kvplan's estimate: an autoscaler
    reads their max_num_seqs, which would change (or, were they left pointing at nothing,
    vanish) with no change to the profile. The foreign key (RESTRICT) holds the same line
    against a profile pointed at it while this runs.
    """
    if_match_tags(if_match)
    row = get(session, calibration_id)
    check_if_match(if_match, row.revision, f"calibration {calibration_id}")
    in_use = _in_use(session, calibration_id)
    if in_use is not None:
        raise in_use
    try:
        with session.begin_nested():
            deleted = repository.delete_if_revision(session, calibration_id, row.revision)
    except IntegrityError:
        raise _in_use(session, calibration_id) or Conflict(
            f"calibration {calibration_id} came into use meanwhile", field="calibration_id"
        ) from None
    if not deleted:
        raise PreconditionFailed(
            f"calibration {calibration_id} changed or went meanwhile; GET it again",
            field="If-Match",
        )
    catalog_repository.bump_catalog_version(session)
