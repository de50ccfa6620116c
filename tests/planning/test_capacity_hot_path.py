"""GET /v1/capacity answered before FastAPI is reached (`planning.hot_path.CapacityHotPath`).

A repeated question is answered from its bytes, a new valid one from the use case; everything
FastAPI checks must hold all the same: read keys, misspelt and invalid parameters, Accept,
conditional requests, security headers, the stale mark, the metrics. Each answer from the hot
path is compared with the one FastAPI gives for the same question.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import sessionmaker

from service.app import create_app
from service.catalog.seed import offline_snapshot
from service.kit.db import Database
from service.kit.deps import _query_names
from service.planning import hot_path, service
from service.planning.cache import CapacityKey, EncodedAnswer, EncodedAnswers
from service.planning.hot_path import DECLARED, PATH
from service.planning.router import _ANSWER_FIELDS, _answer_json
from service.planning.router import router as planning_router
from service.planning.schemas import CapacityQuery
from tests.catalog.test_stale_reads import cut
from tests.conftest import ADMIN, make_settings
from tests.helpers import problem
from tests.planning.conftest import KeyedClient

QUESTION = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
# The same question: other order, defaults spelt out (tensor_parallel_size 1, engine vllm,
# kv_cache_dtype auto, enforce_eager false in another spelling), and parameters kvplan ignores
# (the read key, a spreadsheet's cache-buster, an unknown name no declared one is close to).
RESPELT = (
    "max_model_len=8192&_=123&engine=vllm&gpu=h100-sxm-80gb&tensor_parallel_size=1"
    "&api_key=anything&kv_cache_dtype=auto&enforce_eager=False&nocache=1&model=llama-3.1-8b"
)
HEADERS_COMPARED = ("content-type", "content-length", "etag", "cache-control", "vary")


def encoded(client: TestClient) -> EncodedAnswers:
    answers: EncodedAnswers = client.app.state.capacity_encoded  # type: ignore[attr-defined]
    return answers


def same_answer(first: httpx.Response, again: httpx.Response) -> None:
    assert again.status_code == first.status_code
    assert again.content == first.content
    for name in HEADERS_COMPARED:
        assert again.headers.get(name) == first.headers.get(name), name


def test_two_spellings_of_one_question_share_one_cache_entry(client: TestClient) -> None:
    first = client.get(PATH, params=QUESTION)
    assert first.status_code == 200, first.text
    assert len(encoded(client)) == 1
    assert encoded(client).hits == 0
    again = client.get(f"{PATH}?{RESPELT}")
    same_answer(first, again)
    assert len(encoded(client)) == 1  # one entry, whichever spelling asked
    assert encoded(client).hits == 1  # and the second spelling was answered from it


def test_a_poller_is_answered_from_its_own_words_from_the_third_ask_on(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A spelling is remembered when its question is asked again (most questions are asked
    # once); from then on the raw query string finds the answer without being parsed.
    parsed: list[bytes] = []
    real = hot_path.canonical

    def counting(query_string: bytes, accept: str | None) -> Any:
        parsed.append(query_string)
        return real(query_string, accept)

    monkeypatch.setattr(hot_path, "canonical", counting)
    answers = [client.get(f"{PATH}?{RESPELT}") for _ in range(4)]
    assert {a.status_code for a in answers} == {200}
    assert len({a.content for a in answers}) == 1
    assert len(parsed) == 2  # the first ask (computed) and the second (found, remembered)
    assert encoded(client).hits == 3


def test_every_query_field_can_be_part_of_the_key() -> None:
    # CapacityKey is the validated values themselves; one that could not be hashed (a list
    # field other than max_attention_window, which it turns into a tuple) would fail every
    # question that sets it. Each field set here, each to a value validation accepts.
    every = {
        "engine": "vllm", "engine_version": "0.10.1.1", "gpu_memory_utilization": "0.9",
        "mem_fraction_static": "0.8", "free_gpu_memory_fraction": "0.9",
        "max_num_batched_tokens": "8192", "max_num_seqs": "256", "block_size": "16",
        "enable_prefix_caching": "true", "enforce_eager": "true",
        "cudagraph_memory_bytes": "1", "kv_pool_bytes": "1", "num_gpu_blocks_override": "1",
        "mamba_ssm_cache_dtype": "float32", "disable_hybrid_kv_cache_manager": "true",
        "swa_full_tokens_ratio": "0.5", "mamba_full_memory_ratio": "0.5",
        "max_mamba_cache_size": "1", "max_attention_window": ["4096", "8192"],
        "weight_format": "fp8", "model": "llama-3.1-8b", "gpu": "h100-sxm-80gb",
        "gpu_memory_bytes": "1", "max_model_len": "8192", "kv_cache_dtype": "fp8",
        "tensor_parallel_size": "2", "pipeline_parallel_size": "2", "data_parallel_size": "2",
        "peak_concurrency": "9", "avg_prompt_tokens": "9", "format": "csv",
        "field": "max_num_seqs", "dtype": "half", "allow_long_max_model_len": "true",
        # issue 21: KV tiers beyond HBM
        "kv_offloading_size": "100", "kv_offloading_backend": "native",
        "enable_hierarchical_cache": "true", "hicache_ratio": "2", "hicache_size": "10",
        "cpu_offload_gb": "4",
        "lmcache_max_local_cpu_size": "5", "lmcache_max_local_disk_size": "100",
        "lmcache_chunk_size": "256", "lmcache_local_cpu": "true", "lmcache_version": "0.5.6",
        "disable_custom_all_reduce": "true", "engine_rules_version": "0.10.1",
        # issue 21: expert parallelism
        "enable_expert_parallel": "true", "num_redundant_experts": "8", "enable_eplb": "true",
        "decode_context_parallel_size": "2", "all2all_backend": "deepep_low_latency",
        # issue 21: a JSON object (keyed by its canonical text) and the LoRA flags
        "speculative_config": '{"method": "ngram", "num_speculative_tokens": 2}',
        "enable_lora": "true", "max_loras": "2", "max_lora_rank": "8", "lora_dtype": "auto",
        "max_cpu_loras": "4", "fully_sharded_loras": "true",
        "max_loras_per_batch": "4", "lora_target_modules": "q_proj v_proj",
        "speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "a",
        "speculative_num_steps": "3", "speculative_eagle_topk": "1",
        "speculative_num_draft_tokens": "4",
        # issue 21: multimodal encoders
        "limit_mm_per_prompt": '{"image": 2}', "skip_mm_profiling": "true",
        # issue 21: SGLang's DP attention and expert parallelism
        "enable_dp_attention": "true", "attn_dp_size": "2", "ep_size": "2",
        "ep_num_redundant_experts": "8", "enable_dp_lm_head": "true", "moe_dense_tp_size": "1",
        "moe_a2a_backend": "deepep", "deepep_mode": "low_latency",
        # issue 21: speculative decoding's measured acceptance length
        "acceptance_length": "1.5",
    }  # fmt: skip
    query = CapacityQuery.model_validate(every)
    assert set(every) == set(CapacityQuery.model_fields)  # a field added must be added here
    assert hash(CapacityKey.of(query, "csv")) == hash(CapacityKey.of(query, "csv"))
    other = CapacityQuery.model_validate({**every, "max_attention_window": ["4096"]})
    assert CapacityKey.of(other, "csv") != CapacityKey.of(query, "csv")
    # one speculative config, spelt with its keys in another order: one question
    reordered = CapacityQuery.model_validate(
        {**every, "speculative_config": '{"num_speculative_tokens": 2, "method": "ngram"}'}
    )
    assert CapacityKey.of(reordered, "csv") == CapacityKey.of(query, "csv")


def test_the_format_is_part_of_the_question(client: TestClient) -> None:
    asked: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({}, {}),
        ({"format": "csv"}, {}),
        ({}, {"Accept": "text/csv"}),
        ({}, {"Accept": "text/tab-separated-values"}),
        ({"format": "text"}, {}),
        ({"field": "kv_cache_tokens"}, {}),
        ({"format": "prometheus"}, {}),
    ]
    firsts = [client.get(PATH, params={**QUESTION, **p}, headers=h) for p, h in asked]
    assert all(r.status_code == 200 for r in firsts)
    # csv by format= and by Accept are one answer; every other is its own
    assert len(encoded(client)) == len(asked) - 1
    assert len({r.content for r in firsts}) == len(asked) - 1
    hits = encoded(client).hits
    for (params, headers), first in zip(asked, firsts, strict=True):
        same_answer(first, client.get(PATH, params={**QUESTION, **params}, headers=headers))
    assert encoded(client).hits == hits + len(asked)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"max_model_length": "4096"}, "max_model_length"),  # a near-miss of a declared name
        ({"tensor_parallel_size": "two"}, "tensor_parallel_size"),  # an invalid value
        ({"format": "xml"}, "format"),
    ],
)
def test_a_question_fastapi_refuses_is_refused_though_its_neighbour_is_cached(
    client: TestClient, extra: dict[str, str], field: str
) -> None:
    assert client.get(PATH, params=QUESTION).status_code == 200
    body = problem(client.get(PATH, params={**QUESTION, **extra}), 422)
    assert field in (body.get("field") or "") + body["detail"]


def test_an_accept_it_cannot_answer_is_406_though_the_question_is_cached(
    client: TestClient,
) -> None:
    assert client.get(PATH, params=QUESTION).status_code == 200
    problem(client.get(PATH, params=QUESTION, headers={"Accept": "image/png"}), 406)


def test_a_cached_answer_revalidates_to_a_304(client: TestClient) -> None:
    first = client.get(PATH, params=QUESTION)
    hits = encoded(client).hits
    revalidated = client.get(
        PATH, params=QUESTION, headers={"If-None-Match": first.headers["etag"]}
    )
    assert revalidated.status_code == 304
    assert revalidated.content == b""
    assert revalidated.headers["etag"] == first.headers["etag"]
    assert revalidated.headers["cache-control"] == first.headers["cache-control"]
    assert encoded(client).hits == hits + 1
    stale_tag = client.get(PATH, params=QUESTION, headers={"If-None-Match": '"0.0-0"'})
    same_answer(first, stale_tag)


def test_a_cached_answer_carries_the_security_headers(client: TestClient) -> None:
    client.get(PATH, params=QUESTION)
    again = client.get(PATH, params=QUESTION)
    assert encoded(client).hits == 1
    assert again.headers["x-content-type-options"] == "nosniff"
    assert again.headers["content-security-policy"].startswith("default-src 'none'")
    assert again.headers["x-frame-options"] == "DENY"
    assert again.headers["referrer-policy"] == "no-referrer"


def test_a_cached_answer_needs_the_read_key(keyed_client: KeyedClient) -> None:
    key = "hot-path-key-19c2"
    with keyed_client(key) as keyed:
        first = keyed.get(PATH, params={**QUESTION, "api_key": key})
        assert first.status_code == 200, first.text
        assert len(encoded(keyed)) == 1
        # the question is cached; a caller without the key, or with a wrong one, never sees it
        problem(keyed.get(PATH, params=QUESTION), 401)
        problem(keyed.get(PATH, params={**QUESTION, "api_key": "wrong"}), 401)
        problem(keyed.get(PATH, params=QUESTION, headers={"X-API-KEY": "wrong"}), 401)
        problem(keyed.get(PATH, params=QUESTION, headers={"Authorization": "Bearer wrong"}), 401)
        assert encoded(keyed).hits == 0
        for presented in ({"X-API-KEY": key}, {"Authorization": f"Bearer {key}"}, ADMIN):
            same_answer(first, keyed.get(PATH, params=QUESTION, headers=presented))
        assert encoded(keyed).hits == 3


def test_a_cached_answer_from_a_stale_catalog_says_so(app: FastAPI, client: TestClient) -> None:
    first = client.get(PATH, params=QUESTION)
    assert "kvplan-catalog-stale" not in first.headers
    real = cut(app.state.db)
    try:
        hits = encoded(client).hits
        again = client.get(PATH, params=QUESTION)
        same_answer(first, again)
        assert encoded(client).hits == hits + 1
        assert again.headers["kvplan-catalog-stale"] == "true"
        # a question not asked before is computed from the same snapshot, marked too
        other = client.get(PATH, params={**QUESTION, "max_model_len": 4096})
        assert other.status_code == 200
        assert other.headers["kvplan-catalog-stale"] == "true"
    finally:
        app.state.db.sessions = real


def test_cached_answers_are_counted_like_any_other(client: TestClient) -> None:
    for _ in range(3):
        assert client.get(PATH, params={**QUESTION, "format": "csv"}).status_code == 200
    assert encoded(client).hits == 2
    metrics = client.get("/metrics").text
    assert 'kvplan_capacity_requests_total{format="csv",method="GET"} 3.0' in metrics
    assert 'http_requests_total{handler="/v1/capacity",method="GET",status="2xx"} 3.0' in metrics


def test_the_hot_path_reads_the_parameters_the_route_declares() -> None:
    route = next(
        r
        for r in planning_router.routes
        if isinstance(r, APIRoute) and r.path == PATH and "GET" in r.methods
    )
    assert _query_names(route) == DECLARED


# Spellings FastAPI reads in its own way: repeated parameters (the last one counts, a list
# takes them all), blank values, case, a list field, every format.
SPELLINGS = [
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=4096&max_model_len=8192",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&kv_cache_dtype=fp8",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&enable_prefix_caching=TRUE",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&enable_prefix_caching=1",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&peak_concurrency=500&format=text"
    "&field=replicas_for_peak_concurrency",
    "model=gpt-oss-20b&gpu=h100-sxm-80gb&engine=trtllm&max_model_len=8192"
    "&max_attention_window=128&max_attention_window=8192",
    "model=gpt-oss-20b&gpu=h100-sxm-80gb&engine=trtllm&max_model_len=8192"
    "&max_attention_window=8192&max_attention_window=128",
    "model=llama-3.1-8b&gpu_memory_bytes=85899345920&max_model_len=8192&format=csv",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&gpu=&max_model_len=8192",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&engine_version=0.10.1",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=1000000000",
    "model=llama-3.1-8b&gpu=l4&max_model_len=131072",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&format=prometheus",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&max_model_len=",
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=%38%31%39%32",
]


@pytest.mark.parametrize("query", SPELLINGS)
def test_the_hot_path_answers_as_fastapi_answered(client: TestClient, query: str) -> None:
    first = client.get(f"{PATH}?{query}")
    again = client.get(f"{PATH}?{query}")
    same_answer(first, again)
    # only answers FastAPI gave as 200 are kept: a refusal is refused again, by FastAPI
    assert encoded(client).hits == (1 if first.status_code == 200 else 0)


# ---- a catalog edit is seen within the TTL ---------------------------------------------------

TTL = 0.3
GiB = 1 << 30


@pytest.fixture
def replicas(
    engine: Engine, connection: Connection, database_url: str
) -> Iterator[tuple[TestClient, TestClient]]:
    """Two replicas on this test's transaction: a reader that trusts its catalog for TTL
    seconds, and a writer (a write through the reader itself is seen at once)."""

    def replica(ttl: float) -> FastAPI:
        database = Database(engine)
        database.sessions = sessionmaker(
            bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        return create_app(make_settings(database_url, catalog_ttl_seconds=ttl), database)

    with TestClient(replica(TTL)) as reader, TestClient(replica(0)) as writer:
        yield reader, writer


def test_a_catalog_edit_is_seen_within_the_ttl(replicas: tuple[TestClient, TestClient]) -> None:
    reader, writer = replicas
    first = reader.get(PATH, params=QUESTION)
    assert first.status_code == 200
    assert reader.get(PATH, params=QUESTION).content == first.content
    assert encoded(reader).hits == 1
    patched = writer.patch(
        "/v1/gpus/h100-sxm-80gb",
        json={"memory_bytes": 141 * GiB},
        headers={**ADMIN, "If-Match": writer.get("/v1/gpus/h100-sxm-80gb").headers["etag"]},
    )
    assert patched.status_code == 200, patched.text
    # the reader's snapshot is refreshed in the background once the TTL has passed; its next
    # answers are the new catalog's (the deadline is generous: a loaded machine is slow)
    deadline = time.monotonic() + TTL + 10
    while True:
        answer = reader.get(PATH, params=QUESTION)
        if answer.json()["gpu_memory_bytes"] == 141 * GiB:
            break
        assert time.monotonic() < deadline, "the edit was never seen"
        time.sleep(TTL / 3)
    assert answer.headers["etag"] != first.headers["etag"]
    assert answer.json()["kv_pool_bytes"] > first.json()["kv_pool_bytes"]
    # and it is cached in turn: the same question again is the new answer, from the bytes
    hits = encoded(reader).hits
    same_answer(answer, reader.get(f"{PATH}?{RESPELT}"))
    assert encoded(reader).hits == hits + 1


# ---- a question not asked before: the hot path's answer is FastAPI's ---------------------------

# Real questions, each asked once of a fresh replica (so the hot path computes it), and of one
# whose hot path is taken out (so the FastAPI route does): every byte must agree. The valid ones
# cover each format, Accept, the speed at a peak, GPUs by bytes, the three engines, an older
# release, a list parameter and a pipeline; the others each problem a question can be.
ANSWERED = [
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&format=csv", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=4096", {"Accept": "text/csv"}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&format=tsv", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&format=text", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&field=prefill_ms", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&format=prometheus", {}),
    ("model=llama-3.1-70b&gpu=h100-sxm-80gb&tensor_parallel_size=4&kv_cache_dtype=fp8", {}),
    ("model=llama-3.1-70b&gpu=h200-141gb&tensor_parallel_size=2&peak_concurrency=300", {}),
    ("model=qwen3.5-27b&gpu=b200&max_model_len=131072&avg_prompt_tokens=2000", {}),
    ("model=deepseek-v3&gpu=h200-141gb&tensor_parallel_size=8&max_model_len=16384", {}),
    ("model=gpt-oss-20b&gpu=h100-sxm-80gb&engine=sglang&max_model_len=8192", {}),
    (
        "model=gpt-oss-20b&gpu=h100-sxm-80gb&engine=trtllm&max_model_len=8192"
        "&max_attention_window=128&max_attention_window=8192",
        {},
    ),
    ("model=llama-3.1-8b&gpu=a100-sxm-80gb&max_model_len=8192&engine_version=0.10.1", {}),
    ("model=llama-3.1-8b&gpu_memory_bytes=85899345920&max_model_len=8192", {}),
    ("model=llama-3.1-8b&gpu_memory_bytes=50000000000&max_model_len=8192&format=csv", {}),
    (
        "model=llama-3.1-70b&gpu=l40s&pipeline_parallel_size=2&tensor_parallel_size=2&max_model_len=32768",
        {},
    ),
    ("model=qwen3-8b&gpu=l4&max_model_len=4096&_=123&nocache=1&api_key=x", {}),
    # the engines' own spellings (engine_flags), a release newer than kvplan models (warned)
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&context_length=8192&tp_size=2&format=csv", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_seq_len=8192&engine=trtllm&max_batch_size=9", {}),
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&engine_version=9.0.0&format=text", {}),
]
REFUSED = [
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_length=8192", {}),  # misspelt: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&tensor_parallel_size=two", {}),  # invalid: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=0", {}),  # out of range: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&format=xml", {}),  # 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb", {"Accept": "image/png"}),  # 406
    ("model=llama-3.1-9b&gpu=h100-sxm-80gb", {}),  # unknown model: 404 with suggestions
    ("model=llama-3.1-8b&gpu=h100-sxm-81gb", {}),  # unknown GPU: 404
    ("model=llama-3.1-8b", {}),  # no GPU: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&gpu_memory_bytes=85899345920", {}),  # both: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&engine=sglang&gpu_memory_utilization=0.9", {}),
    ("model=llama-3.1-405b&gpu=l4", {}),  # the weights do not fit: 422
    ("model=llama-3.1-8b&gpu=l4&max_model_len=131072", {}),  # one sequence does not fit: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&kv_cache_dtype=fp7", {}),  # unknown dtype: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&tensor_parallel_size=16", {}),  # beyond a node
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&tp=2&tp_size=2", {}),  # two spellings: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&lora_paths=a", {}),  # not modelled: 422
    ("model=llama-3.1-8b&gpu=h100-sxm-80gb&max_loras=2", {}),  # without enable_lora: 422
]
COMPARED = (
    *HEADERS_COMPARED,
    "kvplan-catalog-stale",
    "x-content-type-options",
    "kvplan-warnings",
    "kvplan-ignored-parameters",
)


def test_a_new_question_is_answered_by_the_hot_path_as_fastapi_answers_it(
    client: TestClient, fastapi_only: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    computed: list[str] = []
    original = hot_path.capacity_answer

    def counted(*args: Any) -> EncodedAnswer:
        answer = original(*args)
        computed.append(answer.etag)
        return answer

    monkeypatch.setattr(hot_path, "capacity_answer", counted)
    for query, headers in [*ANSWERED, *REFUSED]:
        fast = client.get(f"{PATH}?{query}", headers=headers)
        routed = fastapi_only.get(f"{PATH}?{query}", headers=headers)
        assert (fast.status_code, fast.content) == (routed.status_code, routed.content), query
        for name in COMPARED:
            assert fast.headers.get(name) == routed.headers.get(name), (query, name)
        if (query, headers) in ANSWERED:
            assert fast.status_code == 200, fast.text
        else:
            assert fast.headers["content-type"] == "application/problem+json", query
    # every valid question was computed by the hot path, none answered from a cache
    assert len(computed) == len(ANSWERED)
    assert encoded(client).hits == 0
    # and counted alike, by format
    assert _capacity_counts(client) == _capacity_counts(fastapi_only)


def _capacity_counts(client: TestClient) -> list[str]:
    return [
        line
        for line in client.get("/metrics").text.splitlines()
        if line.startswith("kvplan_capacity_requests_total{")
    ]


# Query strings as clients write them and as they mangle them: separators doubled or trailing,
# names without `=`, escapes (whole, cut short, of UTF-8 bytes), `+` for a space, `;`, non-ASCII.
_QUERY_PIECES = st.sampled_from(
    ["model", "gpu", "=", "&", "&&", "%20", "%2", "%e2%80%99", "+", ";", "_", "8192", "é", "a=b"]
)


@given(st.lists(_QUERY_PIECES, max_size=12).map("".join))
def test_the_hot_paths_query_pairs_are_starlettes(query: str) -> None:
    # canonical() reads the query with query_pairs; FastAPI reads it through Starlette's
    # QueryParams, which is parse_qsl(..., keep_blank_values=True): a difference would answer
    # another question than the route would.
    assert hot_path.query_pairs(query) == parse_qsl(query, keep_blank_values=True)


def test_the_json_answer_is_the_bytes_model_dump_json_writes() -> None:
    # router._answer_json calls CapacityAnswer's serializer straight for an exact
    # CapacityAnswer: the same bytes as model_dump_json(include=every field), for an answer
    # without warnings and one with (Gemma 3's padding-layers note).
    snapshot = offline_snapshot()
    warned = []
    for model in ("llama-3.1-8b", "gemma-3-27b-it"):
        params = {"model": model, "gpu": "h100-sxm-80gb", "max_model_len": 8192}
        query = CapacityQuery.model_validate(params)
        answer = service.capacity_answer(service.CapacityQuestion.from_query(query), snapshot)
        assert type(answer).__name__ == "CapacityAnswer"
        assert _answer_json(answer) == answer.model_dump_json(include=_ANSWER_FIELDS).encode()
        warned.append(bool(answer.warnings))
    assert warned == [False, True]
