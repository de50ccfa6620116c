"""The sizing arithmetic: pure, typed, no web or database imports.

Every endpoint, the CLI, the benchmark and the tests call these same functions; the slices
import them from here, not from the submodules.
"""

from .capacity import (
    MAX_CONTEXT_TOKENS,
    Capacity,
    Gpu,
    Parallelism,
    Workload,
    compute_capacity,
    served_model,
)
from .engines import calibration as engines_calibration
from .engines import releases as engines_releases
from .engines.activation import forward_bytes_per_token
from .engines.common import Engine, EngineOptions
from .engines.disaggregation import (
    KvTransfer,
    disaggregation_flags,
    kv_transfer,
    platform,
    router_commands,
)
from .engines.expert_parallel import ExpertParallel
from .engines.kv import kv_bytes_per_token
from .engines.sglang import default_chunked_prefill_size
from .engines.sglang_dp import SglangParallel
from .engines.speculative import (
    SpeculativeConfig,
    parse_speculative_config,
    sglang_speculative_config,
)
from .engines.vllm import parse_vllm_version, vllm_cudagraph_estimate, vllm_release
from .errors import SizingError
from .frozen import frozen
from .model.architecture import Layer, LayerKind, MixtureOfExperts, ModelArchitecture
from .model.config_assumptions import config_assumptions
from .model.context_limit import max_model_len_limit
from .model.dtypes import (
    ACCEPTED_DTYPES,
    FloatDtype,
    KvCacheDtype,
    ModelDtype,
    WeightFormat,
    parse_dtype,
    parse_kv_cache_dtype,
    parse_weight_format,
)
from .model.hf_config import NESTED_LM_KEYS, architecture_from_hf_config
from .model.schedule import architecture_from_dict, architecture_to_dict
from .model.weight_format import with_hf_quant_config
from .planning.explain import Replicas, as_plain, explain, performance_steps, target_steps
from .planning.planner import (
    DEFAULT_HEADROOM_FRACTION,
    MAX_PEAK_CONCURRENCY,
    Plan,
    PlanOption,
    PlanRequest,
    Rejection,
    left_out_warning,
    plan,
    with_given_pool,
    without_flags,
)
from .speed.performance import (
    ERROR_BAND,
    LINK_GB_S,
    GpuPerformance,
    PerformanceEstimate,
    PrefillChunk,
    Speculation,
)
from .speed.performance_fit import (
    FIT_SOURCES,
    FitReport,
    MeasuredPoint,
    Metric,
    SourceHoldOut,
    fit_report,
    leave_one_source_out,
)
from .speed.replica import (
    PIPELINE_NOTE,
    BatchSpeed,
    LatencyTargets,
    NoEstimate,
    Paced,
    Speed,
    SpeedQuestion,
    batch_curve,
    batch_sizes,
    capacity_speed,
    mixed_step_ms,
    pace,
    replica_speed,
    with_expert_layout,
)
from .units import GiB, gib_to_bytes
from .versions import parse_engine_version

__all__ = [
    "ACCEPTED_DTYPES",
    "DEFAULT_HEADROOM_FRACTION",
    "ERROR_BAND",
    "FIT_SOURCES",
    "LINK_GB_S",
    "MAX_CONTEXT_TOKENS",
    "MAX_PEAK_CONCURRENCY",
    "NESTED_LM_KEYS",
    "PIPELINE_NOTE",
    "BatchSpeed",
    "Capacity",
    "Engine",
    "EngineOptions",
    "ExpertParallel",
    "FitReport",
    "FloatDtype",
    "GiB",
    "Gpu",
    "GpuPerformance",
    "KvCacheDtype",
    "KvTransfer",
    "LatencyTargets",
    "Layer",
    "LayerKind",
    "MeasuredPoint",
    "Metric",
    "MixtureOfExperts",
    "ModelArchitecture",
    "ModelDtype",
    "NoEstimate",
    "Paced",
    "Parallelism",
    "PerformanceEstimate",
    "Plan",
    "PlanOption",
    "PlanRequest",
    "PrefillChunk",
    "Rejection",
    "Replicas",
    "SglangParallel",
    "SizingError",
    "SourceHoldOut",
    "Speculation",
    "SpeculativeConfig",
    "Speed",
    "SpeedQuestion",
    "WeightFormat",
    "Workload",
    "architecture_from_dict",
    "architecture_from_hf_config",
    "architecture_to_dict",
    "as_plain",
    "batch_curve",
    "batch_sizes",
    "capacity_speed",
    "compute_capacity",
    "config_assumptions",
    "default_chunked_prefill_size",
    "disaggregation_flags",
    "engines_calibration",
    "engines_releases",
    "explain",
    "fit_report",
    "forward_bytes_per_token",
    "frozen",
    "gib_to_bytes",
    "kv_bytes_per_token",
    "kv_transfer",
    "leave_one_source_out",
    "left_out_warning",
    "max_model_len_limit",
    "mixed_step_ms",
    "pace",
    "parse_dtype",
    "parse_engine_version",
    "parse_kv_cache_dtype",
    "parse_speculative_config",
    "parse_vllm_version",
    "parse_weight_format",
    "performance_steps",
    "plan",
    "platform",
    "replica_speed",
    "router_commands",
    "served_model",
    "sglang_speculative_config",
    "target_steps",
    "vllm_cudagraph_estimate",
    "vllm_release",
    "with_expert_layout",
    "with_given_pool",
    "with_hf_quant_config",
    "without_flags",
]
