"""The pattern table is consistent with the typed answer: every capture fills a field that
exists, with a value of that field's type, and every line kind names its source."""

from __future__ import annotations

import types
import typing

from service.engine_logs import Reported, Settings
from service.engine_logs.patterns import PATTERNS, VERSION_PATTERNS

TYPE_OF_KIND = {"bytes": int, "count": int, "number": float, "text": str, "flag": bool}


def _field_type(target: str, field: str) -> type:
    hints = typing.get_type_hints(Reported if target == "reported" else Settings)
    assert field in hints, f"{target} has no field {field}"
    annotation = hints[field]
    assert isinstance(annotation, types.UnionType), f"{target}.{field} is not optional"
    (kind,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    assert isinstance(kind, type)
    return kind


def test_every_capture_fills_a_field_of_its_type() -> None:
    for pattern in PATTERNS:
        specs = [(c.target, c.field, c.kind) for c in pattern.captures]
        specs += [(k.target, k.field, k.kind) for _, k in pattern.keys]
        assert specs, f"{pattern.name} captures nothing"
        for target, field, kind in specs:
            assert _field_type(target, field) is TYPE_OF_KIND[kind], (pattern.name, field)


def test_every_group_a_capture_names_exists() -> None:
    for pattern in PATTERNS:
        groups = set(pattern.regex.groupindex)
        for capture in pattern.captures:
            assert capture.group in groups, (pattern.name, capture.group)
            assert capture.unit_group is None or capture.unit_group in groups
        if pattern.keys:
            assert "items" in groups, pattern.name


def test_names_are_unique_and_sources_given() -> None:
    names = [pattern.name for pattern in PATTERNS]
    assert len(names) == len(set(names))
    for pattern in PATTERNS:
        assert pattern.name.startswith(pattern.engine + "_")
        assert pattern.source.strip()
    assert all(version.source.strip() for version in VERSION_PATTERNS)
