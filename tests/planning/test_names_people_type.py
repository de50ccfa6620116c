"""Models and GPUs by the names people type, on every door (service/catalog/names.py).

The names are real: the catalog's own `hf_id`s (service/catalog/data/models.json), the device
names nvidia-smi and the engines' logs print (service/calibration/engine_logs.json: the
jgchn/llm-d-planner vLLM 0.19.0 logs print "NVIDIA H100 80GB HBM3"; vllm-project/recipes PR #273
runs on "AMD Instinct MI300X"; the shared reference catalog quotes nvidia-smi's
"NVIDIA A100-SXM4-80GB" and "NVIDIA L40S"), and the totals logs print, in GiB with two decimals
(docs/catalog-sources.md#gpu-memory-as-torch-reports-it).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.catalog.names import DEVICE_NAMES, FAMILY_DEFAULTS, LOGGED_TOTALS_GIB
from service.catalog.seed import load_seed
from tests.conftest import ADMIN
from tests.helpers import problem

GiB = 2**30
# A question whose answer does not depend on the GPU's catalog speed figures: worked example A
# (tests/planning/test_capacity_api.py) with its pool given.
QUESTION = {"max_model_len": 8192, "engine_version": "0.20.0"}


def _catalog_bytes(slug: str) -> int:
    # the shipped catalog's runtime-reported total (service/catalog/data/gpus.json)
    return next(int(g["memory_bytes"]) for g in load_seed("gpus.json") if g["slug"] == slug)


def _get(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get("/v1/capacity", params={**QUESTION, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _post(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/capacity", json={**QUESTION, **body})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


# ---- models ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "meta-llama/Llama-3.1-8B-Instruct",  # the catalog's hf_id, as Hugging Face spells it
        "META-LLAMA/llama-3.1-8b-instruct",  # any case
        "Llama-3.1-8B-Instruct",  # the repository name alone: one catalog model has it
        "LLAMA-3.1-8B-INSTRUCT",  # the slug, in capitals
    ],
)
def test_a_model_by_its_hf_id_answers_as_its_slug(client: TestClient, name: str) -> None:
    by_slug = _get(client, model="llama-3.1-8b-instruct", gpu="h100-sxm-80gb")
    by_name = _get(client, model=name, gpu="h100-sxm-80gb")
    assert by_name == by_slug  # the answer names the model by its slug
    posted = _post(client, model=name, gpu="h100-sxm-80gb")
    assert posted["model"] == "llama-3.1-8b-instruct"
    assert posted["kv_pool_bytes"] == by_slug["kv_pool_bytes"]


def test_an_unknown_model_suggests_the_closest_slugs(client: TestClient) -> None:
    response = client.get("/v1/capacity", params={"model": "meta-llama/Llama-3.1-8B-Instrut"})
    body = problem(response, 404)
    assert body["field"] == "model"
    assert body["suggestions"][0] == "llama-3.1-8b-instruct"


# ---- GPUs by name ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("h100", "h100-sxm-80gb"),  # a bare H100 is the SXM board (docs/names.md#gpus-by-name)
        ("H100", "h100-sxm-80gb"),
        ("H200", "h200-141gb"),
        ("mi300x", "mi300x"),
        ("a100", "a100-sxm-80gb"),  # the A100 of the most memory
        ("4090", "rtx-4090"),
        ("H100-SXM-80GB", "h100-sxm-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA L40S", "l40s"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA H100 PCIe", "h100-pcie-80gb"),
    ],
)
def test_a_gpu_by_short_name_or_device_name_answers_as_its_slug(
    client: TestClient, name: str, slug: str
) -> None:
    by_slug = _get(client, model="llama-3.1-8b", gpu=slug)
    by_name = _get(client, model="llama-3.1-8b", gpu=name)
    assert by_name == by_slug
    assert by_name["gpu"] == slug
    assert _post(client, model="llama-3.1-8b", gpu=name)["gpu"] == slug


def test_an_unknown_gpu_suggests_its_own_family_first(client: TestClient) -> None:
    body = problem(
        client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "h100-80gb"}), 404
    )
    assert body["field"] == "gpu"
    assert body["suggestions"][:3] == ["h100-sxm-80gb", "h100-pcie-80gb", "h100-nvl-94gb"]


def test_a_gpu_the_catalog_lacks_is_a_404(client: TestClient) -> None:
    # the catalog holds no MI350X (the air-cooled MI355X, which it holds): its nearest names are
    # the Instinct cards it holds, never an NVIDIA board first
    body = problem(
        client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "mi350x"}), 404
    )
    assert body["field"] == "gpu"
    assert set(body["suggestions"][:3]) <= {"mi355x", "mi325x", "mi300x", "mi250x"}
    assert len(body["suggestions"][:3]) == 3


def test_a_short_name_of_a_catalog_gpu_is_that_gpu(client: TestClient) -> None:
    # "5090", the issue's example: the catalog's one RTX 5090 (added with issue 20's GPUs)
    answer = client.get(
        "/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "5090", "max_model_len": 8192}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["gpu"] == "rtx-5090"


def test_a_short_name_two_boards_share_lists_them(client: TestClient) -> None:
    # "6000": the RTX 6000 Ada and the RTX PRO 6000 Blackwell; no rule says which one is meant
    body = problem(client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu": "6000"}), 404)
    assert body["field"] == "gpu"
    assert sorted(body["suggestions"]) == ["rtx-6000-ada", "rtx-pro-6000-blackwell-server"]


def test_plans_take_the_same_names(client: TestClient) -> None:
    response = client.post(
        "/v1/plans",
        json={
            "model": "meta-llama/Llama-3.1-8B",
            "gpus": ["h100", "NVIDIA L40S"],
            "max_model_len": 8192,
            "peak_concurrency": 10,
        },
    )
    assert response.status_code == 200, response.text
    plan = response.json()
    assert plan["model"] == "llama-3.1-8b"
    offered = {o["gpu"] for o in [plan["recommendation"], *plan["alternatives"]] if o}
    offered |= {r["gpu"] for r in plan["rejected"]}
    assert offered <= {"h100-sxm-80gb", "l40s"}
    got = client.get(
        "/v1/plans",
        params={
            "model": "meta-llama/Llama-3.1-8B",
            "gpus": "h100,NVIDIA L40S",
            "max_model_len": 8192,
            "peak_concurrency": 10,
        },
    )
    assert got.status_code == 200, got.text
    assert got.json()["recommendation"] == plan["recommendation"]


def test_pictures_take_the_same_names(client: TestClient) -> None:
    params = {**QUESTION, "format": "svg"}
    by_slug = client.get(
        "/v1/pictures/memory-budget",
        params={**params, "model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"},
    )
    by_name = client.get(
        "/v1/pictures/memory-budget",
        params={**params, "model": "meta-llama/Llama-3.1-8B", "gpu": "NVIDIA H100 80GB HBM3"},
    )
    assert by_slug.status_code == by_name.status_code == 200
    assert by_name.content == by_slug.content


def test_profiles_store_the_slugs_of_the_names_they_were_given(client: TestClient) -> None:
    response = client.post(
        "/v1/deployments",
        json={
            "name": "by-names",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "NVIDIA H100 80GB HBM3",
            **QUESTION,
        },
        headers=ADMIN,
    )
    assert response.status_code == 201, response.text
    assert (response.json()["model"], response.json()["gpu"]) == (
        "llama-3.1-8b-instruct",
        "h100-sxm-80gb",
    )
    listed = client.get(
        "/v1/deployments", params={"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "h100"}
    )
    assert listed.status_code == 200, listed.text
    assert [p["name"] for p in listed.json()["items"]] == ["by-names"]
    unknown = client.post(
        "/v1/deployments",
        json={"name": "by-unknown", "model": "llama-3.1-8b", "gpu": "h100-80gb"},
        headers=ADMIN,
    )
    body = problem(unknown, 422)
    assert (body["field"], body["suggestions"][0]) == ("gpu", "h100-sxm-80gb")


# ---- GPUs by their total ---------------------------------------------------------------------


def test_an_h100_total_from_a_one_gpu_job_is_the_h100(client: TestClient) -> None:
    # 79.18 GiB, the total 1xH100 HBM3 jobs print
    # (docs/catalog-sources.md#gpu-memory-as-torch-reports-it): round(79.18 x 2^30) =
    # 85,018,877,624 B. The catalog's H100 is 79.21 GiB =
    # 85,051,089,879 B: 32,212,255 B under, 32,212,255 / 85,051,089,879 = 0.038%. The A100's
    # 79.15 GiB is as near (32,212,254 B), but 79.18 is a total H100 logs print: the H100, and a
    # warning naming the A100.
    total = 85_018_877_624
    answer = _post(client, model="llama-3.1-8b", gpu={"memory_bytes": total})
    assert answer["gpu_recognised_as"] == "h100-sxm-80gb"
    note = answer["warnings"][0]
    assert "32,212,255 B (0.038%) under the catalog's 85,051,089,879 B" in note
    assert "a100-sxm-80gb" in note
    got = client.get(
        "/v1/capacity",
        params={**QUESTION, "model": "llama-3.1-8b", "gpu_memory_bytes": total},
    )
    assert got.status_code == 200
    assert got.json()["gpu_recognised_as"] == "h100-sxm-80gb"
    # the H100's engine defaults: vLLM's large tier (docs/engines/vllm.md#batch-defaults)
    by_name = _post(
        client, model="llama-3.1-8b", gpu={"memory_bytes": total, "name": "NVIDIA H100 80GB HBM3"}
    )
    assert answer["engine_settings"] == by_name["engine_settings"]
    assert answer["kv_pool_bytes"] == by_name["kv_pool_bytes"]


def test_the_h100_total_the_shared_logs_print_is_the_h100(client: TestClient) -> None:
    # jgchn/llm-d-planner's vLLM 0.19.0 logs (service/calibration/engine_logs.json) print
    # "79.19 GiB" for their NVIDIA H100 80GB HBM3: round(79.19 x 2^30) = 85,029,615,043 B
    answer = _post(client, model="llama-3.1-8b", gpu={"memory_bytes": 85_029_615_043})
    assert answer["gpu_recognised_as"] == "h100-sxm-80gb"


def test_an_a100_total_above_the_h100s_is_still_the_a100(client: TestClient) -> None:
    # 79.25 GiB, an HF Jobs a100-large log (service/catalog/data/gpus.json, the A100's
    # memory_source): round(79.25 x 2^30) = 85,094,039,552 B, nearer the H100's 79.21 GiB
    # than the A100's own 79.15, but a total A100 logs print. Over the catalog's
    # 84,986,665,370 B by 107,374,182 B = 0.126%.
    answer = _post(client, model="llama-3.1-8b", gpu={"memory_bytes": 85_094_039_552})
    assert answer["gpu_recognised_as"] == "a100-sxm-80gb"
    assert "107,374,182 B (0.126%) over" in answer["warnings"][0]
    settings = answer["engine_settings"]
    # the A100 keeps vLLM's small tier from 0.9.0 (docs/engines/vllm.md#batch-defaults)
    assert (settings["max_num_batched_tokens"], settings["max_num_seqs"]) == (2048, 256)


def test_an_l40s_total_a_log_prints_is_the_l40s(client: TestClient) -> None:
    # 44.42 GiB (service/catalog/data/gpus.json, the L40S's memory_source: "44.40/44.42
    # elsewhere"): round(44.42 x 2^30) = 47,695,611,822 B; the catalog's 44.39 GiB is
    # 47,663,399,567 B, 32,212,255 B under it (0.068%); no other GPU within 0.105 GiB.
    answer = _post(client, model="llama-3.1-8b", gpu={"memory_bytes": 47_695_611_822})
    assert answer["gpu_recognised_as"] == "l40s"
    note = answer["warnings"][0]
    assert "32,212,255 B (0.068%) over" in note
    assert "also report" not in note


def test_a_total_beyond_the_tolerance_is_no_catalog_gpu(client: TestClient) -> None:
    # 0.11 GiB above the L40S's 44.42 GiB: beyond the 0.105 GiB tolerance of every known total
    total = round(44.53 * GiB)
    answer = _post(client, model="llama-3.1-8b", gpu={"memory_bytes": total})
    assert answer["gpu_recognised_as"] is None
    assert "no catalog GPU reports" in answer["warnings"][0]


def test_a_total_under_one_gib_is_refused_with_the_bytes_it_likely_meant(
    client: TestClient,
) -> None:
    posted = problem(
        client.post("/v1/capacity", json={"model": "llama-3.1-8b", "gpu": {"memory_bytes": 80}}),
        422,
    )
    assert posted["field"] == "gpu.memory_bytes"
    assert "did you mean 80 GB = 80000000000 bytes?" in posted["detail"]
    got = problem(
        client.get("/v1/capacity", params={"model": "llama-3.1-8b", "gpu_memory_bytes": 80}),
        422,
    )
    assert got["field"] == "gpu_memory_bytes"
    assert "did you mean 80 GB = 80000000000 bytes?" in got["detail"]
    plan = problem(
        client.post(
            "/v1/plans",
            json={
                "model": "llama-3.1-8b",
                "gpus": ["h100", {"memory_bytes": 80}],
                "max_model_len": 8192,
                "peak_concurrency": 10,
            },
        ),
        422,
    )
    assert plan["field"] == "gpus.1.memory_bytes"


def test_the_catalog_totals_are_what_the_tests_assume() -> None:
    # the totals the arithmetic above starts from
    assert _catalog_bytes("h100-sxm-80gb") == round(79.21 * GiB) == 85_051_089_879
    assert _catalog_bytes("a100-sxm-80gb") == round(79.15 * GiB) == 84_986_665_370
    assert _catalog_bytes("l40s") == round(44.39 * GiB) == 47_663_399_567


def test_every_name_table_points_at_a_shipped_gpu() -> None:
    # service/catalog/names.py's tables name catalog slugs; a renamed entry must not go stale
    shipped = {g["slug"] for g in load_seed("gpus.json")}
    assert set(DEVICE_NAMES.values()) <= shipped
    assert set(FAMILY_DEFAULTS.values()) <= shipped
    assert set(LOGGED_TOTALS_GIB) <= shipped
