"""LMCache's local CPU and disk tiers under vLLM (engines/lmcache.py), worked by hand from the
LMCache wheels' code: lmcache/v1/storage_backend/local_cpu_backend.py
LocalCPUBackend.initialize_allocator (0.5.6: int(max_local_cpu_size * 1024**3) pinned bytes
per rank), lmcache/v1/memory_management.py TensorMemoryAllocator.ALIGN_BYTES (512 in 0.3.3,
4,096 from 0.3.4), lmcache/integration/vllm/utils.py kv_shape (num_layer, 2, chunk_size,
num_kv_head, head_size), local_disk_backend.py LocalDiskBackend (max_local_disk_size * 1024**3
per rank, chunks counted by physical size) and vLLM vllm/config/vllm.py
VllmConfig._post_init_kv_transfer_config (max_local_cpu_size = kv_offloading_size / (TP x PP)).
"""

from __future__ import annotations

import pytest

from service.sizing.capacity import Parallelism, Workload, compute_capacity
from service.sizing.engines.common import Engine, EngineOptions
from service.sizing.errors import SizingError
from service.sizing.model.architecture import (
    FullAttention,
    ModelArchitecture,
    MultiHeadLatentAttention,
)
from service.sizing.units import GiB

from .models import GEMMA_3_27B, H100_80_GIB
from .test_offload_tiers import FP8_32K, LLAMA_70B, TP4, _vllm

BF16_32K = Workload(max_model_len=32768, kv_cache_dtype="bf16")


def _tiers(workload: Workload, **flags: object) -> tuple[object, ...]:
    capacity = compute_capacity(LLAMA_70B, H100_80_GIB, workload, TP4, _vllm("0.33.0", **flags))
    assert capacity.kv_tiers is not None
    return (*capacity.kv_tiers.tiers, capacity.kv_tiers.host_memory_bytes_per_replica)


def test_100_gib_through_kv_offloading_size_and_a_tib_of_disk_llama_70b_tp4_fp8() -> None:
    # vLLM: max_local_cpu_size = 100 GiB / (TP 4 x PP 1) = 25 GiB per rank, pinned
    # int(25 x 1024**3) = 26,843,545,600 B on each of the 4 ranks: 100 GiB of host memory.
    # One rank's chunk: 80 layers x 2 (K, V) x 256 tokens x 2 KV heads (8 / TP 4) x 128 x 1 B
    # (fp8) = 10,485,760 B (2,560 pages of 4,096 B: aligned as it is).
    # CPU: 26,843,545,600 // 10,485,760 = 2,560 chunks a rank, x 256 = 655,360 tokens; a
    # 32,768-token sequence is 128 chunks: 2,560 // 128 = 20 sequences; 2,560 x 10,485,760 x 4
    # = 107,374,182,400 B (100 GiB).
    # Disk: 1 TiB over 4 ranks = max_local_disk_size 256 GiB a rank = 274,877,906,944 B
    # // 10,485,760 = 26,214 chunks (26,214.4), x 256 = 6,710,784 tokens, // 128 = 204
    # sequences; 26,214 x 10,485,760 = 274,873,712,640 B a rank, x 4 = 1,099,494,850,560 B.
    hbm, host, disk, host_memory = _tiers(
        FP8_32K,
        kv_offloading_backend="lmcache",
        kv_offloading_size=100.0,
        lmcache_max_local_disk_size=256.0,
    )
    assert (host.tier, host.blocks, host.tokens, host.sequences) == ("host", 2_560, 655_360, 20)
    assert (host.bytes, host.bytes_per_rank) == (100 * GiB, 25 * GiB)
    assert (disk.tier, disk.blocks, disk.tokens, disk.sequences) == ("disk", 26_214, 6_710_784, 204)
    assert (disk.bytes_per_rank, disk.bytes) == (274_873_712_640, 1_099_494_850_560)
    assert host_memory == 100 * GiB
    assert hbm.tier == "hbm"


def test_the_answer_names_lmcache_gpu_staging_buffer_it_does_not_budget() -> None:
    # VLLMPagedMemGPUConnectorV2's gpu_buffer is one chunk on each GPU: 10,485,760 B (fp8).
    capacity = compute_capacity(
        LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.33.0", lmcache_max_local_cpu_size=25.0)
    )
    assert any("gpu_buffer" in w and "10,485,760 B per GPU" in w for w in capacity.warnings)


