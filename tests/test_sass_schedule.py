"""The issue stalls read from a cuobjdump listing (stagelab.core.sass_schedule) and
tools/sass_stalls.py's table, on listings written here with known control words."""

import pytest
from tool_module import load_tool

from stagelab.core.sass_schedule import STALL_SHIFT, functions, summarize

KERNEL = ("_ZN13sdpa_warpspec15warpspec_kernelI6__halfLi64ENS_5QRingINS_6ConfigILi2ELi128ELi3ELb1ELb1ELi1ELi24"
          "ELi240EEEEELb1ELb1EEEvNS_6ParamsE")
# the second word's other control bits (barriers, reuse) set, to show they are not read as the stall
OTHER_CONTROL_BITS = 0x000FC00000000000


def _instruction(address: int, text: str, stall: int) -> str:
    second = OTHER_CONTROL_BITS | (stall << STALL_SHIFT)
    return (f"        /*{address:04x}*/                   {text} ;   /* 0x0000005800587308 */\n"
            f"                                                      /* 0x{second:016x} */")


def _listing(body: list[tuple[str, int]], name: str = KERNEL) -> str:
    lines = ["", "\tcode for sm_90a", f"\t\tFunction : {name}", "\t.headerflags\t@\"EF_CUDA_SM90\""]
    lines += [_instruction(16 * i, text, stall) for i, (text, stall) in enumerate(body)]
    return "\n".join(lines) + "\n"


SOFTMAX_TAIL = [("FFMA R26, R170, R26, -R171", 1), ("MUFU.EX2 R62, R62", 8), ("MUFU.EX2 R63, R63", 8),
                ("MUFU.EX2 R26, R26", 1), ("FADD R188, R62, R63", 2), ("@P1 MUFU.EX2 R27, R27", 8),
                ("MUFU.EX2 R30, R30", 1), ("F2FP.F16.F32.PACK_AB R125, R92, R125", 3)]


def test_the_stall_count_is_read_from_the_control_word():
    insts = functions(_listing(SOFTMAX_TAIL))[KERNEL]
    assert [i.stall for i in insts] == [s for _, s in SOFTMAX_TAIL]
    assert [i.address for i in insts[:3]] == [0, 16, 32]
    assert insts[5].opcode == "MUFU.EX2" and insts[5].text.startswith("@P1"), "a predicate is not the opcode"
    assert insts[7].opcode == "F2FP.F16.F32.PACK_AB"


def test_back_to_back_exponentials_and_the_cycles_their_warp_loses():
    summary = summarize(KERNEL, functions(_listing(SOFTMAX_TAIL))[KERNEL])
    assert summary.instructions == 8 and summary.watched == 5
    assert summary.stall_cycles == sum(s for _, s in SOFTMAX_TAIL)
    # R62 -> R63 (8), R63 -> R26 (8), R27 -> R30 (8): each loses 7 cycles beyond its own issue
    assert summary.back_to_back == 3 and summary.idle_cycles == 21
    assert summarize(KERNEL, functions(_listing(SOFTMAX_TAIL))[KERNEL], "FADD").back_to_back == 0


def test_a_listing_cut_after_a_first_word_is_refused():
    listing = _listing(SOFTMAX_TAIL[:1]).splitlines()
    broken = "\n".join(listing[:-1] + ["        /*0010*/   NOP ;   /* 0x0000000000007918 */", "garbage"])
    with pytest.raises(ValueError, match="control word"):
        functions(broken)


def test_the_tool_names_the_kernels_by_their_template_arguments(tmp_path, capsys):
    tool = load_tool("sass_stalls")
    assert tool.short_name(KERNEL) == "half d64 QRing wgs2 n128 s3 pingpong persistent causal"
    negative = KERNEL.replace("ELb1ELb1EEEvNS_6Params", "ELb0ELb0EEEvNS_6Params")
    assert tool.short_name(negative) == "half d64 QRing wgs2 n128 s3 pingpong persistent scale<0"
    assert tool.short_name("_Z10some_otherPf") == "_Z10some_otherPf"
    listing = tmp_path / "s.sass.txt"
    listing.write_text(_listing(SOFTMAX_TAIL) + _listing([("FFMA R1, R2, R3, R4", 1)], "_Z5otherv"))
    assert tool.main(["s17_interleaved_softmax", "--listing", str(listing), "--kernel", "Li64E"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2] == "| half d64 QRing wgs2 n128 s3 pingpong persistent causal | 8 | 32 | 5 | 3 | 21 |"
    assert len(rows) == 3, "--kernel keeps only the kernels whose name holds its text"
    with pytest.raises(SystemExit, match="no kernel"):
        tool.main(["s17_interleaved_softmax", "--listing", str(listing), "--kernel", "__halfLi128E"])
