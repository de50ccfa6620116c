"""The two pictures, as scenes drawn from capacity answers (the planning use case's output).

**Memory budget of one GPU** (`memory_budget_scene`): one stacked bar of the GPU's memory as
the engine splits it, bottom to top:

* weights: the budget's `weights` line (the engine's view, e.g. SGLang's loading slack), or the
  per-GPU weights when the pool was given;
* engine overhead: every other line the budget subtracts, a negative pool aside (vLLM
  activation peak, non-torch memory and CUDA graphs; SGLang start-up and its reserve;
  TensorRT-LLM warm-up peak and non-torch memory); none when `kv_pool_bytes` was given;
* KV in use: the share of the KV pool that the running sequences at `max_model_len` fill,
  `kv_pool_bytes x sequences x max_model_len // kv_cache_tokens` (the engine's own count of
  tokens in the pool), with sequences = ceil(peak_concurrency / replicas_for_peak_concurrency)
  when a peak is asked and fits, else min(max_num_seqs, the engine's max_num_seqs cap);
* free headroom: the rest of the GPU (the unused pool and what the engine leaves outside it).

**Capacity against context** (`context_scene`): max_num_seqs per replica at each context
length from 1K tokens (doubling) to the model's maximum, on a log-2 x axis, with the requested
length marked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..planning.schemas import CapacityDetail
from ..sizing import GiB
from .scene import Anchor, Circle, Item, Line, Polyline, Rect, Scene, Text

WIDTH, HEIGHT = 760, 440
BACKGROUND = "#ffffff"
INK, MUTED, GRID = "#222222", "#555555", "#e3e3e3"
RED = "#c0392b"

# One colour per segment, far apart so a PNG reader can tell them by their dominant colour.
COLORS = {
    "weights": "#3b6fb6",
    "overhead": "#e08a2c",
    "kv_in_use": "#3f9b57",
    "headroom": "#cfcfcf",
}
LABELS = {
    "weights": "weights",
    "overhead": "engine overhead",
    "kv_in_use": "KV in use",
    "headroom": "free headroom",
}
_OVERHEAD_NAMES = {
    "activation_peak": "activations",
    "non_torch": "non-torch",
    "cudagraph": "CUDA graphs",
    "startup": "start-up",
    "reserved": "reserve",
}

# The bar: where it stands and how tall the largest figure is drawn.
BAR_X, BAR_WIDTH = 110.0, 150.0
PLOT_TOP, PLOT_BOTTOM = 80.0, 390.0
# Characters of 11-px text that fit across the picture with a margin (about 6 px each).
CAPTION_CHARS = 118


@dataclass(frozen=True, slots=True)
class Segment:
    key: str
    bytes: int
    detail: str


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """One GPU's memory, split in the four segments the picture stacks (bytes, per GPU)."""

    gpu_memory_bytes: int
    kv_pool_bytes: int
    sequences: int
    sequences_note: str
    segments: tuple[Segment, ...]

    @property
    def scale_bytes(self) -> int:
        """The figure drawn as the full bar height: the GPU, or what was asked of it."""
        used = sum(s.bytes for s in self.segments if s.key != "headroom")
        return max(self.gpu_memory_bytes, used, 1)


def gib(value: int) -> str:
    return f"{value / GiB:.2f} GiB"


def _budget_lines(detail: CapacityDetail) -> list[tuple[str, int]]:
    explanation: dict[str, Any] = detail.explanation or {}
    lines = explanation.get("memory_budget", {}).get("lines", [])
    return [(str(line["name"]), int(line["bytes"])) for line in lines]


def _weights_per_gpu(detail: CapacityDetail) -> int:
    explanation: dict[str, Any] = detail.explanation or {}
    return int(explanation.get("per_gpu", {}).get("weights_bytes_per_gpu", 0))


