"""Every calibration log kvplan can size, kept as a calibration: the calibrated question at the
log's own settings answers the engine's printed tokens, blocks and concurrency exactly, and one
that differs only in max_model_len or max_num_seqs follows by the engine's arithmetic.

The vLLM 0.19.0 logs of jgchn/llm-d-planner whose models the catalog names by hf_id are in
test_calibrations_api.py; here are the others of engine_logs.json (and two whole logs of the
same runs kept in logs/): older vLLM V0 and V1 ("# GPU blocks", "GPU KV cache size"), newer
releases, SGLang (max_total_num_tokens) and TensorRT-LLM ("Using N tokens in paged KV cache").
Where the log names no catalog model, the case names the catalog entry with the same
architecture (an -Instruct or -Chat tune of a base model, a checkpoint under a local path):
the KV cache depends only on the geometry, and the pool is the engine's own. Left out: logs
that reveal neither their model's geometry nor their layout (TP) — #21348's two lines, the
DeepSeek-R1-Distill TP2 failure whose quote prints no TP, the unnamed Qwen2-1.5B-class
TensorRT-LLM engine, the Llama-3.2-11B-Vision, Kimi-VL, phi-4 and Mistral-Small runs (no
catalog entry), and the PR #273 prose.

Every expected figure is the log's own line, quoted beside it; the variants are worked by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import ADMIN
from tests.engine_logs.calibration import entry, read_log
from tests.helpers import problem

V019 = "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"


@dataclass(frozen=True)
class Case:
    """A log, the hints that name what it ran, the figures it prints, and one variant."""

    source: str  # an engine_logs.json source prefix, or `logs/<file>` for a whole log
    hints: dict[str, str]
    question: dict[str, Any]  # the capacity question with the log's settings
    kv_cache_tokens: int
    max_concurrency: float | None = None
    num_gpu_blocks: int | None = None
    max_num_seqs: int | None = None
    variant: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)


def _vllm(version: str, gpu: str, model: str, max_model_len: int, **more: Any) -> dict[str, Any]:
    return {
        "model": model,
        "gpu": gpu,
        "engine": "vllm",
        "engine_version": version,
        "max_model_len": max_model_len,
        **more,
    }


CASES: dict[str, Case] = {
    # vLLM V0 (vllm-project/vllm#10517, RTX 3090, 23.58 GiB): "# GPU blocks: 1952",
    # "Maximum concurrency for 20000 tokens per request: 1.56x" (1952 x 16 / 20000). The issue
    # was filed on 2024-12-02, when 0.6.4 was the release; the log prints none. V0 profiles
    # max(max_model_len, max_num_batched_tokens) tokens, so another max_model_len is another
    # calibration key; max_num_seqs is not: one 20,000-token sequence takes cdiv(20000, 16) =
    # 1,250 blocks, 1952 // 1250 = 1 fits, and a peak of 100 needs 100 replicas either way.
    "vllm-v0-rtx3090-20k": Case(
        "github:vllm-project/vllm#10517 (comment by kaspersiminski, 2024-12-02, '20k - OK')",
        {"model": "llama-3.1-8b-instruct", "gpu": "rtx-3090", "engine_version": "0.6.4"},
        _vllm("0.6.4", "rtx-3090", "llama-3.1-8b-instruct", 20000, gpu_memory_utilization=0.9),
        kv_cache_tokens=1952 * 16,
        max_concurrency=1.56,
        num_gpu_blocks=1952,
        max_num_seqs=1,
        variant={"max_num_seqs": 16, "peak_concurrency": 100},
        expected={"max_num_seqs": 1, "replicas_for_peak_concurrency": 100},
    ),
    # vLLM V1, Jan 2025 main (PR #12569; 0.7.1 was cut that week): "# GPU blocks: 1381",
    # "Maximum concurrency for 2048 tokens per request: 10.79x" (1381 x 16 / 2048). The GPU is
    # not printed (one 80 GB card): it only sets how the pool moves with the utilization. A
    # 2,048-token sequence takes 128 blocks: 1381 // 128 = 10; max_num_seqs 16 does not bind,
    # so a peak of 100 needs ceil(100 / 10) = 10 replicas.
    "vllm-v1-0.7-70b-w8a8": Case(
        "github:vllm-project/vllm PR #12569 (2025-01-30)",
        {"model": "llama-3.1-70b-instruct-w8a8", "gpu": "h100-sxm-80gb", "engine_version": "0.7.1"},
        _vllm("0.7.1", "h100-sxm-80gb", "llama-3.1-70b-instruct-w8a8", 2048),
        kv_cache_tokens=1381 * 16,
        max_concurrency=10.79,
        num_gpu_blocks=1381,
        max_num_seqs=10,
        variant={"max_num_seqs": 16, "peak_concurrency": 100},
        expected={"max_num_seqs": 10, "replicas_for_peak_concurrency": 10},
    ),
    # vLLM V1, April 2025 main (PR #17122, one L40S; 0.8.5): "GPU KV cache size: 158,656
    # tokens", "Maximum concurrency for 32,768 tokens per request: 4.84x". V1 sizes the pool
    # from a profile over max_num_batched_tokens, not max_model_len
    # (vllm/v1/worker/gpu_worker.py, determine_available_memory): at 4,096 tokens the pool
    # and its 158,656 / 16 = 9,916 blocks stay; a request takes 256 blocks: 9,916 / 256 =
    # 38.73x, and (9,916 - 1) // 256 = 38 whole sequences (the null block is never handed out).
    "vllm-v1-0.8-l40s": Case(
        "github:vllm-project/vllm PR #17122",
        {"model": "llama-3.1-8b-instruct", "gpu": "l40s", "engine_version": "0.8.5"},
        _vllm("0.8.5", "l40s", "llama-3.1-8b-instruct", 32768, gpu_memory_utilization=0.9),
        kv_cache_tokens=158_656,
        max_concurrency=4.84,
        max_num_seqs=4,
        variant={"max_model_len": 4096},
        expected={"kv_cache_tokens": 158_656, "max_concurrency": 38.73, "max_num_seqs": 38},
    ),
    # vLLM 0.11.0 on an L4, the whole log (logs/vllm-0.11.0-l4.log; engine_logs.json's
    # abinavChandar/demo_env_l4 entry is its quote): "GPU KV cache size: 38,944 tokens",
    # "Maximum concurrency for 32,000 tokens per request: 1.22x". At 4,096: 2,434 blocks /
    # 256 = 9.51x, (2,434 - 1) // 256 = 9.
    "vllm-0.11-l4": Case(
        "logs/vllm-0.11.0-l4.log",
        {"model": "llama-3.1-8b-instruct", "gpu": "l4"},
        _vllm("0.11.0", "l4", "llama-3.1-8b-instruct", 32000, gpu_memory_utilization=0.92),
        kv_cache_tokens=38_944,
        max_concurrency=1.22,
        num_gpu_blocks=2434,
        max_num_seqs=1,
        variant={"max_model_len": 4096},
        expected={"kv_cache_tokens": 38_944, "max_concurrency": 9.51, "max_num_seqs": 9},
    ),
    # vLLM 0.16.0, Llama-3-70B AWQ at TP2 on L40S (kagaho/VLLM_Serve_llama3-70b-awq...):
    # "GPU KV cache size: 132,128 tokens", "Maximum concurrency for 8,192 tokens per request:
    # 16.13x"; utilization the 0.9 default. At 4,096: 8,258 blocks / 256 = 32.26x, 32 whole.
    "vllm-0.16-l40s-tp2": Case(
        "github:kagaho/VLLM_Serve_llama3-70b-awq_on_L40S",
        {"model": "meta-llama-3-70b", "gpu": "l40s"},
        _vllm("0.16.0", "l40s", "meta-llama-3-70b", 8192, tensor_parallel_size=2),
        kv_cache_tokens=132_128,
        max_concurrency=16.13,
        max_num_seqs=16,
        variant={"max_model_len": 4096},
        expected={"kv_cache_tokens": 132_128, "max_concurrency": 32.26, "max_num_seqs": 32},
    ),
    # vLLM 0.25.1, Qwen2.5-7B-Instruct on an H100 (sapir-pirski/h100-fp8-quantization-
    # benchmark, the bf16 run): "GPU KV cache size: 968,496 tokens", "Maximum concurrency for
    # 4,096 tokens per request: 236.45x". At 8,192: 60,531 blocks / 512 = 118.22x,
    # (60,531 - 1) // 512 = 118.
    "vllm-0.25-h100-bf16": Case(
        "github:sapir-pirski/h100-fp8-quantization-benchmark results/q2/vllm_bf",
        {"model": "qwen2.5-7b", "gpu": "h100-sxm-80gb"},
        _vllm("0.25.1", "h100-sxm-80gb", "qwen2.5-7b", 4096, gpu_memory_utilization=0.85),
        kv_cache_tokens=968_496,
        max_concurrency=236.45,
        max_num_seqs=236,
        variant={"max_model_len": 8192},
        expected={"kv_cache_tokens": 968_496, "max_concurrency": 118.22, "max_num_seqs": 118},
    ),
    # The vLLM 0.19.0 H100 runs whose checkpoints the catalog holds under their base model's
    # entry. Each prints "GPU KV cache size" and "Maximum concurrency for 8,192 tokens per
    # request"; at 4,096 a request takes 256 blocks of 16 instead of 512, so the concurrency
    # doubles (blocks / 256) and whole sequences are (blocks - 1) // 256.
    "vllm-0.19-deepseek-v2-lite-chat": Case(
        V019 + "deepseek-ai-d",
        {"model": "deepseek-v2-lite"},
        _vllm("0.19.0", "h100-sxm-80gb", "deepseek-v2-lite", 8192, gpu_memory_utilization=0.95),
        kv_cache_tokens=1_505_552,
        max_concurrency=183.78,
        num_gpu_blocks=94_097,
        max_num_seqs=183,
        variant={"max_model_len": 4096},
        expected={"max_concurrency": 367.57, "max_num_seqs": 367},  # 94,097 / 256; 94,096 // 256
    ),
    "vllm-0.19-mixtral-tp2": Case(
        V019 + "mistralai-mix",
        {"model": "mixtral-8x7b-v0.1"},
        _vllm(
            "0.19.0",
            "h100-sxm-80gb",
            "mixtral-8x7b-v0.1",
            8192,
            gpu_memory_utilization=0.95,
            tensor_parallel_size=2,
        ),
        kv_cache_tokens=465_936,
        max_concurrency=56.88,
        num_gpu_blocks=29_121,
        max_num_seqs=56,
        variant={"max_model_len": 4096},
        expected={"max_concurrency": 113.75, "max_num_seqs": 113},  # 29,121 / 256; 29,120 // 256
    ),
    "vllm-0.19-llama-3.3-70b-fp8-tp4": Case(
        V019 + "fp8dyn-llama-",
        {"model": "llama-3.3-70b-instruct"},
        _vllm(
            "0.19.0",
            "h100-sxm-80gb",
            "llama-3.3-70b-instruct",
            8192,
            gpu_memory_utilization=0.95,
            tensor_parallel_size=4,
        ),
        kv_cache_tokens=708_992,
        max_concurrency=86.55,
        num_gpu_blocks=44_312,
        max_num_seqs=86,
        variant={"max_model_len": 4096},
        expected={"max_concurrency": 173.09, "max_num_seqs": 173},  # 44,312 / 256; 44,311 // 256
    ),
    "vllm-0.19-qwen2.5-72b-tp2": Case(
        V019 + "qwen-qwen2-5-",
        {"model": "qwen2.5-72b"},
        _vllm(
            "0.19.0",
            "h100-sxm-80gb",
            "qwen2.5-72b",
            8192,
            gpu_memory_utilization=0.95,
            tensor_parallel_size=2,
        ),
        kv_cache_tokens=19_920,
        max_concurrency=2.43,
        num_gpu_blocks=1245,
        max_num_seqs=2,
        variant={"max_model_len": 4096},
        expected={"max_concurrency": 4.86, "max_num_seqs": 4},  # 1,245 / 256; 1,244 // 256
    ),
    # Gemma-2-27B alternates 4,096-token sliding windows with global layers: a request's
    # blocks are not cdiv(max_model_len, 16), so the variant is max_num_seqs, which changes
    # only how many sequences a replica runs: min(7 that fit, 4), ceil(100 / 4) = 25 replicas.
    "vllm-0.19-gemma-2-27b-it": Case(
        V019 + "google-gemma-2",
        {"model": "gemma-2-27b"},
        _vllm("0.19.0", "h100-sxm-80gb", "gemma-2-27b", 8192, gpu_memory_utilization=0.95),
        kv_cache_tokens=58_672,
        max_concurrency=7.16,
        num_gpu_blocks=7335,
        max_num_seqs=7,
        variant={"max_num_seqs": 4, "peak_concurrency": 100},
        expected={"kv_cache_tokens": 58_672, "replicas_for_peak_concurrency": 25},
    ),
    # SGLang 0.4.3, QwQ-32B (Qwen2.5-32B's geometry) at TP4 on L4s, the whole log
    # (logs/sglang-0.4.3-qwq-32b-tp4.log; its server_args print tp_size=4 and
    # mem_fraction_static=0.85): "max_total_num_tokens=46611". SGLang's pool is tokens, not
    # blocks, and context_len does not size it (python/sglang/srt/model_executor/
    # model_runner.py, profile_max_num_token): at 4,096 tokens 46,611 // 4,096 = 11 sequences.
    # The log's own context_len 131,072 is longer than the pool: no such request can run,
    # which the question at the log's settings says (below).
    "sglang-0.4.3-l4-tp4": Case(
        "logs/sglang-0.4.3-qwq-32b-tp4.log",
        {"model": "qwen2.5-32b", "gpu": "l4"},
        {
            "model": "qwen2.5-32b",
            "gpu": "l4",
            "engine": "sglang",
            "tensor_parallel_size": 4,
            "mem_fraction_static": 0.85,
            "max_model_len": 32768,
        },
        kv_cache_tokens=46_611,
        max_num_seqs=1,  # 46,611 // 32,768
        variant={"max_model_len": 4096},
        expected={"kv_cache_tokens": 46_611, "max_num_seqs": 11},
    ),
    # TensorRT-LLM's legacy runtime (NVIDIA/TensorRT-LLM#1400, A100 80GB, a 7B Llama-style MHA
    # engine): "Allocate 69524783104 bytes for k/v cache", "Using 132608 tokens in paged KV
    # cache" (524,288 B a token: 32 layers x 2 x 32 heads x 128 x 2 B). The build command
    # gives --max_input_len 4096 --max_output_len 1024: 5,120 tokens a request,
    # 132,608 // 5,120 = 25 requests; at 2,048 tokens, 132,608 // 2,048 = 64.
    "trtllm-0.8-a100": Case(
        "github:NVIDIA/TensorRT-LLM#1400",
        {"model": "llama-2-7b-hf", "gpu": "a100-sxm-80gb"},
        {
            "model": "llama-2-7b-hf",
            "gpu": "a100-sxm-80gb",
            "engine": "trtllm",
            "max_model_len": 5120,
        },
        kv_cache_tokens=132_608,
        max_num_seqs=25,
        variant={"max_model_len": 2048},
        expected={"kv_cache_tokens": 132_608, "max_num_seqs": 64},
    ),
}


def _text(case: Case) -> str:
    if case.source.startswith("logs/"):
        return read_log(case.source.removeprefix("logs/"))
    quote: str = entry(case.source)["quote"]
    return quote


def _calibrate(client: TestClient, case: Case) -> dict[str, Any]:
    response = client.post(
        "/v1/calibrations",
        content=_text(case),
        headers={**ADMIN, "content-type": "text/plain"},
        params=case.hints,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    assert body["reproduces"] is True  # kvplan's cut of the pool gives the log's own counts
    return body


def _capacity(client: TestClient, question: dict[str, Any]) -> dict[str, Any]:
    response = client.get("/v1/capacity", params=question)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_calibrated_question_answers_the_logs_own_figures(
    client: TestClient, name: str
) -> None:
    case = CASES[name]
    stored = _calibrate(client, case)
    answer = _capacity(client, case.question)
    assert answer["calibrated_from"]["calibration_id"] == stored["id"]
    assert answer["kv_cache_tokens"] == case.kv_cache_tokens
    if case.max_concurrency is not None:
        assert round(answer["max_concurrency"], 2) == case.max_concurrency
    if case.num_gpu_blocks is not None:
        assert answer["num_gpu_blocks"] == case.num_gpu_blocks
    assert answer["max_num_seqs"] == case.max_num_seqs


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_question_differing_in_one_flag_follows_by_the_engines_arithmetic(
    client: TestClient, name: str
) -> None:
    case = CASES[name]
    stored = _calibrate(client, case)
    answer = _capacity(client, {**case.question, **case.variant})
    assert answer["calibrated_from"]["calibration_id"] == stored["id"]
    got = {key: answer[key] for key in case.expected}
    if "max_concurrency" in got:
        got["max_concurrency"] = round(got["max_concurrency"], 2)
    assert got == case.expected


def test_a_v0_start_up_failure_is_the_engines_own_refusal(client: TestClient) -> None:
    # vllm-project/vllm#10517 at 29,000 tokens: "# GPU blocks: 1478", then "The model's max seq
    # len (29000) is larger than the maximum number of tokens that can be stored in KV cache
    # (23648)" (1,478 x 16). Calibrated, the question at the log's settings is refused the same
    # way, with the same longest context.
    case = entry("github:vllm-project/vllm#10517 (same comment, '29k - BAD')")
    hints = {"model": "llama-3.1-8b-instruct", "gpu": "rtx-3090", "engine_version": "0.6.4"}
    created = client.post(
        "/v1/calibrations",
        content=case["quote"],
        headers={**ADMIN, "content-type": "text/plain"},
        params=hints,
    )
    assert created.status_code == 201, created.text
    assert created.json()["num_gpu_blocks"] == 1478
    question = _vllm("0.6.4", "rtx-3090", "llama-3.1-8b-instruct", 29000)
    body = problem(client.get("/v1/capacity", params=question), 422)
    assert body["type"] == "/problems/sequence-does-not-fit"
    assert "the pool holds 1478" in body["detail"]
    assert "the longest max_model_len that fits is 23648" in body["detail"]


def test_sglangs_own_context_longer_than_its_pool_is_refused_naming_the_pool(
    client: TestClient,
) -> None:
    case = CASES["sglang-0.4.3-l4-tp4"]
    _calibrate(client, case)
    # "max_total_num_tokens=46611, ..., context_len=131072": one such request cannot be held
    body = problem(
        client.get("/v1/capacity", params={**case.question, "max_model_len": 131072}), 422
    )
    assert "46611 KV tokens cannot hold one sequence of 131072 tokens" in body["detail"]
