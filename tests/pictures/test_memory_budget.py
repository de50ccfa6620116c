"""GET /v1/pictures/memory-budget: one GPU's memory as a stacked bar, drawn from the capacity.

Hand-worked case (worked example A of ../shared/design/engine-memory.md, as
tests/planning/test_capacity_api.py uses it): Llama-3.1-8B on an H100 SXM 80GB with a given
KV pool of 28,006 blocks of 2 MiB, max_model_len 8,192, peak_concurrency 100.

* GPU memory: 85,051,089,879 B (the catalog's h100-sxm-80gb `memory_bytes`).
* weights: 8,030,261,248 parameters x 2 B (bfloat16) = 16,060,522,496 B = 14.96 GiB.
* engine overhead: none estimated, since the pool is given.
* KV in use: max_num_seqs is 54 at 8,192 tokens, so 100 sequences need ceil(100 / 54) = 2
  replicas, 50 each; 50 sequences x cdiv(8,192, 16) = 512 blocks x 2 MiB = 53,687,091,200 B
  = 50.00 GiB (the pool holds 28,006 x 16 = 448,096 tokens: 28,006 x 2 MiB x 409,600 / 448,096
  is the same figure).
* free headroom: 85,051,089,879 - 16,060,522,496 - 53,687,091,200 = 15,303,476,183 B
  = 14.25 GiB.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from tests.helpers import problem
from tests.pictures.svg import parse, segments, texts

MiB = 1 << 20
POOL = 28_006 * 2 * MiB
GPU_MEMORY = 85_051_089_879
WEIGHTS = 8_030_261_248 * 2
KV_IN_USE = 50 * 512 * 2 * MiB
HEADROOM = GPU_MEMORY - WEIGHTS - KV_IN_USE
EXAMPLE_A = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "kv_pool_bytes": POOL,
    "engine_version": "0.20.0",
    "peak_concurrency": 100,
}
PATH = "/v1/pictures/memory-budget"


def _svg(client: TestClient, params: dict[str, Any]) -> bytes:
    response = client.get(PATH, params={**params, "format": "svg"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    return response.content


def _assert_proportional(bars: dict[str, tuple[Any, int]], total_bytes: int) -> None:
    """Stacked bottom up with no gap, and each height = its bytes / the GPU's, within 1 px."""
    order = ["weights", "overhead", "kv_in_use", "headroom"]
    full = sum(bars[key][0].height for key in order)
    bottom = bars["weights"][0].y + bars["weights"][0].height
    for key in order:
        box, size = bars[key]
        assert box.height == pytest.approx(size / total_bytes * full, abs=1.0), key
        assert box.y + box.height == pytest.approx(bottom, abs=0.02), key
        bottom = box.y


def test_the_bar_of_worked_example_a_is_hand_worked(client: TestClient) -> None:
    assert HEADROOM == 15_303_476_183
    root = parse(_svg(client, EXAMPLE_A))
    bars = segments(root)
    assert {key: size for key, (_, size) in bars.items()} == {
        "weights": WEIGHTS,
        "overhead": 0,
        "kv_in_use": KV_IN_USE,
        "headroom": HEADROOM,
    }
    # The four fill the GPU: 310 px tall (y 80 to 390), so weights are
    # 16,060,522,496 / 85,051,089,879 x 310 = 58.54 px and KV in use 195.68 px.
    _assert_proportional(bars, GPU_MEMORY)
    assert bars["weights"][0].height == pytest.approx(58.54, abs=0.01)
    assert bars["kv_in_use"][0].height == pytest.approx(195.68, abs=0.01)
    labels = texts(root)
    assert "weights: 14.96 GiB (19%)" in labels
    assert "engine overhead: 0.00 GiB (0%)" in labels
    assert "KV in use: 50.00 GiB (63%)" in labels
    assert "free headroom: 14.25 GiB (18%)" in labels
    assert any("50 sequences x 8,192 tokens" in t for t in labels)
    assert any(t.startswith("GPU memory 79.21 GiB") for t in labels)
    # the four segments have four colours
    assert len({box.fill for box, _ in bars.values()}) == 4


