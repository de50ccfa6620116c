"""SGLang DP attention on the catalog's MoE models (issue 21, the issue-19 leftovers' item 3).

DP attention cuts the attention, embedding and LM-head weights by the attention-TP group
(service/sizing/engines/sglang_dp.py, read in SGLang 0.5.23 models/deepseek_v2.py), so it
needs those shares of the weights. A config.json gives them from its tensors
(service/sizing/model/hf_config.py `_attention_shares`); the catalog stores the same numbers
(service/catalog/data/models.json `attention_shares`) for the MoE rows whose config.json is a
fixture (tests/fixtures/hf_configs, SOURCES.md there). Here: every stored share is what the
reader counts from that fixture; the catalog's deepseek-v3 answers DP attention on GET, POST,
the CSV plan table and the CLI alike; its weights line is worked by hand below.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.cli import main
from service.sizing import architecture_from_dict, architecture_from_hf_config

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "hf_configs"
ROWS = json.loads((ROOT / "service" / "catalog" / "data" / "models.json").read_text("utf-8"))
CAPACITY = "/v1/capacity"
V3 = {"model": "deepseek-v3", "gpu": "h200-141gb", "max_model_len": 32768, "engine": "sglang"}
DP8 = {"tensor_parallel_size": 8, "data_parallel_size": 8, "enable_dp_attention": True}
DP8 |= {"ep_size": 8, "engine_version": "0.5.23"}


def _stored() -> list[dict[str, object]]:
    return [row for row in ROWS if "attention_shares" in row["architecture"]]


def test_the_catalog_stores_the_shares_its_moe_configs_give() -> None:
    stored = _stored()
    # every MoE row with a config.json fixture: 17 (deepseek-r1 ... qwen3.8-2.4t-a95b)
    assert len(stored) == 17
    assert all(row["architecture"]["moe"] for row in stored)
    for row in stored:
        config = FIXTURE / (str(row["hf_id"]).replace("/", "--") + ".json")
        read = architecture_from_hf_config(json.loads(config.read_text("utf-8")))
        catalog = architecture_from_dict(row["architecture"])  # type: ignore[arg-type]
        assert catalog.attention_shares_known == read.attention_shares_known, row["slug"]
    # the stored form round-trips (service/sizing/model/schedule.py)
    v3 = next(row for row in stored if row["slug"] == "deepseek-v3")
    shares = architecture_from_dict(v3["architecture"]).attention_shares_known  # type: ignore[arg-type]
    assert shares is not None
    stored_shares = v3["architecture"]["attention_shares"]  # type: ignore[index]
    assert dataclasses.asdict(shares) == stored_shares
    # DeepSeek-V3's embedding: vocab_size 129280 x hidden_size 7168 = 926,679,040 parameters,
    # bfloat16 in its FP8 checkpoint: x 2 B = 1,853,358,080 B; lm_head the same (untied)
    assert shares.embedding.parameters == 129280 * 7168 == 926_679_040
    assert shares.embedding.bytes == 2 * 926_679_040 == 1_853_358_080
    assert shares.lm_head == shares.embedding


def test_every_door_answers_dp_attention_on_the_catalog_entry(
    client: TestClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    get = client.get(CAPACITY, params={**V3, **DP8})
    assert get.status_code == 200, get.text
    body = get.json()
    post = client.post(CAPACITY, json={**V3, **DP8}).json()
    names = ("kv_pool_bytes", "kv_cache_tokens", "kv_cache_tokens_total", "max_concurrency_total")
    for name in names:
        assert post[name] == body[name], name
    assert body["kv_cache_tokens_total"] == 8 * body["kv_cache_tokens"]
    # SGLang's own spellings ask the same question
    theirs = {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "ep_size": 8}
    same = client.get(CAPACITY, params={**V3, **theirs, "engine_version": "0.5.23"}).json()
    assert same["kv_cache_tokens_total"] == body["kv_cache_tokens_total"]

    # The weights line, by hand (sglang_dp.py sglang_rank_weights; catalog deepseek-v3):
    #   weights_total 672,986,192,896 B (the catalog's weight_bytes)
    #   routed experts priced from the geometry: 58 MoE layers x 256 experts x 3 x 2048 x 7168
    #     = 653,908,770,816 parameters at FP8 (1 B) = 653,908,770,816 B
    #   attention 11,416,215,392 B, embedding and lm_head 1,853,358,080 B each (the config's)
    #   rest = 672,986,192,896 - 653,908,770,816 - 11,416,215,392 - 2 x 1,853,358,080
    #        = 3,954,490,528 B (dense MLPs, shared experts, routers, norms)
    #   per GPU (attn_tp 1; 0.5.23 puts the embedding on the attention-TP group; lm_head over
    #   TP 8): 653,908,770,816 / 8 + 11,416,215,392 + 1,853,358,080 + 1,853,358,080 / 8
    #        + 3,954,490,528 / 8 = 81,738,596,352 + 11,416,215,392 + 1,853,358,080
    #        + 231,669,760 + 494,311,316 = 95,734,150,900 B
    #   (the note prints the shares it cut; the lm_head's over TP 8)
    assert 58 * 256 * 3 * 2048 * 7168 == 653_908_770_816
    rest = 672_986_192_896 - 653_908_770_816 - 11_416_215_392 - 2 * 1_853_358_080
    assert rest == 3_954_490_528
    explained = client.post(CAPACITY, json={**V3, **DP8, "explain": True}).json()
    lines = {line["name"]: line for line in explained["explanation"]["memory_budget"]["lines"]}
    weights = lines["weights"]
    assert "attention (11416215392 B) over 1" in weights["note"], weights
    assert "embedding (1853358080 B) over 1" in weights["note"], weights
    assert f"the rest ({rest} B) over TP 8" in weights["note"], weights
    # loaded with SGLang's loading slack (engines/calibration.py SGLANG_LOAD_OVERHEAD_FRACTION
    # 0.015): 95,734,150,900 x 1.015 = 97,170,163,163.5, floored
    assert -weights["bytes"] == 95_734_150_900 * 1015 // 1000 == 97_170_163_163, weights

    # the CSV doors: the GET's table row, and the plan table (the planner picks the layout:
    # the same answer as the JSON plan; a DP attention row was refused before the shares)
    row_csv = client.get(CAPACITY, params={**V3, **DP8, "format": "csv"})
    assert row_csv.status_code == 200, row_csv.text
    (cells,) = list(csv.DictReader(io.StringIO(row_csv.text)))
    assert cells["kv_cache_tokens_total"] == str(body["kv_cache_tokens_total"]), cells
    plan = {"model": "deepseek-v3", "max_model_len": 32768, "peak_concurrency": 64}
    plan |= {"gpus": ["h200-141gb"], "engine": "sglang", "engine_version": "0.5.23"}
    plan |= {"enable_dp_attention": True, "ep_size": 8}
    by_json = client.post("/v1/plans", json=plan)
    assert by_json.status_code == 200, by_json.text
    best = by_json.json()["recommendation"]
    header = "model,max_model_len,peak_concurrency,gpus,engine,engine_version,"
    header += "enable_dp_attention,ep_size"
    line = "deepseek-v3,32768,64,h200-141gb,sglang,0.5.23,true,8"
    table = client.post(
        "/v1/plans", content=f"{header}\n{line}\n", headers={"Content-Type": "text/csv"}
    )
    assert table.status_code == 200, table.text
    (cells,) = list(csv.DictReader(io.StringIO(table.text)))
    assert cells["status"] == "ok", cells
    assert cells["kv_pool_bytes"] == str(best["kv_pool_bytes"]), cells
    assert cells["data_parallel_size"] == str(best["data_parallel_size"]), cells

    # the CLI
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'kvplan.db'}")
    args = ["capacity", "--offline", "--model", "deepseek-v3", "--gpu", "h200-141gb"]
    args += ["--max-model-len", "32768", "--engine", "sglang", "--engine-version", "0.5.23"]
    args += ["--tensor-parallel-size", "8", "--data-parallel-size", "8"]
    args += ["--enable-dp-attention", "--ep-size", "8", "--no-explain"]
    assert main(args) == 0
    cli = json.loads(capsys.readouterr().out)
    for name in names:
        assert cli[name] == body[name], name


def test_the_catalog_and_the_config_cut_the_same_attention(client: TestClient) -> None:
    """The catalog's deepseek-v3 and its config.json differ in their weights' total (the
    catalog's weight_bytes leaves out norms and block scales: its notes), not in the attention,
    embedding and head DP attention moves: both weights notes name the same three."""
    config = json.loads((FIXTURE / "deepseek-ai--DeepSeek-V3.json").read_text("utf-8"))
    posted = client.post(
        CAPACITY, json={**V3, **DP8, "model": {"hf_config": config}, "explain": True}
    )
    assert posted.status_code == 200, posted.text
    catalog = client.post(CAPACITY, json={**V3, **DP8, "explain": True}).json()

    def note(body: dict[str, object]) -> str:
        lines = body["explanation"]["memory_budget"]["lines"]  # type: ignore[index]
        return next(line["note"] for line in lines if line["name"] == "weights")  # type: ignore[no-any-return]

    for part in ("attention (11416215392 B) over 1", "embedding (1853358080 B) over 1"):
        assert part in note(posted.json())
        assert part in note(catalog)
