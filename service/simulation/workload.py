"""A workload's requests: arrivals and lengths, drawn from a seeded generator or read from a
trace, before any of them meets the engine.

Lengths (`input_tokens`, `output_tokens`) are a number, percentiles or a histogram:

* a number: every request has it;
* percentiles ``{50: 2000, 90: 5000, 99: 12000}``: drawn by inverting the piecewise-linear
  cumulative distribution through those points; below the lowest percentile a draw takes the
  lowest value, above the highest the highest (no tail is invented beyond what is given);
* a histogram: bins ``(low, high, weight)``, a bin chosen by weight, then a length uniform in
  ``[low, high]``.

Arrivals are Poisson at `request_rate` (exponential gaps from `random.Random(seed)`), or a
closed loop of `max_concurrency` clients, each sending its next request when its last one ends
(as `vllm bench serve --max-concurrency` does). A trace gives each request's arrival.

`prefix_cache_hit_rate` h gives every request a shared prefix of floor(h x input / block_size)
whole blocks (a common system prompt, the same block hashes for every request), so the
engine's prefix cache, not this module, decides what is a hit (the first request computes the
prefix; one that arrives after it was evicted computes it again).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import SimulationError


@dataclass(frozen=True, slots=True)
class Request:
    """One request as it reaches the engine: when, how long its prompt and answer are, and the
    hashes of its prompt's whole blocks (None: no prefix sharing known)."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length distribution: a fixed number, percentile points, or histogram bins."""

    fixed: int | None = None
    percentiles: tuple[tuple[float, int], ...] = ()
    bins: tuple[tuple[int, int, float], ...] = ()

    @classmethod
    def of(
        cls, field: str, value: int | dict[str, int] | dict[float, int] | Sequence[Sequence[float]]
    ) -> Lengths:
        """Read a length as the API takes it: an int, {percentile: tokens}, or [[low, high,
        weight], ...]. `field` names it in the error."""
        if isinstance(value, bool):
            raise SimulationError(field, "must be a number of tokens, percentiles or a histogram")
        if isinstance(value, int):
            _positive(field, value)
            return cls(fixed=value)
        if isinstance(value, dict):
            return cls(percentiles=_percentiles(field, value))
        return cls(bins=_bins(field, value))

    def draw(self, rng: random.Random) -> int:
        if self.fixed is not None:
            return self.fixed
        if self.percentiles:
            return _inverse_cdf(self.percentiles, rng.random())
        weights = [w for _, _, w in self.bins]
        low, high, _ = rng.choices(self.bins, weights)[0]
        return rng.randint(low, high)

    @property
    def largest(self) -> int:
        if self.fixed is not None:
            return self.fixed
        if self.percentiles:
            return self.percentiles[-1][1]
        return max(high for _, high, _ in self.bins)


def _positive(field: str, value: float) -> None:
    if not value >= 1:
        raise SimulationError(field, f"must be a positive number of tokens, got {value!r}")


def _percentiles(
    field: str, value: dict[str, int] | dict[float, int]
) -> tuple[tuple[float, int], ...]:
    points = []
    for key, tokens in value.items():
        text = str(key).lstrip("p")
        try:
            q = float(text)
        except ValueError:
            raise SimulationError(
                f"{field}.{key}", "a percentile is a number such as 50 or p99"
            ) from None
        if not 0 <= q <= 100:
            raise SimulationError(f"{field}.{key}", "a percentile is between 0 and 100")
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise SimulationError(f"{field}.{key}", "must be a whole number of tokens")
        _positive(f"{field}.{key}", tokens)
        points.append((q / 100, tokens))
    if not points:
        raise SimulationError(field, "needs at least one percentile")
    points.sort()
    for (_, a), (_, b) in itertools.pairwise(points):
        if b < a:
            raise SimulationError(field, "tokens must not decrease as the percentile grows")
    return tuple(points)