def running_sequences(detail: CapacityDetail) -> tuple[int, str]:
    """Sequences one replica runs: at the asked peak, or as many as fit (engine cap applied)."""
    cap = detail.engine_settings.get("max_num_seqs")
    most = min(detail.max_num_seqs, cap) if isinstance(cap, int) else detail.max_num_seqs
    peak, replicas = detail.peak_concurrency, detail.replicas_for_peak_concurrency
    if peak is not None and replicas:
        per_replica = min(most, -(-peak // replicas))
        return per_replica, f"peak_concurrency {peak:,} over {replicas:,} replica(s)"
    return most, "max_num_seqs (no peak_concurrency given)"


def memory_budget(detail: CapacityDetail) -> MemoryBudget:
    """The four segments of one GPU from a capacity answer with its explanation."""
    lines = _budget_lines(detail)
    by_name = dict(lines)
    weights = -by_name["weights"] if "weights" in by_name else _weights_per_gpu(detail)
    spent = [
        (name, -value)
        for name, value in lines
        if value < 0 and name not in ("weights", "kv_cache_memory")
    ]
    overhead = sum(value for _, value in spent)
    pool = detail.kv_pool_bytes
    sequences, note = running_sequences(detail)
    in_use = 0
    if pool > 0 and detail.kv_cache_tokens > 0:
        in_use = min(pool, pool * sequences * detail.max_model_len // detail.kv_cache_tokens)
    headroom = max(0, detail.gpu_memory_bytes - weights - overhead - in_use)
    unused_pool = max(0, pool - in_use)
    if spent:
        overhead_detail = " + ".join(f"{_OVERHEAD_NAMES.get(n, n)} {gib(v)}" for n, v in spent)
    else:
        overhead_detail = "not estimated: the KV pool was given"
    segments = (
        Segment("weights", weights, "model weights on this GPU"),
        Segment("overhead", overhead, overhead_detail),
        Segment(
            "kv_in_use",
            in_use,
            f"{sequences:,} sequences x {detail.max_model_len:,} tokens: {note}",
        ),
        Segment(
            "headroom",
            headroom,
            f"KV pool unused {gib(unused_pool)} + outside the pool "
            f"{gib(max(0, headroom - unused_pool))}",
        ),
    )
    return MemoryBudget(
        gpu_memory_bytes=detail.gpu_memory_bytes,
        kv_pool_bytes=pool,
        sequences=sequences,
        sequences_note=note,
        segments=segments,
    )


def _nice_step(top: float, count: int = 5) -> float:
    """A 1-2-5 step that cuts 0..top in about `count` intervals."""
    if top <= 0:
        return 1.0
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _ticks(top: float, count: int = 5) -> list[float]:
    step = _nice_step(top, count)
    return [i * step for i in range(int(top // step) + 1)]


def _subtitle(detail: CapacityDetail) -> str:
    engine = detail.engine + (f" {detail.engine_version}" if detail.engine_version else "")
    layout = f"TP {detail.tensor_parallel_size}"
    if detail.pipeline_parallel_size > 1:
        layout += f" x PP {detail.pipeline_parallel_size}"
    return (
        f"{engine}, {layout}, max_model_len {detail.max_model_len:,}, "
        f"kv_cache_dtype {detail.kv_cache_dtype}"
    )


def wrap(text: str, width: int = CAPTION_CHARS) -> list[str]:
    """Words on lines of at most `width` characters (a longer word gets a line of its own)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _caption(text: str, fill: str) -> list[Item]:
    """At most two lines at the foot of the picture; what does not fit ends in an ellipsis."""
    lines = wrap(text)
    if len(lines) > 2:
        lines = [lines[0], lines[1][: CAPTION_CHARS - 3] + "..."]
    first = HEIGHT - 14 * len(lines) - 6
    return [Text(20, first + 14 * i, line, size=11, fill=fill) for i, line in enumerate(lines)]


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def _gib_axis(budget: MemoryBudget, per_byte: float) -> list[Item]:
    axis_x = BAR_X - 10
    items: list[Item] = [Line(axis_x, PLOT_TOP, axis_x, PLOT_BOTTOM, INK)]
    for value in _ticks(budget.scale_bytes / GiB):
        y = PLOT_BOTTOM - value * GiB * per_byte
        items.append(Line(axis_x - 4, y, axis_x, y, INK))
        items.append(Text(axis_x - 8, y, f"{_number(value)} GiB", size=11, anchor="end"))
    return items


def _stacked_bar(budget: MemoryBudget, per_byte: float) -> tuple[list[Item], dict[str, float]]:
    """The segments bottom up, and the middle of each (where its legend line starts)."""
    items: list[Item] = []
    mids: dict[str, float] = {}
    bottom = PLOT_BOTTOM
    for segment in budget.segments:
        h = segment.bytes * per_byte
        top = bottom - h
        data = (("segment", segment.key), ("bytes", str(segment.bytes)))
        items.append(Rect(BAR_X, top, BAR_WIDTH, h, COLORS[segment.key], data=data))
        mids[segment.key] = (top + bottom) / 2
        bottom = top
    return items, mids


def _gpu_memory_marker(budget: MemoryBudget, per_byte: float) -> list[Item]:
    total_y = PLOT_BOTTOM - budget.gpu_memory_bytes * per_byte
    right = BAR_X + BAR_WIDTH + 12
    label = f"GPU memory {gib(budget.gpu_memory_bytes)}"
    marker = (("marker", "gpu_memory"),)
    return [
        Line(BAR_X - 10, total_y, right, total_y, INK, dashed=True, data=marker),
        # a white ground, so the label reads over a segment too
        Rect(right - 6.2 * len(label), total_y - 17, 6.2 * len(label), 14, BACKGROUND),
        Text(right, total_y - 10, label, size=11, anchor="end"),
    ]


def _legend(budget: MemoryBudget, mids: dict[str, float]) -> list[Item]:
    """One row per segment, top down, each tied to its segment by a line."""
    items: list[Item] = []
    legend_x, row_y = 330.0, 105.0
    for segment in reversed(budget.segments):
        share = segment.bytes / budget.gpu_memory_bytes if budget.gpu_memory_bytes else 0.0
        items.append(Line(BAR_X + BAR_WIDTH, mids[segment.key], legend_x - 6, row_y, "#999999"))
        items.append(Rect(legend_x, row_y - 7, 14, 14, COLORS[segment.key], stroke="#777777"))
        title = f"{LABELS[segment.key]}: {gib(segment.bytes)} ({share:.0%})"
        data = (("label", segment.key),)
        items.append(Text(legend_x + 22, row_y, title, size=13, bold=True, data=data))
        items.append(Text(legend_x + 22, row_y + 19, segment.detail, size=11, fill=MUTED))
        row_y += 72
    return items


def _budget_caption(detail: CapacityDetail, budget: MemoryBudget) -> list[Item]:
    if not detail.fits:
        return _caption(f"Does not fit: {detail.reason or ''}", RED)
    caption = (
        f"KV pool {gib(budget.kv_pool_bytes)} holds {detail.max_num_seqs:,} sequences of "
        f"{detail.max_model_len:,} tokens (max_concurrency {detail.max_concurrency:,.2f})"
    )
    return _caption(caption, MUTED)


def memory_budget_scene(detail: CapacityDetail) -> Scene:
    budget = memory_budget(detail)
    per_byte = (PLOT_BOTTOM - PLOT_TOP) / budget.scale_bytes
    bar, mids = _stacked_bar(budget, per_byte)
    items: list[Item] = [
        Text(20, 24, f"GPU memory budget: {detail.model} on {detail.gpu}", size=16, bold=True),
        Text(20, 48, _subtitle(detail), size=12, fill=MUTED),
        *_gib_axis(budget, per_byte),
        *bar,
        *_gpu_memory_marker(budget, per_byte),
        *_legend(budget, mids),
        *_budget_caption(detail, budget),
    ]
    segments = ", ".join(f"{LABELS[s.key]} {gib(s.bytes)}" for s in budget.segments)
    return Scene(
        width=WIDTH,
        height=HEIGHT,
        title=f"GPU memory budget: {detail.model} on {detail.gpu}",
        description=f"{_subtitle(detail)}. {segments}; GPU memory {gib(budget.gpu_memory_bytes)}.",
        background=BACKGROUND,
        items=tuple(items),
    )


# ---------------------------------------------------------------------------------------------
# capacity against context

PLOT_LEFT, PLOT_RIGHT = 90.0, 720.0
FIRST_CONTEXT = 1024


@dataclass(frozen=True, slots=True)
class ContextPoint:
    max_model_len: int
    max_num_seqs: int


def context_lengths(requested: int, model_max: int | None) -> list[int]:
    """1K, 2K, 4K, ... up to the model's maximum, with the maximum and the requested length."""
    high = max(model_max or requested, requested)
    lengths = {requested, high}
    n = FIRST_CONTEXT
    while n < high:
        lengths.add(n)
        n *= 2
    return sorted(lengths)


def tokens_label(n: int) -> str:
    """1024 -> 1K, 131072 -> 128K, 1048576 -> 1M; other lengths as they are."""
    for unit, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n:,}"


def x_position(n: int, low: int, high: int) -> float:
    if high <= low:
        return (PLOT_LEFT + PLOT_RIGHT) / 2
    share = (math.log2(n) - math.log2(low)) / (math.log2(high) - math.log2(low))
    return PLOT_LEFT + share * (PLOT_RIGHT - PLOT_LEFT)


@dataclass(frozen=True, slots=True)
class _ContextFrame:
    """Where the context plot's points land: x by log2 of the tokens, y by sequences."""

    low: int
    high: int
    y_max: float

    def x(self, tokens: int) -> float:
        return x_position(tokens, self.low, self.high)

    def y(self, seqs: float) -> float:
        return PLOT_BOTTOM - seqs * (PLOT_BOTTOM - PLOT_TOP) / self.y_max


def _context_axes(frame: _ContextFrame) -> list[Item]:
    items: list[Item] = [
        Text(PLOT_LEFT, PLOT_TOP - 14, "max_num_seqs per replica", size=11, fill=MUTED)
    ]
    for value in _ticks(frame.y_max):
        y = frame.y(value)
        items.append(Line(PLOT_LEFT, y, PLOT_RIGHT, y, GRID))
        items.append(Text(PLOT_LEFT - 8, y, _number(value), size=11, anchor="end"))
    items.append(Line(PLOT_LEFT, PLOT_BOTTOM, PLOT_RIGHT, PLOT_BOTTOM, INK))
    items.append(Line(PLOT_LEFT, PLOT_TOP, PLOT_LEFT, PLOT_BOTTOM, INK))
    tick = 1
    while tick < frame.low:
        tick *= 2
    while tick <= frame.high:
        x = frame.x(tick)
        items.append(Line(x, PLOT_BOTTOM, x, PLOT_BOTTOM + 5, INK))
        items.append(Text(x, PLOT_BOTTOM + 16, tokens_label(tick), size=11, anchor="middle"))
        tick *= 2
    middle = (PLOT_LEFT + PLOT_RIGHT) / 2
    axis_title = "max_model_len (tokens, log scale)"
    items.append(Text(middle, 420, axis_title, size=12, anchor="middle", fill=MUTED))
    return items


def _context_series(frame: _ContextFrame, points: Sequence[ContextPoint]) -> list[Item]:
    xy = tuple((frame.x(p.max_model_len), frame.y(p.max_num_seqs)) for p in points)
    items: list[Item] = [Polyline(xy, "#3b6fb6", width=2)] if len(xy) > 1 else []
    for point, (x, y) in zip(points, xy, strict=True):
        data = (("tokens", str(point.max_model_len)), ("seqs", str(point.max_num_seqs)))
        items.append(Circle(x, y, 3.5, "#3b6fb6", data=data))
    return items


def _requested_marker(frame: _ContextFrame, requested: ContextPoint) -> tuple[list[Item], str]:
    rx, ry = frame.x(requested.max_model_len), frame.y(requested.max_num_seqs)
    data = (
        ("requested", "true"),
        ("tokens", str(requested.max_model_len)),
        ("seqs", str(requested.max_num_seqs)),
    )
    label = f"{requested.max_model_len:,} tokens: {requested.max_num_seqs:,} sequences"
    anchor: Anchor = "start" if rx < (PLOT_LEFT + PLOT_RIGHT) / 2 else "end"
    label_x = rx + 12 if anchor == "start" else rx - 12
    label_y = max(PLOT_TOP + 10, ry - 16)
    items: list[Item] = [
        Line(rx, PLOT_TOP, rx, PLOT_BOTTOM, RED, dashed=True),
        Circle(rx, ry, 7, RED, stroke="#ffffff", data=data),
        Text(
            label_x,
            label_y,
            label,
            size=12,
            fill=RED,
            anchor=anchor,
            bold=True,
            data=(("label", "requested"),),
        ),
    ]
    return items, label


def context_scene(detail: CapacityDetail, points: Sequence[ContextPoint]) -> Scene:
    """max_num_seqs against max_model_len; `detail` is the requested point's answer."""
    requested = ContextPoint(detail.max_model_len, detail.max_num_seqs)
    points = sorted(
        {p.max_model_len: p for p in [*points, requested]}.values(), key=lambda p: p.max_model_len
    )
    top_value = max(1, *(p.max_num_seqs for p in points))
    step = _nice_step(top_value)
    frame = _ContextFrame(
        points[0].max_model_len, points[-1].max_model_len, math.ceil(top_value / step) * step
    )
    title = f"Sequences that fit by context: {detail.model} on {detail.gpu}"
    subtitle = (
        _subtitle(detail).split(", max_model_len")[0] + f", kv_cache_dtype {detail.kv_cache_dtype}"
    )
    marker, label = _requested_marker(frame, requested)
    items: list[Item] = [
        Text(20, 24, title, size=16, bold=True),
        Text(20, 48, subtitle, size=12, fill=MUTED),
        *_context_axes(frame),
        *_context_series(frame, points),
        *marker,
    ]
    series = ", ".join(f"{tokens_label(p.max_model_len)}: {p.max_num_seqs}" for p in points)
    return Scene(
        width=WIDTH,
        height=HEIGHT,
        title=title,
        description=f"max_num_seqs by max_model_len ({series}); requested {label}.",
        background=BACKGROUND,
        items=tuple(items),
    )
