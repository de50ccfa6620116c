"""Every problem kvplan can answer has a /problems/{code} page, and every page a problem."""

from __future__ import annotations

from fastapi.testclient import TestClient

import service.app  # the slices' problem classes
import service.engine_logs.parser  # noqa: F401  (imported lazily by the app: its LogNotRecognised)
from service.kit.errors import PROBLEM_TYPES, Problem
from service.sizing.errors import SizingError
from tests.helpers import problem


def _codes(base: type[Problem] | type[SizingError]) -> set[str]:
    """The `code` of `base` and of every class below it."""
    return {base.code}.union(*(_codes(sub) for sub in base.__subclasses__()))


def test_problem_types_list_exactly_the_codes_of_the_problem_classes() -> None:
    # A sizing error is answered as a 422 of its own type (errors.sizing_problem); an HTTP
    # status Starlette raises outside 404/405/406 is answered as invalid-request.
    assert _codes(Problem) | _codes(SizingError) == set(PROBLEM_TYPES)


def test_each_problem_type_has_its_page(client: TestClient) -> None:
    for code, meaning in PROBLEM_TYPES.items():
        page = client.get(f"/problems/{code}")
        assert page.status_code == 200, code
        assert page.text == f"{code}: {meaning}\n"


def test_an_unknown_path_and_a_wrong_method_are_problems_of_their_own_type(
    client: TestClient,
) -> None:
    # errors.http_problem: Starlette's 404 and 405 become not-found and method-not-allowed
    missing = problem(client.get("/v1/no-such-thing"), 404)
    assert (missing["type"], missing["title"]) == ("/problems/not-found", "Not found")
    wrong = problem(client.delete("/healthz"), 405)
    assert (wrong["type"], wrong["title"]) == ("/problems/method-not-allowed", "Method not allowed")
