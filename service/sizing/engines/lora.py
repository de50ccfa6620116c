"""LoRA: the adapters' stacked A/B buffers vLLM allocates on every GPU before the profile run.

Read in vLLM 0.33.0 (its wheel). GPUModelRunner.load_model wraps the model in a LoRA manager
(`load_lora_model`) inside the DeviceMemoryProfiler whose reading is "Model loading took", so
the buffers are held before determine_available_memory and the pool shrinks by them:

* vllm/lora/model_manager.py `_create_lora_modules`: every module whose name ends in one of the
  model's supported modules (vllm/lora/utils.py `get_supported_lora_modules`: every linear
  layer, and the `embedding_modules` the model declares: Llama's embed_tokens and lm_head) is
  wrapped, with `max_loras` slots (`lora_slots`).
* vllm/lora/layers/base_linear.py `create_lora_weights`, per slice (n_slices):
  lora_a_stacked (max_loras, 1, max_lora_rank, input_size) and lora_b_stacked
  (max_loras, 1, output_size, max_lora_rank), in lora_dtype. A column-parallel layer
  (column_parallel_linear.py: MergedQKVParallelLinearWithLoRA's q, k, v slices,
  MergedColumnParallelLinearWithLoRA's gate and up) reads the whole input and writes its TP
  share of each output; a row-parallel layer (row_parallel_linear.py: o_proj, down_proj) reads
  its TP share of the input (input_size_per_partition) and writes the whole output.
  `fully_sharded_loras` shards the column layers' A rank and the row layers' B output over TP.
* vllm/lora/layers/vocab_parallel_embedding.py: A (max_loras, org_vocab_size, rank), B
  (max_loras, 1, hidden, rank), whole vocabulary on every rank; logits_processor.py
  LogitsProcessorWithLoRA: A (max_loras, 1, rank, hidden), B (max_loras, 1, vocab, rank).
* vllm/lora/punica_wrapper/punica_base.py and punica_gpu.py: four int64 index vectors of
  max_num_batched_tokens, three int64 vectors of max_num_seqs (max_batches), and two
  LoRAKernelMeta (lora/ops/triton_ops/lora_kernel_metadata.py `make`: two int32 vectors of
  max_num_batched_tokens, and int32 vectors of max_loras + 1, max_loras + 1, max_loras + 2).
* vllm/config/lora.py LoRAConfig: max_loras 1, max_lora_rank 16 (1, 8, 16, 32, 64, 128, 256,
  320 or 512), lora_dtype auto = the model's dtype; max_cpu_loras is host memory only.

kvplan sizes the dense decoder layout (Llama, Qwen, Mistral: q/k/v, o, gate/up, down, the
embeddings and the head); MLA and mixture-of-experts layers (FusedMoEWithLoRA) are refused by
name until they are read.
"""

from __future__ import annotations

from typing import Final

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import FullAttention, ModelArchitecture, NoCache, SlidingWindowAttention
from ..model.dtypes import FloatDtype
from .common import BudgetLine, EngineOptions

DEFAULT_MAX_LORAS: Final = 1
DEFAULT_MAX_LORA_RANK: Final = 16
RANKS: Final = (1, 8, 16, 32, 64, 128, 256, 320, 512)
INT64_BYTES: Final = 8
INT32_BYTES: Final = 4


@frozen
class LoraModule:
    """One wrapped module's A and B buffers on one GPU, summed over its layers."""

    name: str
    layers: int
    a_elements: int  # per layer, all slices
    b_elements: int

    def bytes(self, element_bytes: int) -> int:
        return (self.a_elements + self.b_elements) * self.layers * element_bytes


