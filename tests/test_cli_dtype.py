"""`kvplan capacity --dtype` and `--allow-long-max-model-len`: the shell asks what GET asks.

Llama-3.1-8B (the catalog's llama-3.1-8b): 32 layers x 8 KV heads x 128 x 2 (K, V) = 65,536
KV elements a token, 262,144 B at float32's 4 bytes; vLLM derives its limit, 131,072, from
max_position_embeddings (docs/engines/vllm.md#max-model-len).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main

QUESTION = ["capacity", "--offline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]


@pytest.fixture(autouse=True)
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_dtype_from_the_shell(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*QUESTION, "--max-model-len", "8192", "--dtype", "float", "--no-explain"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_bytes_per_token"] == 262_144


def test_a_length_past_the_limit_needs_the_override(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*QUESTION, "--max-model-len", "300000", "--no-explain"]) == 2
    problem = json.loads(capsys.readouterr().err)
    assert problem["field"] == "max_model_len"
    assert "131072" in problem["detail"]
    long = [*QUESTION, "--max-model-len", "300000", "--allow-long-max-model-len", "--no-explain"]
    assert main(long) == 0
    assert json.loads(capsys.readouterr().out)["max_model_len"] == 300_000


def test_the_engines_spellings_ask_the_same_question(capsys: pytest.CaptureFixture[str]) -> None:
    # SGLang's --context-length and --tp-size (python/sglang/srt/server_args.py ServerArgs) are
    # aliases of --max-model-len and --tensor-parallel-size, as on every HTTP door
    # (service/kit/engine_flags.py): the same question, the same answer, byte for byte.
    base = [*QUESTION, "--format", "json"]
    assert main([*base, "--context-length", "8192", "--tp-size", "2"]) == 0
    sglang = capsys.readouterr().out
    assert main([*base, "--max-model-len", "8192", "--tensor-parallel-size", "2"]) == 0
    assert sglang == capsys.readouterr().out
    assert json.loads(sglang)["tensor_parallel_size"] == 2


def test_an_unmodelled_memory_flag_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    # SGLang's --lora-paths loads adapters into a pool kvplan does not model yet: refused by
    # name (exit 2, the server's problem shape), never sized as if absent. (vLLM's --enable-lora
    # is sized since issue 21.)
    with pytest.raises(SystemExit) as refused:
        main([*QUESTION, "--lora-paths", "a"])
    assert refused.value.code == 2
    assert json.loads(capsys.readouterr().err)["field"] == "lora_paths"


def test_speculative_config_and_lora_from_the_shell(capsys: pytest.CaptureFixture[str]) -> None:
    # issue 21: vLLM's own flags, the speculative config as the JSON text vLLM's CLI takes; the
    # same answer as the API's (tests/planning/test_speculative_lora_api.py)
    base = [*QUESTION, "--max-model-len", "8192", "--engine-version", "0.33.0", "--format", "json"]
    assert main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    lora = ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "16"]
    ngram = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}']
    assert main([*base, *lora, *ngram]) == 0
    asked = json.loads(capsys.readouterr().out)
    # four rank-16 slots: 369,426,432 B of buffers + 417,920 B of punica metadata
    assert plain["kv_pool_bytes"] - asked["kv_pool_bytes"] == 369_844_352
