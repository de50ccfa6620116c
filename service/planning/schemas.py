"""Request and response shapes of /v1/capacity and /v1/plans.

Field names follow vLLM's engine arguments wherever one exists, so a number can go straight
into a flag: max_model_len, kv_cache_dtype, tensor_parallel_size, gpu_memory_utilization, ...
The one exception is the pool override, `kv_pool_bytes` (vLLM `--kv-cache-memory-bytes`): the
name the answers and the sizing core use for the pool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ..kit.engine_flags import with_kvplan_names
from ..kit.formats import gib_name
from ..sizing import (
    ACCEPTED_DTYPES,
    DEFAULT_HEADROOM_FRACTION,
    MAX_CONTEXT_TOKENS,
    MAX_PEAK_CONCURRENCY,
    ModelDtype,
    parse_dtype,
)

EngineName = Literal["vllm", "sglang", "trtllm"]
KV_CACHE_DTYPE_DOC = (
    "KV-cache precision, as vLLM's `--kv-cache-dtype`: `auto` (the model's dtype), `bfloat16` "
    "(`bf16`), `float16` (`fp16`), `float32`, `fp8` (= `fp8_e4m3`), `fp8_e5m2`, or `fp8_ds_mla` "
    "(DeepSeek's packed sparse-MLA rows, vLLM only). Recurrent state keeps its own dtype."
)
DTYPE_DOC = (
    "vLLM `--dtype`, the precision weights and activations run at: `auto` (default), "
    "`bfloat16` (`bf16`), `float16` (`half`, `fp16`) or `float32` (`float`, `fp32`). `auto` is "
    "resolved as vLLM resolves it, by release and GPU (docs/engines/vllm.md#dtype): a float32 "
    "checkpoint runs as bfloat16 from 0.9.1 (float16 before, and on a GPU without bfloat16). "
    "The KV cache's `auto` follows the resolved dtype; an unquantized checkpoint's weights are "
    "priced at it."
)


def _dtype_name(value: object) -> object:
    """A --dtype name or alias to its ModelDtype (the one parse, at the door); anything else is
    left to the enum's own validation, which names the accepted values."""
    if isinstance(value, str) and value.strip().lower().removeprefix("torch.") in ACCEPTED_DTYPES:
        return parse_dtype(value)
    return value


DtypeField = Annotated[ModelDtype, BeforeValidator(_dtype_name)]
ResponseFormat = Literal["json", "csv", "tsv", "text"]
FORMAT_DOC = (
    "`json` (default), `csv` or `tsv` (a header row, then one flat row per answer), or `text` "
    "(one bare value: `field`, or the headline number without it); overrides Accept."
)
# Query models ignore parameters they do not declare (a spreadsheet's cache-busting `_=123`,
# KEDA's `api_key`); deps.refuse_misspelt_parameters still refuses a near-miss of a declared one.
# JSON bodies stay strict: `extra="forbid"`.
QUERY_CONFIG = ConfigDict(extra="ignore")
# GET /v1/capacity also answers Prometheus's text format (KEDA metrics-api `format: prometheus`).
CapacityFormat = Literal[ResponseFormat, "prometheus"]
CAPACITY_FORMAT_DOC = (
    FORMAT_DOC + " `prometheus`: one gauge per figure, `kvplan_capacity_<field>`, in Prometheus's "
    "text format (`text/plain; version=0.0.4`)."
)
MODEL_REF_DOC = "A slug, an inline spec, or {hf_config: {...}}."
CapacityField = Literal[
    "max_num_seqs",
    "replicas_for_peak_concurrency",
    "total_max_num_seqs",
    "kv_cache_tokens",
    "max_concurrency",
    "kv_cache_tokens_total",
    "max_concurrency_total",
    "num_gpu_blocks",
    "kv_pool_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_sequence",
    "decode_ms_per_token",
    "decode_ms_per_token_at_peak",
    "output_tokens_per_second",
    "prefill_ms",
]
PlanField = Literal[
    "gpu",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "nodes_per_replica",
    "replicas",
    "total_gpus",
    "max_num_seqs",
    "headroom_fraction",
    "cost_per_hour_usd",
    "decode_ms_per_token",
    "output_tokens_per_second",
]
PerformanceBound = Literal["bandwidth", "compute", "interconnect"]
RankBy = Literal["cost", "gpu_count", "tokens_per_dollar"]
DisaggregatedMode = Literal["auto", "never", "only"]
OptionKind = Literal["aggregated", "disaggregated"]
PriceOrigin = Literal["catalog", "caller's override"]
AVG_PROMPT_TOKENS_DOC = (
    "Average prompt length: the prefill (`prefill_ms`, and the time to first token) is timed "
    "for one prompt of this many tokens (default: max_model_len). At most max_model_len."
)
ERROR_BAND_DOC = (
    "The speed figures' error band, a fraction: 80% of the published measurements of the "
    "answer's class (the GPU's vendor; dense, MoE or MoE+MLA layers), each predicted by a fit "
    "without any point of its source, were within +/- this of the estimate (README, How fast a "
    "deployment decodes). Null with them."
)


def _json_object(field: str) -> Any:
    """A field that is a JSON object: given as one (POST) or as its JSON text (GET query, CSV
    cell, vLLM's own command line), read into the object."""

    def parse(value: Any) -> Any:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]  # a repeated query parameter's last value
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"{field} must be a JSON object: {exc}") from None
        return value

    return parse


