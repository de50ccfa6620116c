"""Speed in the capacity answers: decode_ms_per_token, output_tokens_per_second, prefill_ms.

Each expected figure is worked by hand from the performance model's formulas
(service/sizing/speed/performance.py): one pass costs, on each GPU of the tensor-parallel group,

    memory  = bytes read / (peak bandwidth x FITTED.bandwidth)
    compute = FLOPs / (peak FLOPS x FITTED.compute)
    link    = all-reduces x (2 (tp - 1) / tp x message / link + FITTED.allreduce_latency_us)
    time    = larger + (1 - FITTED.overlap) x smaller + link + FITTED.step_overhead_ms
              + layers x FITTED.layer_overhead_us

(the models here are bf16: their linear layers and attention share the BF16 peak and
FITTED.compute), with the bytes and FLOPs worked out below from the catalog's figures:
llama-3.1-8b has 8,030,261,248 parameters in 16,060,522,496 B of bf16 weights, 32 layers of 8
KV heads x 128, 32 attention heads; llama-3.1-70b 70,553,706,496 parameters (bf16:
141,107,412,992 B), 80 layers of 8 KV heads x 128, 64 heads, hidden 8192
(service/catalog/data/models.json). H100 SXM: 3.35 TB/s, 989 dense BF16 TFLOPS, 450 GB/s link
(service/catalog/data/gpus.json; performance.py LINK_GB_S). The efficiencies are the shipped
fit, read from FITTED, so the arithmetic holds whatever the fit gives.

The batch comes from a pool given in blocks: worked example A of
../shared/design/engine-memory.md (vLLM, 16-token blocks of 2 MiB for Llama-3.1-8B in bf16).
"""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from service.sizing.speed.performance import ERROR_BAND_BY_CLASS, FITTED, FITTED_AMD
from tests.conftest import ADMIN
from tests.helpers import problem

MiB = 1 << 20
H100_BYTES_PER_S = 3.35e12
H100_FLOPS = 989e12
H100_LINK = 450e9

# 28,006 blocks of 2 MiB; a sequence of 8,192 tokens is 512 blocks; vLLM hands out all but
# the null block: (28,006 - 1) // 512 = 54 sequences per replica.
POOL_8B = 28_006 * 2 * MiB
BASE_8B = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "kv_pool_bytes": POOL_8B,
    "engine_version": "0.20.0",
}
WEIGHTS_8B = 16_060_522_496
# KV of one token: 32 layers x 8 heads x (128 + 128) x 2 B = 131,072 B; 8,192 tokens: 1 GiB.
KV_SEQUENCE_8B = 131_072 * 8192
# FLOPs of one new token at 8,192 tokens of context: 2 x 8,030,261,248 = 16,060,522,496 for
# the weights, plus attention 32 layers x 8,192 cached x 2 x 32 heads x (128 + 128) =
# 4,294,967,296: 20,355,489,792.
FLOPS_TOKEN_8B = 16_060_522_496 + 4_294_967_296


def overhead_ms(layers: int) -> float:
    return FITTED.step_overhead_ms + layers * FITTED.layer_overhead_us / 1e3


def pass_ms(bytes_read: int, flops: int, link_ms: float = 0.0, layers: int = 32) -> float:
    memory = bytes_read / (H100_BYTES_PER_S * FITTED.bandwidth) * 1e3
    compute = flops / (H100_FLOPS * FITTED.compute) * 1e3
    larger, smaller = max(memory, compute), min(memory, compute)
    return larger + (1 - FITTED.overlap) * smaller + link_ms + overhead_ms(layers)


def decode_8b_ms(batch: int) -> float:
    return pass_ms(WEIGHTS_8B + batch * KV_SEQUENCE_8B, batch * FLOPS_TOKEN_8B)


