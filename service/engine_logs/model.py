"""What a parsed start-up log holds: small frozen dataclasses, standard library only.

Every figure is what the engine printed, turned into bytes by the unit the engine's code
divides by (GiB = 2^30 even where the line says "GB"; see `patterns.py` for each line's
source). A figure the log does not print stays `None`: nothing here is derived or guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

EngineName = Literal["vllm", "sglang", "trtllm"]
ENGINES: tuple[EngineName, ...] = ("vllm", "sglang", "trtllm")

# Kinds of value a pattern captures.
#   bytes:   memory, an int of bytes (`unit_bytes` says what one printed unit is)
#   count:   an int (blocks, tokens, layers)
#   number:  a float printed by the engine (concurrency, ratios, seconds, percentages)
#   text:    a string setting (model, dtype)
#   flag:    a bool setting
ValueKind = Literal["bytes", "count", "number", "text", "flag"]
Value = int | float | str | bool

# Lines of one pattern echoed in the answer beyond the ones that gave a figure (a pasted log
# can repeat a line thousands of times; the answer stays small, the figures use every line).
# Here rather than in the parser so that the answer's schema can say it without compiling
# the patterns (the parser is imported with the first log read, not with the app).
LINES_PER_PATTERN = 10


@dataclass(frozen=True, slots=True)
class Settings:
    """The engine flags the log reveals, typed; `None` where the log does not say.

    Sources, in the order the log prints them (a later line wins): vLLM's "non-default args"
    line and engine config dump, SGLang's `server_args=ServerArgs(...)` and its final
    `max_total_num_tokens=...` line, TensorRT-LLM's `TRTGptModel ...` and KV-cache lines, and the
    budget lines that echo a flag (vLLM "Requested memory: 0.95 (util)").
    """

    model: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_model_len: int | None = None
    # vLLM --gpu-memory-utilization: share of TOTAL device memory the instance may use.
    gpu_memory_utilization: float | None = None
    # SGLang --mem-fraction-static: share of the memory free at start-up for weights + KV.
    mem_fraction_static: float | None = None
    # TensorRT-LLM free_gpu_memory_fraction: share of the memory still free after warm-up.
    free_gpu_memory_fraction: float | None = None
    # vLLM --kv-cache-memory-bytes: a pool given directly, bypassing the profile.
    kv_cache_memory_bytes: int | None = None
    kv_cache_dtype: str | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_prefix_caching: bool | None = None
    enforce_eager: bool | None = None
    # vLLM --disable-custom-all-reduce (issue 21): NCCL alone, no custom all-reduce buffers.
    disable_custom_all_reduce: bool | None = None
    # SGLang only.
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_total_tokens: int | None = None
    # issue 21: vLLM's expert and decode context parallelism (non-default args).
    enable_expert_parallel: bool | None = None
    decode_context_parallel_size: int | None = None
    all2all_backend: str | None = None  # --all2all-backend (0.12+), in the non-default args
    # issue 21: SGLang's DP attention and expert parallelism (ServerArgs).
    enable_dp_attention: bool | None = None
    attn_dp_size: int | None = None
    ep_size: int | None = None
    ep_num_redundant_experts: int | None = None
    enable_dp_lm_head: bool | None = None
    moe_a2a_backend: str | None = None
    deepep_mode: str | None = None


@dataclass(frozen=True, slots=True)
class RankValue:
    """One rank's value of a figure; `rank` is "" for the engine's main process."""

    rank: str
    value: int


@dataclass(frozen=True, slots=True)
class Reported:
    """Every figure the engine printed, in bytes or counts, the unit in the name.

    Where ranks print different values, the field holds the main process's value (or the
    lowest rank's); `kv_pool_bytes` holds the minimum over ranks, which is the pool every rank
    sizes its blocks by (vLLM `get_kv_cache_configs`; SGLang reduces free memory with MIN).
    """

    # Device and request.
    total_memory_bytes: int | None = None
    free_memory_at_start_bytes: int | None = None
    startup_cuda_memory_bytes: int | None = None
    startup_torch_memory_bytes: int | None = None
    startup_non_torch_bytes: int | None = None
    distributed_init_bytes: int | None = None
    requested_memory_bytes: int | None = None
    # Weights.
    model_loading_bytes: int | None = None
    weights_bytes: int | None = None
    free_after_weights_bytes: int | None = None
    engine_allocation_bytes: int | None = None
    execution_context_bytes: int | None = None
    runtime_buffers_bytes: int | None = None
    decoder_bytes: int | None = None
    # The profile.
    activation_peak_bytes: int | None = None
    non_torch_bytes: int | None = None
    non_kv_cache_bytes: int | None = None
    profiling_peak_bytes: int | None = None
    memory_in_use_before_profile_bytes: int | None = None
    peak_torch_memory_bytes: int | None = None
    memory_in_use_after_profile_bytes: int | None = None
    free_after_profiling_bytes: int | None = None
    free_after_profiling_within_requested_bytes: int | None = None
    profiling_seconds: float | None = None
    # CUDA graphs.
    cudagraph_bytes: int | None = None
    cudagraph_estimate_bytes: int | None = None
    free_before_cudagraph_bytes: int | None = None
    free_after_cudagraph_bytes: int | None = None
    gpu_memory_utilization_without_cudagraph_estimate: float | None = None
    gpu_memory_utilization_suggested: float | None = None
    # The KV pool.
    free_memory_before_kv_cache_bytes: int | None = None
    kv_pool_bytes: int | None = None
    kv_pool_bytes_by_rank: tuple[RankValue, ...] = ()
    k_cache_bytes: int | None = None
    v_cache_bytes: int | None = None
    free_after_kv_cache_bytes: int | None = None
    free_after_startup_bytes: int | None = None
    kv_cache_in_use_bytes: int | None = None
    kv_cache_memory_to_fit_requested_bytes: int | None = None
    kv_cache_memory_to_fully_utilize_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    num_gpu_blocks: int | None = None
    num_cpu_blocks: int | None = None
    tokens_per_block: int | None = None
    max_blocks_per_sequence: int | None = None
    kv_cache_tokens: int | None = None
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    # vLLM's start-up failure: the KV one request of max_model_len needs, and the longest
    # request the pool would hold.
    kv_needed_for_max_model_len_bytes: int | None = None
    estimated_max_model_len: int | None = None
    # Layout notes the engine prints.
    kv_padding_layers: int | None = None
    kv_padding_max_waste_pct: float | None = None
    attention_block_size_tokens: int | None = None
    mamba_page_padding_pct: float | None = None
    max_num_scheduled_tokens: int | None = None


REPORTED_FIELDS: frozenset[str] = frozenset(
    f.name for f in fields(Reported) if f.name != "kv_pool_bytes_by_rank"
)
SETTINGS_FIELDS: frozenset[str] = frozenset(f.name for f in fields(Settings))


@dataclass(frozen=True, slots=True)
class Figure:
    """One value read from one line: where it came from and how it was printed.

    `target` is "reported" or "settings"; `field` a field of that dataclass. For memory,
    `value` is `printed` x `unit_bytes`, rounded to the byte (the engine rounded first, so the
    true figure lies within half a unit of the last printed digit of it); `unit` is the label
    as printed ("GB" where vLLM V0 and SGLang mean GiB: `unit_bytes` says what they mean).
    Counts and numbers have `unit_bytes` 1. `rank` is "" for the main process, else the rank
    the line's prefix names ("TP1", "PP0", "rank 1", "DP1 TP3", or "pid 507").
    """

    target: Literal["reported", "settings"]
    field: str
    value: Value
    printed: str
    unit: str
    unit_bytes: int
    rank: str
    line_number: int
    pattern: str


@dataclass(frozen=True, slots=True)
class RecognisedLine:
    """A line that matched: its number in the pasted text (1-based, counting at \n), the
    cleaned text, and the names of the patterns it matched (`PATTERNS` in patterns.py, each
    with the engine file and function that prints it; `<engine>_version` for version lines)."""

    line_number: int
    text: str
    patterns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ParsedLog:
    """A start-up log, read.

    `engine_version` is the one the log prints (else the caller's hint, else `None`).
    `figures` keeps every value read, in log order, with its printed decimal, unit, rank and
    line; `settings` and `reported` are what they reduce to. `recognised_lines` says which
    lines matched which patterns, for the explanation an answer gives: of each pattern the
    first lines (`LINES_PER_PATTERN`) and the last, and every line a kept figure came
    from; `recognised_lines_omitted` counts the recognised lines left out.
    """

    engine: EngineName
    engine_version: str | None
    settings: Settings
    reported: Reported
    figures: tuple[Figure, ...]
    recognised_lines: tuple[RecognisedLine, ...]
    recognised_lines_omitted: int = 0

    def printed(self, field: str) -> str | None:
        """The decimal as printed on the line that gave `reported.<field>` its value."""
        chosen = _chosen_figure(self, field)
        return None if chosen is None else chosen.printed

    def by_rank(self, field: str) -> dict[str, Value]:
        """`reported.<field>` per rank (the last value each rank printed); "" = main process."""
        out: dict[str, Value] = {}
        for figure in self.figures:
            if figure.target == "reported" and figure.field == field:
                out[figure.rank] = figure.value
        return out

    def occurrences(self, field: str) -> tuple[Figure, ...]:
        """Every line that printed `reported.<field>`, in log order."""
        return tuple(f for f in self.figures if f.target == "reported" and f.field == field)


def _chosen_figure(parsed: ParsedLog, field: str) -> Figure | None:
    value = getattr(parsed.reported, field)
    if value is None:
        return None
    candidates = [f for f in parsed.occurrences(field) if f.value == value]
    return candidates[-1] if candidates else None
