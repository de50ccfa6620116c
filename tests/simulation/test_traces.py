"""Public traces read in their own columns (tests/fixtures/traces/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.simulation import SimulationError, csv_trace, mooncake_trace, requests_of, rows_trace

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def test_the_azure_conversation_trace_is_read_in_its_own_columns() -> None:
    trace = csv_trace((TRACES / "azure_conv_2023_head.csv").read_text(encoding="utf-8"))
    assert trace.format == "azure"
    assert len(trace.rows) == 40
    first, second, last = trace.rows[0], trace.rows[1], trace.rows[-1]
    # 2023-11-16 18:15:46.6805900,374,44 then 18:15:50.9951690,396,109: 50.9951690 -
    # 46.6805900 = 4.3145790 s; the 40th row, 18:16:10.8268860: 70.8268860 - 46.6805900 =
    # 24.1462960 s.
    assert (first.arrival_s, first.input_tokens, first.output_tokens) == (0.0, 374, 44)
    assert second.arrival_s == pytest.approx(4.3145790, abs=1e-6)
    assert (second.input_tokens, second.output_tokens) == (396, 109)
    assert last.arrival_s == pytest.approx(24.1462960, abs=1e-6)


def test_mooncake_hashes_become_the_engines_block_hashes() -> None:
    trace = mooncake_trace((TRACES / "mooncake_readme.jsonl").read_text(encoding="utf-8"))
    a, b = requests_of(trace, block_size=16)
    # timestamps 27482 and 30535 ms: 3.053 s apart. 6,955 // 16 = 434 whole blocks of 16
    # tokens, 6,472 // 16 = 404. Both share their first 12 hash ids (46..57, 12 x 512 =
    # 6,144 tokens = 384 blocks of 16); block 384 lies in the 13th 512-token block, 2353 in
    # one and 2366 in the other.
    assert (a.arrival_s, b.arrival_s) == (0.0, pytest.approx(3.053))
    assert a.block_hashes is not None
    assert b.block_hashes is not None
    assert (len(a.block_hashes), len(b.block_hashes)) == (434, 404)
    assert a.block_hashes[:384] == b.block_hashes[:384]
    assert a.block_hashes[384] != b.block_hashes[384]


def test_burstgpt_columns_and_its_failed_rows() -> None:
    # BurstGPT_1.csv's header (HPMLL/BurstGPT data/, the file itself is stored in Git LFS)
    # and the first two rows of the sample its documentation prints (as quoted by the trace
    # readers that load it); the third row, 0 response tokens (a failed request, as in
    # BurstGPT_1.csv, which BurstGPT_without_fails_1.csv drops), is written here: skipped, counted.
    text = (
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,ChatGPT,1087,230,1317,Conversation log\n"
        "50,GPT-4,300,0,300,API log\n"
    )
    trace = csv_trace(text)
    assert trace.format == "burstgpt"
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in trace.rows] == [
        (0.0, 472, 18),
        (40.0, 1087, 230),
    ]
    assert trace.skipped_rows == 1


def test_a_bad_row_is_named() -> None:
    with pytest.raises(SimulationError) as caught:
        rows_trace(
            [
                {"arrival_s": 0, "input_tokens": 10, "output_tokens": 5},
                {"arrival_s": 1, "input_tokens": -3, "output_tokens": 5},
            ]
        )
    assert caught.value.field == "trace[1].input_tokens"
    with pytest.raises(SimulationError) as caught:
        csv_trace("when,prompt,answer\n1,2,3\n")
    assert caught.value.field == "trace"
