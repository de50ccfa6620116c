"""Speed against batch (`speed_scene`): one replica's decode time per token (TPOT) and its
output tokens per second at batches of 1, 2, 4, ... sequences up to the running batch
(max_num_seqs, or the engine's cap where lower), each sequence at max_model_len tokens of
context, on a log-2 x axis shared by two panels. Drawn on them: the memory limit (a vertical
line at max_num_seqs) and, when asked, the latency target (a horizontal line at max_tpot_ms
on the TPOT panel, and a vertical one at the largest batch that meets it).

The figures are the performance model's (planning.service.speed_by_batch): estimates within
the error band the caption quotes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..planning.service import SpeedCurve
from ..sizing import BatchSpeed
from .charts import BACKGROUND, GRID, INK, MUTED, RED, _nice_step, _number, _subtitle, _ticks
from .charts import wrap as _wrap
from .scene import Anchor, Circle, Item, Line, Polyline, Scene, Text

WIDTH, HEIGHT = 760, 600
LEFT, RIGHT = 90.0, 700.0
TPOT_TOP, TPOT_BOTTOM = 95.0, 285.0
RATE_TOP, RATE_BOTTOM = 345.0, 515.0
BLUE, GREEN, ORANGE = "#3b6fb6", "#3f9b57", "#e08a2c"
CAPTION_CHARS = 118


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where the points land: x by log2 of the batch, y linear in each panel."""

    high: int
    ms_max: float
    rate_max: float

    def x(self, batch: int) -> float:
        return LEFT + math.log2(batch) / math.log2(self.high) * (RIGHT - LEFT)

    def y_ms(self, ms: float) -> float:
        return TPOT_BOTTOM - ms * (TPOT_BOTTOM - TPOT_TOP) / self.ms_max

    def y_rate(self, rate: float) -> float:
        return RATE_BOTTOM - rate * (RATE_BOTTOM - RATE_TOP) / self.rate_max


