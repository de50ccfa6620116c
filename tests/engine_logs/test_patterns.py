"""The pattern table is consistent with the typed answer: every capture fills a field that
exists, with a value of that field's type, and every line kind names its source."""

from __future__ import annotations

import re
import types
import typing

from service.engine_logs import Reported, Settings
from service.engine_logs.clean import CleanLine, clean_line
from service.engine_logs.patterns import PATTERNS, VERSION_PATTERNS, required_literal

from .calibration import HERE, load_entries, read_log

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


def _real_lines() -> list[CleanLine]:
    """Every line of the calibration logs and the whole logs kept beside them, cleaned."""
    texts = [entry["quote"] for entry in load_entries()]
    texts += [read_log(path.name) for path in sorted((HERE / "logs").iterdir())]
    return [clean_line(raw) for text in texts for raw in text.split("\n")]


def test_every_line_a_pattern_matches_holds_its_required_text() -> None:
    # The parser skips a line without a pattern's required text before trying its regex; on
    # every real line, a line the regex matches has the text, so skipping it loses nothing.
    tried = 0
    for line in _real_lines():
        for pattern in (*PATTERNS, *VERSION_PATTERNS):
            found = pattern.regex.search(line.text) or pattern.regex.search(line.message)
            if found and pattern.keyword is not None:
                assert pattern.keyword in line.text, (pattern.regex.pattern, line.text)
                tried += 1
    assert tried > 500


def test_the_required_text_is_what_no_match_can_do_without() -> None:
    cases = {
        # an optional "#" and an alternation in a group: only what follows is required
        r"(?:#\s*)?(?:GPU|CUDA|cuda) blocks: (?P<b>\d+)": " blocks: ",
        # "an?": the "n" may be left out; a class ends the run
        r"Initializing an? (?:V[01] )?LLM engine \(v[^)\s]+\) with config: (?P<i>.*)": (
            ") with config: "
        ),
        # escaped punctuation is itself; a group's own text counts when nothing can drop it
        r"(?P<items>max_seq_len=\d+, max_num_requests=\d+)": ", max_num_requests=",
        r"[Dd]esired GPU memory utilization": "esired GPU memory utilization",
        # an alternation at the top: nothing is required
        r"took (?P<a>\d+) GiB|took (?P<b>\d+) GB": None,
        r"a+b?": None,  # too short to be worth a search
    }
    for regex, required in cases.items():
        assert required_literal(re.compile(regex)) == required, regex
    assert required_literal(re.compile("Available KV cache", re.IGNORECASE)) is None
