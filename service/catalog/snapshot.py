"""An immutable copy of the catalog, shared by every request, refreshed when the catalog moves.

Each replica keeps one snapshot in memory and, at most every `catalog_ttl_seconds`, asks the
database for the catalog version (one row). A write through any replica bumps that version, so
every replica sees it within the TTL. Nothing a replica holds is needed by another.

Stale while revalidate: once the TTL has passed, the request that notices starts one refresh in
a background thread and every request, that one included, keeps the current snapshot until the
refresh has swapped in the new one. No lock is held across the database round trip, so a
database that hangs delays only the refresh thread (bounded by the answer deadline in
`service/kit/db.py`), never a read. Reads wait for a refresh only where the snapshot cannot serve:
none loaded yet (bounded by the database's own timeouts), or a TTL of 0 (every request asks
the database: for tests). After this replica's own write, the write itself waits (`settle`,
at most 0.5 s, in its worker thread, before its answer is sent) for a refresh that sees it, so
a client reads its own write on the replica it wrote through; a read that still finds the
refresh pending waits at most `wait_after_write_seconds` (0.1 s,
`KVPLAN_CATALOG_WAIT_AFTER_WRITE_SECONDS`): a database freezing just after a write delays that
write's answer, never a read by more than 0.1 s. While the database is unreachable a replica
that holds a snapshot keeps answering from it (`kvplan_catalog_stale` says so); one that never
loaded the catalog answers 503.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from ..engine_logs import repository as calibration_repository
from ..engine_logs.models import CalibrationRow
from ..kit.db import Database
from ..kit.errors import NotFound, ServiceUnavailable
from ..sizing import (
    LINK_GB_S,
    Gpu,
    Layer,
    MixtureOfExperts,
    ModelArchitecture,
    SizingError,
    architecture_from_dict,
)
from ..speed_results import repository as speed_repository
from ..speed_results.models import SpeedCalibrationRow
from . import answers, names, repository
from .models import GpuRow, ModelRow
from .schemas import GpuRead, ModelRead

log = logging.getLogger("kvplan.catalog")


@dataclass(frozen=True, slots=True)
class ModelEntry:
    slug: str
    name: str
    family: str | None
    hf_id: str | None
    revision: int
    architecture: ModelArchitecture


@dataclass(frozen=True, slots=True)
class GpuEntry:
    slug: str
    name: str
    vendor: str | None
    revision: int
    fp8_support: bool | None
    gpu: Gpu


@dataclass(frozen=True, slots=True)
class CalibrationKey:
    """What a calibration measured, as a capacity question names it: the model (a catalog slug,
    or `sha256:<hex>` of a config.json), the GPU (a catalog slug, or `<bytes>B`), the engine and
    the release it was sized as, the layout, the KV dtype as asked, and the flags that change
    the memory outside the KV cache (the scheduler's token budget sizes the profile run; eager
    mode captures no CUDA graphs), and the format the weights are stored in (`weight_format`:
    fp8 weights of the same model leave the pool their bytes free, so a bf16 run's pool must
    never answer an fp8 question). `weight_format` is the question's own, else the model's
    (the catalog's, or what the config.json's quantization_config declares), as a
    `sizing.model.dtypes.WEIGHT_FORMAT_BITS` name; None only on a calibration stored before kvplan
    keyed it and whose format could not be told then (it matches no question). Not in it: the
    utilization or memory fraction (the pool scales with it), and max_model_len, max_num_seqs
    and block_size, which change how the pool is cut, not how big it is (vLLM V1 profiles
    max_num_batched_tokens, not max_model_len)."""

    model: str
    gpu: str
    engine: str
    engine_version: str | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    max_num_batched_tokens: int | None
    enforce_eager: bool
    weight_format: str | None

    @classmethod
    def of(
        cls,
        model: str,
        gpu: str,
        *,
        engine: str,
        engine_version: str | None,
        tensor_parallel_size: int,
        pipeline_parallel_size: int,
        kv_cache_dtype: str,
        weight_format: str,
        engine_settings: Mapping[str, Any],
    ) -> CalibrationKey:
        """The key of a capacity answer (its engine settings hold the flags' resolved values;
        TensorRT-LLM calls its token budget max_num_tokens)."""
        budget = engine_settings.get(
            "max_num_batched_tokens", engine_settings.get("max_num_tokens")
        )
        return cls(
            model=model,
            gpu=gpu,
            engine=engine,
            engine_version=engine_version,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            kv_cache_dtype=kv_cache_dtype,
            max_num_batched_tokens=budget if isinstance(budget, int) else None,
            enforce_eager=bool(engine_settings.get("enforce_eager", False)),
            weight_format=weight_format,
        )

    @property
    def digest(self) -> str:
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def config_model_key(hf_config: Mapping[str, Any]) -> str:
    """A config.json's name in a calibration key: the sha256 of its canonical JSON."""
    canonical = json.dumps(hf_config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CalibrationEntry:
    """A stored calibration: the pool an engine's log measured, and how it moves with the
    fraction a question asks for."""

    id: int
    created_at: datetime
    key: CalibrationKey
    fraction_name: str
    fraction: float | None
    fraction_base_bytes: int | None
    kv_pool_bytes: int
    reproduces: bool
    replaced: tuple[str, ...]
    measured: Mapping[str, int]

    def pool_for(self, fraction: float | None) -> int:
        """The pool at `fraction`: the measured pool, moved by what the fraction moves.

        Each engine requests fraction x a base and keeps the rest of the non-KV memory as it
        measured it: vLLM `gpu_memory_utilization` x total memory (`requested_memory`), SGLang
        `mem_fraction_static` x the memory free at start (`rest_memory = free after weights -
        free at start x (1 - fraction)`), TensorRT-LLM `free_gpu_memory_fraction` x the memory
        free after warm-up. So pool' = pool + (fraction' - fraction) x base.
        """
        if fraction is None or self.fraction is None or self.fraction_base_bytes is None:
            return self.kv_pool_bytes
        return self.kv_pool_bytes + round((fraction - self.fraction) * self.fraction_base_bytes)


@dataclass(frozen=True, slots=True)
class SpeedCalibrationEntry:
    """A stored speed calibration (POST /v1/speed-calibrations): the factor a benchmark run
    measured on kvplan's decode step, measured TPOT over the estimate at the run's batch."""

    id: int
    created_at: datetime
    key: CalibrationKey
    tool: str
    result_sha256: str
    batch: int
    step_time_scale: float


def closest(slug: str, candidates: list[str], limit: int = 5) -> list[str]:
    return difflib.get_close_matches(slug.lower(), candidates, n=limit, cutoff=0.4)


@dataclass(frozen=True)
class CatalogSnapshot:
    version: int
    changed_at: datetime
    models: Mapping[str, ModelEntry] = field(default_factory=dict)
    gpus: Mapping[str, GpuEntry] = field(default_factory=dict)
    # Every entry as the catalog endpoints answer it, by slug, for reads while the database is
    # unreachable (models the arithmetic cannot read are here too, as the endpoints show them).
    model_reads: Mapping[str, ModelRead] = field(default_factory=dict)
    gpu_reads: Mapping[str, GpuRead] = field(default_factory=dict)
    calibrations: Mapping[CalibrationKey, CalibrationEntry] = field(default_factory=dict)
    speed_calibrations: Mapping[CalibrationKey, SpeedCalibrationEntry] = field(default_factory=dict)

    @cached_property
    def token(self) -> str:
        """Changes whenever the catalog does (version and time, so a rollback cannot alias)."""
        return f"{self.version}.{int(self.changed_at.timestamp() * 1_000_000)}"

    @cached_property
    def model_names(self) -> names.ModelNames:
        return names.ModelNames.of((e.slug, e.hf_id) for e in self.models.values())

    @cached_property
    def gpu_names(self) -> names.GpuNames:
        return names.GpuNames.of((e.slug, e.name) for e in self.gpus.values())

    def model(self, name: str) -> ModelEntry:
        """The catalog model `name` is: its slug or its Hugging Face id, in any case
        (`names.ModelNames`); 404 with the closest slugs."""
        entry = self.models.get(name)
        if entry is not None:
            return entry
        slug = self.model_names.resolve(name)
        if slug is None:
            raise NotFound(
                f"no model {name!r} in the catalog (a slug or a Hugging Face id)",
                field="model",
                suggestions=self.model_names.suggestions(name),
            )
        return self.models[slug]

    def gpu_memory_match(self, memory_bytes: int) -> names.MemoryMatch | None:
        """The catalog GPU a runtime total is (`names.match_memory`), if one is."""
        return names.match_memory(
            memory_bytes, {slug: entry.gpu.memory_bytes for slug, entry in self.gpus.items()}
        )

    def gpu_by_memory(self, memory_bytes: int) -> GpuEntry | None:
        """The catalog GPU whose runtime-reported total these bytes are, if one is: the GPU
        one of whose known totals is nearest, within names.MEMORY_TOLERANCE_BYTES."""
        match = self.gpu_memory_match(memory_bytes)
        return None if match is None else self.gpus[match.slug]

    def calibration(self, calibration_id: int) -> CalibrationEntry:
        for entry in self.calibrations.values():
            if entry.id == calibration_id:
                return entry
        raise NotFound(f"no calibration {calibration_id}", field="calibration_id")

    def gpu(self, name: str) -> GpuEntry:
        """The catalog GPU `name` is: its slug, its name, the device name nvidia-smi prints,
        or a short name (`names.GpuNames`); 404 with the closest slugs, or listing the GPUs an
        ambiguous short name could mean."""
        entry = self.gpus.get(name)
        if entry is not None:
            return entry
        found = self.gpu_names.resolve(name)
        if isinstance(found, str):
            return self.gpus[found]
        if found:
            raise NotFound(
                f"GPU {name!r} could be any of {', '.join(found)}: name one",
                field="gpu",
                suggestions=list(found),
            )
        raise NotFound(
            f"no GPU {name!r} in the catalog (a slug, a short name such as h100, or the "
            "device name nvidia-smi prints)",
            field="gpu",
            suggestions=list(self.gpu_names.suggestions(name)),
        )


def model_entry(row: ModelRow) -> ModelEntry:
    return ModelEntry(
        slug=row.slug,
        name=row.name,
        family=row.family,
        hf_id=row.hf_id,
        revision=row.revision,
        architecture=architecture_from_dict({**row.architecture, "name": row.slug}),
    )


def shared_layers(
    models: Mapping[str, ModelEntry], previous: Mapping[str, ModelEntry] | None = None
) -> dict[str, ModelEntry]:
    """The entries with equal layers made one object across the catalog, and across loads.

    Models that differ only in name (a base and its instruct tune, R1 and V3) have equal
    architectures, and the sizing core's memos, keyed by architecture, answer one from the
    other's entry after comparing them: layer by layer (80-odd dataclass comparisons) where each
    model holds its own layer objects, one tuple comparison that stops at identity where they
    share them.

    A reload (`previous`: the last load's entries) keeps the architecture object of every model
    whose architecture is unchanged: the memos hold that object as their key, and a new equal
    one would be compared with it field by field and layer by layer on every lookup from then on
    (a new question about an unchanged model took 1.7 times as long after any catalog write).
    Built once per catalog load; the entries are otherwise as loaded.
    """
    layers: dict[Layer, Layer] = {}
    schedules: dict[tuple[Layer, ...], tuple[Layer, ...]] = {}
    moes: dict[MixtureOfExperts, MixtureOfExperts] = {}
    out: dict[str, ModelEntry] = {}
    for slug, entry in models.items():
        arch = entry.architecture
        before = None if previous is None else previous.get(slug)
        if before is not None and _unchanged(before.architecture, arch):
            for layer in before.architecture.layers:  # the next models share them too
                layers.setdefault(layer, layer)
            out[slug] = replace(entry, architecture=before.architecture)
            continue
        schedule = schedules.get(arch.layers)
        if schedule is None:
            schedule = tuple(layers.setdefault(layer, layer) for layer in arch.layers)
            schedules[schedule] = schedule
        moe = arch.moe if arch.moe is None else moes.setdefault(arch.moe, arch.moe)
        if schedule is arch.layers and moe is arch.moe:
            out[slug] = entry
        else:
            out[slug] = replace(entry, architecture=replace(arch, layers=schedule, moe=moe))
    return out


def kept_gpus(
    gpus: Mapping[str, GpuEntry], previous: Mapping[str, GpuEntry] | None
) -> dict[str, GpuEntry]:
    """The entries, each unchanged one the previous load's object: the sizing memos keyed by a
    `Gpu` then stop at identity, as for the architectures (`shared_layers`)."""
    before = previous or {}
    return {
        slug: before[slug] if before.get(slug) == entry else entry for slug, entry in gpus.items()
    }


def _unchanged(before: ModelArchitecture, now: ModelArchitecture) -> bool:
    """The same architecture, down to the fields equality leaves out (name, weights_unknown)."""
    return (before.name, before.weights_unknown) == (now.name, now.weights_unknown) and (
        before == now
    )


CATALOG_PRICE = "catalog"
CALLERS_PRICE = "caller's override"


def price_origin(row: GpuRow) -> str | None:
    """Whose price a row holds: kvplan's seed ("catalog", a seed entry not edited since) or the
    caller's (an entry created or edited through the API: a contract price); None unpriced."""
    if row.price_usd_per_hour is None:
        return None
    return CATALOG_PRICE if row.origin == "seed" else CALLERS_PRICE


def fully_connected(interconnect: str | None) -> bool | None:
    """Whether a node's GPUs all link directly, from the catalog's `interconnect` words: NVLink
    or NVSwitch (AMD: xGMI / Infinity Fabric) yes, a bridge of pairs or PCIe alone no, not
    stated None (vLLM's `is_fully_connected`; engines/vllm_platform.py reads it)."""
    if not interconnect:
        return None
    words = interconnect.lower()
    if any(alone in words for alone in ("no nvlink", "pairs", "bridge")):
        return False
    if any(link in words for link in ("nvlink", "nvswitch", "xgmi", "infinity fabric")):
        return True
    return False if "pcie" in words else None


def gpu_entry(row: GpuRow) -> GpuEntry:
    return GpuEntry(
        slug=row.slug,
        name=row.name,
        vendor=row.vendor,
        revision=row.revision,
        fp8_support=row.fp8_support,
        gpu=Gpu(
            memory_bytes=row.memory_bytes,
            name=row.name,
            slug=row.slug,
            price_usd_per_hour=row.price_usd_per_hour,
            max_gpus_per_node=row.max_gpus_per_node,
            memory_bandwidth_tb_s=row.memory_bandwidth_tb_s,
            dense_bf16_tflops=row.dense_bf16_tflops,
            dense_fp8_tflops=row.dense_fp8_tflops,
            dense_fp4_tflops=row.dense_fp4_tflops,
            # The catalog names the link; its bandwidth is kvplan's table by slug.
            # A row written before the catalog carried the link figure falls back on
            # kvplan's table by slug (service/sizing/speed/performance.py LINK_GB_S).
            interconnect_gb_s=(
                row.interconnect_gb_s
                if row.interconnect_gb_s is not None
                else LINK_GB_S.get(row.slug)
            ),
            price_source=row.price_source,
            price_origin=price_origin(row),
            bf16_support=row.bf16_support is not False,
            fully_connected=fully_connected(row.interconnect),
        ),
    )


_MEASURED = (
    ("weights", "weights_bytes"),
    ("activation_peak", "activation_peak_bytes"),
    ("non_torch", "non_torch_bytes"),
    ("cudagraph", "cudagraph_bytes"),
)


def _calibration_key(row: CalibrationRow | SpeedCalibrationRow) -> CalibrationKey:
    """The question a memory or a speed calibration answers for (the same columns in both)."""
    return CalibrationKey(
        model=row.model,
        gpu=row.gpu,
        engine=row.engine,
        engine_version=row.engine_version,
        tensor_parallel_size=row.tensor_parallel_size,
        pipeline_parallel_size=row.pipeline_parallel_size,
        kv_cache_dtype=row.kv_cache_dtype,
        max_num_batched_tokens=row.max_num_batched_tokens,
        enforce_eager=row.enforce_eager,
        weight_format=row.weight_format,
    )


def calibration_entry(row: CalibrationRow) -> CalibrationEntry:
    assert row.id is not None  # a row read back from the database
    return CalibrationEntry(
        id=row.id,
        created_at=row.created_at,
        key=_calibration_key(row),
        fraction_name=row.fraction_name,
        fraction=row.fraction,
        fraction_base_bytes=row.fraction_base_bytes,
        kv_pool_bytes=row.kv_pool_bytes,
        reproduces=row.reproduces,
        replaced=tuple(row.replaced),
        measured={
            line: value for line, column in _MEASURED if (value := getattr(row, column)) is not None
        },
    )


def speed_calibration_entry(row: SpeedCalibrationRow) -> SpeedCalibrationEntry:
    assert row.id is not None  # a row read back from the database
    return SpeedCalibrationEntry(
        id=row.id,
        created_at=row.created_at,
        key=_calibration_key(row),
        tool=row.tool,
        result_sha256=row.result_sha256,
        batch=row.batch,
        step_time_scale=row.step_time_scale,
    )


class CatalogCache:
    """The replica's snapshot; `get()` is what the request dependency calls."""

    def __init__(
        self,
        database: Database,
        ttl_seconds: float,
        on_load: Callable[[CatalogSnapshot], None] | None = None,
        wait_seconds: float = 2.0,
        wait_after_write_seconds: float = 0.5,
    ) -> None:
        self._db = database
        self._ttl = ttl_seconds
        self._on_load = on_load
        # How long a request waits for a refresh it must have (see the module docstring).
        self._wait = wait_seconds
        # How long the first read after this replica's own write waits to see it.
        self._wait_after_write = wait_after_write_seconds
        # Notified each time a background refresh ends.
        self._finished = threading.Condition()
        # Held by the one refresh running; never by a request that only reads the snapshot.
        self._refreshing = threading.Lock()
        self._snapshot: CatalogSnapshot | None = None
        self._checked = -math.inf
        self._invalidated = False
        # True while the last refresh failed and the previous snapshot is being served.
        self.stale = False

    def get(self) -> CatalogSnapshot:
        snapshot = self.get_nowait()
        if snapshot is not None:
            return snapshot
        if self._snapshot is None or self._ttl == 0:
            return self._refresh_and_wait()
        return self._after_write(self._snapshot, self._wait_after_write)

    def get_nowait(self) -> CatalogSnapshot | None:
        """The snapshot when it can be had without waiting (a refresh due starts in the
        background); None when `get()` would wait: none held, a TTL of 0, or just after a
        local write. Safe to call from the event loop."""
        snapshot = self._snapshot
        if snapshot is None or self._ttl == 0 or self._invalidated:
            return None
        if time.monotonic() - self._checked >= self._ttl:
            self._refresh_in_background()
        return snapshot

    @property
    def current(self) -> CatalogSnapshot | None:
        """The snapshot held now, without asking the database (None before the first load)."""
        return self._snapshot

    @property
    def database_answering(self) -> bool:
        """False after the database stopped answering, until it answers again."""
        return self._db.health.answering

    @property
    def loaded(self) -> bool:
        """A snapshot is held (reads can be answered even without the database)."""
        return self._snapshot is not None

    def warm(self) -> None:
        """Load the first snapshot in the background (at start), so that reads have one to fall
        back on even if the database goes away before any request needed the catalog."""
        if self._snapshot is None:
            self._refresh_in_background()

    def invalidate(self) -> None:
        """This replica changed the catalog: the next `get()` waits for a fresh snapshot."""
        self._invalidated = True

    def settle(self, seconds: float = 0.5) -> None:
        """After a local write (from the write's own worker thread): wait at most `seconds`
        for a refresh that sees it, so that reads after the write's answer need not wait."""
        if self._snapshot is not None and self._ttl != 0:
            self._after_write(self._snapshot, seconds)

    def _refresh_in_background(self) -> None:
        if not self._refreshing.acquire(blocking=False):
            return  # one refresh at a time; everyone else keeps the current snapshot
        thread = threading.Thread(
            target=self._refresh_then_release, name="kvplan-catalog-refresh", daemon=True
        )
        try:
            thread.start()
        except BaseException:
            self._refreshing.release()
            raise

    def _refresh_then_release(self) -> None:
        try:
            self._refresh()
        except Exception:  # a background thread has no caller to tell: log, keep the snapshot
            log.exception("catalog refresh failed")
        finally:
            self._refreshing.release()
            with self._finished:
                self._finished.notify_all()

    def _after_write(self, snapshot: CatalogSnapshot, wait_seconds: float) -> CatalogSnapshot:
        """This replica wrote: wait (briefly) for a refresh that started after the write."""
        if not self._db.health.answering:
            self.mark_stale("the database is not answering")
            return snapshot
        deadline = time.monotonic() + wait_seconds
        with self._finished:
            # a refresh clears the flag as it starts: one that started before the write
            # leaves it set, and another one runs
            while self._invalidated:
                self._refresh_in_background()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._finished.wait(remaining)
        return self._snapshot or snapshot

    def _refresh_and_wait(self) -> CatalogSnapshot:
        """Refresh now, or wait (at most `wait_seconds`) for the refresh already running."""
        snapshot = self._snapshot
        if snapshot is not None and not self._db.health.may_try():
            self.mark_stale("the database is not answering")
            return snapshot
        if not self._refreshing.acquire(timeout=self._wait):
            # a refresh is stuck on the database: answer from what is held
            if snapshot is None:
                raise ServiceUnavailable("the catalog is loading and the database is slow")
            self.mark_stale("a catalog refresh is waiting for the database")
            return snapshot
        try:
            # even after waiting for another refresh: it may have read before our write
            return self._refresh()
        finally:
            self._refreshing.release()

    def _refresh(self) -> CatalogSnapshot:
        """Ask the database (the caller holds `_refreshing`); on failure keep the snapshot."""
        self._invalidated = False
        current = self._snapshot
        if current is None and not self._db.health.may_try():
            raise ServiceUnavailable("the database is not answering")
        try:
            with self._db.session() as session:
                version, changed_at = repository.catalog_version(session)
                if current is None or (current.version, current.changed_at) != (
                    version,
                    changed_at,
                ):
                    current = self._load(session, version, changed_at, current)
                    self._snapshot = current
                    if self._on_load is not None:
                        self._on_load(current)
        except DBAPIError as exc:
            if current is None:
                raise
            # Fail static: autoscalers keep their answers while the database is away; the
            # catalog rarely moves, and a write cannot happen without the database anyway.
            # The next request after the TTL tries again.
            self.mark_stale(str(exc.orig))
            self._checked = time.monotonic()
            return current
        self.stale = False
        self._checked = time.monotonic()
        return current

    def mark_stale(self, why: str) -> None:
        """The snapshot is being served because the database is away (until a refresh works)."""
        if not self.stale:
            log.warning("database unreachable, serving the last catalog: %s", why)
        self.stale = True

    @staticmethod
    def _load(
        session: Session,
        version: int,
        changed_at: datetime,
        previous: CatalogSnapshot | None,
    ) -> CatalogSnapshot:
        models: dict[str, ModelEntry] = {}
        model_rows = repository.all_rows(session, ModelRow)
        for row in model_rows:
            try:
                models[row.slug] = model_entry(row)
            except SizingError as exc:  # a row the arithmetic cannot read is left out, loudly
                log.error("model %s has an unreadable architecture: %s", row.slug, exc)
        gpu_rows = repository.all_rows(session, GpuRow)
        # Calibrations travel with the catalog: their writes bump its version too.
        calibrations = {
            entry.key: entry
            for entry in map(calibration_entry, calibration_repository.all_rows(session))
        }
        return CatalogSnapshot(
            version=version,
            changed_at=changed_at,
            models=shared_layers(models, None if previous is None else previous.models),
            gpus=kept_gpus(
                {row.slug: gpu_entry(row) for row in gpu_rows},
                None if previous is None else previous.gpus,
            ),
            model_reads={row.slug: answers.model_read(row) for row in model_rows},
            gpu_reads={row.slug: answers.gpu_read(row) for row in gpu_rows},
            calibrations=calibrations,
            speed_calibrations={
                entry.key: entry
                for entry in map(speed_calibration_entry, speed_repository.all_rows(session))
            },
        )
