"""The lines kvplan recognises, what each captures, and in which unit the engine printed it.

Units are read from the engines' code, not from the label on the line:

* vLLM prints GiB (2^30) everywhere. The V1 worker divides by `GiB_bytes = 1 << 30`
  (vllm/utils/mem_constants.py) or rounds with `format_gib(b) = round(b / GiB_bytes, 2)`
  (vllm/utils/mem_utils.py); the V0 runner's "Loading model weights took X GB" and
  "Model loading took X GB" divide by `float(2**30)` (vllm/worker/model_runner.py
  `GPUModelRunnerBase.load_model`), so their "GB" is GiB too.
* SGLang's "GB" is GiB: `get_available_gpu_memory` returns `free / (1 << 30)`
  (python/sglang/srt/utils.py) and the KV pool divides by `GB = 1024 * 1024 * 1024`
  (python/sglang/srt/mem_cache/memory_pool.py).
* TensorRT-LLM prints GiB as `bytes / (1 << 30)` (cpp/tensorrt_llm/batch_manager/
  kvCacheManager.cpp), and its "MB"/"KB"/"GB" runtime-buffer figures come from
  `MemoryCounters::bytesToString`, which divides by 1024 per step
  (cpp/tensorrt_llm/runtime/memoryCounters.cpp), so they are MiB/KiB/GiB; TensorRT's own
  "[MemUsageChange] ... GPU 6683 (MiB)" is MiB.

Each pattern's `source` names the engine file and function that prints the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from .model import EngineName, ValueKind

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10

NUM = r"-?\d+(?:\.\d+)?"
INT = r"\d{1,3}(?:,\d{3})+|\d+"
# Every unit label these engines print means a binary unit: vLLM's and SGLang's "GB" are GiB
# (above), and TensorRT-LLM's MemoryCounters::bytesToString steps by 1024 ("B", "KB", "MB",
# "GB", "TB").
LABEL_BYTES: dict[str, int] = {
    "B": 1,
    "bytes": 1,
    "KB": KIB,
    "KiB": KIB,
    "MB": MIB,
    "MiB": MIB,
    "GB": GIB,
    "GiB": GIB,
    "Gib": GIB,
    "TB": 1 << 40,
    "TiB": 1 << 40,
}

Target = Literal["reported", "settings"]


@dataclass(frozen=True, slots=True)
class Capture:
    """One regex group and the field it fills."""

    group: str
    target: Target
    field: str
    kind: ValueKind
    unit_bytes: int = 1
    # A group holding the printed unit label ("MB", "GB"): LABEL_BYTES overrides `unit_bytes`.
    unit_group: str | None = None
    # The unit as the line labels it, when the label is not captured.
    label: str = ""


@dataclass(frozen=True, slots=True)
class KeySpec:
    """How one `key=value` item of a dumped config or argument list is read."""

    target: Target
    field: str
    kind: ValueKind
    unit_bytes: int = 1
    negate: bool = False


_SPECIAL = frozenset(".^$*+?{}[]|()\\")
_QUANTIFIERS = frozenset("?*{")
_GROUP_OPENERS = ("(?P<", "(?:", "(")


def required_literal(regex: re.Pattern[str], shortest: int = 4) -> str | None:
    """The longest run of plain characters every match of `regex` contains, or None.

    Read from the pattern's text: plain characters, escaped punctuation (`\\(`) as itself; an
    escape class (`\\d`), a class (`[...]`) or a group's edge ends a run; a character a
    quantifier may drop (`?`, `*`, `{m,n}`) is not in one; a group is read the same way
    unless a quantifier may drop it or it is a lookaround; a `|` means no run is required at
    that level. A run shorter than `shortest` is not worth a search.
    """
    if regex.flags & re.IGNORECASE:
        return None
    runs = _literal_runs(regex.pattern)
    best = max(runs, key=len, default="")
    return best if len(best) >= shortest else None


def _group_end(text: str, start: int) -> int:
    """The index just past the `)` closing the group opened at `start` (len(text) if none)."""
    depth, index = 0, start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _class_end(text, index)
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        index += 1
        if depth == 0:
            return index
    return len(text)


def _class_end(text: str, start: int) -> int:
    """The index just past the `]` closing the class opened at `start`."""
    index = start + 1
    if text[index : index + 1] == "^":
        index += 1
    if text[index : index + 1] == "]":
        index += 1
    while index < len(text) and text[index] != "]":
        index += 2 if text[index] == "\\" else 1
    return index + 1


def _literal_runs(text: str) -> list[str]:
    runs, run, index = [], "", 0
    while index < len(text):
        char, literal, inner = text[index], None, None
        if char == "\\" and index + 1 < len(text):
            literal = None if text[index + 1].isalnum() else text[index + 1]
            index += 2
        elif char == "[":
            index = _class_end(text, index)
        elif char == "(":
            end = _group_end(text, index)
            body = text[index : end - 1]
            if not body.startswith(("(?=", "(?!", "(?<=", "(?<!")):
                opener = next(o for o in _GROUP_OPENERS if body.startswith(o))
                inner = body[body.index(">") + 1 :] if opener == "(?P<" else body[len(opener) :]
            index = end
        elif char == "|":
            return []
        elif char not in _SPECIAL:
            literal, index = char, index + 1
        else:
            index += 1
        optional = index < len(text) and text[index] in _QUANTIFIERS
        if literal is not None and not optional:
            run += literal
            if index < len(text) and text[index] == "+":
                runs.append(run)
                run = ""
            continue
        runs.append(run)
        run = ""
        if inner is not None and not optional:
            runs.extend(_literal_runs(inner))
    runs.append(run)
    return runs


@dataclass(frozen=True, slots=True)
class LinePattern:
    name: str
    engine: EngineName
    regex: re.Pattern[str]
    captures: tuple[Capture, ...]
    source: str
    # Match the message (logger prefix removed) instead of the whole line.
    on_message: bool = False
    # When set, the group "items" holds a list of `key=value` (or `'key': value`) items.
    keys: tuple[tuple[str, KeySpec], ...] = ()
    # Text every line it matches contains (`required_literal`): a line without it is not tried.
    keyword: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keyword", required_literal(self.regex))


def _gib(group: str, field: str, label: str = "GiB") -> Capture:
    return Capture(group, "reported", field, "bytes", GIB, label=label)


def _mib(group: str, field: str, label: str = "MiB") -> Capture:
    return Capture(group, "reported", field, "bytes", MIB, label=label)


def _bytes(group: str, field: str) -> Capture:
    return Capture(group, "reported", field, "bytes", 1, label="bytes")


def _count(group: str, field: str) -> Capture:
    return Capture(group, "reported", field, "count")


def _number(group: str, field: str) -> Capture:
    return Capture(group, "reported", field, "number")


def _setting(group: str, field: str, kind: ValueKind) -> Capture:
    return Capture(group, "settings", field, kind)


def _p(
    name: str,
    engine: EngineName,
    regex: str,
    captures: tuple[Capture, ...],
    source: str,
    *,
    on_message: bool = False,
    keys: tuple[tuple[str, KeySpec], ...] = (),
) -> LinePattern:
    return LinePattern(name, engine, re.compile(regex), captures, source, on_message, keys)


def _k(
    target: Target, field: str, kind: ValueKind, unit_bytes: int = 1, *, negate: bool = False
) -> KeySpec:
    return KeySpec(target, field, kind, unit_bytes, negate)


_VLLM_ARGS: tuple[tuple[str, KeySpec], ...] = (
    ("model", _k("settings", "model", "text")),
    ("dtype", _k("settings", "dtype", "text")),
    ("quantization", _k("settings", "quantization", "text")),
    ("tensor_parallel_size", _k("settings", "tensor_parallel_size", "count")),
    ("pipeline_parallel_size", _k("settings", "pipeline_parallel_size", "count")),
    ("data_parallel_size", _k("settings", "data_parallel_size", "count")),
    ("max_model_len", _k("settings", "max_model_len", "count")),
    ("max_seq_len", _k("settings", "max_model_len", "count")),
    ("gpu_memory_utilization", _k("settings", "gpu_memory_utilization", "number")),
    ("kv_cache_memory_bytes", _k("settings", "kv_cache_memory_bytes", "count")),
    ("kv_cache_dtype", _k("settings", "kv_cache_dtype", "text")),
    ("block_size", _k("settings", "block_size", "count")),
    ("max_num_batched_tokens", _k("settings", "max_num_batched_tokens", "count")),
    ("max_num_seqs", _k("settings", "max_num_seqs", "count")),
    ("enable_prefix_caching", _k("settings", "enable_prefix_caching", "flag")),
    ("enforce_eager", _k("settings", "enforce_eager", "flag")),
    ("disable_custom_all_reduce", _k("settings", "disable_custom_all_reduce", "flag")),
    # issue 21
    ("enable_expert_parallel", _k("settings", "enable_expert_parallel", "flag")),
    ("decode_context_parallel_size", _k("settings", "decode_context_parallel_size", "count")),
    ("all2all_backend", _k("settings", "all2all_backend", "text")),
)

_SGLANG_ARGS: tuple[tuple[str, KeySpec], ...] = (
    ("model_path", _k("settings", "model", "text")),
    ("dtype", _k("settings", "dtype", "text")),
    ("quantization", _k("settings", "quantization", "text")),
    ("tp_size", _k("settings", "tensor_parallel_size", "count")),
    ("pp_size", _k("settings", "pipeline_parallel_size", "count")),
    ("dp_size", _k("settings", "data_parallel_size", "count")),
    ("context_length", _k("settings", "max_model_len", "count")),
    ("mem_fraction_static", _k("settings", "mem_fraction_static", "number")),
    ("kv_cache_dtype", _k("settings", "kv_cache_dtype", "text")),
    ("page_size", _k("settings", "block_size", "count")),
    ("chunked_prefill_size", _k("settings", "chunked_prefill_size", "count")),
    ("max_prefill_tokens", _k("settings", "max_prefill_tokens", "count")),
    ("max_running_requests", _k("settings", "max_num_seqs", "count")),
    ("max_total_tokens", _k("settings", "max_total_tokens", "count")),
    ("disable_radix_cache", _k("settings", "enable_prefix_caching", "flag", negate=True)),
    ("disable_cuda_graph", _k("settings", "enforce_eager", "flag")),
    # issue 21: DP attention and expert parallelism (sizing/engines/sglang_dp.py)
    ("enable_dp_attention", _k("settings", "enable_dp_attention", "flag")),
    ("attn_dp_size", _k("settings", "attn_dp_size", "count")),
    ("ep_size", _k("settings", "ep_size", "count")),
    ("ep_num_redundant_experts", _k("settings", "ep_num_redundant_experts", "count")),
    ("enable_dp_lm_head", _k("settings", "enable_dp_lm_head", "flag")),
    ("moe_a2a_backend", _k("settings", "moe_a2a_backend", "text")),
    ("deepep_mode", _k("settings", "deepep_mode", "text")),
)

# What the scheduler prints once the pool exists (python/sglang/srt/managers/scheduler.py,
# Scheduler.__init__): computed figures, not flags, except the echoed ones.
_SGLANG_READY: tuple[tuple[str, KeySpec], ...] = (
    ("max_total_num_tokens", _k("reported", "max_total_num_tokens", "count")),
    ("chunked_prefill_size", _k("settings", "chunked_prefill_size", "count")),
    ("max_prefill_tokens", _k("settings", "max_prefill_tokens", "count")),
    ("max_running_requests", _k("reported", "max_running_requests", "count")),
    ("context_len", _k("settings", "max_model_len", "count")),
    ("available_gpu_mem", _k("reported", "free_after_startup_bytes", "bytes", GIB)),
)

# vLLM MemorySnapshot.__repr__ (vllm/utils/mem_utils.py), format_gib: GiB.
_VLLM_SNAPSHOT: tuple[tuple[str, KeySpec], ...] = (
    ("free_memory", _k("reported", "free_memory_at_start_bytes", "bytes", GIB)),
    ("total_memory", _k("reported", "total_memory_bytes", "bytes", GIB)),
    ("cuda_memory", _k("reported", "startup_cuda_memory_bytes", "bytes", GIB)),
    ("torch_memory", _k("reported", "startup_torch_memory_bytes", "bytes", GIB)),
    ("non_torch_memory", _k("reported", "startup_non_torch_bytes", "bytes", GIB)),
)

# vllm/worker/worker.py Worker.determine_num_available_blocks (v0.6.4 one-line form):
# every figure divided by 1024**3.
_VLLM_V0_RESULTS: tuple[tuple[str, KeySpec], ...] = (
    ("total_gpu_memory", _k("reported", "total_memory_bytes", "bytes", GIB)),
    ("initial_memory_usage", _k("reported", "memory_in_use_before_profile_bytes", "bytes", GIB)),
    ("peak_torch_memory", _k("reported", "peak_torch_memory_bytes", "bytes", GIB)),
    (
        "memory_usage_post_profile",
        _k("reported", "memory_in_use_after_profile_bytes", "bytes", GIB),
    ),
    ("non_torch_memory", _k("reported", "non_torch_bytes", "bytes", GIB)),
    ("kv_cache_size", _k("reported", "kv_pool_bytes", "bytes", GIB)),
    ("gpu_memory_utilization", _k("settings", "gpu_memory_utilization", "number")),
)

_TRT_SERVE: tuple[tuple[str, KeySpec], ...] = (
    ("max_seq_len", _k("settings", "max_model_len", "count")),
    ("max_num_requests", _k("settings", "max_num_seqs", "count")),
    ("max_num_tokens", _k("settings", "max_num_batched_tokens", "count")),
)

_WORKER = "vllm/v1/worker/gpu_worker.py Worker"
_RUNNER = "vllm/v1/worker/gpu_model_runner.py GPUModelRunner"
_KV_UTILS = "vllm/v1/core/kv_cache_utils.py"
_V0_WORKER = "vllm/worker/worker.py Worker.determine_num_available_blocks"
_SGL_RUNNER = "python/sglang/srt/model_executor/model_runner.py ModelRunner"
_TRT_KV = "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp"
_TRT_MODEL = "cpp/tensorrt_llm/batch_manager/trtGptModelInflightBatching.cpp"

PATTERNS: tuple[LinePattern, ...] = (
    # ---------------------------------------------------------------- vLLM: settings
    _p(
        "vllm_non_default_args",
        "vllm",
        r"non-default args: \{(?P<items>.*?)\}?\s*$",
        (),
        "vllm/entrypoints/utils.py log_non_default_args: the CLI flags that differ from defaults",
        keys=_VLLM_ARGS,
    ),
    _p(
        "vllm_args_namespace",
        "vllm",
        r"args: Namespace\((?P<items>.*?)\)?\s*$",
        (),
        "vllm/entrypoints/openai/api_server.py run_server (V0 era): every flag, defaults too",
        keys=_VLLM_ARGS,
    ),
    _p(
        "vllm_engine_config",
        "vllm",
        r"Initializing an? (?:V[01] )?LLM engine \(v[^)\s]+\) with config: (?P<items>.*)",
        (),
        "vllm/v1/engine/core.py EngineCore.__init__ (V0: vllm/engine/llm_engine.py LLMEngine):"
        " VllmConfig.__str__ (vllm/config/vllm.py), max_seq_len is max_model_len",
        keys=_VLLM_ARGS,
    ),
    _p(
        "vllm_chunked_prefill",
        "vllm",
        r"Chunked prefill is enabled with max_num_batched_tokens=(?P<t>\d+)",
        (_setting("t", "max_num_batched_tokens", "count"),),
        "vllm/config/scheduler.py SchedulerConfig",
    ),
    _p(
        "vllm_raise_batched_tokens",
        "vllm",
        r"Raising max_num_batched_tokens from \d+ to (?P<t>\d+)",
        (_setting("t", "max_num_batched_tokens", "count"),),
        "vllm/engine/arg_utils.py EngineArgs (multimodal prefix-LM budget)",
    ),
    _p(
        "vllm_max_model_len",
        "vllm",
        r"Using max model len (?P<m>\d+)",
        (_setting("m", "max_model_len", "count"),),
        "vllm/config/model.py ModelConfig (the resolved max_model_len)",
    ),
    _p(
        "vllm_forced_block_size",
        "vllm",
        r"Forcing kv cache block size to (?P<b>\d+)",
        (_setting("b", "block_size", "count"),),
        "vllm/platforms/cuda.py check_and_update_config (MLA backends)",
    ),
    _p(
        "vllm_max_num_scheduled_tokens",
        "vllm",
        r"max_num_scheduled_tokens is set to (?P<t>\d+)",
        (_count("t", "max_num_scheduled_tokens"),),
        "vllm/config/vllm.py VllmConfig (speculative decoding token budget)",
    ),
    # ---------------------------------------------------------------- vLLM: weights
    _p(
        "vllm_model_loading",
        "vllm",
        r"(?:Loading model weights|Model loading) took (?P<w>" + NUM + r") ?(?P<unit>GiB|GB)\b",
        (Capture("w", "reported", "model_loading_bytes", "bytes", GIB, unit_group="unit"),),
        f"{_RUNNER}.load_model: model_memory_usage / GiB_bytes ('%.4f GiB', later format_gib);"
        " V0 vllm/worker/model_runner.py GPUModelRunnerBase.load_model divides by float(2**30)"
        " and labels it 'GB': GiB either way",
    ),
    # ---------------------------------------------------------------- vLLM V1: the profile
    _p(
        "vllm_init_snapshot",
        "vllm",
        r"memory snapshot: (?P<items>.*)",
        (),
        f"{_WORKER}.init_device: MemorySnapshot.__repr__ (vllm/utils/mem_utils.py), format_gib",
        keys=_VLLM_SNAPSHOT,
    ),
    _p(
        "vllm_requested_memory",
        "vllm",
        r"worker requested memory: (?P<r>" + NUM + r") ?GiB",
        (_gib("r", "requested_memory_bytes"),),
        f"{_WORKER}.init_device: format_gib(requested_memory)",
    ),
    _p(
        "vllm_initial_free",
        "vllm",
        r"Initial free memory: (?P<f>" + NUM + r") GiB; Requested memory: (?P<u>" + NUM + r")"
        r" \(util\), (?P<r>" + NUM + r") GiB",
        (
            _gib("f", "free_memory_at_start_bytes"),
            _setting("u", "gpu_memory_utilization", "number"),
            _gib("r", "requested_memory_bytes"),
        ),
        f"{_WORKER}.determine_available_memory: init_snapshot.free_memory, requested_memory",
    ),
    _p(
        "vllm_free_after_profiling",
        "vllm",
        r"Free memory after profiling: (?P<t>" + NUM + r") GiB \(total\), (?P<w>" + NUM + r")"
        r" GiB \(within requested\)",
        (
            _gib("t", "free_after_profiling_bytes"),
            _gib("w", "free_after_profiling_within_requested_bytes"),
        ),
        f"{_WORKER}.determine_available_memory",
    ),
    _p(
        "vllm_profiling_seconds",
        "vllm",
        r"Memory profiling takes (?P<s>" + NUM + r") seconds",
        (_number("s", "profiling_seconds"),),
        "vllm/utils/mem_utils.py MemoryProfilingResult.__repr__ (V0: " + _V0_WORKER + ")",
    ),
    _p(
        "vllm_non_kv_total",
        "vllm",
        r"Total non KV cache memory: (?P<x>" + NUM + r") ?GiB",
        (_gib("x", "non_kv_cache_bytes"),),
        "vllm/utils/mem_utils.py MemoryProfilingResult.__repr__: format_gib",
    ),
    _p(
        "vllm_torch_peak_increase",
        "vllm",
        r"torch peak memory increase: (?P<x>" + NUM + r") ?GiB",
        (_gib("x", "activation_peak_bytes"),),
        "vllm/utils/mem_utils.py MemoryProfilingResult.__repr__: format_gib",
    ),
    _p(
        "vllm_non_torch_increase",
        "vllm",
        r"non-torch forward increase memory: (?P<x>" + NUM + r") ?GiB",
        (_gib("x", "non_torch_bytes"),),
        "vllm/utils/mem_utils.py MemoryProfilingResult.__repr__: format_gib",
    ),
    _p(
        "vllm_weights_memory",
        "vllm",
        r"; weights memory: (?P<x>" + NUM + r") ?GiB",
        (_gib("x", "weights_bytes"),),
        "vllm/utils/mem_utils.py MemoryProfilingResult.__repr__: format_gib",
    ),
    _p(
        "vllm_available_kv",
        "vllm",
        r"Available KV cache memory: (?P<kv>" + NUM + r") ?GiB",
        (_gib("kv", "kv_pool_bytes"),),
        f"{_WORKER}.determine_available_memory: '%.2f GiB' of bytes / GiB_bytes, later"
        " format_gib; logged per worker",
    ),
    _p(
        "vllm_kv_too_small",
        "vllm",
        r"larger than the available KV cache memory \((?P<kv>" + NUM + r") GiB\)",
        (_gib("kv", "kv_pool_bytes"),),
        f"{_KV_UTILS} check_enough_kv_cache_memory: available_memory / GiB_bytes",
    ),
    _p(
        "vllm_kv_needed",
        "vllm",
        r"max seq len \((?P<m>" + INT + r")\), \(?(?P<need>" + NUM + r") GiB KV cache is needed",
        (
            _setting("m", "max_model_len", "count"),
            _gib("need", "kv_needed_for_max_model_len_bytes"),
        ),
        f"{_KV_UTILS} check_enough_kv_cache_memory: needed_memory / GiB_bytes",
    ),
    _p(
        "vllm_estimated_max_model_len",
        "vllm",
        r"estimated maximum model length is (?P<m>" + INT + r")",
        (_count("m", "estimated_max_model_len"),),
        f"{_KV_UTILS} check_enough_kv_cache_memory",
    ),
    _p(
        "vllm_cudagraph_util_hint",
        "vllm",
        r"--gpu-memory-utilization from (?P<u>" + NUM + r") to (?P<s>" + NUM + r")",
        (
            _setting("u", "gpu_memory_utilization", "number"),
            _number("s", "gpu_memory_utilization_suggested"),
        ),
        f"{_WORKER}.determine_available_memory: util + cudagraph estimate / total ('%.4f')",
    ),
    _p(
        "vllm_cudagraph_util_equivalent",
        "vllm",
        r"The current --gpu-memory-utilization=(?P<u>" + NUM + r") is equivalent to"
        r" --gpu-memory-utilization=(?P<e>" + NUM + r") without CUDA graph memory profiling",
        (
            _setting("u", "gpu_memory_utilization", "number"),
            _number("e", "gpu_memory_utilization_without_cudagraph_estimate"),
        ),
        f"{_WORKER}.determine_available_memory (CUDA-graph estimate on, v0.21+)",
    ),
    _p(
        "vllm_cudagraph_util_increase",
        "vllm",
        r"increase --gpu-memory-utilization to (?P<s>" + NUM + r")",
        (_number("s", "gpu_memory_utilization_suggested"),),
        f"{_WORKER}.determine_available_memory (CUDA-graph estimate on, v0.21+)",
    ),
    # ---------------------------------------------------------------- vLLM: KV config
    _p(
        "vllm_gpu_blocks",
        "vllm",
        r"(?:#\s*)?(?:GPU|CUDA|cuda) blocks: (?P<b>\d+)",
        (_count("b", "num_gpu_blocks"),),
        "V0 vllm/executor/executor_base.py ExecutorBase.initialize_cache ('# %s blocks',"
        f" device name); first V1 (v0.7.0) {_KV_UTILS}",
    ),
    _p(
        "vllm_cpu_blocks",
        "vllm",
        r"# CPU blocks: (?P<b>\d+)",
        (_count("b", "num_cpu_blocks"),),
        "V0 vllm/executor/executor_base.py ExecutorBase.initialize_cache",
    ),
    _p(
        "vllm_num_gpu_blocks_info",
        "vllm",
        r"initialization after num_gpu_blocks is: (?P<b>\d+)",
        (_count("b", "num_gpu_blocks"),),
        "vllm/v1/metrics/loggers.py log_engine_initialized (cache_config_info)",
    ),
    _p(
        "vllm_kv_cache_tokens",
        "vllm",
        r"GPU KV cache size: (?P<t>" + INT + r") tokens",
        (_count("t", "kv_cache_tokens"),),
        f"{_KV_UTILS} get_kv_cache_config / _report_kv_cache_config",
    ),
    _p(
        "vllm_max_concurrency",
        "vllm",
        r"Maximum concurrency for (?P<m>" + INT + r") tokens per request: (?P<c>" + NUM + r")x",
        (_count("m", "max_concurrency_tokens"), _number("c", "max_concurrency")),
        f"{_KV_UTILS} (V0: vllm/executor/executor_base.py initialize_cache), '%.2fx'",
    ),
    _p(
        "vllm_v0_kv_tokens",
        "vllm",
        r"max seq len \((?P<m>\d+)\) is larger than the maximum number of tokens that can be"
        r" stored in KV cache \((?P<t>\d+)\)",
        (_setting("m", "max_model_len", "count"), _count("t", "kv_cache_tokens")),
        "vllm/worker/worker.py raise_if_cache_size_invalid: block_size x num_gpu_blocks",
    ),
    _p(
        "vllm_kv_padding_layers",
        "vllm",
        r"Add (?P<n>\d+) padding layers, may waste at most (?P<p>" + NUM + r")%",
        (_count("n", "kv_padding_layers"), _number("p", "kv_padding_max_waste_pct")),
        f"{_KV_UTILS} _get_kv_cache_groups_uniform_page_size",
    ),
    _p(
        "vllm_attention_block_size",
        "vllm",
        r"Setting attention block size to (?P<b>\d+) tokens",
        (_count("b", "attention_block_size_tokens"),),
        "vllm/model_executor/models/config.py HybridAttentionMambaModelConfig",
    ),
    _p(
        "vllm_mamba_page_padding",
        "vllm",
        r"Padding mamba page size by (?P<p>" + NUM + r")%",
        (_number("p", "mamba_page_padding_pct"),),
        "vllm/model_executor/models/config.py HybridAttentionMambaModelConfig",
    ),
    # ---------------------------------------------------------------- vLLM: CUDA graphs
    _p(
        "vllm_cudagraph_estimate",
        "vllm",
        r"Estimated CUDA graph memory: (?P<g>" + NUM + r") GiB total",
        (_gib("g", "cudagraph_estimate_bytes"),),
        f"{_RUNNER}.profile_cudagraph_memory: total_estimate / (1 << 30)",
    ),
    _p(
        "vllm_graph_capture",
        "vllm",
        r"Graph capturing finished in \d+ secs?, took (?P<g>" + NUM + r") GiB",
        (_gib("g", "cudagraph_bytes"),),
        f"{_RUNNER}.capture_model: cuda_graph_size / (1 << 30)",
    ),
    _p(
        "vllm_cudagraph_pool",
        "vllm",
        r"CUDA graph pool memory: (?P<a>" + NUM + r") GiB \(actual\), (?P<e>" + NUM + r") GiB"
        r" \(estimated\)",
        (_gib("a", "cudagraph_bytes"), _gib("e", "cudagraph_estimate_bytes")),
        f"{_WORKER}.compile_or_warm_up_model: round(b / GiB_bytes, 2)",
    ),
    # ---------------------------------------------------------------- vLLM: the summary
    _p(
        "vllm_startup_free_total",
        "vllm",
        r"Free memory on device \((?P<f>" + NUM + r")/(?P<t>" + NUM + r") GiB\) on startup",
        (_gib("f", "free_memory_at_start_bytes"), _gib("t", "total_memory_bytes")),
        f"{_WORKER}.compile_or_warm_up_model and init_device (the start-up check): format_gib",
    ),
    _p(
        "vllm_desired_util",
        "vllm",
        r"[Dd]esired GPU memory utilization(?: is)? \((?P<u>" + NUM + r"), (?P<r>" + NUM + r")"
        r" GiB\)",
        (
            _setting("u", "gpu_memory_utilization", "number"),
            _gib("r", "requested_memory_bytes"),
        ),
        f"{_WORKER}.compile_or_warm_up_model and init_device: format_gib(requested_memory)",
    ),
    _p(
        "vllm_actual_usage",
        "vllm",
        r"Actual usage is (?P<w>" + NUM + r") GiB for weight, (?P<a>" + NUM + r") GiB for peak"
        r" activation, (?P<n>" + NUM + r") GiB for non-torch memory, and (?P<g>" + NUM + r")"
        r" GiB for CUDAGraph memory",
        (
            _gib("w", "weights_bytes"),
            _gib("a", "activation_peak_bytes"),
            _gib("n", "non_torch_bytes"),
            _gib("g", "cudagraph_bytes"),
        ),
        f"{_WORKER}.compile_or_warm_up_model: format_gib",
    ),
    _p(
        "vllm_kv_memory_to_fit",
        "vllm",
        r"--kv-cache-memory=(?P<b>-?\d+)`?(?: \([^)]*\))? to fit into requested memory",
        (_bytes("b", "kv_cache_memory_to_fit_requested_bytes"),),
        f"{_WORKER}.compile_or_warm_up_model: bytes",
    ),
    _p(
        "vllm_kv_memory_to_fill",
        "vllm",
        r"--kv-cache-memory=(?P<b>-?\d+)`?(?: \([^)]*\))? to fully utilize gpu memory",
        (_bytes("b", "kv_cache_memory_to_fully_utilize_bytes"),),
        f"{_WORKER}.compile_or_warm_up_model: bytes",
    ),
    _p(
        "vllm_kv_in_use_bytes",
        "vllm",
        r"Current kv cache memory in use is (?P<b>\d+) bytes",
        (_bytes("b", "kv_cache_in_use_bytes"),),
        f"{_WORKER}.compile_or_warm_up_model (v0.10-v0.11: bytes)",
    ),
    _p(
        "vllm_kv_in_use_gib",
        "vllm",
        r"Current kv cache memory in use is (?P<g>" + NUM + r") GiB",
        (_gib("g", "kv_cache_in_use_bytes"),),
        f"{_WORKER}.compile_or_warm_up_model (later: format_gib)",
    ),
    # ---------------------------------------------------------------- vLLM V0: the profile
    _p(
        "vllm_v0_profiling_results",
        "vllm",
        r"Memory profiling results: (?P<items>\S+=.*)",
        (),
        f"{_V0_WORKER} (v0.6.4): every figure / (1024**3)",
        keys=_VLLM_V0_RESULTS,
    ),
    _p(
        "vllm_v0_instance_can_use",
        "vllm",
        r"the current vLLM instance can use total_gpu_memory \((?P<t>" + NUM + r") ?GiB\) x"
        r" gpu_memory_utilization \((?P<u>" + NUM + r")\) = (?P<r>" + NUM + r") ?GiB",
        (
            _gib("t", "total_memory_bytes"),
            _setting("u", "gpu_memory_utilization", "number"),
            _gib("r", "requested_memory_bytes"),
        ),
        f"{_V0_WORKER}: / GiB_bytes",
    ),
    _p(
        "vllm_v0_budget",
        "vllm",
        r"model weights take (?P<w>" + NUM + r") ?GiB; non_torch_memory takes (?P<n>" + NUM + r")"
        r" ?GiB; PyTorch activation peak memory takes (?P<a>" + NUM + r") ?GiB; the rest of the"
        r" memory reserved for KV Cache is (?P<kv>" + NUM + r") ?GiB",
        (
            _gib("w", "weights_bytes"),
            _gib("n", "non_torch_bytes"),
            _gib("a", "activation_peak_bytes"),
            _gib("kv", "kv_pool_bytes"),
        ),
        f"{_V0_WORKER}: / GiB_bytes",
    ),
    # The transitional multi-line table (vLLM PR #10511, Dec 2024 main): one figure a line.
    _p(
        "vllm_v0_table_duration",
        "vllm",
        r"^duration\s+(?P<s>" + NUM + r") seconds$",
        (_number("s", "profiling_seconds"),),
        f"{_V0_WORKER} (Dec 2024 table form)",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_total",
        "vllm",
        r"^total_gpu_memory\s+(?P<t>" + NUM + r") ?GiB$",
        (_gib("t", "total_memory_bytes"),),
        f"{_V0_WORKER} (Dec 2024 table form): / GiB_bytes",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_util",
        "vllm",
        r"^gpu_memory_utilization\s+(?P<u>" + NUM + r")$",
        (_setting("u", "gpu_memory_utilization", "number"),),
        f"{_V0_WORKER} (Dec 2024 table form)",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_requested",
        "vllm",
        r"^the current vLLM instance can use\s+(?P<r>" + NUM + r") ?GiB$",
        (_gib("r", "requested_memory_bytes"),),
        f"{_V0_WORKER} (Dec 2024 table form): / GiB_bytes",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_weights",
        "vllm",
        r"^model weights take\s+(?P<w>" + NUM + r") ?GiB$",
        (_gib("w", "weights_bytes"),),
        f"{_V0_WORKER} (Dec 2024 table form): / GiB_bytes",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_non_torch",
        "vllm",
        r"^non_torch_memory\s+(?P<n>" + NUM + r") ?GiB$",
        (_gib("n", "non_torch_bytes"),),
        f"{_V0_WORKER} (Dec 2024 table form): / GiB_bytes",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_activation",
        "vllm",
        r"^PyTorch activation peak memory\s+(?P<a>" + NUM + r") ?GiB$",
        (_gib("a", "activation_peak_bytes"),),
        f"{_V0_WORKER} (Dec 2024 table form): / GiB_bytes",
        on_message=True,
    ),
    _p(
        "vllm_v0_table_kv",
        "vllm",
        r"^available_kv_cache_memory\s+(?P<kv>" + NUM + r") ?GiB$",
        (_gib("kv", "kv_pool_bytes"),),
        f"{_V0_WORKER} (Dec 2024 table form): / GiB_bytes",
        on_message=True,
    ),
    # ---------------------------------------------------------------- SGLang
    _p(
        "sglang_server_args",
        "sglang",
        r"server_args=ServerArgs\((?P<items>.*?)\)?\s*$",
        (),
        "python/sglang/launch_server.py / srt/server_args.py ServerArgs (the dataclass repr)",
        keys=_SGLANG_ARGS,
    ),
    _p(
        "sglang_distributed_init",
        "sglang",
        r"Init torch distributed ends\. mem usage=(?P<m>" + NUM + r") GB",
        (_gib("m", "distributed_init_bytes", "GB"),),
        f"{_SGL_RUNNER}.init_torch_distributed: get_available_gpu_memory, GiB",
    ),
    _p(
        "sglang_load_begin",
        "sglang",
        r"Load weight begin\. avail mem=(?P<f>" + NUM + r") GB",
        (_gib("f", "free_memory_at_start_bytes", "GB"),),
        f"{_SGL_RUNNER}.load_model: get_available_gpu_memory, GiB",
    ),
    _p(
        "sglang_load_end",
        "sglang",
        r"Load weight end\..*?avail mem=(?P<f>" + NUM + r") GB, mem usage=(?P<m>" + NUM + r") GB",
        (
            _gib("f", "free_after_weights_bytes", "GB"),
            _gib("m", "model_loading_bytes", "GB"),
        ),
        f"{_SGL_RUNNER}.load_model: get_available_gpu_memory before - after, GiB",
    ),
    _p(
        "sglang_load_end_dtype",
        "sglang",
        r"Load weight end\..*?dtype=(?:torch\.)?(?P<d>\w+)",
        (_setting("d", "dtype", "text"),),
        f"{_SGL_RUNNER}.load_model",
    ),
    _p(
        "sglang_kv_allocated",
        "sglang",
        r"KV Cache is allocated\. #tokens: (?P<t>\d+), K size: (?P<k>" + NUM + r") GB, V size:"
        r" (?P<v>" + NUM + r") GB",
        (
            _count("t", "kv_cache_tokens"),
            _gib("k", "k_cache_bytes", "GB"),
            _gib("v", "v_cache_bytes", "GB"),
        ),
        "python/sglang/srt/mem_cache/memory_pool.py MHATokenToKVPool: GB = 1024 * 1024 * 1024",
    ),
    _p(
        # 0.4.3's MHATokenToKVPool._create_buffers printed the sizes without the count
        "sglang_kv_allocated_sizes",
        "sglang",
        r"KV Cache is allocated\. K size: (?P<k>" + NUM + r") GB, V size: (?P<v>" + NUM + r") GB",
        (_gib("k", "k_cache_bytes", "GB"), _gib("v", "v_cache_bytes", "GB")),
        "python/sglang/srt/mem_cache/memory_pool.py MHATokenToKVPool (0.4.3): GB = 1024 * 1024 "
        "* 1024",
    ),
    _p(
        "sglang_kv_allocated_mla",
        "sglang",
        r"KV Cache is allocated\. #tokens: (?P<t>\d+), KV size: (?P<kv>" + NUM + r") GB",
        (_count("t", "kv_cache_tokens"), _gib("kv", "kv_pool_bytes", "GB")),
        "python/sglang/srt/mem_cache/memory_pool.py MLATokenToKVPool: GB = 1024 * 1024 * 1024",
    ),
    _p(
        "sglang_memory_pool_end",
        "sglang",
        r"Memory pool end\. avail mem=(?P<f>" + NUM + r") GB",
        (_gib("f", "free_after_kv_cache_bytes", "GB"),),
        f"{_SGL_RUNNER}.init_memory_pool: get_available_gpu_memory, GiB",
    ),
    _p(
        "sglang_cudagraph_begin",
        "sglang",
        r"Capture cuda graph begin\..*?avail mem=(?P<f>" + NUM + r") GB",
        (_gib("f", "free_before_cudagraph_bytes", "GB"),),
        f"{_SGL_RUNNER}.init_device_graphs: get_available_gpu_memory, GiB",
    ),
    _p(
        "sglang_cudagraph_end_free",
        "sglang",
        r"Capture cuda graph end\..*?avail mem=(?P<f>" + NUM + r") GB",
        (_gib("f", "free_after_cudagraph_bytes", "GB"),),
        f"{_SGL_RUNNER}.init_device_graphs: get_available_gpu_memory, GiB",
    ),
    _p(
        "sglang_cudagraph_end_usage",
        "sglang",
        r"Capture cuda graph end\..*?mem usage=(?P<m>" + NUM + r") GB",
        (_gib("m", "cudagraph_bytes", "GB"),),
        f"{_SGL_RUNNER}.init_device_graphs: free before - free after, GiB",
    ),
    _p(
        "sglang_ready",
        "sglang",
        r"(?P<items>max_total_num_tokens=\d+.*)",
        (),
        "python/sglang/srt/managers/scheduler.py Scheduler.__init__; available_gpu_mem in GiB",
        keys=_SGLANG_READY,
    ),
    # ---------------------------------------------------------------- TensorRT-LLM
    _p(
        "trtllm_engine_allocation",
        "trtllm",
        r"TensorRT-managed allocation in IExecutionContext creation: .*now: CPU \d+, GPU"
        r" (?P<g>\d+) \(MiB\)",
        (_mib("g", "engine_allocation_bytes"),),
        "TensorRT's own [MemUsageChange] line, printed in MiB",
    ),
    _p(
        "trtllm_engine_size",
        "trtllm",
        r"Loaded engine size: (?P<g>\d+) MiB",
        (_mib("g", "model_loading_bytes"),),
        "cpp/tensorrt_llm/runtime/tllmRuntime.cpp TllmRuntime: the engine (weights) in MiB",
    ),
    _p(
        "trtllm_execution_context",
        "trtllm",
        r"Allocated (?P<g>" + NUM + r") MiB for execution context memory",
        (_mib("g", "execution_context_bytes"),),
        "cpp/tensorrt_llm/runtime/tllmRuntime.cpp TllmRuntime: devMemorySize / 1048576.0",
    ),
    _p(
        "trtllm_runtime_buffers",
        "trtllm",
        r"Allocated (?P<g>" + NUM + r") (?P<unit>B|KB|MB|GB|TB) GPU memory for runtime buffers",
        (Capture("g", "reported", "runtime_buffers_bytes", "bytes", MIB, unit_group="unit"),),
        f"{_TRT_MODEL}: MemoryCounters::bytesToString (cpp/tensorrt_llm/runtime/"
        "memoryCounters.cpp) divides by 1024 per step: 'MB' is MiB",
    ),
    _p(
        "trtllm_decoder",
        "trtllm",
        r"Allocated (?P<g>" + NUM + r") (?P<unit>B|KB|MB|GB|TB) GPU memory for decoder",
        (Capture("g", "reported", "decoder_bytes", "bytes", MIB, unit_group="unit"),),
        f"{_TRT_MODEL}: MemoryCounters::bytesToString, 'MB' is MiB",
    ),
    _p(
        "trtllm_memory_for_kv",
        "trtllm",
        r"Memory usage when calculating max tokens in paged kv cache: total: (?P<t>" + NUM + r")"
        r" GiB, available: (?P<a>" + NUM + r") GiB",
        (_gib("t", "total_memory_bytes"), _gib("a", "free_memory_before_kv_cache_bytes")),
        f"{_TRT_KV} calculateMaxNumBlocks / getMaxNumTokens: bytes / (1 << 30)",
    ),
    _p(
        "trtllm_primary_blocks",
        "trtllm",
        r"Number of blocks in KV cache primary pool: (?P<b>\d+)",
        (_count("b", "num_gpu_blocks"),),
        f"{_TRT_KV} BlockManager (primary pool = GPU memory)",
    ),
    _p(
        "trtllm_secondary_blocks",
        "trtllm",
        r"Number of blocks in KV cache secondary pool: (?P<b>\d+)",
        (_count("b", "num_cpu_blocks"),),
        f"{_TRT_KV} BlockManager (secondary pool = host memory)",
    ),
    _p(
        "trtllm_pages_per_sequence",
        "trtllm",
        r"Max KV cache pages per sequence: (?P<p>\d+)",
        (_count("p", "max_blocks_per_sequence"),),
        f"{_TRT_KV} KVCacheManager",
    ),
    _p(
        "trtllm_blocks_per_sequence",
        "trtllm",
        r"Max KV cache blocks per sequence: (?P<p>\d+).*?tokens per block=(?P<t>\d+),"
        r" primary blocks=(?P<g>\d+), secondary blocks=(?P<c>\d+)",
        (
            _count("p", "max_blocks_per_sequence"),
            _count("t", "tokens_per_block"),
            _setting("t", "block_size", "count"),
            _count("g", "num_gpu_blocks"),
            _count("c", "num_cpu_blocks"),
        ),
        f"{_TRT_KV} KVCacheManager (newer one-line form)",
    ),
    _p(
        "trtllm_max_sequence_length",
        "trtllm",
        r"Max KV cache blocks per sequence: .*max sequence length=(?P<m>\d+)",
        (_setting("m", "max_model_len", "count"),),
        f"{_TRT_KV} KVCacheManager",
    ),
    _p(
        "trtllm_tokens_per_block",
        "trtllm",
        r"Number of tokens per block: (?P<t>\d+)",
        (_count("t", "tokens_per_block"), _setting("t", "block_size", "count")),
        f"{_TRT_KV} KVCacheManager::allocatePools",
    ),
    _p(
        "trtllm_block_reuse",
        "trtllm",
        r"KV cache block reuse is (?P<on>enabled|disabled)",
        (_setting("on", "enable_prefix_caching", "flag"),),
        f"{_TRT_KV} KVCacheManager",
    ),
    _p(
        "trtllm_kv_allocated",
        "trtllm",
        r"Allocated (?P<g>" + NUM + r") GiB for max tokens in paged KV cache \((?P<t>\d+)\)",
        (_gib("g", "kv_pool_bytes"), _count("t", "kv_cache_tokens")),
        f"{_TRT_KV} KVCacheManager::allocatePools: cacheSizeBytes / (1 << 30); tokens ="
        " primary blocks x tokens per block",
    ),
    _p(
        "trtllm_kv_bytes",
        "trtllm",
        r"Allocate (?P<b>\d+) bytes for k/v cache",
        (_bytes("b", "kv_pool_bytes"),),
        f"{_TRT_KV} KVCacheManager (legacy runtime): bytes",
    ),
    _p(
        "trtllm_kv_tokens",
        "trtllm",
        r"Using (?P<t>\d+) tokens in paged KV cache",
        (_count("t", "kv_cache_tokens"),),
        "cpp/tensorrt_llm/runtime/gptSession.cpp createKvCacheManager (legacy runtime)",
    ),
    _p(
        "trtllm_profile_peak",
        "trtllm",
        r"Peak memory during memory usage profiling \(torch \+ non-torch\): (?P<p>" + NUM + r")"
        r" GiB, available KV cache memory when calculating max tokens: (?P<kv>" + NUM + r") GiB",
        (_gib("p", "profiling_peak_bytes"), _gib("kv", "kv_pool_bytes")),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_tokens: / (1 << 30)",
    ),
    _p(
        "trtllm_profile_fraction",
        "trtllm",
        r"fraction is set (?P<f>" + NUM + r")",
        (_setting("f", "free_gpu_memory_fraction", "number"),),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_tokens",
    ),
    _p(
        "trtllm_profile_kv_size",
        "trtllm",
        r"kv size (?:per token )?is (?P<b>\d+)",
        (_bytes("b", "kv_bytes_per_token"),),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_tokens: bytes",
    ),
    _p(
        "trtllm_profile_total",
        "trtllm",
        r"device total memory (?P<t>" + NUM + r") GiB",
        (_gib("t", "total_memory_bytes"),),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_tokens: / (1 << 30)",
    ),
    _p(
        "trtllm_profile_weights",
        "trtllm",
        r"Memory used after loading model weights \(inside torch\)[^:]*: (?P<w>" + NUM + r") GiB",
        (_gib("w", "model_loading_bytes"),),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator: / (1 << 30)",
    ),
    _p(
        "trtllm_profile_activation",
        "trtllm",
        r"Memory dynamically allocated during inference \(inside torch\)[^:]*: (?P<a>" + NUM + r")"
        r" GiB",
        (_gib("a", "activation_peak_bytes"),),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator: / (1 << 30)",
    ),
    _p(
        "trtllm_profile_non_torch",
        "trtllm",
        r"Memory used outside torch \([^)]*\)[^:]*: (?P<n>" + NUM + r") GiB",
        (_gib("n", "non_torch_bytes"),),
        "tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator: / (1 << 30)",
    ),
    _p(
        "trtllm_serve_limits",
        "trtllm",
        r"(?P<items>max_seq_len=\d+, max_num_requests=\d+, max_num_tokens=\d+)",
        (),
        "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py (resolved limits)",
        keys=_TRT_SERVE,
    ),
    _p(
        "trtllm_max_num_sequences",
        "trtllm",
        r"TRTGptModel maxNumSequences: (?P<n>\d+)",
        (_setting("n", "max_num_seqs", "count"),),
        f"{_TRT_MODEL} TrtGptModelInflightBatching",
    ),
    _p(
        "trtllm_max_sequence_len",
        "trtllm",
        r"TRTGptModel maxSequenceLen: (?P<n>\d+)",
        (_setting("n", "max_model_len", "count"),),
        f"{_TRT_MODEL} TrtGptModelInflightBatching",
    ),
    _p(
        "trtllm_max_num_tokens",
        "trtllm",
        r"TRTGptModel maxNumTokens: (?P<n>\d+)",
        (_setting("n", "max_num_batched_tokens", "count"),),
        f"{_TRT_MODEL} TrtGptModelInflightBatching",
    ),
)


@dataclass(frozen=True, slots=True)
class VersionPattern:
    engine: EngineName
    regex: re.Pattern[str]
    # Lower is preferred when a log prints more than one.
    rank: int
    source: str
    keyword: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keyword", required_literal(self.regex))


VERSION_PATTERNS: tuple[VersionPattern, ...] = (
    VersionPattern(
        "vllm",
        re.compile(r"vLLM API server version (?P<v>\S+)"),
        0,
        "vllm/entrypoints/openai/api_server.py run_server",
    ),
    VersionPattern(
        "vllm",
        re.compile(r"█\s+version (?P<v>\d\S*)"),
        0,
        "vllm/entrypoints/utils.py (the start-up logo)",
    ),
    VersionPattern(
        "vllm",
        re.compile(r"Initializing an? (?:V[01] )?LLM engine \(v(?P<v>[^)\s]+)\)"),
        1,
        "vllm/v1/engine/core.py EngineCore.__init__ (V0: vllm/engine/llm_engine.py)",
    ),
    VersionPattern(
        "trtllm",
        re.compile(r"\[TensorRT-LLM\] TensorRT-LLM version: (?P<v>\S+)"),
        0,
        "tensorrt_llm/__init__.py (printed on import)",
    ),
    VersionPattern(
        "trtllm",
        re.compile(r"Engine version (?P<v>\S+) found in the config file"),
        1,
        "cpp/tensorrt_llm/runtime/gptJsonConfig.cpp: the version that built the engine",
    ),
)

# What the error lists when nothing is recognised: one example line per kind, per engine.
LOOKED_FOR: tuple[str, ...] = (
    "vLLM: 'Available KV cache memory: X GiB', 'GPU KV cache size: N tokens', 'Maximum"
    " concurrency for N tokens per request: Xx', 'Model loading took X GiB',"
    " 'Memory profiling takes ... Total non KV cache memory ...', '# GPU blocks: N',"
    " 'Memory profiling results: ...', 'the current vLLM instance can use ...',"
    " 'Graph capturing finished in N secs, took X GiB', 'non-default args: {...}'",
    "SGLang: 'Load weight end. ... avail mem=X GB, mem usage=X GB', 'KV Cache is allocated."
    " #tokens: N, K size: X GB, V size: X GB', 'max_total_num_tokens=N, ...',"
    " 'server_args=ServerArgs(...)'",
    "TensorRT-LLM: '[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)',"
    " 'Memory usage when calculating max tokens in paged kv cache: ...', 'Number of blocks in"
    " KV cache primary pool: N', 'Using N tokens in paged KV cache'",
)
