"""What every engine profile shares: the question, the model's own facts, and the answer.

Gpu, Workload and Parallelism are the question; ModelFacts is what the model holds under it
before any engine rounds it into blocks; SizingInputs carries both into one engine's pipeline
(engines/vllm.py `vllm_capacity`, engines/sglang.py `sglang_capacity`, engines/trtllm.py
`trtllm_capacity`), which answers with a Capacity built from a MemoryBudget, a CacheLayout and
a PoolReport.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import ModelArchitecture
from ..model.dtypes import (
    FloatDtype,
    KvCacheDtype,
    ModelDtype,
    WeightFormat,
    parse_float_dtype,
    parse_kv_cache_dtype,
    parse_weight_format,
)
from ..units import cdiv
from .encoder import canonical_limit_mm_per_prompt
from .expert_parallel import NO_EXPERT_PARALLEL, ExpertParallel, RankWeights
from .kv import LayerBytes
from .sglang_dp import NO_SGLANG_PARALLEL, SglangParallel

if TYPE_CHECKING:
    from .offload import KvTiers
    from .speculative import SpeculativeConfig

MAX_CONTEXT_TOKENS = 10_000_000


class Engine(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"


# Not slotted: its hash is kept on the instance (`_hash`), as ModelArchitecture's is.
@dataclass(frozen=True)
class EngineOptions:
    """The engine flags that change the arithmetic. `None` means the engine's default."""

    engine: Engine = Engine.VLLM
    engine_version: str | None = None
    # vLLM: fraction of TOTAL memory the instance may use (--gpu-memory-utilization).
    gpu_memory_utilization: float | None = None
    # SGLang: share of memory free at start-up that weights + KV may take (--mem-fraction-static).
    mem_fraction_static: float | None = None
    # TensorRT-LLM: share of memory still free after weights and warm-up given to KV.
    free_gpu_memory_fraction: float | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool = False
    # Bytes of CUDA-graph memory the engine subtracts before sizing the pool (vLLM >= 0.21);
    # None = kvplan's estimate.
    cudagraph_memory_bytes: int | None = None
    # A pool the caller already knows (vLLM --kv-cache-memory-bytes, or "Available KV cache
    # memory" read from a log): replaces the computed budget.
    kv_pool_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    # Names are parsed once, here (`auto` is no override): typed values from then on.
    mamba_ssm_cache_dtype: FloatDtype | None = None
    disable_hybrid_kv_cache_manager: bool = False
    weight_format: WeightFormat | None = None
    # SGLang hybrid pools: --swa-full-tokens-ratio, --mamba-full-memory-ratio,
    # --max-mamba-cache-size (None = SGLang's defaults).
    swa_full_tokens_ratio: float | None = None
    mamba_full_memory_ratio: float | None = None
    max_mamba_cache_size: int | None = None
    # TensorRT-LLM KvCacheConfig.max_attention_window: one window per layer, repeated over the
    # layers when shorter (None = max_seq_len for every layer).
    max_attention_window: tuple[int, ...] | None = None
    # vLLM --dtype: weights and activations; `auto` is resolved by release and GPU
    # (engines/model_dtype.py resolve_model_dtype), and the KV cache's `auto` follows it.
    dtype: ModelDtype = ModelDtype.AUTO
    # vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (SGLang's SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN):
    # a max_model_len above the model's derived limit is sized with a warning, not refused
    # (context_limit.py check_max_model_len).
    allow_long_max_model_len: bool = False
    # issue 21: KV tiers beyond HBM and weight offloading (engines/offload.py reads them).
    # vLLM --kv-offloading-size: GiB of host KV, summed over the tensor x pipeline ranks;
    # --kv-offloading-backend (None = native). SGLang HiCache: --enable-hierarchical-cache,
    # --hicache-ratio (host pool over device pool), --hicache-size (GB per rank). vLLM and
    # SGLang --cpu-offload-gb: GiB of weights per GPU kept in host memory.
    kv_offloading_size: float | None = None
    kv_offloading_backend: str | None = None
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    hicache_size: int | None = None
    cpu_offload_gb: float | None = None
    # LMCache's local tiers under vLLM's LMCacheConnectorV1 (engines/lmcache.py), LMCache's own
    # config names (lmcache/v1/config.py) prefixed: max_local_cpu_size and max_local_disk_size
    # in GiB per rank (LMCache says "GB" and multiplies by 1024**3), chunk_size in tokens
    # (None = 256), local_cpu (None = True), the LMCache release (None = the newest read).
    lmcache_max_local_cpu_size: float | None = None
    lmcache_max_local_disk_size: float | None = None
    lmcache_chunk_size: int | None = None
    lmcache_local_cpu: bool | None = None
    lmcache_version: str | None = None
    # issue 21: what held-out logs showed is missing (engines/vllm_platform.py).
    # vLLM --disable-custom-all-reduce: NCCL alone, none of the custom all-reduce's buffers.
    disable_custom_all_reduce: bool = False
    # A nightly or dev build (engine_version `0.20.1rc1.dev91`) that already carries the
    # arithmetic of a final release: that release's rules size it (None: the releases
    # before the build, versions.modelled_release).
    engine_rules_version: str | None = None
    # issue 21: expert parallelism and decode context parallelism (engines/expert_parallel.py):
    # vLLM's enable_expert_parallel, num_redundant_experts, enable_eplb,
    # decode_context_parallel_size.
    expert_parallel: ExpertParallel = NO_EXPERT_PARALLEL
    # issue 21: speculative decoding. vLLM --speculative-config, parsed
    # (engines/speculative.py parse_speculative_config), its draft model resolved by the caller.
    speculative_config: SpeculativeConfig | None = None
    # issue 21: LoRA. vLLM's and SGLang's --enable-lora and vLLM's flags (vllm/config/lora.py
    # LoRAConfig; None = vLLM's default: max_loras 1, max_lora_rank 16, lora_dtype auto = the
    # model's dtype, max_cpu_loras = max_loras); engines/lora.py sizes the adapters' GPU buffers.
    enable_lora: bool = False
    max_loras: int | None = None
    max_lora_rank: int | None = None
    lora_dtype: FloatDtype | None = None  # parsed once, here (`auto` is None)
    max_cpu_loras: int | None = None
    fully_sharded_loras: bool = False
    # SGLang's: --max-loras-per-batch (8), --lora-target-modules as given (space- or
    # comma-separated names, or `all`); --max-lora-rank is max_lora_rank above.
    max_loras_per_batch: int | None = None
    lora_target_modules: str | None = None
    # issue 21: multimodal encoders (engines/encoder.py reads them). vLLM
    # --limit-mm-per-prompt as its JSON text ({"image": 2, "video": 0}; a modality not named
    # may have 999 items) and --skip-mm-profiling (no encoder profile in the peak).
    limit_mm_per_prompt: str | None = None
    skip_mm_profiling: bool = False
    # issue 21: SGLang's DP attention and expert parallelism (engines/sglang_dp.py):
    # enable_dp_attention / attn_dp_size, ep_size, ep_num_redundant_experts, enable_dp_lm_head,
    # moe_dense_tp_size.
    sglang_parallel: SglangParallel = NO_SGLANG_PARALLEL

    def __post_init__(self) -> None:
        ssm: FloatDtype | str | None = self.mamba_ssm_cache_dtype
        if isinstance(ssm, str) and not isinstance(ssm, FloatDtype):
            parsed = (
                None
                if ssm.strip().lower() == "auto"
                else parse_float_dtype(ssm, "mamba_ssm_cache_dtype")
            )
            object.__setattr__(self, "mamba_ssm_cache_dtype", parsed)
        if self.weight_format is not None:
            object.__setattr__(self, "weight_format", parse_weight_format(self.weight_format))
        lora: FloatDtype | str | None = self.lora_dtype
        if isinstance(lora, str) and not isinstance(lora, FloatDtype):
            parsed_lora = (
                None if lora.strip().lower() == "auto" else parse_float_dtype(lora, "lora_dtype")
            )
            object.__setattr__(self, "lora_dtype", parsed_lora)
        if self.limit_mm_per_prompt is not None:
            canonical = canonical_limit_mm_per_prompt(self.limit_mm_per_prompt)
            object.__setattr__(self, "limit_mm_per_prompt", canonical)
        # A question's memos look its options up a dozen times: the 43 fields are hashed once
        # (the frozen dataclass's own hash, of the fields' tuple, kept).
        values = tuple(getattr(self, name) for name in _ENGINE_OPTION_FIELDS)
        object.__setattr__(self, "_hash", hash(values))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]


