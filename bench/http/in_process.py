"""What a new question costs inside the process: the hot path's work for a cache miss.

The varied workload's questions, each read as `hot_path.CapacityHotPath` reads a query it has
not seen (`canonical`) and answered by `router.capacity_answer` (the use case, the encoding,
the answer kept), one after another in this process, with no server, socket or middleware.
Set beside the HTTP figures it says how much of a miss is the arithmetic and how much the
server and the layers every request pays.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import State

from service.catalog.seed import offline_snapshot
from service.kit.settings import Settings
from service.planning.cache import EncodedAnswers
from service.planning.hot_path import canonical
from service.planning.router import capacity_answer

from .loadgen import Request


@dataclass(frozen=True)
class InProcess:
    questions: int
    rounds_us: tuple[float, ...]  # mean microseconds per question, one figure a round

    @property
    def median_us(self) -> float:
        return statistics.median(self.rounds_us)


def new_questions(requests: list[Request], rounds: int = 5) -> InProcess:
    """Each round asks every question once, with a fresh answer cache (every one a miss); the
    sizing core's memos (layouts, per-token facts, the estimate's constants) stay warm after
    the first round, as they do in a server."""
    snapshot, settings = offline_snapshot(), Settings()
    queries = [urlsplit(r.target).query.encode() for r in requests]
    figures = []
    for _ in range(rounds + 1):  # the first warms the memos and is not counted
        state = State()
        state.capacity_encoded = EncodedAnswers()
        start = time.perf_counter()
        for query in queries:
            asked = canonical(query, None)
            if asked is None:
                raise ValueError(f"the workload asks a question FastAPI refuses: {query!r}")
            capacity_answer(state, asked[1], asked[0].key, snapshot, settings)
        figures.append((time.perf_counter() - start) / len(queries) * 1e6)
    return InProcess(len(queries), tuple(figures[1:]))
