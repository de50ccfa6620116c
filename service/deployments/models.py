"""The deployment profile table. The schema changes only through Alembic (migrations/)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String
from sqlmodel import Field, SQLModel

from ..catalog.models import UtcDateTime, utcnow


class DeploymentRow(SQLModel, table=True):
    """One serving deployment as kvplan sizes it: what runs where, with which engine flags."""

    __tablename__ = "deployment"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_type=String(100), unique=True, index=True, nullable=False)
    # Catalog slugs, resolved against the catalog snapshot whenever the profile is sized.
    model: str = Field(sa_type=String(100), nullable=False)
    gpu: str = Field(sa_type=String(100), nullable=False)
    # The Kubernetes workload it describes (optional): namespace and Deployment name.
    namespace: str | None = Field(default=None, sa_type=String(63))
    workload: str | None = Field(default=None, sa_type=String(253))
    replicas: int | None = Field(default=None)
    # The calibration (service.engine_logs) the profile is sized with, if it names one. RESTRICT:
    # a calibration a profile points at cannot be deleted (engine_logs.calibrations.delete says
    # which profiles), so an autoscaler's figures never change or vanish behind its back.
    calibration_id: int | None = Field(
        default=None, foreign_key="calibration.id", ondelete="RESTRICT", index=True
    )
    # The sizing fields (planning.schemas.CapacityFields) the profile sets, defaults left out:
    # a flag added to the engine fields needs no migration, and a default stays the engine's.
    settings: dict[str, Any] = Field(default_factory=dict, sa_type=JSON, nullable=False)
    revision: int = Field(default=1, nullable=False)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UtcDateTime, nullable=False)
