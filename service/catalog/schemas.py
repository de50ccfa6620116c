"""The catalog's HTTP shapes: request bodies with their bounds, answers, the list envelope.

Request bodies refuse unknown fields (a typo such as `memory_byte` is a 422, not a silent no-op).
Answers carry no bounds: they show what is stored, including seed rows written before a bound
was tightened.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

SLUG_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,99}$"
SLUG_RE = re.compile(SLUG_PATTERN)
MAX_MEMORY_BYTES = 2**50
MAX_PARAMETERS = 10**15
MAX_WEIGHT_BYTES = 2**60
MAX_POSITION_EMBEDDINGS = 2**40
MAX_SOURCES = 50


def no_nul(value: str) -> str:
    """PostgreSQL text cannot hold NUL; refuse it here rather than fail in the database."""
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


def _finite_prices(value: dict[str, float] | None) -> dict[str, float] | None:
    if value is not None:
        for provider, price in value.items():
            no_nul(provider)
            if not math.isfinite(price) or price < 0:
                raise ValueError(f"price for {provider!r} must be a finite number >= 0")
    return value


def _finite_price_patch(value: dict[str, float | None] | None) -> dict[str, float | None] | None:
    """A merge patch of prices: null removes a provider, anything else is a price as above."""
    if value is not None:
        _finite_prices({k: v for k, v in value.items() if v is not None})
        for provider in value:
            no_nul(provider)
    return value


Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(no_nul)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=100), AfterValidator(no_nul)]
LongText = Annotated[str, StringConstraints(max_length=2_000), AfterValidator(no_nul)]
Notes = Annotated[str, StringConstraints(max_length=10_000), AfterValidator(no_nul)]
Source = Annotated[str, StringConstraints(min_length=1, max_length=2_000), AfterValidator(no_nul)]
# The validator wraps the optional (not the dict inside it), so a field's max_length is
# documented as the object's maxProperties.
Prices = Annotated[dict[str, float] | None, AfterValidator(_finite_prices)]
PricesPatch = Annotated[dict[str, float | None] | None, AfterValidator(_finite_price_patch)]

# ---------------------------------------------------------------------------------------------
# field documentation, shared by the create / replace / patch bodies and the answers

_SLUG_DOC = (
    "Stable identifier used in URLs and by the sizing endpoints: lowercase letters, digits, "
    "'.', '_' and '-', at most 100 characters. Cannot be changed once created."
)
_SOURCES_DOC = (
    "Where each fact comes from (provenance): URLs, file paths in public repositories, "
    "datasheets. Free text, one entry per source."
)
_NOTES_DOC = "Anything a reader should know about this entry: caveats, derivations, conflicts."

GPU_DOCS: dict[str, tuple[str, list[Any]]] = {
    "slug": (_SLUG_DOC, ["h100-sxm-80gb"]),
    "name": ("Human-readable name as shown in dashboards.", ["NVIDIA H100 SXM 80GB"]),
    "vendor": ("Manufacturer; the list filter `vendor` matches it case-insensitively.", ["NVIDIA"]),
    "memory_bytes": (
        "Total device memory in bytes **as the CUDA runtime / PyTorch reports it** "
        "(`torch.cuda.mem_get_info()[1]`), which is what inference engines size their KV cache "
        "from. Smaller than the marketed figure and than nvidia-smi's total.",
        [85_051_089_879],
    ),
    "memory_source": (
        "How `memory_bytes` was obtained (measured, derived from nvidia-smi, datasheet).",
        ["torch-reported total 79.21 GiB from public OOM logs"],
    ),
    "nvidia_smi_memory_mib": ("Total memory as nvidia-smi prints it, in MiB.", [81_559]),
    "memory_marketed_gb": ("Memory as marketed, in GB (10^9 bytes) — for display only.", [80]),
    "memory_type": ("Memory technology.", ["HBM3"]),
    "memory_bandwidth_tb_s": ("Peak memory bandwidth in TB/s (10^12 bytes per second).", [3.35]),
    "dense_bf16_tflops": ("Peak dense BF16 tensor throughput in TFLOPS (no sparsity).", [989]),
    "dense_fp8_tflops": ("Peak dense FP8 tensor throughput in TFLOPS (no sparsity).", [1978]),
    "dense_fp4_tflops": (
        "Peak dense FP4 tensor throughput in TFLOPS (no sparsity), where the GPU has FP4 "
        "tensor cores (Blackwell, CDNA 4).",
        [9000],
    ),
    "fp8_support": ("Whether the GPU computes natively in FP8 (Hopper, Ada, Blackwell).", [True]),
    "bf16_support": (
        "Whether the GPU computes in bfloat16 (NVIDIA compute capability >= 8.0; not V100, "
        "T4): decides what vLLM's `--dtype auto` runs a float32 or bfloat16 checkpoint at. "
        "Null: not recorded, sized as bfloat16-capable.",
        [True],
    ),
    "interconnect": ("GPU-to-GPU link within a node.", ["NVLink 4 (900 GB/s bidirectional)"]),
    "interconnect_gb_s": (
        "That link's bandwidth in GB/s (10^9 bytes per second) per GPU and direction: what the "
        "speed estimate's all-reduces take at tensor_parallel_size > 1.",
        [450],
    ),
    "max_gpus_per_node": (
        "Most GPUs of this kind in one node: the planner's tensor-parallel ceiling.",
        [8],
    ),
    "tdp_w": ("Board power in watts.", [700]),
    "price_usd_per_hour": (
        "Reference on-demand price per GPU-hour in US dollars, used by the planner to rank plans. "
        "Write your own (a contract price) here: plans then say they used the caller's price.",
        [2.39],
    ),
    "price_source": (
        "Where `price_usd_per_hour` was read: the provider and the offer (on-demand, per GPU), "
        "or `unpriced: <reason>` where no published price was found.",
        ["RunPod pricing page, H100 SXM, Secure Cloud on-demand, per GPU"],
    ),
    "price_date": ("When `price_usd_per_hour` was observed (ISO date).", ["2026-06-14"]),
    "price_examples": (
        "Observed prices per provider, US dollars per GPU-hour.",
        [{"RunPod": 1.99, "CoreWeave": 6.16}],
    ),
    "sources": (_SOURCES_DOC, [["https://www.nvidia.com/en-us/data-center/h100/"]]),
    "notes": (_NOTES_DOC, ["nvidia-smi shows 81559 MiB; torch sees about 0.45 GiB less."]),
}

_ARCH_EXAMPLE: dict[str, Any] = {
    "num_attention_heads": 32,
    "dtype": "bfloat16",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "num_parameters": 8_030_261_248,
    "max_position_embeddings": 131072,
    "layer_specs": {"full_attention": {"num_kv_heads": 8, "head_dim": 128}},
    "layer_schedule": [{"pattern": ["full_attention"], "repeat": 32}],
}

MODEL_DOCS: dict[str, tuple[str, list[Any]]] = {
    "slug": (_SLUG_DOC, ["llama-3.1-8b"]),
    "name": ("Human-readable name; defaults to the slug.", ["Llama 3.1 8B"]),
    "hf_id": ("Hugging Face repository id.", ["meta-llama/Llama-3.1-8B"]),
    "family": (
        "Architecture family, by convention the Hugging Face `model_type` of the language "
        "model; the list filter `family` matches it case-insensitively.",
        ["llama"],
    ),
    "architecture": (
        "What decides the model's memory: `layer_specs` maps each layer kind (full_attention, "
        "sliding_attention, chunked_attention, mla, linear_attention, kda, mamba2, mamba, "
        "no_cache) "
        "to its geometry, and `layer_schedule` lists the kind of every layer, either by name or "
        "as `{pattern, repeat}` segments; a spec may take another name if it says its `kind` "
        '(`"mla_shared": {"kind": "mla", ...}`), for two geometries of one kind, and every spec '
        "must be used. Also `num_attention_heads`, `dtype`, and optionally "
        "`state_dtype`, `hidden_size`, `intermediate_size`, `vocab_size`, `num_parameters`, "
        "`weight_bytes`, `weight_format`, `max_position_embeddings`, `moe`. Unknown layer kinds "
        "are refused, never sized as full attention.",
        [_ARCH_EXAMPLE],
    ),
    "sources": (_SOURCES_DOC, [["https://huggingface.co/meta-llama/Llama-3.1-8B"]]),
    "notes": (_NOTES_DOC, ["num_parameters from the safetensors index."]),
}

_COMMON_DOCS: dict[str, tuple[str, list[Any]]] = {
    "origin": (
        "`seed` while the entry is exactly what `kvplan seed` wrote; `user` once created or "
        "edited through the API (the seed then never overwrites it).",
        ["seed"],
    ),
    "revision": (
        "Starts at 1 and grows by one on every change; the `ETag` is this number in quotes. "
        "Send it back in `If-Match` to update or delete.",
        [3],
    ),
    "created_at": ("When the entry was created (UTC).", ["2026-06-14T12:00:00Z"]),
    "updated_at": ("When the entry last changed (UTC).", ["2026-06-14T12:00:00Z"]),
}


def _doc(docs: dict[str, tuple[str, list[Any]]], name: str, default: Any = ..., **kw: Any) -> Any:
    description, examples = docs.get(name) or _COMMON_DOCS[name]
    return Field(default, description=description, examples=examples, **kw)


def _gpu(name: str, default: Any = ..., **kw: Any) -> Any:
    return _doc(GPU_DOCS, name, default, **kw)


def _model(name: str, default: Any = ..., **kw: Any) -> Any:
    return _doc(MODEL_DOCS, name, default, **kw)


# ---------------------------------------------------------------------------------------------
# GPUs

_GPU_EXAMPLE: dict[str, Any] = {
    "slug": "h100-sxm-80gb",
    "name": "NVIDIA H100 SXM 80GB",
    "vendor": "NVIDIA",
    "memory_bytes": 85_051_089_879,
    "nvidia_smi_memory_mib": 81_559,
    "memory_marketed_gb": 80,
    "memory_type": "HBM3",
    "fp8_support": True,
    "max_gpus_per_node": 8,
    "price_usd_per_hour": 2.39,
    "price_date": "2026-06-14",
    "sources": ["https://www.nvidia.com/en-us/data-center/h100/"],
}
_GPU_MINIMAL: dict[str, Any] = {
    "slug": "my-gpu-48gb",
    "name": "My GPU 48GB",
    "memory_bytes": 50_919_047_168,
}


class GpuReplace(BaseModel):
    """A GPU's full description (PUT replaces every field; omitted optional ones are cleared)."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [{k: v for k, v in _GPU_EXAMPLE.items() if k != "slug"}],
        },
    )

    name: Name = _gpu("name")
    vendor: Label | None = _gpu("vendor", None)
    memory_bytes: int = _gpu("memory_bytes", ge=1, le=MAX_MEMORY_BYTES)
    memory_source: LongText | None = _gpu("memory_source", None)
    nvidia_smi_memory_mib: int | None = _gpu("nvidia_smi_memory_mib", None, ge=1, le=2**30)
    memory_marketed_gb: float | None = _gpu("memory_marketed_gb", None, gt=0, le=1_000_000)
    memory_type: Label | None = _gpu("memory_type", None)
    memory_bandwidth_tb_s: float | None = _gpu("memory_bandwidth_tb_s", None, gt=0, le=10_000)
    dense_bf16_tflops: float | None = _gpu("dense_bf16_tflops", None, gt=0, le=1_000_000)
    dense_fp8_tflops: float | None = _gpu("dense_fp8_tflops", None, gt=0, le=1_000_000)
    dense_fp4_tflops: float | None = _gpu("dense_fp4_tflops", None, gt=0, le=1_000_000)
    fp8_support: bool | None = _gpu("fp8_support", None)
    bf16_support: bool | None = _gpu("bf16_support", None)
    interconnect: LongText | None = _gpu("interconnect", None)
    interconnect_gb_s: float | None = _gpu("interconnect_gb_s", None, gt=0, le=100_000)
    max_gpus_per_node: int = _gpu("max_gpus_per_node", 8, ge=1, le=64)
    tdp_w: int | None = _gpu("tdp_w", None, ge=1, le=100_000)
    price_usd_per_hour: float | None = _gpu("price_usd_per_hour", None, ge=0, le=1_000_000)
    price_date: date | None = _gpu("price_date", None)
    price_source: LongText | None = _gpu("price_source", None)
    price_examples: Prices = _gpu("price_examples", None, max_length=100)
    sources: list[Source] = _gpu("sources", [], max_length=MAX_SOURCES)
    notes: Notes | None = _gpu("notes", None)


