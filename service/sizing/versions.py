"""Engine release strings, read and ordered the way the engines' own packages are: PEP 440.

vLLM, SGLang and TensorRT-LLM publish wheels whose versions follow PEP 440
(https://peps.python.org/pep-0440/): `0.10.1.1`, `0.11.0rc2`, `v0.6.3.post1`, `0.5.4.post2`,
`1.0.0rc3`, `0.9.2.dev123+g0123abc`. They are read by `packaging.version.Version`, PyPA's own
implementation of the PEP and the ordering pip uses (packaging's `version.py`, `Version` and
its `_cmpkey`): spellings normalised, trailing zeros ignored, `.devN` < `aN` < `bN` < `rcN` <
the final release < `.postN`, a local label after the same version without one.

kvplan sizes a release by the rules of the newest release it models that is not newer than the
one asked (each engine module's `*_release(version)`), so `0.11.0rc2` gets 0.10's arithmetic
and `0.10.1.1` gets 0.10.1's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache, total_ordering

from packaging.version import InvalidVersion, Version

from .errors import SizingError

# Bounds keep a pathological string from building a huge key: real releases have at most five
# numbers (0.10.1.1) of at most ten digits (0.19.0.dev2025031800).
_MAX_TEXT = 128
_MAX_DIGITS = 20


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class EngineVersion:
    """One release string as written, and its PEP 440 reading; compares as pip compares."""

    text: str
    version: Version = field(repr=False)

    @property
    def epoch(self) -> int:
        return self.version.epoch

    @property
    def release(self) -> tuple[int, ...]:
        return self.version.release

    @property
    def pre(self) -> tuple[str, int] | None:
        """(`a`, `b` or `rc`, number): `alpha`, `c`, `preview` and the rest normalised."""
        return self.version.pre

    @property
    def post(self) -> int | None:
        return self.version.post

    @property
    def dev(self) -> int | None:
        return self.version.dev

    @property
    def major_minor_patch(self) -> tuple[int, int, int]:
        numbers = (*self.release, 0, 0)
        return numbers[0], numbers[1], numbers[2]

    @property
    def is_prerelease(self) -> bool:
        return self.version.is_prerelease

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EngineVersion):
            return NotImplemented
        return self.version == other.version

    def __lt__(self, other: EngineVersion) -> bool:
        return self.version < other.version

    def __hash__(self) -> int:
        return hash(self.version)

    def __str__(self) -> str:
        return self.text


# Memoised: a plan parses the asked and the newest release once per candidate layout, and the
# release strings a replica is asked about are few. A refusal raises and is not remembered.
@lru_cache(maxsize=256)
def parse_engine_version(
    text: str, field: str = "engine_version", engine: str = "release"
) -> EngineVersion:
    """A PEP 440 release string; anything else is refused, naming `field` (and the engine)."""
    cleaned = text.strip()
    version = None
    if len(cleaned) <= _MAX_TEXT and all(
        len(n) <= _MAX_DIGITS for n in re.findall(r"[0-9]+", cleaned)
    ):
        try:
            version = Version(cleaned)
        except InvalidVersion:
            version = None
    if version is None:
        raise SizingError(
            field,
            f"not a {engine} version (PEP 440, like 0.10.1.1, 0.11.0rc2 or v0.6.3.post1): {text!r}",
        )
    return EngineVersion(text=cleaned, version=version)


# A number no engine release reaches: the "any patch" of a predecessor release tuple.
_ANY = 1 << 30


def modelled_release(version: EngineVersion, width: int) -> tuple[int, ...]:
    """The release numbers (`width` of them) whose rules size `version`.

    kvplan's rules change only at final releases named by their first `width` numbers (every
    milestone in engines/calibration.py is one), so a release is sized by the newest such
    release not newer than it: `0.10.1.1` by 0.10.1, `v0.6.3.post1` by 0.6.3. A pre-release or
    dev build of X.Y.Z comes before X.Y.Z (PEP 440), so it gets the rules of everything before
    X.Y.Z: the tuple just below (X, Y, Z), e.g. (0, 10, _ANY) for `0.11.0rc2`, which is at
    least every milestone before 0.11.0 and below 0.11.0 itself.
    """
    numbers = (*version.release, *([0] * width))[:width]
    beyond = any(version.release[width:])  # 0.10.1.1rc1 is still after 0.10.1
    if not version.is_prerelease or beyond:
        return numbers
    return predecessor(numbers)


def predecessor(numbers: tuple[int, ...]) -> tuple[int, ...]:
    """The greatest tuple below `numbers` whose parts are under _ANY (itself for all zeros)."""
    for i in range(len(numbers) - 1, -1, -1):
        if numbers[i] > 0:
            return (*numbers[:i], numbers[i] - 1, *([_ANY - 1] * (len(numbers) - i - 1)))
    return numbers


def release_label(numbers: tuple[int, ...]) -> str:
    """`0.10.1`; a predecessor's open part reads `x` (`0.10.x`: every 0.10 release)."""
    return ".".join("x" if n == _ANY - 1 else str(n) for n in numbers)


def sizing_note(engine: str, asked: EngineVersion, modelled: str, newest: str) -> str | None:
    """What the answer says when the release sized is not the one asked; None when it is."""
    if asked > parse_engine_version(newest):
        return (
            f"{engine} {asked.text} is newer than the newest release kvplan models ({newest}); "
            f"it is sized as {newest}"
        )
    if asked.is_prerelease:
        final = ".".join(str(n) for n in asked.release)
        return (
            f"{engine} {asked.text} is a pre-release of {final} (PEP 440 orders it before "
            f"{final}); it is sized by the releases before it ({modelled})"
        )
    return None
