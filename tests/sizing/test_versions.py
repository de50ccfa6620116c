"""Engine release strings are read and ordered as pip orders them (PEP 440).

The oracle is `packaging.version.Version`, the implementation pip itself uses, so every
ordering below is the one an engine's wheel index gives; the released strings are the ones the
issue names, each a real release of vLLM, SGLang or TensorRT-LLM.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from service.sizing.errors import SizingError
from service.sizing.versions import parse_engine_version

RELEASED = [
    "0.10.1.1",  # vLLM 0.10.1.1 (four numbers)
    "0.11.0rc2",  # vLLM pre-release
    "v0.6.3.post1",  # vLLM, as tags spell it
    "0.5.4.post2",  # vLLM / SGLang post-release
    "1.0.0rc3",  # TensorRT-LLM release candidate
    "0.9.2.dev123+g0123abc",  # a vLLM nightly: dev segment and a local git label
    "0.4.9.post3",  # SGLang
    "0.14.0rc1.dev2+g7d9f",  # vLLM build named in ../shared/calibration/engine_logs.json
    "0.19.0.dev2025031800",  # TensorRT-LLM nightly
    "v1.2.0rc6.post2",  # TensorRT-LLM
    "0.17.0.post1",  # TensorRT-LLM
]


@pytest.mark.parametrize("text", RELEASED)
def test_every_released_spelling_is_a_version(text: str) -> None:
    parsed = parse_engine_version(text)
    assert parsed.text == text
    assert parsed.release == Version(text).release


def test_released_versions_sort_as_pip_sorts_them() -> None:
    assert sorted(RELEASED, key=parse_engine_version) == sorted(RELEASED, key=Version)


def test_within_one_release_dev_pre_final_post_order() -> None:
    # PEP 440 "Summary of permitted suffixes and relative ordering".
    chain = ["1.0.dev1", "1.0a1.dev1", "1.0a1", "1.0b2", "1.0rc1", "1.0", "1.0+local", "1.0.post1"]
    parsed = [parse_engine_version(v) for v in chain]
    assert parsed == sorted(parsed)
    assert len(set(parsed)) == len(chain)


def test_trailing_zeros_and_spellings_do_not_make_a_different_release() -> None:
    assert parse_engine_version("1.0") == parse_engine_version("1.0.0")
    assert parse_engine_version("1.0-1") == parse_engine_version("1.0.post1")
    assert parse_engine_version("1.0c1") == parse_engine_version("1.0rc1")
    assert parse_engine_version("V1.1.0RC1") == parse_engine_version("1.1.0rc1")


@pytest.mark.parametrize(
    "text", ["latest", "", "1..0", "0.10.x", "nightly-2025", "1.0+", "1" * 200]
)
def test_what_is_not_a_version_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(SizingError) as refused:
        parse_engine_version(text, field="engine_version")
    assert refused.value.field == "engine_version"


_segment = st.integers(min_value=0, max_value=30)
_versions = st.builds(
    lambda release, pre, post, dev, local: (
        ".".join(map(str, release))
        + (f"{pre[0]}{pre[1]}" if pre else "")
        + (f".post{post}" if post is not None else "")
        + (f".dev{dev}" if dev is not None else "")
        + (f"+{local}" if local else "")
    ),
    st.lists(_segment, min_size=1, max_size=4),
    st.none() | st.tuples(st.sampled_from(["a", "b", "rc"]), _segment),
    st.none() | _segment,
    st.none() | _segment,
    st.none() | st.sampled_from(["g0123abc", "1", "cu121", "abc.5"]),
)


@given(_versions, _versions)
def test_any_two_versions_compare_as_pip_compares_them(left: str, right: str) -> None:
    ours = (parse_engine_version(left), parse_engine_version(right))
    pips = (Version(left), Version(right))
    assert (ours[0] < ours[1]) == (pips[0] < pips[1])
    assert (ours[0] == ours[1]) == (pips[0] == pips[1])


def test_a_parsed_release_is_remembered_and_still_compares_by_pep_440() -> None:
    # parse_engine_version is memoised (a plan parses per candidate): the same string gives
    # the same object, and its sort key, made once, still orders as pip does.
    assert parse_engine_version("0.10.1.1") is parse_engine_version("0.10.1.1")
    assert parse_engine_version("0.11.0rc2") < parse_engine_version("0.11.0")
    assert parse_engine_version("v0.6.3") == parse_engine_version("0.6.3.0")
    assert hash(parse_engine_version("v0.6.3")) == hash(parse_engine_version("0.6.3.0"))
