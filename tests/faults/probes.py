"""Clients that keep asking the replicas while a fault runs, and the table of what they saw."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

GiB = 1 << 30
# a few contexts, so that answers are computed and not only served from a cache
CONTEXTS = [4096, 8192, 16384, 32768, 65536, 131072]


@dataclass(frozen=True)
class Sample:
    phase: str
    probe: str
    replica: str
    status: int | None  # None: no answer within the client's 10 s
    seconds: float
    stale: bool = False
    at: float = 0.0  # time.monotonic() when it was sent


@dataclass
class Record:
    samples: list[Sample] = field(default_factory=list)
    # slugs whose creation was acknowledged (201), and by whom
    acknowledged: dict[str, str] = field(default_factory=dict)
    recoveries: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: Iterator[int] = field(default_factory=itertools.count)

    def add(self, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample)

    def of(self, phase: str, probe: str) -> list[Sample]:
        return [s for s in self.samples if s.phase == phase and s.probe == probe]

    def table(self) -> str:
        targets = {
            "healthz": "< 100 ms",
            "capacity": "< 100 ms (warm)",
            "readyz": "< 1 s, 503 while down",
            "write": "201; 503 < 2 s while down",
            "catalog": "200, stale while down",
        }
        lines = [
            f"{'phase':<10} {'probe':<9} {'n':>5} {'median ms':>10} {'p95 ms':>8} {'max ms':>9}  "
            f"{'answers':<28} target"
        ]
        phases = list(dict.fromkeys(s.phase for s in self.samples))
        for phase in phases:
            for probe, target in targets.items():
                samples = self.of(phase, probe)
                if not samples:
                    continue
                ms = [s.seconds * 1000 for s in samples]
                answers = Counter(str(s.status) for s in samples)
                stale = sum(s.stale for s in samples)
                text = " ".join(f"{k}x{v}" for k, v in sorted(answers.items()))
                if stale:
                    text += f" ({stale} stale)"
                lines.append(
                    f"{phase:<10} {probe:<9} {len(ms):>5} {statistics.median(ms):>10.1f} "
                    f"{_p95(ms):>8.1f} {max(ms):>9.1f}  {text:<28} {target}"
                )
        for what, seconds in self.recoveries.items():
            lines.append(f"recovery   {what:<40} {seconds:.2f} s  (target < 5 s)")
        lines.extend(self.notes)
        return "\n".join(lines)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


class Prober:
    """One thread per (probe, replica), asking until `stop`."""

    def __init__(self, record: Record, replicas: dict[str, str], token: str) -> None:
        self.record = record
        self.replicas = replicas
        self.admin = {"Authorization": f"Bearer {token}"}

    @contextmanager
    def running(self, phase: str) -> Iterator[None]:
        stop = threading.Event()
        threads = [
            threading.Thread(target=self._loop, args=(phase, probe, name, url, stop), daemon=True)
            for name, url in self.replicas.items()
            for probe in ("healthz", "capacity", "readyz", "write", "catalog")
        ]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=15)

    def _loop(self, phase: str, probe: str, replica: str, url: str, stop: threading.Event) -> None:
        pause = 0.2 if probe == "write" else 0.05
        with httpx.Client(base_url=url, timeout=10) as client:
            while not stop.is_set():
                self.ask(client, phase, probe, replica)
                stop.wait(pause)

    def ask(self, client: httpx.Client, phase: str, probe: str, replica: str) -> Sample:
        n = next(self.record.counter)
        slug = f"fault-{phase}-{replica}-{n}".lower()
        start = time.monotonic()
        try:
            if probe == "healthz":
                response = client.get("/healthz")
            elif probe == "readyz":
                response = client.get("/readyz")
            elif probe == "capacity":
                context = CONTEXTS[n % len(CONTEXTS)]
                response = client.get(
                    "/v1/capacity",
                    params={
                        "model": "llama-3.1-8b",
                        "gpu": "h100-sxm-80gb",
                        "max_model_len": context,
                    },
                )
            elif probe == "catalog":
                response = client.get("/v1/gpus", params={"limit": 5})
            else:
                response = client.post(
                    "/v1/gpus",
                    json={"slug": slug, "name": slug, "memory_bytes": 24 * GiB},
                    headers=self.admin,
                )
            status: int | None = response.status_code
            stale = response.headers.get("kvplan-catalog-stale") == "true"
        except httpx.HTTPError:
            status, stale = None, False
        sample = Sample(phase, probe, replica, status, time.monotonic() - start, stale, start)
        self.record.add(sample)
        if probe == "write" and status == 201:
            with self.record.lock:
                self.record.acknowledged[slug] = replica
        return sample


def recovery(prober: Prober, phase: str, since: float, limit: float = 30) -> float:
    """Seconds from `since` until every replica is ready and has acknowledged a write."""
    pending = set(prober.replicas)
    clients = {
        name: httpx.Client(base_url=url, timeout=10) for name, url in prober.replicas.items()
    }
    try:
        while pending and time.monotonic() - since < limit:
            for name in sorted(pending):
                ready = prober.ask(clients[name], phase, "readyz", name)
                if (
                    ready.status == 200
                    and prober.ask(clients[name], phase, "write", name).status == 201
                ):
                    pending.discard(name)
            time.sleep(0.05)
    finally:
        for client in clients.values():
            client.close()
    if pending:
        raise AssertionError(f"{sorted(pending)} not recovered within {limit} s")
    return time.monotonic() - since
