"""Writes per admin token are rate limited (service/kit/ratelimit.py), through HTTP.

The bucket's arithmetic: a bucket holds `burst` writes and refills at `rate` a second, so with
rate 0.5 and burst 2 the first two writes pass, the third finds 0 writes left and waits
1 / 0.5 = 2 s for the next. The tests freeze the limiter's clock, so no test depends on how
fast the machine is.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.app import create_app
from service.kit.ratelimit import WriteLimiter
from service.kit.settings import Settings
from tests.conftest import ADMIN, ADMIN_TOKEN, make_settings
from tests.helpers import problem

OTHER_TOKEN = "another-admin-token-9876543210"
OTHER = {"Authorization": f"Bearer {OTHER_TOKEN}"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def limited(app: FastAPI, database_url: str, clock: Clock) -> Iterator[TestClient]:
    """The test app's database, two admin tokens, 0.5 writes a second in bursts of 2."""
    settings = make_settings(
        database_url,
        admin_tokens=f"{ADMIN_TOKEN},{OTHER_TOKEN}",
        write_rate_per_second=0.5,
        write_burst=2,
    )
    limited_app = create_app(settings, app.state.db)
    limited_app.state.write_limiter.clock = clock
    with TestClient(limited_app) as client:
        yield client


# One write of each kind: each is refused (422, 404) after the token and the rate are checked,
# so it spends a write of the bucket without storing anything.
WRITES = [
    ("POST", "/v1/models", {}),
    ("POST", "/v1/gpus", {}),
    ("PATCH", "/v1/gpus/no-such-gpu", {}),
    ("POST", "/v1/deployments", {}),
    ("POST", "/v1/calibrations", {}),
    ("DELETE", "/v1/calibrations/1", None),
    ("POST", "/v1/speed-calibrations", {}),
    ("DELETE", "/v1/speed-calibrations/1", None),
]


def _write(client: TestClient, index: int, headers: dict[str, str] = ADMIN) -> int:
    method, path, body = WRITES[index % len(WRITES)]
    extra = {"If-Match": '"1"'} if method in ("PATCH", "DELETE") else {}
    response = client.request(method, path, json=body, headers={**headers, **extra})
    return response.status_code


def test_a_write_past_the_burst_is_429_naming_the_limit_with_retry_after(
    limited: TestClient,
) -> None:
    assert _write(limited, 0) != 429
    assert _write(limited, 1) != 429
    response = limited.post("/v1/gpus", json={}, headers=ADMIN)
    body = problem(response, 429)
    assert body["type"] == "/problems/too-many-requests"
    assert "0.5 writes a second per admin token" in body["detail"]
    assert "bursts of at most 2" in body["detail"]
    assert response.headers["Retry-After"] == "2"  # 1 / 0.5 s for the next write


@pytest.mark.parametrize("index", range(len(WRITES)))
def test_every_kind_of_write_spends_the_same_tokens_bucket(limited: TestClient, index: int) -> None:
    # two writes of other kinds empty the bucket; then this kind is refused too
    _write(limited, index + 1)
    _write(limited, index + 2)
    assert _write(limited, index) == 429


def test_the_bucket_refills_at_the_rate(limited: TestClient, clock: Clock) -> None:
    for index in range(2):
        _write(limited, index)
    assert _write(limited, 2) == 429
    clock.now += 2.0  # 2 s at 0.5 a second: one write
    assert _write(limited, 3) != 429
    assert _write(limited, 4) == 429


def test_each_token_has_its_own_bucket_and_reads_are_not_limited(limited: TestClient) -> None:
    for index in range(3):
        _write(limited, index)
    assert _write(limited, 0) == 429
    assert _write(limited, 0, headers=OTHER) != 429
    assert limited.get("/v1/gpus", headers=ADMIN).status_code == 200


def test_a_wrong_token_is_401_and_spends_nothing(limited: TestClient) -> None:
    wrong = {"Authorization": "Bearer not-a-token"}
    for _ in range(3):
        problem(limited.post("/v1/gpus", json={}, headers=wrong), 401)
    assert _write(limited, 0) != 429


def test_refused_writes_are_counted_on_metrics(limited: TestClient) -> None:
    for index in range(4):
        _write(limited, index)
    text = limited.get("/metrics").text
    assert "kvplan_write_rate_limited_total 2.0" in text  # writes 3 and 4


def test_the_default_limit_is_generous_and_0_turns_it_off() -> None:
    clock = Clock()
    default = Settings()
    limiter = WriteLimiter(default.write_rate_per_second, default.write_burst, clock)
    assert [limiter.take("t") for _ in range(100)] == [0.0] * 100  # a burst of 100
    assert limiter.take("t") == pytest.approx(0.1)  # then 10 a second
    off = WriteLimiter(0, 1, clock)
    assert all(off.take("t") == 0.0 for _ in range(1000))


def test_every_write_operation_documents_429_and_no_read_does(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    written = set()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            is_write = {"HTTPBearer": []} in operation.get("security", [])
            if is_write:
                written.add("/".join(path.split("/")[:3]))
            answer = operation["responses"].get("429")
            assert (answer is not None) == is_write, f"{method} {path}"
            if is_write:
                assert "Retry-After" in answer["headers"]
                assert "application/problem+json" in answer["content"]
    assert written == {
        "/v1/models",
        "/v1/gpus",
        "/v1/deployments",
        "/v1/calibrations",
        "/v1/speed-calibrations",
    }
