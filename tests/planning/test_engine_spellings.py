"""The engines' own flag names on every door, memory flags kvplan does not model refused, and
what a GET ignores or warns about said in headers (issue 17, item 2).

A question asked with SGLang's or TensorRT-LLM's names (`context_length`, `tp_size`,
`max_seq_len`, `max_batch_size`) is the question asked with kvplan's (vLLM's) names: the same
bytes, the same ETag, on GET (the hot path and the FastAPI route), POST bodies and CSV columns.
The names are the engines' own: SGLang `python/sglang/srt/server_args.py` `ServerArgs`
(`context_length`, `tp_size`, `max_running_requests`, `page_size`), trtllm-serve
`tensorrt_llm/commands/serve.py` `serve` (`--max_seq_len`, `--tp_size`, `--max_batch_size`),
vLLM `vllm/engine/arg_utils.py` `EngineArgs.add_cli_args` (`-tp`, `--enable-lora`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import httpx
import pytest
from fastapi.testclient import TestClient

from service.kit.answer_headers import IGNORED_HEADER, WARNINGS_HEADER, display_string
from service.kit.engine_flags import ALIASES, SPELLINGS, UNMODELLED
from service.planning.schemas import CapacityRequest, PlanRequestBody
from service.sizing.engines.calibration import LATEST_VLLM_VERSION
from tests.conftest import ADMIN
from tests.deployments.test_deployments_api import PROFILE
from tests.helpers import problem
from tests.planning.test_plan_table import CSV, table

CAPACITY = "/v1/capacity"
LLAMA = "model=llama-3.1-8b&gpu=h100-sxm-80gb"
# kvplan's names, and the same question in each engine's: Llama-3.1-8B (8 KV heads) at 8,192
# tokens over two GPUs, as `--max-model-len 8192 --tensor-parallel-size 2` (vLLM),
# `--context-length 8192 --tp-size 2` (SGLang), `--max_seq_len 8192 --tp_size 2` (trtllm-serve).
KVPLAN = f"{LLAMA}&max_model_len=8192&tensor_parallel_size=2"
RESPELT = [
    f"{LLAMA}&context_length=8192&tp_size=2",
    f"{LLAMA}&max_seq_len=8192&tp=2",
    f"{LLAMA}&--context-length=8192&--tp-size=2",  # pasted off a command line
    f"{LLAMA}&max-model-len=8192&tensor-parallel-size=2",
]
FORMATS = ["", "&format=csv", "&format=text", "&format=prometheus", "&field=kv_cache_tokens"]


def warnings_of(response: httpx.Response) -> list[str]:
    """Kvplan-Warnings read back: an RFC 9651 list of Display Strings, `%"..."` each."""
    value = response.headers.get(WARNINGS_HEADER)
    if value is None:
        return []
    items = re.findall(r'%"((?:[^"%]|%[0-9a-f]{2})*)"', value)
    assert ", ".join(f'%"{item}"' for item in items) == value  # nothing else in it
    return [unquote(item, errors="strict") for item in items]


def ignored_of(response: httpx.Response) -> list[str]:
    value = response.headers.get(IGNORED_HEADER)
    return [] if value is None else [unquote(name) for name in value.split(", ")]


# ---- aliases -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("respelt", RESPELT)
def test_an_engines_spelling_asks_the_same_question_on_get(
    client: TestClient, fastapi_only: TestClient, respelt: str, fmt: str
) -> None:
    expected = client.get(f"{CAPACITY}?{KVPLAN}{fmt}")
    assert expected.status_code == 200, expected.text
    for door in (client, fastapi_only):  # the hot path, and the FastAPI route
        for _ in range(3):  # computed, then found, then found by its own words
            answer = door.get(f"{CAPACITY}?{respelt}{fmt}")
            assert answer.status_code == 200, answer.text
            assert answer.content == expected.content
            assert answer.headers["etag"] == expected.headers["etag"]
            assert IGNORED_HEADER not in answer.headers  # every name was read
    if not fmt:
        asked = expected.json()
        # the question as asked, not the default layout (131,072 tokens on one GPU)
        assert (asked["max_model_len"], asked["tensor_parallel_size"]) == (8192, 2)


def test_the_cap_on_sequences_and_the_weights_by_their_engines_names(client: TestClient) -> None:
    # SGLang --max-running-requests and TensorRT-LLM --max_batch_size are vLLM's
    # --max-num-seqs (kvplan's max_num_seqs doc); --quantization fp8 is fp8 weights.
    pairs = [
        ("engine=sglang&max_running_requests=7", "engine=sglang&max_num_seqs=7"),
        ("engine=trtllm&max_batch_size=7", "engine=trtllm&max_num_seqs=7"),
        ("quantization=fp8", "weight_format=fp8"),
        ("engine=sglang&page_size=64", "engine=sglang&block_size=64"),
        ("engine=trtllm&tokens_per_block=64", "engine=trtllm&block_size=64"),
        ("engine=trtllm&max_num_tokens=4096", "engine=trtllm&max_num_batched_tokens=4096"),
    ]
    for theirs, ours in pairs:
        answer = client.get(f"{CAPACITY}?{LLAMA}&max_model_len=8192&{theirs}")
        expected = client.get(f"{CAPACITY}?{LLAMA}&max_model_len=8192&{ours}")
        assert answer.status_code == expected.status_code == 200, (theirs, answer.text)
        assert answer.content == expected.content, theirs


def test_an_alias_names_a_field_kvplan_has() -> None:
    fields = {*CapacityRequest.model_fields, *PlanRequestBody.model_fields}
    for spelling in SPELLINGS:
        assert spelling.field in fields, spelling
        assert spelling.name not in fields, spelling  # kvplan's own name is no alias
    assert not set(ALIASES) & set(UNMODELLED)


def test_post_bodies_read_the_engines_names(client: TestClient) -> None:
    ours = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "max_model_len": 8192}
    theirs = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "context_length": 8192}
    for extra_ours, extra_theirs in [
        ({"tensor_parallel_size": 2}, {"tp_size": 2}),
        ({"max_num_seqs": 9}, {"max_running_requests": 9}),
    ]:
        a = client.post(CAPACITY, json={**ours, **extra_ours, "explain": False})
        b = client.post(CAPACITY, json={**theirs, **extra_theirs, "explain": False})
        assert a.status_code == b.status_code == 200, b.text
        assert a.json() == b.json()
    plan = {"model": "llama-3.1-8b", "peak_concurrency": 40, "gpus": ["l4", "h100-sxm-80gb"]}
    a = client.post("/v1/plans", json={**plan, "max_model_len": 8192, "explain": False})
    b = client.post("/v1/plans", json={**plan, "max_seq_len": 8192, "explain": False})
    assert a.status_code == b.status_code == 200, b.text
    assert a.json() == b.json()


def test_pictures_and_get_plans_read_the_engines_names(client: TestClient) -> None:
    for picture in ("memory-budget", "capacity-by-context", "speed-by-batch"):
        url = f"/v1/pictures/{picture}?format=svg&"
        ours, theirs = client.get(url + KVPLAN), client.get(url + RESPELT[0])
        assert ours.status_code == theirs.status_code == 200, theirs.text
        assert ours.content == theirs.content, picture
    plan = "/v1/plans?model=llama-3.1-8b&peak_concurrency=40&gpus=l4,h100-sxm-80gb"
    ours = client.get(f"{plan}&max_model_len=8192")
    theirs = client.get(f"{plan}&context_length=8192")
    assert ours.status_code == theirs.status_code == 200, theirs.text
    assert ours.content == theirs.content


def test_csv_columns_read_the_engines_names(client: TestClient) -> None:
    ours = "model,max_model_len,peak_concurrency,gpus\nllama-3.1-8b,8192,40,l4;h100-sxm-80gb\n"
    theirs = ours.replace("max_model_len", "context_length")
    a = table(client.post("/v1/plans", content=ours, headers=CSV))
    b = table(client.post("/v1/plans", content=theirs, headers=CSV))
    assert a == b
    assert a[0]["status"] == "ok", a


# ---- two spellings of one field, and flags kvplan does not model ---------------------------


def test_two_spellings_of_one_field_are_a_422_naming_both(client: TestClient) -> None:
    refusals = [
        (
            client.get(f"{CAPACITY}?{LLAMA}&tensor_parallel_size=2&tp_size=2"),
            "tensor_parallel_size",
            "tp_size",
        ),
        (client.get(f"{CAPACITY}?{LLAMA}&tp=2&tp_size=4"), "tp", "tp_size"),
        (
            client.post(
                CAPACITY,
                json={
                    "model": "llama-3.1-8b",
                    "gpu": "l4",
                    "tp_size": 2,
                    "tensor_parallel_size": 2,
                },
            ),
            "tp_size",
            "tensor_parallel_size",
        ),
        (
            client.post(
                "/v1/plans",
                content="model,max_model_len,max_seq_len,peak_concurrency\nllama-3.1-8b,8192,8192,4\n",
                headers=CSV,
            ),
            "max_model_len",
            "max_seq_len",
        ),
    ]
    for response, first, second in refusals:
        body = problem(response, 422)
        assert body["field"] == second
        assert f"{first} and {second} both give" in body["detail"]


@pytest.mark.parametrize(
    # (vLLM's and SGLang's LoRA flags and the speculative flags, SGLang's DP attention and
    # ep_size are sized since issue 21: SGLang's --lora-paths, read from the adapters, and
    # TensorRT-LLM's parallel flags are not)
    "flag",
    ["lora_paths=a", "max_total_tokens=2", "max_beam_width=4", "moe_expert_parallel_size=8"],
)
def test_a_memory_flag_kvplan_does_not_model_is_a_422_naming_it(
    client: TestClient, fastapi_only: TestClient, flag: str
) -> None:
    name = flag.split("=", maxsplit=1)[0]
    for door in (client, fastapi_only):
        body = problem(door.get(f"{CAPACITY}?{LLAMA}&{flag}"), 422)
        assert body["field"] == name
        assert "not model" in body["detail"]
    picture = problem(client.get(f"/v1/pictures/memory-budget?{LLAMA}&{flag}"), 422)
    assert picture["field"] == name


def test_a_memory_flag_is_refused_in_bodies_and_tables_too(client: TestClient) -> None:
    body = problem(
        client.post(CAPACITY, json={"model": "llama-3.1-8b", "gpu": "l4", "lora_paths": ["a"]}),
        422,
    )
    assert body["field"] == "lora_paths"
    question = {"model": "llama-3.1-8b", "max_model_len": 8192, "peak_concurrency": 4}
    body = problem(client.post("/v1/plans", json={**question, "enable_attention_dp": True}), 422)
    assert body["field"] == "enable_attention_dp"
    csv_body = "model,max_model_len,peak_concurrency,max_total_tokens\nllama-3.1-8b,8192,4,2\n"
    body = problem(client.post("/v1/plans", content=csv_body, headers=CSV), 422)
    assert body["field"] == "max_total_tokens"


def test_a_memory_switch_given_off_changes_nothing_and_is_named_ignored(
    client: TestClient,
) -> None:
    plain = client.get(f"{CAPACITY}?{LLAMA}")
    off = client.get(f"{CAPACITY}?{LLAMA}&disable_radix_cache=false")
    assert off.status_code == 200, off.text
    assert off.content == plain.content
    assert ignored_of(off) == ["disable_radix_cache"]


# ---- what a GET ignores is named -----------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_ignored_parameter_is_answered_and_named(client: TestClient, fmt: str) -> None:
    plain = client.get(f"{CAPACITY}?{LLAMA}{fmt}")
    for _ in range(3):  # computed, then found, then found by its own words
        busted = client.get(f"{CAPACITY}?{LLAMA}{fmt}&_=123&utm_source=sheet&api_key=x")
        assert busted.status_code == 200, busted.text
        assert busted.content == plain.content
        # the read key parameter is read (where read keys are set), so never named ignored
        assert busted.headers[IGNORED_HEADER] == "_, utm_source"
    assert IGNORED_HEADER not in plain.headers


def test_ignored_parameters_are_named_by_every_get(client: TestClient) -> None:
    plan = "model=llama-3.1-8b&max_model_len=8192&peak_concurrency=40&gpus=l4"
    for url in (
        f"/v1/plans?{plan}&_=1",
        f"/v1/pictures/memory-budget?{LLAMA}&_=1&format=svg",
        f"/v1/pictures/capacity-by-context?{LLAMA}&_=1&format=svg",
        f"/v1/pictures/speed-by-batch?{LLAMA}&_=1&format=svg",
    ):
        answer = client.get(url)
        assert answer.status_code == 200, (url, answer.text)
        assert ignored_of(answer) == ["_"], url


def test_an_odd_ignored_name_is_header_safe(client: TestClient) -> None:
    answer = client.get(f"{CAPACITY}?{LLAMA}&caf%C3%A9%2C%20x=1")
    assert answer.status_code == 200, answer.text
    assert answer.headers[IGNORED_HEADER] == "caf%C3%A9%2C%20x"
    assert ignored_of(answer) == ["café, x"]


# ---- warnings reach GET callers ------------------------------------------------------------


def _warned(client: TestClient, query: str) -> list[str]:
    """The JSON warnings of a GET, after checking every format's header says the same."""
    answer = client.get(f"{CAPACITY}?{query}")
    assert answer.status_code == 200, answer.text
    warnings: list[str] = answer.json()["warnings"]
    for fmt in FORMATS:
        for _ in range(2):  # computed, then from the cache
            other = client.get(f"{CAPACITY}?{query}{fmt}")
            assert warnings_of(other) == warnings, fmt
    return warnings


