"""A vLLM log's expert- and data-parallel flags become the capacity question's (issue 21).

The line is vLLM 0.25.0's "non-default args" as github.com/vllm-project/vllm issue #51454
("DP8 vs TP8 for single-KV-head MLA", DeepSeek-V4-Flash-0731 on 8 x B200) quotes it, up to
where the quoted excerpt ends (inside `AttentionConfig(...)`, a value of a key the parser does
not read).
"""

from __future__ import annotations

from service.engine_logs import parse_engine_log
from service.engine_logs.service import capacity_fields

LINE = (
    "INFO 08-07 21:32:22 [api_utils.py:273] non-default args: {'model_tag': "
    "'/root/.cache/huggingface/hub/models--deepseek-ai--DeepSeek-V4-Flash-0731/snapshots/"
    "7872f01b1d1fe23eabc4c98b48bffcef5a386062', 'api_server_count': 8, "
    "'enable_auto_tool_choice': True, 'tool_call_parser': 'deepseek_v4', 'model': "
    "'/root/.cache/huggingface/hub/models--deepseek-ai--DeepSeek-V4-Flash-0731/snapshots/"
    "7872f01b1d1fe23eabc4c98b48bffcef5a386062', 'tokenizer_mode': 'deepseek_v4', "
    "'trust_remote_code': True, 'served_model_name': ['deepseek-v4-flash-0731'], "
    "'reasoning_parser': 'deepseek_v4', 'data_parallel_size': 8, 'enable_expert_parallel': True, "
    "'block_size': 256, 'gpu_memory_utilization': 0.95, 'kv_cache_dtype': 'fp8', "
    "'max_num_batched_tokens': 8192, 'max_num_seqs': 256, 'moe_backend': 'deep_gemm_mega_moe', "
    "'attention_config': AttentionConfig(backend=None, flash_attn_version=None, "
    "use_prefill_decode\n"
)


def test_the_log_says_dp_8_with_expert_parallelism() -> None:
    settings = parse_engine_log(LINE).settings
    assert settings.data_parallel_size == 8
    assert settings.enable_expert_parallel is True
    assert settings.block_size == 256


def test_the_question_asked_of_the_log_carries_them() -> None:
    fields = capacity_fields(parse_engine_log(LINE))
    assert fields.data_parallel_size == 8
    assert fields.enable_expert_parallel is True
    assert fields.decode_context_parallel_size == 1  # not in the log: vLLM's default
