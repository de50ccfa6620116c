"""The worked examples of ../shared/design/seed-examples.md, asked as a user asks them.

tests/sizing/test_seed_examples.py checks the arithmetic on architectures built in Python; this
module asks POST /v1/capacity with `{"model": {"hf_config": <config.json verbatim>}}` and
`kvplan capacity --config FILE`, so the same numbers must come out of the published files.
Every config is in tests/fixtures/hf_configs/ (SOURCES.md names repository, path and commit):

- Llama 2 7B (examples 1-3): meta-llama/Llama-2-7b-hf as quoted in full in a source file.
- "Llama 3 8B" (examples 4, 5, 13, 14): Meta-Llama-3.1-8B. No verbatim Meta-Llama-3-8B file was
  found; 3.1-8B has the same KV geometry (num_hidden_layers 32, num_key_value_heads 8,
  hidden_size 4096 / num_attention_heads 32 = head_dim 128, torch_dtype bfloat16, 2 B like the
  examples' fp16), and its max_position_embeddings 131,072 is what lets vLLM accept the
  131,072-token questions of examples 5 and 14 (Meta-Llama-3-8B's is 8,192).
- Qwen2.5-7B (examples 6-8), Meta-Llama-3.1-70B (examples 9-12; 12's "70B-style bf16" is the
  same file at its own dtype), Qwen3.5-27B and nvidia/Qwen3.6-27B-NVFP4 (example 15; the NVFP4
  checkpoint's text_config has Qwen3.6-27B's layer schedule and shapes), DeepSeek-V3 (16).

The answers are sized for vLLM 0.33.0 where the engine's arithmetic enters (a given
kv_pool_bytes, so weights and overheads play no part; docs/engines/vllm.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main

CONFIGS = Path(__file__).parent.parent / "fixtures" / "hf_configs"
LLAMA2_7B = "meta-llama--Llama-2-7b-hf.json"
LLAMA3_8B = "meta-llama--Meta-Llama-3.1-8B.json"
QWEN25_7B = "Qwen--Qwen2.5-7B.json"
LLAMA31_70B = "meta-llama--Meta-Llama-3.1-70B.json"
QWEN35_27B = "Qwen--Qwen3.5-27B.json"
QWEN36_27B = "nvidia--Qwen3.6-27B-NVFP4.json"
DEEPSEEK_V3 = "deepseek-ai--DeepSeek-V3.json"
VLLM = "0.33.0"

KiB, MiB, GiB, GB = 2**10, 2**20, 2**30, 10**9


def _ask(client: TestClient, config: str, **question: Any) -> dict[str, Any]:
    body = {
        "model": {"hf_config": json.loads((CONFIGS / config).read_text())},
        "gpu": "h100-sxm-80gb",
        "engine_version": VLLM,
        **question,
    }
    answer = client.post("/v1/capacity", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _ask_cli(
    config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, *flags: str
) -> dict[str, Any]:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    argv = ["capacity", "--offline", "--config", str(CONFIGS / config), "--no-explain"]
    code = main([*argv, "--engine-version", VLLM, *flags])
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == (0 if result["fits"] else 1)  # exit 1: the layout does not fit
    return result


# Examples 1-3: Llama 2 7B, MHA.


def test_examples_1_2_llama2_7b_config_is_half_a_mebibyte_per_token(client: TestClient) -> None:
    body = _ask(client, LLAMA2_7B, max_model_len=4096)
    # Example 1: 2 x 32 layers x 32 KV heads x (4096 / 32 = 128) x 2 B (float16) = 524,288 B.
    assert body["kv_bytes_per_token"] == 524_288 == MiB // 2
    # Example 2: 524,288 B x 4,096 tokens = 2 GiB; a batch of 8 is 16 GiB.
    assert body["kv_bytes_per_sequence"] == 2 * GiB
    assert 8 * body["kv_bytes_per_sequence"] == 16 * GiB


def test_example_3_llama2_7b_33_sequences_in_66_gib_and_vllms_null_block(
    client: TestClient,
) -> None:
    # 80 GiB - ~14 GiB weights, no engine overhead: a 66 GiB pool.
    body = _ask(client, LLAMA2_7B, max_model_len=4096, kv_pool_bytes=66 * GiB)
    # The example's arithmetic: 66 GiB // 2 GiB per 4K sequence = 33.
    assert body["kv_pool_bytes"] // body["kv_bytes_per_sequence"] == 33
    # vLLM's: blocks of 16 tokens x 524,288 B = 8 MiB; 66 GiB / 8 MiB = 8,448 blocks; 4,096 /
    # 16 = 256 blocks a sequence; the log prints 8,448 / 256 = 33.00x, but block 0 is the null
    # block, so 8,447 // 256 = 32 whole sequences
    # (docs/engines/vllm.md#null-block-and-the-fit-check).
    assert body["num_gpu_blocks"] == 8_448
    assert body["max_concurrency"] == 33.0
    assert body["max_num_seqs"] == 32


# Examples 4, 5, 13, 14: Llama 3 8B (the 3.1-8B config; see the module docstring).


def test_example_4_llama3_8b_config_is_a_quarter_of_llama2_per_token(client: TestClient) -> None:
    gqa = _ask(client, LLAMA3_8B, max_model_len=4096)
    mha = _ask(client, LLAMA2_7B, max_model_len=4096)
    # 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B = 128 KiB; 32 KV heads is 4x that.
    assert gqa["kv_bytes_per_token"] == 131_072 == 128 * KiB
    assert mha["kv_bytes_per_token"] == 4 * gqa["kv_bytes_per_token"]


@pytest.mark.parametrize(
    ("tokens", "size"),
    [
        # Example 5: 131,072 B x 131,072 = 17,179,869,184 B = 16 GiB (17.18 GB).
        (131_072, 16 * GiB),
        # Example 5: 131,072 B x 2,048 = 268,435,456 B = 256 MiB.
        (2048, 256 * MiB),
    ],
)
def test_example_5_llama3_8b_config_sequences(client: TestClient, tokens: int, size: int) -> None:
    body = _ask(client, LLAMA3_8B, max_model_len=tokens)
    assert body["kv_bytes_per_sequence"] == size
    if tokens == 131_072:
        assert round(body["kv_bytes_per_sequence"] / GB, 2) == 17.18


def test_example_13_batch_of_4_at_4k_fp16_is_2_gib_and_doubles(client: TestClient) -> None:
    # 32 layers, 8 KV heads, 128, fp16: 131,072 B x 4,096 = 536,870,912 B a sequence;
    # x 4 = 2,147,483,648 B = 2 GiB; x 8 = 4 GiB.
    body = _ask(client, LLAMA3_8B, max_model_len=4096, kv_cache_dtype="float16")
    assert body["kv_bytes_per_token"] == 131_072
    assert 4 * body["kv_bytes_per_sequence"] == 2_147_483_648 == 2 * GiB
    assert 8 * body["kv_bytes_per_sequence"] == 4 * GiB


@pytest.mark.parametrize(
    ("tokens", "size", "calculator_gb"),
    [(2048, 256 * MiB, 1.20), (131_072, 16 * GiB, 76.72)],
)
def test_example_14_one_user_on_an_h100_from_the_config_alone(
    client: TestClient, tokens: int, size: int, calculator_gb: float
) -> None:
    # No pool given: the GPU and the config are the whole question. 256 MiB at 2K and 16 GiB
    # at 128K (131,072 B a token), not the published calculator's 1.20 GB and 76.72 GB.
    body = _ask(client, LLAMA3_8B, max_model_len=tokens, kv_cache_dtype="float16")
    assert body["kv_bytes_per_sequence"] == size
    assert round(body["kv_bytes_per_sequence"] / GB, 2) != calculator_gb
    # ~16 GB of bf16 weights on 80 GB leave far more than one 16 GiB sequence.
    assert body["fits"] is True
    assert body["max_num_seqs"] >= 1


# Examples 6-8: Qwen2.5-7B.


def test_example_6_qwen25_7b_config_is_56_kib_per_token(client: TestClient) -> None:
    # 2 x 28 layers x 4 KV heads x (3584 / 28 = 128) x 2 B (bf16) = 57,344 B = 56 KiB.
    assert _ask(client, QWEN25_7B, max_model_len=4096)["kv_bytes_per_token"] == 57_344 == 56 * KiB


@pytest.mark.parametrize(
    ("tokens", "size"),
    # 57,344 B x tokens: 7 MiB, 56 MiB, 224 MiB, 896 MiB, 7 GiB.
    [(128, 7 * MiB), (1024, 56 * MiB), (4096, 224 * MiB), (16_384, 896 * MiB), (131_072, 7 * GiB)],
)
def test_example_7_qwen25_7b_config_sequences(client: TestClient, tokens: int, size: int) -> None:
    assert _ask(client, QWEN25_7B, max_model_len=tokens)["kv_bytes_per_sequence"] == size


@pytest.mark.parametrize(
    ("tokens", "fits"),
    # The example's arithmetic, whole sequences per pool: 59,250,000,000 // (57,344 B x tokens)
    # = 504 (504.5), 126 (126.1), 31 (31.5), 7 (7.9).
    # vLLM's gives the same: 59,250,000,000 // (16 x 57,344 = 917,504 B a block) = 64,577
    # blocks, 64,576 after the null block; // (tokens / 16) blocks a sequence = 64,576 // 128,
    # 512, 2,048, 8,192 = 504, 126, 31, 7 (every length is a whole number of blocks, and the
    # null block crosses no boundary).
    [(2048, 504), (8192, 126), (32_768, 31), (131_072, 7)],
)
def test_example_8_qwen25_7b_concurrency_in_the_measured_59_25_gb_pool(
    client: TestClient, tokens: int, fits: int
) -> None:
    body = _ask(client, QWEN25_7B, max_model_len=tokens, kv_pool_bytes=59_250_000_000)
    assert body["kv_pool_bytes"] // body["kv_bytes_per_sequence"] == fits
    assert body["num_gpu_blocks"] == 64_577
    assert body["max_num_seqs"] == fits


# Examples 9-12: Llama 3.1 70B.


def test_example_9_llama31_70b_config_fp8_is_160_kib_per_token(client: TestClient) -> None:
    body = _ask(client, LLAMA31_70B, max_model_len=4096, kv_cache_dtype="fp8", kv_pool_bytes=GiB)
    # 2 x 80 layers x 8 KV heads x (8192 / 64 = 128) x 1 B = 163,840 B = 160 KiB.
    assert body["kv_bytes_per_token"] == 163_840 == 160 * KiB
    assert body["kv_cache_dtype"] == "fp8"


@pytest.mark.parametrize(
    ("tokens", "gb"),
    # 163,840 B x tokens: 163,840,000 / 983,040,000 / 1,638,400,000 / 20,971,520,000 B.
    [(1000, 0.164), (6000, 0.983), (10_000, 1.64), (128_000, 20.97)],
)
def test_example_10_llama31_70b_config_fp8_sequences_in_gigabytes(
    client: TestClient, tokens: int, gb: float
) -> None:
    body = _ask(client, LLAMA31_70B, max_model_len=tokens, kv_cache_dtype="fp8", kv_pool_bytes=GiB)
    assert round(body["kv_bytes_per_sequence"] / GB, len(str(gb).split(".")[1])) == gb


def test_example_10_the_40_gb_of_the_material_is_the_bf16_figure(client: TestClient) -> None:
    # The trap: "roughly 40 GB" at 128K is the config's own bf16: 327,680 B x 128,000 =
    # 41,943,040,000 B = 41.94 GB; fp8 halves it to 20.97 GB.
    bf16 = _ask(client, LLAMA31_70B, max_model_len=128_000, kv_pool_bytes=GiB)
    fp8 = _ask(client, LLAMA31_70B, max_model_len=128_000, kv_cache_dtype="fp8", kv_pool_bytes=GiB)
    assert bf16["kv_bytes_per_sequence"] == 41_943_040_000
    assert fp8["kv_bytes_per_sequence"] * 2 == bf16["kv_bytes_per_sequence"]


@pytest.mark.parametrize(
    ("tokens", "gb"),
    # 64 x 163,840 B x tokens: 62,914,560,000 / 31,457,280,000 / 125,829,120,000 B.
    [(6000, 62.9), (3000, 31.5), (12_000, 125.8)],
)
def test_example_11_llama31_70b_config_fp8_64_concurrent_sequences(
    client: TestClient, tokens: int, gb: float
) -> None:
    body = _ask(client, LLAMA31_70B, max_model_len=tokens, kv_cache_dtype="fp8", kv_pool_bytes=GiB)
    assert round(64 * body["kv_bytes_per_sequence"] / GB, 1) == gb


def test_example_12_70b_bf16_8k_sequence_is_2_5_gib(client: TestClient) -> None:
    # The config's torch_dtype bfloat16 under kv_cache_dtype auto: 2 x 80 x 8 x 128 x 2 B x
    # 8,192 = 2,684,354,560 B = 2.5 GiB; x 8 = 20 GiB; x 16 = 40 GiB.
    body = _ask(client, LLAMA31_70B, max_model_len=8192, kv_pool_bytes=GiB)
    assert body["kv_bytes_per_sequence"] == 2_684_354_560 == 5 * GiB // 2
    assert 8 * body["kv_bytes_per_sequence"] == 20 * GiB
    assert 16 * body["kv_bytes_per_sequence"] == 40 * GiB


# Example 15: Qwen3.6-27B / Qwen3.5-27B, 16 of 64 layers full attention.

# Each of the 48 gated-delta-net layers keeps one sequence's state
# (docs/engines/vllm.md#recurrent-state): conv 3 x (2 x 16 x 128 + 48 x 128) = 30,720 x 2 B
# (bf16) = 61,440 B and recurrent 48 x 128 x 128 x 4 B = 3,145,728 B, float32 because both
# configs' text_config says mamba_ssm_dtype float32 and vLLM >= 0.17 uses it (tests/sizing
# builds the state in bf16, 78,446,592 B; the published files double the recurrent part).
# 48 x 3,207,168 = 153,944,064 B.
LINEAR_STATE = 48 * (61_440 + 3_145_728)
POOL_43_GIB = 43 * GiB


@pytest.mark.parametrize("config", [QWEN35_27B, QWEN36_27B])
def test_example_15_counts_only_the_16_attention_layers_of_the_published_config(
    client: TestClient, config: str
) -> None:
    body = _ask(
        client, config, max_model_len=131_072, kv_cache_dtype="fp8", kv_pool_bytes=POOL_43_GIB
    )
    # layer_types: every 4th of 64 is full attention: 2 x 16 x 4 KV heads x 256 x 1 B = 32 KiB.
    assert body["kv_bytes_per_token"] == 32_768 == 32 * KiB
    # 32 KiB x 131,072 = 4 GiB, plus the fixed state.
    assert LINEAR_STATE == 153_944_064
    assert body["kv_bytes_per_sequence"] == 4 * GiB + LINEAR_STATE
    # The trap: all 64 layers would be 128 KiB and 16 GiB, "2.7 requests in 43 GiB". The
    # schedule gives 46,170,898,432 // 4,448,911,360 = 10 (10.4).
    assert body["kv_pool_bytes"] // body["kv_bytes_per_sequence"] == 10
    # vLLM 0.33.0's pages (docs/engines/vllm.md, hybrid block size, grouping, blocks per
    # request, prefix caching default): attention block 16 x cdiv(3,207,168, 16 x 2,048 B) =
    # 1,568 tokens, page 1,568 x 2,048 = 3,211,264 B; four groups of 16 layers, so a block is
    # 16 x 3,211,264 = 51,380,224 B: 46,170,898,432 // 51,380,224 = 898 blocks. A request holds
    # cdiv(131,072, 1,568) = 84 attention blocks + 2 state blocks ('align' mode, prefix
    # caching on for hybrids from 0.28) in each of 3 linear groups = 90: 898 / 90 = 9.98x;
    # (898 - 1 null block) // 90 = 9 whole sequences. About 10 either way, not 2.7.
    assert body["num_gpu_blocks"] == 898
    assert body["max_concurrency"] == 9.98
    assert body["max_num_seqs"] == 9


# Example 16: DeepSeek-V3, MLA.


@pytest.mark.parametrize("tensor_parallel_size", [1, 2, 4, 8])
@pytest.mark.parametrize(("kv_cache_dtype", "per_token"), [("auto", 70_272), ("fp8", 35_136)])
def test_example_16_deepseek_v3_config_latent_is_the_same_on_every_rank(
    client: TestClient, tensor_parallel_size: int, kv_cache_dtype: str, per_token: int
) -> None:
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers = 35,136 elements: x 2 B (the
    # config's bf16) = 70,272 B, x 1 B (fp8) = 35,136 B. Not split by TP: each rank holds the
    # whole latent, so a pool of 70,272 x 655,360 B holds the same tokens on every TP size:
    # 655,360 at bf16, 1,310,720 at fp8. The 128 KV heads of the config (2 x 61 x 128 x 192 x
    # 2 B = 5,996,544 B, about 85x) play no part.
    body = _ask(
        client,
        DEEPSEEK_V3,
        gpu="h200-141gb",
        max_model_len=4096,
        kv_cache_dtype=kv_cache_dtype,
        tensor_parallel_size=tensor_parallel_size,
        kv_pool_bytes=70_272 * 655_360,
    )
    assert body["kv_bytes_per_token"] == per_token
    assert body["kv_cache_tokens"] == 70_272 * 655_360 // per_token


# The command line answers the same from the same files.


@pytest.mark.parametrize(
    ("config", "flags", "field", "expected"),
    [
        # Example 2: 524,288 B x 4,096 = 2 GiB.
        (LLAMA2_7B, ["--max-model-len", "4096"], "kv_bytes_per_sequence", 2 * GiB),
        # Example 5: 131,072 B x 131,072 = 16 GiB.
        (LLAMA3_8B, ["--max-model-len", "131072"], "kv_bytes_per_sequence", 16 * GiB),
        # Example 8: 64,576 usable blocks // 128 blocks per 2K sequence = 504.
        (
            QWEN25_7B,
            ["--max-model-len", "2048", "--kv-pool-bytes", "59250000000"],
            "max_num_seqs",
            504,
        ),
        # Example 10: 163,840 B x 128,000 = 20,971,520,000 B (20.97 GB) at fp8.
        (
            LLAMA31_70B,
            ["--max-model-len", "128000", "--kv-cache-dtype", "fp8", "--kv-pool-bytes", str(GiB)],
            "kv_bytes_per_sequence",
            20_971_520_000,
        ),
        # Example 15: 4 GiB + 153,944,064 B of state at 131,072 tokens, fp8.
        (
            QWEN35_27B,
            [
                *("--max-model-len", "131072", "--kv-cache-dtype", "fp8"),
                *("--kv-pool-bytes", str(POOL_43_GIB)),
            ],
            "kv_bytes_per_sequence",
            4 * GiB + LINEAR_STATE,
        ),
        # Example 16: 35,136 B at fp8 on TP 8 as on one GPU.
        (
            DEEPSEEK_V3,
            [
                *("--gpu", "h200-141gb", "--tensor-parallel-size", "8", "--kv-cache-dtype", "fp8"),
                *("--max-model-len", "4096", "--kv-pool-bytes", str(GiB)),
            ],
            "kv_bytes_per_token",
            35_136,
        ),
    ],
)
def test_a_seed_example_config_on_the_command_line(
    config: str,
    flags: list[str],
    field: str,
    expected: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gpu = [] if "--gpu" in flags else ["--gpu", "h100-sxm-80gb"]
    body = _ask_cli(config, tmp_path, monkeypatch, capsys, *gpu, *flags)
    assert body[field] == expected


def test_example_15_nvfp4_checkpoint_declares_its_fp8_kv_cache_under_auto(
    client: TestClient,
) -> None:
    # The NVFP4 checkpoint's quantization_config (quant_method modelopt) carries kv_cache_scheme
    # {dynamic false, num_bits 8, type float}. vLLM's resolve_kv_cache_dtype_string
    # (vllm/utils/torch_utils.py, via get_kv_cache_quant_algo_string) turns --kv-cache-dtype
    # auto into fp8_e4m3 for it, so the example's FP8 figure, 2 x 16 x 4 x 256 x 1 B = 32 KiB,
    # is what vLLM allocates with no flag at all (0.14.0 on:
    # docs/engines/vllm.md#kv-cache-dtype-auto).
    body = _ask(client, QWEN36_27B, max_model_len=131_072, kv_pool_bytes=POOL_43_GIB)
    assert body["kv_bytes_per_token"] == 32_768
