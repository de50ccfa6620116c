"""Request bodies: a size limit answered before the body is read, and one status for a body
that is not JSON.

Before: a 20 MiB body was read whole and answered 422 (tens of MiB of memory per request), and
a body that was not UTF-8 or nested too deeply got an undocumented 400 where a JSON syntax error
got 422.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.app import create_app
from tests.conftest import ADMIN, make_settings
from tests.helpers import problem

LIMIT = 1000
CAPACITY = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}


@pytest.fixture
def small(app: FastAPI, database_url: str) -> FastAPI:
    """The test app's database, with a 1000-byte body limit."""
    return create_app(make_settings(database_url, max_body_bytes=LIMIT), app.state.db)


def call(
    app: FastAPI, path: str, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> tuple[int, dict[str, Any], int]:
    """One POST straight through ASGI; the status, the JSON body, and how many chunks the
    app asked for (the rest of the body was never read)."""
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        if read < len(chunks):
            read += 1
            return {
                "type": "http.request",
                "body": chunks[read - 1],
                "more_body": read < len(chunks),
            }
        await asyncio.sleep(3600)  # a client that never finishes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
        "state": {},
    }
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))  # type: ignore[arg-type]
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), read


def test_a_declared_length_over_the_limit_is_refused_before_reading(small: FastAPI) -> None:
    status, body, read = call(small, "/v1/plans", [(b"content-length", b"1001")], [b"x" * 1001])
    assert status == 413
    assert body["type"] == "/problems/content-too-large"
    assert body["field"] == "body"
    assert "1000 bytes" in body["detail"]
    assert read == 0


def test_a_chunked_body_is_refused_when_it_crosses_the_limit(small: FastAPI) -> None:
    # 300-byte chunks: 900 bytes pass, the fourth chunk crosses 1000, the fifth is never read
    chunks = [b" " * 300] * 10
    status, body, read = call(small, "/v1/plans", [(b"transfer-encoding", b"chunked")], chunks)
    assert status == 413
    assert body["type"] == "/problems/content-too-large"
    assert read == 4


def test_a_body_without_any_length_is_counted_too(small: FastAPI) -> None:
    # HTTP/2 servers may hand over a body with neither Content-Length nor Transfer-Encoding
    status, body, read = call(small, "/v1/plans", [], [b" " * 600] * 3)
    assert status == 413
    assert body["type"] == "/problems/content-too-large"
    assert read == 2


def test_a_chunked_body_within_the_limit_reaches_the_app(small: FastAPI) -> None:
    whole = json.dumps(CAPACITY).encode()
    chunks = [whole[:10], whole[10:]]
    status, body, read = call(small, "/v1/capacity", [(b"transfer-encoding", b"chunked")], chunks)
    assert status == 200, body
    assert body["max_num_seqs"] > 0
    assert read == 2


def test_the_default_limit_is_one_mib(client: TestClient) -> None:
    at_limit = b" " * ((1 << 20) - 2) + b"{}"
    assert len(at_limit) == 1 << 20
    # exactly 1 MiB is read (and is a body that misses required fields)
    problem(
        client.post("/v1/plans", content=at_limit, headers={"content-type": "application/json"}),
        422,
    )
    # the 20 MiB body of the issue is refused unread, before any token check
    huge = b" " * (20 << 20)
    for path in ("/v1/plans", "/v1/capacity", "/v1/gpus", "/v1/models/import"):
        response = client.post(path, content=huge, headers={"content-type": "application/json"})
        assert problem(response, 413)["field"] == "body"
    write = client.put("/v1/gpus/h100-sxm-80gb", content=huge, headers=ADMIN)
    problem(write, 413)


def test_the_spec_documents_413_on_every_operation_with_a_body(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    with_body = [
        (path, method, operation)
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
        if "requestBody" in operation
    ]
    assert len(with_body) >= 9
    for path, method, operation in with_body:
        assert "413" in operation["responses"], (method, path)
    assert all(
        "413" not in operation["responses"]
        for methods in spec["paths"].values()
        for operation in methods.values()
        if "requestBody" not in operation
    )


# ---- a body that is not JSON: always 422 naming the body ----------------------------------------

NOT_JSON = [
    b"{",  # a syntax error: was 422 already
    b'\xff\xfe{"model": "x"}',  # not UTF-8: was 400
    b'{"model": "\xff"}',  # not UTF-8 inside a string: was 400
    b"[" * 100_000 + b"]" * 100_000,  # nested past Python's recursion limit: was 400
]


@pytest.mark.parametrize("body", NOT_JSON, ids=["syntax", "bom", "string", "deep"])
@pytest.mark.parametrize("path", ["/v1/capacity", "/v1/plans", "/v1/gpus", "/v1/models/import"])
def test_a_body_that_is_not_json_is_422_naming_the_body(
    client: TestClient, path: str, body: bytes
) -> None:
    response = client.post(
        path, content=body, headers={**ADMIN, "content-type": "application/json"}
    )
    answer = problem(response, 422)
    assert answer["field"] == "body"
    assert answer["type"] == "/problems/invalid-request"
    assert answer["errors"][0]["type"] == "json_invalid"
    assert answer["detail"].startswith("body: the body is not valid JSON")
