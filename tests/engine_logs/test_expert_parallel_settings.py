"""A vLLM log's expert- and data-parallel flags become the capacity question's (issue 21).

logs/vllm-0.25.0-dp8-ep-args.log is vLLM 0.25.0's "non-default args" line as
github.com/vllm-project/vllm issue #51454
("DP8 vs TP8 for single-KV-head MLA", DeepSeek-V4-Flash-0731 on 8 x B200) quotes it, up to
where the quoted excerpt ends (inside `AttentionConfig(...)`, a value of a key the parser does
not read).
"""

from __future__ import annotations

from pathlib import Path

from service.engine_logs import parse_engine_log
from service.engine_logs.service import capacity_fields

LINE = (Path(__file__).parent / "logs" / "vllm-0.25.0-dp8-ep-args.log").read_text(encoding="utf-8")


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


SGLANG = (Path(__file__).parent / "logs" / "sglang-0.4.3-qwq-32b-tp4.log").read_text(
    encoding="utf-8"
)


def test_sglangs_server_args_carry_its_dp_attention_and_ep_flags() -> None:
    # the ServerArgs dump of SGLang 0.4.3 (its SOURCES entry): `ep_size=1`,
    # `enable_dp_attention=False`, read as the capacity question's fields of those names
    settings = parse_engine_log(SGLANG).settings
    assert settings.enable_dp_attention is False
    assert settings.ep_size == 1
    fields = capacity_fields(parse_engine_log(SGLANG))
    assert fields.enable_dp_attention is False
    assert fields.ep_size == 1


def test_the_all_to_all_backends_are_read_from_the_args() -> None:
    # vllm#51454's non-default args with the key --all2all-backend adds to them (0.12+:
    # ParallelConfig.all2all_backend, printed as every other non-default arg), and SGLang's
    # ServerArgs dump
    flag = "'enable_expert_parallel': True"
    vllm = LINE.replace(flag, f"{flag}, 'all2all_backend': 'deepep_low_latency'")
    assert vllm != LINE
    fields = capacity_fields(parse_engine_log(vllm))
    assert fields.enable_expert_parallel is True
    assert fields.all2all_backend == "deepep_low_latency"
    settings = parse_engine_log(SGLANG).settings
    # SGLang 0.4.3 printed neither: its ServerArgs predate --moe-a2a-backend
    assert settings.moe_a2a_backend is None
    assert settings.deepep_mode is None
