"""A deployment profile stored without `engine_version` is pinned to the release it was sized as.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

Until now a profile without `engine_version` was sized by whatever release kvplan modelled
newest, so upgrading kvplan could move the `max_num_seqs` an autoscaler reads with nobody
editing the profile. From now on a write stores the concrete release (deployments.service
`_resolved`); this revision gives the profiles stored before it the release they were being
sized as: the newest release each engine's arithmetic was modelled to when it was written
(service/sizing/engines/calibration.py, LATEST_VLLM_VERSION, LATEST_SGLANG_VERSION,
LATEST_TRTLLM_VERSION), kept here as a copy so later releases never change what it writes.
The release is written into the profile's `settings` (its sizing fields), where a release the
profile names itself is kept.

Downgrading changes nothing: a pinned release is a field every earlier revision reads, and
which profiles were pinned here cannot be told from those that named their release.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# The newest release each engine's arithmetic was modelled to when this revision was written.
NEWEST_RELEASES = {"vllm": "0.33.0", "sglang": "0.5.23", "trtllm": "1.2.0"}
_DEFAULT_ENGINE = "vllm"  # planning.schemas.EngineFields.engine

_deployment = sa.table(
    "deployment", sa.column("id", sa.Integer()), sa.column("settings", sa.JSON())
)


def pinned(settings: Any) -> dict[str, Any] | None:
    """The settings with the release they were sized as, or None when they name one already
    (or name an engine kvplan does not know, which no profile can)."""
    values = dict(settings) if isinstance(settings, dict) else {}
    if values.get("engine_version"):
        return None
    release = NEWEST_RELEASES.get(str(values.get("engine") or _DEFAULT_ENGINE))
    if release is None:
        return None
    return {**values, "engine_version": release}


def upgrade() -> None:
    bind = op.get_bind()
    for row in bind.execute(sa.select(_deployment.c.id, _deployment.c.settings)).all():
        settings = pinned(row.settings)
        if settings is not None:
            bind.execute(
                _deployment.update().where(_deployment.c.id == row.id).values(settings=settings)
            )


def downgrade() -> None:
    """Nothing to undo (see the module docstring)."""
