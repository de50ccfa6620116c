"""The answers GET /v1/capacity gave recently: autoscalers repeat the same question."""

from __future__ import annotations

import threading
from collections import OrderedDict

from .schemas import CapacityDetail


class AnswerCache:
    """Recent GET answers by (catalog token, query), least recently used dropped first."""

    def __init__(self, size: int = 2048) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], CapacityDetail] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> CapacityDetail | None:
        with self._lock:
            answer = self._items.get(key)
            if answer is not None:
                self._items.move_to_end(key)
            return answer

    def put(self, key: tuple[str, str], answer: CapacityDetail) -> None:
        with self._lock:
            self._items[key] = answer
            while len(self._items) > self._size:
                self._items.popitem(last=False)
