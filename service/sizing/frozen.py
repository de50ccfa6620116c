"""`frozen`: the sizing core's per-question step types, immutable to the type checker and built
at the speed of plain slots.

`dataclass(frozen=True)` refuses assignments with its own `__setattr__`, so its `__init__` sets
each field through `object.__setattr__`: about 0.07 us a field, where a plain slotted class
stores it in a few nanoseconds. A capacity question never asked before builds some two dozen
of these objects between its steps (question, workload, facts, layout, budget, blocks, report,
costs, estimate, answer): with `frozen=True` their construction was about a sixth of the
arithmetic (`make bench`, README "How fast kvplan answers").

A class decorated with `frozen` is `dataclass(slots=True, unsafe_hash=True)` at run time (the
same `__init__`, `__eq__`, `__hash__` and `__repr__` as a frozen dataclass, the hash from the
compared fields) and frozen to the type checker (PEP 681 `dataclass_transform` with
`frozen_default=True`, a keyword Python 3.11's `typing.dataclass_transform` keeps among its
extra ones and mypy reads): an assignment to a field is a mypy error, which `make lint` refuses,
instead of a FrozenInstanceError at run time (tests/sizing/test_frozen.py holds mypy to it).
`dataclasses.replace` makes a changed copy, as for any dataclass. Types built once per catalog
or memoised by their own constructor (architectures, GPUs, releases) stay `frozen=True`.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[T]) -> type[T]:
    return dataclasses.dataclass(slots=True, unsafe_hash=True)(cls)