def test_decode_at_max_num_seqs_is_one_step_of_the_whole_batch(client: TestClient) -> None:
    answer = client.post("/v1/capacity", json=BASE_8B).json()
    assert answer["max_num_seqs"] == 54
    # 16,060,522,496 B weights + 54 x 1,073,741,824 B KV = 74,042,580,992 B; 54 x
    # 20,355,489,792 = 1,099,196,448,768 FLOPs. With the shipped fit (bandwidth 0.84, compute
    # 0.787, overlap 0, 0 ms + 32 layers x 80.25 us): 26.312 + 1.412 + 2.568 = 30.29 ms;
    # 54 x 1000 / 30.29 = 1,783 tokens/s.
    expected = decode_8b_ms(54)
    assert answer["decode_ms_per_token"] == pytest.approx(expected, abs=1e-3)
    assert answer["output_tokens_per_second"] == pytest.approx(54_000 / expected, abs=0.1)
    assert answer["performance_bound"] == "bandwidth"
    # Llama-3.1-8B on an H100 is an "NVIDIA dense" answer: that class's held-out band.
    assert answer["performance_error_band"] == ERROR_BAND_BY_CLASS["NVIDIA dense"] == 0.2
    decode = answer["explanation"]["performance"]["decode"]
    assert (decode["tokens"], decode["weight_bytes"]) == (54, WEIGHTS_8B)
    assert decode["kv_bytes"] == 54 * KV_SEQUENCE_8B == 57_982_058_496
    assert decode["flops"] == 54 * FLOPS_TOKEN_8B == 1_099_196_448_768


def test_prefill_is_one_prompt_of_max_model_len_or_of_avg_prompt_tokens(
    client: TestClient,
) -> None:
    # 8,192 tokens: 2 x 8,030,261,248 x 8,192 = 131,567,800,287,232 FLOPs for the weights, and
    # causal attention 8,192 x 8,193 / 2 = 33,558,528 pairs per layer x 32 layers x 16,384
    # FLOPs a pair = 17,594,333,528,064: 149,162,133,815,296 FLOPs; the weights read once.
    full = client.post("/v1/capacity", json=BASE_8B).json()
    flops_8192 = 131_567_800_287_232 + 33_558_528 * 32 * 16_384
    assert flops_8192 == 149_162_133_815_296
    assert full["prefill_ms"] == pytest.approx(pass_ms(WEIGHTS_8B, flops_8192), abs=1e-3)
    # 2,048 tokens: 16,060,522,496 x 2,048 = 32,891,950,071,808, plus 2,048 x 2,049 / 2 =
    # 2,098,176 pairs x 32 x 16,384 = 1,100,048,498,688: 33,991,998,570,496
    # (43.67 ms of compute at the shipped fit + 5.71 ms of reading + 2.57 ms = 51.9 ms).
    short = client.post("/v1/capacity", json={**BASE_8B, "avg_prompt_tokens": 2048}).json()
    flops_2048 = 2 * 8_030_261_248 * 2048 + 2048 * 2049 // 2 * 32 * 16_384
    assert flops_2048 == 33_991_998_570_496
    assert short["prefill_ms"] == pytest.approx(pass_ms(WEIGHTS_8B, flops_2048), abs=1e-3)
    assert short["explanation"]["performance"]["prefill"]["tokens"] == 2048
    # the prompt's length changes the prefill, never the decode
    assert short["decode_ms_per_token"] == full["decode_ms_per_token"]


def test_at_the_peak_each_replica_decodes_its_share(client: TestClient) -> None:
    # 100 at the peak over replicas of 54: ceil(100 / 54) = 2 replicas, ceil(100 / 2) = 50 each
    answer = client.post("/v1/capacity", json={**BASE_8B, "peak_concurrency": 100}).json()
    assert answer["replicas_for_peak_concurrency"] == 2
    assert answer["decode_ms_per_token_at_peak"] == pytest.approx(decode_8b_ms(50), abs=1e-3)
    assert answer["explanation"]["performance"]["decode_at_peak"]["tokens"] == 50
    assert answer["decode_ms_per_token_at_peak"] < answer["decode_ms_per_token"]
    without = client.post("/v1/capacity", json=BASE_8B).json()
    assert without["decode_ms_per_token_at_peak"] is None


