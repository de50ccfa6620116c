"""make bench's cold runs forget every memo it lists (bench/__main__.py `_CACHES`): each must
be a memo, or the capacity benchmark stops at its first cold run."""

from __future__ import annotations

import bench.__main__ as bench_main


def test_every_memo_the_cold_runs_clear_is_a_memo() -> None:
    not_memos = [c.__qualname__ for c in bench_main._CACHES if not hasattr(c, "cache_clear")]
    assert not_memos == []
    bench_main.clear_caches()