_ENGINE_OPTION_FIELDS = tuple(f.name for f in fields(EngineOptions))


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One line of the memory budget; `bytes` is what it adds (+) or takes (-)."""

    name: str
    bytes: int
    note: str


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """How one GPU's memory became the KV pool."""

    total_bytes: int
    fraction: float | None
    fraction_name: str
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    pool_bytes: int
    pool_given: bool
    # Built on demand (only explanations read the lines; plans size hundreds of budgets).
    describe: Callable[[], tuple[BudgetLine, ...]] = field(compare=False, repr=False)

    @property
    def lines(self) -> tuple[BudgetLine, ...]:
        return self.describe()


def given_pool_budget(
    *, total_bytes: int, weights_per_gpu: int, pool_bytes: int, fraction_name: str, note: str
) -> MemoryBudget:
    """A pool the caller already knows replaces the engine's budget, whatever the engine.

    vLLM's --kv-cache-memory-bytes (PR #21489: available KV memory is that value, the
    utilization ignored; ../shared/design/engine-memory.md section 1.2), or the pool an
    engine's log reports: no fraction and no profiled peak stand between it and the blocks.
    """
    total_line = BudgetLine("total_memory", total_bytes, "total memory as the CUDA runtime reports")
    given_line = BudgetLine("kv_cache_memory", pool_bytes, note)
    return MemoryBudget(
        total_bytes=total_bytes,
        fraction=None,
        fraction_name=fraction_name,
        requested_bytes=pool_bytes,
        weights_bytes=weights_per_gpu,
        activation_bytes=0,
        non_torch_bytes=0,
        cudagraph_bytes=0,
        pool_bytes=pool_bytes,
        pool_given=True,
        describe=lambda: (total_line, given_line),
    )