def test_lmcache_own_sizes_per_rank_llama_70b_tp4_bf16() -> None:
    # bf16: 80 x 2 x 256 x 2 x 128 x 2 B = 20,971,520 B a chunk (5,120 pages).
    # max_local_cpu_size 25 GiB a rank: 26,843,545,600 // 20,971,520 = 1,280 chunks,
    # x 256 = 327,680 tokens, // 128 = 10 sequences; host memory 4 x 25 GiB = 100 GiB.
    # max_local_disk_size 256 GiB: 274,877,906,944 // 20,971,520 = 13,107 chunks (13,107.2),
    # x 256 = 3,355,392 tokens, // 128 = 102 sequences.
    _, host, disk, host_memory = _tiers(
        BF16_32K, lmcache_max_local_cpu_size=25.0, lmcache_max_local_disk_size=256.0
    )
    assert (host.blocks, host.tokens, host.sequences) == (1_280, 327_680, 10)
    assert (disk.blocks, disk.tokens, disk.sequences) == (13_107, 3_355_392, 102)
    assert host_memory == 100 * GiB


def test_local_cpu_false_keeps_no_chunks_but_the_buffer_is_still_pinned() -> None:
    # CreateStorageBackends always creates LocalCPUBackend: 4 x 25 GiB still pinned.
    _, host, host_memory = _tiers(
        BF16_32K, lmcache_max_local_cpu_size=25.0, lmcache_local_cpu=False
    )
    assert (host.blocks, host.tokens, host.bytes) == (0, 0, 0)
    assert host_memory == 100 * GiB


def test_the_default_buffer_is_5_gib_a_rank() -> None:
    # lmcache/v1/config.py max_local_cpu_size default 5.0: 5 x 2^30 = 5,368,709,120 B
    # // 20,971,520 (bf16 chunk above) = 256 chunks; chunk_size 512 doubles the chunk:
    # // 41,943,040 = 128 chunks of 512 tokens = 65,536 tokens either way.
    _, host, host_memory = _tiers(BF16_32K, lmcache_version="0.5.6")
    assert (host.blocks, host.tokens, host_memory) == (256, 65_536, 4 * 5 * GiB)
    _, host, _ = _tiers(BF16_32K, lmcache_chunk_size=512)
    assert (host.blocks, host.tokens, host.sequences) == (128, 65_536, 2)


def test_chunks_are_aligned_to_512_b_in_0_3_3_and_to_4_kib_from_0_3_4() -> None:
    # One layer, one KV head of 96, bf16: 2 x 96 x 2 B = 384 B a token; chunk_size 99:
    # 38,016 B. 0.3.3: up to 512 B -> 38,400 B; 1 GiB // 38,400 = 27,962 chunks.
    # 0.3.4: up to 4,096 B -> 40,960 B; 1 GiB // 40,960 = 26,214 chunks.
    tiny = ModelArchitecture(
        layers=(FullAttention(1, 96),), num_attention_heads=1, weight_bytes=GiB
    )
    chunks = {}
    for version in ("0.3.3", "0.3.4"):
        capacity = compute_capacity(
            tiny,
            H100_80_GIB,
            Workload(4096),
            engine=_vllm(
                "0.33.0",
                lmcache_max_local_cpu_size=1.0,
                lmcache_chunk_size=99,
                lmcache_version=version,
            ),
        )
        assert capacity.kv_tiers is not None
        chunks[version] = capacity.kv_tiers.tiers[1].blocks
    assert chunks == {"0.3.3": 27_962, "0.3.4": 26_214}


