"""The traffic pictures: a simulation drawn (POST /v1/pictures/simulation) and latency against
request rate (POST /v1/pictures/latency-vs-rate).

`timeline_scene`: one replica's running and waiting requests (top panel) and the share of its
KV pool's blocks in use (bottom panel) against simulated time, from the answer's `time_series`
(the engine's samples, service/simulation/engine.py). `latency_scene`: TTFT and TPOT p50/p99
(two panels) against the offered request rate, each point one simulation of the same workload
at that rate; the first rate at which requests queue for room in the engine is marked as
saturation (`RatePoint.saturated`). The figures are the simulator's, each
step timed by kvplan's speed model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..simulations.schemas import SimulationAnswer
from .charts import BACKGROUND, GRID, INK, MUTED, RED, _nice_step, _number, _ticks
from .charts import wrap as _wrap
from .scene import Circle, Item, Line, Polyline, Scene, Text

WIDTH, HEIGHT = 760, 600
LEFT, RIGHT = 90.0, 700.0
TOP_TOP, TOP_BOTTOM = 95.0, 285.0
LOW_TOP, LOW_BOTTOM = 345.0, 515.0
BLUE, GREEN, ORANGE, PURPLE = "#3b6fb6", "#3f9b57", "#e08a2c", "#7d3c98"
CAPTION_CHARS = 118
# A rate is past saturation when at least this many requests wait for room on average.
SATURATED_WAITING = 1.0


def rounded_up(value: float) -> float:
    """The axis top: `value` rounded up to a 1-2-5 step (at least one step)."""
    step = _nice_step(value)
    return max(step, -(-value // step) * step)


@dataclass(frozen=True, slots=True)
class Axis:
    """A linear axis: 0..`high` in value onto `start`..`end` in pixels."""

    high: float
    start: float
    end: float

    def at(self, value: float) -> float:
        return self.start + value / self.high * (self.end - self.start)


def _panel(x: Axis, y: Axis, title: str) -> list[Item]:
    top, bottom = y.end, y.start
    items: list[Item] = [Text(LEFT, top - 14, title, size=11, fill=MUTED)]
    for value in _ticks(y.high):
        items.append(Line(LEFT, y.at(value), RIGHT, y.at(value), GRID))
        items.append(Text(LEFT - 8, y.at(value), _number(value), size=11, anchor="end"))
    for value in _ticks(x.high):
        items.append(Line(x.at(value), bottom, x.at(value), bottom + 5, INK))
        items.append(Text(x.at(value), bottom + 16, _number(value), size=11, anchor="middle"))
    items.append(Line(LEFT, bottom, RIGHT, bottom, INK))
    items.append(Line(LEFT, top, LEFT, bottom, INK))
    return items


def _legend(entries: Sequence[tuple[str, str]], y: float) -> list[Item]:
    items: list[Item] = []
    x = RIGHT
    for label, colour in reversed(entries):
        items.append(Text(x, y, label, size=11, fill=colour, anchor="end", bold=True))
        x -= 9 + 7 * len(label)
    return items


def _footer(text: str) -> list[Item]:
    lines = _wrap(text, CAPTION_CHARS)[:2]
    first = HEIGHT - 14 * len(lines) - 6
    return [Text(20, first + 14 * i, line, size=11, fill=MUTED) for i, line in enumerate(lines)]


def traffic_subtitle(answer: SimulationAnswer) -> str:
    engine = answer.engine
    version = f" {engine.engine_version}" if engine.engine_version else ""
    name = "SGLang" if engine.engine == "sglang" else "vLLM"
    return f"{name}{version}, one replica: {engine.limits_text()}"


def timeline_scene(answer: SimulationAnswer) -> Scene:
    """Running and waiting requests, and KV usage, over the simulated time."""
    title = f"A simulation over time: {answer.model} on {answer.gpu or 'the GPU given'}"
    samples = answer.time_series
    end = max([answer.duration_s] + [s.time_s for s in samples])
    peak = max([s.running + s.waiting for s in samples] + [1])
    x = Axis(rounded_up(end) if end > 0 else 1.0, LEFT, RIGHT)
    requests = Axis(rounded_up(peak * 1.05), TOP_BOTTOM, TOP_TOP)
    usage = Axis(100.0, LOW_BOTTOM, LOW_TOP)
    items: list[Item] = [
        Text(20, 24, title, size=16, bold=True),
        Text(20, 48, traffic_subtitle(answer), size=12, fill=MUTED),
        *_panel(x, requests, "requests in the engine"),
        *_panel(x, usage, "KV pool blocks in use, %"),
        Text((LEFT + RIGHT) / 2, 540, "simulated time, s", anchor="middle"),
        *_legend([("running", BLUE), ("waiting", ORANGE)], TOP_TOP - 14),
    ]
    series = (
        ("running", BLUE, requests, [float(s.running) for s in samples]),
        ("waiting", ORANGE, requests, [float(s.waiting) for s in samples]),
        ("kv_usage", GREEN, usage, [100 * s.kv_usage for s in samples]),
    )
    for name, colour, axis, values in series:
        points = tuple((x.at(s.time_s), axis.at(v)) for s, v in zip(samples, values, strict=True))
        if len(points) > 1:
            items.append(Polyline(points, colour, width=1.5, data=(("series", name),)))
    limit = requests.at(answer.engine.max_num_seqs)
    if answer.engine.max_num_seqs <= requests.high:
        data = (("marker", "max_num_seqs"),)
        items.append(Line(LEFT, limit, RIGHT, limit, RED, width=1.5, dashed=True, data=data))
        label = f"max_num_seqs {answer.engine.max_num_seqs:,}"
        items.append(Text(LEFT + 6, limit - 9, label, size=11, fill=RED, bold=True))
    peak_y = usage.at(100 * answer.peak_kv_usage)
    items.append(
        Line(LEFT, peak_y, RIGHT, peak_y, RED, dashed=True, data=(("marker", "peak_kv_usage"),))
    )
    caption = (
        f"{answer.completed_requests:,} requests completed in {answer.duration_s:,.1f} s; mean "
        f"running {answer.mean_running:.1f}, mean waiting {answer.mean_waiting:.1f}, peak KV "
        f"usage {answer.peak_kv_usage:.0%}, {answer.preemptions:,} preemptions. Simulated, "
        "each step timed by kvplan's speed model."
    )
    items += _footer(caption)
    return Scene(
        width=WIDTH,
        height=HEIGHT,
        title=title,
        description=f"{traffic_subtitle(answer)}. {caption}",
        background=BACKGROUND,
        items=tuple(items),
    )


@dataclass(frozen=True, slots=True)
class RatePoint:
    """One simulation of the sweep: the rate offered, the rate served over the run (requests
    / the run's length), the mean number of requests waiting for room, and the percentiles."""

    request_rate: float
    served_rate: float
    mean_waiting: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None

    @property
    def saturated(self) -> bool:
        """Requests queue for room in the engine (KV blocks or max_num_seqs): at least
        SATURATED_WAITING waiting on average over the run. The served rate alone cannot say
        it in a finite run: a replica that keeps up still ends one latency after the last
        arrival, so its served rate is below the offered one by that share of the run."""
        return self.mean_waiting >= SATURATED_WAITING


@dataclass(frozen=True, slots=True)
class RateSweep:
    """The sweep drawn: its points (rising rates), the deployment's words, the targets."""

    model: str
    gpu: str | None
    subtitle: str
    points: tuple[RatePoint, ...]
    max_ttft_ms: float | None = None
    max_tpot_ms: float | None = None


def _latency_series(x: Axis, y: Axis, points: Sequence[RatePoint], metric: str) -> list[Item]:
    items: list[Item] = []
    for quantile, colour in (("p50", BLUE), ("p99", PURPLE)):
        attribute = f"{metric}_{quantile}_ms"
        known = [(p, getattr(p, attribute)) for p in points if getattr(p, attribute) is not None]
        coordinates = tuple((x.at(p.request_rate), y.at(v)) for p, v in known)
        if len(coordinates) > 1:
            items.append(Polyline(coordinates, colour))
        for (p, value), (cx, cy) in zip(known, coordinates, strict=True):
            data = (
                ("series", f"{metric}_{quantile}"),
                ("rate", f"{p.request_rate:g}"),
                ("ms", f"{value:.3f}"),
            )
            items.append(Circle(cx, cy, 3.5, colour, data=data))
    return items


def _target_line(y: Axis, target: float | None, name: str) -> list[Item]:
    if target is None or target > y.high:
        return []
    at = y.at(target)
    return [
        Line(LEFT, at, RIGHT, at, ORANGE, width=1.5, dashed=True, data=(("marker", name),)),
        Text(LEFT + 6, at - 9, f"{name} {target:g}", size=11, fill=ORANGE, bold=True),
    ]


def _saturation(x: Axis, points: Sequence[RatePoint]) -> tuple[list[Item], str]:
    first = next((p for p in points if p.saturated), None)
    if first is None:
        return [], "At each rate the engine admits requests as they come (under 1 waiting)."
    at = x.at(first.request_rate)
    label = f"saturated: {first.mean_waiting:.1f} waiting on average"
    data = (("marker", "saturation"), ("rate", f"{first.request_rate:g}"))
    items: list[Item] = [
        Line(at, TOP_TOP, at, LOW_BOTTOM, RED, width=1.5, dashed=True, data=data),
        Text(at - 6, TOP_TOP + 8, label, size=11, fill=RED, anchor="end", bold=True),
    ]
    text = (
        f"From {first.request_rate:g} req/s requests queue for room (served "
        f"{first.served_rate:.2f} req/s): TTFT grows with the run."
    )
    return items, text


def latency_scene(sweep: RateSweep) -> Scene:
    """TTFT and TPOT p50/p99 against the request rate, one simulation per rate."""
    title = f"Latency against request rate: {sweep.model} on {sweep.gpu or 'the GPU given'}"
    points = sweep.points
    top_rate = max(p.request_rate for p in points)

    def highest(*values: float | None) -> float:
        return max([v for v in values if v is not None] + [1e-3])

    ttft_top = highest(sweep.max_ttft_ms, *(p.ttft_p99_ms for p in points))
    tpot_top = highest(sweep.max_tpot_ms, *(p.tpot_p99_ms for p in points))
    x = Axis(rounded_up(top_rate), LEFT, RIGHT)
    ttft = Axis(rounded_up(ttft_top * 1.05), TOP_BOTTOM, TOP_TOP)
    tpot = Axis(rounded_up(tpot_top * 1.05), LOW_BOTTOM, LOW_TOP)
    marks, saturation = _saturation(x, points)
    items: list[Item] = [
        Text(20, 24, title, size=16, bold=True),
        Text(20, 48, sweep.subtitle, size=12, fill=MUTED),
        *_panel(x, ttft, "time to first token (TTFT), ms"),
        *_panel(x, tpot, "time per output token (TPOT), ms"),
        Text((LEFT + RIGHT) / 2, 540, "request rate offered, requests/s", anchor="middle"),
        *_legend([("p50", BLUE), ("p99", PURPLE)], TOP_TOP - 14),
        *_latency_series(x, ttft, points, "ttft"),
        *_latency_series(x, tpot, points, "tpot"),
        *_target_line(ttft, sweep.max_ttft_ms, "max_ttft_ms"),
        *_target_line(tpot, sweep.max_tpot_ms, "max_tpot_ms"),
        *marks,
        *_footer(
            f"Each point one simulation of the workload at that Poisson rate, each step timed "
            f"by kvplan's speed model. {saturation}"
        ),
    ]

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f}"

    series = "; ".join(
        f"{p.request_rate:g}/s: TTFT p50 {ms(p.ttft_p50_ms)} p99 {ms(p.ttft_p99_ms)} ms, "
        f"TPOT p50 {ms(p.tpot_p50_ms)} p99 {ms(p.tpot_p99_ms)} ms"
        for p in points
    )
    return Scene(
        width=WIDTH,
        height=HEIGHT,
        title=title,
        description=f"{sweep.subtitle}. {series}. {saturation}",
        background=BACKGROUND,
        items=tuple(items),
    )