def test_tensor_parallel_decode_adds_the_all_reduces(client: TestClient) -> None:
    # Llama-3.1-70B at TP 4: KV per token per GPU is 80 layers x 2 heads x 256 x 2 B = 81,920 B,
    # a 16-token block 1,310,720 B. A pool of 32 x 256 + 1 = 8,193 blocks holds
    # (8,193 - 1) // 256 = 32 sequences of 4,096 tokens.
    body = {
        "model": "llama-3.1-70b",
        "gpu": "h100-sxm-80gb",
        "tensor_parallel_size": 4,
        "max_model_len": 4096,
        "kv_pool_bytes": 8193 * 1_310_720,
        "engine_version": "0.20.0",
    }
    answer = client.post("/v1/capacity", json=body).json()
    assert answer["max_num_seqs"] == 32
    # per GPU: weights 141,107,412,992 / 4 = 35,276,853,248 B; KV 32 x 4,096 x 81,920 =
    # 10,737,418,240 B; FLOPs (2 x 70,553,706,496 + 80 x 4,096 x 2 x 64 x 256) x 32 / 4 =
    # (141,107,412,992 + 10,737,418,240) x 8 = 1,214,758,649,856.
    # Link: 80 layers x 2 = 160 all-reduces of 32 tokens x 8,192 x 2 B = 524,288 B, each
    # 2 x 3/4 x 524,288 / 450e9 s + FITTED.allreduce_latency_us.
    link_ms = 160 * (1.5 * 524_288 / H100_LINK * 1e3 + FITTED.allreduce_latency_us / 1e3)
    expected = pass_ms(35_276_853_248 + 10_737_418_240, 1_214_758_649_856, link_ms, layers=80)
    assert answer["decode_ms_per_token"] == pytest.approx(expected, abs=1e-3)
    decode = answer["explanation"]["performance"]["decode"]
    assert decode["weight_bytes"] == 35_276_853_248
    assert decode["kv_bytes"] == 10_737_418_240
    assert decode["flops"] == 1_214_758_649_856
    assert decode["interconnect_ms"] == pytest.approx(link_ms, abs=1e-3)


def test_an_inline_gpu_with_the_catalogs_figures_gets_the_same_speed(client: TestClient) -> None:
    catalog = client.post("/v1/capacity", json=BASE_8B).json()
    h100 = client.get("/v1/gpus/h100-sxm-80gb").json()
    inline = {
        "memory_bytes": h100["memory_bytes"],
        "name": "my H100",
        "memory_bandwidth_tb_s": 3.35,
        "dense_bf16_tflops": 989,
    }
    answer = client.post("/v1/capacity", json={**BASE_8B, "gpu": inline}).json()
    assert answer["decode_ms_per_token"] == catalog["decode_ms_per_token"]
    assert answer["prefill_ms"] == catalog["prefill_ms"]
    # half the bandwidth: only the memory term doubles
    slower = {**inline, "memory_bandwidth_tb_s": 1.675}
    answer = client.post("/v1/capacity", json={**BASE_8B, "gpu": slower}).json()
    memory = (WEIGHTS_8B + 54 * KV_SEQUENCE_8B) / (H100_BYTES_PER_S * FITTED.bandwidth) * 1e3
    assert answer["decode_ms_per_token"] == pytest.approx(
        decode_8b_ms(54) + memory * (2 - 1), abs=1e-3
    )


