"""Issue 21's memory roles checked on the public logs that show them, and the gaps stated.

Searched (the engines' issue trackers, 2026-11): start-up logs run with vLLM's
--enable-expert-parallel, --speculative-config, --enable-lora, --kv-offloading-size and
--cpu-offload-gb, and SGLang's --enable-dp-attention, --speculative-algorithm and
--enable-lora, that print the pool. README "How right it is" lists what was found for each;
the two below are the ones kvplan can set its answer against.

* logs/sglang-2025-02-qwen2.5-14b-lora.log: github.com/sgl-project/sglang issue #3713
  ("[Bug] Crash when run with lora.", a comment of 2025-02-22 by the reporter), the four lines
  from "LoRA manager ready." to the ready line, as quoted. The reporter's first comment gives
  the model (Qwen2.5-14B-Instruct, dtype float16) and --lora-paths; the GPU, the release and the
  adapters' rank are not in the thread's quoted lines.
* DeepSeek-V4-Flash-0731 on 8 x B200, vLLM 0.25.0 (github.com/vllm-project/vllm issue #51454;
  its non-default args are logs/vllm-0.25.0-dp8-ep-args.log): github.com/vllm-project/recipes
  issue #762 gives the two start-up figures, "156.9x vs 20.43x max concurrency at 1M context
  per startup log", for --data-parallel-size 8 --enable-expert-parallel and for TP8 + EP8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.engine_logs.calibration import GIB, bytes_of, read_log
from tests.helpers import problem

TEXT = {"content-type": "text/plain"}
FLASH = Path("tests/fixtures/hf_configs/deepseek-ai--DeepSeek-V4-Flash.json")


# --- SGLang LoRA (sglang#3713) -----------------------------------------------------------------


def test_sglang_lora_log_the_pool_s_bytes_are_its_tokens_at_kvplans_cell(
    client: TestClient,
) -> None:
    log = read_log("sglang-2025-02-qwen2.5-14b-lora.log")
    hints = {"model": "qwen2.5-14b", "engine_version": "0.4.3", "gpu": "h100-sxm-80gb"}
    response = client.post("/v1/engine-logs", content=log, headers=TEXT, params=hints)
    assert response.status_code == 200, response.text
    body = response.json()
    reported = body["reported"]
    assert reported["max_total_num_tokens"] == 91_298  # "max_total_num_tokens=91298"
    assert reported["k_cache_bytes"] == bytes_of("8.36", GIB)  # "K size: 8.36 GB" (GiB)
    # Qwen2.5-14B: 48 layers x 8 KV heads x 128 x 2 B (float16) = 98,304 B of K a token, as
    # kvplan's cell says (196,608 B with V): 91,298 x 98,304 = 8,974,958,592 B = 8.3586 GiB,
    # printed "8.36": the log's pool is its tokens at kvplan's bytes per token
    assert body["prediction"]["kv_bytes_per_token"] == 2 * 98_304
    assert round(91_298 * 98_304 / GIB, 2) == 8.36


def test_sglang_lora_log_is_a_release_kvplan_does_not_size_lora_for(client: TestClient) -> None:
    # The gap, exactly: the run used --lora-paths on SGLang of February 2025 (0.4.3), whose
    # LoRAMemoryPool took its rank and modules from the adapters (no --max-lora-rank or
    # --lora-target-modules yet: calibration.py SGLANG_LORA_POOL), so the adapters' bytes
    # are not in the log and kvplan refuses the question by name instead of guessing them.
    question = {"model": "qwen2.5-14b", "gpu": "h100-sxm-80gb", "engine": "sglang"}
    question |= {"engine_version": "0.4.3", "max_model_len": 32768, "enable_lora": "true"}
    question |= {"max_lora_rank": 16, "lora_target_modules": "q_proj,v_proj"}
    body = problem(client.get("/v1/capacity", params=question), 422)
    assert body["field"] == "enable_lora"
    assert "from 0.5.1" in body["detail"]
    adapters = problem(
        client.get("/v1/capacity", params={**question, "lora_paths": "a=/adapter"}), 422
    )
    assert adapters["field"] == "lora_paths"


# --- DeepSeek-V4-Flash DP8 + EP against TP8 (vllm#51454, recipes#762) --------------------------


def _flash_question(**layout: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(FLASH.read_text("utf-8"))
    # the settings logs/vllm-0.25.0-dp8-ep-args.log prints, at the 1M context the figures name
    return {
        "model": {"hf_config": config},
        "gpu": "b200",
        "engine_version": "0.25.0",
        "max_model_len": 1_048_576,
        "block_size": 256,
        "gpu_memory_utilization": 0.95,
        "kv_cache_dtype": "fp8",
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "enable_expert_parallel": True,
        "explain": False,
        **layout,
    }


def test_dp8_with_expert_parallelism_holds_the_logged_multiple_of_tp8(client: TestClient) -> None:
    dp = client.post("/v1/capacity", json=_flash_question(data_parallel_size=8))
    tp = client.post("/v1/capacity", json=_flash_question(tensor_parallel_size=8))
    assert dp.status_code == tp.status_code == 200, dp.text + tp.text
    dp8, tp8 = dp.json()["max_concurrency_total"], tp.json()["max_concurrency_total"]
    # the figures: 156.9x over the eight DP ranks (19.61x each) against 20.43x at TP8, a ratio
    # of 156.9 / 20.43 = 7.680; kvplan's ratio is within 1% of it
    assert abs(dp8 / tp8 / (156.9 / 20.43) - 1) < 0.01
    # The gap, exactly: kvplan's pools are 5-6% larger at both layouts (165.09x and 21.44x
    # with this config: +5.2% and +4.9%; DP 8's profile run gathers 8 x 8192 tokens x hidden
    # 4096 x 2 B = 536,870,912 B under allgather_reducescatter, engines/all2all.py).
    # The config is DeepSeek-V4-Flash's (SOURCES.md); the
    # run's 0731 checkpoint's own config.json is not in this repository, and vllm#51041 reports
    # a per-token cost for 0731 unlike the first release's.
    assert 0.04 < dp8 / 156.9 - 1 < 0.07
    assert 0.04 < tp8 / 20.43 - 1 < 0.06
