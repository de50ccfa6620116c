"""`kvplan seed` against a catalog that users have edited through the API.

The seed is re-run on every Helm upgrade, so it must be idempotent and must never undo a user's
change: an edit keeps the user's values, and a deletion stays deleted (a deleted GPU that came
back would be offered by the planner again). POSTing the slug again is how an entry returns.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from service.catalog import repository
from service.catalog.models import GpuRow
from service.catalog.seed import SeedReport, load_seed, seed_catalog
from tests.conftest import ADMIN


@pytest.fixture
def session(connection: Connection) -> Iterator[Session]:
    """A session on the test's connection: it sees the API's writes, and is rolled back."""
    with Session(bind=connection, join_transaction_mode="create_savepoint") as session:
        yield session


def seed(session: Session) -> SeedReport:
    report = seed_catalog(session)
    session.commit()
    return report


def test_seeding_a_seeded_catalog_changes_nothing(client: TestClient, session: Session) -> None:
    version_before = repository.catalog_version(session)
    report = seed(session)
    assert report.added == []
    assert report.refreshed == []
    assert report.kept_user_edits == []
    assert report.kept_user_deletions == []
    assert report.unchanged == len(load_seed("gpus.json")) + len(load_seed("models.json"))
    # no bump: replicas keep their snapshots and capacity ETags stay valid
    assert repository.catalog_version(session) == version_before
    assert client.get("/v1/gpus/h100-sxm-80gb").headers["etag"] == '"1"'


def test_seed_never_overwrites_a_patched_entry(client: TestClient, session: Session) -> None:
    patched = client.patch(
        "/v1/gpus/h100-sxm-80gb",
        json={"price_usd_per_hour": 1.99, "notes": "our negotiated rate"},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert patched.status_code == 200, patched.text
    model = client.patch(
        "/v1/models/llama-3.1-8b",
        json={"architecture": {"max_position_embeddings": 65536}},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert model.status_code == 200, model.text

    report = seed(session)
    assert sorted(report.kept_user_edits) == ["gpu:h100-sxm-80gb", "model:llama-3.1-8b"]
    assert report.added == []
    assert report.refreshed == []
    after = client.get("/v1/gpus/h100-sxm-80gb")
    assert after.json() == patched.json()
    assert after.headers["etag"] == '"2"'
    assert client.get("/v1/models/llama-3.1-8b").json() == model.json()
    # and again: still idempotent
    assert seed(session).kept_user_edits == report.kept_user_edits


def test_seed_does_not_bring_back_a_deleted_entry(client: TestClient, session: Session) -> None:
    for path in ("/v1/gpus/a10g", "/v1/models/falcon-7b"):
        response = client.delete(path, headers={**ADMIN, "If-Match": '"1"'})
        assert response.status_code == 204, response.text

    report = seed(session)
    assert sorted(report.kept_user_deletions) == ["gpu:a10g", "model:falcon-7b"]
    assert report.added == []
    assert client.get("/v1/gpus/a10g").status_code == 404
    assert client.get("/v1/models/falcon-7b").status_code == 404
    slugs = [g["slug"] for g in client.get("/v1/gpus").json()["items"]]
    assert "a10g" not in slugs
    assert len(slugs) == len(load_seed("gpus.json")) - 1


def test_a_deleted_entry_comes_back_by_posting_it(client: TestClient, session: Session) -> None:
    record = next(g for g in load_seed("gpus.json") if g["slug"] == "a10g")
    client.delete("/v1/gpus/a10g", headers={**ADMIN, "If-Match": '"1"'})
    restored = client.post(
        "/v1/gpus",
        json={"slug": "a10g", "name": record["name"], "memory_bytes": record["memory_bytes"]},
        headers=ADMIN,
    )
    assert restored.status_code == 201, restored.text
    # the seed keeps the user's entry as it is, and no longer reports it as deleted
    report = seed(session)
    assert report.kept_user_deletions == []
    assert report.kept_user_edits == ["gpu:a10g"]
    body = client.get("/v1/gpus/a10g").json()
    assert body["origin"] == "user"
    assert body["sources"] == []  # the POST's, not the seed's


def test_seed_adds_back_an_entry_lost_without_the_api(client: TestClient, session: Session) -> None:
    # a row removed behind the API's back (no tombstone) is simply missing: the seed adds it
    row = repository.get_by_slug(session, GpuRow, "l4")
    assert row is not None
    session.delete(row)
    session.commit()
    assert client.get("/v1/gpus/l4").status_code == 404
    report = seed(session)
    assert report.added == ["gpu:l4"]
    body = client.get("/v1/gpus/l4").json()
    assert body["origin"] == "seed"
    assert (
        body["memory_bytes"]
        == next(g for g in load_seed("gpus.json") if g["slug"] == "l4")["memory_bytes"]
    )