class EngineFields(BaseModel):
    """The engine and the flags of it that change the arithmetic (None = the engine's default).

    Every request model built on it reads the engines' own spellings of its fields (SGLang's
    `context_length`, TensorRT-LLM's `max_batch_size`, ...) as its fields, and refuses an
    engine flag that changes memory kvplan does not model (`engine_flags`)."""

    @model_validator(mode="before")
    @classmethod
    def _engine_spellings(cls, data: Any) -> Any:
        fields = cls.__pydantic_fields__  # model_fields, without its property's checks
        if isinstance(data, Mapping) and not data.keys() <= fields.keys():
            return with_kvplan_names(data, fields)
        return data  # every name is a field (most questions): nothing to rename

    engine: EngineName = Field(
        "vllm", description="Inference engine whose memory arithmetic to follow."
    )
    engine_version: str | None = Field(
        None,
        pattern=r"^v?\d{1,3}(\.\d{1,3}){0,2}([.+-].{0,30})?$",
        description="Engine release (e.g. `0.10.1`) where its arithmetic or log format changed; "
        "vLLM default: the newest release kvplan models.",
        examples=["0.10.1"],
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="vLLM `--gpu-memory-utilization`: share of TOTAL memory."
    )
    mem_fraction_static: float | None = Field(
        None, gt=0, le=1, description="SGLang `--mem-fraction-static`."
    )
    free_gpu_memory_fraction: float | None = Field(
        None, gt=0, le=1, description="TensorRT-LLM `free_gpu_memory_fraction`."
    )
    max_num_batched_tokens: int | None = Field(
        None, ge=1, le=MAX_CONTEXT_TOKENS, description="Scheduler token budget per step."
    )
    max_num_seqs: int | None = Field(
        None,
        ge=1,
        le=MAX_PEAK_CONCURRENCY,
        description="Engine cap on running sequences: vLLM `--max-num-seqs`, SGLang "
        "`--max-running-requests`, TensorRT-LLM `max_batch_size`.",
    )
    block_size: int | None = Field(None, ge=1, le=65536, description="KV block size in tokens.")
    enable_prefix_caching: bool | None = Field(
        None, description="Prefix caching (changes Mamba state blocks per request)."
    )
    enforce_eager: bool = Field(False, description="No CUDA graphs (no graph memory reserved).")
    cudagraph_memory_bytes: int | None = Field(
        None, ge=0, le=2**50, description="Measured CUDA-graph memory to subtract (vLLM >= 0.20)."
    )
    kv_pool_bytes: int | None = Field(
        None,
        ge=0,
        le=2**50,
        description="A KV pool you already know (vLLM `--kv-cache-memory-bytes`, or "
        "'Available KV cache memory' from a log): replaces the computed budget.",
    )
    num_gpu_blocks_override: int | None = Field(
        None,
        ge=0,
        le=2**40,
        description="vLLM `--num-gpu-blocks-override`: this many KV blocks instead of the "
        "computed ones.",
    )
    mamba_ssm_cache_dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="Recurrent-state dtype (`--mamba-ssm-cache-dtype`)."
    )
    disable_hybrid_kv_cache_manager: bool = Field(
        False, description="vLLM `--disable-hybrid-kv-cache-manager`: windows keep the context."
    )
    swa_full_tokens_ratio: float | None = Field(
        None,
        gt=0,
        le=1,
        description="SGLang `--swa-full-tokens-ratio`: sliding-window pool size over the "
        "full-attention pool (SGLang's default 0.8).",
    )
    mamba_full_memory_ratio: float | None = Field(
        None,
        gt=0,
        le=100,
        description="SGLang `--mamba-full-memory-ratio`: recurrent-state memory over "
        "full-attention memory (SGLang's default 0.9).",
    )
    max_mamba_cache_size: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="SGLang `--max-mamba-cache-size`: recurrent-state slots (replaces the ratio).",
    )
    max_attention_window: list[Annotated[int, Field(ge=1, le=MAX_CONTEXT_TOKENS)]] | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="TensorRT-LLM `KvCacheConfig.max_attention_window`: one window per layer, "
        "repeated over the layers when shorter (e.g. [128, 131072] for gpt-oss); each distinct "
        "window gets its own pool. Default: the whole context in every layer.",
    )
    weight_format: str | None = Field(
        None,
        max_length=32,
        description="Price the weights in this format (bfloat16, fp8, int8, awq, gptq, nvfp4, "
        "mxfp4) instead of the catalog's.",
    )
    dtype: DtypeField = Field(ModelDtype.AUTO, description=DTYPE_DOC)
    allow_long_max_model_len: bool = Field(
        False,
        description="vLLM's `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` (SGLang's "
        "`SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`): size a max_model_len above the length "
        "the engine derives from the model's config, with a warning. Without it such a length "
        "is refused (422), as the engine refuses to start.",
    )
    # issue 21: KV tiers beyond HBM and weight offloading (sizing engines/offload.py)
    kv_offloading_size: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="vLLM `--kv-offloading-size`: GiB of host memory for offloaded KV blocks, "
        "summed over the tensor x pipeline parallel ranks of one replica (vLLM >= 0.14). The "
        "answer gains a host tier (`host_kv_cache_*`, `kv_tiers`).",
    )
    kv_offloading_backend: Literal["native", "lmcache"] | None = Field(
        None,
        description="vLLM `--kv-offloading-backend` (default native). `lmcache`: vLLM's "
        "LMCacheConnectorV1 with LMCache's `max_local_cpu_size` = kv_offloading_size / (tensor "
        "x pipeline ranks) GiB per rank (LMCache >= 0.3.7 reads it); the `lmcache_*` fields "
        "add its disk tier and chunk size.",
    )
    enable_hierarchical_cache: bool = Field(
        False,
        description="SGLang `--enable-hierarchical-cache` (HiCache): a host-memory KV pool of "
        "`hicache_ratio` x the device pool (default 2.0) or `hicache_size` GB per rank.",
    )
    hicache_ratio: float | None = Field(
        None, gt=0, le=1000, description="SGLang `--hicache-ratio`: host pool over device pool."
    )
    hicache_size: int | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="SGLang `--hicache-size`: host pool GB (10^9 B) per rank; replaces the ratio.",
    )
    cpu_offload_gb: float | None = Field(
        None,
        ge=0,
        le=100_000,
        description="vLLM and SGLang `--cpu-offload-gb`: GiB (2^30 B) of weights per GPU kept in "
        "host memory, out of the GPU budget (`host_memory_bytes_per_replica` counts them).",
    )
    # LMCache's local tiers under vLLM's LMCacheConnectorV1 (sizing engines/lmcache.py)
    lmcache_max_local_cpu_size: float | None = Field(
        None,
        gt=0,
        le=100_000,
        description="LMCache `max_local_cpu_size` (LMCACHE_MAX_LOCAL_CPU_SIZE): pinned host "
        "buffer per rank in GiB (LMCache says GB and multiplies by 1024**3); default 5. Any "
        "`lmcache_*` field puts LMCacheConnectorV1 in front of vLLM's pool; with "
        "kv_offloading_backend=lmcache, kv_offloading_size sets it instead.",
    )
    lmcache_max_local_disk_size: float | None = Field(
        None,
        ge=0,
        le=10_000_000,
        description="LMCache `max_local_disk_size` (with `local_disk` set): GiB (1024**3 B) of "
        "chunks per rank on local disk. The answer gains a disk tier (`disk_kv_cache_*`).",
    )
    lmcache_chunk_size: int | None = Field(
        None,
        ge=1,
        le=1_048_576,
        description="LMCache `chunk_size`: tokens per stored chunk (default 256).",
    )
    lmcache_local_cpu: bool | None = Field(
        None,
        description="LMCache `local_cpu` (default true): keep chunks in the pinned buffer. "
        "False keeps none there; the buffer is allocated all the same.",
    )
    lmcache_version: str | None = Field(
        None,
        max_length=64,
        description="The LMCache release (PEP 440; 0.3.3 and later are sized). Default: the "
        "newest read, 0.5.6.",
    )
    # issue 21: what held-out logs showed is missing
    disable_custom_all_reduce: bool = Field(
        False,
        description="vLLM `--disable-custom-all-reduce`: NCCL alone, without the custom "
        "all-reduce's buffers (vLLM also turns it off by itself past two PCIe-only GPUs).",
    )
    engine_rules_version: str | None = Field(
        None,
        pattern=r"^v?\d{1,3}(\.\d{1,3}){0,2}$",
        description="vLLM: for a nightly or dev build (`engine_version` `0.20.1rc1.dev91`), the "
        "final release whose arithmetic the build already carries (`0.20.1`), at most the "
        "build's own release and at least the release before it. Default: the releases before "
        "the build (PEP 440 orders a dev build before its release). The answer's warnings say "
        "which rules sized it.",
        examples=["0.20.1"],
    )
    # issue 21: expert parallelism and decode context parallelism (vLLM's flags;
    # sizing/engines/expert_parallel.py)
    enable_expert_parallel: bool = Field(
        False,
        description="vLLM `--enable-expert-parallel` (`-ep`): a MoE's experts placed whole on "
        "the data_parallel_size x tensor_parallel_size ranks (expert-parallel size DP x TP), "
        "where without it vLLM tensor-shards each expert over those ranks. Attention and dense "
        "layers stay sharded over TP inside each DP rank, whole at TP 1; each DP rank keeps its "
        "own KV pool (kv_cache_tokens per rank, kv_cache_tokens_total for the deployment).",
    )
    num_redundant_experts: int = Field(
        0,
        ge=0,
        le=4096,
        description="vLLM `--eplb-config '{\"num_redundant_experts\": N}'`: extra expert "
        "copies spread over the EP ranks (needs enable_eplb).",
    )
    enable_eplb: bool = Field(
        False, description="vLLM `--enable-eplb`: expert load balancing (needs expert parallel)."
    )
    decode_context_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="vLLM `--decode-context-parallel-size` (`-dcp`): one sequence's KV "
        "interleaved over this many of the TP ranks, each keeping 1/dcp of its tokens; must "
        "divide tensor_parallel_size. Full attention and MLA only.",
    )
    all2all_backend: str | None = Field(
        None,
        max_length=64,
        description="vLLM `--all2all-backend` (`VLLM_ALL2ALL_BACKEND` before 0.12): how a MoE "
        "under data_parallel_size > 1 exchanges tokens. Unset: the release's default "
        "(`naive` to 0.10, `allgather_reducescatter` from 0.11). `naive` and "
        "`allgather_reducescatter` gather every DP rank's tokens in the profile run "
        "(DP x max_num_batched_tokens x hidden, an `all2all_activations` line); "
        "`deepep_high_throughput` and `deepep_low_latency` (with enable_expert_parallel) hold "
        "DeepEP buffers counted in vLLM's non-torch memory (an `all2all_buffers` line), and "
        "high throughput turns CUDA graphs off. Other backends are refused by name.",
    )
    # issue 21: speculative decoding
    speculative_config: Annotated[
        dict[str, Any] | None, BeforeValidator(_json_object("speculative_config"))
    ] = Field(
        None,
        description="vLLM `--speculative-config`: a JSON object (on GET and in a CSV cell, its "
        "JSON text, as on vLLM's command line): `method` (`mtp` or a family's MTP name such as "
        "`deepseek_mtp`; `eagle`, `eagle3`, `draft_model`; `ngram`), `num_speculative_tokens`, "
        "`model` (the draft of eagle, eagle3 and draft_model: a catalog slug, or on POST an "
        "inline model or {hf_config}), `draft_tensor_parallel_size`. The drafter's cache "
        "layers share the KV pool's pages and its weights come out of the budget; `mtp` needs "
        "the model's own MTP layers (a config.json with num_nextn_predict_layers). vLLM only.",
        examples=['{"method": "deepseek_mtp", "num_speculative_tokens": 1}'],
    )
    speculative_algorithm: str | None = Field(
        None,
        max_length=20,
        description="SGLang `--speculative-algorithm` (EAGLE, EAGLE3, NEXTN, STANDALONE, "
        "NGRAM): the draft pool SGLang sizes beside the target's, the draft's layers at the "
        "target's per-layer size for every token.",
    )
    speculative_draft_model_path: str | None = Field(
        None,
        max_length=200,
        description="SGLang `--speculative-draft-model-path`: the draft, a catalog slug "
        "(EAGLE, EAGLE3, STANDALONE).",
    )
    speculative_num_steps: int | None = Field(
        None, ge=1, le=64, description="SGLang `--speculative-num-steps` (no memory kvplan sizes)."
    )
    speculative_eagle_topk: int | None = Field(
        None, ge=1, le=64, description="SGLang `--speculative-eagle-topk` (no memory kvplan sizes)."
    )
    speculative_num_draft_tokens: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="SGLang `--speculative-num-draft-tokens` (no memory kvplan sizes).",
    )
    # issue 21: LoRA
    enable_lora: bool = Field(
        False,
        description="vLLM's and SGLang's `--enable-lora`: the adapters' stacked A/B buffers "
        "for every wrapped module (dense decoders) are allocated with the model, before the KV "
        "pool is sized.",
    )
    max_loras: int | None = Field(
        None, ge=1, le=1024, description="vLLM `--max-loras`: adapter slots on the GPU (1)."
    )
    max_lora_rank: int | None = Field(
        None,
        ge=1,
        le=512,
        description="vLLM's and SGLang's `--max-lora-rank`: vLLM's default 16, and one of 1, "
        "8, 16, 32, 64, 128, 256, 320 or 512; SGLang needs it without `--lora-paths`.",
    )
    lora_dtype: Literal["auto", "float16", "bfloat16"] | None = Field(
        None, description="vLLM `--lora-dtype` (auto: the model's dtype)."
    )
    max_cpu_loras: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="vLLM `--max-cpu-loras`: adapters kept in host memory (no GPU memory).",
    )
    fully_sharded_loras: bool = Field(
        False,
        description="vLLM `--fully-sharded-loras`: column layers' A rank and row layers' B "
        "output sharded over the TP ranks.",
    )
    max_loras_per_batch: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="SGLang `--max-loras-per-batch`: adapter slots on the GPU, the base "
        "model's among them (8).",
    )
    lora_target_modules: str | None = Field(
        None,
        max_length=200,
        description="SGLang `--lora-target-modules`, space-, comma- or `;`-separated: q_proj, "
        "k_proj, v_proj, qkv_proj, o_proj, gate_proj, up_proj, gate_up_proj, down_proj, "
        "embed_tokens, lm_head, or `all` (0.5.12+: every linear module, embed_tokens and "
        "lm_head). Needed with SGLang's enable_lora, as SGLang needs it without `--lora-paths`.",
    )
    # issue 21: multimodal encoders (sizing engines/encoder.py)
    limit_mm_per_prompt: str | None = Field(
        None,
        max_length=200,
        description='vLLM `--limit-mm-per-prompt`, its JSON text (`{"image": 2, "video": 0}`; '
        '`{"image": {"count": 2}}` too; a POST body may give the object itself). The '
        "encoder's start-up profile runs max(1, min(encoder budget // tokens per item, "
        "max_num_seqs x items per prompt)) dummy items of the largest size; 0 skips it. A "
        "modality not named may have 999 items, as in vLLM.",
    )
    skip_mm_profiling: bool = Field(
        False,
        description="vLLM `--skip-mm-profiling`: no encoder profile in the activation peak "
        "(the engine then does not reserve it either).",
    )

    # issue 21: SGLang's DP attention and expert parallelism (SGLang's flags;
    # sizing/engines/sglang_dp.py)
    enable_dp_attention: bool = Field(
        False,
        description="SGLang `--enable-dp-attention` with `--dp-size` (data_parallel_size): "
        "inside one engine of tensor_parallel_size (`--tp-size`) GPUs, attention runs dp_size "
        "groups of tp/dp GPUs, each group its own token pool of its own requests "
        "(kv_cache_tokens per group, kv_cache_tokens_total for the engine); attention and "
        "embedding weights are sharded over tp/dp only.",
    )
    attn_dp_size: int = Field(
        1,
        ge=1,
        le=1024,
        description="SGLang 0.5.23 `--attn-dp-size`: the DP-attention width itself (instead of "
        "--dp-size with --enable-dp-attention); must divide tensor_parallel_size.",
    )
    ep_size: int = Field(
        1,
        ge=1,
        le=1024,
        description="SGLang `--ep-size` (`--expert-parallel-size`): the routed experts placed "
        "whole on ep_size ranks, each expert sharded over tp/ep; must divide "
        "tensor_parallel_size.",
    )
    ep_num_redundant_experts: int = Field(
        0,
        ge=0,
        le=4096,
        description="SGLang `--ep-num-redundant-experts`: extra expert copies over the EP ranks.",
    )
    enable_dp_lm_head: bool = Field(
        False,
        description="SGLang `--enable-dp-lm-head`: the LM head sharded over the attention-TP "
        "group (tp/dp) instead of all tp GPUs (needs DP attention).",
    )
    moe_dense_tp_size: int | None = Field(
        None,
        ge=1,
        le=1,
        description="SGLang `--moe-dense-tp-size 1`: the dense layers' MLPs whole on every GPU.",
    )
    moe_a2a_backend: str = Field(
        "none",
        max_length=64,
        description="SGLang `--moe-a2a-backend`: `none` (the default) or `deepep`, which sets "
        "ep_size to tp_size and makes DeepEP's buffer at the first dispatch, after the pool, "
        "out of the memory mem_fraction_static leaves (an `all2all_buffers` line cut out of "
        "`reserved`); from 0.5.23 the default mem_fraction_static keeps 2048 MiB more for it "
        "while CUDA graphs run. Other backends are refused by name.",
    )
    deepep_mode: Literal["auto", "normal", "low_latency"] = Field(
        "auto",
        description="SGLang `--deepep-mode`: `normal` sizes DeepEP's NVLink buffer, "
        "`low_latency` its RDMA buffer (128 tokens per rank), `auto` both; `normal` turns CUDA "
        "graphs off.",
    )

    @field_validator("limit_mm_per_prompt", mode="before")
    @classmethod
    def _limit_mm_json(cls, value: object) -> object:
        """A JSON object in a POST body is taken as vLLM's JSON text."""
        if isinstance(value, dict):
            return json.dumps(value)
        return value


