"""The source page's reading: samples per SASS instruction, summed by opcode (CPU only)."""

import math

from stagelab import ncu_source

PAGE = '''==PROF== Connected to process 1
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed"
"0x7f00","MUFU.EX2 R4, R5 ;","30","20","1,024"
"0x7f10","@!P0 BRA 0x7f00 ;","10","5","512"
"0x7f20","MUFU.EX2 R6, R7 ;","40","38","1,024"
"0x7f30","WARPGROUP.DEPBAR.LE gsb0, 0x0 ;","20","20","64"
'''


def test_each_instruction_is_a_row_with_its_samples():
    rows = ncu_source.parse_source_csv(PAGE)
    assert [r["address"] for r in rows] == ["0x7f00", "0x7f10", "0x7f20", "0x7f30"]
    assert [r["samples"] for r in rows] == [30, 10, 40, 20]
    assert rows[2]["not_issued"] == 38


def test_opcodes_drop_the_predicate_and_the_operands():
    assert ncu_source.opcode("@!P0 BRA 0x7f00 ;") == "BRA"
    assert ncu_source.opcode("WARPGROUP.DEPBAR.LE gsb0, 0x0 ;") == "WARPGROUP.DEPBAR.LE"
    assert ncu_source.opcode("") == ""


def test_samples_are_summed_by_opcode_as_shares_of_the_whole():
    shares = ncu_source.by_opcode(ncu_source.parse_source_csv(PAGE))
    assert shares[0] == ("MUFU.EX2", 70.0, 2)
    assert shares[1] == ("WARPGROUP.DEPBAR.LE", 20.0, 1)
    assert math.isclose(sum(s for _, s, _ in shares), 100.0)


def test_the_summary_lists_the_hottest_instruction_first():
    text = ncu_source.summary_markdown("s9", ncu_source.parse_source_csv(PAGE))
    table = text.split("| address |")[1]
    assert table.index("MUFU.EX2 R6, R7") < table.index("MUFU.EX2 R4, R5")
    assert "| 0x7f20 | 40.0 | 38.0 |" in text


def test_a_page_without_sample_columns_says_so_instead_of_an_empty_table():
    rows = ncu_source.parse_source_csv('"Address","Source"\n"0x0","NOP ;"\n')
    assert rows == []
    assert "no per-instruction samples" in ncu_source.summary_markdown("cudnn", rows)


def test_sampling_profiles_only_the_childs_marked_call():
    command = ncu_source.source_command("ncu", "/tmp/x", ["python3", "child.py"])
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert "SourceCounters" in command and command[-2:] == ["python3", "child.py"]
