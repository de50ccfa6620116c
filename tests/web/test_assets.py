"""The page's files: served from the package, nothing inline, shipped in the wheel."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

from fastapi.testclient import TestClient

from service.kit.middleware import API_POLICY, PAGE_POLICY
from service.web.router import MEDIA
from tests.helpers import problem

REPO = Path(__file__).resolve().parents[2]


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1][0] == "script" and data.strip():
            self.inline_script = True


def test_the_page_has_no_inline_script_or_style(client: TestClient) -> None:
    # A Content-Security-Policy without 'unsafe-inline' must allow the page as it is.
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    parser = Tags()
    parser.feed(response.text)
    assert not parser.inline_script
    for tag, attrs in parser.tags:
        assert tag != "style"
        assert "style" not in attrs, tag
        assert not [name for name in attrs if name.startswith("on")], tag
        if tag == "script":
            assert attrs.get("src") == "web/app.js"
    # every URL is relative: the page works behind a path prefix (a Backstage proxy route)
    for tag, attrs in parser.tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            assert value is None or not value.startswith(("/", "http")), (tag, value)
    script = client.get("/web/app.js").text
    assert "innerHTML" not in script
    assert "eval(" not in script


def test_the_assets_are_served_with_their_types_and_tags(client: TestClient) -> None:
    for name, media in MEDIA.items():
        path = "/" if name == "index.html" else f"/web/{name}"
        first = client.get(path)
        assert first.status_code == 200, name
        assert first.headers["content-type"] == media
        assert first.headers["cache-control"] == "no-cache"
        again = client.get(path, headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304


def test_an_unknown_asset_is_a_problem(client: TestClient) -> None:
    body = problem(client.get("/web/secrets.txt"), 404)
    assert body["field"] == "name"
    problem(client.get("/web/index.html"), 404)


def test_the_files_ship_in_the_wheel() -> None:
    # The image installs a wheel (Dockerfile): each served file must match the package data.
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["service.web"]
    static = resources.files("service.web").joinpath("static")
    for name in MEDIA:
        assert static.joinpath(name).is_file(), name
        assert any(fnmatch(f"static/{name}", pattern) for pattern in globs), name


def _directives(policy: str) -> dict[str, list[str]]:
    """A Content-Security-Policy as {directive: sources} (CSP Level 3, section 2.2.1)."""
    parsed: dict[str, list[str]] = {}
    for directive in policy.split(";"):
        name, *sources = directive.split()
        parsed[name] = sources
    return parsed


def test_the_page_and_its_files_bear_the_page_policy_and_the_api_its_own(
    client: TestClient,
) -> None:
    # One policy for the page and each of its files; the API's answers keep theirs (nothing
    # in them runs), the pictures the page shows among them.
    for name in MEDIA:
        path = "/" if name == "index.html" else f"/web/{name}"
        assert client.get(path).headers["content-security-policy"] == PAGE_POLICY, path
    assert client.get("/web/nope.js").headers["content-security-policy"] == PAGE_POLICY
    for path in ("/v1/gpus", "/v1/pictures/memory-budget?model=llama-3.1-8b&gpu=h100-sxm-80gb"):
        assert client.get(path).headers["content-security-policy"] == API_POLICY, path
    # what the page's policy allows: its own script, style, images and API calls, nothing
    # inline or from elsewhere, no framing, and no form submission at all
    page = _directives(PAGE_POLICY)
    assert page == {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'none'"],
    }


def test_the_form_cannot_put_its_fields_in_a_url(client: TestClient) -> None:
    # Where the script is not running, a submitted form would GET `/?field=...`: the form is
    # POST (and the policy's form-action 'none' stops even that), and the read key's field has
    # no name, so no submission of any kind carries it.
    parser = Tags()
    parser.feed(client.get("/").text)
    forms = [attrs for tag, attrs in parser.tags if tag == "form"]
    assert forms == [{"id": "question", "method": "post", "novalidate": None}]
    key = next(attrs for tag, attrs in parser.tags if attrs.get("id") == "api-key")
    assert key["type"] == "password"
    assert "name" not in key


class Fields(HTMLParser):
    """Each form field and whether a <label> names it: wrapped in one, or by its `for`."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, dict[str, str | None], bool]] = []
        self.labelled: set[str] = set()
        self.open_labels = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "label":
            self.open_labels += 1
            if named.get("for"):
                self.labelled.add(named["for"] or "")
        elif tag in ("input", "select", "textarea"):
            self.fields.append((tag, named, self.open_labels > 0))

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self.open_labels -= 1


def test_every_field_has_a_label_the_traffic_mode_included(client: TestClient) -> None:
    # A screen reader names a field by its label (HTML, "the label element": a label wraps
    # its control, or names it with `for`): none may go unnamed.
    parser = Fields()
    parser.feed(client.get("/").text)
    for tag, attrs, wrapped in parser.fields:
        assert wrapped or attrs.get("id") in parser.labelled, (tag, attrs)
    ids = {attrs.get("id"): attrs for _, attrs, _ in parser.fields}
    # the traffic mode's question: a rate and lengths or a trace file, the p99 targets, and
    # whether split pools are weighed (POST v1/plans' `workload`, targets, `disaggregated`)
    for name in ("request-rate", "input-tokens", "output-tokens", "num-requests"):
        assert ids[name]["type"] == "number", name
    for name in ("max-ttft-ms", "max-tpot-ms", "disaggregated"):
        assert name in ids, name
    # a trace in the public traces' own files: CSV (Azure, BurstGPT) or Mooncake's JSON lines
    accepted = (ids["trace-file"]["accept"] or "").split(",")
    assert ids["trace-file"]["type"] == "file"
    assert {".csv", ".jsonl"} <= set(accepted)
