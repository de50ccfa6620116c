"""The multimodal encoder's flags on every door (issue 21 item 4): POST /v1/capacity with a
VLM's config.json (the budget line and the pool it moves), GET, the CSV table and the CLI.

Gemma 3 27B (tests/fixtures/hf_configs/google--medgemma-27b-it.json) on vLLM 0.19.0, 8,192
tokens: the encoder profile keeps 32 images' outputs and pixel values, 242,221,056 B
(tests/sizing/test_encoder_profile.py works it by hand); with {"image": 0} or
skip_mm_profiling there is no profile, so the pool grows by exactly that.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from tests.conftest import ADMIN
from tests.helpers import problem

CONFIG = json.loads(
    (
        Path(__file__).parent.parent / "fixtures" / "hf_configs" / "google--medgemma-27b-it.json"
    ).read_text()
)
KEPT = 242_221_056


def _ask(client: TestClient, **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/capacity?explain=true",
        json={
            "model": {"hf_config": CONFIG},
            "gpu": "h100-sxm-80gb",
            "engine_version": "0.19.0",
            "max_model_len": 8192,
            **extra,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_post_the_encoder_profile_is_a_budget_line_and_the_flags_remove_it(
    client: TestClient,
) -> None:
    profiled = _ask(client)
    lines = {line["name"]: line for line in profiled["explanation"]["memory_budget"]["lines"]}
    assert lines["encoder_profile"]["bytes"] == -KEPT
    assert "32 image items x 256 tokens" in lines["encoder_profile"]["note"]
    for flags in ({"limit_mm_per_prompt": {"image": 0}}, {"skip_mm_profiling": True}):
        skipped = _ask(client, **flags)
        assert skipped["kv_pool_bytes"] - profiled["kv_pool_bytes"] == KEPT
        names = {line["name"] for line in skipped["explanation"]["memory_budget"]["lines"]}
        assert "encoder_profile" not in names
    # {"image": 1} at max_num_seqs 4: 4 items, an eighth of the 32 (every term scales by items)
    four = _ask(client, limit_mm_per_prompt='{"image": 1}', max_num_seqs=4)
    lines = {line["name"]: line for line in four["explanation"]["memory_budget"]["lines"]}
    assert lines["encoder_profile"]["bytes"] == -KEPT // 8


def test_get_takes_the_flags_and_refuses_bad_json_by_name(client: TestClient) -> None:
    base = {"model": "gemma-3-27b-it", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    ok = client.get("/v1/capacity", params={**base, "limit_mm_per_prompt": '{"image": 2}'})
    assert ok.status_code == 200, ok.text
    skip = client.get("/v1/capacity", params={**base, "skip_mm_profiling": "true"})
    assert skip.status_code == 200, skip.text
    for value, field in (("image=2", "limit_mm_per_prompt"), ('{"image": -1}', "image")):
        body = problem(
            client.get("/v1/capacity", params={**base, "limit_mm_per_prompt": value}), 422
        )
        assert body["field"].startswith("limit_mm_per_prompt"), body
        assert field in body["field"]
    for flag in ({"limit_mm_per_prompt": '{"image": 1}'}, {"skip_mm_profiling": "true"}):
        body = problem(client.get("/v1/capacity", params={**base, "engine": "sglang", **flag}), 422)
        assert body["field"] in flag, body


def test_an_imported_vlm_keeps_its_tower_for_get_and_a_deployment_profile(
    client: TestClient,
) -> None:
    imported = client.post(
        "/v1/models/import", json={"hf_config": CONFIG, "slug": "medgemma-27b-it"}, headers=ADMIN
    )
    assert imported.status_code == 201, imported.text
    question = {"model": "medgemma-27b-it", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    question |= {"engine_version": "0.19.0"}
    profiled = client.get("/v1/capacity", params=question).json()
    skipped = client.get(
        "/v1/capacity", params={**question, "limit_mm_per_prompt": '{"image": 0}'}
    ).json()
    assert skipped["kv_pool_bytes"] - profiled["kv_pool_bytes"] == KEPT
    assert profiled["kv_pool_bytes"] == _ask(client)["kv_pool_bytes"]  # as POST answers
    profile = {"name": "medgemma-no-images", **question, "limit_mm_per_prompt": '{"image": 0}'}
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    sized = client.get("/v1/deployments/medgemma-no-images/capacity").json()
    assert sized["kv_pool_bytes"] == skipped["kv_pool_bytes"]


def test_a_plan_pastes_the_flags_and_takes_the_columns(client: TestClient) -> None:
    question = {"model": "gemma-3-27b-it", "max_model_len": 8192, "peak_concurrency": 4}
    question |= {"gpus": ["h100-sxm-80gb"], "limit_mm_per_prompt": {"image": 2, "video": 0}}
    best = client.post("/v1/plans", json=question).json()["recommendation"]
    assert """--limit-mm-per-prompt '{"image":2,"video":0}'""" in best["engine_flags"]["vllm"]
    header = "model,max_model_len,peak_concurrency,gpus,limit_mm_per_prompt"
    row = 'gemma-3-27b-it,8192,4,h100-sxm-80gb,"{""image"": 2, ""video"": 0}"'
    rows = client.post(
        "/v1/plans", content=f"{header}\n{row}\n", headers={"Content-Type": "text/csv"}
    )
    (cells,) = list(csv.DictReader(io.StringIO(rows.text)))
    assert cells["status"] == "ok", cells
    assert cells["kv_pool_bytes"] == str(best["kv_pool_bytes"])


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_the_cli_takes_the_flags(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--offline", "--no-explain", "--model", "gemma-3-27b-it"]
    args += ["--gpu", "h100-sxm-80gb", "--max-model-len", "8192", "--skip-mm-profiling"]
    assert main([*args, "--limit-mm-per-prompt", '{"image": 2}']) == 0
    assert json.loads(capsys.readouterr().out)["fits"] is True
