"""`kvplan capacity --acceptance-length` gives the speed POST /v1/capacity gives (the doors
agree; the figures are worked in tests/sizing/test_speculative_speed.py)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.planning.test_speculative_speed_api import NGRAM, QUESTION
from tests.test_cli import sqlite_url

__all__ = ["sqlite_url"]


def test_the_cli_takes_acceptance_length(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], client: TestClient
) -> None:
    args = ["capacity", "--offline", "--no-explain"]
    for name, value in QUESTION.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    args += ["--speculative-config", json.dumps(NGRAM), "--acceptance-length", "2.5"]
    assert main(args) == 0
    body = json.loads(capsys.readouterr().out)
    posted = client.post(
        "/v1/capacity",
        json={**QUESTION, "speculative_config": NGRAM, "acceptance_length": 2.5},
    ).json()
    assert body["decode_ms_per_token"] == posted["decode_ms_per_token"]
