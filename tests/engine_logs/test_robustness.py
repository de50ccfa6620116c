"""Whatever is pasted, the parser answers or says it recognised nothing: never another error
(the endpoint must answer 422, never 500)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.engine_logs import LogNotRecognised, parse_engine_log

from .calibration import load_entries

LINES = sorted({line for e in load_entries() for line in e["quote"].split("\n") if line})
FAST = settings(max_examples=200, deadline=None)


def _parses_or_not_recognised(text: str) -> None:
    try:
        parsed = parse_engine_log(text)
    except LogNotRecognised:
        return
    assert parsed.recognised_lines
    assert parsed.engine in ("vllm", "sglang", "trtllm")


@FAST
@given(st.text())
def test_any_text(text: str) -> None:
    _parses_or_not_recognised(text)


@FAST
@given(
    st.lists(
        st.tuples(
            st.sampled_from(LINES),
            st.integers(min_value=0, max_value=400),
            st.text(max_size=12),
        ),
        max_size=12,
    )
)
def test_real_lines_cut_and_spliced(pieces: list[tuple[str, int, str]]) -> None:
    # Real lines cut at any point and glued to arbitrary text: half a figure, a lone bracket,
    # a number without its unit.
    text = "\n".join(line[:cut] + junk for line, cut, junk in pieces)
    _parses_or_not_recognised(text)
