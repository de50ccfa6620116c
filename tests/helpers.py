"""What API tests across the slices share."""

from __future__ import annotations

from typing import Any

import httpx


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The RFC 9457 body of an error answer, after checking its status and media type."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    return body