def test_an_engine_release_newer_than_kvplan_models_warns_on_get(client: TestClient) -> None:
    warnings = _warned(client, f"{LLAMA}&engine_version=9.0.0")
    assert any(f"sized as {LATEST_VLLM_VERSION}" in w and "9.0.0" in w for w in warnings)
    # the POST answer says the same, from the same source, in its header too
    body = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "engine_version": "9.0.0"}
    assert client.post(CAPACITY, json=body).json()["warnings"] == warnings
    row = client.post(CAPACITY, json=body, headers={"Accept": "text/csv"})
    assert row.status_code == 200, row.text
    assert warnings_of(row) == warnings


def test_a_context_past_the_models_positions_warns_on_get(client: TestClient) -> None:
    # Llama-3.1-8B: max_position_embeddings 131072 (its config.json); 300,000 tokens at fp8
    # take 300,000 x 32 layers x 8 KV heads x 128 x 2 (K and V) x 1 byte = 19.7 GB: it fits an
    # 80 GB GPU. vLLM refuses the length unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    # (docs/engines/vllm.md#max-model-len); with the override the answer is a 200 that must say
    # the model's limit, 131072, was passed.
    query = f"{LLAMA}&max_model_len=300000&kv_cache_dtype=fp8&allow_long_max_model_len=true"
    warnings = _warned(client, query)
    assert any("above the 131072 tokens vLLM derives" in w for w in warnings)