def _rounded_up(value: float) -> float:
    step = _nice_step(value)
    return max(step, -(-value // step) * step)


def _panel(frame: _Frame, top: float, bottom: float, title: str, y_max: float) -> list[Item]:
    items: list[Item] = [Text(LEFT, top - 14, title, size=11, fill=MUTED)]
    for value in _ticks(y_max):
        y = bottom - value * (bottom - top) / y_max
        items.append(Line(LEFT, y, RIGHT, y, GRID))
        items.append(Text(LEFT - 8, y, _number(value), size=11, anchor="end"))
    items.append(Line(LEFT, bottom, RIGHT, bottom, INK))
    items.append(Line(LEFT, top, LEFT, bottom, INK))
    batch = 1
    while batch <= frame.high:
        x = frame.x(batch)
        items.append(Line(x, bottom, x, bottom + 5, INK))
        items.append(Text(x, bottom + 16, f"{batch:,}", size=11, anchor="middle"))
        batch *= 2
    return items


def _series(frame: _Frame, points: tuple[BatchSpeed, ...]) -> list[Item]:
    tpot = tuple((frame.x(p.batch), frame.y_ms(p.decode_ms_per_token)) for p in points)
    rate = tuple((frame.x(p.batch), frame.y_rate(p.output_tokens_per_second)) for p in points)
    items: list[Item] = []
    if len(points) > 1:
        items += [Polyline(tpot, BLUE), Polyline(rate, GREEN)]
    for point, (x, y), (_, y2) in zip(points, tpot, rate, strict=True):
        batch = ("batch", str(point.batch))
        ms = f"{point.decode_ms_per_token:.3f}"
        items.append(Circle(x, y, 3.5, BLUE, data=(("series", "tpot"), batch, ("ms", ms))))
        tokens = f"{point.output_tokens_per_second:.1f}"
        data = (("series", "throughput"), batch, ("tokens-per-second", tokens))
        items.append(Circle(x, y2, 3.5, GREEN, data=data))
    return items


def _vertical(
    frame: _Frame, batch: int, colour: str, *, label: str, marker: str, label_y: float
) -> list[Item]:
    x = frame.x(batch)
    anchor: Anchor = "end" if x > (LEFT + RIGHT) / 2 else "start"
    label_x = x - 6 if anchor == "end" else x + 6
    data = (("marker", marker), ("batch", str(batch)))
    return [
        Line(x, TPOT_TOP, x, RATE_BOTTOM, colour, width=1.5, dashed=True, data=data),
        Text(label_x, label_y, label, size=11, fill=colour, anchor=anchor, bold=True),
    ]


def _target(frame: _Frame, curve: SpeedCurve) -> list[Item]:
    """The max_tpot_ms line on the TPOT panel, and the largest batch that meets it."""
    target, within = curve.max_tpot_ms, curve.within_target
    if target is None:
        return []
    y = frame.y_ms(target)
    items: list[Item] = [
        Line(LEFT, y, RIGHT, y, ORANGE, width=1.5, dashed=True, data=(("marker", "tpot_target"),)),
        Text(LEFT + 6, y - 9, f"max_tpot_ms {target:g}", size=11, fill=ORANGE, bold=True),
    ]
    limit = curve.points[-1].batch
    if within is not None and 0 < within < limit:
        label = f"{within:,} sequences within {target:g} ms"
        items += _vertical(
            frame, within, ORANGE, label=label, marker="within_target", label_y=TPOT_TOP + 26
        )
    return items


def _caption(curve: SpeedCurve) -> str:
    detail = curve.detail
    text = (
        f"Estimated (+/-{(detail.performance_error_band or 0):.0%}: 80% of the published "
        "measurements held back from the fit were within it); every sequence at "
        f"{detail.max_model_len:,} tokens of context."
    )
    target, within, limit = curve.max_tpot_ms, curve.within_target, curve.points[-1].batch
    if target is not None and within == 0:
        text += f" Not even one sequence decodes within {target:g} ms."
    elif target is not None and within is not None and within >= limit:
        text += f" Every batch up to max_num_seqs decodes within {target:g} ms."
    return text


def _footer(text: str, fill: str) -> list[Item]:
    lines = _wrap(text, CAPTION_CHARS)[:2]
    first = HEIGHT - 14 * len(lines) - 6
    return [Text(20, first + 14 * i, line, size=11, fill=fill) for i, line in enumerate(lines)]


def _unavailable(curve: SpeedCurve, title: str) -> Scene:
    reason = f"No speed estimate: {curve.unavailable}"
    items: list[Item] = [
        Text(20, 24, title, size=16, bold=True),
        Text(20, 48, _subtitle(curve.detail), size=12, fill=MUTED),
    ]
    for i, line in enumerate(_wrap(reason, 100)[:6]):
        data = (("label", "unavailable"),) if i == 0 else ()
        items.append(Text(40, 120 + 18 * i, line, size=13, fill=RED, data=data))
    return Scene(WIDTH, HEIGHT, title, reason, BACKGROUND, tuple(items))


def speed_scene(curve: SpeedCurve) -> Scene:
    detail = curve.detail
    title = f"Speed by batch: {detail.model} on {detail.gpu}"
    if curve.unavailable is not None or not curve.points:
        return _unavailable(curve, title)
    points = curve.points
    limit = points[-1].batch
    ms_top = max([p.decode_ms_per_token for p in points] + [curve.max_tpot_ms or 0.0])
    frame = _Frame(
        high=max(limit, 2),
        ms_max=_rounded_up(ms_top * 1.05),
        rate_max=_rounded_up(max(p.output_tokens_per_second for p in points) * 1.05),
    )
    memory = f"max_num_seqs {limit:,} (memory)"
    items: list[Item] = [
        Text(20, 24, title, size=16, bold=True),
        Text(20, 48, _subtitle(detail), size=12, fill=MUTED),
        *_panel(frame, TPOT_TOP, TPOT_BOTTOM, "decode ms per token (TPOT)", frame.ms_max),
        *_panel(frame, RATE_TOP, RATE_BOTTOM, "output tokens/s per replica", frame.rate_max),
        Text((LEFT + RIGHT) / 2, 540, "sequences per replica (batch, log scale)", anchor="middle"),
        *_series(frame, points),
        *_vertical(frame, limit, RED, label=memory, marker="memory_limit", label_y=TPOT_TOP + 8),
        *_target(frame, curve),
        *_footer(_caption(curve), MUTED),
    ]
    series = ", ".join(
        f"{p.batch}: {p.decode_ms_per_token:.1f} ms, {p.output_tokens_per_second:,.0f} tokens/s"
        for p in points
    )
    return Scene(
        width=WIDTH,
        height=HEIGHT,
        title=title,
        description=f"{_subtitle(detail)}. By batch: {series}; {memory}.",
        background=BACKGROUND,
        items=tuple(items),
    )
