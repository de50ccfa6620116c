"""`kvplan capacity` takes the names the API takes (docs/names.md#gpus-by-name): the CLI asks
planning's one use case, which resolves names through the catalog snapshot."""

from __future__ import annotations

import json

import pytest

from service.cli import main


def _capacity(capsys: pytest.CaptureFixture[str], model: str, gpu: str) -> dict[str, object]:
    args = ["capacity", "--offline", "--model", model, "--gpu", gpu]
    assert main([*args, "--max-model-len", "8192", "--engine-version", "0.20.0"]) == 0
    body: dict[str, object] = json.loads(capsys.readouterr().out)
    return body


def test_the_shell_takes_hf_ids_and_short_gpu_names(capsys: pytest.CaptureFixture[str]) -> None:
    by_slug = _capacity(capsys, "llama-3.1-8b-instruct", "h100-sxm-80gb")
    by_name = _capacity(capsys, "meta-llama/Llama-3.1-8B-Instruct", "h100")
    assert (by_name["model"], by_name["gpu"]) == ("llama-3.1-8b-instruct", "h100-sxm-80gb")
    assert by_name == by_slug
