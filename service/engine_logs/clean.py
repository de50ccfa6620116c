"""Strip what `kubectl logs` and the engines wrap around a log message, and say which rank
printed it.

Removed, in this order, as often as they repeat: ANSI colour codes (with or without the ESC
byte, as some terminals paste them), markdown bold (`**`), RFC 3339 timestamps
(`kubectl logs --timestamps`), `kubectl logs --prefix` (`[pod/name/container]`), docker
compose service columns (`vllm-1  | `), MPI `--tag-output` prefixes (`[1,0]<stdout>:`), and
Ray's `[repeated 3x across cluster]` suffix. Then the process prefix is read for the rank:

* vLLM: `(APIServer pid=1)`, `(EngineCore pid=..)`, `(EngineCore_DP1 pid=..)`,
  `(VllmWorker rank=1 pid=..)`, `(Worker_TP1 pid=..)`, `(Worker_PP1_TP0 pid=..)`,
  `(VllmWorkerProcess pid=..)`, `(RayWorkerWrapper pid=.., ip=..)`;
* SGLang: `[2025-03-08 12:29:13 TP0]`, `[... DP1 TP3]`;
* TensorRT-LLM: `[RANK 1]`.

What is left is the line's text; `message` is that text without the logger's own prefix
(vLLM `INFO 04-22 00:03:35 [file.py:299] `, SGLang `INFO file.py:12: `, TensorRT-LLM
`[TensorRT-LLM][INFO] `), for the patterns that must match from the message's start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][AB0-2]|\x1b|\[\d{1,3}(?:;\d{1,3})*m")
_OUTER = (
    # kubectl logs --timestamps: RFC 3339 with nanoseconds, Z or an offset
    re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\s+"),
    # kubectl logs --prefix
    re.compile(r"^\[pod/[^\]\s]+\]\s+"),
    # docker compose: "service-1  | "
    re.compile(r"^[A-Za-z0-9][\w.-]*\s+\|\s"),
    # mpirun --tag-output
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),
)
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_PROCESS = re.compile(r"^\((?P<name>[A-Za-z_][\w-]*)(?P<attrs>[^()]*)\)\s*")
_ATTR = re.compile(r"(\w+)=([^\s,]+)")
_WORKER_RANKS = re.compile(r"^(?:Vllm)?Worker_(?P<ranks>(?:[A-Z]+\d+_?)+)$")
_ENGINE_CORE_DP = re.compile(r"^EngineCore_(?:DP)?(?P<dp>\d+)$")
_MAIN_PROCESSES = frozenset({"APIServer", "EngineCore", "LLMEngine", "MultiprocExecutor"})
_SGLANG = re.compile(
    r"\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
    r"(?P<ranks>(?:\s+(?:TP|DP|PP|EP|CP|ATTN_TP|ATTN_DP|MOE_EP)\d+)*)\]\s*"
)
_TRT_RANK = re.compile(r"\[RANK (\d+)\]")
_LOGGER_PREFIXES = (
    # vLLM: "INFO 04-22 00:03:35 [v1/worker/gpu_worker.py:436] " and the older
    # "INFO 12-13 19:54:18 worker.py:243] "
    re.compile(
        r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}"
        r"(?:\.\d+)?\s+(?:\[[^\]]*\]|[\w./-]+:\d+\])\s*"
    ),
    # SGLang's newer "INFO server_args.py:1697: "
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[\w./-]+:\d+:\s*"),
    # TensorRT-LLM C++: "[TensorRT-LLM][INFO] "
    re.compile(r"^\[TensorRT-LLM\]\[[A-Z]+\]\s*"),
    # TensorRT-LLM Python: "[02/17/2025-09:56:26] [TRT-LLM] [RANK 0] [I] "
    re.compile(
        r"^(?:\[\d{2}/\d{2}/\d{4}-\d{2}:\d{2}:\d{2}\]\s*)?\[TRT-LLM(?: [A-Z-]+)?\]\s*"
        r"(?:\[RANK \d+\]\s*)?\[[A-Z]\]\s*"
    ),
)


@dataclass(frozen=True, slots=True)
class CleanLine:
    text: str
    message: str
    rank: str
    pid: str | None


def plain_text(raw: str) -> str:
    """The line without colour codes, bold markers and carriage returns, stripped: every
    later step only removes a prefix or a suffix, so the cleaned text is a piece of it."""
    return _ANSI.sub("", raw).replace("**", "").replace("\r", "").strip()


def clean_line(raw: str) -> CleanLine:
    return clean_plain(plain_text(raw))


def clean_plain(text: str) -> CleanLine:
    """`clean_line` of a line `plain_text` has already cleaned."""
    changed = True
    while changed:
        changed = False
        for outer in _OUTER:
            stripped = outer.sub("", text, count=1)
            if stripped != text:
                text, changed = stripped, True
    text = _RAY_REPEATED.sub("", text)

    rank, pid = "", None
    process = _PROCESS.match(text)
    if process:
        rank, pid = _process_rank(process.group("name"), process.group("attrs"))
        text = text[process.end() :]
    else:
        # SGLang's prefix, also where a progress bar without a newline ("...it/s]") runs
        # into it.
        sglang = _SGLANG.search(text)
        if sglang and sglang.start() > 0 and not text[: sglang.start()].endswith("]"):
            sglang = None
        if sglang:
            rank = " ".join(sglang.group("ranks").split())
            text = text[sglang.end() :]
    trt_rank = _TRT_RANK.search(text[:80])
    if trt_rank and not rank:
        rank = f"rank {trt_rank.group(1)}"

    message = text
    for prefix in _LOGGER_PREFIXES:
        message = prefix.sub("", message, count=1)
    return CleanLine(text=text, message=message, rank=rank, pid=pid)


def _process_rank(name: str, attrs: str) -> tuple[str, str | None]:
    """The rank a vLLM process prefix names: "" for the main process, "TP1"/"PP0_TP1" for
    a worker, "rank 1" for `rank=1`, or "pid N" when only the pid tells processes apart."""
    values = dict(_ATTR.findall(attrs))
    pid = values.get("pid")
    if "rank" in values:
        return f"rank {values['rank']}", pid
    worker = _WORKER_RANKS.match(name)
    if worker:
        return worker.group("ranks").strip("_"), pid
    engine_core = _ENGINE_CORE_DP.match(name)
    if engine_core:
        dp = engine_core.group("dp")
        return ("" if dp == "0" else f"DP{dp}"), pid
    if name in _MAIN_PROCESSES:
        return "", pid
    return (f"pid {pid}" if pid else name), pid
