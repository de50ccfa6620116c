"""Units. Bytes are integers everywhere; GiB (2^30) and GB (10^9) are different words."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
GB = 10**9


def cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division of non-negative integers (vLLM's `cdiv`)."""
    return -(-numerator // denominator)


def gib_to_bytes(gib: float) -> int:
    """A GiB figure read from a log (`14.99 GiB`) as whole bytes, rounded to nearest."""
    return round(gib * GiB)
