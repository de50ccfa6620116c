"""The engine-log parser against the 46 calibration logs, unit by unit, and its errors.

Sources: service/calibration/engine_logs.json (each entry names its own source), and the engines'
code for the units (service/engine_logs/patterns.py names the file and function per line).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from service.engine_logs import LogNotRecognised, ParsedLog, parse_engine_log
from service.engine_logs.model import Figure
from service.sizing.errors import SizingError

from .calibration import (
    FIELD_OF,
    FIRST_AND_LAST,
    GIB,
    MIB,
    NOT_ENGINE_LINES,
    NOT_PRINTED,
    PER_RANK,
    SETTING_OF_FIXTURE,
    R,
    bytes_of,
    entry,
    load_entries,
)

ENTRIES = load_entries()
IDS = [f"{i:02d} {e['source'][:60]}" for i, e in enumerate(ENTRIES)]
ENGINE_OF = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}


def chosen(parsed: ParsedLog, field: str, rank: str | None = None) -> Figure:
    """The figure that gave `reported.<field>` its value (or `rank`'s last figure)."""
    if rank is None:
        value = getattr(parsed.reported, field)
        figures = [f for f in parsed.occurrences(field) if f.value == value]
    else:
        figures = [f for f in parsed.occurrences(field) if f.rank == rank]
    assert figures, f"no line printed {field}"
    return figures[-1]


def assert_printed(figure: Figure, printed: Any, unit_name: str) -> None:
    """A memory figure: printed as the fixture says, in the unit the engine's code uses."""
    unit = GIB if unit_name == "gib" else MIB
    assert Decimal(figure.printed) == Decimal(str(printed))
    assert figure.unit_bytes == unit
    assert figure.value == bytes_of(printed, unit)


# --- the calibration set ----------------------------------------------------------------------


def test_the_fixture_is_the_shared_calibration_set() -> None:
    # The shared README: "46 real engine start-up logs ... each with its exact quote".
    assert len(ENTRIES) == 46
    assert all(e["quote"] and isinstance(e["reported"], dict) for e in ENTRIES)
    assert len({e["source"] for e in ENTRIES}) == 46


def test_every_fixture_figure_has_a_place() -> None:
    keys = {key for e in ENTRIES for key, value in e["reported"].items() if value is not None}
    placed = set(FIELD_OF) | set(PER_RANK) | set(FIRST_AND_LAST) | {"vram_loaded_gb"}
    assert keys <= placed, sorted(keys - placed)
    # vram_loaded_gb belongs to the one entry that is prose, not log lines.
    holders = [e["source"] for e in ENTRIES if e["reported"].get("vram_loaded_gb") is not None]
    assert holders == list(NOT_ENGINE_LINES)


@pytest.mark.parametrize("case", ENTRIES, ids=IDS)
def test_calibration_log_parses_to_its_reported_figures(case: dict[str, Any]) -> None:
    source = case["source"]
    if source in NOT_ENGINE_LINES:
        with pytest.raises(LogNotRecognised):
            parse_engine_log(case["quote"])
        return
    parsed = parse_engine_log(case["quote"])
    assert parsed.engine == ENGINE_OF[case["engine"]]
    for key, value in case["reported"].items():
        if value is None:
            continue
        if key in PER_RANK:
            rank, field = PER_RANK[key]
            assert_printed(chosen(parsed, field, rank), value, "gib")
            continue
        if key in FIRST_AND_LAST:
            field, index = FIRST_AND_LAST[key]
            assert parsed.occurrences(field)[index].value == value
            continue
        maps = FIELD_OF[key]
        holder = parsed.reported if maps.target == R else parsed.settings
        got = getattr(holder, maps.field)
        if (source, key) in NOT_PRINTED:
            assert got is None, f"{key} is not printed by the quote, yet parsed as {got}"
        elif maps.unit in ("gib", "mib"):
            assert got == bytes_of(value, GIB if maps.unit == "gib" else MIB), key
            assert_printed(chosen(parsed, maps.field), value, maps.unit)
        else:
            assert got == value, key


def test_figures_the_quote_does_not_print_stay_absent() -> None:
    # One by one, the three figures the fixture derived or took from prose (NOT_PRINTED).
    blocks_only = parse_engine_log(entry("github:vllm-project/vllm#10517 (comment")["quote"])
    assert blocks_only.reported.num_gpu_blocks == 1952
    assert blocks_only.reported.kv_cache_tokens is None  # 1952 x 16 is derived, not printed
    early_v1 = parse_engine_log(entry("github:vllm-project/vllm PR #12569")["quote"])
    assert early_v1.reported.num_gpu_blocks == 1381
    assert early_v1.reported.kv_cache_tokens is None  # 1381 x 16 is derived, not printed
    failed = parse_engine_log(entry("github:vllm-project/vllm#13061")["quote"])
    assert failed.reported.kv_pool_bytes is None  # 8.69 GiB is the reporter's prose
    assert failed.reported.kv_cache_tokens == 81536  # the ValueError line prints this one
    for (source, _key), reason in NOT_PRINTED.items():
        notes = next(e["notes"] for e in ENTRIES if e["source"] == source)
        assert reason.split("'")[1] in notes


def test_settings_the_fixture_derived_stay_absent() -> None:
    # 14 entries note "block_size derived as kv_cache_tokens / num_gpu_blocks = 16": their
    # quotes print no block size, so none is read.
    derived = [e for e in ENTRIES if "block_size derived" in e["notes"]]
    assert len(derived) == 14
    for case in derived:
        assert parse_engine_log(case["quote"]).settings.block_size is None
    # NVIDIA/TensorRT-LLM#2789 notes the 0.4 fraction is derived (29.95 / 74.87), not printed.
    trt = parse_engine_log(entry("github:NVIDIA/TensorRT-LLM#2789")["quote"])
    assert trt.settings.free_gpu_memory_fraction is None


@pytest.mark.parametrize("case", ENTRIES, ids=IDS)
def test_calibration_log_settings_agree_with_the_fixture(case: dict[str, Any]) -> None:
    if case["source"] in NOT_ENGINE_LINES:
        return
    parsed = parse_engine_log(case["quote"])
    for setting, fixture_key in SETTING_OF_FIXTURE.items():
        got = getattr(parsed.settings, setting)
        if got is not None and case.get(fixture_key) is not None:
            assert got == case[fixture_key], setting
    model = case.get("model")
    if parsed.settings.model is not None and model is not None and " " not in model:
        assert parsed.settings.model == model


@pytest.mark.parametrize("case", ENTRIES, ids=IDS)
def test_calibration_log_version_is_the_one_it_prints(case: dict[str, Any]) -> None:
    if case["source"] in NOT_ENGINE_LINES:
        return
    # The fixture's engine_version starts with the version where one is known; the log prints
    # it only sometimes (the vLLM logo line, "vLLM API server version", TensorRT-LLM's
    # "Engine version ... found in the config file").
    stated = (case["engine_version"] or "").split(" ")[0]
    printed = stated if re.match(r"\d+\.\d+", stated) and stated in case["quote"] else None
    assert parse_engine_log(case["quote"]).engine_version == printed


def test_how_many_calibration_logs_parse_whole() -> None:
    # 45 of 46: all but the PR summary (NOT_ENGINE_LINES), whose quote is prose.
    whole = 0
    for case in ENTRIES:
        if case["source"] in NOT_ENGINE_LINES:
            continue
        parsed = parse_engine_log(case["quote"])
        whole += all(
            key in PER_RANK
            or key in FIRST_AND_LAST
            or (case["source"], key) in NOT_PRINTED
            or _value(parsed, key) == _expected(key, value)
            for key, value in case["reported"].items()
            if value is not None
        )
    assert whole == 45


def _value(parsed: ParsedLog, key: str) -> Any:
    maps = FIELD_OF[key]
    return getattr(parsed.reported if maps.target == R else parsed.settings, maps.field)


def _expected(key: str, value: Any) -> Any:
    unit = FIELD_OF[key].unit
    return bytes_of(value, GIB if unit == "gib" else MIB) if unit in ("gib", "mib") else value


# --- units, worked by hand ------------------------------------------------------------------


def test_vllm_v0_weights_labelled_gb_are_gib() -> None:
    # vllm/worker/model_runner.py GPUModelRunnerBase.load_model divides by float(2**30) and
    # prints "GB": "Loading model weights took 14.9888 GB" (vllm#10517) is
    # 14.9888 x 1,073,741,824 = 16,094,101,451.57 -> 16,094,101,452 bytes.
    parsed = parse_engine_log(entry("github:vllm-project/vllm#10517 (comment")["quote"])
    assert parsed.reported.model_loading_bytes == 16_094_101_452
    assert chosen(parsed, "model_loading_bytes").unit == "GB"


def test_vllm_v1_pool_is_gib() -> None:
    # "Available KV cache memory: 58.11 GiB" (jgchn/llm-d-planner Llama-3.1-8B TP1):
    # 58.11 x 1,073,741,824 = 62,395,137,392.64 -> 62,395,137,393 bytes.
    parsed = parse_engine_log(
        entry(
            "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
            "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1"
        )["quote"]
    )
    assert parsed.reported.kv_pool_bytes == 62_395_137_393
    assert parsed.printed("kv_pool_bytes") == "58.11"


def test_sglang_gb_is_gib() -> None:
    # memory_pool.py divides by GB = 1024 * 1024 * 1024: "K size: 1.42 GB" (QwQ-32B TP4) is
    # 1.42 x 1,073,741,824 = 1,524,713,390.08 -> 1,524,713,390 bytes; the pool is not summed.
    parsed = parse_engine_log(entry("github:didier-durand/llms-in-clouds")["quote"])
    assert parsed.reported.k_cache_bytes == 1_524_713_390
    assert parsed.reported.v_cache_bytes == 1_524_713_390
    assert parsed.reported.kv_pool_bytes is None


def test_tensorrt_llm_mb_is_mib() -> None:
    # MemoryCounters::bytesToString divides by 1024 per step: "Allocated 9.41 MB GPU memory
    # for runtime buffers" is 9.41 x 1,048,576 = 9,867,100.16 -> 9,867,100 bytes and
    # "2.45 MB ... for decoder" 2,569,011.2 -> 2,569,011; TensorRT's "GPU 3405 (MiB)" is
    # 3405 x 1,048,576 = 3,570,401,280 (NVIDIA/TensorRT-LLM#2789).
    parsed = parse_engine_log(entry("github:NVIDIA/TensorRT-LLM#2789")["quote"])
    assert parsed.reported.runtime_buffers_bytes == 9_867_100
    assert parsed.reported.decoder_bytes == 2_569_011
    assert parsed.reported.engine_allocation_bytes == 3_570_401_280
    # "Allocated 29.95 GiB for max tokens in paged KV cache (1121536)": 17524 blocks x 64.
    assert parsed.reported.kv_cache_tokens == 1_121_536 == 17524 * 64
    assert parsed.reported.num_gpu_blocks == 17524


def test_tensorrt_llm_exact_bytes_stay_exact() -> None:
    # "Allocate 69524783104 bytes for k/v cache." (NVIDIA/TensorRT-LLM#1400), to the byte.
    parsed = parse_engine_log(entry("github:NVIDIA/TensorRT-LLM#1400")["quote"])
    assert parsed.reported.kv_pool_bytes == 69_524_783_104
    assert chosen(parsed, "kv_pool_bytes").unit == "bytes"


def test_negative_budgets_are_kept() -> None:
    # vllm#13882: "the rest of the memory reserved for KV Cache is -1.05GiB", 0 blocks.
    parsed = parse_engine_log(entry("github:vllm-project/vllm#13882")["quote"])
    assert parsed.reported.kv_pool_bytes == bytes_of("-1.05", GIB)
    assert parsed.reported.num_gpu_blocks == 0
    assert parsed.reported.max_concurrency == 0.0


# --- lines no calibration log holds (read from the engines' format strings) ------------------


def test_vllm_v1_start_up_failure_line() -> None:
    # vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory, numbers chosen here:
    # 16.00 GiB needed for 131,072 tokens, 4.75 GiB available, 38,912 would fit.
    line = (
        "(EngineCore_DP0 pid=9) ERROR 10-08 20:33:48 [core.py:708] ValueError: To serve at least"
        " one request with the models's max seq len (131072), (16.00 GiB KV cache is needed,"
        " which is larger than the available KV cache memory (4.75 GiB). Based on the available"
        " memory, the estimated maximum model length is 38912. Try increasing"
        " `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    parsed = parse_engine_log(line)
    assert parsed.settings.max_model_len == 131072
    assert parsed.reported.kv_needed_for_max_model_len_bytes == 16 * GIB
    assert parsed.reported.kv_pool_bytes == bytes_of("4.75", GIB) == 5_100_273_664
    assert parsed.reported.estimated_max_model_len == 38912


def test_sglang_mla_pool_line() -> None:
    # python/sglang/srt/mem_cache/memory_pool.py (MLA pools print one "KV size"); 0.07 GiB is
    # 0.07 x 1,073,741,824 = 75,161,927.68 -> 75,161,928 bytes.
    parsed = parse_engine_log(
        "[2025-06-01 10:00:00 TP0] KV Cache is allocated. #tokens: 1000, KV size: 0.07 GB"
    )
    assert parsed.engine == "sglang"
    assert parsed.reported.kv_cache_tokens == 1000
    assert parsed.reported.kv_pool_bytes == 75_161_928


def test_tensorrt_llm_pytorch_backend_lines() -> None:
    # tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator._cal_max_tokens, numbers chosen
    # here and consistent with it: (79.00 - 60.00) x 0.9 = 17.10 GiB for KV.
    text = "\n".join(
        [
            "[TensorRT-LLM] TensorRT-LLM version: 1.0.0",
            "[06/01/2025-10:00:00] [TRT-LLM] [I] Peak memory during memory usage profiling"
            " (torch + non-torch): 60.00 GiB, available KV cache memory when calculating max"
            " tokens: 17.10 GiB, fraction is set 0.9, kv size is 131072. device total memory"
            " 79.00 GiB, , tmp kv_mem 0.50 GiB",
            "[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 256 [window size=16384],"
            " tokens per block=64, primary blocks=2189, secondary blocks=0, max sequence"
            " length=16384",
            "[06/01/2025-10:00:01] [TRT-LLM] [I] max_seq_len=16384, max_num_requests=256,"
            " max_num_tokens=8192",
        ]
    )
    parsed = parse_engine_log(text)
    assert parsed.engine == "trtllm"
    assert parsed.engine_version == "1.0.0"
    assert parsed.reported.profiling_peak_bytes == 60 * GIB
    assert parsed.reported.kv_pool_bytes == 18_360_985_190  # 17.10 x 2^30 = ...190.4
    assert parsed.reported.total_memory_bytes == 79 * GIB
    assert parsed.reported.kv_bytes_per_token == 131072
    assert parsed.settings.free_gpu_memory_fraction == 0.9
    assert parsed.reported.max_blocks_per_sequence == 256
    assert parsed.reported.tokens_per_block == 64
    assert parsed.reported.num_gpu_blocks == 2189
    assert parsed.settings.max_model_len == 16384
    assert parsed.settings.max_num_seqs == 256
    assert parsed.settings.max_num_batched_tokens == 8192


def test_tensorrt_llm_legacy_runtime_lines() -> None:
    # cpp/tensorrt_llm/runtime/tllmRuntime.cpp (engine size, execution context in MiB =
    # bytes / 1048576.0) and trtGptModelInflightBatching.cpp (TRTGptModel limits); numbers
    # chosen here: 6214 MiB = 6214 x 1,048,576 = 6,515,851,264 bytes; 928.77 MiB =
    # 928.77 x 1,048,576 = 973,885,931.52 -> 973,885,932 bytes.
    text = "\n".join(
        [
            "[TensorRT-LLM][INFO] Engine version 0.12.0 found in the config file, assuming"
            " engine(s) built by new builder API.",
            "[TensorRT-LLM][INFO] TRTGptModel maxNumSequences: 4096",
            "[TensorRT-LLM][INFO] TRTGptModel maxSequenceLen: 4098",
            "[TensorRT-LLM][INFO] TRTGptModel maxNumTokens: 8192",
            "[TensorRT-LLM][INFO] Loaded engine size: 6214 MiB",
            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 928.77 MiB for execution context"
            " memory.",
        ]
    )
    parsed = parse_engine_log(text)
    assert parsed.engine == "trtllm"
    assert parsed.engine_version == "0.12.0"
    assert parsed.settings.max_num_seqs == 4096
    assert parsed.settings.max_model_len == 4098
    assert parsed.settings.max_num_batched_tokens == 8192
    assert parsed.reported.model_loading_bytes == 6_515_851_264
    assert parsed.reported.execution_context_bytes == 973_885_932


def test_vllm_block_size_and_requested_memory_lines() -> None:
    # vllm/platforms/cuda.py (MLA backends force their block size) and vllm/v1/worker/
    # gpu_worker.py Worker.init_device ("worker requested memory: %sGiB", format_gib):
    # 75.23 x 1,073,741,824 = 80,777,597,419.52 -> 80,777,597,420 bytes.
    text = (
        "(EngineCore pid=1) INFO 05-01 10:00:00 [cuda.py:150] Forcing kv cache block size to 64"
        " for FlashMLA backend.\n"
        "(EngineCore pid=1) DEBUG 05-01 10:00:01 [gpu_worker.py:290] worker requested memory:"
        " 75.23GiB"
    )
    parsed = parse_engine_log(text)
    assert parsed.settings.block_size == 64
    assert parsed.reported.requested_memory_bytes == 80_777_597_420


# --- what the answer says about itself -------------------------------------------------------


def test_recognised_lines_name_their_patterns() -> None:
    case = entry(
        "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/meta-llama-llama-3-1"
        "-8b---h100-80gb--tp1pp1dp1"
    )
    parsed = parse_engine_log(case["quote"])
    lines = case["quote"].split("\n")
    by_number = {line.line_number: line for line in parsed.recognised_lines}
    pool_line = next(i for i, text in enumerate(lines, 1) if "Available KV cache memory" in text)
    assert by_number[pool_line].patterns == ("vllm_available_kv",)
    assert "Available KV cache memory: 58.11 GiB" in by_number[pool_line].text
    # The backend choice says nothing about memory: not recognised.
    backend_line = next(i for i, text in enumerate(lines, 1) if "attention backend" in text)
    assert backend_line not in by_number
    assert chosen(parsed, "kv_pool_bytes").line_number == pool_line


def test_settings_come_from_the_flags_and_the_engine() -> None:
    # jgchn/llm-d-planner gpt-oss-20b TP2: util is not a flag there; the engine prints it
    # ("Requested memory: 0.900000 (util)").
    parsed = parse_engine_log(
        entry("github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/openai-gpt-oss-20b")[
            "quote"
        ]
    )
    assert parsed.settings.gpu_memory_utilization == 0.9
    assert parsed.settings.tensor_parallel_size == 2
    assert parsed.settings.max_model_len == 8192
    assert parsed.settings.enable_prefix_caching is False
    assert parsed.settings.max_num_batched_tokens == 8192


# --- errors ----------------------------------------------------------------------------------


def test_a_log_with_nothing_recognised_says_what_it_looked_for() -> None:
    with pytest.raises(LogNotRecognised) as caught:
        parse_engine_log("hello\nGET /health 200\n")
    error = caught.value
    assert isinstance(error, SizingError)
    assert error.field == "log"
    assert error.code == "log-not-recognised"
    for looked_for in (
        "Available KV cache memory",
        "GPU KV cache size",
        "Memory profiling results",
        "KV Cache is allocated",
        "Load weight end",
        "for max tokens in paged KV cache",
    ):
        assert looked_for in error.reason
    assert "2 non-blank lines" in error.reason


def test_an_empty_log_is_not_recognised() -> None:
    with pytest.raises(LogNotRecognised, match="empty"):
        parse_engine_log("\n  \n")


def test_an_unknown_engine_hint_names_the_field() -> None:
    with pytest.raises(SizingError) as caught:
        parse_engine_log("Available KV cache memory: 1.00 GiB", engine_hint="llama.cpp")
    assert caught.value.field == "engine"


def test_engine_hint_spellings_and_what_it_decides() -> None:
    trt = entry("github:NVIDIA/TensorRT-LLM#2789")["quote"]
    assert parse_engine_log(trt, engine_hint="tensorrt-llm").engine == "trtllm"
    assert parse_engine_log(trt, engine_hint="TRTLLM").engine == "trtllm"
    # One line of each engine: the hint decides, and only that engine's figures are kept.
    mixed = (
        "Available KV cache memory: 1.00 GiB\n"
        "KV Cache is allocated. #tokens: 10, K size: 0.01 GB, V size: 0.01 GB"
    )
    as_sglang = parse_engine_log(mixed, engine_hint="sglang")
    assert as_sglang.engine == "sglang"
    assert as_sglang.reported.kv_pool_bytes is None
    assert as_sglang.reported.kv_cache_tokens == 10
    as_vllm = parse_engine_log(mixed, engine_hint="vllm")
    assert as_vllm.reported.kv_pool_bytes == GIB
    assert as_vllm.reported.kv_cache_tokens is None


def test_version_hint_fills_in_only_where_the_log_prints_none() -> None:
    v0 = entry("github:vllm-project/vllm#10517 (comment")["quote"]
    assert parse_engine_log(v0).engine_version is None
    assert parse_engine_log(v0, version_hint="0.6.4").engine_version == "0.6.4"
    v19 = entry("github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/microsoft-phi-4")
    assert parse_engine_log(v19["quote"], version_hint="0.18.0").engine_version == "0.19.0"


# --- lines from engine threads, other versions -----------------------------------------------


def test_vllm_v0_engine_config_dump() -> None:
    # github:vllm-project/vllm#8031 (comment by hahmad2008, 2025-04-11), vLLM 0.8.3 V0: the
    # engine config line as excerpted there (cut after use_async_output_proc).
    line = (
        "INFO 04-11 12:37:49 [llm_engine.py:242] Initializing a V0 LLM engine (v0.8.3) with"
        " config: model='OPEA/Mistral-Small-3.1-24B-Instruct-2503-int4-AutoRound-awq-sym',"
        " speculative_config=None, tokenizer='OPEA/Mistral-Small-3.1-24B-Instruct-2503-int4-"
        "AutoRound-awq-sym', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None,"
        " override_neuron_config=None, tokenizer_revision=None, trust_remote_code=False,"
        " dtype=torch.float16, max_seq_len=8192, download_dir=None, load_format=auto,"
        " tensor_parallel_size=1, pipeline_parallel_size=1, disable_custom_all_reduce=False,"
        " quantization=awq, enforce_eager=False, kv_cache_dtype=auto,  device_config=cuda,"
        " decoding_config=DecodingConfig(guided_decoding_backend='outlines',"
        " reasoning_backend=None), observability_config=ObservabilityConfig("
        "show_hidden_metrics=False, otlp_traces_endpoint=None, collect_model_forward_time=False,"
        " collect_model_execute_time=False), seed=None, served_model_name=OPEA/Mistral-Small-3.1"
        "-24B-Instruct-2503-int4-AutoRound-awq-sym, num_scheduler_steps=1,"
        " multi_step_stream_outputs=True, enable_prefix_caching=None,"
        " chunked_prefill_enabled=False, use_async_output_proc=True,"
    )
    parsed = parse_engine_log(line)
    assert parsed.engine_version == "0.8.3"
    settings = parsed.settings
    assert settings.model == "OPEA/Mistral-Small-3.1-24B-Instruct-2503-int4-AutoRound-awq-sym"
    assert settings.dtype == "float16"
    assert settings.max_model_len == 8192
    assert settings.tensor_parallel_size == 1
    assert settings.pipeline_parallel_size == 1
    assert settings.quantization == "awq"
    assert settings.enforce_eager is False
    assert settings.kv_cache_dtype == "auto"
    assert settings.enable_prefix_caching is None  # printed as None: the engine's default
    assert settings.disable_custom_all_reduce is False


def test_vllm_non_default_args_disable_custom_all_reduce() -> None:
    # github:noonghunna/club-3090#295 (description by hlo-world, 2026-06-01): two RTX 3090s at
    # TP2, --disable-custom-all-reduce, as vLLM's api server echoes the flags it was given.
    line = (
        "(APIServer pid=1) INFO 06-01 09:20:16 [utils.py:278] non-default args: {'model_tag':"
        " '~/.cache/huggingface/qwen3.6-27b-autoround-int4', 'chat_template':"
        " '/etc/qwen-froggeric-chat-template.jinja', 'default_chat_template_kwargs':"
        " {'enable_thinking': False}, 'enable_auto_tool_choice': True, 'tool_call_parser':"
        " 'qwen3_coder', 'host': '0.0.0.0', 'model':"
        " '~/.cache/huggingface/qwen3.6-27b-autoround-int4', 'trust_remote_code': True,"
        " 'dtype': 'float16', 'max_model_len': 262144, 'quantization': 'auto_round',"
        " 'served_model_name': ['qwen3.6-27b-autoround'], 'override_generation_config':"
        " {'temperature': 0.6, 'top_p': 0.95, 'top_k': 20, 'min_p': 0.0, 'repetition_penalty':"
        " 1.0}, 'reasoning_parser': 'qwen3', 'tensor_parallel_size': 2,"
        " 'disable_custom_all_reduce': True, 'kv_cache_dtype': 'fp8_e5m2',"
        " 'enable_prefix_caching': True, 'max_num_batched_tokens': 8192, 'max_num_seqs': 2,"
        " 'enable_chunked_prefill': True, 'speculative_config': {'method': 'mtp',"
        " 'num_speculative_tokens': 3}}"
    )
    settings = parse_engine_log(line).settings
    assert settings.tensor_parallel_size == 2
    assert settings.disable_custom_all_reduce is True
    assert settings.max_num_seqs == 2


def test_vllm_v0_args_namespace() -> None:
    # vLLM <= 0.7 logged its whole argparse Namespace ("args: Namespace(...)", as in
    # github:vllm-project/vllm#12664, v0.7.1); values chosen here.
    line = (
        "INFO 02-02 17:59:09 api_server.py:839] args: Namespace(subparser='serve',"
        " model_tag='Qwen/Qwen2.5-32B-Instruct', port=5000, allowed_origins=['*'],"
        " model='Qwen/Qwen2.5-32B-Instruct', tokenizer=None, max_model_len=None,"
        " tensor_parallel_size=2, block_size=None, enable_prefix_caching=None,"
        " gpu_memory_utilization=0.95, max_num_batched_tokens=None, max_num_seqs=None,"
        " enforce_eager=False, kv_cache_dtype='auto', quantization=None)"
    )
    settings = parse_engine_log(line).settings
    assert settings.model == "Qwen/Qwen2.5-32B-Instruct"
    assert settings.tensor_parallel_size == 2
    assert settings.gpu_memory_utilization == 0.95
    assert settings.kv_cache_dtype == "auto"
    assert settings.enforce_eager is False
    assert settings.max_model_len is None
    assert settings.quantization is None


def test_vllm_0_10_engine_core_prefix() -> None:
    # github:vllm-project/vllm PR #20707 (turn 14 by wukaixingxp), vLLM 0.10.1: the engine
    # core printed as "(EngineCore_0 pid=..)". 112.61 x 2^30 = 120,259,084,288 (112 GiB)
    # + 654,982,512.64 (0.61 GiB) = 120,914,066,800.64 -> 120,914,066,801 bytes.
    text = "\n".join(
        [
            "(EngineCore_0 pid=1399537) INFO 08-19 14:58:40 [gpu_worker.py:277] Available KV"
            " cache memory: 112.61 GiB",
            "(EngineCore_0 pid=1399537) INFO 08-19 14:58:40 [kv_cache_utils.py:849] GPU KV cache"
            " size: 922,496 tokens",
            "(EngineCore_0 pid=1399537) INFO 08-19 14:58:40 [kv_cache_utils.py:853] Maximum"
            " concurrency for 40,000 tokens per request: 23.06x",
            "(APIServer pid=1391815) INFO 08-19 14:58:41 [loggers.py:142] Engine 000: vllm"
            " cache_config_info with initialization after num_gpu_blocks is: 57656",
        ]
    )
    reported = parse_engine_log(text).reported
    assert reported.kv_pool_bytes == 120_914_066_801
    assert reported.kv_pool_bytes_by_rank[0].rank == ""
    assert reported.kv_cache_tokens == 922_496 == 57656 * 16
    assert reported.max_concurrency == 23.06
    assert reported.max_concurrency_tokens == 40000


def test_vllm_summary_line_with_eager_mode() -> None:
    # github:vllm-project/vllm PR #29830 (turn 0 by jacobthebanana): the after-capture summary
    # of an eager run ("0.0 GiB for CUDAGraph memory").
    line = (
        "(EngineCore_DP0 pid=3413554) DEBUG 12-01 19:49:03 [v1/worker/gpu_worker.py:484] Free"
        " memory on device (43.91/44.4 GiB) on startup. Desired GPU memory utilization is (0.9,"
        " 39.96 GiB). Actual usage is 13.72 GiB for weight, 1.83 GiB for peak activation, 0.04"
        " GiB for non-torch memory, and 0.0 GiB for CUDAGraph memory. Replace"
        " gpu_memory_utilization config with `--kv-cache-memory=26017729126` (24.23 GiB) to fit"
        " into requested memory, or `--kv-cache-memory=30260962304` (28.18 GiB) to fully"
        " utilize gpu memory. Current kv cache memory in use is 24.38 GiB."
    )
    parsed = parse_engine_log(line)
    reported = parsed.reported
    assert reported.total_memory_bytes == bytes_of("44.4", GIB)
    assert reported.free_memory_at_start_bytes == bytes_of("43.91", GIB)
    assert reported.requested_memory_bytes == bytes_of("39.96", GIB)
    assert reported.weights_bytes == bytes_of("13.72", GIB)
    assert reported.activation_peak_bytes == bytes_of("1.83", GIB)
    assert reported.non_torch_bytes == bytes_of("0.04", GIB)
    assert reported.cudagraph_bytes == 0
    assert reported.kv_cache_memory_to_fit_requested_bytes == 26_017_729_126
    assert reported.kv_cache_memory_to_fully_utilize_bytes == 30_260_962_304
    assert reported.kv_cache_in_use_bytes == bytes_of("24.38", GIB)
    assert parsed.settings.gpu_memory_utilization == 0.9
    # A summary is not the pool line: "Available KV cache memory" is absent here.
    assert reported.kv_pool_bytes is None
