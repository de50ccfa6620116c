"""The fault suite's cluster and replicas (module-scoped), and its table of figures."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.faults.cluster import Cluster, Replica, kvplan
from tests.faults.probes import Prober, Record

TOKEN = "fault-suite-admin-token-0123456789"
RECORD = Record()


@dataclass
class Deployment:
    cluster: Cluster
    a: Replica
    b: Replica
    prober: Prober


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    cluster = Cluster()
    replicas: list[Replica] = []
    try:
        cluster.init()
        kvplan(cluster.url, "migrate")
        kvplan(cluster.url, "seed")
        a = Replica("a", cluster.url, TOKEN, cluster.root)
        b = Replica("b", cluster.url, TOKEN, cluster.root)
        replicas = [a, b]
        for replica in replicas:
            replica.start()
        yield Deployment(cluster, a, b, Prober(RECORD, {"a": a.url, "b": b.url}, TOKEN))
    finally:
        for replica in replicas:
            replica.stop()
        cluster.destroy()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if RECORD.samples:
        terminalreporter.section("kvplan under faults (figures, not asserted)")
        terminalreporter.write_line(RECORD.table())
