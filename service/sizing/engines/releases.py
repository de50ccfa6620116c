"""The newest release of each engine whose arithmetic kvplan models.

A question without `engine_version` is sized by it (each engine module's `*_release`); a
deployment profile stored without one is pinned to it at write time
(`deployments.service`), so a later kvplan that models a newer release keeps sizing the profile
as it was sized when stored, and says what the newer release would answer.
"""

from __future__ import annotations

from . import calibration

_NEWEST = {
    "vllm": calibration.LATEST_VLLM_VERSION,
    "sglang": calibration.LATEST_SGLANG_VERSION,
    "trtllm": calibration.LATEST_TRTLLM_VERSION,
}


def newest_release(engine: str) -> str:
    """The newest modelled release of `engine` (`vllm`, `sglang`, `trtllm`)."""
    return _NEWEST[engine]
