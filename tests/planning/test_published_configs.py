"""The logged models, asked as a user asks: their config.json as published, over HTTP and the CLI.

Each case is a public vLLM start-up log in tests/engine_logs/engine_logs.json (its `source`
names the repository and commit; listed here by model, TP and dtype) and the model's
config.json verbatim from tests/fixtures/hf_configs/ (SOURCES.md). The pool is the one the log's
own token count implies (blocks x block_size tokens x the bytes a token takes on one GPU), so
the test checks the config is read to the byte and the engine's two log lines come back
exactly: "GPU KV cache size: N tokens" and "Maximum concurrency for M tokens per request: Cx".

Per-token bytes, worked from each config: 2 (K and V) x layers x KV heads per GPU x head_dim x
2 B (bf16) or 1 B (fp8). vLLM blocks hold 16 tokens; from 0.9.1 the concurrency is blocks /
ceil(M / 16) (docs/engines/vllm.md#log-lines).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.cli import main

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"


@dataclass(frozen=True)
class Logged:
    config: str
    tensor_parallel_size: int
    kv_cache_dtype: str
    engine_version: str
    max_model_len: int
    bytes_per_token_per_gpu: int  # worked by hand from the config, below
    kv_cache_tokens: int  # as the log prints it
    max_concurrency: float  # as the log prints it
    gpu: str = "h100-sxm-80gb"

    @property
    def kv_pool_bytes(self) -> int:
        return self.kv_cache_tokens * self.bytes_per_token_per_gpu


CASES = {
    # Llama-3.1-8B-Instruct, H100, TP1, vLLM 0.19.0: 32 layers x 8 KV heads x 128:
    # 2 x 32 x 8 x 128 x 2 = 131,072 B; 476,016 tokens = 29,751 blocks; 29,751 / 512 = 58.11x.
    "llama-3.1-8b": Logged(
        "meta-llama--Meta-Llama-3.1-8B.json", 1, "auto", "0.19.0", 8192, 131_072, 476_016, 58.11
    ),
    # The same with --kv-cache-dtype fp8: 65,536 B; 952,032 tokens = 59,502 blocks -> 116.21x.
    "llama-3.1-8b-fp8": Logged(
        "meta-llama--Meta-Llama-3.1-8B.json", 1, "fp8", "0.19.0", 8192, 65_536, 952_032, 116.21
    ),
    # Qwen3-8B: 36 layers x 8 x 128: 147,456 B; 418,688 tokens = 26,168 blocks -> 51.11x.
    "qwen3-8b": Logged("Qwen--Qwen3-8B.json", 1, "auto", "0.19.0", 8192, 147_456, 418_688, 51.11),
    # Qwen3-30B-A3B: 48 layers x 4 x 128: 98,304 B; 168,288 tokens = 10,518 blocks -> 20.54x.
    "qwen3-30b-a3b": Logged(
        "Qwen--Qwen3-30B-A3B.json", 1, "auto", "0.19.0", 8192, 98_304, 168_288, 20.54
    ),
    # Mixtral-8x7B-Instruct, TP2: 32 layers x 8/2 KV heads x 128: 65,536 B per GPU;
    # 465,936 tokens = 29,121 blocks -> 56.88x.
    "mixtral-8x7b-tp2": Logged(
        "mistralai--Mixtral-8x7B-v0.1.json", 2, "auto", "0.19.0", 8192, 65_536, 465_936, 56.88
    ),
    # Qwen2.5-72B-Instruct, TP2: 80 layers x 8/2 x 128: 163,840 B per GPU; 19,920 tokens =
    # 1,245 blocks -> 2.43x.
    "qwen2.5-72b-tp2": Logged(
        "Qwen--Qwen2.5-72B.json", 2, "auto", "0.19.0", 8192, 163_840, 19_920, 2.43
    ),
    # Qwen2.5-7B-Instruct, vLLM 0.25.1, M = 4,096: 28 layers x 4 x 128: 57,344 B; 968,496
    # tokens = 60,531 blocks; 60,531 / 256 = 236.45x.
    "qwen2.5-7b": Logged(
        "Qwen--Qwen2.5-7B.json", 1, "auto", "0.25.1", 4096, 57_344, 968_496, 236.45
    ),
    # LLaVA-1.5-7B AWQ, vLLM 0.10.2 on a 16 GB card (github:mrpid12org/imageworks nohup.out): its
    # text_config gives no shapes, so LlamaConfig's defaults: 32 layers x 32 KV heads x 128 x
    # 2 B (fp16) x 2 = 524,288 B; 18,400 tokens = 1,150 blocks; 1,150 / 256 = 4.49x.
    "llava-1.5-7b-awq": Logged(
        "ybelkada--llava-1.5-7b-hf-awq.json",
        1,
        "auto",
        "0.10.2",
        4096,
        524_288,
        18_400,
        4.49,
        gpu="rtx-4090",
    ),
}


def _config(case: Logged) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((CONFIGS / case.config).read_text())
    return loaded


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_published_config_over_http_gives_the_logged_lines(client: TestClient, name: str) -> None:
    case = CASES[name]
    answer = client.post(
        "/v1/capacity",
        json={
            "model": {"hf_config": _config(case)},
            "gpu": case.gpu,
            "max_model_len": case.max_model_len,
            "kv_cache_dtype": case.kv_cache_dtype,
            "tensor_parallel_size": case.tensor_parallel_size,
            "engine_version": case.engine_version,
            "kv_pool_bytes": case.kv_pool_bytes,
        },
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (
        body["kv_bytes_per_token"] * 1 == case.bytes_per_token_per_gpu * case.tensor_parallel_size
    )
    assert body["kv_cache_tokens"] == case.kv_cache_tokens
    assert body["max_concurrency"] == case.max_concurrency


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-72b-tp2", "llava-1.5-7b-awq"])
def test_a_published_config_on_the_command_line_gives_the_logged_lines(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    code = main(
        [
            "capacity",
            "--offline",
            "--config",
            str(CONFIGS / case.config),
            "--gpu",
            case.gpu,
            "--max-model-len",
            str(case.max_model_len),
            "--tensor-parallel-size",
            str(case.tensor_parallel_size),
            "--engine-version",
            case.engine_version,
            "--kv-pool-bytes",
            str(case.kv_pool_bytes),
            "--no-explain",
        ]
    )
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["kv_cache_tokens"] == case.kv_cache_tokens
    assert body["max_concurrency"] == case.max_concurrency
