"""The README's picture examples, pasted as they are: each URL answers a PNG."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

README = Path(__file__).resolve().parents[2] / "README.md"
# A GET example: a picture path with its query (the POST example has none).
PICTURE_URL = re.compile(r"https?://[\w.:-]+(/v1/pictures/[\w-]+\?[^\"\s`]+)")


def test_every_picture_url_in_the_readme_answers_a_png(client: TestClient) -> None:
    paths = PICTURE_URL.findall(README.read_text())
    # curl, Google Sheets and Excel
    assert len(paths) >= 3
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        assert response.headers["content-type"] == "image/png", path
        assert urlsplit(path).path in {
            "/v1/pictures/memory-budget",
            "/v1/pictures/capacity-by-context",
        }
