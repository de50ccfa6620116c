"""A GPU given only by its memory bytes is recognised as the catalog GPU those bytes are.

vLLM's batch defaults read the device name: from 0.9.0 an A100 stays in the small tier
(max_num_batched_tokens 2048, max_num_seqs 256) although its 79.15 GiB is over the 70 GiB line
that puts other GPUs in the large tier (8192, 1024) (docs/engines/vllm.md#batch-defaults). A GPU
given by bytes alone used to be nameless and so always got the large tier.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from service.catalog.seed import load_seed

GiB = 2**30


def _catalog_bytes(slug: str) -> int:
    # The shipped catalog's runtime-reported total (service/catalog/data/gpus.json).
    return next(int(g["memory_bytes"]) for g in load_seed("gpus.json") if g["slug"] == slug)


def _ask(client: TestClient, gpu: object, version: str = "0.10.1") -> dict[str, object]:
    body = {"model": "llama-3.1-8b", "gpu": gpu, "max_model_len": 8192, "engine_version": version}
    answer = client.post("/v1/capacity", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, object] = answer.json()
    return result


def test_an_a100s_bytes_get_the_a100s_small_batch_tier(client: TestClient) -> None:
    by_bytes = _ask(client, {"memory_bytes": _catalog_bytes("a100-sxm-80gb")})
    assert by_bytes["gpu_recognised_as"] == "a100-sxm-80gb"
    settings = by_bytes["engine_settings"]
    assert isinstance(settings, dict)
    assert (settings["max_num_batched_tokens"], settings["max_num_seqs"]) == (2048, 256)
    warnings = by_bytes["warnings"]
    assert isinstance(warnings, list)
    assert "a100-sxm-80gb" in warnings[0]


def test_a_recognised_gpu_answers_exactly_as_the_catalog_gpu_does(client: TestClient) -> None:
    by_bytes = _ask(client, {"memory_bytes": _catalog_bytes("a100-sxm-80gb")})
    by_slug = _ask(client, "a100-sxm-80gb")
    for figure in ("kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens", "max_num_seqs"):
        assert by_bytes[figure] == by_slug[figure], figure
    assert by_bytes["engine_settings"] == by_slug["engine_settings"]


def test_bytes_no_catalog_gpu_reports_get_the_defaults_for_their_size_and_say_so(
    client: TestClient,
) -> None:
    # One GiB above the A100's total: 80.15 GiB matches no catalog GPU (the nearest, the H100
    # SXM at 79.21 GiB, is 0.94 GiB away), and >= 70 GiB is vLLM's large tier.
    unknown = _ask(client, {"memory_bytes": _catalog_bytes("a100-sxm-80gb") + GiB})
    assert unknown["gpu_recognised_as"] is None
    settings = unknown["engine_settings"]
    assert isinstance(settings, dict)
    assert (settings["max_num_batched_tokens"], settings["max_num_seqs"]) == (8192, 1024)
    warnings = unknown["warnings"]
    assert isinstance(warnings, list)
    assert "no catalog GPU reports" in warnings[0]


def test_a_total_printed_by_another_release_still_finds_its_gpu(client: TestClient) -> None:
    # vLLM 0.19 logs print an H100 SXM as 79.19 GiB, the catalog holds 79.21 GiB
    # (docs/catalog-sources.md#gpu-memory-as-torch-reports-it): 0.02 GiB apart, one GPU.
    printed = round(79.19 * GiB)
    answer = client.get(
        "/v1/capacity",
        params={"model": "llama-3.1-8b", "gpu_memory_bytes": printed, "max_model_len": 8192},
    )
    assert answer.status_code == 200
    assert answer.json()["gpu_recognised_as"] == "h100-sxm-80gb"


def test_an_inline_gpu_with_a_name_keeps_its_own_name(client: TestClient) -> None:
    named = _ask(client, {"memory_bytes": _catalog_bytes("a100-sxm-80gb"), "name": "NVIDIA H100"})
    assert named["gpu_recognised_as"] is None
    settings = named["engine_settings"]
    assert isinstance(settings, dict)
    # The caller named an H100: the large tier, whatever the bytes.
    assert settings["max_num_batched_tokens"] == 8192
