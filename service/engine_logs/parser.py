"""Read an engine's start-up log, as pasted from `kubectl logs`, into typed figures.

`parse_engine_log` cleans every line (clean.py), matches it against the lines kvplan knows
(patterns.py), keeps the figures of the engine the log belongs to, and reduces them:

* a later line wins over an earlier one from the same rank (a pasted log can hold two
  launches; the last is the one running);
* where ranks print different values, a field takes the main process's value, else the lowest
  rank's; `kv_pool_bytes` takes the minimum over ranks and `kv_pool_bytes_by_rank` keeps each;
* settings take the last value printed (the engine's resolved value follows the flags).

Nothing is derived: a figure the log does not print stays `None`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_EVEN, Decimal

from ..sizing import SizingError
from .clean import CleanLine, clean_plain, plain_text
from .model import (
    ENGINES,
    LINES_PER_PATTERN,
    REPORTED_FIELDS,
    SETTINGS_FIELDS,
    EngineName,
    Figure,
    ParsedLog,
    RankValue,
    RecognisedLine,
    Reported,
    Settings,
    Value,
    ValueKind,
)
from .patterns import (
    LABEL_BYTES,
    LOOKED_FOR,
    PATTERNS,
    VERSION_PATTERNS,
    Capture,
    KeySpec,
    LinePattern,
    VersionPattern,
)

_ENGINE_ALIASES: dict[str, EngineName] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "trtllm": "trtllm",
    "trt-llm": "trtllm",
    "tensorrt-llm": "trtllm",
    "tensorrt_llm": "trtllm",
    "tensorrtllm": "trtllm",
}
_NUMBER_WITH_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?)\s*([A-Za-z]*)$")
_SPACED_ITEM = re.compile(r"\s+(?=\w+=)")
# The largest figure read (bytes, counts, numbers): 2^53 - 1, the largest integer every JSON
# reader holds exactly, 8 PiB, far past any GPU's memory or token count.
MAX_FIGURE = 2**53 - 1
_INTEGER = re.compile(r"^-?(?:\d{1,3}(?:,\d{3})+|\d+)$")
_TRUE = frozenset({"true", "enabled", "1", "yes", "on"})
_FALSE = frozenset({"false", "disabled", "0", "no", "off"})


class LogNotRecognised(SizingError):
    """No line of the text is one kvplan reads; `looked_for` lists the lines it knows."""

    code = "log-not-recognised"

    def __init__(self, line_count: int) -> None:
        self.looked_for = LOOKED_FOR
        if line_count == 0:
            what = "the log is empty"
        else:
            lines = "line is" if line_count == 1 else "lines is"
            what = (
                f"none of its {line_count} non-blank {lines} an engine start-up line kvplan reads"
            )
        super().__init__("log", f"{what}; kvplan looks for {' | '.join(LOOKED_FOR)}")


@dataclass(frozen=True, slots=True)
class _Match:
    engine: EngineName
    pattern: str
    line_number: int
    text: str
    figures: tuple[Figure, ...]


def parse_engine_log(
    text: str, engine_hint: str | None = None, version_hint: str | None = None
) -> ParsedLog:
    """Parse a start-up log of vLLM, SGLang or TensorRT-LLM.

    `engine_hint` ("vllm", "sglang", "trtllm"; "tensorrt-llm" too) picks the engine when the
    log has lines of it; otherwise the engine with the most recognised lines is the log's, and
    only its figures are kept. `version_hint` is the engine version when the log prints none.
    Raises
    `LogNotRecognised` (field "log") when no line is recognised, and `SizingError` (field
    "engine") for an engine hint kvplan does not know.
    """
    hint = _engine(engine_hint)
    # Lines end at \n (\r\n too); a lone \r is a progress bar redrawing the same line.
    raw_lines = text.split("\n")
    cleaned, non_blank = _cleaned_lines(raw_lines)
    ranks = _ranks(cleaned)

    matches: list[_Match] = []
    versions: list[tuple[EngineName, int, int, str]] = []
    hits_of: dict[str, tuple[_Hit, ...]] = {}
    for index, line in cleaned.items():
        number = index + 1
        hits = hits_of.get(line.text)
        if hits is None:
            hits = hits_of[line.text] = _hits(line)
        for hit in hits:
            if isinstance(hit.pattern, VersionPattern):
                versions.append((hit.pattern.engine, hit.pattern.rank, number, hit.found["v"]))
                name = f"{hit.pattern.engine}_version"
                matches.append(_Match(hit.pattern.engine, name, number, line.text, ()))
                continue
            figures = _figures(hit.pattern, hit.found, ranks[index], number)
            if hit.pattern.captures and not figures:
                continue  # its figures are none an engine prints ("1" and 400 zeros)
            matches.append(_Match(hit.pattern.engine, hit.pattern.name, number, line.text, figures))

    if not matches:
        raise LogNotRecognised(non_blank)
    engine = _decide_engine(matches, hint)
    kept = [m for m in matches if m.engine == engine]
    figures = tuple(f for m in kept for f in m.figures)
    shown, omitted = _recognised_lines(kept, figures)
    return ParsedLog(
        engine=engine,
        engine_version=_version(versions, engine, version_hint),
        settings=_settings(figures),
        reported=_reported(figures),
        figures=figures,
        recognised_lines=shown,
        recognised_lines_omitted=omitted,
    )


# ---- finding the lines worth matching ---------------------------------------------------------
#
# A hostile paste is up to the body limit of lines kvplan does not read (a million empty ones,
# the same line 65,000 times), so each line costs one pass: blank lines are skipped before any
# regex; the colours are stripped once; a line that holds none of the texts some pattern
# requires (`patterns.required_literal`, all in one search) is not cleaned further or matched,
# unless it names a process id (`pid=`: another line may borrow the rank it names); and a line
# seen before is cleaned and matched once.


@dataclass(frozen=True, slots=True)
class _Hit:
    pattern: LinePattern | VersionPattern
    found: re.Match[str]


_ALL_PATTERNS: tuple[LinePattern | VersionPattern, ...] = (*PATTERNS, *VERSION_PATTERNS)
_KEYWORDS = tuple(
    sorted({p.keyword for p in _ALL_PATTERNS if p.keyword is not None} | {"pid="}, key=len)
)
_EVERY_LINE = any(pattern.keyword is None for pattern in _ALL_PATTERNS)
_ANY_KEYWORD = re.compile("|".join(re.escape(keyword) for keyword in reversed(_KEYWORDS)))
# Past this length a line is searched for each text in turn (a fast scan each, linear in the
# line) rather than by the one alternation, whose cost grows with the line times the texts
# that start with its letters.
_LONG_LINE = 64


def _worth_matching(plain: str) -> bool:
    if _EVERY_LINE:
        return True
    if len(plain) > _LONG_LINE:
        return any(keyword in plain for keyword in _KEYWORDS)
    return _ANY_KEYWORD.search(plain) is not None


def _cleaned_lines(raw_lines: list[str]) -> tuple[dict[int, CleanLine], int]:
    """The lines worth matching, by index, cleaned (the rest are blank or match nothing), and
    how many lines are not blank (hold anything but whitespace and colour codes)."""
    cleaned: dict[int, CleanLine] = {}
    seen: dict[str, CleanLine | None] = {}
    non_blank = 0
    for index, raw in enumerate(raw_lines):
        if not raw or raw.isspace():
            continue
        line = seen.get(raw, _UNSEEN)
        if line is _UNSEEN:
            plain = plain_text(raw)
            line = None
            if not plain:
                line = _BLANK
            elif _worth_matching(plain):
                line = clean_plain(plain)
            seen[raw] = line
        if line is _BLANK:
            continue
        non_blank += 1
        if line is not None and line.text:
            cleaned[index] = line
    return cleaned, non_blank


# Markers in `_cleaned_lines`' memo: a line not met yet, and one that is only colour codes.
_UNSEEN = CleanLine(text="", message="", rank="", pid=None)
_BLANK = CleanLine(text="", message="", rank="", pid=None)


# Each pattern as `_hits` tries it: its required text, its regex, and whether it reads the
# message (the line without the logger's prefix).
_TRIES = tuple(
    (p.keyword or "", p.regex, isinstance(p, LinePattern) and p.on_message, p)
    for p in _ALL_PATTERNS
)


def _hits(line: CleanLine) -> tuple[_Hit, ...]:
    text, message = line.text, line.message
    hits = []
    for keyword, regex, on_message, pattern in _TRIES:
        if keyword in text:
            found = regex.search(message if on_message else text)
            if found:
                hits.append(_Hit(pattern, found))
    return tuple(hits)


def _engine(hint: str | None) -> EngineName | None:
    if hint is None:
        return None
    engine = _ENGINE_ALIASES.get(hint.strip().lower())
    if engine is None:
        raise SizingError("engine", f"unknown engine {hint!r}; kvplan reads {', '.join(ENGINES)}")
    return engine


def _ranks(cleaned: dict[int, CleanLine]) -> dict[int, str]:
    """Each line's rank; a pid-only prefix takes the rank its process names elsewhere."""
    by_pid: dict[str, str] = {}
    for line in cleaned.values():
        if line.pid and line.rank and not line.rank.startswith("pid "):
            by_pid.setdefault(line.pid, line.rank)
    return {
        index: by_pid.get(line.pid, line.rank) if line.pid else line.rank
        for index, line in cleaned.items()
    }


