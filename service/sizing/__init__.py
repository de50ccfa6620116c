"""The sizing arithmetic: pure, typed, no web or database imports.

Every endpoint, the CLI, the benchmark and the tests call these same functions.
"""

from .architecture import LayerKind, ModelArchitecture
from .capacity import Capacity, Gpu, Parallelism, Workload, compute_capacity
from .engines.common import Engine, EngineOptions
from .errors import SizingError
from .schedule import architecture_from_dict, architecture_to_dict

__all__ = [
    "Capacity",
    "Engine",
    "EngineOptions",
    "Gpu",
    "LayerKind",
    "ModelArchitecture",
    "Parallelism",
    "SizingError",
    "Workload",
    "architecture_from_dict",
    "architecture_to_dict",
    "compute_capacity",
]
