"""The OpenAPI contract the Backstage plugin and other clients read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.openapi_export import openapi_spec, render

SPEC_FILE = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"

# Stable operation ids: renaming one breaks generated clients.
OPERATION_IDS = {
    ("get", "/healthz"): "healthz",
    ("get", "/readyz"): "readyz",
    ("get", "/problems/{code}"): "getProblemType",
    ("get", "/v1/capacity"): "getCapacity",
    ("post", "/v1/capacity"): "computeCapacity",
    ("get", "/v1/plans"): "getPlan",
    ("post", "/v1/plans"): "createPlan",
    ("post", "/v1/simulations"): "createSimulation",
    ("get", "/v1/models"): "listModels",
    ("post", "/v1/models"): "createModel",
    ("post", "/v1/models/import"): "importModel",
    ("get", "/v1/models/{slug}"): "getModel",
    ("put", "/v1/models/{slug}"): "replaceModel",
    ("patch", "/v1/models/{slug}"): "patchModel",
    ("delete", "/v1/models/{slug}"): "deleteModel",
    ("get", "/v1/gpus"): "listGpus",
    ("post", "/v1/gpus"): "createGpu",
    ("get", "/v1/gpus/{slug}"): "getGpu",
    ("put", "/v1/gpus/{slug}"): "replaceGpu",
    ("patch", "/v1/gpus/{slug}"): "patchGpu",
    ("delete", "/v1/gpus/{slug}"): "deleteGpu",
    ("get", "/v1/deployments"): "listDeployments",
    ("post", "/v1/deployments"): "createDeployment",
    ("get", "/v1/deployments/{name}"): "getDeployment",
    ("put", "/v1/deployments/{name}"): "replaceDeployment",
    ("patch", "/v1/deployments/{name}"): "patchDeployment",
    ("delete", "/v1/deployments/{name}"): "deleteDeployment",
    ("get", "/v1/deployments/{name}/capacity"): "getDeploymentCapacity",
    ("get", "/v1/pictures/memory-budget"): "getMemoryBudgetPicture",
    ("post", "/v1/pictures/memory-budget"): "drawMemoryBudgetPicture",
    ("get", "/v1/pictures/capacity-by-context"): "getCapacityByContextPicture",
    ("post", "/v1/pictures/capacity-by-context"): "drawCapacityByContextPicture",
    ("post", "/v1/engine-logs"): "explainEngineLog",
    ("post", "/v1/calibrations"): "createCalibration",
    ("get", "/v1/calibrations"): "listCalibrations",
    ("get", "/v1/calibrations/{calibration_id}"): "getCalibration",
    ("delete", "/v1/calibrations/{calibration_id}"): "deleteCalibration",
    ("get", "/v1/pictures/speed-by-batch"): "getSpeedByBatchPicture",
    ("post", "/v1/pictures/speed-by-batch"): "drawSpeedByBatchPicture",
    ("post", "/v1/pictures/simulation"): "drawSimulationPicture",
    ("post", "/v1/pictures/latency-vs-rate"): "drawLatencyVsRatePicture",
    ("post", "/v1/speed-results"): "explainSpeedResult",
    ("post", "/v1/speed-calibrations"): "createSpeedCalibration",
    ("get", "/v1/speed-calibrations"): "listSpeedCalibrations",
    ("get", "/v1/speed-calibrations/{calibration_id}"): "getSpeedCalibration",
    ("delete", "/v1/speed-calibrations/{calibration_id}"): "deleteSpeedCalibration",
}


def _operations(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    resolved: dict[str, Any] = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return resolved


def test_the_committed_spec_is_the_apps_spec() -> None:
    # `make openapi` rewrites openapi/openapi.json; run it when this fails.
    assert SPEC_FILE.read_text(encoding="utf-8") == render(openapi_spec())


def test_operation_ids_are_the_stable_ones() -> None:
    operations = _operations(openapi_spec())
    assert {key: op["operationId"] for key, op in operations.items()} == OPERATION_IDS


def test_every_request_body_carries_an_example() -> None:
    spec = openapi_spec()
    missing = []
    for key, operation in _operations(spec).items():
        body = operation.get("requestBody")
        if body is None:
            continue
        for media in body["content"].values():
            schema = _resolve(spec, media["schema"])
            if not (schema.get("examples") or media.get("examples") or media.get("example")):
                missing.append(key)
    assert missing == []


def test_every_operation_is_described_for_people() -> None:
    for key, operation in _operations(openapi_spec()).items():
        assert operation.get("summary"), key
        assert operation.get("tags"), key


# This session's traffic and benchmark answers: every field says what it is and its unit
# (the unit in the name, `_ms`, `_s`, `_bytes`, where it has one).
DESCRIBED_SCHEMAS = (
    "SimulationAnswer",
    "SimulationRequest",
    "TraceRowIn",
    "WorkloadIn",
    "DisaggregatedOut",
    "SpeedResultAnswer",
    "BenchmarkOut",
)
# named by what they hold, each its own schema described: the deployment's echo and the
# engine, traffic and throughput objects
SELF_EXPLAINING = {"model", "gpu", "engine", "traffic", "throughput", "warnings", "capacity"}


def test_every_traffic_and_benchmark_field_is_described() -> None:
    schemas = openapi_spec()["components"]["schemas"]
    missing = [
        f"{name}.{field}"
        for name in DESCRIBED_SCHEMAS
        for field, body in schemas[name]["properties"].items()
        if field not in SELF_EXPLAINING and not body.get("description")
    ]
    assert missing == []
    # a simulation's engine picks the scheduler stepped, not only the memory arithmetic
    assert "scheduler" in schemas["SimulationRequest"]["properties"]["engine"]["description"]


def test_the_spec_is_valid_json_with_openapi_3() -> None:
    spec = json.loads(SPEC_FILE.read_text(encoding="utf-8"))
    assert spec["openapi"].startswith("3.")
    assert spec["info"]["title"] == "kvplan"


def test_every_error_answer_is_documented_as_one_problem_schema() -> None:
    # Clients generate one error type from the spec; FastAPI's own HTTPValidationError
    # shape is never sent, so it must not be documented either.
    spec = openapi_spec()
    assert "HTTPValidationError" not in json.dumps(spec)
    for key, operation in _operations(spec).items():
        for status, answer in operation["responses"].items():
            if status == "431":
                # answered by `kvplan serve` before any route, in plain text (errors.py
                # _HEAD_TOO_LARGE); documented as it is sent
                assert answer["content"] == {"text/plain": {"schema": {"type": "string"}}}
            elif int(status) >= 400:
                assert answer["content"] == {
                    "application/problem+json": {
                        "schema": {"$ref": "#/components/schemas/ProblemDetail"}
                    }
                }, (key, status)
    problem = spec["components"]["schemas"]["ProblemDetail"]
    assert {"type", "title", "status", "detail", "instance"} <= set(problem["required"])


def test_the_pictures_are_documented_as_svg_and_png() -> None:
    operations = _operations(openapi_spec())
    for path in ("/v1/pictures/memory-budget", "/v1/pictures/capacity-by-context"):
        for method in ("get", "post"):
            content = operations[(method, path)]["responses"]["200"]["content"]
            assert set(content) == {"image/svg+xml", "image/png"}, (method, path)
        names = {p["name"] for p in operations[("get", path)]["parameters"]}
        capacity = {p["name"] for p in operations[("get", "/v1/capacity")]["parameters"]}
        assert names == capacity  # the capacity URL's parameters, as they are
