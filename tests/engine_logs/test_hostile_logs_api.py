"""POST /v1/engine-logs under hostile input: never a 500, and every answer either a problem
naming its field or a 200 whose figures are ones the text printed.

Hostile: real lines cut anywhere, spliced with binary, nested ANSI codes, kubectl prefixes,
numbers no engine prints (hundreds of digits, 1e400), engines mixed in one paste; and, at the
body limit (KVPLAN_MAX_BODY_BYTES, 1 MiB by default), a million lines or one line of a
million characters.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.engine_logs.parser import LINES_PER_PATTERN, MAX_FIGURE
from tests.helpers import problem

from .calibration import load_entries

LINES = sorted({line for e in load_entries() for line in e["quote"].split("\n") if line})
# What the parser drops from a line before it reads it (service/engine_logs/clean.py, plain_text):
# colour and cursor codes (also a lone ESC and the "[1m" left when ESC was lost), carriage
# returns and markdown bold markers.
NOISE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][AB0-2]|\x1b|\[\d{1,3}(?:;\d{1,3})*m|\r|\*\*")
TEXT = {"content-type": "text/plain"}
# Counts an engine prints as digits (with or without thousands commas), never derived.
PRINTED_COUNTS = ("num_gpu_blocks", "kv_cache_tokens", "max_total_num_tokens")
HOSTILE = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

_line = st.one_of(
    st.sampled_from(LINES),
    st.tuples(st.sampled_from(LINES), st.integers(0, 300)).map(lambda pair: pair[0][: pair[1]]),
    st.sampled_from(LINES).map(lambda line: re.sub(r"\d+", "9" * 400, line)),
    st.sampled_from(LINES).map(lambda line: re.sub(r"\d+(\.\d+)?", "1e400", line)),
    st.sampled_from(LINES).map(lambda line: "\x1b[1m\x1b[31m\x1b[2m" + line + "\x1b[0m" * 3),
    st.sampled_from(LINES).map(lambda line: f"2026-01-02T03:04:05.123456789Z {line}"),
    st.sampled_from(LINES).map(lambda line: f"[pod/vllm-7d9f-abcde/vllm] {line}"),
    st.text(max_size=40),
)
_log = st.tuples(
    st.lists(_line, max_size=15).map("\n".join),
    st.binary(max_size=64),
    st.integers(0, 2),
)


def _check(response: Any, text: str) -> None:
    assert response.status_code in (200, 413, 415, 422), response.text
    if response.status_code != 200:
        body = problem(response, response.status_code)
        assert body["field"], body
        return
    answer = response.json()
    # a recognised line is a piece of the log without its noise: never text it did not hold
    plain = NOISE.sub("", text)
    for line in answer["recognised_lines"]:
        assert NOISE.sub("", line["text"]).strip() in plain
    for name, value in answer["reported"].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            assert abs(value) <= MAX_FIGURE, name  # no 400-digit "figure"
        if name in PRINTED_COUNTS:
            assert str(value) in plain or f"{value:,}" in plain, name


@HOSTILE
@given(_log)
def test_hostile_text_is_a_problem_or_printed_figures(
    client: TestClient, log: tuple[str, bytes, int]
) -> None:
    text, junk, where = log
    raw = text.encode("utf-8", errors="surrogatepass")
    body = (raw + junk, junk + raw, raw)[where]
    response = client.post("/v1/engine-logs", content=body, headers=TEXT)
    _check(response, body.decode("utf-8", errors="replace"))
    as_json = client.post("/v1/engine-logs", content=json.dumps({"log": text}).encode())
    _check(as_json, text)


def test_numbers_no_engine_prints_are_not_figures(client: TestClient) -> None:
    text = "GPU KV cache size: 1" + "0" * 400 + " tokens\n# GPU blocks: 99999999999999999999\n"
    body = problem(client.post("/v1/engine-logs", content=text, headers=TEXT), 422)
    assert body["field"] == "log"
    # beside a real line, the real line is read and the impossible one left out
    text += "# GPU blocks: 1952\n"
    answer = client.post("/v1/engine-logs", content=text, headers=TEXT).json()
    assert answer["reported"] == {"num_gpu_blocks": 1952}


def test_a_million_lines_within_the_body_limit(client: TestClient) -> None:
    # 10^6 empty lines, then one real one: the line is read, and numbered as the engine wrote it
    body = b"\n" * 10**6 + b"# GPU blocks: 1952\n"
    answer = client.post("/v1/engine-logs", content=body, headers=TEXT)
    assert answer.status_code == 200, answer.text
    assert answer.json()["reported"] == {"num_gpu_blocks": 1952}
    assert answer.json()["recognised_lines"][0]["line_number"] == 10**6 + 1
    # 10^6 lines of noise alone: nothing recognised is a 422 naming the log
    problem(client.post("/v1/engine-logs", content=b"x\n" * (2**19 - 1), headers=TEXT), 422)


def test_one_line_as_long_as_the_body_limit(client: TestClient) -> None:
    body = b"Available KV cache memory: " + b"7" * (2**20 - 64) + b" GiB"
    response = client.post("/v1/engine-logs", content=body, headers=TEXT)
    if response.status_code == 200:
        assert "kv_pool_bytes" not in response.json()["reported"]
    else:
        assert problem(response, 422)["field"] == "log"
    # past the limit: 413 before the body is read
    assert problem(client.post("/v1/engine-logs", content=body * 2, headers=TEXT), 413)


def test_a_line_repeated_to_the_body_limit_is_read_every_time_and_echoed_a_few_times(
    client: TestClient,
) -> None:
    # 32,000 copies of one line (32 bytes each, 1,024,000 bytes), then the same line with
    # another figure: every line is read, so the last one printed wins (parser.py, "a later
    # line wins"); the answer echoes the first LINES_PER_PATTERN and the last, and counts
    # the 32,001 - 11 = 31,990 it leaves out.
    repeated = "GPU KV cache size: 1,000 tokens\n"
    assert len(repeated) == 32
    body = repeated * 32_000 + "GPU KV cache size: 2,000 tokens\n"
    response = client.post("/v1/engine-logs", content=body, headers=TEXT)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["reported"] == {"kv_cache_tokens": 2000}
    numbers = [line["line_number"] for line in answer["recognised_lines"]]
    assert numbers == [*range(1, LINES_PER_PATTERN + 1), 32_001]
    assert answer["recognised_lines_omitted"] == 32_001 - (LINES_PER_PATTERN + 1)
    # what comes back is a few kilobytes, not the 32,001 lines again (about 5 MB as JSON)
    assert len(response.content) < 16_384


def test_the_lines_that_gave_the_figures_are_always_echoed(client: TestClient) -> None:
    # Two ranks printing their pools in turn, 20 times each: each rank's last pool is the one
    # kept (kv_pool_bytes is the smaller of the two, 10.00 GiB), and both lines are echoed
    # though neither pattern's first lines reach them.
    lines = []
    for _ in range(20):
        lines.append("(VllmWorker rank=0 pid=10) Available KV cache memory: 11.00 GiB")
        lines.append("(VllmWorker rank=1 pid=11) Available KV cache memory: 12.00 GiB")
    lines[-2] = "(VllmWorker rank=0 pid=10) Available KV cache memory: 10.00 GiB"
    answer = client.post("/v1/engine-logs", content="\n".join(lines), headers=TEXT).json()
    assert answer["reported"]["kv_pool_bytes"] == 10 * 2**30
    numbers = [line["line_number"] for line in answer["recognised_lines"]]
    assert numbers == [*range(1, LINES_PER_PATTERN + 1), 39, 40]
    assert answer["recognised_lines_omitted"] == 40 - len(numbers)
