"""GET /v1/pictures/capacity-by-context: max_num_seqs from 1K tokens to the model's maximum.

Llama-3.1-8B's config.json says max_position_embeddings 131,072 = 2^17 (the catalog's
llama-3.1-8b), so the curve has 1K, 2K, ... 128K: 2^10 to 2^17, eight lengths, evenly spaced on
the log axis; each point's figure is what GET /v1/capacity answers at that length.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.pictures.svg import data_circles, parse, texts

PATH = "/v1/pictures/capacity-by-context"
QUESTION = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "kv_cache_dtype": "fp8"}


def _points(client: TestClient, params: dict[str, Any]) -> tuple[list[Any], Any]:
    response = client.get(PATH, params={**params, "format": "svg"})
    assert response.status_code == 200, response.text
    root = parse(response.content)
    circles = data_circles(root)
    marked = [c for c in circles if c.get("data-requested") == "true"]
    assert len(marked) == 1
    return [c for c in circles if c.get("data-requested") is None], marked[0]


def test_the_curve_runs_from_1k_to_the_models_maximum(client: TestClient) -> None:
    points, marked = _points(client, {**QUESTION, "max_model_len": 8192})
    lengths = [int(c.get("data-tokens")) for c in points]
    assert lengths == [1 << n for n in range(10, 18)]
    for circle in points:
        n = int(circle.get("data-tokens"))
        seqs = client.get(
            "/v1/capacity", params={**QUESTION, "max_model_len": n, "field": "max_num_seqs"}
        ).text
        assert circle.get("data-seqs") == seqs, n
    assert marked.get("data-tokens") == "8192"
    assert marked.get("data-seqs") == next(
        c.get("data-seqs") for c in points if c.get("data-tokens") == "8192"
    )


def test_the_x_axis_is_log_scale_and_y_is_linear(client: TestClient) -> None:
    points, _ = _points(client, {**QUESTION, "max_model_len": 8192})
    xs = [float(c.get("cx")) for c in points]
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    # each doubling of the context is the same distance: 630 px / 7 doublings = 90 px
    assert gaps == pytest.approx([90.0] * 7, abs=0.01)
    # y: the point's height above the axis is proportional to its max_num_seqs
    bottom = 390.0
    heights = {int(c.get("data-seqs")): bottom - float(c.get("cy")) for c in points}
    most = max(heights)
    for seqs, height in heights.items():
        assert height == pytest.approx(seqs / most * heights[most], abs=1.0)


def test_the_requested_length_is_marked_and_labelled(client: TestClient) -> None:
    # 24,576 is no power of two: it gets its own point between 16K and 32K
    points, marked = _points(client, {**QUESTION, "max_model_len": 24576})
    seqs = client.get(
        "/v1/capacity", params={**QUESTION, "max_model_len": 24576, "field": "max_num_seqs"}
    ).text
    assert marked.get("data-tokens") == "24576"
    assert marked.get("data-seqs") == seqs
    x16k = next(float(c.get("cx")) for c in points if c.get("data-tokens") == "16384")
    x32k = next(float(c.get("cx")) for c in points if c.get("data-tokens") == "32768")
    # log2(24,576) = log2(16,384) + log2(1.5): 58.5% of the way from 16K to 32K
    assert float(marked.get("cx")) == pytest.approx(x16k + 0.58496 * (x32k - x16k), abs=0.05)
    root = parse(
        client.get(PATH, params={**QUESTION, "max_model_len": 24576, "format": "svg"}).content
    )
    assert f"24,576 tokens: {int(seqs):,} sequences" in texts(root)
    assert {"1K", "16K", "32K", "128K"} <= set(texts(root))


def test_without_max_model_len_the_models_maximum_is_marked(client: TestClient) -> None:
    points, marked = _points(client, QUESTION)
    assert marked.get("data-tokens") == "131072"
    assert max(int(c.get("data-tokens")) for c in points) == 131072


def test_post_draws_a_pasted_config_up_to_its_own_maximum(client: TestClient) -> None:
    hf_config = {
        "_name_or_path": "my-org/small-llama",
        "model_type": "llama",
        "num_hidden_layers": 16,
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    body = {
        "model": {"hf_config": hf_config, "num_parameters": 1_235_814_400},
        "gpu": {"memory_bytes": 24 * (1 << 30)},
        "max_model_len": 4096,
    }
    response = client.post(PATH, params={"format": "svg"}, json=body)
    assert response.status_code == 200, response.text
    circles = data_circles(parse(response.content))
    # 1K to 32,768 = 32K: 2^10 .. 2^15
    assert sorted({int(c.get("data-tokens")) for c in circles}) == [1 << n for n in range(10, 16)]
    expected = client.post("/v1/capacity", json=body).json()["max_num_seqs"]
    marked = next(c for c in circles if c.get("data-requested") == "true")
    assert int(marked.get("data-seqs")) == expected
