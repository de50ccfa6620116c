"""A scene as SVG, written by hand: presentation attributes only (no <style>, no script).

Every text and attribute value is escaped, and characters XML 1.0 cannot carry are dropped, so
a model label taken from a pasted config.json cannot break the document.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

from .scene import Circle, Data, Item, Line, Polyline, Rect, Scene

FONT_FAMILY = "DejaVu Sans, Verdana, Arial, sans-serif"
# Code points XML 1.0 does not allow (§2.2 Char), C0 controls but tab, newline and return.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def clean(text: str) -> str:
    return _NOT_XML.sub("", text)


def _text(text: str) -> str:
    return escape(clean(text))


def _attr(value: str) -> str:
    return quoteattr(clean(value))


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def _attrs(pairs: list[tuple[str, str]], data: Data) -> str:
    parts = [f"{name}={_attr(value)}" for name, value in pairs]
    parts += [f"data-{name}={_attr(value)}" for name, value in data]
    return " ".join(parts)


def _item(item: Item) -> str:
    if isinstance(item, Rect):
        pairs = [
            ("x", _num(item.x)),
            ("y", _num(item.y)),
            ("width", _num(item.width)),
            ("height", _num(item.height)),
            ("fill", item.fill),
        ]
        if item.stroke:
            pairs.append(("stroke", item.stroke))
        return f"<rect {_attrs(pairs, item.data)}/>"
    if isinstance(item, Line):
        pairs = [
            ("x1", _num(item.x1)),
            ("y1", _num(item.y1)),
            ("x2", _num(item.x2)),
            ("y2", _num(item.y2)),
            ("stroke", item.stroke),
            ("stroke-width", _num(item.width)),
        ]
        if item.dashed:
            pairs.append(("stroke-dasharray", "6 4"))
        return f"<line {_attrs(pairs, item.data)}/>"
    if isinstance(item, Polyline):
        points = " ".join(f"{_num(x)},{_num(y)}" for x, y in item.points)
        pairs = [
            ("points", points),
            ("fill", "none"),
            ("stroke", item.stroke),
            ("stroke-width", _num(item.width)),
        ]
        return f"<polyline {_attrs(pairs, item.data)}/>"
    if isinstance(item, Circle):
        pairs = [
            ("cx", _num(item.cx)),
            ("cy", _num(item.cy)),
            ("r", _num(item.r)),
            ("fill", item.fill),
        ]
        if item.stroke:
            pairs.append(("stroke", item.stroke))
        return f"<circle {_attrs(pairs, item.data)}/>"
    pairs = [
        ("x", _num(item.x)),
        ("y", _num(item.y)),
        ("font-size", str(item.size)),
        ("fill", item.fill),
        ("text-anchor", item.anchor),
        ("dominant-baseline", "central"),
    ]
    if item.bold:
        pairs.append(("font-weight", "bold"))
    return f"<text {_attrs(pairs, item.data)}>{_text(item.text)}</text>"


def render_svg(scene: Scene) -> bytes:
    head = _attrs(
        [
            ("xmlns", "http://www.w3.org/2000/svg"),
            ("width", str(scene.width)),
            ("height", str(scene.height)),
            ("viewBox", f"0 0 {scene.width} {scene.height}"),
            ("font-family", FONT_FAMILY),
            ("role", "img"),
        ],
        (),
    )
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<svg {head}>",
        f"<title>{_text(scene.title)}</title>",
        f"<desc>{_text(scene.description)}</desc>",
        f'<rect x="0" y="0" width="{scene.width}" height="{scene.height}" '
        f"fill={_attr(scene.background)}/>",
        *(_item(item) for item in scene.items),
        "</svg>",
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")
