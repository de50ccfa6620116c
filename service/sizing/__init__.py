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
from .engines.common import Engine, EngineOptions
from .engines.kv import kv_bytes_per_token
from .errors import SizingError
from .model.architecture import LayerKind, ModelArchitecture
from .model.dtypes import (
    FloatDtype,
    KvCacheDtype,
    ModelDtype,
    WeightFormat,
    parse_kv_cache_dtype,
    parse_weight_format,
)
from .model.hf_config import architecture_from_hf_config
from .model.schedule import architecture_from_dict, architecture_to_dict
from .planning.explain import explain
from .planning.planner import MAX_PEAK_CONCURRENCY, Plan, PlanOption, PlanRequest, Rejection, plan
from .speed.performance import ERROR_BAND, LINK_GB_S, PerformanceEstimate
from .speed.replica import LatencyTargets, NoEstimate, Speed, capacity_speed
from .units import GiB

__all__ = [
    "ERROR_BAND",
    "LINK_GB_S",
    "MAX_CONTEXT_TOKENS",
    "MAX_PEAK_CONCURRENCY",
    "Capacity",
    "Engine",
    "EngineOptions",
    "FloatDtype",
    "GiB",
    "Gpu",
    "KvCacheDtype",
    "LatencyTargets",
    "LayerKind",
    "ModelArchitecture",
    "ModelDtype",
    "NoEstimate",
    "Parallelism",
    "PerformanceEstimate",
    "Plan",
    "PlanOption",
    "PlanRequest",
    "Rejection",
    "SizingError",
    "Speed",
    "WeightFormat",
    "Workload",
    "architecture_from_dict",
    "architecture_from_hf_config",
    "architecture_to_dict",
    "capacity_speed",
    "compute_capacity",
    "explain",
    "kv_bytes_per_token",
    "parse_kv_cache_dtype",
    "parse_weight_format",
    "plan",
    "served_model",
]
