"""The engines' own names for what kvplan models, and the engine flags it does not model.

kvplan's fields take vLLM's engine-argument names (ARCHITECTURE.md, Naming). A caller who
reads its flags off an SGLang or TensorRT-LLM command line writes `context_length=8192`,
`tp_size=2` or `max_batch_size=64`: each such spelling is an alias of kvplan's field, read the
same way on every door (GET query parameters, POST JSON bodies, the columns of a table of
questions, and the CLI through `kvplan_name`). An alias maps only onto a quantity defined the
same way by its engine; a flag that changes the engine's memory in a way kvplan does not model
(SGLang's LoRA adapters read from --lora-paths, TensorRT-LLM's attention DP, a raw
--kv-transfer-config) is refused by name rather than sized as if it were absent. Any other
name is left alone: a GET ignores it (and says so, `answer_headers.IGNORED_HEADER`), a JSON
body refuses it as an unknown field.

Names are compared as written, and also as a command-line flag is spelt (`--tp-size` and
`tp-size` read as `tp_size`).

Sources: vLLM `vllm/engine/arg_utils.py` `EngineArgs.add_cli_args` (the short `-tp`, `-pp`,
`-dp`); SGLang `python/sglang/srt/server_args.py` `ServerArgs` (its field names; the
CLI flag is the field name with dashes); TensorRT-LLM `tensorrt_llm/commands/serve.py` `serve`
(trtllm-serve's `--tp_size`, `--pp_size`, `--max_batch_size`, `--max_num_tokens`,
`--max_seq_len`, `--kv_cache_free_gpu_memory_fraction`) and `tensorrt_llm/llmapi/llm_args.py`
`KvCacheConfig` (`tokens_per_block`, `enable_block_reuse`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .errors import InvalidRequest
from .security import READ_KEY_PARAMETER

# The read key may travel as a query parameter: used, not ignored.
_USED_UNDECLARED: Final = frozenset({READ_KEY_PARAMETER})


@dataclass(frozen=True, slots=True)
class Spelling:
    """An engine's name for a field kvplan has, defined the same way."""

    name: str  # the engine's spelling
    field: str  # kvplan's field (vLLM's engine-argument name)
    engine: str  # whose spelling, and its flag


