"""Weight memory: parameter count x bytes per parameter, or the checkpoint's known size."""

from __future__ import annotations

from ..errors import SizingError
from ..units import cdiv
from .architecture import ModelArchitecture
from .dtypes import WeightFormat


def weight_bytes_total(arch: ModelArchitecture, weight_format: WeightFormat | None = None) -> int:
    """All weights of one copy of the model; MoE counts every expert (all are resident).

    An explicit `weight_bytes` (the checkpoint's real footprint) wins unless a different
    `weight_format` is asked for, in which case the parameter count is re-priced.
    """
    if weight_format is None and arch.weight_bytes is not None:
        return arch.weight_bytes
    if arch.num_parameters is None:
        if arch.weight_bytes is not None:
            return arch.weight_bytes
        if arch.weights_unknown is not None:
            # A config.json the parameter count could not read: name the key it needed.
            field, reason = arch.weights_unknown
            raise SizingError(
                f"model.hf_config.{field}",
                f"{reason}; the weights cannot be counted without it: give num_parameters or "
                "weight_bytes, or kv_pool_bytes (a known pool needs no weights)",
            )
        raise SizingError(
            "model.num_parameters", "the model needs num_parameters or weight_bytes to size weights"
        )
    bits = (weight_format or arch.weight_format).bits
    # bytes = parameters x bits / 8, rounded up to a whole byte.
    return cdiv(arch.num_parameters * bits.numerator, 8 * bits.denominator)


def weight_bytes_per_gpu(
    weight_bytes: int, tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1
) -> int:
    """One GPU's share of `weight_bytes` (one copy of the model, `weight_bytes_total`)."""
    # Weights shard across TP ranks and PP stages (replicated norms and routers are
    # a fraction of a percent and are not modelled).
    return cdiv(weight_bytes, tensor_parallel_size * pipeline_parallel_size)
