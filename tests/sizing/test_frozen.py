"""`sizing.frozen`: the per-question step types are immutable to mypy, and at run time they
compare, hash and copy as frozen dataclasses do (service/sizing/frozen.py says why)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mypy import api

from service.sizing.engines.common import CacheGroup, Parallelism, Workload
from service.sizing.frozen import frozen

# An assignment to a field of a step type, and to a class of the decorator's own: both must
# be the error `make lint` (mypy --strict on service/) refuses.
ASSIGNMENTS = """
import dataclasses
from service.sizing.model.dtypes import KvCacheDtype
from service.sizing.engines.common import Workload
from service.sizing.frozen import frozen

@frozen
class Point:
    x: int
    y: int = 0

w = Workload(8192, KvCacheDtype.FP8)
w.max_model_len = 4096
p = Point(1)
p.y = 2
q = dataclasses.replace(p, y=2)
"""


def test_mypy_refuses_an_assignment_to_a_field(tmp_path: Path) -> None:
    snippet = tmp_path / "assign.py"
    snippet.write_text(ASSIGNMENTS)
    out, _, status = api.run(["--strict", "--no-error-summary", str(snippet)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1
    assert len(errors) == 2, out  # the two assignments; replace() is fine
    assert 'Property "max_model_len" defined in "Workload" is read-only' in errors[0]
    assert 'Property "y" defined in "Point" is read-only' in errors[1]


def test_equal_steps_are_one_memo_key() -> None:
    # The memos keyed by a Workload or Parallelism need the frozen dataclass's hash: equal
    # fields, equal hash, whatever object asked.
    assert Workload(8192, "fp8") == Workload(8192, "fp8")
    assert hash(Workload(8192, "fp8")) == hash(Workload(8192, "fp8"))
    assert len({Parallelism(2), Parallelism(2), Parallelism(4)}) == 2
    assert Workload(8192, "fp8") != Workload(8192, "auto")


def test_a_changed_copy_is_made_by_replace_and_the_original_is_left_alone() -> None:
    group = CacheGroup("full_attention", 32, 16, 4096, 512)
    longer = dataclasses.replace(group, blocks_per_request=1024)
    assert (group.blocks_per_request, longer.blocks_per_request) == (512, 1024)
    assert longer.page_bytes == group.page_bytes


def test_the_step_types_have_slots_and_no_instance_dict() -> None:
    @frozen
    class Step:
        a: int
        b: tuple[int, ...] = ()

    assert not hasattr(Step(1), "__dict__")
    assert not hasattr(Workload(1, "auto"), "__dict__")
    assert repr(Step(1)).endswith("Step(a=1, b=())")