class InlineGpu(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_bytes: int = Field(
        ..., ge=1, le=2**50, description="Total memory as the CUDA runtime reports it."
    )
    name: str = Field("", max_length=200, description="Device name (batch defaults read it).")
    price_usd_per_hour: float | None = Field(None, ge=0, le=10_000)
    max_gpus_per_node: int = Field(8, ge=1, le=64)
    memory_bandwidth_tb_s: float | None = Field(
        None, gt=0, le=10_000, description="Peak memory bandwidth, TB/s (10^12 B/s): for speed."
    )
    dense_bf16_tflops: float | None = Field(
        None, gt=0, le=1_000_000, description="Peak dense BF16 TFLOPS (no sparsity): for speed."
    )
    dense_fp8_tflops: float | None = Field(
        None, gt=0, le=1_000_000, description="Peak dense FP8 TFLOPS, where the GPU has FP8."
    )
    dense_fp4_tflops: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Peak dense FP4 TFLOPS, where the GPU has FP4 tensor cores (Blackwell): "
        "NVFP4 and MXFP4 weights run on it; without it they are dequantised to BF16.",
    )
    interconnect_gb_s: float | None = Field(
        None,
        gt=0,
        le=100_000,
        description="GPU-to-GPU link within a node, GB/s (10^9 B/s) per GPU and direction: "
        "for the all-reduces of tensor_parallel_size > 1.",
    )
    # issue 21: what held-out logs showed is missing
    fully_connected: bool | None = Field(
        None,
        description="Whether every pair of the node's GPUs is linked directly (NVLink, xGMI); "
        "false for PCIe-only boards, where vLLM turns its custom all-reduce off past two GPUs "
        "and its buffers leave the budget. Default: taken as linked.",
    )
    bf16_support: bool = Field(
        True,
        description="Whether the GPU computes in bfloat16 (NVIDIA compute capability >= 8.0; "
        "false for V100 and T4): decides what vLLM's `--dtype auto` runs a float32 or bfloat16 "
        "checkpoint at.",
    )