def test_null_speed_figures_say_why_on_get(client: TestClient) -> None:
    # 50,000,000,000 bytes is no catalog GPU: no bandwidth or FLOPs figures, so no speed.
    query = "model=llama-3.1-8b&gpu_memory_bytes=50000000000&max_model_len=8192"
    warnings = _warned(client, query)
    answer = client.get(f"{CAPACITY}?{query}").json()
    assert answer["decode_ms_per_token"] is None
    assert len(warnings) >= 2  # the GPU not recognised, and why there is no speed


def test_pictures_say_the_warnings_of_what_they_draw(client: TestClient) -> None:
    expected = client.get(f"{CAPACITY}?{LLAMA}&engine_version=9.0.0").json()["warnings"]
    for picture in ("memory-budget", "capacity-by-context", "speed-by-batch"):
        answer = client.get(f"/v1/pictures/{picture}?{LLAMA}&engine_version=9.0.0&format=svg")
        assert answer.status_code == 200, answer.text
        assert warnings_of(answer) == expected, picture


def test_a_deployment_profiles_capacity_says_its_warnings_in_every_format(
    client: TestClient,
) -> None:
    # A profile is a stored capacity question (ARCHITECTURE.md): its answer warns as GET does;
    # the profile's SGLang spelling `context_length` is stored as max_model_len.
    profile = {k: v for k, v in PROFILE.items() if k != "max_model_len"}
    body = {**profile, "engine_version": "9.0.0", "context_length": 8192}
    assert client.post("/v1/deployments", json=body, headers=ADMIN).status_code == 201
    url = "/v1/deployments/llama-8b-h100/capacity"
    answer = client.get(url).json()
    assert answer["max_model_len"] == 8192
    assert any(f"sized as {LATEST_VLLM_VERSION}" in w for w in answer["warnings"])
    for fmt in ("csv", "text", "prometheus"):
        other = client.get(url, params={"format": fmt})
        assert other.status_code == 200, other.text
        assert warnings_of(other) == answer["warnings"], fmt
    header = client.get(url, params={"format": "csv"}).text.splitlines()[0]
    assert "warnings" not in header.split(",")  # a row has no room for a list


def test_a_display_string_keeps_every_character() -> None:
    # RFC 9651 §3.3.8: `%` and `"` and non-ASCII bytes as %xx of UTF-8, the rest as it is.
    text = 'x 1.5× "fast" at 100%'
    encoded = display_string(text)
    assert encoded == '%"x 1.5%c3%97 %22fast%22 at 100%25"'
    assert unquote(encoded[2:-1]) == text