@frozen
class CacheGroup:
    """Layers that share one block table (vLLM KV-cache group) on one GPU."""

    kind: str
    layers: int
    block_size: int
    page_bytes: int
    blocks_per_request: int


@frozen
class CacheLayout:
    """How a GPU's pool is cut: what one block costs and how many a request needs."""

    groups: tuple[CacheGroup, ...]
    bytes_per_block: int
    blocks_per_request: int
    block_size: int
    padding_layers: int
    notes: tuple[str, ...]
    # What one block costs on each pipeline stage (vLLM 0.11+ projects the whole model's
    # groups onto each stage); empty when the engine sizes each stage on its own.
    stage_bytes_per_block: tuple[int, ...] = ()


@frozen
class PoolReport:
    """What the engine logs once the pool is cut, and the whole sequences that fit."""

    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    max_num_seqs: int
    describe: Callable[[], tuple[str, ...]] = field(compare=False, repr=False)

    @property
    def log_lines(self) -> tuple[str, ...]:
        """What the engine would print, built on demand."""
        return self.describe()


def single_group_layout(bytes_per_token: int, block_size: int, max_model_len: int) -> CacheLayout:
    """One pool for every layer: what SGLang and TensorRT-LLM do without hybrid pools."""
    per_request = cdiv(max_model_len, block_size)
    block_bytes = block_size * bytes_per_token
    return CacheLayout(
        groups=(CacheGroup("all_layers", 0, block_size, block_bytes, per_request),),
        bytes_per_block=block_bytes,
        blocks_per_request=per_request,
        block_size=block_size,
        padding_layers=0,
        notes=(),
    )