def _bins(field: str, value: Sequence[Sequence[float]]) -> tuple[tuple[int, int, float], ...]:
    bins = []
    for i, row in enumerate(value):
        if len(row) != 3:
            raise SimulationError(f"{field}[{i}]", "a histogram bin is [low, high, weight]")
        low, high, weight = row
        if low != int(low) or high != int(high) or not 1 <= low <= high:
            raise SimulationError(
                f"{field}[{i}]", "low and high are whole tokens, 1 <= low <= high"
            )
        if not weight >= 0:
            raise SimulationError(f"{field}[{i}]", "a bin's weight is zero or positive")
        bins.append((int(low), int(high), float(weight)))
    if not bins or sum(w for _, _, w in bins) <= 0:
        raise SimulationError(field, "a histogram needs a bin of positive weight")
    return tuple(bins)


def _inverse_cdf(points: tuple[tuple[float, int], ...], u: float) -> int:
    quantiles = [q for q, _ in points]
    i = bisect.bisect_right(quantiles, u)
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (q0, v0), (q1, v1) = points[i - 1], points[i]
    return round(v0 + (v1 - v0) * (u - q0) / (q1 - q0))


@dataclass(frozen=True, slots=True)
class Workload:
    """A synthetic workload: arrivals, lengths, how many requests, the prefix hit rate."""

    input_tokens: Lengths
    output_tokens: Lengths
    request_rate: float | None = None  # Poisson arrivals per second
    max_concurrency: int | None = None  # closed loop
    num_requests: int | None = None
    duration_s: float | None = None
    prefix_cache_hit_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.request_rate is None) == (self.max_concurrency is None):
            raise SimulationError(
                "workload.request_rate", "give request_rate or max_concurrency, one of them"
            )
        if self.request_rate is not None and not (
            self.request_rate > 0 and math.isfinite(self.request_rate)
        ):
            raise SimulationError(
                "workload.request_rate", "must be a positive number of requests per second"
            )
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise SimulationError("workload.max_concurrency", "must be at least 1")
        if (self.num_requests is None) == (self.duration_s is None):
            raise SimulationError(
                "workload.num_requests", "give num_requests or duration_s, one of them"
            )
        if self.num_requests is not None and self.num_requests < 1:
            raise SimulationError("workload.num_requests", "must be at least 1")
        if self.duration_s is not None and not self.duration_s > 0:
            raise SimulationError("workload.duration_s", "must be a positive number of seconds")
        if self.duration_s is not None and self.request_rate is None:
            raise SimulationError(
                "workload.duration_s", "a closed loop (max_concurrency) takes num_requests"
            )
        if not 0 <= self.prefix_cache_hit_rate <= 1:
            raise SimulationError("workload.prefix_cache_hit_rate", "must be between 0 and 1")


def draw_requests(workload: Workload, block_size: int) -> list[Request]:
    """The workload's requests in arrival order. A closed loop's arrivals are all 0 here: the
    engine releases each when a client is free (`Engine`'s closed loop)."""
    rng = random.Random(workload.seed)  # noqa: S311 (a simulation's draws, not secrets)
    requests: list[Request] = []
    now = 0.0
    while True:
        if workload.request_rate is not None:
            now += rng.expovariate(workload.request_rate)
            if workload.duration_s is not None and now > workload.duration_s:
                break
        if workload.num_requests is not None and len(requests) >= workload.num_requests:
            break
        prompt = workload.input_tokens.draw(rng)
        output = workload.output_tokens.draw(rng)
        hashes = None
        if workload.prefix_cache_hit_rate > 0:
            # Only the shared blocks carry a hash: the rest are no other request's, so no
            # request could hit them (vLLM caches them too, and evicts them unread).
            hashes = tuple(range(math.floor(workload.prefix_cache_hit_rate * prompt / block_size)))
        requests.append(
            Request(now if workload.request_rate is not None else 0.0, prompt, output, hashes)
        )
    return requests
