"""The options of `kvplan capacity` and `kvplan plan`, from one table.

Each option is a field of the API's question (`CapacityRequest`, `PlanRequestBody`) under the
same name, spelled as a flag (`max_model_len` is `--max-model-len`), so a value is copied by name
and validated by the same schema as over HTTP: a bad value is the same problem. The values stay
the strings typed, as a query string's do; pydantic converts them. An option's help is the
field's own description unless the table gives one.

`ALIASES` gives further flag names for a field: the other engines' spellings (SGLang's
`--context-length` for `max_model_len`, `--tp-size` for `tensor_parallel_size`), taken from the
one table every HTTP door reads (`engine_flags.ALIASES`). A flag kvplan does not model is refused
by argparse, by name, in the server's problem shape.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .kit.engine_flags import ALIASES as ENGINE_ALIASES
from .planning.schemas import RATE_TARGETS


def _engine_spellings() -> dict[str, tuple[str, ...]]:
    """field -> further flag names, without the dashes ({"max_model_len": ("context-length",
    "max-seq-len")}): the engines' spellings every HTTP door reads (engine_flags.ALIASES)."""
    flags: dict[str, list[str]] = {}
    for alias, field in ENGINE_ALIASES.items():
        flags.setdefault(field, []).append(alias.replace("_", "-"))
    return {field: tuple(names) for field, names in flags.items()}


ALIASES: Mapping[str, tuple[str, ...]] = _engine_spellings()


@dataclass(frozen=True, slots=True)
class Option:
    """One question field as a command-line option."""

    name: str  # the field, as the API names it
    help: str | None = None  # default: the field's description in the schema
    flag: str | None = None  # default: --name-with-dashes
    kind: str = "value"  # value, switch (--x / --no-x), list (repeatable), words (--x a b)
    required: bool = False

    def flags(self) -> list[str]:
        own = self.flag or "--" + self.name.replace("_", "-")
        return [own, *(f"--{alias}" for alias in ALIASES.get(self.name, ()))]


ENGINE_OPTIONS: tuple[Option, ...] = (
    Option("engine", help="vllm, sglang or trtllm: whose memory arithmetic to follow (vllm)"),
    Option("engine_version"),
    Option("dtype"),
    Option("allow_long_max_model_len", kind="switch"),
    Option("gpu_memory_utilization"),
    Option("mem_fraction_static"),
    Option("free_gpu_memory_fraction"),
    Option("max_num_batched_tokens"),
    Option("max_num_seqs"),
    Option("block_size"),
    Option("enable_prefix_caching", kind="switch"),
    Option("enforce_eager", kind="switch"),
    Option("cudagraph_memory_bytes"),
    Option("kv_pool_bytes"),
    Option(
        "num_gpu_blocks_override",
        help="vLLM `--num-gpu-blocks-override`: this many KV blocks instead of the computed ones",
    ),
    Option("mamba_ssm_cache_dtype"),
    Option("disable_hybrid_kv_cache_manager", kind="switch"),
    Option("swa_full_tokens_ratio"),
    Option("mamba_full_memory_ratio"),
    Option("max_mamba_cache_size"),
    Option("max_attention_window", kind="list", help="TensorRT-LLM window per layer (repeatable)"),
    Option("weight_format"),
    # issue 21: KV tiers beyond HBM and weight offloading
    Option("kv_offloading_size"),
    Option("kv_offloading_backend"),
    Option("enable_hierarchical_cache", kind="switch"),
    Option("hicache_ratio"),
    Option("hicache_size"),
    Option("cpu_offload_gb"),
    # LMCache's local tiers under vLLM's LMCacheConnectorV1
    Option("lmcache_max_local_cpu_size"),
    Option("lmcache_max_local_disk_size"),
    Option("lmcache_chunk_size"),
    Option("lmcache_local_cpu", kind="switch"),
    Option("lmcache_version"),
    # issue 21: what held-out logs showed is missing
    Option("disable_custom_all_reduce", kind="switch"),
    Option("engine_rules_version"),
    # issue 21: expert parallelism and decode context parallelism
    Option("enable_expert_parallel", kind="switch"),
    Option("num_redundant_experts"),
    Option("enable_eplb", kind="switch"),
    Option("decode_context_parallel_size"),
    Option("all2all_backend"),
    # issue 21: speculative decoding (a JSON object, as on vLLM's command line)
    Option("speculative_config"),
    Option("speculative_algorithm"),
    Option("speculative_draft_model_path"),
    Option("speculative_num_steps"),
    Option("speculative_eagle_topk"),
    Option("speculative_num_draft_tokens"),
    # issue 21: LoRA
    Option("enable_lora", kind="switch"),
    Option("max_loras"),
    Option("max_lora_rank"),
    Option("lora_dtype"),
    Option("max_cpu_loras"),
    Option("fully_sharded_loras", kind="switch"),
    Option("max_loras_per_batch"),
    # SGLang takes its modules as separate words (--lora-target-modules q_proj v_proj)
    Option("lora_target_modules", kind="words"),
    # issue 21: multimodal encoders
    Option("limit_mm_per_prompt", help='vLLM JSON, e.g. {"image": 2, "video": 0}'),
    Option("skip_mm_profiling", kind="switch"),
    # issue 21: SGLang's DP attention and expert parallelism
    Option("enable_dp_attention", kind="switch"),
    Option("attn_dp_size"),
    Option("ep_size"),
    Option("ep_num_redundant_experts"),
    Option("enable_dp_lm_head", kind="switch"),
    Option("moe_dense_tp_size"),
    Option("moe_a2a_backend"),
    Option("deepep_mode"),
)