@pytest.mark.parametrize(
    ("gpu", "tp", "missing"),
    [
        # every shipped GPU has the figures (tests/catalog/test_gpu_prices.py); a caller's own
        # GPU written without one of them has no estimate
        ("ours-no-bandwidth", 1, "memory_bandwidth_tb_s"),
        ("ours-no-flops", 1, "dense_bf16_tflops"),
    ],
)
def test_a_gpu_without_the_figures_answers_null_and_says_why(
    client: TestClient, gpu: str, tp: int, missing: str
) -> None:
    h100 = client.get("/v1/gpus/h100-sxm-80gb").json()
    figures = {"memory_bandwidth_tb_s": 3.35, "dense_bf16_tflops": 989}
    del figures[missing]
    written = client.post(
        "/v1/gpus",
        json={"slug": gpu, "name": gpu, "memory_bytes": h100["memory_bytes"], **figures},
        headers=ADMIN,
    )
    assert written.status_code == 201, written.text
    params = {
        "model": "llama-3.1-8b",
        "gpu": gpu,
        "max_model_len": 4096,
        "tensor_parallel_size": tp,
    }
    response = client.get("/v1/capacity", params=params)
    assert response.status_code == 200, response.text
    answer = response.json()
    for name in (
        "decode_ms_per_token",
        "output_tokens_per_second",
        "prefill_ms",
        "performance_bound",
        "performance_error_band",
    ):
        assert answer[name] is None, name
    detail = client.post("/v1/capacity", json=params).json()
    assert detail["explanation"]["performance"] is None
    (warning,) = [w for w in detail["warnings"] if "decode_ms_per_token" in w]
    assert f"{gpu} has no {missing} figure" in warning


def test_tensor_parallelism_on_a_gpu_without_a_link_figure_answers_null_and_says_why(
    client: TestClient,
) -> None:
    # an inline GPU with an H100's memory, bandwidth and FLOPS but no interconnect_gb_s
    memory = client.get("/v1/gpus/h100-sxm-80gb").json()["memory_bytes"]
    gpu = {"memory_bytes": memory, "memory_bandwidth_tb_s": 3.35, "dense_bf16_tflops": 989}
    body = {"model": "llama-3.1-8b", "gpu": gpu, "max_model_len": 4096}
    alone = client.post("/v1/capacity", json=body).json()
    assert alone["decode_ms_per_token"] is not None
    split = client.post("/v1/capacity", json={**body, "tensor_parallel_size": 2}).json()
    assert split["decode_ms_per_token"] is None
    (warning,) = [w for w in split["warnings"] if "decode_ms_per_token" in w]
    assert "interconnect_gb_s" in warning


def test_mi300x_tensor_parallelism_runs_over_its_infinity_fabric(client: TestClient) -> None:
    # MI300X (service/catalog/data/gpus.json): 5.3 TB/s, 1,307.4 dense BF16 TFLOPS, and
    # performance.py LINK_GB_S 448 GB/s one way (7 xGMI links x 64 GB/s). Llama-3.1-70B at
    # TP 4 with the pool of test_tensor_parallel_decode_adds_the_all_reduces: 32 sequences of
    # 4,096 tokens; the same bytes and FLOPs per GPU, and 160 all-reduces of 524,288 B, each
    # 2 x 3/4 x 524,288 / 448e9 s + FITTED_AMD.allreduce_latency_us. An AMD GPU is timed with
    # FITTED_AMD (bandwidth 0.385; compute 0.787, 0 us a link, overlap 0, 0 ms + 80.25 us a
    # layer as FITTED): memory 46,014,271,488 B / (5.3e12 x 0.385) = 22.550 ms, compute
    # 1,214,758,649,856 / (1307.4e12 x 0.787) = 1.181 ms, link 160 x (0.001755 + 0) = 0.281
    # ms, 80 layers x 80.25 us = 6.420 ms; 22.550 + 1.181 + 0.281 + 6.420 = 30.432 ms.
    body = {
        "model": "llama-3.1-70b",
        "gpu": "mi300x",
        "tensor_parallel_size": 4,
        "max_model_len": 4096,
        "kv_pool_bytes": 8193 * 1_310_720,
        "engine_version": "0.20.0",
    }
    answer = client.post("/v1/capacity", json=body).json()
    assert answer["max_num_seqs"] == 32
    link_ms = 160 * (1.5 * 524_288 / 448e9 * 1e3 + FITTED_AMD.allreduce_latency_us / 1e3)
    memory = (35_276_853_248 + 10_737_418_240) / (5.3e12 * FITTED_AMD.bandwidth) * 1e3
    compute = 1_214_758_649_856 / (1307.4e12 * FITTED_AMD.compute) * 1e3
    larger, smaller = max(memory, compute), min(memory, compute)
    overhead = FITTED_AMD.step_overhead_ms + 80 * FITTED_AMD.layer_overhead_us / 1e3
    expected = larger + (1 - FITTED_AMD.overlap) * smaller + link_ms + overhead
    assert answer["decode_ms_per_token"] == pytest.approx(expected, abs=1e-3)
    assert expected == pytest.approx(30.432, abs=1e-3)
    assert answer["explanation"]["performance"]["decode"]["interconnect_ms"] == pytest.approx(
        link_ms, abs=1e-3
    )


