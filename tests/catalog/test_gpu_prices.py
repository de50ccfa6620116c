"""Every catalog GPU is priced with its source and date (or says why not), and can be timed.

Issue 20: a procurement analyst reads the price a plan used, where it was read, and whose it
is. The sources and the arithmetic behind each figure: docs/catalog-sources.md#gpu-prices and
docs/catalog-sources.md#gpu-links.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.catalog.seed import load_seed
from tests.conftest import ADMIN

SEED_GPUS = load_seed("gpus.json")
SLUGS = [g["slug"] for g in SEED_GPUS]
UNPRICED = "unpriced: "


def seed_gpu(slug: str) -> dict[str, Any]:
    return next(g for g in SEED_GPUS if g["slug"] == slug)


@pytest.mark.parametrize("slug", SLUGS)
def test_every_gpu_has_a_price_with_its_source_and_date_or_says_why_not(slug: str) -> None:
    g = seed_gpu(slug)
    source = g["price_source"]
    assert source, slug
    if g["price_usd_per_hour"] is None:
        # No published on-demand price: the field says so, with the reason.
        assert source.startswith(UNPRICED), source
        assert len(source) > len(UNPRICED) + 20, source
        assert g["price_date"] is None
    else:
        assert g["price_usd_per_hour"] > 0
        assert not source.startswith(UNPRICED)
        # An on-demand figure, not a spot one, and a date it was published or read.
        assert "on-demand" in source or "on demand" in source or "rate" in source, source
        assert "spot" not in source.split("(")[0].lower(), source
        date.fromisoformat(g["price_date"])


# The catalog GPUs without a published on-demand price, each with the words of its reason
# (docs/catalog-sources.md#gpu-prices, where the searches are listed).
UNPRICED_GPUS = {
    # every provider listing GB300 says "contact sales" / "contact us"
    "gb300": ("CoreWeave", "Contact sales", "Nebius", "Contact us"),
    # the one hourly figure is a third-party index's, its offer and mode unread at the provider
    "h20": ("third-party index", "Compshare", "billing mode and date not stated"),
    # a DGX Spark is bought, not rented: its owned cost is in price_examples, unranked
    "gb10": ("no on-demand rental offer", "bought, not rented"),
}


def test_only_the_gpus_without_a_published_price_are_unpriced() -> None:
    unpriced = {g["slug"] for g in SEED_GPUS if g["price_usd_per_hour"] is None}
    assert unpriced == set(UNPRICED_GPUS)
    for slug, reason in UNPRICED_GPUS.items():
        source = seed_gpu(slug)["price_source"]
        assert all(words in source for words in reason), (slug, source)


def test_the_h20_figure_found_is_converted_with_its_rate_and_kept_unranked() -> None:
    # 7.5 CNY an hour (third-party index) / 6.9858 CNY per USD (CFETS central parity of
    # 2026-01-27, Xinhua: 100 USD = 698.58 yuan) = 1.07360... -> 1.0736 USD an hour
    h20 = seed_gpu("h20")
    (example,) = h20["price_examples"].values()
    assert example == round(7.5 / (698.58 / 100), 4) == 1.0736
    assert h20["price_usd_per_hour"] is None
    assert "6.9858 CNY per USD" in h20["price_source"]


def test_a_plan_of_unpriced_gpus_says_they_are_unpriced_and_how_it_ranked(
    client: TestClient,
) -> None:
    response = client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-8b",
            "max_model_len": 8192,
            "peak_concurrency": 16,
            "gpus": ["gb300", "h20", "gb10"],
            "explain": False,
        },
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    best = answer["recommendation"]
    assert best["price_usd_per_hour"] is None
    assert best["cost_per_hour_usd"] is None
    assert best["price_source"] == seed_gpu(best["gpu"])["price_source"]
    assert best["price_source"].startswith(UNPRICED)
    # no option has a cost: the order is by GPU count, and the plan says so
    counts = [o["total_gpus"] for o in [best, *answer["alternatives"]]]
    assert counts == sorted(counts)
    (said,) = [w for w in answer["warnings"] if "no price" in w]
    assert said.startswith("gb10, gb300, h20 have no price, so no option has a cost")
    assert "rank by GPU count" in said


@pytest.mark.parametrize("slug", SLUGS)
def test_every_gpu_has_the_figures_a_speed_estimate_needs(slug: str) -> None:
    g = seed_gpu(slug)
    assert g["memory_bandwidth_tb_s"] > 0, slug
    assert g["dense_bf16_tflops"] > 0, slug
    assert g["max_gpus_per_node"] >= 1
    # A node of more than one GPU needs the link its all-reduces cross.
    if g["max_gpus_per_node"] > 1:
        assert g["interconnect_gb_s"] > 0, slug
    # FP8 and FP4 peaks only where the GPU computes in those formats.
    if g["dense_fp8_tflops"] is not None:
        assert g["fp8_support"] is True, slug
    if g["dense_fp4_tflops"] is not None:
        assert g["dense_fp4_tflops"] > g["dense_fp8_tflops"], slug


def test_derived_prices_by_hand() -> None:
    # DGX Spark Founders Edition $3,999 over 3 years of hours (3 x 8,760 = 26,280):
    # 3,999 / 26,280 = 0.152169... -> 0.1522; at $4,699: 0.178805... -> 0.1788. Owned costs,
    # kept as examples: the GB10 is unpriced, so no plan ranks them against rental prices.
    owned = seed_gpu("gb10")["price_examples"]
    assert sorted(owned.values()) == [0.1522, 0.1788]
    assert seed_gpu("gb10")["price_usd_per_hour"] is None
    # Vultr's 8 x MI355X VM, on demand, $2.59 per GPU-hour (Oracle Cloud $8.60).
    assert seed_gpu("mi355x")["price_usd_per_hour"] == 2.59


def test_derived_speed_figures_by_hand() -> None:
    # MI355X, from its compute units (ISSCC 2026: 8,192 FP8 FLOPs per CU per clock; 256 CUs at
    # 2,400 MHz): 256 x 8,192 x 2.4e9 = 5.0331648e15 -> 5,033.2 TFLOPS FP8; BF16 half,
    # 2,516.6; FP4 twice, 10,066.3 (AMD's 20 PFLOPS sparse FP4 / 2 = 10 PFLOPS dense).
    mi355x = seed_gpu("mi355x")
    assert mi355x["dense_fp8_tflops"] == round(256 * 8192 * 2.4e9 / 1e12, 1) == 5033.2
    assert mi355x["dense_bf16_tflops"] == 2516.6
    assert mi355x["dense_fp4_tflops"] == 10066.3
    # Seven xGMI links of 153.6 GB/s both ways: 7 x 153.6 / 2 = 537.6 GB/s each way.
    assert mi355x["interconnect_gb_s"] == 537.6
    # GB10: aiconfigurator's measured dense peaks; FP8 is not twice BF16 on sm_121.
    gb10 = seed_gpu("gb10")
    assert (gb10["dense_bf16_tflops"], gb10["dense_fp8_tflops"], gb10["dense_fp4_tflops"]) == (
        213,
        214,
        427,
    )
    assert (gb10["memory_bandwidth_tb_s"], gb10["max_gpus_per_node"]) == (0.273, 1)
    # Spheron: $9.08 an hour per GB200 superchip of two Blackwell GPUs -> 9.08 / 2 = 4.54.
    assert seed_gpu("gb200")["price_usd_per_hour"] == 4.54
    # Beam: A10G $0.00046716 a second x 3,600 = $1.681776 -> 1.6818.
    assert seed_gpu("a10g")["price_usd_per_hour"] == 1.6818
    # Runcrate: $1.35 an hour per MI250X card, which is two devices (GCDs) -> 0.675 each.
    assert seed_gpu("mi250x")["price_usd_per_hour"] == 0.675
    # Cliff Center 2026-05-18: TensorWave $1.50 on demand; $1.71 is Crusoe's spot price.
    assert seed_gpu("mi300x")["price_usd_per_hour"] == 1.5
    assert seed_gpu("mi300x")["price_examples"]["Crusoe (spot)"] == 1.71


@pytest.mark.parametrize(
    ("slug", "mib", "total"),
    [
        # nvidia-smi memory.total x 2^20 (docs/catalog-sources.md#gpu-memory-as-torch-reports-it:
        # entries without a torch reading keep nvidia-smi's total)
        ("a10", 23_028, 24_146_608_128),  # 23,028 x 1,048,576
        ("h20", 97_871, 102_625_181_696),  # 97,871 x 1,048,576
        ("l40", 46_068, 48_305_799_168),  # 46,068 x 1,048,576
        ("rtx-5090", 32_607, 34_190_917_632),  # 32,607 x 1,048,576
    ],
)
def test_added_gpus_are_sized_from_nvidia_smi(slug: str, mib: int, total: int) -> None:
    g = seed_gpu(slug)
    assert g["nvidia_smi_memory_mib"] == mib
    assert g["memory_bytes"] == total
    assert f"{mib} MiB = {total:,} B" in g["memory_source"]


def test_the_catalog_api_answers_each_gpus_price_source(client: TestClient) -> None:
    response = client.get("/v1/gpus", params={"limit": 100})
    assert response.status_code == 200, response.text
    items = {item["slug"]: item for item in response.json()["items"]}
    assert sorted(items) == sorted(SLUGS)
    for slug, item in items.items():
        assert item["price_source"] == seed_gpu(slug)["price_source"]
        assert item["interconnect_gb_s"] == seed_gpu(slug)["interconnect_gb_s"]
    # the spreadsheet list carries the source beside the price
    table = client.get("/v1/gpus", params={"limit": 100, "format": "csv"}).text
    header = table.splitlines()[0].split(",")
    assert "price_source" in header
    assert "interconnect_gb_s" in header


@pytest.mark.parametrize("slug", SLUGS)
def test_every_catalog_gpu_gets_a_speed_estimate_at_tensor_parallel_2_or_its_node(
    client: TestClient, slug: str
) -> None:
    # Llama-3.1-8B: 16 GB of bf16 weights, 8 GB per GPU at TP 2, fits every catalog GPU; a GPU
    # alone in its node (GB10, a DGX Spark) is timed at TP 1 with all 16 GB, in its 119.70 GiB.
    tp = min(2, seed_gpu(slug)["max_gpus_per_node"])
    response = client.get(
        "/v1/capacity",
        params={
            "model": "llama-3.1-8b",
            "gpu": slug,
            "max_model_len": 4096,
            "tensor_parallel_size": tp,
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["decode_ms_per_token"] is not None, body["warnings"]
    assert body["output_tokens_per_second"] > 0


def _l4_plan(client: TestClient) -> dict[str, Any]:
    response = client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-8b",
            "max_model_len": 4096,
            "peak_concurrency": 4,
            "gpus": ["l4"],
            "explain": False,
        },
    )
    assert response.status_code == 200, response.text
    best: dict[str, Any] = response.json()["recommendation"]
    return best


def test_a_plan_says_whose_price_it_used(client: TestClient) -> None:
    catalog = _l4_plan(client)
    assert catalog["price_usd_per_hour"] == 0.44
    assert catalog["price_source"] == seed_gpu("l4")["price_source"]
    assert catalog["price_origin"] == "catalog"
    # cost = total_gpus x price per GPU-hour
    assert catalog["cost_per_hour_usd"] == round(catalog["total_gpus"] * 0.44, 4)

    # The caller writes their contract price through the catalog API: plans use it and say so.
    patched = client.patch(
        "/v1/gpus/l4",
        json={"price_usd_per_hour": 0.3, "price_source": "our 2027 contract, per GPU-hour"},
        headers={**ADMIN, "If-Match": '"1"'},
    )
    assert patched.status_code == 200, patched.text
    override = _l4_plan(client)
    assert override["price_usd_per_hour"] == 0.3
    assert override["price_source"] == "our 2027 contract, per GPU-hour"
    assert override["price_origin"] == "caller's override"
    assert override["cost_per_hour_usd"] == round(override["total_gpus"] * 0.3, 4)


def test_an_inline_price_is_the_callers(client: TestClient) -> None:
    response = client.post(
        "/v1/plans",
        json={
            "model": "llama-3.1-8b",
            "max_model_len": 4096,
            "peak_concurrency": 4,
            "gpus": [{"memory_bytes": 80 * 2**30, "name": "ours", "price_usd_per_hour": 1.25}],
        },
    )
    assert response.status_code == 200, response.text
    best = response.json()["recommendation"]
    assert best["price_usd_per_hour"] == 1.25
    assert best["price_origin"] == "caller's override"
    assert best["price_source"] is None


def test_a_new_price_without_its_source_drops_the_old_source_and_date(
    client: TestClient,
) -> None:
    patched = client.patch(
        "/v1/gpus/l4", json={"price_usd_per_hour": 0.3}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert patched.status_code == 200, patched.text
    # JarvisLabs' source and date described $0.44, not the caller's $0.30
    assert patched.json()["price_source"] is None
    assert patched.json()["price_date"] is None
    best = _l4_plan(client)
    assert (best["price_usd_per_hour"], best["price_origin"]) == (0.3, "caller's override")
    assert best["price_source"] is None
    # a patch that leaves the price alone keeps its provenance
    notes = client.patch(
        "/v1/gpus/h100-sxm-80gb", json={"notes": "ours"}, headers={**ADMIN, "If-Match": '"1"'}
    )
    assert notes.json()["price_source"] == seed_gpu("h100-sxm-80gb")["price_source"]