def _decide_engine(matches: list[_Match], hint: EngineName | None) -> EngineName:
    votes = Counter(m.engine for m in matches)
    if hint is not None and votes[hint] > 0:
        return hint
    best = max(votes.values())
    return next(engine for engine in ENGINES if votes[engine] == best)


def _version(
    versions: list[tuple[EngineName, int, int, str]],
    engine: EngineName,
    hint: str | None,
) -> str | None:
    own = [(rank, -line, value) for name, rank, line, value in versions if name == engine]
    if own:
        return min(own)[2]
    if hint is None:
        return None
    return hint.strip() or None


def _figures(
    pattern: LinePattern, found: re.Match[str], rank: str, line: int
) -> tuple[Figure, ...]:
    out: list[Figure] = []
    for capture in pattern.captures:
        printed = found.group(capture.group)
        if printed is None:
            continue
        figure = _capture_figure(
            capture, printed, found, rank=rank, line=line, pattern=pattern.name
        )
        if figure is not None:
            out.append(figure)
    if pattern.keys:
        wanted = dict(pattern.keys)
        for key, raw in split_items(found.group("items")):
            spec = wanted.get(key)
            if spec is not None:
                figure = _item_figure(spec, raw, rank, line, pattern.name)
                if figure is not None:
                    out.append(figure)
    return tuple(out)