@frozen
class LoraBuffers:
    """Everything `--enable-lora` holds on one GPU before the pool is sized."""

    max_loras: int
    max_lora_rank: int
    element_bytes: int
    modules: tuple[LoraModule, ...]
    punica_bytes: int

    @property
    def adapter_bytes(self) -> int:
        return sum(m.bytes(self.element_bytes) for m in self.modules)

    @property
    def bytes(self) -> int:
        return self.adapter_bytes + self.punica_bytes

    def budget_line(self) -> BudgetLine:
        parts = ", ".join(f"{m.name} {m.bytes(self.element_bytes):,} B" for m in self.modules)
        return BudgetLine(
            "lora_adapters",
            -self.bytes,
            f"{self.max_loras} LoRA slot(s) of rank {self.max_lora_rank} at "
            f"{self.element_bytes} B ({parts}; punica metadata {self.punica_bytes:,} B), "
            "allocated with the model",
        )


def vllm_lora_buffers(
    arch: ModelArchitecture,
    options: EngineOptions,
    *,
    num_layers: int | None = None,
    tensor_parallel_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
) -> LoraBuffers | None:
    """The LoRA buffers of one worker (module docstring), or None without --enable-lora.
    `num_layers`: the target's decoder layers where `arch` also holds a drafter's."""
    if not options.enable_lora:
        return None
    loras = options.max_loras or DEFAULT_MAX_LORAS
    rank = options.max_lora_rank or DEFAULT_MAX_LORA_RANK
    if rank not in RANKS:
        raise SizingError("max_lora_rank", f"vLLM takes one of {', '.join(map(str, RANKS))}")
    if options.max_cpu_loras is not None and options.max_cpu_loras < loras:
        raise SizingError(
            "max_cpu_loras", f"must be at least max_loras ({loras}), as vLLM requires"
        )
    element = _lora_element_bytes(arch, options.lora_dtype)
    tp = tensor_parallel_size
    if options.fully_sharded_loras and rank % tp:
        raise SizingError(
            "fully_sharded_loras", f"max_lora_rank {rank} does not divide over {tp} TP ranks"
        )
    layers = arch.num_layers if num_layers is None else num_layers
    modules = _dense_modules(
        arch, layers, loras=loras, rank=rank, tp=tp, fully_sharded=options.fully_sharded_loras
    )
    return LoraBuffers(
        max_loras=loras,
        max_lora_rank=rank,
        element_bytes=element,
        modules=modules,
        punica_bytes=punica_bytes(loras, max_num_batched_tokens, max_num_seqs),
    )