class _GpuSlug(BaseModel):
    slug: Slug = _gpu("slug")


class GpuCreate(GpuReplace, _GpuSlug):
    """A new GPU: `slug`, `name` and `memory_bytes` are enough; everything else is optional."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [_GPU_MINIMAL, _GPU_EXAMPLE]},
    )


class GpuPatch(BaseModel):
    """JSON merge patch (RFC 7396): only the fields sent change; `null` clears an optional field.

    `name`, `memory_bytes` and `max_gpus_per_node` cannot be cleared.
    `price_examples` is merged key by key (a provider set to `null` is removed).
    A new `price_usd_per_hour` clears `price_source` and `price_date` unless the patch gives
    them too: they described the price it replaces.
    """

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [{"price_usd_per_hour": 2.19, "price_date": "2026-07-01"}, {"notes": None}]
        },
    )

    name: Name | None = _gpu("name", None)
    vendor: Label | None = _gpu("vendor", None)
    memory_bytes: int | None = _gpu("memory_bytes", None, ge=1, le=MAX_MEMORY_BYTES)
    memory_source: LongText | None = _gpu("memory_source", None)
    nvidia_smi_memory_mib: int | None = _gpu("nvidia_smi_memory_mib", None, ge=1, le=2**30)
    memory_marketed_gb: float | None = _gpu("memory_marketed_gb", None, gt=0, le=1_000_000)
    memory_type: Label | None = _gpu("memory_type", None)
    memory_bandwidth_tb_s: float | None = _gpu("memory_bandwidth_tb_s", None, gt=0, le=10_000)
    dense_bf16_tflops: float | None = _gpu("dense_bf16_tflops", None, gt=0, le=1_000_000)
    dense_fp8_tflops: float | None = _gpu("dense_fp8_tflops", None, gt=0, le=1_000_000)
    dense_fp4_tflops: float | None = _gpu("dense_fp4_tflops", None, gt=0, le=1_000_000)
    fp8_support: bool | None = _gpu("fp8_support", None)
    bf16_support: bool | None = _gpu("bf16_support", None)
    interconnect: LongText | None = _gpu("interconnect", None)
    interconnect_gb_s: float | None = _gpu("interconnect_gb_s", None, gt=0, le=100_000)
    max_gpus_per_node: int | None = _gpu("max_gpus_per_node", None, ge=1, le=64)
    tdp_w: int | None = _gpu("tdp_w", None, ge=1, le=100_000)
    price_usd_per_hour: float | None = _gpu("price_usd_per_hour", None, ge=0, le=1_000_000)
    price_date: date | None = _gpu("price_date", None)
    price_source: LongText | None = _gpu("price_source", None)
    price_examples: PricesPatch = _gpu("price_examples", None, max_length=100)
    sources: list[Source] | None = _gpu("sources", None, max_length=MAX_SOURCES)
    notes: Notes | None = _gpu("notes", None)


class GpuRead(BaseModel):
    """A GPU as stored, with its provenance and revision."""

    slug: str = _gpu("slug")
    name: str = _gpu("name")
    vendor: str | None = _gpu("vendor")
    memory_bytes: int = _gpu("memory_bytes")
    memory_source: str | None = _gpu("memory_source")
    nvidia_smi_memory_mib: int | None = _gpu("nvidia_smi_memory_mib")
    memory_marketed_gb: float | None = _gpu("memory_marketed_gb")
    memory_type: str | None = _gpu("memory_type")
    memory_bandwidth_tb_s: float | None = _gpu("memory_bandwidth_tb_s")
    dense_bf16_tflops: float | None = _gpu("dense_bf16_tflops")
    dense_fp8_tflops: float | None = _gpu("dense_fp8_tflops")
    dense_fp4_tflops: float | None = _gpu("dense_fp4_tflops")
    fp8_support: bool | None = _gpu("fp8_support")
    bf16_support: bool | None = _gpu("bf16_support")
    interconnect: str | None = _gpu("interconnect")
    interconnect_gb_s: float | None = _gpu("interconnect_gb_s")
    max_gpus_per_node: int = _gpu("max_gpus_per_node")
    tdp_w: int | None = _gpu("tdp_w")
    price_usd_per_hour: float | None = _gpu("price_usd_per_hour")
    price_date: str | None = _gpu("price_date")
    price_source: str | None = _gpu("price_source")
    price_examples: dict[str, Any] | None = _gpu("price_examples")
    sources: list[str] = _gpu("sources")
    notes: str | None = _gpu("notes")
    origin: str = _gpu("origin")
    revision: int = _gpu("revision")
    created_at: datetime = _gpu("created_at")
    updated_at: datetime = _gpu("updated_at")


# ---------------------------------------------------------------------------------------------
# models

_MODEL_EXAMPLE: dict[str, Any] = {
    "slug": "llama-3.1-8b",
    "name": "Llama 3.1 8B",
    "hf_id": "meta-llama/Llama-3.1-8B",
    "family": "llama",
    "architecture": _ARCH_EXAMPLE,
    "sources": ["https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"],
}
_HYBRID_EXAMPLE: dict[str, Any] = {
    "slug": "qwen3.5-27b",
    "family": "qwen3_5_text",
    "architecture": {
        "num_attention_heads": 24,
        "dtype": "bfloat16",
        "state_dtype": "float32",
        "layer_specs": {
            "linear_attention": {
                "num_key_heads": 16,
                "num_value_heads": 48,
                "key_head_dim": 128,
                "value_head_dim": 128,
                "conv_kernel": 4,
            },
            "full_attention": {"num_kv_heads": 4, "head_dim": 256},
        },
        "layer_schedule": [
            {
                "pattern": [
                    "linear_attention",
                    "linear_attention",
                    "linear_attention",
                    "full_attention",
                ],
                "repeat": 16,
            }
        ],
    },
}


class ModelReplace(BaseModel):
    """A model's full description (PUT replaces every field; omitted optional ones are cleared)."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [{k: v for k, v in _MODEL_EXAMPLE.items() if k != "slug"}]},
    )

    name: Name | None = _model("name", None)
    hf_id: Name | None = _model("hf_id", None)
    family: Label | None = _model("family", None)
    architecture: dict[str, Any] = _model("architecture")
    sources: list[Source] = _model("sources", [], max_length=MAX_SOURCES)
    notes: Notes | None = _model("notes", None)