class InlineModel(BaseModel):
    """A model given in the request, in the catalog's architecture form."""

    model_config = ConfigDict(extra="forbid")

    num_attention_heads: int = Field(..., ge=1, le=100_000)
    layer_specs: dict[str, dict[str, int | str | None]] = Field(
        ...,
        description="Geometry per layer kind, e.g. {'full_attention': {...}}; a spec may take "
        "another name if it says its `kind` (two geometries of one kind).",
    )
    layer_schedule: list[Any] = Field(
        ...,
        max_length=100_000,
        description="One kind per layer, or {pattern, repeat} segments.",
    )
    dtype: str = "bfloat16"
    state_dtype: str | None = None
    hidden_size: int | None = Field(None, ge=1)
    intermediate_size: int | None = Field(None, ge=1)
    vocab_size: int | None = Field(None, ge=1)
    num_parameters: int | None = Field(None, ge=1, le=10**15)
    weight_bytes: int | None = Field(None, ge=1, le=2**52)
    weight_format: str = "bfloat16"
    max_position_embeddings: int | None = Field(None, ge=1)
    moe: dict[str, int] | None = None
    # issue 21: speculative decoding
    num_nextn_predict_layers: int | None = Field(
        None,
        ge=0,
        le=64,
        description="Multi-token-prediction layers the checkpoint holds beyond its decoder "
        "layers (config.json `num_nextn_predict_layers`): a vLLM `mtp` draft's layers.",
    )
    mtp_weight_bytes: int | None = Field(
        None,
        ge=1,
        le=2**52,
        description="Bytes of those MTP layers a vLLM drafter loads (its embeddings and head "
        "are the target's).",
    )
    mtp_layer_schedule: list[str] | None = Field(
        None,
        max_length=64,
        description="The layer_specs name of each MTP layer, where its cache differs from the "
        "last layer's (DeepSeek-V4: the window or compressed layer of its own compress ratio); "
        "absent: each MTP layer caches as the last layer does.",
    )


class HfConfigModel(BaseModel):
    """A model given as a Hugging Face config.json, as it is."""

    model_config = ConfigDict(extra="forbid")

    hf_config: dict[str, Any] = Field(..., description="The parsed config.json.")
    num_parameters: int | None = Field(None, ge=1, le=10**15)
    weight_bytes: int | None = Field(None, ge=1, le=2**52)
    # issue 21: what held-out logs showed is missing
    hf_quant_config: dict[str, Any] | None = Field(
        None,
        description="The hf_quant_config.json published beside config.json (ModelOpt up to "
        "0.29: NVFP4, FP8 checkpoints), read as vLLM reads it: the config's "
        "quantization_config when config.json has none.",
    )


ModelRef = str | InlineModel | HfConfigModel
GpuRef = str | InlineGpu


class CapacityFields(EngineFields):
    """What GET and POST /v1/capacity both ask besides the model and the GPU, declared once."""

    max_model_len: int | None = Field(
        None,
        ge=1,
        le=MAX_CONTEXT_TOKENS,
        description="Max context per sequence (default: the length the engine derives from the "
        "model's config: max_position_embeddings, rope scaling; above it the engine refuses to "
        "start unless allow_long_max_model_len).",
    )
    kv_cache_dtype: str = Field("auto", max_length=20, description=KV_CACHE_DTYPE_DOC)
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="GPUs per replica that split each layer (vLLM `--tensor-parallel-size`, "
        "SGLang `--tp-size`).",
    )
    pipeline_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="GPUs per replica that split the layers (vLLM `--pipeline-parallel-size`, "
        "SGLang `--pp-size`).",
    )
    data_parallel_size: int = Field(
        1,
        ge=1,
        le=4096,
        description="Replicas of the engine (vLLM `--data-parallel-size`, `-dp`): each its own KV "
        "pool; the answer's figures are one replica's, `*_total` the deployment's. vLLM shards a "
        "MoE model's experts over all data_parallel_size x tensor_parallel_size GPUs "
        "(enable_expert_parallel says how).",
    )
    peak_concurrency: int | None = Field(
        None,
        ge=1,
        le=MAX_PEAK_CONCURRENCY,
        description="Sequences running at once at peak: the answer then says how many replicas "
        "of this layout hold them (`replicas_for_peak_concurrency`) and how fast each decodes "
        "at its share (`decode_ms_per_token_at_peak`).",
    )
    avg_prompt_tokens: int | None = Field(
        None, ge=1, le=MAX_CONTEXT_TOKENS, description=AVG_PROMPT_TOKENS_DOC
    )
    acceptance_length: float | None = Field(
        None,
        ge=1,
        le=65,
        description="Speculative decoding's mean accepted tokens per step, as vLLM logs it "
        '("SpecDecoding metrics: Mean acceptance length": 1 + accepted / drafted steps, the '
        "bonus token included), measured on your traffic; with speculative_config (vLLM). Each "
        "decode step then verifies 1 + num_speculative_tokens tokens per sequence and the "
        "speed figures are per emitted token (step / acceptance_length; the drafter's own "
        "passes are not timed). Without it no speed-up is assumed. At most 1 + "
        "num_speculative_tokens.",
    )


# Each capacity request lists its model/GPU base last: pydantic takes inherited fields from the
# last-listed base first, so the model and the GPU come before the shared fields, in the order
# the published spec lists the query parameters.
class _CatalogTarget(EngineFields):
    """GET names the model and the GPU by catalog slug, or the GPU by its memory alone."""

    model: str = Field(..., max_length=100, description="Model slug.", examples=["llama-3.1-8b"])
    gpu: str | None = Field(
        None,
        max_length=100,
        description="GPU slug (or give gpu_memory_bytes).",
        examples=["h100-sxm-80gb"],
    )
    gpu_memory_bytes: int | None = Field(
        None, ge=1, le=2**50, description="Total memory as the CUDA runtime reports it."
    )


class _InlineTarget(EngineFields):
    """POST takes the model and the GPU as slugs or inline."""

    model: ModelRef = Field(..., description=MODEL_REF_DOC)
    gpu: GpuRef = Field(..., description="A slug or {memory_bytes: N}.")


class CapacityQuery(CapacityFields, _CatalogTarget):
    """GET /v1/capacity: one model, one GPU, one layout."""

    model_config = QUERY_CONFIG

    format: CapacityFormat | None = Field(None, description=CAPACITY_FORMAT_DOC)
    field: CapacityField | None = Field(
        None,
        description="Answer with this one value as text/plain (spreadsheets). `format=text` "
        "without it answers `max_num_seqs`.",
    )


class CapacityRequest(CapacityFields, _InlineTarget):
    """POST /v1/capacity: the GET fields as a JSON body; model and GPU may be inline."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "llama-3.1-8b",
                    "gpu": "h100-sxm-80gb",
                    "max_model_len": 32768,
                    "kv_cache_dtype": "fp8",
                    "tensor_parallel_size": 1,
                },
                {
                    "model": {
                        "hf_config": {
                            "model_type": "llama",
                            "num_hidden_layers": 32,
                            "hidden_size": 4096,
                            "num_attention_heads": 32,
                            "num_key_value_heads": 8,
                            "intermediate_size": 14336,
                            "vocab_size": 128256,
                            "torch_dtype": "bfloat16",
                        },
                        "num_parameters": 8030261248,
                    },
                    "gpu": {"memory_bytes": 85051089879, "name": "NVIDIA H100 80GB HBM3"},
                    "max_model_len": 131072,
                    "kv_pool_bytes": 58000000000,
                },
            ]
        },
    )

    explain: bool = Field(True, description="Include the hand-checkable explanation.")


class CalibratedFrom(BaseModel):
    """The stored calibration (POST /v1/calibrations) whose measurement an answer uses."""

    calibration_id: int
    created_at: datetime = Field(description="When the calibration was stored.")
    replaced: list[str] = Field(
        description="kvplan's budget lines the measurement replaces (weights, activation_peak, "
        "non_torch, cudagraph, ...): the pool is the measured one, not kvplan's estimate."
    )
    measured: dict[str, int] = Field(
        description="What the engine's log printed for those lines, in bytes (a line it does "
        "not print is absent). Measured at the log's own settings: vLLM's profile run also "
        "grows with max_num_seqs (its sampler rows), which a question at another max_num_seqs "
        "does not re-measure."
    )
    fraction_name: str = Field(
        description="gpu_memory_utilization, mem_fraction_static or free_gpu_memory_fraction."
    )
    calibrated_fraction: float | None = Field(description="The fraction the engine ran with.")
    fraction: float | None = Field(description="The fraction this answer is for.")
    kv_pool_bytes: int = Field(
        description="The pool used: the measured pool plus (fraction - calibrated_fraction) x "
        "the memory the fraction is of (vLLM: total; SGLang: free at start; TensorRT-LLM: free "
        "after warm-up); blocks, tokens and max_num_seqs follow by the engine's arithmetic."
    )
    reproduces: bool = Field(
        description="Whether the calibrated pool gives the log's own blocks and tokens exactly."
    )
    weight_format: str | None = Field(
        description="The weights' format the calibration measured, as the question's "
        "(`weight_format`, else the model's own): a calibration answers only questions whose "
        "weights are stored the same way."
    )


class SpeedCalibratedFrom(BaseModel):
    """The stored speed calibration (POST /v1/speed-calibrations) an answer's speed uses."""

    calibration_id: int
    created_at: datetime = Field(description="When the speed calibration was stored.")
    tool: str = Field(description="The benchmark that measured it: vllm bench serve, genai-perf.")
    result_sha256: str = Field(
        description="sha256 of the result's canonical JSON (keys sorted, no spaces)."
    )
    batch: int = Field(description="The run's batch (its concurrency) the scale was measured at.")
    step_time_scale: float = Field(
        description="Measured TPOT over kvplan's decode step at that batch: decode_ms_per_token "
        "(and at peak) are kvplan's step times times this, output_tokens_per_second divided by "
        "it; prefill_ms is kvplan's own."
    )