def test_a_gpu_given_by_its_memory_alone_has_no_speed(client: TestClient) -> None:
    h100 = client.get("/v1/gpus/h100-sxm-80gb").json()
    params = {"model": "llama-3.1-8b", "gpu_memory_bytes": h100["memory_bytes"]}
    answer = client.post(
        "/v1/capacity", json={"model": "llama-3.1-8b", "gpu": {"memory_bytes": 10**11}}
    ).json()
    assert answer["decode_ms_per_token"] is None
    assert any("memory_bandwidth_tb_s and no dense_bf16_tflops" in w for w in answer["warnings"])
    assert client.get("/v1/capacity", params=params).json()["decode_ms_per_token"] is None


def test_the_speed_figures_are_table_columns_and_single_values(client: TestClient) -> None:
    params = dict(BASE_8B)
    table = client.get("/v1/capacity", params={**params, "format": "csv"}).text
    (row,) = csv.DictReader(io.StringIO(table))
    as_json = client.get("/v1/capacity", params=params).json()
    for name in ("decode_ms_per_token", "output_tokens_per_second", "prefill_ms"):
        assert float(row[name]) == as_json[name]
        text = client.get("/v1/capacity", params={**params, "field": name}).text
        assert float(text) == as_json[name]
    assert row["performance_bound"] == "bandwidth"
    exposition = client.get("/v1/capacity", params={**params, "format": "prometheus"}).text
    assert "kvplan_capacity_decode_ms_per_token{" in exposition


def test_a_prompt_longer_than_the_context_is_a_422_naming_it(client: TestClient) -> None:
    response = client.post("/v1/capacity", json={**BASE_8B, "avg_prompt_tokens": 8193})
    assert problem(response, 422)["field"] == "avg_prompt_tokens"
    params = {**BASE_8B, "avg_prompt_tokens": 9000}
    assert problem(client.get("/v1/capacity", params=params), 422)["field"] == ("avg_prompt_tokens")


def test_the_explanation_shows_the_arithmetic(client: TestClient) -> None:
    performance = client.post("/v1/capacity", json=BASE_8B).json()["explanation"]["performance"]
    assert performance["context_tokens"] == 8192
    assert performance["efficiency"]["bandwidth"] == FITTED.bandwidth
    lines = performance["arithmetic"]
    assert lines[0] == "decode step at 54 sequences:"
    # 16,060,522,496 + 57,982,058,496 = 74,042,580,992 B
    assert (
        "  bytes read per GPU: 16,060,522,496 B weights + 57,982,058,496 B cache = 74,042,580,992 B"
    ) in lines
    assert any(line.startswith("error band: +/-") for line in lines)