# --- the question ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gpu:
    """An accelerator as the engine sees it: total memory as the CUDA runtime reports it.

    The speed figures are the catalog's (None where it records none): peak memory bandwidth
    (TB/s, 10^12 B/s), dense tensor throughput (TFLOPS, no sparsity) and the per-GPU,
    one-direction link bandwidth within a node (GB/s, 10^9 B/s); speed.py reads them.
    `price_source` says where the price was read and `price_origin` whose it is ("catalog":
    the catalog as kvplan ships it; "caller's override": a price the caller wrote or gave
    inline); a plan's options carry both.
    """

    memory_bytes: int
    name: str = ""
    slug: str = ""
    price_usd_per_hour: float | None = None
    max_gpus_per_node: int = 8
    memory_bandwidth_tb_s: float | None = None
    dense_bf16_tflops: float | None = None
    dense_fp8_tflops: float | None = None
    interconnect_gb_s: float | None = None
    dense_fp4_tflops: float | None = None
    # Whether every pair of a node's GPUs has a direct link (NVLink, AMD xGMI): vLLM's
    # `current_platform.is_fully_connected`; False on PCIe-only boards; None: not known,
    # taken as linked (engines/vllm_platform.py custom_all_reduce).
    fully_connected: bool | None = None
    # Whether the GPU computes in bfloat16: NVIDIA compute capability >= 8.0 (Ampere and
    # later; vllm/platforms/cuda.py `CudaPlatformBase.supported_dtypes`), every ROCm GPU vLLM
    # runs on (Platform.supported_dtypes). False for V100 (7.0), T4 (7.5).
    bf16_support: bool = True
    price_source: str | None = None
    price_origin: str | None = None

    def __post_init__(self) -> None:
        if self.memory_bytes < 1:
            raise SizingError("gpu.memory_bytes", "must be a positive number of bytes")
        for name in SPEED_FIGURES:
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise SizingError(f"gpu.{name}", f"must be a positive number, got {value}")


# The figures a Gpu may carry for the performance model, by their catalog names.
SPEED_FIGURES = (
    "memory_bandwidth_tb_s",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "interconnect_gb_s",
    "dense_fp4_tflops",
)


@frozen
class Workload:
    max_model_len: int
    # A name (or alias) is parsed once, here; a `KvCacheDtype` from then on.
    kv_cache_dtype: KvCacheDtype = KvCacheDtype.AUTO

    def __post_init__(self) -> None:
        if not 1 <= self.max_model_len <= MAX_CONTEXT_TOKENS:
            raise SizingError("max_model_len", f"must be between 1 and {MAX_CONTEXT_TOKENS}")
        object.__setattr__(self, "kv_cache_dtype", parse_kv_cache_dtype(self.kv_cache_dtype))


@frozen
class Parallelism:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_replica * self.data_parallel_size


# --- what the model holds, and what an engine is handed ------------------------------------


@frozen
class ModelFacts:
    """The model's own bytes under one question, before any engine cuts them into blocks."""

    kv_cache_dtype: KvCacheDtype
    kv_element_bytes: int
    max_model_len: int
    parallel: Parallelism
    kv_bytes_per_token: int  # the whole model
    kv_bytes_per_token_per_gpu: int  # the largest pipeline stage, on one TP rank
    kv_bytes_per_sequence: int  # one sequence of max_model_len, windows capped
    sequence: tuple[LayerBytes, ...]
    weights_bytes: int
    weights_bytes_per_gpu: int
    # issue 21: how DP / EP cut the weights (engines/expert_parallel.py RankWeights); None =
    # the plain tensor x pipeline share.
    rank_weights: RankWeights | None = None
    # issue 20: one GPU's weights on each pipeline stage (model/stage_weights.py: the first
    # stage's embedding, the last stage's head, each stage's layers); () with one stage or
    # under expert parallelism. `weights_bytes_per_gpu` is then the heaviest stage's.
    stage_weights_bytes_per_gpu: tuple[int, ...] = ()
    # the warning where the stages got even shares (the model's tensors unknown)
    stage_weights_note: str | None = None