def test_an_mla_model_is_stored_by_the_first_rank_from_0_3_4_which_alone_pins_from_0_4_1() -> None:
    # Four MLA layers (512 + 64 = 576 elements, bf16): kv_shape (4, 1, 256, 1, 576): a chunk of
    # 4 x 256 x 576 x 2 B = 1,179,648 B (288 pages), the same latent on each of 8 ranks.
    # 1 GiB a rank // 1,179,648 = 910 chunks. 0.3.4 (save_only_first_rank = use_mla): the
    # replica holds the first rank's 910 chunks, 910 x 1,179,648 B; 0.3.3: every rank stores its
    # copy, 8 x that. Host memory is 8 x 1 GiB through 0.3.9 (every rank's StorageManager pins
    # its buffer); from 0.4.1 LMCacheEngine.post_init builds one on the first rank alone: 1 GiB.
    mla = ModelArchitecture(
        layers=(MultiHeadLatentAttention(512, 64),) * 4, num_attention_heads=128, weight_bytes=GiB
    )
    rows = {}
    for version in ("0.3.3", "0.3.4", "0.4.1"):
        capacity = compute_capacity(
            mla,
            H100_80_GIB,
            Workload(4096),
            Parallelism(tensor_parallel_size=8),
            _vllm("0.33.0", lmcache_max_local_cpu_size=1.0, lmcache_version=version),
        )
        assert capacity.kv_tiers is not None
        host = capacity.kv_tiers.tiers[1]
        rows[version] = (host.blocks, host.bytes, capacity.kv_tiers.host_memory_bytes_per_replica)
    assert rows == {
        "0.3.3": (910, 8 * 910 * 1_179_648, 8 * GiB),
        "0.3.4": (910, 910 * 1_179_648, 8 * GiB),
        "0.4.1": (910, 910 * 1_179_648, GiB),
    }


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        # vLLM's extra config sets max_local_cpu_size; giving both is a contradiction
        (
            {"kv_offloading_backend": "lmcache", "kv_offloading_size": 10.0,
             "lmcache_max_local_cpu_size": 5.0},
            "lmcache_max_local_cpu_size",
        ),
        # LMCache 0.3.3 - 0.3.6 do not read the lmcache.* extra config vLLM writes
        (
            {"kv_offloading_backend": "lmcache", "kv_offloading_size": 10.0,
             "lmcache_version": "0.3.6"},
            "kv_offloading_backend",
        ),
        ({"lmcache_max_local_cpu_size": 5.0, "lmcache_version": "0.2.1"}, "lmcache_version"),
        ({"lmcache_max_local_cpu_size": 5.0, "lmcache_version": "soon"}, "lmcache_version"),
        ({"kv_offloading_backend": "native", "lmcache_chunk_size": 256}, "lmcache_chunk_size"),
        # kv_offloading_size alone is vLLM's native tier, whose connector replaces LMCache's
        ({"kv_offloading_size": 10.0, "lmcache_chunk_size": 256}, "lmcache_chunk_size"),
    ],
)  # fmt: skip
def test_what_lmcache_does_not_take_is_refused_by_name(
    flags: dict[str, object], field: str
) -> None:
    with pytest.raises(SizingError) as error:
        compute_capacity(LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.33.0", **flags))
    assert error.value.field == field


def test_vllm_before_0_14_with_the_lmcache_backend_is_refused_by_name() -> None:
    # kvplan reads vLLM 0.14.0's mapping (vllm/config/vllm.py _post_init_kv_transfer_config)
    flags = {"kv_offloading_backend": "lmcache", "kv_offloading_size": 100.0}
    with pytest.raises(SizingError) as error:
        compute_capacity(LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.13.0", **flags))
    assert error.value.field == "kv_offloading_backend"
    # LMCache's own size needs no vLLM mapping: sized on 0.13.0 as on 0.33.0 (2,560 chunks)
    capacity = compute_capacity(
        LLAMA_70B, H100_80_GIB, FP8_32K, TP4, _vllm("0.13.0", lmcache_max_local_cpu_size=25.0)
    )
    assert capacity.kv_tiers is not None
    assert capacity.kv_tiers.tiers[1].blocks == 2_560


def test_other_engines_and_mixed_layers_are_refused_by_name() -> None:
    with pytest.raises(SizingError) as error:
        compute_capacity(
            LLAMA_70B,
            H100_80_GIB,
            FP8_32K,
            TP4,
            EngineOptions(Engine.SGLANG, lmcache_max_local_cpu_size=5.0),
        )
    assert error.value.field == "lmcache_max_local_cpu_size"
    # Gemma 3: sliding-window and full layers, two KV shapes LMCache's one kv_shape cannot hold
    with pytest.raises(SizingError) as error:
        compute_capacity(
            GEMMA_3_27B,
            H100_80_GIB,
            Workload(8192),
            engine=_vllm("0.33.0", lmcache_max_local_cpu_size=5.0),
        )
    assert error.value.field == "lmcache_max_local_cpu_size"


def test_the_answer_says_which_lmcache_rules_sized_it() -> None:
    capacity = compute_capacity(
        LLAMA_70B,
        H100_80_GIB,
        FP8_32K,
        TP4,
        _vllm("0.33.0", lmcache_max_local_cpu_size=5.0, lmcache_version="0.6.0"),
    )
    assert any("LMCache 0.6.0 is newer" in w and "0.5.6" in w for w in capacity.warnings)
