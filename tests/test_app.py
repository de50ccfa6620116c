"""What a replica imports to start: only what its first answers need.

Start-up is mostly importing modules (README, "How fast kvplan answers"), so the modules only
some requests or commands need are imported when first used: Alembic (with its dialects' DDL,
Mako and Pygments) by `kvplan migrate` alone, psycopg by a PostgreSQL engine, Pillow by the
first PNG, the engine-log parser (which compiles every pattern) by the first log read. A fresh
interpreter shows it; the tests of each feature show the features still work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli import main

# Imported with the first use of the features that need them, never by a replica's start-up.
LAZY = (
    "alembic",
    "mako",
    "pygments",
    "psycopg",
    "PIL",
    "service.engine_logs.parser",
    "service.engine_logs.patterns",
)
# Test-only packages, never a replica's. (fastapi_offline is imported: /docs/assets is mounted
# from its folder, service/kit/docs.py.)
NEVER = ("pytest", "hypothesis", "schemathesis")

# A replica as `kvplan serve` starts it (service/cli.py, then service/kit/server.py: the app
# factory and its lifespan, which loads the catalog), asked whether it is ready and one
# capacity question, then the modules it holds.
START_AND_ANSWER = """
import json, sys
from fastapi.testclient import TestClient
import service.cli
from service.app import create_app

with TestClient(create_app()) as client:
    ready = client.get("/readyz")
    answer = client.get(
        "/v1/capacity",
        params={"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192},
    )
names = sys.argv[1:]
print(json.dumps({
    "ready": ready.json()["status"],
    "answer": answer.status_code,
    "imported": [n for n in names if any(m == n or m.startswith(n + ".") for m in sys.modules)],
}))
"""


@pytest.fixture
def seeded_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    assert main(["migrate"]) == 0
    assert main(["seed"]) == 0
    return url


def test_a_replica_starts_and_answers_without_the_modules_only_some_requests_need(
    seeded_sqlite: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()  # the seed's report
    env = {**os.environ, "DATABASE_URL": seeded_sqlite, "KVPLAN_CATALOG_TTL_SECONDS": "30"}
    run = subprocess.run(
        [sys.executable, "-c", START_AND_ANSWER, *LAZY, *NEVER],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["ready"] == "ready"
    assert seen["answer"] == 200
    assert seen["imported"] == []
