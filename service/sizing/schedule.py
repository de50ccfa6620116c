"""The plain-data form of a `ModelArchitecture` (catalog rows, JSON bodies) and back.

    {
      "num_attention_heads": 24, "dtype": "bfloat16", ...,
      "layer_specs": {"full_attention": {"num_kv_heads": 4, "head_dim": 256},
                      "linear_attention": {"num_key_heads": 16, ...}},
      "layer_schedule": [{"pattern": ["linear_attention", "linear_attention",
                                      "linear_attention", "full_attention"], "repeat": 16}]
    }

`layer_schedule` may also be a flat list of kind names, one per layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .architecture import (
    LAYER_CLASSES,
    Layer,
    LayerKind,
    MixtureOfExperts,
    ModelArchitecture,
    NoCache,
    build_layers,
    parse_layer_kind,
)
from .errors import SizingError

_ARCH_FIELDS = (
    "num_attention_heads",
    "dtype",
    "state_dtype",
    "hidden_size",
    "intermediate_size",
    "vocab_size",
    "num_parameters",
    "weight_bytes",
    "weight_format",
    "max_position_embeddings",
)


def expand_schedule(schedule: Sequence[Any], field: str = "layer_schedule") -> list[LayerKind]:
    """Flatten `[{"pattern": [...], "repeat": n}, "full_attention", ...]` into one kind a layer."""
    if not isinstance(schedule, Sequence) or isinstance(schedule, str | bytes):
        raise SizingError(field, "must be a list of layer kinds or {pattern, repeat} segments")
    kinds: list[LayerKind] = []
    for index, item in enumerate(schedule):
        where = f"{field}[{index}]"
        if isinstance(item, str):
            kinds.append(parse_layer_kind(item, where))
        elif isinstance(item, Mapping):
            pattern = item.get("pattern")
            repeat = item.get("repeat", 1)
            if not isinstance(pattern, list) or not pattern:
                raise SizingError(f"{where}.pattern", "must be a non-empty list of layer kinds")
            if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
                raise SizingError(f"{where}.repeat", "must be a positive integer")
            if repeat * len(pattern) > 100_000:
                raise SizingError(where, "more than 100000 layers")
            unit = [
                parse_layer_kind(k, f"{where}.pattern") if isinstance(k, str) else None
                for k in pattern
            ]
            if any(k is None for k in unit):
                raise SizingError(f"{where}.pattern", "must list layer kind names")
            kinds.extend([k for k in unit if k is not None] * repeat)
        else:
            raise SizingError(where, "must be a layer kind name or a {pattern, repeat} segment")
    if len(kinds) > 100_000:
        raise SizingError(field, "more than 100000 layers")
    return kinds


def compress_schedule(kinds: Sequence[LayerKind]) -> list[dict[str, Any]]:
    """The shortest list of `{pattern, repeat}` segments (greedy, smallest period first)."""
    segments: list[dict[str, Any]] = []
    i, n = 0, len(kinds)
    while i < n:
        best_period, best_repeat = 1, 1
        for period in range(1, min(16, n - i) + 1):
            unit = kinds[i : i + period]
            repeat = 1
            while kinds[i + repeat * period : i + (repeat + 1) * period] == unit:
                repeat += 1
            if repeat * period > best_repeat * best_period:
                best_period, best_repeat = period, repeat
        segments.append(
            {"pattern": [k.value for k in kinds[i : i + best_period]], "repeat": best_repeat}
        )
        i += best_period * best_repeat
    return segments


def layer_from_dict(kind: LayerKind, data: Mapping[str, Any], field: str) -> Layer:
    cls = LAYER_CLASSES[kind]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names - {"kind"})
    if unknown:
        raise SizingError(f"{field}.{unknown[0]}", f"not a field of {kind.value} layers")
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.name not in data
        ]
        name = missing[0] if missing else ""
        raise SizingError(f"{field}.{name}" if name else field, str(exc)) from None
    except SizingError as exc:
        raise SizingError(f"{field}.{exc.field}", exc.reason) from None


def layer_to_dict(layer: Layer) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(layer).items() if v is not None}


def architecture_from_dict(data: Mapping[str, Any]) -> ModelArchitecture:
    specs_in = data.get("layer_specs")
    if not isinstance(specs_in, Mapping):
        raise SizingError("layer_specs", "must map layer kinds to their geometry")
    specs: dict[LayerKind, Layer] = {}
    for name, geometry in specs_in.items():
        kind = parse_layer_kind(str(name), f"layer_specs.{name}")
        if not isinstance(geometry, Mapping):
            raise SizingError(f"layer_specs.{name}", "must be an object")
        specs[kind] = layer_from_dict(kind, geometry, f"layer_specs.{name}")
    schedule = data.get("layer_schedule")
    if schedule is None:
        raise SizingError("layer_schedule", "is required")
    layers = build_layers(specs, expand_schedule(schedule))
    moe_in = data.get("moe")
    moe = None
    if moe_in is not None:
        if not isinstance(moe_in, Mapping):
            raise SizingError("moe", "must be an object")
        try:
            moe = MixtureOfExperts(**moe_in)
        except TypeError as exc:
            raise SizingError("moe", str(exc)) from None
    kwargs = {k: data[k] for k in _ARCH_FIELDS if data.get(k) is not None}
    try:
        return ModelArchitecture(layers=layers, moe=moe, name=str(data.get("name", "")), **kwargs)
    except TypeError as exc:
        raise SizingError("model", str(exc)) from None


def architecture_to_dict(arch: ModelArchitecture) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    for layer in arch.layers:
        if not isinstance(layer, NoCache) and layer.kind.value not in specs:
            specs[layer.kind.value] = layer_to_dict(layer)
    out: dict[str, Any] = {k: getattr(arch, k) for k in _ARCH_FIELDS}
    out["moe"] = dataclasses.asdict(arch.moe) if arch.moe else None
    out["layer_specs"] = specs
    out["layer_schedule"] = compress_schedule([layer.kind for layer in arch.layers])
    return out