class CapacityAnswer(BaseModel):
    """One engine instance's capacity (per GPU unless the name says otherwise)."""

    model: str
    gpu: str
    gpu_memory_bytes: int
    gpu_recognised_as: str | None = Field(
        None,
        description="For a GPU given by its bytes alone: the catalog GPU whose runtime-reported "
        "total those bytes are (its engine defaults were used), or null when none is (defaults "
        "for an unnamed GPU of that size were assumed; the warnings say which).",
    )
    engine: EngineName
    engine_version: str | None
    max_model_len: int
    kv_cache_dtype: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    kv_bytes_per_token: int = Field(
        description="Whole model, one copy, at kv_cache_dtype, layers that store K/V per token."
    )
    kv_bytes_per_sequence: int = Field(
        description="The model's own state for one sequence at max_model_len (windows capped, "
        "recurrent state fixed), before engine rounding, whole model."
    )
    kv_pool_bytes: int = Field(description="KV pool per GPU.")
    num_gpu_blocks: int
    kv_cache_tokens: int = Field(description="As the engine logs 'GPU KV cache size'.")
    max_concurrency: float = Field(description="As the engine logs 'Maximum concurrency'.")
    max_num_seqs: int = Field(description="Whole sequences at max_model_len per replica.")
    total_max_num_seqs: int = Field(description="max_num_seqs x data_parallel_size.")
    # issue 21: each DP rank's engine logs its own pool; the deployment's is DP times it.
    kv_cache_tokens_total: int = Field(
        description="kv_cache_tokens x data_parallel_size: the deployment's KV tokens (each DP "
        "rank logs its own)."
    )
    max_concurrency_total: float = Field(
        description="max_concurrency x data_parallel_size, for the deployment."
    )
    peak_concurrency: int | None = Field(None, description="As asked.")
    replicas_for_peak_concurrency: int | None = Field(
        None,
        description="Engine replicas of this layout (each tensor x pipeline parallel GPUs) that "
        "run peak_concurrency sequences at max_model_len at once: ceil(peak / min(max_num_seqs, "
        "the engine's max_num_seqs cap)). Null without peak_concurrency, or when none fits.",
    )
    decode_ms_per_token: float | None = Field(
        None,
        description="Estimated time per output token (TPOT) of one replica running max_num_seqs "
        "sequences (the engine's max_num_seqs setting where lower), each at max_model_len "
        "tokens of context: one decode step, ms. Null when the GPU lacks the figures (the "
        "warnings say which).",
    )
    decode_ms_per_token_at_peak: float | None = Field(
        None,
        description="The same at the peak: ceil(peak_concurrency / "
        "replicas_for_peak_concurrency) sequences per replica. The decode-only step: no "
        "prefill in it (a closed loop's steady state adds peak sequences / output length "
        "prompts' prefill to each step, which this figure leaves out). Null without "
        "peak_concurrency.",
    )
    output_tokens_per_second: float | None = Field(
        None,
        description="Output tokens per second of one replica at max_num_seqs: sequences x 1000 "
        "/ decode_ms_per_token.",
    )
    prefill_ms: float | None = Field(
        None,
        description="Estimated prefill of one prompt of avg_prompt_tokens (max_model_len "
        "without it) alone on a replica, ms: the time to first token of a prompt that does not "
        "queue.",
    )
    performance_bound: PerformanceBound | None = Field(
        None,
        description="What bounds the decode step at max_num_seqs: `bandwidth` (reading weights "
        "and KV), `compute`, or `interconnect` (tensor-parallel all-reduces).",
    )
    performance_error_band: float | None = Field(None, description=ERROR_BAND_DOC)
    # issue 21: KV tiers beyond HBM (null without kv_offloading_size, HiCache, cpu_offload_gb)
    host_kv_cache_bytes: int | None = Field(
        None,
        description="Host-memory KV tier of one replica, every rank (vLLM kv_offloading_size, "
        "SGLang HiCache), bytes.",
    )
    host_kv_cache_blocks: int | None = Field(
        None,
        description="Its blocks: vLLM host blocks (one GPU block of every rank each), SGLang "
        "pages per rank.",
    )
    host_kv_cache_tokens: int | None = Field(None, description="Tokens the host tier holds.")
    host_max_num_seqs: int | None = Field(
        None, description="Whole sequences at max_model_len the host tier holds."
    )
    host_memory_bytes_per_replica: int | None = Field(
        None,
        description="Host memory one replica (tensor x pipeline parallel GPUs) needs: its host "
        "KV tier (LMCache: every rank's pinned buffer) plus the weights cpu_offload_gb moves, "
        "on every GPU.",
    )
    disk_kv_cache_bytes: int | None = Field(
        None, description="LMCache's local-disk tier of one replica, every rank, bytes."
    )
    disk_kv_cache_blocks: int | None = Field(None, description="Its chunks (per rank).")
    disk_kv_cache_tokens: int | None = Field(None, description="Tokens the disk tier holds.")
    disk_max_num_seqs: int | None = Field(
        None, description="Whole sequences at max_model_len the disk tier holds."
    )
    fits: bool
    reason: str | None = None
    catalog_version: int
    calibrated_from: CalibratedFrom | None = Field(
        None,
        description="Set when a stored calibration with this question's key (model, GPU, "
        "engine and release, tensor and pipeline parallel sizes, KV dtype, "
        "max_num_batched_tokens, enforce_eager) measured the memory outside the KV cache: its "
        "pool replaces kvplan's estimate. In CSV and TSV tables, its `calibration_id` alone.",
    )
    speed_calibrated_from: SpeedCalibratedFrom | None = Field(
        None,
        description="Set when a stored speed calibration with this question's key (as "
        "`calibrated_from`'s) measured the decode step: its scale is on the speed figures. In "
        "CSV and TSV tables, its `speed_calibration_id` alone, where one was used.",
    )
    warnings: list[str] = Field(
        description="What the numbers assume or leave out: an engine_version newer than the "
        "newest release kvplan models (sized as that release), a max_model_len beyond the "
        "model's limit sized under allow_long_max_model_len, a profile pinned to an older "
        "release than the newest that would answer otherwise (both numbers), why the speed "
        "figures are null, ... Every format "
        "also carries them in the `Kvplan-Warnings` header (CSV, TSV, text and Prometheus "
        "answers, which have no room for them, included)."
    )


class KvTierOut(BaseModel):
    """One row of the tier table: one replica's KV cache in one kind of memory."""

    tier: Literal["hbm", "host", "disk"]
    bytes: int = Field(description="The whole replica, every rank.")
    bytes_per_rank: int
    blocks: int
    tokens: int
    sequences: int = Field(description="Whole sequences at max_model_len.")
    note: str


class CapacityDetail(CapacityAnswer):
    engine_settings: dict[str, Any]
    engine_log: list[str]
    explanation: dict[str, Any] | None = None
    kv_tiers: list[KvTierOut] | None = Field(
        None,
        description="The tier table (HBM, host memory, LMCache's disk) where a KV tier beyond "
        "HBM or cpu_offload_gb is asked; null otherwise.",
    )


