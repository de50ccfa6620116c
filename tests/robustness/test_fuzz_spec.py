"""The API against its own spec: schemathesis generates requests for every operation from
openapi.json (valid and invalid ones, with the admin token so writes run) and checks each
answer: never a 5xx, and status, content type, headers and body as the spec documents them.

Bounded: `MAX_EXAMPLES` per operation, derandomized (about 10,000 requests over the 38
operations, every other method on every path included), so that it runs in about a minute on
two cores;
`KVPLAN_FUZZ_EXAMPLES` raises it for a longer hunt. Each operation runs in the test app's
rolled-back transaction, so its writes vanish afterwards.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.app import create_app
from service.kit.settings import Settings
from tests.conftest import ADMIN

MAX_EXAMPLES = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "12"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@schemathesis.serializer("application/jsonl")
def _json_lines(ctx: Any, value: Any) -> bytes:
    """A trace as JSON lines (POST /v1/simulations takes Mooncake's JSONL): text as it is, any
    other generated value as one JSON line."""
    if isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


# The spec as the app serves it (building it touches no database); each case is then sent to
# the test's own app, on the suite's database.
spec = schemathesis.openapi.from_asgi(
    "/openapi.json", create_app(Settings(database_url="sqlite://"))
)


@spec.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_the_spec_says(app: FastAPI, case: Any) -> None:
    case.call_and_validate(app=app, headers=ADMIN, checks=CHECKS)