SPELLINGS: Final[tuple[Spelling, ...]] = (
    # the context: SGLang ServerArgs.context_length ("the model's maximum context length");
    # TensorRT-LLM max_seq_len ("maximum total length of one request, prompt and output")
    Spelling("context_length", "max_model_len", "SGLang --context-length"),
    Spelling("max_seq_len", "max_model_len", "TensorRT-LLM --max_seq_len"),
    # the layout
    Spelling("tp", "tensor_parallel_size", "vLLM -tp"),
    Spelling("tp_size", "tensor_parallel_size", "SGLang --tp-size, TensorRT-LLM --tp_size"),
    Spelling("pp", "pipeline_parallel_size", "vLLM -pp"),
    Spelling("pp_size", "pipeline_parallel_size", "SGLang --pp-size, TensorRT-LLM --pp_size"),
    Spelling("dp", "data_parallel_size", "vLLM -dp"),
    # SGLang's dp_size without --enable-dp-attention is dp_size whole engine replicas
    # (DataParallelController), as vLLM's data_parallel_size; with it, it is refused below.
    Spelling("dp_size", "data_parallel_size", "SGLang --dp-size"),
    # the cap on running sequences (kvplan's max_num_seqs doc names all three)
    Spelling("max_running_requests", "max_num_seqs", "SGLang --max-running-requests"),
    Spelling("max_batch_size", "max_num_seqs", "TensorRT-LLM --max_batch_size"),
    # the scheduler's token budget per step: TensorRT-LLM max_num_tokens is what
    # sizing/engines/trtllm.py reads max_num_batched_tokens as. SGLang's chunked_prefill_size
    # is a prefill chunk only (decode tokens not counted) and sets SGLang's own reserve, which
    # kvplan derives from the GPU: it is refused below, not aliased.
    Spelling("max_num_tokens", "max_num_batched_tokens", "TensorRT-LLM --max_num_tokens"),
    # tokens per KV block or page
    Spelling("page_size", "block_size", "SGLang --page-size"),
    Spelling("tokens_per_block", "block_size", "TensorRT-LLM KvCacheConfig.tokens_per_block"),
    # memory fractions and a given pool
    Spelling(
        "kv_cache_free_gpu_memory_fraction",
        "free_gpu_memory_fraction",
        "TensorRT-LLM --kv_cache_free_gpu_memory_fraction",
    ),
    Spelling("kv_cache_memory_bytes", "kv_pool_bytes", "vLLM --kv-cache-memory-bytes"),
    # switches of the same sense
    Spelling("disable_cuda_graph", "enforce_eager", "SGLang --disable-cuda-graph"),
    Spelling(
        "enable_block_reuse",
        "enable_prefix_caching",
        "TensorRT-LLM KvCacheConfig.enable_block_reuse",
    ),
    # the weights' format: vLLM and SGLang --quantization (fp8, awq, gptq, modelopt_fp4,
    # mxfp4, ...), which sizing/model/dtypes.py normalize_weight_format reads. vLLM's short `-q` is
    # left out: `q` is too common a query parameter (a search box) to read as weights.
    Spelling("quantization", "weight_format", "vLLM -q/--quantization, SGLang --quantization"),
    # issue 21: expert parallelism and decode context parallelism (vLLM's short flags)
    Spelling("ep", "enable_expert_parallel", "vLLM -ep"),
    Spelling("dcp", "decode_context_parallel_size", "vLLM -dcp"),
    # issue 21: SGLang's DP attention and expert parallelism (server_args.py: args.ep_size =
    # args.expert_parallel_size); enable_dp_attention, attn_dp_size, ep_size,
    # ep_num_redundant_experts, enable_dp_lm_head and moe_dense_tp_size are fields as spelled
    Spelling("expert_parallel_size", "ep_size", "SGLang --expert-parallel-size"),
    # LMCache's own config names (lmcache/v1/config.py LMCacheEngineConfig; LMCACHE_<NAME> in
    # the environment, `lmcache.<name>` in vLLM's kv_connector_extra_config), defined as
    # kvplan's lmcache_* fields are (engines/lmcache.py)
    Spelling("max_local_cpu_size", "lmcache_max_local_cpu_size", "LMCache max_local_cpu_size"),
    Spelling("max_local_disk_size", "lmcache_max_local_disk_size", "LMCache max_local_disk_size"),
)


@dataclass(frozen=True, slots=True)
class Unmodelled:
    """An engine flag that changes the engine's memory in a way kvplan does not model yet."""

    name: str
    engine: str
    changes: str  # what it changes
    switch: bool = False  # a boolean flag: given false, it changes nothing (and is ignored)


# issue 21: vLLM's LoRA flags (enable_lora, max_loras, max_lora_rank, lora_dtype, max_cpu_loras,
# fully_sharded_loras), SGLang's (enable_lora, max_loras_per_batch, max_lora_rank,
# lora_target_modules), --speculative-config and SGLang's --speculative-* flags are fields now
# (engines/lora.py, engines/speculative.py); SGLang's --lora-paths (kvplan reads no adapter:
# give max_lora_rank and lora_target_modules) and TensorRT-LLM's LoRA stay refused.
_UNMODELLED: Final[tuple[Unmodelled, ...]] = (
    Unmodelled("lora_paths", "SGLang", "LoRA adapter memory read from the adapters"),
    Unmodelled("lora_config", "TensorRT-LLM", "LoRA adapter memory"),
    Unmodelled("moe_expert_parallel_size", "TensorRT-LLM", "the experts' weights per GPU"),
    Unmodelled("enable_attention_dp", "TensorRT-LLM", "attention's KV over ranks", switch=True),
    # SGLang 0.4's switch for DeepEP; kvplan reads DeepEP from 0.5.5's --moe-a2a-backend deepep
    Unmodelled(
        "enable_deepep_moe",
        "SGLang 0.4",
        "the all-to-all buffers (kvplan reads moe_a2a_backend=deepep, SGLang 0.5.5 on)",
        switch=True,
    ),
    Unmodelled("kv_transfer_config", "vLLM", "the KV cache's connector buffers"),
    Unmodelled("max_total_tokens", "SGLang", "the KV pool (in tokens, not bytes)"),
    Unmodelled("chunked_prefill_size", "SGLang", "the activation reserve (its default is derived)"),
    Unmodelled("max_prefill_tokens", "SGLang", "the prefill batch's activations"),
    Unmodelled("cuda_graph_max_bs", "SGLang", "the CUDA graphs' memory"),
    Unmodelled("cuda_graph_sizes", "vLLM", "the CUDA graphs' memory"),
    Unmodelled("max_cudagraph_capture_size", "vLLM", "the CUDA graphs' memory"),
    Unmodelled("compilation_config", "vLLM", "the CUDA graphs' memory"),
    Unmodelled("max_beam_width", "TensorRT-LLM", "KV per request (one copy per beam)"),
    Unmodelled("hf_overrides", "vLLM", "the model's geometry"),
    Unmodelled(
        "disable_radix_cache",
        "SGLang",
        "the recurrent state kept per request (give enable_prefix_caching=false instead)",
        switch=True,
    ),
)
UNMODELLED: Final[Mapping[str, Unmodelled]] = {flag.name: flag for flag in _UNMODELLED}
ALIASES: Final[Mapping[str, str]] = {s.name: s.field for s in SPELLINGS}
_FALSE: Final = frozenset({"false", "0", "no", "off", ""})


