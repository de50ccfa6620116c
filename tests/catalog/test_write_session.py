"""Writes commit in one place (deps.WriteSessionDep), before the answer leaves the server."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from starlette.types import Message, Receive, Scope, Send

from tests.conftest import ADMIN
from tests.helpers import problem


def _recorded(app: FastAPI, events: list[str], monkeypatch: pytest.MonkeyPatch) -> TestClient:
    """A client whose app notes each commit and the moment each answer starts to be sent."""
    commit = Session.commit

    def committing(session: Session) -> None:
        events.append("commit")
        commit(session)

    monkeypatch.setattr(Session, "commit", committing)

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                events.append(f"answer {message['status']}")
            await send(message)

        await app(scope, receive, noting)

    return TestClient(asgi)


def test_a_write_is_committed_before_its_answer_is_sent(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client that reads right after its write must see it, on this replica or another one.
    events: list[str] = []
    with _recorded(app, events, monkeypatch) as client:
        created = client.post(
            "/v1/gpus", json={"slug": "tx-gpu", "name": "T", "memory_bytes": 1 << 30}, headers=ADMIN
        )
        assert created.status_code == 201, created.text
        assert events == ["commit", "answer 201"]


def test_a_refused_write_commits_nothing(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    with _recorded(app, events, monkeypatch) as client:
        taken = client.post(
            "/v1/gpus",
            json={"slug": "h100-sxm-80gb", "name": "T", "memory_bytes": 1 << 30},
            headers=ADMIN,
        )
        problem(taken, 409)
        assert events == ["answer 409"]
        assert client.get("/v1/gpus/h100-sxm-80gb").json()["name"] != "T"
