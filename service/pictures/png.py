"""A scene as PNG, drawn with Pillow's ImageDraw and the font Pillow bundles (no system fonts).

Same primitives, same coordinates as the SVG; what the PNG cannot hold (the `data-*` pairs)
is left out. Spreadsheet `IMAGE()` functions that do not take SVG get this one.
"""

from __future__ import annotations

import io
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from .scene import Circle, Item, Line, Polyline, Rect, Scene, Text

_ANCHOR = {"start": "lm", "middle": "mm", "end": "rm"}
_DASH, _GAP = 6.0, 4.0


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _dashes(line: Line) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    dx, dy = line.x2 - line.x1, line.y2 - line.y1
    length = (dx * dx + dy * dy) ** 0.5
    if length == 0:
        return []
    ux, uy = dx / length, dy / length
    out = []
    at = 0.0
    while at < length:
        end = min(at + _DASH, length)
        out.append(
            ((line.x1 + ux * at, line.y1 + uy * at), (line.x1 + ux * end, line.y1 + uy * end))
        )
        at = end + _GAP
    return out


def _draw(draw: ImageDraw.ImageDraw, item: Item) -> None:
    if isinstance(item, Rect):
        if item.width <= 0 or item.height <= 0:
            return
        box = (
            round(item.x),
            round(item.y),
            max(round(item.x), round(item.x + item.width) - 1),
            max(round(item.y), round(item.y + item.height) - 1),
        )
        draw.rectangle(box, fill=item.fill, outline=item.stroke)
    elif isinstance(item, Line):
        width = max(1, round(item.width))
        segments = _dashes(item) if item.dashed else [((item.x1, item.y1), (item.x2, item.y2))]
        for start, end in segments:
            draw.line([start, end], fill=item.stroke, width=width)
    elif isinstance(item, Polyline):
        draw.line(
            list(item.points), fill=item.stroke, width=max(1, round(item.width)), joint="curve"
        )
    elif isinstance(item, Circle):
        circle = (item.cx - item.r, item.cy - item.r, item.cx + item.r, item.cy + item.r)
        draw.ellipse(circle, fill=item.fill, outline=item.stroke)
    elif isinstance(item, Text):
        draw.text(
            (item.x, item.y),
            item.text,
            fill=item.fill,
            font=_font(item.size + 1 if item.bold else item.size),
            anchor=_ANCHOR[item.anchor],
        )


def render_png(scene: Scene) -> bytes:
    image = Image.new("RGB", (scene.width, scene.height), scene.background)
    draw = ImageDraw.Draw(image)
    for item in scene.items:
        _draw(draw, item)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()