# ---------------------------------------------------------------------------------------------
# traffic: a workload (POST /v1/simulations and POST /v1/plans take it) and the percentiles

MAX_SIMULATED_REQUESTS = 200_000
MAX_DURATION_S = 86_400.0

Length = int | dict[str, int] | list[list[float]]
LENGTH_DOC = (
    'Tokens per request: a number; percentiles such as `{"50": 2000, "90": 5000, "99": '
    "12000}` (drawn through those points, never beyond the highest); or a histogram "
    "`[[low, high, weight], ...]` (a bin by weight, then uniform in it)."
)


class WorkloadIn(BaseModel):
    """Synthetic traffic: arrivals, lengths and how many requests."""

    model_config = ConfigDict(extra="forbid")

    request_rate: float | None = Field(
        None, gt=0, description="Poisson arrivals, requests per second (or max_concurrency)."
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=100_000,
        description="A closed loop: this many clients, each sending its next request when its "
        "last one ends (as `vllm bench serve --max-concurrency`).",
    )  # fmt: skip
    input_tokens: Length = Field(..., description=LENGTH_DOC)
    output_tokens: Length = Field(..., description=LENGTH_DOC)
    num_requests: int | None = Field(
        None,
        ge=1,
        le=MAX_SIMULATED_REQUESTS,
        description="Requests to simulate (or `duration_s`); a plan for a rate's default "
        "2,000, a simulation's none.",
    )
    duration_s: float | None = Field(
        None, gt=0, le=MAX_DURATION_S, description="Arrivals for this long (with request_rate)."
    )
    prefix_cache_hit_rate: float = Field(
        0.0, ge=0, le=1,
        description="The share of each prompt that is a prefix every request shares (whole "
        "blocks); the engine's prefix cache decides what hits.",
    )  # fmt: skip
    seed: int = Field(0, description="The random generator's seed: the same seed, the same run.")


class DistributionOut(BaseModel):
    """Over completed requests (null: none to measure)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


TARGET_DOC = (
    "A plan for a rate's target: the p{} {} of the simulated requests, ms (with a workload)."
)
RATE_TARGETS = (
    "ttft_p99_ms", "tpot_p99_ms", "ttft_p90_ms", "tpot_p90_ms", "ttft_p50_ms", "tpot_p50_ms",
)  # fmt: skip
# A peak's fields, and what a plan for a rate takes instead.
PEAK_ONLY = {
    "peak_concurrency": "the workload's request_rate sets the load",
    "max_tpot_ms": "give tpot_p99_ms (a percentile of the simulated requests)",
    "max_ttft_ms": "give ttft_p99_ms (a percentile of the simulated requests)",
    "min_output_tokens_per_second_per_user": "give tpot_p99_ms (1000 / tokens per second)",
    "avg_prompt_tokens": "the workload's input_tokens say it",
    "avg_context_tokens": "the workload's input_tokens and output_tokens say it",
}


class PlanFields(EngineFields):
    """The three sizing questions and the search options, declared once for POST and GET."""

    model: ModelRef = Field(..., description=MODEL_REF_DOC)
    max_model_len: int = Field(..., ge=1, le=MAX_CONTEXT_TOKENS, description="Max context.")
    peak_concurrency: int | None = Field(
        None,
        ge=1,
        le=MAX_PEAK_CONCURRENCY,
        description="Sequences live at the peak (or, on POST, a `workload`: a request rate).",
    )
    kv_cache_dtype: str = Field("auto", max_length=20, description=KV_CACHE_DTYPE_DOC)
    # A list in the body; GET takes the slugs comma-separated (each request narrows it).
    gpus: list[GpuRef] | str | None = None
    max_gpus_per_node: int | None = Field(None, ge=1, le=64, description="Caps TP per replica.")
    headroom_fraction: float = Field(
        DEFAULT_HEADROOM_FRACTION,
        ge=0,
        lt=1,
        description="Share of each replica's usable KV blocks to keep free at the peak (default "
        "0.1: the README's Headroom section says why; 0 plans the cache full at the peak).",
    )
    avg_context_tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_CONTEXT_TOKENS,
        description="Average context at peak (paged attention: sequences hold what they use); "
        "the decode speed is estimated at it too.",
    )
    avg_prompt_tokens: int | None = Field(
        None, ge=1, le=MAX_CONTEXT_TOKENS, description=AVG_PROMPT_TOKENS_DOC
    )
    max_tpot_ms: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Latency target: the longest time per output token each replica may take "
        "at the peak, ms. A layout that misses it at the batch memory allows runs a smaller "
        "max_num_seqs on more replicas, or is rejected with the reason.",
    )
    max_ttft_ms: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Latency target: the longest prefill of one prompt of avg_prompt_tokens "
        "(max_model_len without it), ms; the time to first token of a prompt that does not "
        "queue. A layout that misses it is rejected.",
    )
    min_output_tokens_per_second_per_user: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Latency target: the fewest output tokens per second each running sequence "
        "gets at the peak (1000 / time per output token); handled like max_tpot_ms.",
    )
    max_replicas: int = Field(4096, ge=1, le=100_000)
    max_alternatives: int = Field(
        10,
        ge=0,
        le=100,
        description="Options shown besides the recommendation; `alternatives_omitted` counts "
        "the rest and a warning names their GPUs.",
    )
    rank_by: RankBy = Field(
        "cost",
        description="How options are ranked: `cost` (cost_per_hour_usd, lowest first; the "
        "default), `gpu_count` (total_gpus, then cost) or `tokens_per_dollar` (output tokens "
        "per US dollar at the peak, highest first). Unpriced options rank after priced ones "
        "under `cost` and `tokens_per_dollar`, and a warning says so.",
    )
    # issue 23: a plan for a rate (service/planning/rate.py)
    workload: Annotated[WorkloadIn | None, BeforeValidator(_json_object("workload"))] = Field(
        None,
        description="Traffic to plan for, as POST /v1/simulations takes it (request_rate, "
        "input_tokens, output_tokens; num_requests default 2000), instead of peak_concurrency: "
        "each candidate's replicas are chosen so one replica simulated at request_rate / "
        "replicas meets the percentile targets, and options rank by cost per million output "
        "tokens. On GET and in a CSV cell, its JSON text.",
    )
    ttft_p99_ms: float | None = Field(
        None, gt=0, description=TARGET_DOC.format("99", "time to first token")
    )
    tpot_p99_ms: float | None = Field(
        None, gt=0, description=TARGET_DOC.format("99", "time per output token")
    )
    ttft_p90_ms: float | None = Field(
        None, gt=0, description=TARGET_DOC.format("90", "time to first token")
    )
    tpot_p90_ms: float | None = Field(
        None, gt=0, description=TARGET_DOC.format("90", "time per output token")
    )
    ttft_p50_ms: float | None = Field(
        None, gt=0, description=TARGET_DOC.format("50", "time to first token")
    )
    tpot_p50_ms: float | None = Field(
        None, gt=0, description=TARGET_DOC.format("50", "time per output token")
    )
    disaggregated: DisaggregatedMode | None = Field(
        None,
        description="With a workload: whether options may split prefill and decode into two "
        "pools (a prefill pool and a decode pool, the prompt's KV sent between them): `auto` "
        "(the default with a workload) weighs both kinds and the answer's `disaggregation` "
        "says whether the cheapest split is cheaper than one pool and by how much; `never` "
        "plans one pool; `only` plans split pools alone.",
    )


class PlanRequestBody(PlanFields):
    """POST /v1/plans: the three sizing questions plus options."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "llama-3.1-70b",
                    "max_model_len": 32768,
                    "peak_concurrency": 64,
                    "kv_cache_dtype": "fp8",
                },
                {
                    "model": "qwen3.5-27b",
                    "max_model_len": 131072,
                    "peak_concurrency": 200,
                    "kv_cache_dtype": "fp8",
                    "gpus": [
                        "h100-sxm-80gb",
                        "h200-141gb",
                        {"memory_bytes": 51527024640, "name": "RTX 6000 Ada"},
                    ],
                    "max_gpus_per_node": 8,
                    "headroom_fraction": 0.1,
                    "avg_context_tokens": 16384,
                },
            ]
        },
    )

    gpus: list[GpuRef] | None = Field(
        None, max_length=200, description="Candidate GPUs (default: the whole catalog)."
    )
    explain: bool = Field(True, description="Explain the recommendation step by step.")


