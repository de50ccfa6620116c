"""Load generators: wrk where it is installed, else a Python one; both answer a `stats.Run`.

A workload is a list of HTTP/1.1 requests, sent in turn over `connections` keep-alive
connections (each connection sends its next request when the answer to the last has come in,
as wrk does), starting at `offset` in the list and wrapping round.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .stats import Run, parse_wrk, run_of


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str  # path and query string
    body: bytes = b""
    content_type: str | None = None

    def encode(self, host: str) -> bytes:
        """The request as sent (HTTP/1.1, keep-alive)."""
        lines = [f"{self.method} {self.target} HTTP/1.1", f"Host: {host}"]
        if self.content_type is not None:
            lines.append(f"Content-Type: {self.content_type}")
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


@dataclass(frozen=True, slots=True)
class Load:
    """What to send, and how hard."""

    requests: Sequence[Request]
    connections: int
    seconds: float
    offset: int = 0


def pick(kind: str) -> str:
    """`wrk` or `python`: `auto` is wrk where it is on PATH."""
    if kind == "auto":
        return "wrk" if shutil.which("wrk") else "python"
    return kind


def drive(kind: str, port: int, load: Load) -> Run:
    """One run of `load` against 127.0.0.1:`port`."""
    if kind == "wrk":
        return _wrk(port, load)
    return asyncio.run(python_run("127.0.0.1", port, load))


# ---- the Python load generator -----------------------------------------------------------------


class _Answers:
    """The answers the connections read: latencies and failures."""

    def __init__(self, load: Load, host: str) -> None:
        self.encoded = [r.encode(host) for r in load.requests]
        self.next = load.offset
        self.latencies: list[float] = []
        self.failed = 0

    def take(self) -> bytes:
        request = self.encoded[self.next % len(self.encoded)]
        self.next += 1
        return request


async def _read_answer(reader: asyncio.StreamReader) -> int:
    """Read one answer; its status code. Bodies are framed by Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding":
            raise ValueError("chunked answers are not read by this load generator")
    if length:
        await reader.readexactly(length)
    return status


async def _connection(host: str, port: int, answers: _Answers, deadline: float) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline:
            request = answers.take()
            start = time.perf_counter()
            writer.write(request)
            status = await _read_answer(reader)
            answers.latencies.append(time.perf_counter() - start)
            if status >= 400:
                answers.failed += 1
    except (ConnectionError, asyncio.IncompleteReadError):
        answers.failed += 1
    finally:
        writer.close()


async def python_run(host: str, port: int, load: Load) -> Run:
    """Drive `load` from this process's event loop (uvloop where it is installed)."""
    answers = _Answers(load, f"{host}:{port}")
    start = time.perf_counter()
    deadline = start + load.seconds
    await asyncio.gather(
        *(_connection(host, port, answers, deadline) for _ in range(load.connections))
    )
    return run_of(answers.latencies, time.perf_counter() - start, answers.failed)


# ---- wrk ---------------------------------------------------------------------------------------


# The requests are read from a file, one a line: method, target, content type, body (tabs
# between; wrk's Lua turns each into the bytes it sends, once).
WRK_SCRIPT = """local requests = {}
local i = %d
init = function(args)
  for line in io.lines("%s") do
    local method, target, ctype, body = line:match("^([^\\t]*)\\t([^\\t]*)\\t([^\\t]*)\\t(.*)$")
    local headers = {}
    if ctype ~= "" then headers["Content-Type"] = ctype end
    if body == "" then body = nil end
    requests[#requests + 1] = wrk.format(method, target, headers, body)
  end
end
request = function()
  i = i %% #requests + 1
  return requests[i]
end
"""


def wrk_lines(requests: Sequence[Request]) -> str:
    """The request file WRK_SCRIPT reads."""
    lines = []
    for r in requests:
        fields = (r.method, r.target, r.content_type or "", r.body.decode())
        if any(c in field for field in fields for c in "\t\r\n"):
            raise ValueError(f"a request wrk is given may not hold tabs or newlines: {r}")
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def _wrk(port: int, load: Load) -> Run:
    with tempfile.TemporaryDirectory(prefix="kvplan-bench-") as tmp:
        lines, script = Path(tmp) / "requests.tsv", Path(tmp) / "load.lua"
        lines.write_text(wrk_lines(load.requests))
        script.write_text(WRK_SCRIPT % (load.offset % len(load.requests), lines))
        # One wrk thread: on a small machine the other cores are the server's.
        command = [
            "wrk", "-t1", f"-c{load.connections}", f"-d{max(1, round(load.seconds))}s",
            "--latency", "-s", str(script), f"http://127.0.0.1:{port}",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True)
    return parse_wrk(done.stdout)
