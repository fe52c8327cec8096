"""The source page's reading: samples per SASS instruction, summed by opcode (CPU only)."""

import math

from stagelab.measure import ncu_source

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"Instructions Executed","stall_barrier","stall_wait","stall_barrier (Not Issued)","stall_wait (Not Issued)"')
ROWS = """"0x7f00","MUFU.EX2 R4, R5 ;","30","20","1,024","0","25","0","18"
"0x7f10","@!P0 BRA 0x7f00 ;","10","5","512","0","2","0","1"
"0x7f20","MUFU.EX2 R6, R7 ;","40","38","1,024","0","38","0","36"
"0x7f30","WARPGROUP.DEPBAR.LE gsb0, 0x0 ;","20","20","64","20","0","20","0"
"""
# The shape of CUDA 13.0's ncu source page: a block per kernel, each printed twice.
KERNEL = '"Kernel Name","void attention_kernel<(int)128>(Params)",'
PAGE = "==PROF== Connected to process 1\n" + "\n".join([KERNEL, HEADER, ROWS] * 2)


def rows_of(page: str) -> list[dict]:
    """Every kernel's instruction rows, concatenated."""
    return [row for _, rows in ncu_source.parse_source_page(page) for row in rows]


def test_each_instruction_is_a_row_with_its_samples():
    rows = rows_of(PAGE)  # the repeated block is not read twice
    assert [r["address"] for r in rows] == ["0x7f00", "0x7f10", "0x7f20", "0x7f30"]
    assert [r["samples"] for r in rows] == [30, 10, 40, 20]
    assert rows[2]["not_issued"] == 38


def test_opcodes_drop_the_predicate_and_the_operands():
    assert ncu_source.opcode("@!P0 BRA 0x7f00 ;") == "BRA"
    assert ncu_source.opcode("WARPGROUP.DEPBAR.LE gsb0, 0x0 ;") == "WARPGROUP.DEPBAR.LE"
    assert ncu_source.opcode("") == ""


def test_samples_are_summed_by_opcode_as_shares_of_the_whole():
    shares = ncu_source.by_opcode(rows_of(PAGE))
    assert shares[0] == ("MUFU.EX2", 70.0, 2)
    assert shares[1] == ("WARPGROUP.DEPBAR.LE", 20.0, 1)
    assert math.isclose(sum(s for _, s, _ in shares), 100.0)


def test_the_summary_lists_the_hottest_instruction_first():
    text = ncu_source.summary_markdown("s9", ncu_source.parse_source_page(PAGE))
    table = text.split("| address |")[1]
    assert table.index("MUFU.EX2 R6, R7") < table.index("MUFU.EX2 R4, R5")
    assert "| 0x7f20 | 40.0 | 38.0 | wait 38.0 |" in text


def test_a_page_without_sample_columns_says_so_instead_of_an_empty_table():
    kernels = ncu_source.parse_source_page('"Address","Source"\n"0x0","NOP ;"\n')
    assert kernels == []
    assert "no per-instruction samples" in ncu_source.summary_markdown("cudnn", kernels)


def test_a_kernel_printed_twice_counts_once_and_keeps_its_name():
    kernels = ncu_source.parse_source_page(PAGE)
    assert [name for name, _ in kernels] == ["void attention_kernel<(int)128>(Params)"]
    assert len(kernels[0][1]) == 4


def test_two_kernels_stay_apart():
    other = '"Kernel Name","transpose_v_kernel",\n' + HEADER + '\n"0x10","NOP ;","5","5","8","0","5","0","5"\n'
    kernels = ncu_source.parse_source_page(KERNEL + "\n" + HEADER + "\n" + ROWS + other)
    assert [len(rows) for _, rows in kernels] == [4, 1]


def test_stall_reasons_are_read_per_instruction_and_summed_by_opcode():
    rows = rows_of(PAGE)
    assert rows[0]["reasons"] == {"barrier": 0, "wait": 25} and rows[0]["executed"] == 1024
    assert ncu_source.top_reasons(rows[3]) == [("barrier", 20)]
    assert ncu_source.reason_shares(rows) == [("wait", 65.0, "MUFU.EX2"), ("barrier", 20.0, "WARPGROUP.DEPBAR.LE")]


def test_sampling_profiles_only_the_childs_marked_call():
    command = ncu_source.source_command("ncu", "/tmp/x", ["python3", "child.py"])
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert "SourceCounters" in command and command[-2:] == ["python3", "child.py"]
