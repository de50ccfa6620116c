"""No input produces a 500: random queries and bodies against every sizing endpoint.

The generators mix plausible values (catalog slugs, real flags) with hostile ones (huge and
negative numbers, wrong types, NUL bytes), so most draws reach the arithmetic rather than
stopping at the first validator.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SLUGS = ["llama-3.1-8b", "qwen3.5-27b", "deepseek-v3.2", "gpt-oss-120b", "gemma-3-27b-it", "x"]
GPUS = ["h100-sxm-80gb", "l4", "mi300x", "rtx-3090", "nope"]
HOSTILE_TEXT = st.sampled_from(["", "\x00", "NaN", "-1", "1e999", "0.5", "auto", "fp8", "🙂" * 3])
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 16, 8192, 131_072, 10_000_000, 10_000_001]),
)
VALUE = st.one_of(NUMBERS, HOSTILE_TEXT, st.booleans())

QUERY_FIELDS: dict[str, Any] = {
    "model": st.one_of(st.sampled_from(SLUGS), HOSTILE_TEXT),
    "gpu": st.one_of(st.sampled_from(GPUS), HOSTILE_TEXT),
    "gpu_memory_bytes": NUMBERS,
    "max_model_len": NUMBERS,
    "kv_cache_dtype": st.sampled_from(["auto", "fp8", "bf16", "fp4", "fp8_e5m2", "float32"]),
    "tensor_parallel_size": st.one_of(st.integers(-2, 70), VALUE),
    "pipeline_parallel_size": st.one_of(st.integers(-2, 70), VALUE),
    "data_parallel_size": NUMBERS,
    "engine": st.sampled_from(["vllm", "sglang", "trtllm", "tgi"]),
    "engine_version": st.sampled_from(["0.6.4", "0.9.2", "0.10.2", "0.11.0", "0.33.0", "9.9", "x"]),
    "gpu_memory_utilization": NUMBERS,
    "max_num_batched_tokens": NUMBERS,
    "max_num_seqs": NUMBERS,
    "block_size": NUMBERS,
    "enable_prefix_caching": VALUE,
    "kv_pool_bytes": NUMBERS,
    "peak_concurrency": NUMBERS,
    "field": st.sampled_from(["max_num_seqs", "kv_pool_bytes", "nope"]),
    "format": st.sampled_from(["json", "csv", "text", "xml"]),
}


def _finite(value: Any) -> Any:
    # JSON has no NaN or infinity; the raw-body test below sends those as text.
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return 1e308
    return value


# Values the arithmetic accepts, so that most draws get past validation and exercise it.
PLAUSIBLE: dict[str, Any] = {
    "model": st.sampled_from(SLUGS[:-1]),
    "gpu": st.sampled_from(GPUS[:-1]),
    "max_model_len": st.integers(1, 2_000_000),
    "kv_cache_dtype": st.sampled_from(["auto", "fp8", "bf16", "fp8_e5m2"]),
    "tensor_parallel_size": st.sampled_from([1, 2, 4, 8]),
    "pipeline_parallel_size": st.sampled_from([1, 2, 3]),
    "engine": st.sampled_from(["vllm", "sglang", "trtllm"]),
    "engine_version": st.sampled_from(["0.6.4", "0.8.5", "0.10.2", "0.11.0", "0.21.0", "0.33.0"]),
    "gpu_memory_utilization": st.floats(0.01, 1.0),
    "max_num_batched_tokens": st.integers(1, 100_000),
    "max_num_seqs": st.integers(1, 4096),
    "block_size": st.sampled_from([1, 8, 16, 32, 64, 128, 1000]),
    "enable_prefix_caching": st.booleans(),
    "kv_pool_bytes": st.integers(0, 2**40),
    "peak_concurrency": st.integers(1, 100_000),
}


def _params(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        names = draw(st.sets(st.sampled_from(sorted(PLAUSIBLE)), max_size=8))
        chosen = {name: draw(PLAUSIBLE[name]) for name in {"model", "gpu", *names}}
        # at most one hostile field among plausible ones
        if draw(st.booleans()):
            name = draw(st.sampled_from(sorted(QUERY_FIELDS)))
            chosen[name] = draw(QUERY_FIELDS[name])
        return chosen
    names = draw(st.sets(st.sampled_from(sorted(QUERY_FIELDS)), max_size=8))
    chosen = {"model": draw(QUERY_FIELDS["model"]), "gpu": draw(QUERY_FIELDS["gpu"])}
    chosen.update({name: draw(QUERY_FIELDS[name]) for name in names})
    return chosen


@st.composite
def queries(draw: st.DrawFn) -> dict[str, str]:
    return {k: str(v) for k, v in _params(draw).items()}


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = {k: _finite(v) for k, v in _params(draw).items()}
    body.pop("format", None)
    body.pop("field", None)
    if draw(st.booleans()):
        body["gpu"] = {"memory_bytes": _finite(draw(NUMBERS)), "name": draw(HOSTILE_TEXT)}
    if draw(st.booleans()):
        body["model"] = {
            "hf_config": draw(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "model_type",
                            "num_hidden_layers",
                            "num_attention_heads",
                            "num_key_value_heads",
                            "hidden_size",
                            "head_dim",
                            "sliding_window",
                            "layer_types",
                            "kv_lora_rank",
                        ]
                    ),
                    st.one_of(
                        VALUE.map(_finite), st.sampled_from(["llama", "qwen3_next", "deepseek_v3"])
                    ),
                    max_size=8,
                )
            )
        }
    return body


FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(params=queries())
def test_get_capacity_never_answers_500(client: TestClient, params: dict[str, str]) -> None:
    response = client.get("/v1/capacity", params=params)
    assert response.status_code < 500, (params, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith("application/problem+json")


@FUZZ
@given(body=bodies())
def test_post_capacity_never_answers_500(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post("/v1/capacity", json=body)
    assert response.status_code < 500, (body, response.text)


@FUZZ
@given(body=bodies(), peak=st.one_of(st.integers(1, 10_000), NUMBERS))
def test_post_plans_never_answers_500(client: TestClient, body: dict[str, Any], peak: Any) -> None:
    body = {**body, "peak_concurrency": _finite(peak)}
    body.pop("gpu", None)
    body.setdefault("max_model_len", 8192)
    response = client.post("/v1/plans", json=body)
    assert response.status_code < 500, (body, response.text)


@pytest.mark.parametrize(
    "raw",
    [b"", b"null", b"[]", b'"text"', b"{", b'{"model": {}}', b"\xff\xfe", b'{"model": 1e999}'],
)
def test_odd_bodies_are_422_not_500(client: TestClient, raw: bytes) -> None:
    for path in ("/v1/capacity", "/v1/plans"):
        response = client.post(path, content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 422, (path, raw, response.text)
