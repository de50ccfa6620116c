"""The plain-data form of a `ModelArchitecture` (catalog rows, JSON bodies) and back.

    {
      "num_attention_heads": 24, "dtype": "bfloat16", ...,
      "layer_specs": {"full_attention": {"num_kv_heads": 4, "head_dim": 256},
                      "linear_attention": {"num_key_heads": 16, ...}},
      "layer_schedule": [{"pattern": ["linear_attention", "linear_attention",
                                      "linear_attention", "full_attention"], "repeat": 16}]
    }

`layer_schedule` may also be a flat list of kind names, one per layer. A spec may take any name
when it says its kind (`"mla_shared": {"kind": "mla", ...}`), for models with two geometries of
one kind; the schedule then lists spec names. Every spec must be used by some layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SizingError, UnknownLayerKind
from .architecture import (
    LAYER_CLASSES,
    AttentionShares,
    EncoderGeometry,
    Layer,
    LayerKind,
    MixtureOfExperts,
    ModelArchitecture,
    NoCache,
    RoutedExperts,
    parse_layer_kind,
)

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
    "checkpoint_kv_cache",
    # issue 21: speculative decoding (a model's MTP layers; said only by models that have them)
    "num_nextn_predict_layers",
    "mtp_weight_bytes",
)


def expand_schedule(schedule: Sequence[Any], field: str = "layer_schedule") -> list[str]:
    """Flatten `[{"pattern": [...], "repeat": n}, "full_attention", ...]` into one name a layer."""
    if not isinstance(schedule, Sequence) or isinstance(schedule, str | bytes):
        raise SizingError(field, "must be a list of layer kinds or {pattern, repeat} segments")
    names: list[str] = []
    for index, item in enumerate(schedule):
        where = f"{field}[{index}]"
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping):
            pattern = item.get("pattern")
            repeat = item.get("repeat", 1)
            if not isinstance(pattern, list) or not pattern:
                raise SizingError(f"{where}.pattern", "must be a non-empty list of layer kinds")
            if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
                raise SizingError(f"{where}.repeat", "must be a positive integer")
            if repeat * len(pattern) > 100_000:
                raise SizingError(where, "more than 100000 layers")
            if not all(isinstance(k, str) for k in pattern):
                raise SizingError(f"{where}.pattern", "must list layer kind names")
            names.extend(pattern * repeat)
        else:
            raise SizingError(where, "must be a layer kind name or a {pattern, repeat} segment")
        if len(names) > 100_000:
            raise SizingError(field, "more than 100000 layers")
    return names


def _resolve_schedule(
    names: Sequence[str], specs: Mapping[str, Layer], schedule: Sequence[Any]
) -> tuple[Layer, ...]:
    """Each scheduled name as its geometry; a name is a spec's key or `no_cache`."""
    resolved: dict[str, Layer] = {**specs, LayerKind.NO_CACHE.value: NoCache()}
    layers: list[Layer] = []
    for name in names:
        layer = resolved.get(name)
        if layer is None:
            raise _unknown_name(name, specs, schedule)
        layers.append(layer)
    return tuple(layers)


def _unknown_name(name: str, specs: Mapping[str, Layer], schedule: Sequence[Any]) -> SizingError:
    where = _first_mention(name, schedule)
    try:
        kind = LayerKind(name)
    except ValueError:
        kinds = ", ".join(k.value for k in LayerKind)
        named = f" or one of the layer_specs ({', '.join(specs)})" if specs else ""
        return UnknownLayerKind(
            where, f"unknown layer kind {name!r}; kvplan sizes only: {kinds}{named}"
        )
    return SizingError(
        f"layer_specs.{kind.value}",
        f"{where} is {kind.value} but no geometry is given for that kind",
    )


def _first_mention(name: str, schedule: Sequence[Any]) -> str:
    for index, item in enumerate(schedule):
        if item == name:
            return f"layer_schedule[{index}]"
        if isinstance(item, Mapping) and name in (item.get("pattern") or []):
            return f"layer_schedule[{index}].pattern"
    return "layer_schedule"


def compress_schedule(kinds: Sequence[str]) -> list[dict[str, Any]]:
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
        segments.append({"pattern": list(kinds[i : i + best_period]), "repeat": best_repeat})
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


def layer_to_dict(layer: Layer, name: str | None = None) -> dict[str, Any]:
    out = {k: v for k, v in dataclasses.asdict(layer).items() if v is not None}
    if name is not None and name != layer.kind.value:
        out = {"kind": layer.kind.value, **out}
    return out