def _capture_figure(
    capture: Capture, printed: str, found: re.Match[str], *, rank: str, line: int, pattern: str
) -> Figure | None:
    label, unit_bytes = capture.label, capture.unit_bytes
    if capture.unit_group is not None:
        label = found.group(capture.unit_group)
        unit_bytes = LABEL_BYTES[label]
    value = _convert(capture.kind, printed, unit_bytes)
    if value is None:
        return None
    return Figure(
        capture.target, capture.field, value, printed, label, unit_bytes, rank, line, pattern
    )


def _item_figure(spec: KeySpec, raw: str, rank: str, line: int, pattern: str) -> Figure | None:
    text = _unquote(raw.strip())
    if text in ("None", "null", ""):
        return None
    label, unit_bytes, printed = "", 1, text
    if spec.kind == "bytes":
        parts = _NUMBER_WITH_UNIT.match(text)
        if parts is None:
            return None
        printed, label = parts.group(1), parts.group(2)
        if label:
            if label not in LABEL_BYTES:
                return None
            unit_bytes = LABEL_BYTES[label]
        elif _INTEGER.match(printed):
            label = "bytes"
        else:
            unit_bytes = spec.unit_bytes
    elif spec.kind == "text" and text.startswith("torch."):
        text = printed = text.removeprefix("torch.")
    value = _convert(spec.kind, printed, unit_bytes)
    if value is None:
        return None
    if spec.negate and isinstance(value, bool):
        value = not value
    return Figure(spec.target, spec.field, value, printed, label, unit_bytes, rank, line, pattern)


def _convert(kind: ValueKind, printed: str, unit_bytes: int) -> Value | None:
    """The printed value, or None where it is not one an engine prints: not a number, or past
    MAX_FIGURE (a pasted "1e999999999 GiB" would otherwise become a billion-digit integer)."""
    plain = printed.replace(",", "")
    try:
        if kind == "bytes":
            exact = Decimal(plain) * unit_bytes
            if not exact.is_finite() or abs(exact) > MAX_FIGURE:
                return None
            return int(exact.to_integral_value(rounding=ROUND_HALF_EVEN))
        if kind == "count":
            count = int(plain) if _INTEGER.match(printed) else None
            return count if count is not None and abs(count) <= MAX_FIGURE else None
        if kind == "number":
            number = float(plain)
            return number if math.isfinite(number) and abs(number) <= MAX_FIGURE else None
    except (ArithmeticError, ValueError):  # decimal's InvalidOperation and Overflow among them
        return None
    if kind == "flag":
        lowered = printed.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        return None
    return printed


