"""Errors raised by the sizing arithmetic.

Each error names the input `field` that is wrong, so the HTTP layer can point at it
without knowing anything about the arithmetic.
"""

from __future__ import annotations


class SizingError(ValueError):
    """An input the arithmetic cannot honestly answer for."""

    code = "invalid-input"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class UnknownLayerKind(SizingError):
    """A layer kind the engine does not know how to size: never sized as full attention."""

    code = "unknown-layer-kind"


class InvalidDtype(SizingError):
    code = "invalid-dtype"


class InvalidParallelism(SizingError):
    code = "invalid-parallelism"
