"""Pictures called as spreadsheet IMAGE() functions call: a GET with nothing but its URL.

A sheet adds a throwaway parameter to fetch again, and where KVPLAN_READ_KEYS is set it can
only send the key as `api_key` (README.md#spreadsheets). Google Sheets' IMAGE takes no SVG
(<https://support.google.com/docs/answer/3093333>), nor does Excel's
(<https://support.microsoft.com/en-US/excel/functions/image-function>): a URL without
`format` answers PNG.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.kit.db import Database
from tests.conftest import make_settings
from tests.helpers import problem

PATHS = (
    "/v1/pictures/memory-budget",
    "/v1/pictures/capacity-by-context",
    "/v1/pictures/speed-by-batch",
)
QUERY = "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&peak_concurrency=100"


@pytest.fixture
def keyed(engine: Engine, connection: Connection, database_url: str) -> Iterator[TestClient]:
    """An app whose reads need the key `sheet-key`, in this test's rolled-back transaction."""
    database = Database(engine)
    database.sessions = sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    app = create_app(make_settings(database_url, read_keys="sheet-key"), database)
    with TestClient(app) as client:
        yield client


@pytest.mark.parametrize("path", PATHS)
def test_a_throwaway_parameter_draws_the_same_picture(client: TestClient, path: str) -> None:
    plain = client.get(f"{path}?{QUERY}")
    busted = client.get(f"{path}?{QUERY}&_=2")
    assert busted.status_code == 200
    assert busted.headers["content-type"] == "image/png"
    assert busted.headers["etag"] == plain.headers["etag"]
    assert busted.content == plain.content


@pytest.mark.parametrize("path", PATHS)
def test_a_misspelt_parameter_is_a_problem_not_a_picture(client: TestClient, path: str) -> None:
    body = problem(client.get(f"{path}?{QUERY}&max_model_length=4096"), 422)
    assert body["field"] == "max_model_length"


@pytest.mark.parametrize("path", PATHS)
def test_the_read_key_goes_in_the_url(keyed: TestClient, path: str) -> None:
    problem(keyed.get(f"{path}?{QUERY}"), 401)
    response = keyed.get(f"{path}?{QUERY}&api_key=sheet-key")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    # the key never changes the picture or its tag
    again = keyed.get(f"{path}?{QUERY}", headers={"X-API-KEY": "sheet-key"})
    assert again.headers["etag"] == response.headers["etag"]
    # the POST form takes the key like the capacity's POST
    body = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    problem(keyed.post(path, json=body), 401)
    assert keyed.post(path, json=body, headers={"X-API-KEY": "sheet-key"}).status_code == 200
