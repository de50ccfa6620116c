"""Writes per admin token: a token bucket per token, in this process.

Each admin token may write `rate` times a second on average, `burst` times in a row; a write
past that is refused (429, `Retry-After`) before its body is read, and counted
(`kvplan_write_rate_limited_total`). The buckets live in the process, so the limit is per
replica and per worker: it bounds what one leaked token can do to one replica, cheaply, and
leaves per-client limits across replicas to the ingress (README, Limits). The keys are the
admin tokens themselves, so the table never holds more entries than KVPLAN_ADMIN_TOKENS lists.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class WriteLimiter:
    """Token buckets, one per key, each holding at most `burst` and refilled at `rate` a second.
    A rate of 0 turns the limit off."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one write of `key`'s bucket: 0 if it had one, else the seconds until it has."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        with self._lock:
            tokens, then = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate

    def policy(self) -> str:
        """The limit in words, for the problem's detail."""
        return (
            f"{self.rate:g} writes a second per admin token, in bursts of at most {self.burst} "
            "(KVPLAN_WRITE_RATE_PER_SECOND, KVPLAN_WRITE_BURST), on each replica"
        )


def retry_after(seconds: float) -> str:
    """`Retry-After` is whole seconds (RFC 9110 §10.2.3): round up, never 0."""
    return str(max(1, math.ceil(seconds)))
