"""Every option the sizing core takes is reachable from the API, and arrives under its own name."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from service.openapi_export import openapi_spec
from service.planning.schemas import CapacityRequest
from service.planning.service import engine_options
from service.sizing import EngineOptions
from service.sizing.planning.planner import PlanRequest

# A field holding one role's small dataclass (issue 21: `expert_parallel`) is reached through
# its own fields, each a parameter of the same name.
NESTED = {
    f.name: {g.name for g in dataclasses.fields(f.default)}
    for f in dataclasses.fields(EngineOptions)
    if dataclasses.is_dataclass(f.default)
}
ENGINE_OPTIONS = {f.name for f in dataclasses.fields(EngineOptions) if f.name not in NESTED}.union(
    *NESTED.values()
)
# PlanRequest.engine is the EngineOptions above, built from the request's engine fields.
PLAN_OPTIONS = {f.name for f in dataclasses.fields(PlanRequest)} - {"engine"}


def _query_parameters(spec: dict[str, Any], path: str) -> set[str]:
    return {parameter["name"] for parameter in spec["paths"][path]["get"]["parameters"]}


def _body_fields(spec: dict[str, Any], component: str) -> set[str]:
    return set(spec["components"]["schemas"][component]["properties"])


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return openapi_spec()


def test_every_engine_option_is_a_parameter_of_both_capacity_requests(
    spec: dict[str, Any],
) -> None:
    assert ENGINE_OPTIONS - _query_parameters(spec, "/v1/capacity") == set()
    assert ENGINE_OPTIONS - _body_fields(spec, "CapacityRequest") == set()


def test_every_engine_and_plan_option_is_a_parameter_of_both_plan_requests(
    spec: dict[str, Any],
) -> None:
    for options in (ENGINE_OPTIONS, PLAN_OPTIONS):
        assert options - _query_parameters(spec, "/v1/plans") == set()
        assert options - _body_fields(spec, "PlanRequestBody") == set()


# Non-default values for every flag one engine reads (a flag of another engine is refused).
SHARED_FLAGS: dict[str, Any] = {
    "engine_version": "1.2.0",
    "block_size": 32,
    "max_num_batched_tokens": 4096,
    "max_num_seqs": 17,
    "enable_prefix_caching": True,
    "enforce_eager": True,
    "cudagraph_memory_bytes": 1 << 30,
    "kv_pool_bytes": 1 << 34,
    "num_gpu_blocks_override": 1000,
    "mamba_ssm_cache_dtype": "float16",
    "disable_hybrid_kv_cache_manager": True,
    "weight_format": "fp8",
}
# issue 21: vLLM's expert- and context-parallel flags, carried in EngineOptions.expert_parallel
NESTED_FLAGS: dict[str, Any] = {
    "enable_expert_parallel": True,
    "num_redundant_experts": 32,
    "enable_eplb": True,
    "decode_context_parallel_size": 2,
}
ENGINE_FLAGS: dict[str, dict[str, Any]] = {
    "vllm": {"gpu_memory_utilization": 0.8},
    "sglang": {
        "mem_fraction_static": 0.7,
        "swa_full_tokens_ratio": 0.5,
        "mamba_full_memory_ratio": 2.0,
        "max_mamba_cache_size": 64,
    },
    "trtllm": {"free_gpu_memory_fraction": 0.6, "max_attention_window": [128, 4096]},
}


@pytest.mark.parametrize("engine", sorted(ENGINE_FLAGS))
def test_engine_options_carry_every_flag_under_its_own_name(engine: str) -> None:
    flags = {**SHARED_FLAGS, **ENGINE_FLAGS[engine]}
    request = CapacityRequest(model="llama-3.1-8b", gpu="h100-sxm-80gb", engine=engine, **flags)
    options = engine_options(request)
    assert options.engine.value == engine
    for name, value in flags.items():
        expected = tuple(value) if isinstance(value, list) else value
        assert getattr(options, name) == expected, name


def test_engine_options_carry_the_expert_parallel_flags_under_their_own_names() -> None:
    request = CapacityRequest(model="deepseek-v3", gpu="h200-sxm-141gb", **NESTED_FLAGS)
    options = engine_options(request)
    for name, value in NESTED_FLAGS.items():
        assert getattr(options.expert_parallel, name) == value, name


# GET /v1/plans answers the POST question from query parameters: no field may be POST-only.
# The GET adds only how to answer (`format`, `field`).
GET_ONLY = {"format", "field"}


def test_every_plan_body_field_is_a_get_parameter_and_back(spec: dict[str, Any]) -> None:
    body = _body_fields(spec, "PlanRequestBody")
    query = _query_parameters(spec, "/v1/plans")
    assert body - query == set()
    assert query - body == GET_ONLY


def test_every_capacity_body_field_is_a_get_parameter_but_the_inline_ones(
    spec: dict[str, Any],
) -> None:
    # GET names the GPU by slug or by its memory alone; the explanation is POST's alone
    body = _body_fields(spec, "CapacityRequest")
    query = _query_parameters(spec, "/v1/capacity")
    assert body - query == {"explain"}
    assert query - body == GET_ONLY | {"gpu_memory_bytes"}
