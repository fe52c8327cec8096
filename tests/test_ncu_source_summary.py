"""tools/ncu_source_summary.py: the hot loop of an ncu source-page export, and its samples by stall,
opcode and stretch."""

import csv

import pytest

from tool_module import load_tool

COLUMNS = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
           "stall_wait", "stall_barrier", "stall_wait (Not Issued)"]


@pytest.fixture(scope="module")
def tool():
    return load_tool("ncu_source_summary")


def export(path, rows):
    """An ncu --page source --csv file: the kernel's name, the header, one row per instruction."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Kernel Name", "k"])
        writer.writerow(COLUMNS)
        for address, (source, samples, executed, wait, barrier) in enumerate(rows):
            writer.writerow([hex(address), source, samples, executed, wait, barrier, 0])
    return path


def test_the_loop_is_the_anchors_count_with_the_most_samples(tool, tmp_path):
    # an epilogue with more MUFU rows but few samples, and a loop run 100 times
    path = export(tmp_path / "sass.csv", [
        ("MUFU.EX2 R1, R2", 1, 4, 1, 0), ("MUFU.EX2 R3, R4", 1, 4, 1, 0), ("MUFU.RCP R5, R6", 1, 4, 1, 0),
        ("@!P0 BAR.SYNC 0x1, 0x100", 30, 100, 0, 30), ("FFMA R1, R2, R3, R4", 10, 100, 6, 0),
        ("MUFU.EX2 R7, R1", 60, 100, 50, 0), ("FADD R8, R7, R8", 5, 99, 5, 0),
    ])
    header, rows = tool.read_rows(path)
    loop = tool.loop_rows(header, rows, "MUFU")
    assert [row[1] for row in loop] == ["@!P0 BAR.SYNC 0x1, 0x100", "FFMA R1, R2, R3, R4", "MUFU.EX2 R7, R1"]
    text = tool.summary(header, loop, stretch=2)
    assert "3 instructions in the loop, 100 samples" in text
    assert "| wait | 0.560 |" in text and "| barrier | 0.300 |" in text  # the Not Issued column is not a stall
    assert "| MUFU | 0.600 | wait 0.500 |" in text  # samples of the opcode; its stalls as counted
    assert "| BAR | 0.300 | barrier 0.300 |" in text  # a predicated instruction counts as its opcode
    assert "| 0-1 | 0.400 | BAR 1 FFMA 1 |" in text and "| 2-2 | 0.600 | MUFU 1 |" in text


def test_an_export_without_samples_or_anchor_is_refused(tool, tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text('"Address","Source"\n"0x0","NOP"\n')
    with pytest.raises(SystemExit, match="export with --page source --csv"):
        tool.read_rows(plain)
    path = export(tmp_path / "sass.csv", [("FFMA R1, R2, R3, R4", 1, 1, 1, 0)])
    header, rows = tool.read_rows(path)
    with pytest.raises(SystemExit, match="no MUFU instruction"):
        tool.loop_rows(header, rows, "MUFU")
