"""Numbers for people (core.formatting): never scientific notation, on a page or in a summary."""

import math
import re

import pandas as pd
import pytest

from stagelab.core.formatting import (csv_cells, fixed, fixed_numbers, latency, markdown, markdown_as_recorded, number,
                                      plain, rate, scientific_notation, short_commit, table)

SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


@pytest.mark.parametrize("value, text", [
    (5383.2, "5383"), (999.6, "1000"), (123.456, "123"), (1.2, "1.2"), (10.0, "10"), (0.105, "0.105"),
    (0.0123, "0.0123"), (5.63e-05, "<0.01"), (-3e-5, ">-0.01"), (0.0, "0"), (math.nan, "–"), (None, "–"),
    (2.5e12, "2500000000000"), (3.57e28, "35700000000000000000000000000"),
])
def test_number_has_three_significant_digits_and_no_exponent(value, text):
    assert number(value) == text


def test_a_latency_reads_in_us_or_ms():
    assert latency(5.384) == "5.38 µs"
    assert latency(538.4) == "538 µs"
    assert latency(5383.0) == "5.38 ms"
    assert latency(math.nan) == "–"


@pytest.mark.parametrize("value, text", [
    (589.4, "589"), (100.0, "100"), (99.96, "100"), (45.67, "45.7"), (0.0123, "0.0123"), (0.0000874, "0.0000874"),
    (0.0, "0"), (math.nan, "–"), (None, "–"),
])
def test_a_rate_is_whole_from_100_and_keeps_three_digits_below(value, text):
    """A tiny problem's TFLOP/s once read 0."""
    assert rate(value) == text


def test_columns_by_their_unit():
    frame = pd.DataFrame({
        "stage": ["s0", "s1"],
        "p50 (cold, µs)": [5.38, 5383.0],           # one unit per column: µs, since not all reach 1 ms
        "long p50 (µs)": [5383.0, 12345.6],         # every value past 1000 µs: the column reads in ms
        "TFLOP/s (throughput)": [589.4, math.nan],  # integers, a dash where there is none
        "max smem (B)": [49152.0, 232448.0],        # KiB
        "vs flash": [5.63e-05, 1.234],
        "mission_p50_us": [5.5, 7.25],
        "total_spill_bytes": [0, 0],
        "duration_s": [5.4e-06, 2.5e-3],            # seconds read as a latency
        "reused": [True, False],                    # not numbers: as they are
    })
    shown = table(frame)
    assert list(shown.columns) == ["stage", "p50 (cold, µs)", "long p50 (ms)", "TFLOP/s (throughput)", "max smem (KiB)",
                                   "vs flash", "mission_p50_us", "total_spill_kib", "duration_us", "reused"]
    assert shown.iloc[0].tolist() == ["s0", "5.38", "5.38", "589", "48", "<0.01", "5.5", "0", "5.4", "True"]
    assert shown.iloc[1].tolist() == ["s1", "5383", "12.3", "–", "227", "1.23", "7.25", "0", "2500", "False"]


def test_a_markdown_table_has_no_scientific_notation():
    frame = pd.DataFrame({"stage": ["a", "b", "c"], "x": [5.38e3, 5.63e-05, 1e20], "p50 (µs)": [1e-7, 3e4, 12.0]})
    text = markdown(frame)
    assert not SCIENTIFIC.search(text), text
    assert "nan" not in text


