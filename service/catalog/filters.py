"""The list filters of GET /v1/models and GET /v1/gpus: each one query parameter, its bounds and
its documentation, named once here so the list endpoints read as what they do."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import AfterValidator

from ..sizing import LayerKind
from .schemas import MAX_MEMORY_BYTES, MAX_PARAMETERS, no_nul

# --- models

Family = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=100,
        description="Only this family (case-insensitive), e.g. `qwen3_5_text`.",
    ),
    AfterValidator(no_nul),
]
LayerKindFilter = Annotated[
    LayerKind | None,
    Query(description="Only models with at least one layer of this kind."),
]
Search = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="Substring of the slug or name (case-insensitive).",
    ),
    AfterValidator(no_nul),
]
MinParameters = Annotated[
    int | None,
    Query(ge=0, le=MAX_PARAMETERS, description="Only models with at least this many."),
]
MaxParameters = Annotated[
    int | None,
    Query(ge=0, le=MAX_PARAMETERS, description="Only models with at most this many."),
]

# --- GPUs

Vendor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=100,
        description="Only this vendor (case-insensitive), e.g. `NVIDIA`.",
    ),
    AfterValidator(no_nul),
]
MinMemoryBytes = Annotated[
    int | None,
    Query(ge=1, le=MAX_MEMORY_BYTES, description="Only GPUs with at least this memory."),
]
MaxPriceUsdPerHour = Annotated[
    float | None,
    Query(
        ge=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="Only GPUs with a reference price at most this (unpriced GPUs are left out).",
    ),
]
Fp8Support = Annotated[
    bool | None, Query(description="Only GPUs with (true) or without (false) native FP8.")
]
