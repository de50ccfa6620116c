"""What held-out logs showed is missing (issue 21 item 6), through every door.

PCIe nodes: vLLM turns its custom all-reduce off past two PCIe-only GPUs
(custom_all_reduce.py CustomAllreduce.__init__), and `--disable-custom-all-reduce` keeps it from
being built; its buffers are the 2.07 GiB + 0.05 GiB per further rank the H100 logs show at TP
> 1 (engines/calibration.py). Off, non-torch memory is charged as one GPU's 0.25 GiB. At TP 8:
2.07 x 2^30 rounded = 2,222,645,576 B plus 6 x 53,687,091 B (0.05 GiB rounded) = 2,544,768,122
B (2.37 GiB) on NVLink, 268,435,456 B (0.25 GiB) without it: the pool gains 2,276,332,666 B.

Nightly and dev builds: `engine_rules_version` names the final release whose arithmetic the
build carries; vLLM 0.20.0 began subtracting the CUDA-graph estimate and raised the default
utilization to 0.92 (docs/engines/vllm.md, engines/calibration.py), so a 0.20.0 dev build sized
by 0.20.0's rules answers as 0.20.0, and by default as 0.19.
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

TP8 = {"model": "llama-3.1-70b", "max_model_len": 8192, "tensor_parallel_size": 8}
TP8 |= {"engine_version": "0.19.0"}
NVLINK_TO_PCIE = 2_544_768_122 - 268_435_456  # 2,276,332,666 B


def _get(client: TestClient, **params: object) -> dict[str, Any]:
    answer = client.get("/v1/capacity", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _non_torch_line(body: dict[str, Any]) -> dict[str, Any]:
    lines = body["explanation"]["memory_budget"]["lines"]
    (line,) = [line for line in lines if line["name"] == "non_torch"]
    return dict(line)


def test_get_eight_l40s_charge_no_custom_all_reduce(client: TestClient) -> None:
    pcie = client.post("/v1/capacity", json={**TP8, "gpu": "l40s"}).json()
    line = _non_torch_line(pcie)
    assert line["bytes"] == -268_435_456
    assert "8 PCIe-only GPUs" in line["note"]
    # the flag changes nothing where vLLM already turned it off
    same = _get(client, **TP8, gpu="l40s", disable_custom_all_reduce="true")
    assert same["kv_pool_bytes"] == pcie["kv_pool_bytes"]


def test_get_post_and_the_flag_on_nvlink(client: TestClient) -> None:
    linked = _get(client, **TP8, gpu="h100-sxm-80gb")
    flagged = _get(client, **TP8, gpu="h100-sxm-80gb", disable_custom_all_reduce="true")
    assert flagged["kv_pool_bytes"] - linked["kv_pool_bytes"] == NVLINK_TO_PCIE
    body = {**TP8, "gpu": "h100-sxm-80gb", "disable_custom_all_reduce": True}
    posted = client.post("/v1/capacity", json=body).json()
    assert posted["kv_pool_bytes"] == flagged["kv_pool_bytes"]
    assert posted["engine_settings"]["disable_custom_all_reduce"] is True
    assert "disable_custom_all_reduce" in _non_torch_line(posted)["note"]


def test_an_inline_gpu_says_whether_its_links_are_nvlink(client: TestClient) -> None:
    h100 = client.get("/v1/gpus/h100-sxm-80gb").json()
    gpu = {"memory_bytes": h100["memory_bytes"], "name": h100["name"]}
    linked = client.post("/v1/capacity", json={**TP8, "gpu": gpu}).json()
    pcie = client.post("/v1/capacity", json={**TP8, "gpu": {**gpu, "fully_connected": False}})
    assert pcie.json()["kv_pool_bytes"] - linked["kv_pool_bytes"] == NVLINK_TO_PCIE


def test_sglang_refuses_the_vllm_flag_by_name(client: TestClient) -> None:
    body = problem(
        client.get(
            "/v1/capacity",
            params={**TP8, "gpu": "h100-sxm-80gb", "engine": "sglang", "engine_version": "0.5.4"}
            | {"disable_custom_all_reduce": "true"},
        ),
        422,
    )
    assert body["field"] == "disable_custom_all_reduce"


def test_the_plans_csv_and_its_flags_carry_it(client: TestClient) -> None:
    question = {"model": "llama-3.1-70b", "max_model_len": 8192, "peak_concurrency": 10}
    question |= {"gpus": ["h100-sxm-80gb"], "disable_custom_all_reduce": True}
    best = client.post("/v1/plans", json=question).json()["recommendation"]
    assert "--disable-custom-all-reduce" in best["engine_flags"]["vllm"]
    header = "model,max_model_len,peak_concurrency,gpus,disable_custom_all_reduce"
    row = "llama-3.1-70b,8192,10,h100-sxm-80gb,true"
    rows = client.post(
        "/v1/plans", content=f"{header}\n{row}\n", headers={"Content-Type": "text/csv"}
    )
    (cells,) = list(csv.DictReader(io.StringIO(rows.text)))
    assert cells["kv_pool_bytes"] == str(best["kv_pool_bytes"])


def test_intel_arc_pro_b60_charges_the_xpu_figures(client: TestClient) -> None:
    # An Arc Pro B60 given inline (24 GiB; the catalog holds no Intel GPU): 0.16+ charges the
    # 1.50 GiB its log printed (round(1.5 x 2^30) = 1,610,612,736 B), 0.14 the XPU worker's 128
    # MiB (134,217,728 B).
    gpu = {"memory_bytes": 24 * 2**30, "name": "Intel(R) Arc(TM) Pro B60 Graphics"}
    question = {"model": "llama-3.1-8b", "gpu": gpu, "max_model_len": 4096}
    new = client.post("/v1/capacity", json={**question, "engine_version": "0.19.0"}).json()
    old = client.post("/v1/capacity", json={**question, "engine_version": "0.14.0"}).json()
    assert _non_torch_line(new)["bytes"] == -1_610_612_736
    assert "Arc Pro B60" in _non_torch_line(new)["note"]
    assert _non_torch_line(old)["bytes"] == -134_217_728


# --- nightly and dev builds ------------------------------------------------------------------

BUILD = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
SAME = ("kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens", "max_num_seqs")


def test_a_dev_build_sized_by_the_release_it_carries(client: TestClient) -> None:
    dev = "0.20.0rc1.dev91"
    default = _get(client, **BUILD, engine_version=dev)
    carried = _get(client, **BUILD, engine_version=dev, engine_rules_version="0.20.0")
    before = _get(client, **BUILD, engine_version="0.19.0")
    release = _get(client, **BUILD, engine_version="0.20.0")
    assert [default[k] for k in SAME] == [before[k] for k in SAME]
    assert [carried[k] for k in SAME] == [release[k] for k in SAME]
    assert carried["kv_pool_bytes"] != default["kv_pool_bytes"]
    # the answer says which rules sized it, and echoes the build
    assert carried["engine_version"] == dev
    (note,) = [w for w in carried["warnings"] if "engine_rules_version" in w]
    assert "sized by the rules of 0.20.0" in note
    assert "without it, by 0.19.x's" in note
    assert any("pre-release of 0.20.0" in w for w in default["warnings"])
    posted = client.post(
        "/v1/capacity", json={**BUILD, "engine_version": dev, "engine_rules_version": "0.20.0"}
    ).json()
    assert posted["kv_pool_bytes"] == carried["kv_pool_bytes"]
    assert posted["engine_settings"]["engine_version"] == "0.20.0"


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"engine_version": "0.20.0rc1.dev91", "engine_rules_version": "0.21.0"}, "up to 0.20.0"),
        ({"engine_version": "0.20.1", "engine_rules_version": "0.20.0"}, "0.20.1 up to 0.20.1"),
        ({"engine_rules_version": "0.20.0"}, "give the build as engine_version"),
        ({"engine_version": "0.20.0rc1", "engine_rules_version": "0.20.0rc1"}, "pattern"),
    ],
)
def test_rules_the_build_cannot_carry_are_refused_by_name(
    client: TestClient, params: dict[str, str], words: str
) -> None:
    body = problem(client.get("/v1/capacity", params={**BUILD, **params}), 422)
    assert body["field"] == "engine_rules_version"
    assert words in json.dumps(body)


def test_rules_are_vllms_only(client: TestClient) -> None:
    params = {**BUILD, "engine": "sglang", "engine_rules_version": "0.5.4"}
    body = problem(client.get("/v1/capacity", params=params), 422)
    assert body["field"] == "engine_rules_version"


# --- the CLI -------------------------------------------------------------------------------------


@pytest.fixture
def sqlite_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'kvplan.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_the_cli_asks_what_get_asks(
    client: TestClient, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shell = ["capacity", "--offline", "--model", "llama-3.1-70b", "--gpu", "h100-sxm-80gb"]
    shell += ["--max-model-len", "8192", "--tensor-parallel-size", "8", "--no-explain"]
    shell += ["--engine-version", "0.19.0", "--disable-custom-all-reduce"]
    assert main(shell) == 0
    printed = json.loads(capsys.readouterr().out)
    asked = _get(client, **TP8, gpu="h100-sxm-80gb", disable_custom_all_reduce="true")
    assert printed["kv_pool_bytes"] == asked["kv_pool_bytes"]
    dev = ["capacity", "--offline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]
    dev += ["--max-model-len", "8192", "--no-explain", "--engine-version", "0.20.0rc1.dev91"]
    assert main([*dev, "--engine-rules-version", "0.20.0"]) == 0
    printed = json.loads(capsys.readouterr().out)
    asked = _get(client, **BUILD, engine_version="0.20.0")
    assert printed["kv_pool_bytes"] == asked["kv_pool_bytes"]


# --- deployment profiles ---------------------------------------------------------------------


def test_a_profile_stores_both_inputs(client: TestClient) -> None:
    profile = {"name": "llama-70b-tp8-nccl", "gpu": "h100-sxm-80gb", **TP8}
    profile |= {"disable_custom_all_reduce": True}
    created = client.post("/v1/deployments", json=profile, headers=ADMIN)
    assert created.status_code == 201, created.text
    sized = client.get("/v1/deployments/llama-70b-tp8-nccl/capacity").json()
    asked = _get(client, **TP8, gpu="h100-sxm-80gb", disable_custom_all_reduce="true")
    assert sized["kv_pool_bytes"] == asked["kv_pool_bytes"]
    dev = {"name": "llama-dev-build", **BUILD, "engine_version": "0.20.0rc1.dev91"}
    dev |= {"engine_rules_version": "0.20.0"}
    created = client.post("/v1/deployments", json=dev, headers=ADMIN)
    assert created.status_code == 201, created.text
    sized = client.get("/v1/deployments/llama-dev-build/capacity").json()
    assert sized["kv_pool_bytes"] == _get(client, **BUILD, engine_version="0.20.0")["kv_pool_bytes"]


def test_catalog_gpus_carry_their_links_and_an_intel_gpu_is_asked_on_get(
    client: TestClient,
) -> None:
    # An Arc Pro B60 entered in the catalog (24,480 MiB as xpu-smi reports it is not the total
    # torch.xpu sees, which no public log prints: 24 GiB here) and a PCIe-only NVIDIA card: GET
    # names them by slug and is charged as POST is.
    b60 = {"slug": "arc-pro-b60", "name": "Intel(R) Arc(TM) Pro B60 Graphics"}
    created = client.post("/v1/gpus", json={**b60, "memory_bytes": 24 * 2**30}, headers=ADMIN)
    assert created.status_code == 201, created.text
    query = {"model": "llama-3.1-8b", "gpu": "arc-pro-b60", "max_model_len": 4096}
    got = _get(client, **query, engine_version="0.19.0")
    inline = {"memory_bytes": 24 * 2**30, "name": b60["name"]}
    posted = client.post(
        "/v1/capacity", json={**query, "gpu": inline, "engine_version": "0.19.0"}
    ).json()
    assert got["kv_pool_bytes"] == posted["kv_pool_bytes"]
    assert _non_torch_line(posted)["bytes"] == -1_610_612_736
    # a catalog GPU whose interconnect says PCIe only: eight of them lose the custom all-reduce
    pcie = {"slug": "pcie-h100", "name": "NVIDIA H100 PCIe 80GB copy", "interconnect": "PCIe Gen5"}
    h100 = client.get("/v1/gpus/h100-sxm-80gb").json()
    created = client.post(
        "/v1/gpus", json={**pcie, "memory_bytes": h100["memory_bytes"]}, headers=ADMIN
    )
    assert created.status_code == 201, created.text
    linked = _get(client, **TP8, gpu="h100-sxm-80gb")
    unlinked = _get(client, **TP8, gpu="pcie-h100")
    assert unlinked["kv_pool_bytes"] - linked["kv_pool_bytes"] == NVLINK_TO_PCIE
