"""Engine release strings, read and ordered the way the engines' own packages are: PEP 440.

vLLM, SGLang and TensorRT-LLM publish wheels whose versions follow PEP 440
(https://peps.python.org/pep-0440/): `0.10.1.1`, `0.11.0rc2`, `v0.6.3.post1`, `0.5.4.post2`,
`1.0.0rc3`, `0.9.2.dev123+g0123abc`. pip orders them by the rules of the PEP's "Version scheme"
and "Summary of permitted suffixes and relative ordering" sections, restated here:

- `[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local]`, case-insensitive, with an optional leading
  `v`; `-`, `_` and `.` separate the parts interchangeably, and a missing number is 0
  ("Normalization"); `alpha`, `beta`, `c`, `pre`, `preview` spell `a`, `b`, `rc`, `rc`, `rc`;
  `-N` alone is a post-release;
- releases compare as numbers with trailing zeros ignored (`1.0` == `1.0.0`);
- within one release: `.devN` < `aN` < `bN` < `rcN` < the final release < `.postN`; a
  pre-release's own `.devN` comes before it, a post-release's after the post without it;
- a local label (`+g0123abc`) sorts after the same version without one.

kvplan sizes a release by the rules of the newest release it models that is not newer than the
one asked (each engine module's `*_release(version)`), so `0.11.0rc2` gets 0.10's arithmetic
and `0.10.1.1` gets 0.10.1's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache, total_ordering

from .errors import SizingError

_PRE_SPELLINGS = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc"}
_PRE_SPELLINGS |= {"pre": "rc", "preview": "rc"}
_PRE_RANK = {"a": 0, "b": 1, "rc": 2}

_PEP440 = re.compile(
    r"""
    v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?:-(?P<post_implicit>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n>[0-9]+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    """,
    re.VERBOSE,
)
# Bounds keep a pathological string from building a huge key: real releases have at most five
# numbers (0.10.1.1) of at most ten digits (0.19.0.dev2025031800).
_MAX_TEXT = 128
_MAX_DIGITS = 20

# Sort sentinels: a missing pre-release sorts after every pre-release, a missing post-release
# before every post-release, a missing dev segment after every dev release.
_INFINITY = (1 << 62, 0)
_NEG_INFINITY = (-1, 0)


@total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class EngineVersion:
    """One parsed release string; compares as pip compares the same strings."""

    text: str
    epoch: int
    release: tuple[int, ...]
    pre: tuple[str, int] | None = None
    post: int | None = None
    dev: int | None = None
    local: tuple[int | str, ...] = ()
    # PEP 440's order as a tuple, made once: a plan compares versions for every candidate.
    sort_key: tuple[object, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sort_key", _sort_key(self))

    @property
    def major_minor_patch(self) -> tuple[int, int, int]:
        numbers = (*self.release, 0, 0)
        return numbers[0], numbers[1], numbers[2]

    @property
    def is_prerelease(self) -> bool:
        return self.pre is not None or self.dev is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EngineVersion):
            return NotImplemented
        return self.sort_key == other.sort_key

    def __lt__(self, other: EngineVersion) -> bool:
        return self.sort_key < other.sort_key

    def __hash__(self) -> int:
        return hash(self.sort_key)

    def __str__(self) -> str:
        return self.text


def _sort_key(version: EngineVersion) -> tuple[object, ...]:
    release = list(version.release)
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    pre: tuple[int, int]
    if version.pre is not None:
        pre = (_PRE_RANK[version.pre[0]], version.pre[1])
    elif version.post is None and version.dev is not None:
        pre = _NEG_INFINITY  # 1.0.dev1 comes before 1.0a1
    else:
        pre = _INFINITY
    post = _NEG_INFINITY if version.post is None else (version.post, 0)
    dev = _INFINITY if version.dev is None else (version.dev, 0)
    # Local segments: numbers sort after strings, and a longer label after its prefix.
    local = tuple(
        (1, part, "") if isinstance(part, int) else (0, 0, part) for part in version.local
    )
    return (version.epoch, tuple(release), pre, post, dev, local)


# Memoised: a plan parses the asked and the newest release once per candidate layout, and the
# release strings a replica is asked about are few. A refusal raises and is not remembered.
@lru_cache(maxsize=256)
def parse_engine_version(
    text: str, field: str = "engine_version", engine: str = "release"
) -> EngineVersion:
    """A PEP 440 release string; anything else is refused, naming `field` (and the engine)."""
    cleaned = text.strip().lower()
    match = _PEP440.fullmatch(cleaned) if len(cleaned) <= _MAX_TEXT else None
    if match is None or any(len(n) > _MAX_DIGITS for n in re.findall(r"[0-9]+", cleaned)):
        raise SizingError(
            field,
            f"not a {engine} version (PEP 440, like 0.10.1.1, 0.11.0rc2 or v0.6.3.post1): {text!r}",
        )
    pre = None
    if match["pre_l"] is not None:
        pre = (_PRE_SPELLINGS[match["pre_l"]], int(match["pre_n"] or 0))
    post = None
    if match["post_implicit"] is not None:
        post = int(match["post_implicit"])
    elif match["post_l"] is not None:
        post = int(match["post_n"] or 0)
    local: tuple[int | str, ...] = ()
    if match["local"] is not None:
        local = tuple(int(p) if p.isdigit() else p for p in re.split(r"[-_.]", match["local"]))
    return EngineVersion(
        text=text.strip(),
        epoch=int(match["epoch"] or 0),
        release=tuple(int(p) for p in match["release"].split(".")),
        pre=pre,
        post=post,
        dev=None if match["dev_l"] is None else int(match["dev_n"] or 0),
        local=local,
    )


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
