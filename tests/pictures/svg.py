"""Reading the pictures' SVG with an XML parser, as an image viewer would."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

SVG = "{http://www.w3.org/2000/svg}"


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    width: float
    height: float
    fill: str


def parse(body: bytes) -> ET.Element:
    root = ET.fromstring(body)
    assert root.tag == f"{SVG}svg"
    return root


def segments(root: ET.Element) -> dict[str, tuple[Box, int]]:
    """The memory bar's segments: their boxes and the bytes each says it stands for."""
    out = {}
    for rect in root.iter(f"{SVG}rect"):
        key = rect.get("data-segment")
        if key is None:
            continue
        box = Box(
            float(rect.get("x", "0")),
            float(rect.get("y", "0")),
            float(rect.get("width", "0")),
            float(rect.get("height", "0")),
            rect.get("fill", ""),
        )
        out[key] = (box, int(rect.get("data-bytes", "-1")))
    return out


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def data_circles(root: ET.Element) -> list[ET.Element]:
    return [c for c in root.iter(f"{SVG}circle") if c.get("data-tokens") is not None]
