"""LMCache's local CPU and disk tiers under vLLM's LMCacheConnectorV1 (issue 21, item 5).

Read in the LMCache wheels 0.3.3, 0.3.4, 0.3.7, 0.3.9, 0.4.2 and 0.5.6 (PyPI `lmcache`):

- **Who allocates.** Every vLLM worker (one per tensor x pipeline rank of a replica) builds its
  own LMCacheEngine, whose LocalCPUBackend is always created, `local_cpu` or not
  (lmcache/v1/storage_backend/__init__.py CreateStorageBackends: "The local_cpu backend is
  always created"): one pinned buffer of `int(max_local_cpu_size * 1024**3)` bytes per rank
  (0.3.3 - 0.3.6 lmcache/v1/cache_engine.py LMCacheEngineBuilder._Create_memory_allocator;
  0.3.7 - 0.5.6 lmcache/v1/storage_backend/local_cpu_backend.py
  LocalCPUBackend.initialize_allocator). LMCache calls the size "GB" (its config prints
  `"5 GB"`) but multiplies by 1024**3: GiB. `local_cpu` only says whether chunks stay there.
- **What a chunk is.** A MemoryObj of shape [2, layers, chunk_size, kv heads x head_size] of
  the KV cache dtype (MLA: [1, layers, chunk_size, latent]; lmcache/integration/vllm/utils.py
  `kv_shape` = (num_layer, 1 if use_mla else 2, chunk_size, num_kv_head, head_size), with
  vLLM's ModelConfig.get_num_layers / get_num_kv_heads of the rank's stage and TP shard;
  lmcache/v1/metadata.py get_shapes). `chunk_size` defaults to 256 (lmcache/v1/config.py).
- **How the buffer is cut.** MixedMemoryAllocator hands the buffer to a first-fit
  TensorMemoryAllocator whose allocations are rounded up to ALIGN_BYTES: 512 B in 0.3.3,
  4,096 B from 0.3.4 (lmcache/v1/memory_management.py TensorMemoryAllocator.ALIGN_BYTES; from
  0.4.2 AddressManager.ALIGN_BYTES). Same-size chunks tile the buffer, so a rank holds
  buffer // aligned chunk bytes.
- **Disk.** LocalDiskBackend (created when `local_disk` is set and `max_local_disk_size` > 0)
  evicts once the chunks' physical (aligned) sizes would pass
  `int(max_local_disk_size * 1024**3)` per rank (0.3.3 storage_backend/evictor/lru_evictor.py
  LRUEvictor; 0.4.2 - 0.5.6 local_disk_backend.py LocalDiskBackend.__init__).
- **MLA.** From 0.3.4 `save_only_first_rank` defaults to use_mla: only the first rank stores
  (the latent is the same on every TP rank). Through 0.3.9 every rank still allocates its
  buffer; from 0.4.1 LMCacheEngine.post_init builds a StorageManager (and so a buffer) on the
  first rank alone (the lookup server's workers default to [0] for MLA:
  lmcache/v1/config.py _get_lookup_server_worker_ids).
- **vLLM's mapping.** `--kv-offloading-backend lmcache --kv-offloading-size N` sets
  LMCacheConnectorV1 with kv_connector_extra_config {"lmcache.local_cpu": True,
  "lmcache.max_local_cpu_size": N / (tensor x pipeline ranks)} (vllm/config/vllm.py
  VllmConfig._post_init_kv_transfer_config from 0.11.1; later the LMCacheOffloadingParser of
  vLLM's kv_connector config parsers, the same division). LMCache reads `lmcache.` keys of
  that extra config from 0.3.7 (lmcache/integration/vllm/vllm_v1_adapter.py
  LMCacheConnectorV1Impl.__init__); 0.3.3 - 0.3.6 ignore them and keep
  LMCACHE_MAX_LOCAL_CPU_SIZE or 5.

Not modelled (refused by name): layers of different kinds or shapes (sliding windows, Mamba,
linear attention: LMCache 0.5's kv_layer_groups), speculative decoding's draft layers (0.5.6
adds MTP layers to `num_layer`), vLLM's packed fp8_ds_mla rows, decode context parallelism,
LMCache before 0.3.3 (not read) and other engines' LMCache integrations.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ..errors import SizingError
from ..units import GiB
from ..versions import modelled_release, parse_engine_version, release_label, sizing_note
from . import calibration as cal
from .common import Capacity, EngineOptions
from .offload import KvTier, KvTiers, hbm_tier

# The releases read, and the milestones between them.
LMCACHE_OLDEST_READ = (0, 3, 3)
LMCACHE_PAGE_ALIGNED = (0, 3, 4)  # ALIGN_BYTES 512 -> 4,096; MLA saved by the first rank only
LMCACHE_READS_EXTRA_CONFIG = (0, 3, 7)  # "lmcache." keys of kv_connector_extra_config
# MLA: only the first rank builds a StorageManager (LMCacheEngine.post_init), so only it pins
# a buffer (0.4.1 read; 0.3.10 - 0.3.15 not read, sized as 0.3.9: every rank pins one).
LMCACHE_MLA_ONE_BUFFER = (0, 4, 1)
LMCACHE_NEWEST_READ = "0.5.6"
# lmcache/v1/config.py (0.3.3 - 0.5.6): chunk_size 256, max_local_cpu_size 5.0, local_cpu True.
LMCACHE_CHUNK_SIZE = 256
LMCACHE_CPU_SIZE = 5.0
_ALIGN_BEFORE = 512
_ALIGN_FROM = 4096
_LMCACHE_FIELDS = (
    "lmcache_max_local_cpu_size",
    "lmcache_max_local_disk_size",
    "lmcache_chunk_size",
    "lmcache_local_cpu",
    "lmcache_version",
)
_UNIFORM_KINDS = frozenset({"full_attention", "mla"})


@dataclass(frozen=True, slots=True)
class LmcacheSetup:
    """What one rank's LMCacheEngine is given, and by which release's rules it is sized."""

    release: tuple[int, ...]
    label: str
    cpu_gib_per_rank: float
    disk_gib_per_rank: float
    chunk_size: int
    local_cpu: bool
    cpu_from: str  # where max_local_cpu_size came from, for the notes


def _given(options: EngineOptions) -> str:
    """The field that turned LMCache on, to name in a refusal."""
    if options.kv_offloading_backend == "lmcache":
        return "kv_offloading_backend"
    return next(name for name in _LMCACHE_FIELDS if getattr(options, name) is not None)


def check_lmcache_flags(options: EngineOptions) -> None:
    """Refuse, by name, LMCache fields kvplan does not size as asked."""
    if not lmcache_active(options):
        return  # kv_offloading_backend=lmcache alone: vLLM offloads nothing (vllm_tiers says so)
    field = _given(options)
    if options.engine.value != "vllm":
        raise SizingError(
            field,
            f"applies to engine=vllm (LMCacheConnectorV1), not {options.engine.value}: kvplan "
            "does not size LMCache under other engines",
        )
    native = options.kv_offloading_backend == "native" or (
        options.kv_offloading_backend is None and options.kv_offloading_size is not None
    )
    if native:  # vLLM's native OffloadingConnector replaces any other connector
        raise SizingError(field, "LMCache's sizes apply with kv_offloading_backend=lmcache")
    if options.kv_offloading_size is not None and options.lmcache_max_local_cpu_size is not None:
        raise SizingError(
            "lmcache_max_local_cpu_size",
            "kv_offloading_size sets LMCache's max_local_cpu_size (kv_offloading_size / tensor "
            "x pipeline ranks, in kv_connector_extra_config, which LMCache reads over its "
            "environment): give one of them",
        )
    if options.expert_parallel.decode_context_parallel_size > 1:
        raise SizingError(
            "decode_context_parallel_size",
            "LMCache's chunks of a sequence interleaved over ranks are not modelled",
        )
    if options.speculative_config is not None:
        raise SizingError(
            "speculative_config",
            "LMCache's chunk with a draft model's or MTP layers is not modelled (0.5.6 adds "
            "the MTP layers to num_layer)",
        )
    lmcache_setup(options)


def lmcache_setup(options: EngineOptions) -> LmcacheSetup:
    """The per-rank sizes LMCache is handed, and the release whose rules size them."""
    text = options.lmcache_version or LMCACHE_NEWEST_READ
    asked = parse_engine_version(text, "lmcache_version", "LMCache")
    release = modelled_release(asked, 3)
    if release < LMCACHE_OLDEST_READ:
        raise SizingError(
            "lmcache_version", f"LMCache {text} was not read; kvplan sizes 0.3.3 and later"
        )
    if options.kv_offloading_size is not None:
        if release < LMCACHE_READS_EXTRA_CONFIG:
            raise SizingError(
                "kv_offloading_backend",
                f"LMCache {text} does not read vLLM's kv_connector_extra_config "
                "(lmcache.max_local_cpu_size, read from 0.3.7): its buffer comes from "
                "LMCACHE_MAX_LOCAL_CPU_SIZE or 5 GiB; give lmcache_max_local_cpu_size instead",
            )
        cpu, given = options.kv_offloading_size, "kv_offloading_size"  # summed: see below
    elif options.lmcache_max_local_cpu_size is not None:
        cpu, given = options.lmcache_max_local_cpu_size, "lmcache_max_local_cpu_size"
    else:
        cpu, given = LMCACHE_CPU_SIZE, "LMCache's default"
    return LmcacheSetup(
        release=release,
        label=release_label(release),
        cpu_gib_per_rank=cpu,
        disk_gib_per_rank=options.lmcache_max_local_disk_size or 0.0,
        chunk_size=options.lmcache_chunk_size or LMCACHE_CHUNK_SIZE,
        local_cpu=options.lmcache_local_cpu is not False,
        cpu_from=given,
    )


def _check_model(capacity: Capacity, field: str) -> bool:
    """Whether the model is one LMCache's single kv_shape describes (every cached layer of
    one kind and shape); refused by name otherwise. True for MLA."""
    lines = capacity.sequence
    kinds = {line.kind for line in lines}
    shapes = {line.bytes_per_token_per_layer for line in lines}
    if not kinds or not kinds <= _UNIFORM_KINDS or len(shapes) > 1:
        raise SizingError(
            field,
            "LMCache's chunk is one kv_shape for every layer; a model whose cached layers "
            f"differ ({', '.join(sorted(kinds))}) is not modelled (LMCache 0.5's kv_layer_groups)",
        )
    if any(line.packed_mla for line in lines):
        raise SizingError(
            "kv_cache_dtype", "LMCache's chunk of vLLM's packed fp8_ds_mla rows is not modelled"
        )
    return kinds == {"mla"}


@dataclass(frozen=True, slots=True)
class _Chunk:
    raw: int  # chunk_size tokens of one rank's KV
    aligned: int  # what the allocator hands out for it
    copies: int  # ranks that store a chunk of one replica
    per_sequence: int  # chunks of one sequence at max_model_len (whole chunks)


def _chunk(capacity: Capacity, setup: LmcacheSetup, mla: bool) -> _Chunk:
    raw = setup.chunk_size * capacity.kv_bytes_per_token_per_gpu
    align = _ALIGN_FROM if setup.release >= LMCACHE_PAGE_ALIGNED else _ALIGN_BEFORE
    first_rank_only = mla and setup.release >= LMCACHE_PAGE_ALIGNED
    return _Chunk(
        raw=raw,
        aligned=-(-raw // align) * align,
        copies=1 if first_rank_only else capacity.parallel.gpus_per_replica,
        per_sequence=-(-capacity.max_model_len // setup.chunk_size),
    )


def _row(tier: str, chunks: int, chunk: _Chunk, setup: LmcacheSetup, note: str) -> KvTier:
    return KvTier(
        tier=tier,
        bytes=chunks * chunk.aligned * chunk.copies,
        bytes_per_rank=chunks * chunk.aligned,
        blocks=chunks,
        tokens=chunks * setup.chunk_size,
        sequences=chunks // chunk.per_sequence,
        note=note,
    )


def _cpu_row(chunk: _Chunk, setup: LmcacheSetup, buffer: int) -> KvTier:
    chunks = buffer // chunk.aligned if setup.local_cpu else 0
    how = (
        f"LMCache {setup.label} max_local_cpu_size {setup.cpu_gib_per_rank:g} GiB per rank "
        f"({setup.cpu_from}) = {buffer:,} B pinned // {chunk.aligned:,} B a chunk "
        f"({setup.chunk_size} tokens x {chunk.raw // setup.chunk_size:,} B, aligned)"
    )
    if not setup.local_cpu:
        how += "; local_cpu=false: the buffer stages chunks and keeps none"
    if chunk.copies == 1:
        how += "; MLA: the first rank alone stores (save_only_first_rank)"
    return _row("host", chunks, chunk, setup, how)


def _disk_row(chunk: _Chunk, setup: LmcacheSetup) -> KvTier:
    disk = int(setup.disk_gib_per_rank * GiB)
    return _row(
        "disk",
        disk // chunk.aligned,
        chunk,
        setup,
        f"LMCache local_disk: max_local_disk_size {setup.disk_gib_per_rank:g} GiB per rank = "
        f"{disk:,} B // {chunk.aligned:,} B a chunk (physical size)",
    )


def _lmcache_rows(
    capacity: Capacity, options: EngineOptions
) -> tuple[tuple[KvTier, ...], int, _Chunk]:
    """LMCache's CPU (and disk) rows of one replica, the pinned host memory its ranks
    allocate (every rank's buffer, whether or not it stores chunks), and its chunk."""
    setup = lmcache_setup(options)
    mla = _check_model(capacity, _given(options))
    ranks = capacity.parallel.gpus_per_replica
    if options.kv_offloading_size is not None:
        setup = dataclasses.replace(
            setup,
            cpu_gib_per_rank=setup.cpu_gib_per_rank / ranks,
            cpu_from=f"kv_offloading_size {options.kv_offloading_size:g} GiB / {ranks} ranks",
        )
    chunk = _chunk(capacity, setup, mla)
    buffer = int(setup.cpu_gib_per_rank * GiB)
    rows: tuple[KvTier, ...] = (_cpu_row(chunk, setup, buffer),)
    if setup.disk_gib_per_rank > 0:
        rows += (_disk_row(chunk, setup),)
    pinning = 1 if chunk.copies == 1 and setup.release >= LMCACHE_MLA_ONE_BUFFER else ranks
    return rows, buffer * pinning, chunk


def _notes(options: EngineOptions, mla: bool) -> tuple[str, ...]:
    """What the answer says of the LMCache release sized."""
    text = options.lmcache_version or LMCACHE_NEWEST_READ
    asked = parse_engine_version(text, "lmcache_version", "LMCache")
    release = modelled_release(asked, 3)
    note = sizing_note("LMCache", asked, release_label(release), LMCACHE_NEWEST_READ)
    notes: tuple[str, ...] = (note,) if note else ()
    if options.lmcache_version is None:
        notes += (f"lmcache_version not given: sized by LMCache {LMCACHE_NEWEST_READ}'s rules",)
    if mla and release >= (0, 4, 2):
        notes += (
            "LMCache caps an MLA model's max_local_cpu_size at the host's available memory "
            "less reserve_local_cpu_size (0.4.2 on): the CPU row assumes it fits",
        )
    return notes


def lmcache_active(options: EngineOptions) -> bool:
    """Whether LMCache holds chunks: vLLM's backend with a size, or LMCache's own fields
    (LMCacheConnectorV1 through --kv-transfer-config)."""
    if options.kv_offloading_backend == "lmcache" and options.kv_offloading_size is not None:
        return True
    return any(getattr(options, name) is not None for name in _LMCACHE_FIELDS)


def _check_vllm_mapping(options: EngineOptions, version: tuple[int, int, int], label: str) -> None:
    """vLLM's kv_offloading_backend=lmcache mapping as read: vllm/config/vllm.py
    VllmConfig._post_init_kv_transfer_config (0.14.0 on, beside the native tier's
    cpu_bytes_to_use). The 0.11.1 - 0.13 config parsers were not read whole (one copy found
    writes `max_local_cpu_size` without the `lmcache.` prefix, which LMCache ignores)."""
    if options.kv_offloading_size is None or version >= cal.VLLM_OFFLOAD_SIZED:
        return
    raise SizingError(
        "kv_offloading_backend",
        f"lmcache: vLLM {label}'s mapping of kv_offloading_size onto LMCache was not read "
        "(kvplan reads 0.14.0's); give LMCache's own lmcache_max_local_cpu_size instead",
    )


def with_lmcache(
    capacity: Capacity, options: EngineOptions, version: tuple[int, int, int], label: str
) -> Capacity:
    """A vLLM answer with LMCache's rows in its tier table and its pinned buffers in the host
    memory one replica needs (step after vllm_tiers)."""
    if not lmcache_active(options):
        return capacity
    _check_vllm_mapping(options, version, label)
    _check_model(capacity, _given(options))  # refused whether or not the pool fits
    if not capacity.fits:
        return capacity
    rows, pinned, chunk = _lmcache_rows(capacity, options)
    mla = {line.kind for line in capacity.sequence} == {"mla"}
    # lmcache/v1/gpu_connector/gpu_connectors.py VLLMPagedMemGPUConnectorV2.__init__ (0.5.6;
    # lmcache/v1/gpu_connector.py in 0.3.3): use_gpu (need_gpu_interm_buffer: not PD) makes a
    # GPU buffer of one chunk on each rank; where vLLM's profile sees it was not read.
    staging = (
        f"LMCache's GPU staging buffer (VLLMPagedMemGPUConnectorV2 gpu_buffer, one chunk: "
        f"{chunk.raw:,} B per GPU) is not in the GPU budget"
    )
    tiers = capacity.kv_tiers
    base = tiers.tiers if tiers is not None else (hbm_tier(capacity),)
    offloaded = tiers.offloaded_weight_bytes_per_gpu if tiers is not None else 0
    host = (tiers.host_memory_bytes_per_replica if tiers is not None else 0) + pinned
    return dataclasses.replace(
        capacity,
        kv_tiers=KvTiers(base + rows, offloaded, host_memory_bytes_per_replica=host),
        warnings=(*capacity.warnings, *_notes(options, mla), staging),
    )


def lmcache_flags(options: EngineOptions, ranks: int) -> list[str]:
    """vLLM's --kv-transfer-config for LMCache's own sizes (LMCache >= 0.3.7 reads the
    `lmcache.` keys of kv_connector_extra_config); none where --kv-offloading-backend lmcache
    --kv-offloading-size says it all. The disk path is the caller's to fill in."""
    if not any(getattr(options, name) is not None for name in _LMCACHE_FIELDS[:4]):
        return []
    size = options.kv_offloading_size
    cpu = size / ranks if size is not None else options.lmcache_max_local_cpu_size
    extra: dict[str, object] = {}
    if cpu is not None:
        extra["lmcache.max_local_cpu_size"] = cpu
    if options.lmcache_chunk_size is not None:
        extra["lmcache.chunk_size"] = options.lmcache_chunk_size
    if options.lmcache_local_cpu is not None:
        extra["lmcache.local_cpu"] = options.lmcache_local_cpu
    if options.lmcache_max_local_disk_size:
        extra["lmcache.local_disk"] = "file:///LOCAL_DISK_PATH/"
        extra["lmcache.max_local_disk_size"] = options.lmcache_max_local_disk_size
    config: dict[str, object] = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    if extra:
        config["kv_connector_extra_config"] = extra
    return [f"--kv-transfer-config '{json.dumps(config, separators=(',', ':'))}'"]