def punica_bytes(max_loras: int, max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """PunicaWrapperGPU's metadata (module docstring)."""
    tokens = max_num_batched_tokens
    base = 4 * tokens * INT64_BYTES + 3 * max_num_seqs * INT64_BYTES
    kernel_meta = 2 * tokens * INT32_BYTES + (3 * max_loras + 4) * INT32_BYTES
    return base + 2 * kernel_meta


def _lora_element_bytes(arch: ModelArchitecture, lora_dtype: FloatDtype | None) -> int:
    """LoRAConfig.verify_with_model_config: `auto` (None) is the model's dtype."""
    if lora_dtype is None:
        return arch.dtype.element_bytes
    dtype = lora_dtype
    if dtype not in (FloatDtype.FLOAT16, FloatDtype.BFLOAT16):
        raise SizingError("lora_dtype", "vLLM takes auto, float16 or bfloat16")
    return dtype.element_bytes


def _dense_modules(
    arch: ModelArchitecture, layers: int, *, loras: int, rank: int, tp: int, fully_sharded: bool
) -> tuple[LoraModule, ...]:
    """The wrapped modules of a dense decoder on one of `tp` ranks."""
    attention = _attention_geometry(arch)
    hidden, inter, vocab = arch.hidden_size, arch.intermediate_size, arch.vocab_size
    if hidden is None or inter is None or vocab is None:
        raise SizingError(
            "enable_lora",
            "LoRA buffers need the model's hidden_size, intermediate_size and vocab_size",
        )
    kv_heads, head_dim = attention
    q_out = arch.num_attention_heads * head_dim
    # QKVParallelLinear: kv heads shard over TP, replicated where fewer than the ranks
    kv_out = max(1, kv_heads // tp) * head_dim
    column_rank = rank // tp if fully_sharded else rank  # lora_a output of a column layer

    def row_b(output: int) -> int:
        return output // tp if fully_sharded else output

    return (
        # q, k and v slices: A (rank, hidden) each; B (TP share of each output, rank)
        LoraModule(
            "qkv_proj",
            layers,
            3 * loras * column_rank * hidden,
            loras * (q_out // tp + 2 * kv_out) * rank,
        ),
        # row-parallel: A (rank, TP share of the input), B (output, rank)
        LoraModule("o_proj", layers, loras * rank * (q_out // tp), loras * row_b(hidden) * rank),
        LoraModule(
            "gate_up_proj",
            layers,
            2 * loras * column_rank * hidden,
            2 * loras * (inter // tp) * rank,
        ),
        LoraModule("down_proj", layers, loras * rank * (inter // tp), loras * row_b(hidden) * rank),
        LoraModule("embed_tokens", 1, loras * vocab * rank, loras * hidden * rank),
        LoraModule("lm_head", 1, loras * rank * hidden, loras * vocab * rank),
    )


def _attention_geometry(arch: ModelArchitecture) -> tuple[int, int]:
    """(num_kv_heads, head_dim) of a dense decoder whose every layer is softmax attention."""
    found: tuple[int, int] | None = None
    for layer in arch.layers:
        if isinstance(layer, NoCache):
            continue
        if not isinstance(layer, FullAttention | SlidingWindowAttention) or (
            isinstance(layer, FullAttention) and layer.v_head_dim not in (None, layer.head_dim)
        ):
            raise SizingError(
                "enable_lora",
                f"kvplan sizes LoRA buffers for dense attention decoders; {layer.kind.value} "
                "layers are not modelled yet",
            )
        found = found or (layer.num_kv_heads, layer.head_dim)
    if arch.moe is not None:
        raise SizingError(
            "enable_lora",
            "kvplan sizes LoRA buffers for dense decoders; the experts' LoRA buffers "
            "(vllm/lora/layers/fused_moe.py) are not modelled yet",
        )
    if found is None:
        raise SizingError("enable_lora", "the model has no attention layer to wrap")
    return found


def _refuse_flags_without_lora(options: EngineOptions) -> None:
    """vLLM reads the LoRA flags only with --enable-lora: giving them without it is a mistake
    kvplan names rather than answering as if they applied."""
    for name in ("max_loras", "max_lora_rank", "lora_dtype", "max_cpu_loras"):
        if getattr(options, name) is not None:
            raise SizingError(name, "applies with enable_lora=true")
    if options.fully_sharded_loras:
        raise SizingError("fully_sharded_loras", "applies with enable_lora=true")


def refuse_lora(engine: str, options: EngineOptions) -> None:
    """Raise for LoRA flags given without --enable-lora, and where kvplan does not size LoRA:
    another engine's adapter pool."""
    if not options.enable_lora:
        _refuse_flags_without_lora(options)
    elif engine != "vllm":
        raise SizingError(
            "enable_lora",
            f"kvplan sizes vLLM's LoRA buffers only; {engine}'s adapter pool is not modelled yet",
        )


def lora_flags(options: EngineOptions) -> list[str]:
    """vLLM's flags for the LoRA slots kvplan sized (none without --enable-lora)."""
    if not options.enable_lora:
        return []
    flags = ["--enable-lora"]
    for name in ("max_loras", "max_lora_rank", "max_cpu_loras"):
        value = getattr(options, name)
        if value is not None:
            flags.append(f"--{name.replace('_', '-')} {value}")
    if options.lora_dtype is not None:
        flags.append(f"--lora-dtype {options.lora_dtype.value}")
    if options.fully_sharded_loras:
        flags.append("--fully-sharded-loras")
    return flags
