"""Logs as `kubectl logs` hands them over: the same figures through every kind of noise.

Each test wraps real calibration quotes (service/calibration/engine_logs.json) the way a
terminal, kubectl, Ray or a multi-rank engine would, and checks the parse is unchanged. Two
whole published logs (logs/) carry their own noise:

* logs/vllm-0.11.0-l4.log: github:abinavChandar/demo_env_l4 vllm.log, commit 097d5ab, its
  first 113 lines (start-up to the first stats line), with its ANSI colours, progress-bar
  carriage returns and TensorFlow chatter; the calibration entry quotes its lines.
* logs/sglang-0.4.3-qwq-32b-tp4.log: github:didier-durand/llms-in-clouds docs/sglang.md,
  commit e2672a9, the log under "SGLang start sequence with Qwen QwQ-32B": four TP ranks
  interleaved, progress bars, the full server_args line; the calibration entry quotes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import pytest

from service.engine_logs import ParsedLog, RankValue, parse_engine_log

from .calibration import GIB, bytes_of, entry, read_log

VLLM_019 = entry(
    "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100"
    "-80gb--tp1pp1dp1"
)["quote"]
VLLM_019_TP2 = entry(
    "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100"
    "-80gb--tp2pp1dp1"
)["quote"]
VLLM_V0_WORKER = entry("github:vllm-project/vllm PR #14447")["quote"]
VLLM_V0_20K = entry("github:vllm-project/vllm#10517 (comment by kaspersiminski")["quote"]
VLLM_V0_29K = entry("github:vllm-project/vllm#10517 (same comment")["quote"]
SGLANG = entry("github:didier-durand/llms-in-clouds")["quote"]
TRTLLM = entry("github:NVIDIA/TensorRT-LLM#2789")["quote"]
QUOTES = {"vllm-0.19": VLLM_019, "vllm-v0": VLLM_V0_WORKER, "sglang": SGLANG, "trtllm": TRTLLM}


def same_answer(noisy: ParsedLog, clean: ParsedLog) -> None:
    assert noisy.engine == clean.engine
    assert noisy.engine_version == clean.engine_version
    assert noisy.settings == clean.settings
    assert noisy.reported == clean.reported


def each_line(text: str, wrap: Callable[[int, str], str]) -> str:
    return "\n".join(wrap(i, line) for i, line in enumerate(text.split("\n")))


@pytest.mark.parametrize("name", QUOTES)
def test_kubectl_timestamps(name: str) -> None:
    # kubectl logs --timestamps: an RFC 3339 time with nanoseconds before every line.
    quote = QUOTES[name]
    noisy = each_line(quote, lambda i, line: f"2026-04-22T00:03:{i % 60:02d}.{i:09d}Z {line}")
    same_answer(parse_engine_log(noisy), parse_engine_log(quote))


@pytest.mark.parametrize("name", QUOTES)
def test_kubectl_prefix_and_timestamps(name: str) -> None:
    # kubectl logs --prefix --timestamps, and an offset instead of Z.
    quote = QUOTES[name]
    noisy = each_line(
        quote, lambda i, line: f"[pod/engine-0/engine] 2026-04-22T02:03:04.5+02:00 {line}"
    )
    same_answer(parse_engine_log(noisy), parse_engine_log(quote))


@pytest.mark.parametrize("name", QUOTES)
def test_windows_line_endings(name: str) -> None:
    quote = QUOTES[name]
    same_answer(parse_engine_log(quote.replace("\n", "\r\n")), parse_engine_log(quote))


def _colour(line: str) -> str:
    """A terminal's colours: the prefix in bold cyan (as vLLM colours its process prefix), the
    level in green, and every figure in bold."""
    line = re.sub(r"(\d+(?:\.\d+)?)", "\x1b[1m\\1\x1b[22m", line)
    line = re.sub(r"\b(INFO|DEBUG)\b", "\x1b[32m\\1\x1b[0m", line, count=1)
    return re.sub(r"^(\([^)]*\)|\[[^\]]*\])", "\x1b[1;36m\\1\x1b[0;0m", line)


@pytest.mark.parametrize("name", QUOTES)
def test_ansi_colours(name: str) -> None:
    quote = QUOTES[name]
    coloured = each_line(quote, lambda _i, line: _colour(line))
    assert "\x1b[" in coloured
    same_answer(parse_engine_log(coloured), parse_engine_log(quote))
    # Pasted through a viewer that dropped the ESC byte but kept the rest of the code.
    bare = coloured.replace("\x1b", "")
    same_answer(parse_engine_log(bare), parse_engine_log(quote))


NOISE = (
    "",
    "   ",
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.35s/it]",
    '(APIServer pid=1) INFO:     10.0.0.7:51234 - "GET /health HTTP/1.1" 200 OK',
    "NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>",
    "torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.",
    "(EngineCore pid=242) [rank0]:W0422 00:04:11.084000 242 torch/_inductor/utils.py:1436]"
    " Not enough SMs to use max_autotune_gemm mode",
    "(APIServer pid=1) INFO 04-22 00:05:10 [v1/metrics/loggers.py:127] Engine 000: Avg prompt"
    " throughput: 0.0 tokens/s, Avg generation throughput: 35.2 tokens/s, Running: 2 reqs,"
    " Waiting: 0 reqs, GPU KV cache usage: 0.4%, Prefix cache hit rate: 0.0%",
    "[2025-03-08 12:29:30 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0,"
    " token usage: 0.00, #running-req: 0, #queue-req: 0,",
    "[TensorRT-LLM][INFO] MPI size: 1, MPI local size: 1, rank: 0",
)


@pytest.mark.parametrize("name", QUOTES)
def test_unrelated_lines_between(name: str) -> None:
    quote = QUOTES[name]
    lines = quote.split("\n")
    noisy = []
    for i, line in enumerate(lines):
        noisy += [NOISE[i % len(NOISE)], line]
    same_answer(parse_engine_log("\n".join(noisy)), parse_engine_log(quote))


def test_ray_worker_prefixes_and_repeats() -> None:
    # The same V0 worker under Ray: "(RayWorkerWrapper pid=.., ip=..)" and Ray's dedup suffix.
    ray = each_line(
        VLLM_V0_WORKER,
        lambda _i, line: (
            line.replace("(VllmWorkerProcess pid=507)", "(RayWorkerWrapper pid=507, ip=10.0.0.2)")
            + " [repeated 3x across cluster]"
        ),
    )
    same_answer(parse_engine_log(ray), parse_engine_log(VLLM_V0_WORKER))
    assert {f.rank for f in parse_engine_log(ray).figures} == {"pid 507"}


def test_vllm_worker_rank_prefixes() -> None:
    # vLLM 0.8-0.10 named multiproc workers "(VllmWorker rank=N pid=..)"; 0.11+ "(Worker_TPN ..)".
    old_style = VLLM_019_TP2.replace("(Worker_TP0 pid=444)", "(VllmWorker rank=0 pid=444)")
    parsed = parse_engine_log(old_style)
    clean = parse_engine_log(VLLM_019_TP2)
    assert replace(parsed.reported, kv_pool_bytes_by_rank=()) == replace(
        clean.reported, kv_pool_bytes_by_rank=()
    )
    assert parsed.reported.kv_pool_bytes_by_rank == (RankValue("rank 0", bytes_of("63.76", GIB)),)
    assert clean.reported.kv_pool_bytes_by_rank == (RankValue("TP0", bytes_of("63.76", GIB)),)


def _with_second_rank(first_tp1: bool) -> str:
    """The TP2 quote with a TP1 twin of every Worker_TP0 line, interleaved, and the TP1 pool
    set to 63.70 GiB where TP0 printed 63.76 GiB (a hypothetical rank with 0.06 GiB more
    non-torch memory: ranks differ by NCCL buffers)."""
    out = []
    for line in VLLM_019_TP2.split("\n"):
        if "(Worker_TP0 pid=444)" not in line:
            out.append(line)
            continue
        twin = line.replace("(Worker_TP0 pid=444)", "(Worker_TP1 pid=446)")
        twin = twin.replace(
            "Available KV cache memory: 63.76 GiB", "Available KV cache memory: 63.70 GiB"
        )
        out += [twin, line] if first_tp1 else [line, twin]
    return "\n".join(out)


@pytest.mark.parametrize("first_tp1", [False, True])
def test_interleaved_ranks_with_different_pools(first_tp1: bool) -> None:
    parsed = parse_engine_log(_with_second_rank(first_tp1))
    clean = parse_engine_log(VLLM_019_TP2)
    # 63.76 x 2^30 = 68,461,778,698.24 -> 68,461,778,698; 63.70 x 2^30 = 68,397,354,188.8 ->
    # 68,397,354,189: every rank sizes its blocks by the smaller.
    assert parsed.reported.kv_pool_bytes_by_rank == (
        RankValue("TP0", 68_461_778_698),
        RankValue("TP1", 68_397_354_189),
    )
    assert parsed.reported.kv_pool_bytes == 68_397_354_189
    assert parsed.by_rank("kv_pool_bytes") == {"TP0": 68_461_778_698, "TP1": 68_397_354_189}
    # Every other figure is TP0's, as in the one-rank quote.
    assert replace(parsed.reported, kv_pool_bytes=0, kv_pool_bytes_by_rank=()) == replace(
        clean.reported, kv_pool_bytes=0, kv_pool_bytes_by_rank=()
    )
    assert parsed.printed("kv_pool_bytes") == "63.70"


def test_v0_driver_and_worker_with_different_pools() -> None:
    # V0 multiproc: the driver prints without a prefix, each worker as (VllmWorkerProcess
    # pid=..). The quote's worker says 1.57 GiB; a driver line saying 1.60 GiB (hypothetical)
    # leaves the pool at the worker's: 1.57 x 2^30 = 1,685,774,663.68 -> 1,685,774,664.
    driver = VLLM_V0_WORKER.replace("(VllmWorkerProcess pid=507) ", "").replace(
        "KV Cache is 1.57GiB", "KV Cache is 1.60GiB"
    )
    parsed = parse_engine_log(driver + "\n" + VLLM_V0_WORKER)
    assert parsed.reported.kv_pool_bytes == 1_685_774_664
    assert parsed.by_rank("kv_pool_bytes") == {"": bytes_of("1.60", GIB), "pid 507": 1_685_774_664}


def test_two_launches_in_one_paste_keep_the_last() -> None:
    # vllm#10517: the 29k launch failed, the 20k one ran; pasted in that order, the answer is
    # the 20k launch's.
    both = parse_engine_log(VLLM_V0_29K + "\n" + VLLM_V0_20K)
    later = parse_engine_log(VLLM_V0_20K)
    assert both.reported.kv_pool_bytes == later.reported.kv_pool_bytes == bytes_of("3.81", GIB)
    assert both.reported.num_gpu_blocks == 1952
    assert both.reported.max_concurrency_tokens == 20000
    assert [f.value for f in both.occurrences("num_gpu_blocks")] == [1478, 1952]


def test_docker_compose_and_mpi_prefixes() -> None:
    compose = each_line(VLLM_019, lambda _i, line: f"vllm-1  | {line}")
    same_answer(parse_engine_log(compose), parse_engine_log(VLLM_019))
    mpi = each_line(TRTLLM, lambda _i, line: f"[1,0]<stdout>:{line}")
    same_answer(parse_engine_log(mpi), parse_engine_log(TRTLLM))


# --- whole published logs --------------------------------------------------------------------


def test_whole_vllm_log_with_its_own_noise() -> None:
    text = read_log("vllm-0.11.0-l4.log")
    assert "\x1b[" in text
    assert "\r" in text
    parsed = parse_engine_log(text)
    quoted = parse_engine_log(entry("github:abinavChandar/demo_env_l4")["quote"])
    assert parsed.engine == "vllm"
    assert parsed.engine_version == "0.11.0"
    assert parsed.reported == quoted.reported
    settings = parsed.settings
    # From its non-default args, "Using max model len", the scheduler line and the
    # "Initializing a V1 LLM engine (v0.11.0) with config: ..." dump.
    assert settings.model == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert settings.max_model_len == 32000
    assert settings.gpu_memory_utilization == 0.92
    assert settings.max_num_seqs == 128
    assert settings.max_num_batched_tokens == 2048
    assert settings.dtype == "bfloat16"
    assert settings.kv_cache_dtype == "auto"
    assert settings.tensor_parallel_size == 1
    assert settings.pipeline_parallel_size == 1
    assert settings.data_parallel_size == 1
    assert settings.quantization is None
    assert settings.enforce_eager is False
    assert settings.enable_prefix_caching is True
    # Line numbers are the file's (split at \n only, as an editor shows it).
    lines = text.split("\n")
    pool = next(line for line in parsed.recognised_lines if "vllm_available_kv" in line.patterns)
    assert "Available KV cache memory: 4.75 GiB" in lines[pool.line_number - 1]


def test_whole_sglang_log_with_interleaved_ranks() -> None:
    parsed = parse_engine_log(read_log("sglang-0.4.3-qwq-32b-tp4.log"))
    quoted = parse_engine_log(SGLANG)
    assert parsed.engine == "sglang"
    assert parsed.reported == quoted.reported
    # Four ranks printed every figure; the answer is TP0's, and each rank's is kept.
    assert parsed.by_rank("kv_cache_tokens") == {f"TP{n}": 46611 for n in range(4)}
    # A progress bar ran into TP1's "Capture cuda graph begin" line: still TP1's.
    assert set(parsed.by_rank("free_before_cudagraph_bytes")) == {"TP0", "TP1", "TP2", "TP3"}
    settings = parsed.settings
    # server_args=ServerArgs(...): mem_fraction_static=0.85, tp_size=4, chunked_prefill_size=
    # 2048, max_prefill_tokens=16384, kv_cache_dtype='auto', disable_radix_cache=False,
    # disable_cuda_graph=False; context_len=131072 and dtype from the later lines.
    assert settings.mem_fraction_static == 0.85
    assert settings.tensor_parallel_size == 4
    assert settings.data_parallel_size == 1
    assert settings.chunked_prefill_size == 2048
    assert settings.max_prefill_tokens == 16384
    assert settings.kv_cache_dtype == "auto"
    assert settings.enable_prefix_caching is True
    assert settings.enforce_eager is False
    assert settings.max_model_len == 131072
    assert settings.dtype == "bfloat16"
    assert settings.max_num_seqs is None  # max_running_requests=None: SGLang's own choice
