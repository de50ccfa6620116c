"""GET /v1/pictures/speed-by-batch: decode time per token and throughput against the batch.

The question is tests/planning/test_capacity_speed.py's: Llama-3.1-8B on an H100 SXM with the
pool of worked example A (54 sequences of 8,192 tokens per replica), whose decode step at B
sequences is worked by hand there from the performance model's formulas (`decode_8b_ms`):
8.275 + 0.4077 B ms with the shipped fit. The batches drawn are 1, 2, 4, ..., 32 and 54.
"""

from __future__ import annotations

import io
import itertools
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from tests.conftest import ADMIN
from tests.helpers import problem
from tests.pictures.svg import SVG, parse, texts
from tests.planning.test_capacity_speed import BASE_8B, decode_8b_ms

PATH = "/v1/pictures/speed-by-batch"
BATCHES = [1, 2, 4, 8, 16, 32, 54]
# The plot: x from 90 to 700 px, the TPOT panel from 95 to 285 px (service/pictures/speed.py).
LEFT, RIGHT, TPOT_BOTTOM = 90.0, 700.0, 285.0


def _svg(client: TestClient, params: dict[str, Any]) -> ET.Element:
    response = client.get(PATH, params={**params, "format": "svg"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/svg+xml"
    return parse(response.content)


def _series(root: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in root.iter(f"{SVG}circle") if c.get("data-series") == name]


def _marker(root: ET.Element, name: str) -> ET.Element:
    (line,) = [e for e in root.iter(f"{SVG}line") if e.get("data-marker") == name]
    return line


def test_each_point_is_the_decode_step_at_its_batch(client: TestClient) -> None:
    root = _svg(client, BASE_8B)
    tpot = _series(root, "tpot")
    assert [int(c.get("data-batch", "0")) for c in tpot] == BATCHES
    for circle in tpot:
        batch = int(circle.get("data-batch", "0"))
        assert float(circle.get("data-ms", "0")) == pytest.approx(decode_8b_ms(batch), abs=1e-3)
    # throughput: B x 1000 / step ms (54 x 1000 / 30.29 = 1,783 tokens/s at 54)
    for circle in _series(root, "throughput"):
        batch = int(circle.get("data-batch", "0"))
        expected = batch * 1e3 / decode_8b_ms(batch)
        assert float(circle.get("data-tokens-per-second", "0")) == pytest.approx(expected, abs=0.1)
    # the last point is the capacity answer's own figure
    answer = client.get("/v1/capacity", params=BASE_8B).json()
    assert tpot[-1].get("data-ms") == f"{answer['decode_ms_per_token']:.3f}"


def test_the_batch_axis_is_log_scale_and_the_memory_limit_is_drawn(client: TestClient) -> None:
    root = _svg(client, BASE_8B)
    xs = [float(c.get("cx", "0")) for c in _series(root, "tpot")]
    # each doubling is 610 px / log2(54) = 106.0 px; 54 sits at the right edge, 700 px
    per_doubling = (RIGHT - LEFT) / math.log2(54)
    assert [b - a for a, b in itertools.pairwise(xs[:-1])] == pytest.approx(
        [per_doubling] * 5, abs=0.01
    )
    assert xs[-1] == pytest.approx(RIGHT, abs=0.01)
    memory = _marker(root, "memory_limit")
    assert memory.get("data-batch") == "54"
    assert float(memory.get("x1", "0")) == pytest.approx(RIGHT, abs=0.01)
    assert "max_num_seqs 54 (memory)" in texts(root)


def test_the_target_line_and_the_largest_batch_within_it(client: TestClient) -> None:
    root = _svg(client, {**BASE_8B, "max_tpot_ms": 25})
    # (25 - 8.275) / 0.4077 = 41.02: 41 sequences decode within 25 ms
    within = max(b for b in range(1, 55) if decode_8b_ms(b) <= 25)
    assert within == 41
    marker = _marker(root, "within_target")
    assert marker.get("data-batch") == str(within)
    # at log2(41) / log2(54) of the way across
    expected_x = LEFT + math.log2(41) / math.log2(54) * (RIGHT - LEFT)
    assert float(marker.get("x1", "0")) == pytest.approx(expected_x, abs=0.01)
    assert "41 sequences within 25 ms" in texts(root)
    # the target line is as high above the axis, for 25 ms, as the points are for theirs
    target_y = float(_marker(root, "tpot_target").get("y1", "0"))
    last = _series(root, "tpot")[-1]
    ratio = (TPOT_BOTTOM - target_y) / (TPOT_BOTTOM - float(last.get("cy", "0")))
    assert ratio == pytest.approx(25 / float(last.get("data-ms", "0")), abs=0.001)


def test_a_target_every_batch_meets_or_none_does_is_said(client: TestClient) -> None:
    # 8.275 + 0.4077 x 54 = 30.3 ms <= 40; one sequence alone takes 8.7 ms > 5
    easy = _svg(client, {**BASE_8B, "max_tpot_ms": 40})
    assert not [e for e in easy.iter(f"{SVG}line") if e.get("data-marker") == "within_target"]
    assert "max_num_seqs decodes within 40 ms." in " ".join(texts(easy))
    hard = _svg(client, {**BASE_8B, "max_tpot_ms": 5})
    assert "Not even one sequence decodes within 5 ms." in " ".join(texts(hard))


def test_a_gpu_without_figures_draws_the_reason(client: TestClient) -> None:
    # every shipped GPU has the figures (tests/catalog/test_gpu_prices.py); a caller's own GPU
    # written without a bandwidth has none
    memory = client.get("/v1/gpus/a100-40gb").json()["memory_bytes"]
    written = client.post(
        "/v1/gpus",
        json={"slug": "ours-40gb", "name": "ours", "memory_bytes": memory},
        headers=ADMIN,
    )
    assert written.status_code == 201, written.text
    root = _svg(client, {"model": "llama-3.1-8b", "gpu": "ours-40gb", "max_model_len": 4096})
    (first,) = [t for t in root.iter(f"{SVG}text") if t.get("data-label") == "unavailable"]
    assert (first.text or "").startswith("No speed estimate: ours-40gb has no")
    assert not _series(root, "tpot")


def test_the_png_is_drawn_too(client: TestClient) -> None:
    response = client.get(PATH, params={**BASE_8B, "max_tpot_ms": 25, "format": "png"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    assert image.size == (760, 600)
    assert len(image.getcolors(maxcolors=1 << 16) or []) > 20
    etag = response.headers["etag"]
    again = client.get(
        PATH,
        params={**BASE_8B, "max_tpot_ms": 25, "format": "png"},
        headers={"If-None-Match": etag},
    )
    assert again.status_code == 304


@pytest.mark.parametrize(
    ("params", "field"),
    [({"max_tpot_ms": -1}, "max_tpot_ms"), ({"max_tpot_ms": "fast"}, "max_tpot_ms")],
)
def test_bad_input_is_a_problem_never_an_image(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    response = client.get(PATH, params={**BASE_8B, **params, "format": "png"})
    assert problem(response, 422)["field"] == field


def test_post_draws_an_inline_gpu_with_its_figures(client: TestClient) -> None:
    memory = client.get("/v1/gpus/h100-sxm-80gb").json()["memory_bytes"]
    gpu = {
        "memory_bytes": memory,
        "name": "my H100",
        "memory_bandwidth_tb_s": 3.35,
        "dense_bf16_tflops": 989,
    }
    body = {**BASE_8B, "gpu": gpu}
    response = client.post(PATH, params={"format": "svg", "max_tpot_ms": 25}, json=body)
    assert response.status_code == 200, response.text
    root = parse(response.content)
    assert [float(c.get("data-ms", "0")) for c in _series(root, "tpot")] == pytest.approx(
        [decode_8b_ms(b) for b in BATCHES], abs=1e-3
    )
    assert _marker(root, "within_target").get("data-batch") == "41"


def test_the_spec_declares_the_picture(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"][PATH]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"model", "gpu", "max_model_len", "max_tpot_ms", "format"} <= names
    assert {"image/svg+xml", "image/png"} <= set(operation["responses"]["200"]["content"])


def test_the_readme_example_answers_a_png(client: TestClient) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (path,) = re.findall(r"`(/v1/pictures/speed-by-batch\?[^`]+)`", readme)
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