class PlanQuery(PlanFields):
    """GET /v1/plans: the same questions as query parameters (catalog models and GPUs only)."""

    model_config = QUERY_CONFIG

    model: str = Field(..., max_length=100, description="Model slug.")
    gpus: str | None = Field(
        None, max_length=4000, description="Comma-separated GPU slugs (default: all)."
    )
    # The POST default is true; a GET (a spreadsheet cell, a dashboard) rarely reads it.
    explain: bool = Field(False, description="Explain the recommendation step by step (JSON).")
    format: ResponseFormat | None = Field(None, description=FORMAT_DOC)
    field: PlanField | None = Field(
        None,
        description="Answer with this one value of the recommendation as text/plain. "
        "`format=text` without it answers `total_gpus`.",
    )


class PoolOut(BaseModel):
    """One pool of a disaggregated option: its GPU, layout, replicas, settings and memory."""

    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    replicas: int
    total_gpus: int
    cost_per_hour_usd: float | None = Field(description="The pool's GPUs x price_usd_per_hour.")
    max_num_seqs: int = Field(
        description="Per replica, at max_model_len, as the flags set it (the prefill pool's "
        "at most 16: its prompts' KV is held only until it is sent)."
    )
    max_num_batched_tokens: int = Field(description="The pool's engine setting, per replica.")
    kv_pool_bytes: int = Field(description="Per GPU, sized with the pool's own settings.")
    kv_cache_tokens: int = Field(description="Per replica, as the engine logs it.")
    num_gpu_blocks: int
    engine_flags: dict[str, str] = Field(
        description="Flags to paste on each of the pool's instances, per engine, the KV "
        "connector (vLLM) or the disaggregation mode (SGLang) included."
    )


class DisaggregatedOut(BaseModel):
    """A disaggregated option's two pools and the KV transfer between them."""

    prefill_pool: PoolOut = Field(
        description="Computes each prompt and its first token, then sends the prompt's KV."
    )
    decode_pool: PoolOut = Field(
        description="Receives each prompt's KV and generates the answer (the caller's flags)."
    )
    kv_transfer_bytes_per_gpu: int = Field(
        description="A mean prompt's KV sent by each prefill GPU: input tokens x "
        "kv_bytes_per_token_per_gpu of the prefill layout."
    )
    kv_transfer_ms: float = Field(description="That over link_gb_s, ms (a mean prompt).")
    link_gb_s: float = Field(
        description="The inter-node link per GPU, GB/s (10^9 B/s), one direction: the pools "
        "are taken to be on different nodes (the slower GPU's)."
    )
    router: dict[str, str] = Field(
        description="What fronts the pools, per engine: SGLang's router in PD mode, vLLM's "
        "NIXL proxy ($PREFILL_IP, $DECODE_IP the pools' addresses)."
    )
    before_decode_ms: DistributionOut = Field(
        description="Simulated: arrival to the decode pool (prefill queue, prefill, transfer)."
    )
    decode_wait_ms: DistributionOut = Field(
        description="Simulated: the decode pool's wait for a slot and its first step."
    )


class DisaggregationOut(BaseModel):
    """A plan for a rate's comparison of split pools with one pool."""

    mode: DisaggregatedMode
    aggregated_cost_per_million_output_tokens_usd: float | None = Field(
        description="The cheapest single-pool option's (null: none, or unpriced)."
    )
    disaggregated_cost_per_million_output_tokens_usd: float | None = Field(
        description="The cheapest disaggregated option's (null: none, or unpriced)."
    )
    cheaper_fraction: float | None = Field(
        description="(aggregated - disaggregated) / aggregated cost: positive when split pools "
        "are cheaper (0.25: 25% cheaper), negative when they cost more; null when either is "
        "missing."
    )
    statement: str = Field(description="The comparison in one sentence.")


class PlanOptionOut(BaseModel):
    gpu: str
    gpu_name: str
    tensor_parallel_size: int
    pipeline_parallel_size: int = Field(
        1, description="Pipeline stages of one replica, one per node (1: a single node)."
    )
    nodes_per_replica: int = Field(1, description="Nodes one replica spans.")
    gpus_per_node: int = Field(description="GPUs of each node a replica uses.")
    # issue 21: DP + EP layouts of a MoE model
    data_parallel_size: int = Field(
        1,
        description="vLLM engine cores in one replica (--data-parallel-size with "
        "--enable-expert-parallel: a MoE's experts spread over them, each its own KV pool); "
        "max_num_seqs, kv_pool_bytes, kv_cache_tokens, num_gpu_blocks and max_concurrency are "
        "then one DP rank's.",
    )
    replicas: int
    total_gpus: int
    max_num_seqs: int = Field(description="Per replica (engine instance), at max_model_len.")
    sequences_per_replica: int = Field(
        description="Sequences a replica can hold at once at the average context (= max_num_seqs "
        "without avg_context_tokens), capped by the engine's max_num_seqs: its capacity, not "
        "its load."
    )
    concurrency_per_replica: int = Field(
        description="Each replica's share of the peak: ceil(peak_concurrency / replicas) "
        "sequences (at most sequences_per_replica), the batch the speed figures are timed at."
    )
    headroom_fraction: float = Field(
        description="Share of the replicas' usable KV blocks free at the peak."
    )
    headroom_bytes: int
    headroom_tokens: int
    kv_pool_bytes: int = Field(description="Per GPU.")
    kv_cache_tokens: int = Field(description="Per replica, as the engine logs it.")
    num_gpu_blocks: int
    max_concurrency: float
    cost_per_hour_usd: float | None = Field(
        description="total_gpus x price_usd_per_hour; null when the GPU has no price."
    )
    price_usd_per_hour: float | None = Field(description="The price per GPU-hour used.")
    price_source: str | None = Field(
        description="Where that price was read (the catalog's `price_source`; null for a "
        "price given inline)."
    )
    price_origin: PriceOrigin | None = Field(
        description="Whose price: `catalog` (the catalog as kvplan ships it) or `caller's "
        "override` (a price written through the catalog API or given inline); null unpriced."
    )
    tokens_per_dollar: float | None = Field(
        description="Output tokens per US dollar at the peak: output_tokens_per_second x "
        "replicas x 3600 / cost_per_hour_usd. Null without a price or a speed estimate."
    )
    decode_ms_per_token: float | None = Field(
        description="Estimated time per output token of a replica at the concurrency it is "
        "planned to serve, ceil(peak_concurrency / replicas) sequences, each at "
        "avg_context_tokens (max_model_len without it), ms. Null when the GPU lacks the figures."
    )
    output_tokens_per_second: float | None = Field(
        description="Output tokens per second of one replica at that concurrency."
    )
    prefill_ms: float | None = Field(
        description="Prefill of one prompt of avg_prompt_tokens (max_model_len without it), ms."
    )
    performance_bound: PerformanceBound | None
    performance_error_band: float | None = Field(description=ERROR_BAND_DOC)
    engine_flags: dict[str, str] = Field(
        description="Flags to paste, per engine; a multi-node replica's first node's. An "
        "engine kvplan cannot size for the model (SGLang for DeepSeek-V4, say), or that a plan "
        "for a rate did not simulate, has none, and a warning names it."
    )
    node_flags: dict[str, list[str]] = Field(
        default_factory=dict,
        description="A multi-node replica's flags for every node, node rank 0 first, per "
        "engine; empty when one node holds a replica. $NODE0_IP is the first node's address.",
    )
    warnings: list[str]
    calibrated_from: CalibratedFrom | None = Field(
        None,
        description="Set when a stored calibration measured this GPU and layout for the model "
        "(same key as a capacity question's): the option is sized with its pool.",
    )
    # issue 23: a plan for a rate (null for a peak's plan)
    request_rate_per_replica: float | None = Field(
        None, description="With a workload: request_rate / replicas, the rate one replica is "
        "simulated at.",
    )  # fmt: skip
    output_tokens_per_second_at_rate: float | None = Field(
        None, description="With a workload: request_rate x the mean output tokens of the "
        "simulated requests (all served: the targets are met).",
    )  # fmt: skip
    cost_per_million_output_tokens_usd: float | None = Field(
        None, description="With a workload: cost_per_hour_usd / (output_tokens_per_second_at_"
        "rate x 3600) x 10^6, the whole cost over the output tokens.",
    )  # fmt: skip
    cost_per_million_input_tokens_usd: float | None = Field(
        None, description="With a workload: cost_per_hour_usd / (request_rate x the mean input "
        "tokens x 3600) x 10^6, the whole cost over the input tokens.",
    )  # fmt: skip
    ttft_ms: DistributionOut | None = Field(
        None, description="With a workload: the simulated time to first token at the rate."
    )
    tpot_ms: DistributionOut | None = Field(
        None, description="With a workload: the simulated time per output token at the rate."
    )
    e2e_latency_ms: DistributionOut | None = Field(
        None, description="With a workload: the simulated end-to-end latency at the rate."
    )
    speed_calibrated_from: SpeedCalibratedFrom | None = Field(
        None,
        description="Set when a stored speed calibration measured this GPU and layout for "
        "the model (same key as a capacity question's): its step-time scale is on the "
        "option's decode figures and on the latency targets' check.",
    )
    kind: OptionKind = Field(
        "aggregated",
        description="`aggregated`: one pool, each replica prefilling and decoding; "
        "`disaggregated` (a plan for a rate): a prefill pool and a decode pool, in "
        "`disaggregated`. A disaggregated option's per-replica fields (gpu, layout, replicas, "
        "pool, engine_flags) are its decode pool's; total_gpus, cost_per_hour_usd and the "
        "costs per token are both pools'.",
    )
    disaggregated: DisaggregatedOut | None = Field(
        None, description="A disaggregated option's two pools and the KV transfer."
    )