def flag_name(name: str) -> str:
    """A name as an engine's flag is spelt on its command line, read as a field name:
    `--tp-size` and `tp-size` are `tp_size`."""
    return name.lstrip("-").replace("-", "_")


def kvplan_name(name: str, fields: Collection[str]) -> str | None:
    """The field of `fields` that `name` gives: itself, an engine's spelling of one (or either
    spelt as a flag); None when it names none of them."""
    if name in fields:
        return name
    for spelt in (name, flag_name(name)):
        field = spelt if spelt in fields else ALIASES.get(spelt)
        if field is not None and field in fields:
            return field
    return None


def unmodelled(name: str) -> Unmodelled | None:
    """The engine flag kvplan does not model that `name` is, if any."""
    return UNMODELLED.get(name) or UNMODELLED.get(flag_name(name))


def _given_off(flag: Unmodelled, value: Any) -> bool:
    """A switch given as false (or 0): it changes nothing."""
    if not flag.switch:
        return False
    if isinstance(value, list):
        value = value[-1] if value else ""
    return value is False or value == 0 or str(value).strip().lower() in _FALSE


def refuse_unmodelled(name: str, value: Any) -> None:
    """A 422 naming `name` when it is an engine flag that changes memory kvplan does not model
    (and is not a switch given off)."""
    flag = unmodelled(name)
    if flag is not None and not _given_off(flag, value):
        raise InvalidRequest(
            f"{name}: {flag.engine} `{flag.name}` changes {flag.changes}, which kvplan does not "
            "model yet; remove it (kvplan would otherwise size a deployment without it)",
            field=name,
        )


def with_kvplan_names(values: Mapping[str, Any], fields: Collection[str]) -> dict[str, Any]:
    """`values` with every engine spelling renamed to kvplan's field. A 422 names both spellings
    when two give the same field, and names an unmodelled memory flag (`refuse_unmodelled`).
    Other names are kept as given, for the caller's own rule (ignored, or refused)."""
    renamed: dict[str, Any] = {}
    spelt: dict[str, str] = {}  # field -> the name that gave it
    for name, value in values.items():
        field = kvplan_name(name, fields)
        if field is None:
            refuse_unmodelled(name, value)
            renamed[name] = value
            continue
        first = spelt.setdefault(field, name)
        if first != name:
            raise InvalidRequest(f"{first} and {name} both give {field}: give it once", field=name)
        renamed[field] = value
    return renamed


def ignored(names: Iterable[str], fields: Collection[str]) -> tuple[str, ...]:
    """The names of a query that give no field (and are not the read key): what it ignores,
    each once, in the order given."""
    out: dict[str, None] = {}
    for name in names:
        if name not in _USED_UNDECLARED and kvplan_name(name, fields) is None:
            out[name] = None
    return tuple(out)


def known(name: str, fields: Collection[str]) -> bool:
    """Whether `name` is a field, an engine's spelling of one, or a flag kvplan refuses: none
    of these is a misspelling of a field."""
    return kvplan_name(name, fields) is not None or unmodelled(name) is not None
