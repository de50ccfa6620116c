"""/docs and /redoc load nothing from outside the cluster: every asset comes from kvplan."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient


class _Assets(HTMLParser):
    """Every URL a page loads by itself: script src, link href, img src, CSS url(...)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        for key in ("src", "href"):
            if tag in {"script", "link", "img"} and named.get(key):
                self.urls.append(str(named[key]))
        self._in_script = tag in {"script", "style"}

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.inline.append(data)


def _page_assets(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    inline = "\n".join(parser.inline)
    # Swagger UI's initialiser names the spec by URL ('url': '/openapi.json') and CSS may
    # import fonts: both count as loads.
    quoted = re.findall(r"""(?:url\(|['"]url['"]\s*:\s*)['"]?([^'")\s]+)""", inline)
    return parser.urls + quoted


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_only_assets_kvplan_serves(client: TestClient, page: str) -> None:
    answer = client.get(page)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    assets = _page_assets(answer.text)
    assert assets, "the page loads its bundle"
    for url in assets:
        assert url.startswith("/"), f"{page} loads {url} from outside the cluster"
        served = client.get(url)
        assert served.status_code == 200, url
        assert served.content, url


def test_swagger_ui_is_a_3_1_capable_release(client: TestClient) -> None:
    # FastAPI emits OpenAPI 3.1.0; Swagger UI renders 3.1 documents from its 5.0 release on
    # (swagger-api/swagger-ui release notes, v5.0.0), so a 4.x bundle would show an error page.
    bundle = client.get("/docs/assets/swagger-ui-bundle.js").text
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    assert re.search(r"OpenAPI 3\.1|openapi31|isOAS31", bundle)