CAPACITY_OPTIONS: tuple[Option, ...] = (
    Option("gpu", help="catalog GPU slug, e.g. h100-sxm-80gb (or give --gpu-memory-bytes)"),
    Option("gpu_memory_bytes", help="a GPU given by its total memory in bytes, as CUDA reports"),
    Option("max_model_len"),
    Option("kv_cache_dtype"),
    Option("tensor_parallel_size", help="GPUs per replica that split each layer (1)"),
    Option("pipeline_parallel_size", help="GPUs per replica that split the layers (1)"),
    Option("data_parallel_size"),
    Option("peak_concurrency"),
    Option("avg_prompt_tokens"),
    Option("acceptance_length"),
    *ENGINE_OPTIONS,
)

# `kvplan simulate`: the capacity question's options, its engine picking the scheduler too.
SIMULATE_OPTIONS: tuple[Option, ...] = tuple(
    Option(
        "engine",
        help="vllm or sglang: whose scheduler steps the replica and whose memory arithmetic "
        "sizes it (vllm); trtllm's scheduler is not simulated",
    )
    if option.name == "engine"
    else option
    for option in CAPACITY_OPTIONS
)

PLAN_OPTIONS: tuple[Option, ...] = (
    Option("max_model_len", required=True),
    Option("peak_concurrency", help="sequences live at the peak (or --rate and the lengths)"),
    Option("kv_cache_dtype"),
    Option(
        "gpus", flag="--gpu", kind="list", help="a candidate GPU slug (repeatable; default: all)"
    ),
    Option("max_gpus_per_node"),
    Option("headroom_fraction"),
    Option("avg_context_tokens"),
    Option("avg_prompt_tokens"),
    Option("max_tpot_ms"),
    Option("max_ttft_ms"),
    Option("min_output_tokens_per_second_per_user"),
    Option("max_replicas", help="the most replicas a plan may use"),
    Option("rank_by"),
    Option("max_alternatives", help="how many ranked alternatives to list besides the best"),
    # issue 23: a plan for a rate's targets (the workload: cli.py's _rate_args)
    *(Option(name) for name in RATE_TARGETS),
    Option("disaggregated", help="auto, never or only: split prefill/decode pools (auto)"),
    *ENGINE_OPTIONS,
)


def add_options(
    parser: argparse.ArgumentParser, options: Sequence[Option], schema: type[BaseModel]
) -> None:
    """Each option as a flag whose help is the table's or the schema field's description."""
    for option in options:
        field = schema.model_fields.get(option.name)
        described = field.description if field is not None else None
        text = option.help or described or option.name
        kwargs: dict[str, Any] = {"dest": option.name, "help": text.replace("%", "%%")}
        if option.kind == "switch":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif option.kind == "list":
            kwargs["action"] = "append"
            kwargs["metavar"] = option.name.upper()
        elif option.kind == "words":
            kwargs["nargs"] = "+"
            kwargs["metavar"] = option.name.upper()
        else:
            kwargs["metavar"] = option.name.upper()
        if option.required:
            kwargs["required"] = True
        parser.add_argument(*option.flags(), **kwargs)


def given(args: argparse.Namespace, options: Sequence[Option]) -> dict[str, Any]:
    """The options typed, by field name (those left out take the schema's defaults)."""
    values = {
        option.name: _words(getattr(args, option.name))
        if option.kind == "words"
        else getattr(args, option.name)
        for option in options
    }
    return {name: value for name, value in values.items() if value is not None}


def _words(value: list[str] | None) -> str | None:
    """A `words` option's values as the field's one space-separated string."""
    return None if value is None else " ".join(value)
