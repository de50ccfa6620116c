"""Catalog validation the request schemas cannot express: architectures and merge patches.

An architecture arrives as a plain dict (a model's body, or one derived from an HF config); these
checks bound every integer in it and name the failing field as `architecture.<path>`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..kit.errors import InvalidRequest
from ..sizing import ModelArchitecture, SizingError, architecture_from_dict, architecture_to_dict
from .schemas import MAX_PARAMETERS, MAX_POSITION_EMBEDDINGS, MAX_WEIGHT_BYTES

# Ints inside an architecture other than the counts below are geometry: bounded well above any
# real model, so nothing downstream overflows a float or a BIGINT.
_MAX_GEOMETRY = 2**40
_INT_BOUNDS: dict[str, int] = {
    "num_parameters": MAX_PARAMETERS,
    "weight_bytes": MAX_WEIGHT_BYTES,
    "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
}
_ARCH_STR_FIELDS = ("dtype", "state_dtype", "weight_format", "checkpoint_kv_cache")
_ARCH_INT_FIELDS = (
    "num_attention_heads",
    "hidden_size",
    "intermediate_size",
    "vocab_size",
    "num_parameters",
    "weight_bytes",
    "max_position_embeddings",
)


def out_of_bounds(field: str, message: str, **constraint: int) -> InvalidRequest:
    bound = ", ".join(f"{k} {v}" for k, v in constraint.items())
    return InvalidRequest(
        f"{field}: {message} ({bound})" if bound else f"{field}: {message}",
        field=field,
        errors=[
            {
                "field": field,
                "in": "body",
                "message": message,
                "type": "value_error",
                **({"constraint": constraint} if constraint else {}),
            }
        ],
    )


def check_ints(value: Any, path: str) -> None:
    """Every int of a (plain-dict) architecture within the bounds kvplan stores and computes."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            check_ints(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_ints(item, f"{path}[{index}]")
    elif isinstance(value, int) and not isinstance(value, bool):
        limit = _INT_BOUNDS.get(path.rsplit(".", 1)[-1], _MAX_GEOMETRY)
        if value > limit:
            raise out_of_bounds(path, f"must be at most {limit}", le=limit)


def check_moe(arch: ModelArchitecture, prefix: str) -> None:
    moe = arch.moe
    if moe is None:
        return
    minimums = {
        "num_experts": 1,
        "experts_per_token": 1,
        "moe_intermediate_size": 1,
        "shared_expert_intermediate_size": 0,
    }
    for name, minimum in minimums.items():
        value = getattr(moe, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise out_of_bounds(f"{prefix}.moe.{name}", f"must be an integer, got {value!r}")
        if value < minimum:
            raise out_of_bounds(f"{prefix}.moe.{name}", f"must be >= {minimum}", ge=minimum)
    layers = moe.num_moe_layers
    if layers is not None and (
        isinstance(layers, bool)
        or not isinstance(layers, int)
        or not 1 <= layers <= arch.num_layers
    ):
        raise out_of_bounds(
            f"{prefix}.moe.num_moe_layers",
            f"must be an integer from 1 to the model's {arch.num_layers} layers, got {layers!r}",
            ge=1,
            le=arch.num_layers,
        )
    if moe.experts_per_token > moe.num_experts:
        raise out_of_bounds(
            f"{prefix}.moe.experts_per_token",
            f"must be at most num_experts ({moe.num_experts})",
            le=moe.num_experts,
        )


def parse_architecture(data: Mapping[str, Any], prefix: str = "architecture") -> ModelArchitecture:
    """The plain-dict architecture of a request, checked; errors name `architecture.<field>`."""
    if data.get("num_attention_heads") is None:
        raise SizingError(f"{prefix}.num_attention_heads", "is required")
    for name in _ARCH_STR_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise SizingError(f"{prefix}.{name}", f"must be a string, got {value!r}")
    for name in _ARCH_INT_FIELDS:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise SizingError(f"{prefix}.{name}", f"must be an integer, got {value!r}")
    check_ints(data, prefix)
    try:
        arch = architecture_from_dict(data)
    except SizingError as exc:
        raise type(exc)(f"{prefix}.{exc.field}", exc.reason) from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise InvalidRequest(f"{prefix}: cannot be read: {exc}", field=prefix) from None
    known = set(architecture_to_dict(arch)) | {"name"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SizingError(
            f"{prefix}.{unknown[0]}",
            f"not an architecture field; known: {', '.join(sorted(known))}",
        )
    check_moe(arch, prefix)
    return arch


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out: dict[str, Any] = dict(copy.deepcopy(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