def test_the_results_page_has_no_scientific_notation(tmp_store, tmp_path):
    """The per-problem table once printed 5.38e+03 and 5.63e-05; the page's commits read 6123e17696 and the
    runs' CSV a tag's `1e9 too long` as stored."""
    from stagelab.core import metrics as m
    from stagelab.record import tracking
    from stagelab.record.report import write_report

    experiment_id = tracking.init_store("stagelab-sdpa")
    run_id = tracking.create_run(experiment_id, "s0_baseline", "acceptance")
    tracking.set_tags(run_id, {"outcome": "pass", "gpu": "Test GPU 3", "stagelab.retracted": "ncu: 1e9 too long",
                               "git_commit": "6123e17696f07a8d58dc9c39dd661976f94a6593"})
    tracking.log_metrics(run_id, {m.MISSION_P50_US.key(): 5383.0, m.P50_US.key("2x8x512x64"): 5383.0,
                                  m.TFLOPS.key("2x8x512x64"): 0.0123, m.speedup("flash").key("2x8x512x64"): 5.63e-05,
                                  m.MAX_SHARED_MEMORY.key(): 232448.0})
    tracking.end_run(run_id)
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    assert "mission p50 (ms)" in text and "| 5.38 " in text and "<0.01" in text and "(KiB)" in text
    assert "Runs from commit(s) g6123e17;" in text and not scientific_notation(text), text
    runs_csv = next(tmp_path.glob("*.runs.csv")).read_text()  # the runs behind the page, every digit kept
    cells = runs_csv.replace("\n", ",").split(",")
    assert "0.0000563" in cells and "ncu: 1000000000 too long" in cells and not scientific_notation(runs_csv), runs_csv
    assert "6123e17696f07a8d58dc9c39dd661976f94a6593" in cells  # the tag as recorded: a full hash is no number


@pytest.mark.parametrize("value, text", [(3.66e4, "36600"), (5.58e-4, "0.000558"), (6.44, "6.44"), (0.0361, "0.0361"),
                                         (1.06e37, "106" + "0" * 35), (-2.5e-7, "-0.00000025"), (math.inf, "inf")])
def test_fixed_keeps_three_significant_digits_at_any_size(value, text):
    assert fixed(value) == text


def test_as_recorded_every_digit_stays_and_none_is_scientific():
    assert plain(1e-05) == "0.00001" and plain(0.0067828940) == "0.006782894" and plain(2.5) == "2.5"
    table_text = markdown_as_recorded(pd.DataFrame({"x": [1e-05, 1e20], "label": ["a", 3e-7]}))
    assert "0.00001" in table_text and "0.0000003" in table_text and not SCIENTIFIC.search(table_text)


def test_numbers_an_older_formatter_wrote_in_text_read_fixed():
    text = "differ by 3.66e+04 (race?); 1e-05 over budget; s8e4, sm_90a and 2x8x512x64 unchanged"
    assert fixed_numbers(text) == "differ by 36600 (race?); 0.00001 over budget; s8e4, sm_90a and 2x8x512x64 unchanged"


@pytest.mark.parametrize("commit, label", [
    ("6123e17696f07a8d58dc9c39dd661976f94a6593", "g6123e17"),  # reads 6.123e20 when written bare
    ("6123e17", "g6123e17"), ("g6123e17", "g6123e17"), ("abc1234567", "gabc1234"),
    ("unknown", "unknown"), ("", "unknown"), (None, "unknown"), (float("nan"), "unknown"),
])
def test_a_commit_reads_as_git_describe_writes_it_never_as_a_number(commit, label):
    assert short_commit(commit) == label and not scientific_notation(label)


def test_text_keeps_its_digits_and_loses_every_scientific_token():
    """A stored tag a person wrote (`1e9 too long`), a conclusion naming a commit bare, a float's repr:
    rewritten with the digits they were written with; names that only look so (a kernel tag's digest
    after its dot, s8e4) stay."""
    text = ("1e9 too long, fixed at 61870e5. err 7.012881413814842e-05, 0.00e+00 of 2.5e+38; "
            "W..8611e38319 and s8e4 stay")
    assert scientific_notation(text) == ["1e9", "61870e5", "7.012881413814842e-05", "0.00e+00", "2.5e+38"]
    assert fixed_numbers(text) == ("1000000000 too long, fixed at g61870e5. err 0.00007012881413814842, 0.00 of "
                                   "250000000000000000000000000000000000000; W..8611e38319 and s8e4 stay")
    assert scientific_notation(fixed_numbers(text)) == []
    assert fixed_numbers("9e9999 is no float") == "9e9999 is no float"  # not expanded to ten thousand digits


def test_csv_cells_write_every_digit_in_fixed_notation_and_leave_gaps_empty():
    frame = pd.DataFrame({"metric": [7.012881413814842e-05, math.nan], "tag": ["1e9 too long", None], "n": [3, 4]})
    text = csv_cells(frame).to_csv(index=False)
    assert text.splitlines() == ["metric,tag,n", "0.00007012881413814842,1000000000 too long,3", ",,4"]