class _ModelSlug(BaseModel):
    slug: Slug = _model("slug")


class ModelCreate(ModelReplace, _ModelSlug):
    """A new model: its slug and its architecture facts; the rest is optional."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [_MODEL_EXAMPLE, _HYBRID_EXAMPLE]},
    )


class ModelPatch(BaseModel):
    """JSON merge patch (RFC 7396): only the fields sent change; `null` clears an optional field.

    `architecture` is merged key by key (send `{"architecture": {"max_position_embeddings":
    65536}}` to change one fact); the result must still be a valid architecture.
    """

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"notes": "Context limited to 64k by the deployment."},
                {"architecture": {"max_position_embeddings": 65536}},
            ]
        },
    )

    name: Name | None = _model("name", None)
    hf_id: Name | None = _model("hf_id", None)
    family: Label | None = _model("family", None)
    architecture: dict[str, Any] | None = _model("architecture", None)
    sources: list[Source] | None = _model("sources", None, max_length=MAX_SOURCES)
    notes: Notes | None = _model("notes", None)


class ModelRead(BaseModel):
    """A model as stored, with what kvplan derives from it."""

    slug: str = _model("slug")
    name: str = _model("name")
    hf_id: str | None = _model("hf_id")
    family: str | None = _model("family")
    architecture: dict[str, Any] = _model("architecture")
    num_layers: int = Field(
        description="Layers in the schedule, state-free blocks included.", examples=[32]
    )
    layer_kinds: list[str] = Field(
        description="The cache-keeping layer kinds the model has, sorted.",
        examples=[["full_attention", "linear_attention"]],
    )
    layer_counts: dict[str, int] = Field(
        description="How many layers of each kind, in schedule order of first appearance.",
        examples=[{"linear_attention": 48, "full_attention": 16}],
    )
    kv_bytes_per_token_bf16: int | None = Field(
        description=(
            "Bytes each token adds to one sequence's KV cache with a bfloat16 cache, summed over "
            "the layers that store per-token keys/values (full tensor-parallel size 1; sliding "
            "windows and recurrent state are not included). Null only if the stored architecture "
            "cannot be read."
        ),
        examples=[131072],
    )
    max_position_embeddings: int | None = Field(
        description="Longest context the model was trained for, in tokens.", examples=[131072]
    )
    num_parameters: int | None = Field(description="Total parameters.", examples=[8_030_261_248])
    weight_bytes: int | None = Field(
        description="Bytes of the checkpoint's weights as loaded, when known.",
        examples=[16_060_522_496],
    )
    sources: list[str] = _model("sources")
    notes: str | None = _model("notes")
    origin: str = _model("origin")
    revision: int = _model("revision")
    created_at: datetime = _model("created_at")
    updated_at: datetime = _model("updated_at")


class ModelImport(BaseModel):
    """A Hugging Face `config.json`, turned into a catalog model."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {
                    "slug": "llama-3.1-8b-imported",
                    "hf_id": "meta-llama/Llama-3.1-8B",
                    "num_parameters": 8_030_261_248,
                    "dry_run": True,
                    "hf_config": {
                        "model_type": "llama",
                        "hidden_size": 4096,
                        "intermediate_size": 14336,
                        "max_position_embeddings": 131072,
                        "num_attention_heads": 32,
                        "num_hidden_layers": 32,
                        "num_key_value_heads": 8,
                        "torch_dtype": "bfloat16",
                        "vocab_size": 128256,
                    },
                }
            ]
        },
    )

    hf_config: dict[str, Any] = Field(
        description=(
            "The parsed `config.json` exactly as published on the Hub (multimodal configs with "
            "a nested `text_config` are fine). A key kvplan cannot interpret is a 422 whose "
            "`field` is `hf_config.<key>`."
        ),
        examples=[{"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32}],
    )
    slug: Slug | None = Field(
        None,
        description=_SLUG_DOC + " Defaults to one made from `hf_id` or `name`.",
        examples=["llama-3.1-8b"],
    )
    name: Name | None = _model("name", None)
    hf_id: Name | None = _model("hf_id", None)
    family: Label | None = Field(
        None,
        description="Architecture family; defaults to the config's `model_type`.",
        examples=["llama"],
    )
    num_parameters: int | None = Field(
        None,
        ge=1,
        le=MAX_PARAMETERS,
        description="Total parameters (config.json does not say); used for weight memory.",
        examples=[8_030_261_248],
    )
    weight_bytes: int | None = Field(
        None,
        ge=1,
        le=MAX_WEIGHT_BYTES,
        description="Exact bytes of the weights (e.g. the safetensors total), if known.",
        examples=[16_060_522_496],
    )
    # issue 21: what held-out logs showed is missing
    hf_quant_config: dict[str, Any] | None = Field(
        None,
        description="The `hf_quant_config.json` published beside `config.json` (ModelOpt up to "
        "0.29: NVFP4, FP8 checkpoints), read as vLLM reads it: the config's "
        "`quantization_config` when `config.json` has none. Its errors name "
        "`hf_quant_config.<key>`.",
    )
    dry_run: bool = Field(
        False,
        description="Only derive and return the spec (200); store nothing.",
        examples=[True],
    )
    sources: list[Source] = _model("sources", [], max_length=MAX_SOURCES)
    notes: Notes | None = _model("notes", None)


# ---------------------------------------------------------------------------------------------
# lists

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list, in slug order; follow `next` until it is null."""

    items: list[T] = Field(description="This page's entries, ordered by slug.")
    limit: int = Field(description="The page size asked for (default 50, at most 500).")
    next_cursor: str | None = Field(
        description="Opaque: pass as `cursor` for the next page; null on the last page.",
        examples=["bGxhbWEtMy4xLThi"],
    )
    next: str | None = Field(
        description="Relative URL of the next page (same filters); null on the last page.",
        examples=["/v1/models?limit=50&cursor=bGxhbWEtMy4xLThi"],
    )


class GpuPage(Page[GpuRead]):
    """A page of GPUs."""


class ModelPage(Page[ModelRead]):
    """A page of models."""
