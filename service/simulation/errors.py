"""The simulator's one error: an input it refuses, named by its field (answered as an RFC 9457
problem by the slice, like `service.sizing.SizingError`)."""

from __future__ import annotations


class SimulationError(ValueError):
    """A workload, trace or deployment value the simulator refuses; `field` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