class RejectedOut(BaseModel):
    gpu: str
    tensor_parallel_size: int | None
    pipeline_parallel_size: int = 1
    code: str
    reason: str


class PlanAnswer(BaseModel):
    model: str
    max_model_len: int
    peak_concurrency: int | None = Field(description="As asked (null: a plan for a rate).")
    request_rate: float | None = Field(None, description="A workload's request_rate, as asked.")
    kv_cache_dtype: str
    engine: EngineName
    recommendation: PlanOptionOut | None
    alternatives: list[PlanOptionOut]
    rank_by: RankBy = Field(description="How the recommendation and alternatives are ranked.")
    alternatives_omitted: int = Field(
        description="Feasible options not shown (beyond max_alternatives); a warning names "
        "their GPUs."
    )
    rejected: list[RejectedOut] = Field(
        description="One entry per GPU and tensor_parallel_size that cannot serve the workload "
        "(tensor_parallel_size null: no layout of that GPU was tried), with the reason."
    )
    warnings: list[str]
    explanation: dict[str, Any] | None = None
    catalog_version: int
    disaggregation: DisaggregationOut | None = Field(
        None,
        description="A plan for a rate: the cheapest disaggregated option against the cheapest "
        "single pool (null for a peak's plan and with disaggregated=never).",
    )


def no_plan_reason(answer: PlanAnswer) -> str:
    """Why a plan has no option, in one line: `format=text`'s body where `total_gpus` would be
    (a sheet's cell shows it; an empty 200 showed a blank cell), and the CLI's."""
    if not answer.rejected:
        return "no plan: no candidate GPU"
    first = answer.rejected[0]
    layout = "" if first.tensor_parallel_size is None else f" x{first.tensor_parallel_size}"
    if first.pipeline_parallel_size > 1:
        layout += f" on {first.pipeline_parallel_size} nodes"
    others = len(answer.rejected) - 1
    tail = f" ({others} other candidates rejected too)" if others else ""
    return f"no plan: {first.gpu}{layout}: {first.reason}{tail}"


def table_row(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A capacity answer (its JSON form) as a flat table row: `calibrated_from` becomes the
    `calibration_id` column, empty when no calibration was used."""
    row = dict(answer)
    if "calibrated_from" in row:
        used = row.pop("calibrated_from")
        row["calibration_id"] = None if used is None else used["calibration_id"]
    speed = row.pop("speed_calibrated_from", None)
    if speed is not None:
        row["speed_calibration_id"] = speed["calibration_id"]
    return row


# ---------------------------------------------------------------------------------------------
# tables: the single-value headlines, the columns of plan tables, a table of questions

# What `format=text` answers without `field`: the number each question is asked for.
CAPACITY_HEADLINE: CapacityField = "max_num_seqs"
PLAN_HEADLINE: PlanField = "total_gpus"

# A plan option's byte columns that get a GiB twin in tables (formats.gib_twins).
OPTION_GIB_COLUMNS = ("headroom_bytes", "kv_pool_bytes")
_ROW_ONLY = ("engine_flags", "node_flags", "warnings")


# A plan for a rate's simulated percentiles: a table row names each as its target is named
# (ttft_ms's p99 is the column ttft_p99_ms).
OPTION_DISTRIBUTIONS = ("ttft_ms", "tpot_ms", "e2e_latency_ms")
DISTRIBUTION_STATS = ("mean", "p50", "p90", "p99")


def distribution_columns(name: str) -> list[str]:
    return [f"{name.removesuffix('_ms')}_{stat}_ms" for stat in DISTRIBUTION_STATS]


_ID_COLUMNS = {
    "calibrated_from": "calibration_id",
    "speed_calibrated_from": "speed_calibration_id",
}


# A disaggregated option's pools in a flat row: each pool's columns, role first.
POOL_COLUMNS = (
    "gpu", "tensor_parallel_size", "pipeline_parallel_size", "replicas", "total_gpus",
    "cost_per_hour_usd", "max_num_seqs", "max_num_batched_tokens", "kv_pool_bytes",
    "num_gpu_blocks",
)  # fmt: skip
TRANSFER_COLUMNS = ("kv_transfer_bytes_per_gpu", "kv_transfer_ms", "link_gb_s")


def disaggregated_columns() -> list[str]:
    columns = []
    for role in ("prefill", "decode"):
        columns += [f"{role}_{name}" for name in POOL_COLUMNS]
        columns += [f"{role}_vllm_flags", f"{role}_sglang_flags"]
    return [*columns, *TRANSFER_COLUMNS]


def disaggregated_row(value: DisaggregatedOut | None) -> dict[str, Any]:
    """A disaggregated option's pools as flat cells (empty for one pool)."""
    if value is None:
        return dict.fromkeys(disaggregated_columns())
    row: dict[str, Any] = {}
    for role, pool in (("prefill", value.prefill_pool), ("decode", value.decode_pool)):
        row |= {f"{role}_{name}": getattr(pool, name) for name in POOL_COLUMNS}
        for engine in ("vllm", "sglang"):
            row[f"{role}_{engine}_flags"] = pool.engine_flags.get(engine, "")
    return row | {name: getattr(value, name) for name in TRANSFER_COLUMNS}


def _option_columns() -> list[str]:
    columns: list[str] = []
    for name in PlanOptionOut.model_fields:
        if name in _ROW_ONLY:
            continue
        if name == "disaggregated":
            columns.extend(disaggregated_columns())
            continue
        if name in OPTION_DISTRIBUTIONS:
            columns.extend(distribution_columns(name))
            continue
        # a flat row names the calibration by its id alone (table_row)
        columns.append(_ID_COLUMNS.get(name, name))
        if name in OPTION_GIB_COLUMNS:
            columns.append(gib_name(name))
    flags = ["vllm_flags", "sglang_flags", "vllm_node_flags", "sglang_node_flags"]
    return [*columns, *flags, "warnings"]


OPTION_COLUMNS = tuple(_option_columns())
# The question's key facts, first in each answer row of a table of questions.
SCENARIO_FACTS = ("model", "max_model_len", "peak_concurrency", "kv_cache_dtype", "engine")
SCENARIO_LABEL = "scenario"
MAX_SCENARIOS = 500
MAX_SCENARIO_BYTES = 1 << 20
# Cells of these fields hold a list, its items separated by `;` (or `,` in a quoted cell).
LIST_COLUMNS = frozenset({"gpus", "max_attention_window"})
PLAN_TABLE_EXAMPLE = (
    "scenario,model,max_model_len,peak_concurrency,kv_cache_dtype,gpus\n"
    "chat,llama-3.1-70b,32768,64,fp8,\n"
    "long context,qwen3.5-27b,131072,200,fp8,h100-sxm-80gb;h200-141gb\n"
)


def plan_table_columns(*, ranked: bool, header: Sequence[str] = ()) -> list[str]:
    """A plan table's columns: `rank` and the options of one plan, or one row per question."""
    if ranked:
        return ["rank", *OPTION_COLUMNS]
    label = [SCENARIO_LABEL] if SCENARIO_LABEL in header else []
    return ["row", *label, *SCENARIO_FACTS, *OPTION_COLUMNS, "status", "error"]


def plan_body_from_row(cells: Mapping[str, str | None]) -> PlanRequestBody:
    """One row of a table of questions as the JSON body it stands for (empty = default)."""
    values: dict[str, Any] = {}
    for name, cell in cells.items():
        text = (cell or "").strip()
        if name == SCENARIO_LABEL or not text:
            continue
        if name in LIST_COLUMNS:
            values[name] = [item.strip() for item in re.split(r"[;,]", text) if item.strip()]
        else:
            values[name] = text
    return PlanRequestBody.model_validate(values)