@pytest.mark.parametrize("engine_name", ["vllm", "sglang", "trtllm"])
def test_each_segment_is_the_capacity_answers_budget(client: TestClient, engine_name: str) -> None:
    params = {
        "model": "qwen3-8b",
        "gpu": "h100-sxm-80gb",
        "max_model_len": 16384,
        "kv_cache_dtype": "fp8",
        "engine": engine_name,
        "peak_concurrency": 40,
    }
    bars = segments(parse(_svg(client, params)))
    answer = client.post("/v1/capacity", json=params).json()
    lines = {
        line["name"]: line["bytes"] for line in answer["explanation"]["memory_budget"]["lines"]
    }
    spent = [v for k, v in lines.items() if v < 0 and k not in ("weights", "kv_cache_memory")]
    # the sequences one replica runs at the peak: ceil(40 / replicas)
    per_replica = -(-40 // answer["replicas_for_peak_concurrency"])
    in_use = answer["kv_pool_bytes"] * per_replica * 16384 // answer["kv_cache_tokens"]
    expected = {
        "weights": -lines["weights"],
        "overhead": -sum(spent),
        "kv_in_use": in_use,
        "headroom": GPU_MEMORY + lines["weights"] + sum(spent) - in_use,
    }
    assert {key: size for key, (_, size) in bars.items()} == expected
    assert expected["overhead"] > 0
    _assert_proportional(bars, GPU_MEMORY)


def test_without_a_peak_the_kv_in_use_is_max_num_seqs(client: TestClient) -> None:
    params = {key: v for key, v in EXAMPLE_A.items() if key != "peak_concurrency"}
    bars = segments(parse(_svg(client, params)))
    # 54 sequences x 512 blocks x 2 MiB (the engine's cap, 1,024 in 0.20, is higher)
    assert bars["kv_in_use"][1] == 54 * 512 * 2 * MiB


def test_a_model_that_does_not_fit_is_drawn_over_the_gpu_and_says_why(
    client: TestClient,
) -> None:
    params = {"model": "llama-3.1-70b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    root = parse(_svg(client, params))
    bars = segments(root)
    # GET /v1/capacity answers a layout that does not fit with a 422; POST explains it.
    capacity = client.post("/v1/capacity", json=params).json()
    assert capacity["fits"] is False
    assert bars["kv_in_use"][1] == 0
    assert bars["headroom"][1] == 0
    # the bar is scaled to what was asked: weights + overhead fill its 310 px
    assert bars["weights"][0].height + bars["overhead"][0].height == pytest.approx(310, abs=0.02)
    assert any(t.startswith("Does not fit:") for t in texts(root))


def test_the_png_is_the_same_picture(client: TestClient) -> None:
    bars = segments(parse(_svg(client, EXAMPLE_A)))
    response = client.get(PATH, params={**EXAMPLE_A, "format": "png"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    assert image.size == (760, 440)
    assert len(image.getcolors(maxcolors=1 << 16) or []) > 20  # not blank: text and bars
    for key, (box, size) in bars.items():
        if size == 0:
            continue
        inner = (
            round(box.x) + 3,
            round(box.y) + 3,
            round(box.x + box.width) - 3,
            round(box.y + box.height) - 3,
        )
        _, dominant = max(image.crop(inner).getcolors(maxcolors=1 << 16) or [])
        assert "#{:02x}{:02x}{:02x}".format(*dominant) == box.fill, key


def test_an_image_call_with_only_query_parameters_gets_a_png(client: TestClient) -> None:
    # What a spreadsheet's =IMAGE("...") sends: a plain GET, no Accept it chose.
    query = "&".join(f"{k}={v}" for k, v in EXAMPLE_A.items())
    for headers in ({}, {"accept": "*/*"}):
        response = client.get(f"{PATH}?{query}", headers=headers)
        assert response.status_code == 200
        assert response.headers["content-type"] == "image/png"
        assert response.content.startswith(b"\x89PNG\r\n\x1a\n")
        assert Image.open(io.BytesIO(response.content)).size == (760, 440)


def test_a_browser_img_gets_svg_and_accept_picks_the_format(client: TestClient) -> None:
    chrome_img = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
    for accept, media in (
        (chrome_img, "image/svg+xml"),
        ("image/png", "image/png"),
        ("image/svg+xml", "image/svg+xml"),
        ("image/svg+xml;q=0.5, image/png", "image/png"),
    ):
        response = client.get(PATH, params=EXAMPLE_A, headers={"accept": accept})
        assert response.headers["content-type"] == media, accept


def test_pictures_are_cacheable_like_the_capacity(client: TestClient) -> None:
    first = client.get(PATH, params={**EXAMPLE_A, "format": "png"})
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "public, max-age=30"
    assert "Accept" in first.headers["vary"]
    again = client.get(PATH, params={**EXAMPLE_A, "format": "png"}, headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    svg = client.get(PATH, params={**EXAMPLE_A, "format": "svg"})
    assert svg.headers["etag"] != etag


@pytest.mark.parametrize(
    ("params", "headers", "status", "field"),
    [
        ({"model": "no-such-model"}, {}, 404, "model"),
        ({"kv_cache_dtype": "fp4"}, {}, 422, "kv_cache_dtype"),
        ({"format": "gif"}, {}, 422, "format"),
        ({"tensor_parallel_size": 0}, {}, 422, "tensor_parallel_size"),
        ({"format": None}, {"accept": "application/json"}, 406, "Accept"),
    ],
)
def test_bad_input_is_a_problem_never_an_image(
    client: TestClient, params: dict[str, Any], headers: dict[str, str], status: int, field: str
) -> None:
    query = {k: v for k, v in {**EXAMPLE_A, "format": "png", **params}.items() if v is not None}
    for path in (PATH, "/v1/pictures/capacity-by-context"):
        body = problem(client.get(path, params=query, headers=headers), status)
        assert field in (body.get("field") or "") or any(
            field in str(e.get("field", "")) for e in body.get("errors") or []
        ), body


def test_a_capacity_url_draws_with_only_its_path_changed(client: TestClient) -> None:
    # A sheet's capacity cell: ...&field=max_num_seqs; the same parameters draw the picture.
    query = {**EXAMPLE_A, "field": "max_num_seqs"}
    assert client.get("/v1/capacity", params=query).text == "54"
    response = client.get(PATH, params=query)
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"


def test_post_draws_an_inline_model_and_escapes_its_name(client: TestClient) -> None:
    name = "evil <script>&\"quotes\" 'x'\x01"
    hf_config = {
        "_name_or_path": name,
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    body = {
        "model": {"hf_config": hf_config, "num_parameters": 8_030_261_248},
        "gpu": "h100-sxm-80gb",
        "max_model_len": 8192,
        "kv_pool_bytes": POOL,
        "engine_version": "0.20.0",
        "peak_concurrency": 100,
    }
    response = client.post(PATH, params={"format": "svg"}, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    root = parse(response.content)
    title = root.find("{http://www.w3.org/2000/svg}title")
    assert title is not None
    assert title.text == "GPU memory budget: evil <script>&\"quotes\" 'x' on h100-sxm-80gb"
    assert b"<script" not in response.content
    # the same architecture as the catalog's llama-3.1-8b: the same bar
    assert {k: s for k, (_, s) in segments(root).items()} == {
        "weights": WEIGHTS,
        "overhead": 0,
        "kv_in_use": KV_IN_USE,
        "headroom": HEADROOM,
    }
    png = client.post(PATH, json=body, headers={"accept": "image/png"})
    assert png.headers["content-type"] == "image/png"
