"""A picture as a few drawing primitives, so the SVG and the PNG are drawn from one description.

Coordinates are pixels from the top-left corner. Each primitive may carry `data`: pairs that
the SVG writes as `data-*` attributes (what a segment stands for, its bytes), for people who
inspect the picture and for the tests; the PNG has no place for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Anchor = Literal["start", "middle", "end"]
Data = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    fill: str
    stroke: str | None = None
    data: Data = ()


@dataclass(frozen=True, slots=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    stroke: str
    width: float = 1.0
    dashed: bool = False
    data: Data = ()


@dataclass(frozen=True, slots=True)
class Polyline:
    points: tuple[tuple[float, float], ...]
    stroke: str
    width: float = 2.0
    data: Data = ()


@dataclass(frozen=True, slots=True)
class Circle:
    cx: float
    cy: float
    r: float
    fill: str
    stroke: str | None = None
    data: Data = ()


@dataclass(frozen=True, slots=True)
class Text:
    """One line of text; `y` is its vertical middle, `anchor` which end `x` is."""

    x: float
    y: float
    text: str
    size: int = 12
    fill: str = "#222222"
    anchor: Anchor = "start"
    bold: bool = False
    data: Data = ()


Item = Rect | Line | Polyline | Circle | Text


@dataclass(frozen=True, slots=True)
class Scene:
    width: int
    height: int
    title: str
    description: str
    background: str
    items: tuple[Item, ...]
