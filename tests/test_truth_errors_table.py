"""tools/truth_errors_table.py: a 16-bit and an 8-bit stage run's correctness.csv side by side against
float64 truth, per distribution."""

import pandas as pd
import pytest

from stagelab.core.formatting import scientific_notation
from tool_module import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("truth_errors_table")


def int8_rows():
    rows = []
    for seed, scale in ((0, 1.0), (1, 3.0)):
        for distribution in ("normal", "outlier"):
            rows.append({"shape": "2x8x2048x64", "seed": seed, "distribution": distribution,
                         "err_vs_truth": 0.01 * scale, "recipe_err_vs_truth": 0.009 * scale,
                         "fa3_fp8_err_vs_truth": 0.03 * scale, "baseline_err_vs_truth": 1e-5 * scale})
    return pd.DataFrame(rows)


def fp16_rows():
    return pd.DataFrame([{"shape": "2x8x2048x64", "seed": seed, "distribution": "normal", "max_abs_err": err}
                         for seed, err in ((0, 2e-4), (1, 1e-4))])


def test_each_cell_is_the_largest_over_seeds_and_unchecked_distributions_say_so(tool):
    frame = tool.truth_errors(fp16_rows(), int8_rows())
    table = frame.set_index("distribution")
    assert table.loc["normal", "fp16 stage"] == pytest.approx(2e-4)
    assert table.loc["normal", "8-bit stage"] == pytest.approx(0.03)
    assert table.loc["outlier", "FA3 FP8 recipe (emulated)"] == pytest.approx(0.09)
    text = tool.markdown(frame)
    outlier_line = next(line for line in text.splitlines() if "outlier" in line)
    assert "not checked" in outlier_line and "0.00003" in text and not scientific_notation(text), text


def test_a_csv_of_the_wrong_kind_is_refused_with_what_it_lacks(tool, tmp_path, capsys):
    fp16, int8 = tmp_path / "fp16.csv", tmp_path / "int8.csv"
    fp16_rows().to_csv(fp16, index=False)
    fp16_rows().to_csv(int8, index=False)
    assert tool.main([str(fp16), str(int8)]) == 2
    assert "the 8-bit CSV lacks" in capsys.readouterr().err


def test_the_copies_hold_no_scientific_notation(tool, tmp_path, capsys):
    fp16, int8 = tmp_path / "s18.csv", tmp_path / "s19.csv"
    fp16_rows().to_csv(fp16, index=False)
    int8_rows().to_csv(int8, index=False)
    assert tool.main([str(fp16), str(int8), "--gpu", "NVIDIA H200", "--copy-to", str(tmp_path / "copies")]) == 0
    assert "on NVIDIA H200" in capsys.readouterr().out
    for name in ("s18.csv", "s19.csv"):
        text = (tmp_path / "copies" / name).read_text()
        assert not scientific_notation(text) and pd.read_csv(tmp_path / "copies" / name).shape[0] > 0, text