def split_items(items: str) -> list[tuple[str, str]]:
    """`key=value, ...` or `'key': value, ...` at the top level of a repr, as pairs.

    Commas inside quotes or brackets do not split; a line cut short keeps the items before
    the cut.
    """
    parts: list[str] = []
    depth, quote, start, index = 0, "", 0, 0
    while index < len(items):
        char = items[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(items[start:index])
            start = index + 1
        index += 1
    parts.append(items[start:])

    pairs: list[tuple[str, str]] = []
    for part in _split_spaced(parts):
        item = part.strip()
        if item[:1] in ("'", '"'):
            end = item.find(item[0], 1)
            if end > 0 and item[end + 1 :].lstrip().startswith(":"):
                value = item[end + 1 :].lstrip()[1:]
                pairs.append((item[1:end], value.strip()))
        elif "=" in item:
            key, value = item.split("=", 1)
            pairs.append((key.strip(), value.strip()))
    return pairs


def _split_spaced(parts: list[str]) -> list[str]:
    """vLLM V0's "Memory profiling results:" separates its items by spaces, not commas."""
    out: list[str] = []
    for part in parts:
        if any(char in part for char in "'\"([{"):
            out.append(part)
        else:
            out.extend(_SPACED_ITEM.split(part.strip()))
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in ("'", '"'):
        inner = value[1:-1]
        return inner.replace("\\\\", "\0").replace(f"\\{value[0]}", value[0]).replace("\0", "\\")
    return value


def _rank_order(figures: tuple[Figure, ...]) -> dict[str, tuple[int, tuple[int | str, ...], int]]:
    """Sort keys for ranks: the main process, then named ranks in natural order (TP0 < TP1 <
    TP10), then pid-only processes in the order they first print."""
    order: dict[str, tuple[int, tuple[int | str, ...], int]] = {}
    for seen, figure in enumerate(figures):
        rank = figure.rank
        if rank in order:
            continue
        if rank == "":
            order[rank] = (0, (), seen)
        elif rank.startswith("pid "):
            order[rank] = (2, (), seen)
        else:
            natural = tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", rank))
            order[rank] = (1, natural, seen)
    return order


def _last_per_rank(figures: tuple[Figure, ...], target: str, field: str) -> dict[str, Figure]:
    last: dict[str, Figure] = {}
    for figure in figures:
        if figure.target == target and figure.field == field:
            last[figure.rank] = figure
    return last


def _reported(figures: tuple[Figure, ...]) -> Reported:
    order = _rank_order(figures)
    values: dict[str, Value] = {}
    by_rank: tuple[RankValue, ...] = ()
    for field in REPORTED_FIELDS:
        last = _last_per_rank(figures, "reported", field)
        if not last:
            continue
        ranked = sorted(last, key=order.__getitem__)
        if field == "kv_pool_bytes":
            pools = [(rank, last[rank].value) for rank in ranked]
            by_rank = tuple(RankValue(rank, int(value)) for rank, value in pools)
            values[field] = min(int(value) for _, value in pools)
        else:
            values[field] = last[ranked[0]].value
    return replace(Reported(), kv_pool_bytes_by_rank=by_rank, **values)  # type: ignore[arg-type]


def _settings(figures: tuple[Figure, ...]) -> Settings:
    values: dict[str, Value] = {}
    for figure in figures:
        if figure.target == "settings" and figure.field in SETTINGS_FIELDS:
            values[figure.field] = figure.value
    return replace(Settings(), **values)  # type: ignore[arg-type]


def _recognised_lines(
    matches: list[_Match], figures: tuple[Figure, ...]
) -> tuple[tuple[RecognisedLine, ...], int]:
    """The recognised lines to echo, and how many are left out: of each pattern its first
    LINES_PER_PATTERN lines and its last, and every line a figure the answer uses was read
    from (the last of each field on each rank, which is the one `_reported` and `_settings`
    keep); so the reduction's rule is not changed, only what is shown of it."""
    kept: set[int] = set()
    count: Counter[str] = Counter()
    last: dict[str, int] = {}
    for match in matches:
        count[match.pattern] += 1
        if count[match.pattern] <= LINES_PER_PATTERN:
            kept.add(match.line_number)
        last[match.pattern] = match.line_number
    kept.update(last.values())
    used: dict[tuple[str, str, str], int] = {}
    for figure in figures:
        used[figure.target, figure.field, figure.rank] = figure.line_number
    kept.update(used.values())

    by_line: dict[int, tuple[str, list[str]]] = {}
    for match in matches:
        _, names = by_line.setdefault(match.line_number, (match.text, []))
        if match.pattern not in names:
            names.append(match.pattern)
    shown = tuple(
        RecognisedLine(number, text, tuple(names))
        for number, (text, names) in sorted(by_line.items())
        if number in kept
    )
    return shown, len(by_line) - len(shown)
