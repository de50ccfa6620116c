"""/v1/gpus: lists, reads, writes with optimistic concurrency, and their problems."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.catalog.seed import load_seed
from tests.catalog.helpers import all_pages
from tests.conftest import ADMIN
from tests.helpers import problem

GiB = 1 << 30
H100_BYTES = 85_051_089_879  # seed: torch-reported total of an H100 SXM 80GB
NEW_GPU = {"slug": "test-gpu-48gb", "name": "Test GPU 48GB", "memory_bytes": 48 * GiB}


def created(client: TestClient, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = client.post("/v1/gpus", json=body or NEW_GPU, headers=ADMIN)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


# ---- lists ----------------------------------------------------------------------------------


def test_list_is_an_envelope_in_slug_order(client: TestClient) -> None:
    response = client.get("/v1/gpus")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"items", "limit", "next_cursor", "next"}
    assert body["limit"] == 50
    slugs = [item["slug"] for item in body["items"]]
    # the seed has fewer than 50 GPUs: one page holds them all, in byte order
    assert slugs == sorted(g["slug"] for g in load_seed("gpus.json"))
    assert body["next"] is None


def test_following_next_visits_every_seeded_gpu_exactly_once(client: TestClient) -> None:
    # a page size that does not divide the count, so the last page is short
    slugs, pages = all_pages(client, "/v1/gpus?limit=3")
    expected = sorted(g["slug"] for g in load_seed("gpus.json"))
    assert slugs == expected
    assert pages == -(-len(expected) // 3)


def test_next_keeps_the_filters(client: TestClient) -> None:
    slugs, pages = all_pages(client, "/v1/gpus?vendor=nvidia&limit=4")
    expected = sorted(g["slug"] for g in load_seed("gpus.json") if g["vendor"] == "NVIDIA")
    assert slugs == expected
    assert pages == -(-len(expected) // 4)
    assert "mi300x" not in slugs


def test_pages_of_exactly_the_remaining_size_end_without_an_empty_page(
    client: TestClient,
) -> None:
    count = len(load_seed("gpus.json"))
    body = client.get("/v1/gpus", params={"limit": count}).json()
    assert len(body["items"]) == count
    # the extra row fetched to detect a next page does not exist: no dangling empty page
    assert body["next"] is None


def test_vendor_filter_is_case_insensitive(client: TestClient) -> None:
    body = client.get("/v1/gpus", params={"vendor": "amd"}).json()
    assert [item["slug"] for item in body["items"]] == ["mi250x", "mi300x", "mi325x", "mi355x"]
    assert {item["vendor"] for item in body["items"]} == {"AMD"}


def test_min_memory_filter_keeps_only_gpus_with_at_least_that_much(client: TestClient) -> None:
    # 150 GiB: more than every Hopper part, less than B200 (178.4 GiB as torch reports it)
    body = client.get("/v1/gpus", params={"min_memory_bytes": 150 * GiB}).json()
    expected = sorted(g["slug"] for g in load_seed("gpus.json") if g["memory_bytes"] >= 150 * GiB)
    assert [item["slug"] for item in body["items"]] == expected
    assert "b200" in expected
    assert "h200-141gb" not in expected  # 150,109,106,995 B = 139.8 GiB


def test_min_memory_filter_is_inclusive(client: TestClient) -> None:
    body = client.get("/v1/gpus", params={"min_memory_bytes": H100_BYTES, "vendor": "NVIDIA"})
    slugs = [item["slug"] for item in body.json()["items"]]
    assert "h100-sxm-80gb" in slugs
    assert "a100-sxm-80gb" not in slugs  # 84,986,665,370 B: 64 MB short


def test_price_and_fp8_filters(client: TestClient) -> None:
    body = client.get(
        "/v1/gpus", params={"max_price_usd_per_hour": 1.6, "fp8_support": "true"}
    ).json()
    expected = sorted(
        g["slug"]
        for g in load_seed("gpus.json")
        if g["price_usd_per_hour"] is not None
        and g["price_usd_per_hour"] <= 1.6
        and g["fp8_support"] is True
    )
    assert [item["slug"] for item in body["items"]] == expected
    # docs/catalog-sources.md#gpu-prices: the FP8 GPUs at $1.60/h or less
    assert expected == [
        "l4",  # 0.44
        "l40",  # 1.22
        "l40s",  # 1.57
        "mi300x",  # 1.50
        "rtx-4090",  # 0.35
        "rtx-5090",  # 1.22
        "rtx-6000-ada",  # 0.57
        "rtx-pro-6000-blackwell-server",  # 1.57
    ]


def test_a_filter_that_matches_nothing_is_an_empty_page(client: TestClient) -> None:
    body = client.get("/v1/gpus", params={"vendor": "Cerebras"}).json()
    assert body["items"] == []
    assert body["next"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"min_memory_bytes": 0}, "min_memory_bytes"),
        ({"max_price_usd_per_hour": -1}, "max_price_usd_per_hour"),
        ({"cursor": "not a cursor!"}, "cursor"),
    ],
)
def test_bad_list_parameters_are_422_naming_them(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    body = problem(client.get("/v1/gpus", params=params), 422)
    assert body["field"] == field


# ---- reads ----------------------------------------------------------------------------------


def test_get_one_has_the_revision_as_etag(client: TestClient) -> None:
    response = client.get("/v1/gpus/h100-sxm-80gb")
    assert response.status_code == 200
    body = response.json()
    assert body["memory_bytes"] == H100_BYTES
    assert body["vendor"] == "NVIDIA"
    assert body["origin"] == "seed"
    assert body["revision"] == 1
    assert response.headers["etag"] == '"1"'


def test_conditional_get_with_the_current_etag_is_304(client: TestClient) -> None:
    response = client.get("/v1/gpus/h100-sxm-80gb", headers={"If-None-Match": '"1"'})
    assert response.status_code == 304
    assert response.content == b""
    assert response.headers["etag"] == '"1"'
    stale = client.get("/v1/gpus/h100-sxm-80gb", headers={"If-None-Match": '"7"'})
    assert stale.status_code == 200


def test_unknown_slug_is_404_suggesting_the_closest(client: TestClient) -> None:
    body = problem(client.get("/v1/gpus/h100-sxm-80g"), 404)
    assert body["suggestions"][0] == "h100-sxm-80gb"
    assert body["field"] == "slug"
    assert body["type"] == "/problems/not-found"


def test_unknown_slug_that_is_not_even_a_slug_still_suggests(client: TestClient) -> None:
    # upper case is never a valid slug, but the reader meant the lower-case one
    body = problem(client.get("/v1/gpus/H200-141GB"), 404)
    assert body["suggestions"][0] == "h200-141gb"


# ---- create ---------------------------------------------------------------------------------


def test_create_with_only_slug_name_and_memory(client: TestClient) -> None:
    response = client.post("/v1/gpus", json=NEW_GPU, headers=ADMIN)
    assert response.status_code == 201
    assert response.headers["location"] == "/v1/gpus/test-gpu-48gb"
    assert response.headers["etag"] == '"1"'
    body = response.json()
    assert body["memory_bytes"] == 48 * GiB
    assert body["max_gpus_per_node"] == 8  # the default ceiling for tensor parallelism
    assert body["vendor"] is None
    assert body["sources"] == []
    assert body["origin"] == "user"
    assert body["revision"] == 1
    again = client.get(response.headers["location"])
    assert again.status_code == 200
    assert again.json() == body


def test_create_keeps_every_optional_field(client: TestClient) -> None:
    full = {
        **NEW_GPU,
        "vendor": "Acme",
        "fp8_support": True,
        "max_gpus_per_node": 4,
        "price_usd_per_hour": 1.25,
        "price_date": "2026-06-14",
        "price_examples": {"Cloud A": 1.25},
        "sources": ["https://example.com/datasheet"],
        "notes": "a test part",
    }
    body = created(client, full)
    for key, value in full.items():
        assert body[key] == value, key


def test_duplicate_slug_is_409(client: TestClient) -> None:
    created(client)
    body = problem(client.post("/v1/gpus", json=NEW_GPU, headers=ADMIN), 409)
    assert body["field"] == "slug"
    problem(client.post("/v1/gpus", json={**NEW_GPU, "slug": "h100-sxm-80gb"}, headers=ADMIN), 409)


@pytest.mark.parametrize(
    ("patch", "field", "constraint"),
    [
        ({"memory_bytes": 0}, "memory_bytes", {"ge": 1}),
        ({"memory_bytes": 2**50 + 1}, "memory_bytes", {"le": 2**50}),
        ({"max_gpus_per_node": 65}, "max_gpus_per_node", {"le": 64}),
        ({"price_usd_per_hour": -0.01}, "price_usd_per_hour", {"ge": 0}),
        ({"slug": "Has Spaces"}, "slug", None),
        ({"name": ""}, "name", {"min_length": 1}),
        ({"memory_byte": 1}, "memory_byte", None),  # a typo is refused, not ignored
    ],
)
def test_fields_out_of_bounds_are_422_naming_the_field(
    client: TestClient, patch: dict[str, Any], field: str, constraint: dict[str, Any] | None
) -> None:
    body = problem(client.post("/v1/gpus", json={**NEW_GPU, **patch}, headers=ADMIN), 422)
    assert body["field"] == field
    assert body["errors"][0]["field"] == field
    if constraint is not None:
        assert body["errors"][0]["constraint"] == constraint
    assert client.get("/v1/gpus/test-gpu-48gb").status_code == 404


def test_missing_required_field_is_422_naming_it(client: TestClient) -> None:
    body = problem(client.post("/v1/gpus", json={"slug": "x-gpu", "name": "X"}, headers=ADMIN), 422)
    assert body["field"] == "memory_bytes"


def test_invalid_json_is_422_naming_the_body(client: TestClient) -> None:
    response = client.post(
        "/v1/gpus",
        content=b'{"slug": "x-gpu", ',
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    body = problem(response, 422)
    assert body["field"] == "body"
    assert "not valid JSON" in body["detail"]


# ---- authentication, before the body ----------------------------------------------------------

WRONG = {"Authorization": "Bearer not-the-admin-token"}


@pytest.mark.parametrize("headers", [{}, WRONG, {"Authorization": "Basic dXNlcjpwYXNz"}])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/gpus"),
        ("PUT", "/v1/gpus/h100-sxm-80gb"),
        ("PATCH", "/v1/gpus/h100-sxm-80gb"),
        ("DELETE", "/v1/gpus/h100-sxm-80gb"),
    ],
)
def test_writes_without_an_admin_token_are_401_even_with_an_invalid_body(
    client: TestClient, headers: dict[str, str], method: str, path: str
) -> None:
    # the token is checked before the body is read: a 422 here would leak the schema
    response = client.request(
        method,
        path,
        content=b"{not json",
        headers={**headers, "Content-Type": "application/json", "If-Match": '"1"'},
    )
    body = problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert body["type"] == "/problems/unauthorized"
    assert client.get("/v1/gpus/h100-sxm-80gb").json()["revision"] == 1


# ---- updates and deletes --------------------------------------------------------------------


def test_patch_with_current_if_match_bumps_revision_and_etag(client: TestClient) -> None:
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb",
        json={"price_usd_per_hour": 2.19, "price_date": "2026-07-01"},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"2"'
    body = response.json()
    assert body["revision"] == 2
    assert body["price_usd_per_hour"] == 2.19
    assert body["price_date"] == "2026-07-01"
    # what the patch did not name is as it was; the entry is the user's now
    assert body["memory_bytes"] == H100_BYTES
    assert body["origin"] == "user"
    again = client.get("/v1/gpus/h100-sxm-80gb")
    assert again.headers["etag"] == '"2"'
    assert again.json()["price_usd_per_hour"] == 2.19


def test_an_empty_patch_changes_nothing(client: TestClient) -> None:
    # A merge patch of {} names no field: no new revision, and the seed still owns the entry
    # (so a later `kvplan seed` may refresh it).
    response = client.patch("/v1/gpus/h100-sxm-80gb", json={}, headers={**ADMIN, "If-Match": '"1"'})
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"1"'
    assert response.json()["revision"] == 1
    assert response.json()["origin"] == "seed"


def test_patch_null_clears_an_optional_field_but_not_a_required_one(client: TestClient) -> None:
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb", json={"notes": None}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert response.status_code == 200
    assert response.json()["notes"] is None
    body = problem(
        client.patch(
            "/v1/gpus/h100-sxm-80gb",
            json={"memory_bytes": None},
            headers={**ADMIN, "If-Match": '"2"'},
        ),
        422,
    )
    assert body["field"] == "memory_bytes"


def test_patch_merges_price_examples_key_by_key(client: TestClient) -> None:
    before = client.get("/v1/gpus/h100-sxm-80gb").json()["price_examples"]
    assert before, "the seed has observed prices for the H100"
    provider = next(iter(before))
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb",
        json={"price_examples": {provider: None, "Test Cloud": 9.99}},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    expected = {k: v for k, v in before.items() if k != provider} | {"Test Cloud": 9.99}
    assert response.json()["price_examples"] == expected


@pytest.mark.parametrize(
    "prices", [{"Test Cloud": -1.0}, {"Test Cloud": "Infinity"}, {"Bad\u0000Cloud": 1.0}]
)
def test_patched_prices_are_checked_like_created_ones(
    client: TestClient, prices: dict[str, Any]
) -> None:
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb",
        json={"price_examples": prices},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert problem(response, 422)["field"].startswith("price_examples")
    assert client.get("/v1/gpus/h100-sxm-80gb").json()["revision"] == 1


def test_merged_prices_stay_within_the_create_bound(client: TestClient) -> None:
    created(client, {**NEW_GPU, "price_examples": {f"cloud-{i}": 1.0 for i in range(60)}})
    response = client.patch(
        "/v1/gpus/test-gpu-48gb",
        json={"price_examples": {f"other-{i}": 2.0 for i in range(60)}},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    body = problem(response, 422)
    assert body["field"] == "price_examples"
    assert body["errors"][0]["constraint"] == {"max_length": 100}


def test_put_replaces_every_field(client: TestClient) -> None:
    created(client, {**NEW_GPU, "vendor": "Acme", "notes": "old"})
    response = client.put(
        "/v1/gpus/test-gpu-48gb",
        json={"name": "Renamed", "memory_bytes": 40 * GiB},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"2"'
    body = response.json()
    assert (body["name"], body["memory_bytes"], body["revision"]) == ("Renamed", 40 * GiB, 2)
    # omitted optional fields are cleared by a replace
    assert body["vendor"] is None
    assert body["notes"] is None


def test_put_cannot_change_the_slug(client: TestClient) -> None:
    body = problem(
        client.put(
            "/v1/gpus/h100-sxm-80gb",
            json={"slug": "renamed", "name": "X", "memory_bytes": 1},
            headers={**ADMIN, "If-Match": '"1"'},
        ),
        422,
    )
    assert body["field"] == "slug"


def test_stale_if_match_is_412_with_the_current_etag(client: TestClient) -> None:
    first = client.patch(
        "/v1/gpus/h100-sxm-80gb", json={"tdp_w": 700}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert first.status_code == 200
    # a second writer still holding revision 1
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb", json={"tdp_w": 650}, headers={**ADMIN, "If-Match": '"1"'}
    )
    body = problem(response, 412)
    assert response.headers["etag"] == '"2"'
    assert body["current_revision"] == 2
    assert client.get("/v1/gpus/h100-sxm-80gb").json()["tdp_w"] == 700
    put = client.put(
        "/v1/gpus/h100-sxm-80gb",
        json={"name": "X", "memory_bytes": 1},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    problem(put, 412)


@pytest.mark.parametrize("if_match", [None, "", "*"])
def test_missing_if_match_is_428(client: TestClient, if_match: str | None) -> None:
    headers = dict(ADMIN) if if_match is None else {**ADMIN, "If-Match": if_match}
    patch = client.patch("/v1/gpus/h100-sxm-80gb", json={"tdp_w": 1}, headers=headers)
    assert problem(patch, 428)["field"] == "If-Match"
    put = client.put(
        "/v1/gpus/h100-sxm-80gb", json={"name": "X", "memory_bytes": 1}, headers=headers
    )
    problem(put, 428)
    problem(client.delete("/v1/gpus/h100-sxm-80gb", headers=headers), 428)
    assert client.get("/v1/gpus/h100-sxm-80gb").json()["revision"] == 1


def test_if_match_accepts_a_list_and_weak_tags(client: TestClient) -> None:
    # proxies that compress answers weaken ETags (W/"1"); clients echo what they were given
    response = client.patch(
        "/v1/gpus/h100-sxm-80gb", json={"tdp_w": 700}, headers={**ADMIN, "If-Match": '"9", W/"1"'}
    )
    assert response.status_code == 200
    assert response.json()["revision"] == 2


def test_write_to_an_unknown_slug_is_404(client: TestClient) -> None:
    response = client.patch(
        "/v1/gpus/no-such-gpu", json={"tdp_w": 1}, headers={**ADMIN, "If-Match": '"1"'}
    )
    problem(response, 404)
    problem(client.delete("/v1/gpus/no-such-gpu", headers={**ADMIN, "If-Match": '"1"'}), 404)


def test_delete_with_if_match(client: TestClient) -> None:
    created(client)
    stale = client.delete("/v1/gpus/test-gpu-48gb", headers={**ADMIN, "If-Match": '"2"'})
    problem(stale, 412)
    response = client.delete("/v1/gpus/test-gpu-48gb", headers={**ADMIN, "If-Match": '"1"'})
    assert response.status_code == 204
    assert response.content == b""
    problem(client.get("/v1/gpus/test-gpu-48gb"), 404)
    # the slug is free again
    assert created(client)["revision"] == 1


# ---- writes reach the sizing endpoints --------------------------------------------------------


def test_capacity_sees_a_new_gpu_at_once(client: TestClient) -> None:
    params = {"model": "llama-3.1-8b", "gpu": "test-gpu-48gb", "max_model_len": 8192}
    problem(client.get("/v1/capacity", params=params), 404)
    created(client)
    response = client.get("/v1/capacity", params=params)
    assert response.status_code == 200, response.text
    assert response.json()["gpu"] == "test-gpu-48gb"


def test_capacity_follows_a_patched_gpu_memory(client: TestClient) -> None:
    params = {"model": "llama-3.1-8b", "gpu": "test-gpu-48gb", "max_model_len": 8192}
    created(client)
    before = client.get("/v1/capacity", params=params).json()
    response = client.patch(
        "/v1/gpus/test-gpu-48gb",
        json={"memory_bytes": 80 * GiB},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert response.status_code == 200
    after = client.get("/v1/capacity", params=params).json()
    assert after["max_num_seqs"] > before["max_num_seqs"]


def test_capacity_forgets_a_deleted_gpu(client: TestClient) -> None:
    params = {"model": "llama-3.1-8b", "gpu": "test-gpu-48gb", "max_model_len": 8192}
    created(client)
    assert client.get("/v1/capacity", params=params).status_code == 200
    client.delete("/v1/gpus/test-gpu-48gb", headers={**ADMIN, "If-Match": '"1"'})
    body = problem(client.get("/v1/capacity", params=params), 404)
    assert body["field"] == "gpu"


def test_the_gpu_list_as_csv_for_spreadsheets(client: TestClient) -> None:
    response = client.get("/v1/gpus", params={"format": "csv", "vendor": "NVIDIA", "limit": 100})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    by_slug = {row["slug"]: row for row in rows}
    h100 = by_slug["h100-sxm-80gb"]
    assert int(h100["memory_bytes"]) == H100_BYTES
    # GiB is 2^30 B: 85,051,089,879 / 1,073,741,824 = 79.21
    assert h100["memory_gib"] == "79.21"
    assert "mi300x" not in by_slug


def test_csv_cells_that_look_like_formulas_stay_text(client: TestClient) -> None:
    # A spreadsheet would run "=..." from a CSV cell (CSV injection); the apostrophe keeps it
    # text, as OWASP advises.
    created(client, {"slug": "formula-gpu", "name": '=HYPERLINK("http://x")', "memory_bytes": 1})
    response = client.get("/v1/gpus", params={"format": "csv", "limit": 100})
    row = next(r for r in csv.DictReader(io.StringIO(response.text)) if r["slug"] == "formula-gpu")
    assert row["name"] == '\'=HYPERLINK("http://x")'


def test_tokens_are_never_logged_nor_shown_in_settings(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    wrong = "wrong-token-d41d8cd98f00"
    response = client.post(
        "/v1/gpus",
        json={"slug": "x", "name": "X", "memory_bytes": 1},
        headers={"Authorization": f"Bearer {wrong}"},
    )
    assert response.status_code == 401
    assert wrong not in caplog.text
    assert wrong not in response.text
    settings = client.app.state.settings  # type: ignore[attr-defined]
    assert ADMIN["Authorization"].split()[1] not in repr(settings)
