"""The HTTP shapes of /v1/deployments: a profile's body, its patch, the answer, the list.

A profile's sizing fields are the planning slice's `CapacityFields` (the engine, its version and
flags, the layout, the context, the KV precision, the expected peak), inherited rather than
repeated, so a flag added there is a profile field too. Bodies refuse unknown fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Optional

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model
from pydantic.fields import FieldInfo

from ..catalog.schemas import SLUG_PATTERN, Page
from ..planning.schemas import CapacityAnswer, CapacityFields

# A Kubernetes namespace is a DNS-1123 label; a Deployment's name a DNS-1123 subdomain.
NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
WORKLOAD_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

Name = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
Namespace = Annotated[str, StringConstraints(max_length=63, pattern=NAMESPACE_PATTERN)]
Workload = Annotated[str, StringConstraints(max_length=253, pattern=WORKLOAD_PATTERN)]

NAME_DOC = (
    "The profile's unique name, used in URLs and as the `deployment` label of its gauges: "
    "lowercase letters, digits, '.', '_' and '-', at most 100 characters. Cannot be changed."
)

_EXAMPLE: dict[str, Any] = {
    "name": "llama-3-1-8b-h100",
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "engine": "vllm",
    "engine_version": "0.10.1",
    "tensor_parallel_size": 1,
    "max_model_len": 8192,
    "kv_cache_dtype": "fp8",
    "gpu_memory_utilization": 0.9,
    "peak_concurrency": 200,
    "replicas": 2,
    "namespace": "inference",
    "workload": "llama-3-1-8b-vllm",
}


class _Target(BaseModel):
    """What the profile runs, and (optionally) the Kubernetes workload that runs it."""

    model: str = Field(
        ..., max_length=100, description="Model slug in the catalog.", examples=["llama-3.1-8b"]
    )
    gpu: str = Field(
        ..., max_length=100, description="GPU slug in the catalog.", examples=["h100-sxm-80gb"]
    )
    replicas: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="Engine replicas the workload runs (recorded with the profile; autoscalers "
        "change the live count).",
    )
    namespace: Namespace | None = Field(
        None, description="Namespace of the workload.", examples=["inference"]
    )
    workload: Workload | None = Field(
        None,
        description="Name of the Deployment (or other workload) that runs it.",
        examples=["llama-3-1-8b-vllm"],
    )
    calibration_id: int | None = Field(
        None,
        ge=1,
        le=2**31 - 1,
        description="The calibration (POST /v1/calibrations: the engine's own start-up log) the "
        "profile is sized with: its capacity answers and gauges then take the engine's measured "
        "KV pool and say so in `calibrated_from`. The calibration must have measured this "
        "profile's deployment (model, GPU, engine release, layout, KV dtype, the flags that "
        "change the budget), or the write is a 422 naming `calibration_id`; while a profile "
        "points at it, the calibration cannot be deleted (409 naming the profiles). Without it, "
        "a calibration with the profile's key is still used, as by GET /v1/capacity.",
        examples=[7],
    )


# The profile lists its target last so that pydantic puts those fields first (as the planning
# requests do with theirs): model and GPU, then the sizing fields.
class DeploymentReplace(CapacityFields, _Target):
    """A profile's full description (PUT replaces it; omitted fields take their defaults).

    `peak_concurrency` is the peak the workload is planned for: its capacity answer says how
    many replicas hold it unless the request asks for another peak.
    """

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"examples": [{k: v for k, v in _EXAMPLE.items() if k != "name"}]},
    )


class _Named(BaseModel):
    name: Name = Field(..., description=NAME_DOC, examples=["llama-3-1-8b-h100"])


class DeploymentCreate(DeploymentReplace, _Named):
    """A new profile: a name, a model and a GPU are enough; the rest has engine defaults."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"name": "qwen3-8b-l40s", "model": "qwen3-8b", "gpu": "l40s"},
                _EXAMPLE,
            ]
        },
    )


def _all_optional(base: type[BaseModel], name: str, doc: str) -> type[BaseModel]:
    """`base` with every field optional and defaulting to None, bounds and docs kept."""
    fields: dict[str, Any] = {
        field: (Optional[info.annotation], FieldInfo.merge_field_infos(info, default=None))  # noqa: UP045
        for field, info in base.model_fields.items()
    }
    config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"max_model_len": 16384, "peak_concurrency": 120},
                {"engine_version": "0.11.0", "gpu_memory_utilization": 0.92},
            ]
        },
    )
    model: type[BaseModel] = create_model(name, __config__=config, __doc__=doc, **fields)
    return model


_PATCH_DOC = """JSON merge patch (RFC 7396): only the fields sent change; `null` restores a field's
default (`model` and `gpu` cannot be cleared). The result is checked as a whole profile."""

if TYPE_CHECKING:
    # To the type checker a patch has the replace body's attributes (all it reads of one).
    DeploymentPatch = DeploymentReplace
else:
    # Built from the replace body, so a field added there is patchable with no second list.
    DeploymentPatch = _all_optional(DeploymentReplace, "DeploymentPatch", _PATCH_DOC)


class DeploymentRead(DeploymentCreate):
    """A profile as stored, with its revision (its `ETag`)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [_EXAMPLE]})

    revision: int = Field(
        description="Starts at 1 and grows by one on every change; the `ETag` is this number "
        "in quotes. Send it back in `If-Match` to update or delete.",
        examples=[3],
    )
    created_at: datetime = Field(description="When the profile was created (UTC).")
    updated_at: datetime = Field(description="When the profile last changed (UTC).")


class DeploymentPage(Page[DeploymentRead]):
    """A page of profiles, in name order."""


class DeploymentCapacity(CapacityAnswer):
    """A profile's capacity: the GET /v1/capacity answer for its fields, and which profile."""

    deployment: str = Field(description="The profile's name.", examples=["llama-3-1-8b-h100"])
    revision: int = Field(description="The profile's revision this answer was computed from.")
