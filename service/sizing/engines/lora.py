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

SGLang (read in the wheels 0.4.9 ... 0.5.23; milestones in calibration.py): ModelRunner.initialize
builds the LoRAManager (`maybe_init_lora_manager`) after load_model and before the KV pool is
sized, and the pool is what get_available_gpu_memory then finds free less the static reserve
(mem_cache/kv_cache_configurator.py `_profile_available_bytes`: "whatever is already resident
... is charged against it"), so the buffers come out of rest_memory. sglang/srt/lora/mem_pool.py
`LoRAMemoryPool.init_buffers` allocates, for every target module and each of the
num_hidden_layers, in the model's dtype, with `--max-loras-per-batch` slots (8 by default, the
base model's slot among them):

* get_lora_A_shape: (slots, rank x c, input), c = get_stacked_multiply (qkv_proj 3,
  gate_up_proj 2, else 1); a row-parallel module's (o_proj, down_proj) input is its TP share.
* get_lora_B_shape: (slots, output, rank); a column-parallel module's output is its TP share
  (qkv_proj `_column_parallel_lora_b_per_rank_dim`: q / tp + 2 x head_dim where the KV heads are
  fewer than the ranks, from 0.5.12).
* get_embedding_lora_A_shape / _B_shape (0.5.12 here): embed_tokens A (slots, rank, vocab), B
  (slots, hidden, rank); lm_head A (slots, rank, hidden), B (slots, the rank's vocabulary
  shard, rank).

Without --lora-paths SGLang needs --max-lora-rank and --lora-target-modules
(lora_manager.py `init_state`); kvplan reads no adapter, so it needs them always.
`--lora-target-modules` names are normalised as utils.py `get_normalized_target_modules` does
(q/k/v_proj -> qkv_proj, gate/up_proj -> gate_up_proj); `all` is utils.py
`auto_detect_lora_target_modules` plus embed_tokens and lm_head (0.5.12). The backend's batch
metadata is allocated with the CUDA graphs, inside the static reserve.
"""

from __future__ import annotations

from typing import Final

from ..errors import SizingError
from ..frozen import frozen
from ..model.architecture import FullAttention, ModelArchitecture, NoCache, SlidingWindowAttention
from ..model.dtypes import FloatDtype
from ..units import cdiv
from . import calibration as cal
from .common import BudgetLine, EngineOptions
from .sglang_dp import dp_attention_asked

DEFAULT_MAX_LORAS: Final = 1
DEFAULT_MAX_LORA_RANK: Final = 16
RANKS: Final = (1, 8, 16, 32, 64, 128, 256, 320, 512)
INT64_BYTES: Final = 8
INT32_BYTES: Final = 4
SGLANG_DEFAULT_MAX_LORAS_PER_BATCH: Final = 8  # ServerArgs.max_loras_per_batch
# utils.py get_normalized_target_modules, over the dense names of SUPPORTED_LORA_TARGET_MODULES
SGLANG_TARGETS: Final = {
    "q_proj": "qkv_proj",
    "k_proj": "qkv_proj",
    "v_proj": "qkv_proj",
    "qkv_proj": "qkv_proj",
    "o_proj": "o_proj",
    "gate_proj": "gate_up_proj",
    "up_proj": "gate_up_proj",
    "gate_up_proj": "gate_up_proj",
    "down_proj": "down_proj",
    "embed_tokens": "embed_tokens",
    "lm_head": "lm_head",
}
SGLANG_EMBEDDINGS: Final = frozenset({"embed_tokens", "lm_head"})
VOCAB_PADDING: Final = 64  # vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE


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
        if self.punica_bytes:
            parts += f"; punica metadata {self.punica_bytes:,} B"
        return BudgetLine(
            "lora_adapters",
            -self.bytes,
            f"{self.max_loras} LoRA slot(s) of rank {self.max_lora_rank} at "
            f"{self.element_bytes} B ({parts}), allocated with the model",
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


def _attention_geometry(
    arch: ModelArchitecture, experts: str = "vllm/lora/layers/fused_moe.py"
) -> tuple[int, int]:
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
            f"({experts}) are not modelled yet",
        )
    if found is None:
        raise SizingError("enable_lora", "the model has no attention layer to wrap")
    return found


def _refuse_flags_without_lora(options: EngineOptions) -> None:
    """The engines read the LoRA flags only with --enable-lora: giving them without it is a
    mistake kvplan names rather than answering as if they applied."""
    for name in (
        "max_loras",
        "max_lora_rank",
        "lora_dtype",
        "max_cpu_loras",
        "max_loras_per_batch",
        "lora_target_modules",
    ):
        if getattr(options, name) is not None:
            raise SizingError(name, "applies with enable_lora=true")
    if options.fully_sharded_loras:
        raise SizingError("fully_sharded_loras", "applies with enable_lora=true")


def refuse_lora(engine: str, options: EngineOptions) -> None:
    """Raise for LoRA flags given without --enable-lora, and where kvplan does not size LoRA:
    TensorRT-LLM's adapter pool."""
    if not options.enable_lora:
        _refuse_flags_without_lora(options)
    elif engine not in ("vllm", "sglang"):
        raise SizingError(
            "enable_lora",
            f"kvplan sizes vLLM's and SGLang's LoRA buffers; {engine}'s adapter pool is not "
            "modelled yet",
        )


def lora_flags(options: EngineOptions) -> list[str]:
    """The engine's own flags for the LoRA slots kvplan sized (none without --enable-lora)."""
    if not options.enable_lora:
        return []
    sglang = options.engine.value == "sglang"
    names = (
        ("max_loras_per_batch", "max_lora_rank")
        if sglang
        else ("max_loras", "max_lora_rank", "max_cpu_loras")
    )
    flags = ["--enable-lora"]
    for name in names:
        value = getattr(options, name)
        if value is not None:
            flags.append(f"--{name.replace('_', '-')} {value}")
    if sglang and options.lora_target_modules is not None:
        modules = " ".join(target_words(options.lora_target_modules))
        flags.append(f"--lora-target-modules {modules}")
    if options.lora_dtype is not None:
        flags.append(f"--lora-dtype {options.lora_dtype.value}")
    if options.fully_sharded_loras:
        flags.append("--fully-sharded-loras")
    return flags


# --- SGLang -------------------------------------------------------------------------------


def sglang_lora_buffers(
    arch: ModelArchitecture,
    options: EngineOptions,
    *,
    version: cal.SglangVersion,
    tensor_parallel_size: int,
) -> LoraBuffers | None:
    """SGLang's LoRAMemoryPool on one GPU (module docstring), or None without --enable-lora."""
    if not options.enable_lora:
        return None
    _refuse_sglang_lora(options, version)
    if options.max_lora_rank is None or options.lora_target_modules is None:
        missing = "max_lora_rank" if options.max_lora_rank is None else "lora_target_modules"
        raise SizingError(
            missing,
            "SGLang needs both --max-lora-rank and --lora-target-modules without --lora-paths "
            "(lora_manager.py init_state), and kvplan reads no adapter",
        )
    targets = sglang_target_modules(options.lora_target_modules, version)
    tp = tensor_parallel_size
    kv_heads, _ = _attention_geometry(arch, "sglang/srt/lora/mem_pool.py, its MoE buffers")
    if kv_heads < tp and version < cal.SGLANG_LORA_MODEL_TARGETS:
        raise SizingError(
            "lora_target_modules",
            f"{kv_heads} KV heads over {tp} ranks: SGLang before 0.5.12 splits qkv_proj's B "
            "without replicating KV heads, which kvplan does not size",
        )
    slots = options.max_loras_per_batch or SGLANG_DEFAULT_MAX_LORAS_PER_BATCH
    rank = options.max_lora_rank
    layers = arch.num_layers
    every = _dense_modules(arch, layers, loras=slots, rank=rank, tp=tp, fully_sharded=False)
    modules = tuple(
        _sglang_lm_head(m, arch, slots=slots, rank=rank, tp=tp) if m.name == "lm_head" else m
        for m in every
        if m.name in targets
    )
    return LoraBuffers(
        max_loras=slots,
        max_lora_rank=rank,
        element_bytes=arch.dtype.element_bytes,
        modules=modules,
        punica_bytes=0,
    )


def _refuse_sglang_lora(options: EngineOptions, version: cal.SglangVersion) -> None:
    """What kvplan does not size of SGLang's LoRA, by name."""
    if version < cal.SGLANG_LORA_POOL:
        raise SizingError(
            "enable_lora",
            "kvplan sizes SGLang's LoRA pool from 0.5.1 (0.4.10 stacked B as (c, slots, "
            "output, rank); before it the flags did not exist)",
        )
    for name in ("max_loras", "lora_dtype", "max_cpu_loras"):
        if getattr(options, name) is not None:
            raise SizingError(name, "applies to engine=vllm, not sglang")
    if options.fully_sharded_loras:
        raise SizingError("fully_sharded_loras", "applies to engine=vllm, not sglang")
    if options.speculative_config is not None:
        raise SizingError(
            "enable_lora",
            "kvplan sizes SGLang's LoRA pool without speculative decoding (the draft's "
            "runner and its LoRA limits are not modelled)",
        )
    if dp_attention_asked(options.sglang_parallel):
        raise SizingError(
            "enable_lora",
            "kvplan sizes SGLang's LoRA pool without DP attention (attention TP 1 per group "
            "is not modelled)",
        )


def target_words(text: str) -> list[str]:
    """--lora-target-modules' names: space- or comma-separated, or `;`-separated as a CSV
    cell gives a list (README "Spreadsheets")."""
    return text.replace(",", " ").replace(";", " ").split()


def sglang_target_modules(text: str, version: cal.SglangVersion) -> frozenset[str]:
    """--lora-target-modules' names as SGLang's normalised names."""
    names = target_words(text)
    if names == ["all"]:
        if version < cal.SGLANG_LORA_MODEL_TARGETS:
            raise SizingError(
                "lora_target_modules",
                "`all` before SGLang 0.5.12 was its whole SUPPORTED_LORA_TARGET_MODULES list "
                "less what the LoRA backend drops: give the modules by name",
            )
        return frozenset(SGLANG_TARGETS.values())
    if not names or "all" in names:
        raise SizingError("lora_target_modules", "give module names, or `all` alone")
    unknown = sorted(n for n in names if n not in SGLANG_TARGETS)
    if unknown:
        raise SizingError(
            "lora_target_modules",
            f"{', '.join(unknown)}: kvplan sizes {', '.join(SGLANG_TARGETS)} (dense decoders)",
        )
    targets = frozenset(SGLANG_TARGETS[n] for n in names)
    if targets & SGLANG_EMBEDDINGS and version < cal.SGLANG_LORA_MODEL_TARGETS:
        raise SizingError(
            "lora_target_modules",
            "kvplan sizes SGLang's embed_tokens and lm_head buffers from 0.5.12",
        )
    return targets


def _sglang_lm_head(
    module: LoraModule, arch: ModelArchitecture, *, slots: int, rank: int, tp: int
) -> LoraModule:
    """lm_head's B holds the rank's share of the vocabulary (utils.py
    get_lm_head_lora_b_shard_size: ParallelLMHead's shard_indices.num_org_elements, the
    vocabulary padded to 64 and split over the ranks; rank 0's, the largest)."""
    if tp == 1:
        return module
    vocab = arch.vocab_size
    assert vocab is not None  # _dense_modules refused a model without one
    shard = min(vocab, cdiv(cdiv(vocab, VOCAB_PADDING) * VOCAB_PADDING, tp))
    return LoraModule(module.name, 1, module.a_elements, slots * shard * rank)
