"""What the catalog API tests share: walking the pages of a list."""

from __future__ import annotations

from fastapi.testclient import TestClient


def all_pages(client: TestClient, url: str) -> tuple[list[str], int]:
    """Every slug reachable by following `next` from `url`, and how many pages that took."""
    slugs: list[str] = []
    pages = 0
    next_url: str | None = url
    while next_url is not None:
        response = client.get(next_url)
        assert response.status_code == 200, response.text
        body = response.json()
        slugs += [item["slug"] for item in body["items"]]
        pages += 1
        next_url = body["next"]
        if next_url is None:
            assert "link" not in response.headers
            assert body["next_cursor"] is None
        else:
            assert response.headers["link"] == f'<{next_url}>; rel="next"'
        assert pages <= 1000, "pagination does not terminate"
    return slugs, pages


def all_slugs(client: TestClient, url: str) -> list[str]:
    return all_pages(client, url)[0]