@frozen
class SizingInputs:
    """Everything one engine pipeline needs, checked: the question and the model's facts."""

    arch: ModelArchitecture
    stages: tuple[ModelArchitecture, ...]  # the layers each pipeline stage holds
    gpu: Gpu
    workload: Workload
    parallel: Parallelism
    engine: EngineOptions
    facts: ModelFacts
    warnings: tuple[str, ...]


# --- the answer -----------------------------------------------------------------------------

# What an engine's settings table holds: flag values as the engine spells them.
SettingValue = str | int | float | bool | list[int] | dict[str, int] | None
EngineSettings = dict[str, SettingValue]


@frozen
class Capacity:
    """Everything one capacity computation found, per GPU unless the name says otherwise."""

    engine: Engine
    engine_version: str | None
    facts: ModelFacts
    budget: MemoryBudget
    layout: CacheLayout
    report: PoolReport
    engine_settings: EngineSettings
    warnings: tuple[str, ...]
    fits: bool
    reason: str | None
    max_model_len_that_fits: int | None = None
    per_stage_blocks: tuple[int, ...] = field(default=())
    # issue 21: KV tiers beyond HBM (engines/offload.py); None without an offload flag.
    kv_tiers: KvTiers | None = None

    @property
    def kv_cache_dtype(self) -> KvCacheDtype:
        return self.facts.kv_cache_dtype

    @property
    def kv_element_bytes(self) -> int:
        return self.facts.kv_element_bytes

    @property
    def max_model_len(self) -> int:
        return self.facts.max_model_len

    @property
    def parallel(self) -> Parallelism:
        return self.facts.parallel

    @property
    def kv_bytes_per_token(self) -> int:
        return self.facts.kv_bytes_per_token

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        return self.facts.kv_bytes_per_token_per_gpu

    @property
    def kv_bytes_per_sequence(self) -> int:
        return self.facts.kv_bytes_per_sequence

    @property
    def sequence(self) -> tuple[LayerBytes, ...]:
        return self.facts.sequence

    @property
    def weights_bytes(self) -> int:
        return self.facts.weights_bytes

    @property
    def weights_bytes_per_gpu(self) -> int:
        return self.facts.weights_bytes_per_gpu

    @property
    def kv_pool_bytes(self) -> int:
        return self.budget.pool_bytes

    @property
    def num_gpu_blocks(self) -> int:
        return self.report.num_gpu_blocks

    @property
    def kv_cache_tokens(self) -> int:
        return self.report.kv_cache_tokens

    @property
    def max_concurrency(self) -> float:
        return round(self.report.max_concurrency, 2)

    @property
    def max_num_seqs(self) -> int:
        return self.report.max_num_seqs

    @property
    def total_max_num_seqs(self) -> int:
        return self.report.max_num_seqs * self.parallel.data_parallel_size

    # issue 21: each DP rank (engine core) logs its own pool; the deployment holds them all.
    @property
    def kv_cache_tokens_total(self) -> int:
        return self.report.kv_cache_tokens * self.parallel.data_parallel_size

    @property
    def max_concurrency_total(self) -> float:
        return round(self.report.max_concurrency * self.parallel.data_parallel_size, 2)

    @property
    def running_sequences_per_replica(self) -> int:
        """Sequences at max_model_len one replica runs at once: the cache or the engine's cap."""
        cap = self.engine_settings.get("max_num_seqs")
        return min(self.max_num_seqs, cap) if isinstance(cap, int) else self.max_num_seqs

    def replicas_for(self, peak_concurrency: int) -> int | None:
        """Engine replicas of this layout that run `peak_concurrency` sequences at once."""
        per_replica = self.running_sequences_per_replica
        if not self.fits or per_replica <= 0:
            return None
        return cdiv(peak_concurrency, per_replica)