def architecture_from_dict(data: Mapping[str, Any]) -> ModelArchitecture:
    specs_in = data.get("layer_specs")
    if not isinstance(specs_in, Mapping):
        raise SizingError("layer_specs", "must map layer kinds to their geometry")
    specs: dict[str, Layer] = {}
    for name, geometry in specs_in.items():
        where = f"layer_specs.{name}"
        if not isinstance(geometry, Mapping):
            raise SizingError(where, "must be an object")
        # A spec is named by its kind, or by any name with a "kind" field (two geometries
        # of one kind, e.g. MLA layers with and without a sparse-attention indexer).
        declared = geometry.get("kind", name)
        if not isinstance(declared, str):
            raise SizingError(f"{where}.kind", "must be a layer kind name")
        kind = parse_layer_kind(declared, f"{where}.kind" if "kind" in geometry else where)
        if kind is LayerKind.NO_CACHE:
            raise SizingError(where, "no_cache layers keep nothing and take no geometry")
        specs[str(name)] = layer_from_dict(kind, geometry, where)
    schedule = data.get("layer_schedule")
    if schedule is None:
        raise SizingError("layer_schedule", "is required")
    names = expand_schedule(schedule)
    mtp_names = _mtp_schedule(data.get("mtp_layer_schedule"), specs)
    unused = [name for name in specs if name not in set(names) | set(mtp_names)]
    if unused:
        raise SizingError(f"layer_specs.{unused[0]}", "is not used by any layer in layer_schedule")
    layers = _resolve_schedule(names, specs, schedule)
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
    encoder_in = data.get("encoder")  # issue 21: the tower vLLM's encoder profile runs
    if encoder_in is not None:
        if not isinstance(encoder_in, Mapping):
            raise SizingError("encoder", "must be an object")
        try:
            kwargs["encoder"] = EncoderGeometry(**encoder_in)
        except TypeError as exc:
            raise SizingError("encoder", str(exc)) from None
    shares_in = data.get("attention_shares")  # issue 21: SGLang DP attention (catalog rows)
    if shares_in is not None:
        kwargs["attention_shares_known"] = _attention_shares_from_dict(shares_in)
    try:
        return ModelArchitecture(
            layers=layers,
            moe=moe,
            name=str(data.get("name", "")),
            mtp_layers=tuple(specs[name] for name in mtp_names),
            **kwargs,
        )
    except TypeError as exc:
        raise SizingError("model", str(exc)) from None


def _mtp_schedule(value: Any, specs: Mapping[str, Layer]) -> list[str]:
    """`mtp_layer_schedule`: the layer_specs names of the MTP layers, one a layer (DeepSeek-V4's
    are window or compressed layers of their own ratio); absent = copies of the last layer."""
    if value is None:
        return []
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise SizingError("mtp_layer_schedule", "must be a list of layer_specs names")
    for index, name in enumerate(value):
        if name not in specs:
            raise SizingError(f"mtp_layer_schedule[{index}]", f"{name!r} is not in layer_specs")
    return [str(name) for name in value]


# issue 21: SGLang's DP attention. The weights it cuts by the attention-TP group, as the
# config's tensors count them (hf_config.py _attention_shares); stored in catalog rows of MoE
# models whose config.json kvplan reads, so the catalog answers as the config does.
_SHARE_PARTS = ("attention", "embedding", "lm_head")


def _attention_shares_from_dict(data: Any) -> AttentionShares:
    """{"attention": {"parameters": p, "bytes": b}, "embedding": {...}, "lm_head": {...}}."""
    if not isinstance(data, Mapping) or set(data) != set(_SHARE_PARTS):
        raise SizingError("attention_shares", f"must map exactly {', '.join(_SHARE_PARTS)}")
    parts: list[RoutedExperts] = []
    for part in _SHARE_PARTS:
        where = f"attention_shares.{part}"
        value = data[part]
        if not isinstance(value, Mapping) or set(value) != {"parameters", "bytes"}:
            raise SizingError(where, "must be {parameters, bytes}")
        numbers = (value["parameters"], value["bytes"])
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in numbers):
            raise SizingError(where, "parameters and bytes must be integers >= 0")
        parts.append(RoutedExperts(*numbers))
    return AttentionShares(*parts)


def architecture_to_dict(arch: ModelArchitecture) -> dict[str, Any]:
    names: dict[Layer, str] = {}
    specs: dict[str, Any] = {}
    for layer in arch.layers + arch.mtp_layers:
        if isinstance(layer, NoCache) or layer in names:
            continue
        # the first geometry of a kind is named by the kind, later ones kind_2, kind_3, ...
        name, n = layer.kind.value, 1
        while name in specs:
            n += 1
            name = f"{layer.kind.value}_{n}"
        names[layer] = name
        specs[name] = layer_to_dict(layer, name)
    out: dict[str, Any] = {k: getattr(arch, k) for k in _ARCH_FIELDS}
    if arch.checkpoint_kv_cache is None:
        # said only by the checkpoints that declare one: every other model's record stays as it was
        del out["checkpoint_kv_cache"]
    if not arch.num_nextn_predict_layers:
        del out["num_nextn_predict_layers"]
    if arch.mtp_weight_bytes is None:
        del out["mtp_weight_bytes"]
    out["moe"] = (
        {k: v for k, v in dataclasses.asdict(arch.moe).items() if v is not None}
        if arch.moe
        else None
    )
    if arch.encoder is not None:  # said only by the VLMs whose tower kvplan profiles
        out["encoder"] = dataclasses.asdict(arch.encoder)
    if arch.attention_shares_known is not None:  # said only by MoE rows read from a config
        out["attention_shares"] = {
            part: dataclasses.asdict(getattr(arch.attention_shares_known, part))
            for part in _SHARE_PARTS
        }
    out["layer_specs"] = specs
    if arch.mtp_layers:
        out["mtp_layer_schedule"] = [names[layer] for layer in arch.mtp_layers]
    out["layer_schedule"] = compress_schedule(
        [
            LayerKind.NO_CACHE.value if isinstance(layer, NoCache) else names[layer]
            for layer in arch.layers
        ]
    )
    return out
