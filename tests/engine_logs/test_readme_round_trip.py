"""The README's round trip (paste a log, see the differences, save it, ask again), run as
written against the log it describes: vLLM 0.19.0, Llama-3.1-8B-Instruct, one H100, utilization
0.95 (engine_logs.json, the jgchn/llm-d-planner ...tp1pp1dp1--8192.log entry)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import ADMIN
from tests.engine_logs.calibration import entry

README = Path(__file__).resolve().parents[2] / "README.md"
LOG: str = entry(
    "github:jgchn/llm-d-planner accuracy/results/v0.19.0/logs/"
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
)["quote"]
BASE = "http://127.0.0.1:8000"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Your engine's log")
    return text[start : text.index("\n## ", start + 1)]


def _curls(section: str) -> list[str]:
    return [line for line in section.splitlines() if line.startswith(("curl ", "kubectl "))]


def _path(line: str) -> str:
    found = re.search(rf'"?{re.escape(BASE)}(/[^"\s]*)"?', line)
    assert found is not None, line
    return found.group(1)


def test_the_readme_round_trip_answers_as_it_says(client: TestClient) -> None:
    section = _section()
    curls = _curls(section)
    post_log = next(line for line in curls if "/v1/engine-logs" in line)
    assert "content-type: text/plain" in post_log
    assert "--data-binary @vllm.log" in post_log
    explained = client.post(_path(post_log), content=LOG, headers={"content-type": "text/plain"})
    assert explained.status_code == 200, explained.text
    body: dict[str, Any] = explained.json()
    for name, value in (
        ("kv_pool_bytes", 62395137393),
        ("kv_cache_tokens", 476016),
        ("max_concurrency", 58.11),
    ):
        assert f"`{name}` {value}" in section
        assert body["reported"][name] == value
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None
    shown = {k: v for k, v in json.loads(block.group(1)).items() if k != "note"}
    row = next(d for d in body["differences"] if d["line"] == shown["line"])
    assert {k: row[k] for k in shown} == shown

    post_calibration = next(line for line in curls if "/v1/calibrations" in line and "POST" in line)
    assert "--data-binary @vllm.log" in post_calibration
    saved = client.post(
        _path(post_calibration), content=LOG, headers={**ADMIN, "content-type": "text/plain"}
    )
    assert saved.status_code == 201, saved.text
    calibration_id = saved.json()["id"]
    assert saved.headers["location"] == f"/v1/calibrations/{calibration_id}"

    asked = [_path(line) for line in curls if "/v1/capacity?" in line]
    assert len(asked) == 2
    same = client.get(asked[0]).json()
    assert (same["kv_cache_tokens"], same["max_concurrency"]) == (476016, 58.11)
    assert same["calibrated_from"]["calibration_id"] == calibration_id
    longer = client.get(asked[1]).json()
    assert (longer["num_gpu_blocks"], longer["kv_cache_tokens"]) == (29_751, 476016)
    assert longer["max_concurrency"] == 14.53 == round(29_751 / 2_048, 2)

    delete = next(line for line in curls if "DELETE" in line)
    assert """-H 'if-match: "1"'""" in delete
    path = _path(delete).replace("/1", f"/{calibration_id}")
    gone = client.delete(path, headers={**ADMIN, "If-Match": '"1"'})
    assert gone.status_code == 204
    assert client.get(asked[0]).json()["calibrated_from"] is None
