"""A kernel's main loop read from a cuobjdump listing (stagelab.core.sass_loops) and
tools/sass_loops.py's comparison of two builds, on listings written here."""

from tool_module import load_tool

from stagelab.core.sass_loops import compare_listings, loops, main_loop, match_key, summarize_loop
from stagelab.core.sass_schedule import functions
from test_sass_schedule import KERNEL, _listing

STREAM_K_KERNEL = KERNEL.replace("ENS_5QRingI", "ENS_11StreamKTailINS_5QRingI")


def _body(main: list[str], epilogue: list[str] | None = None) -> list[tuple[str, int]]:
    """A prologue, a main loop closed by a backward branch to 0x0010, and an optional epilogue
    loop back to the main loop's end (shorter, a wgmma among stores)."""
    body = ["S2R R0, SR_TID.X", *main]
    body.append("@P0 BRA 0x10")  # back to the main loop's first instruction (address 16)
    end = 16 * len(body)
    for text in epilogue or []:
        body.append(text)
    if epilogue:
        body.append(f"@P1 BRA {hex(end)}")
    body.append("EXIT")
    return [(text, 1) for text in body]


MAIN = ["BAR.SYNC.DEFER_BLOCKING R5, 0x100", "UIADD3 UR4, UR4, 0x1, URZ", "WARPGROUP.ARRIVE",
        "HGMMA.64x128x16.F32 R24, gdesc[UR8], RZ, !UPT", "FMUL R88, R88, R176", "MUFU.EX2 R62, R62",
        "MUFU.EX2 R63, R63", "@!P2 BRA 0x200"]  # a forward branch inside is no loop


def _loop_of(body):
    return main_loop(functions(_listing(body))[KERNEL])


def test_a_backward_branch_closes_a_loop_and_a_forward_one_does_not():
    found = loops(functions(_listing(_body(MAIN)))[KERNEL])
    assert len(found) == 1
    assert found[0].start == 16 and len(found[0].instructions) == len(MAIN) + 1


def test_the_main_loop_issues_wgmmas_and_exponentials():
    epilogue = ["HGMMA.64x64x16.F32 R88, R120, gdesc[UR8].tnspB, R88", *["STG.E.128 [R2], R8"] * 4]
    loop = _loop_of(_body(MAIN, epilogue))
    assert loop.start == 16, "the shorter epilogue loop issues a wgmma among stores: less of its work is math"
    assert _loop_of(_body(["HGMMA.64x128x16.F32 R24, gdesc[UR8], RZ, !UPT"])).count("HGMMA") == 1
    assert _loop_of(_body(["FADD R1, R1, R2"])) is None, "no loop issues a wgmma"
    # the 8-bit stage's loop: Q.K^T on IGMMA (int8), P.V on QGMMA (e4m3), no HGMMA at all
    eight_bit = ["BAR.SYNC.DEFER_BLOCKING R5, 0x100", "WARPGROUP.ARRIVE", "IGMMA.64x128x32.S8.S8 R24, gdesc[UR8], RZ, !UPT",
                 "QGMMA.64x128x32.F32.E4M3.E4M3 R88, R120, gdesc[UR12], R88", "MUFU.EX2 R62, R62"]
    loop = _loop_of(_body(eight_bit))
    assert loop.count(("IGMMA", "QGMMA")) == 2 and summarize_loop(loop).barrier_to_wgmma == 2


def test_the_summary_counts_and_the_turn_to_its_first_wgmma():
    summary = summarize_loop(_loop_of(_body(MAIN)))
    assert summary.instructions == len(MAIN) + 1
    assert summary.r2ur == 0 and summary.uniform == 1 and summary.watched == 2
    assert summary.barrier_to_wgmma == 3 and summary.similarity is None
    late = ["BAR.SYNC.DEFER_BLOCKING R5, 0x100", *[f"FMUL R{88 + i}, R{88 + i}, R176" for i in range(6)],
            "R2UR UR8, R24", "@UP0 UIADD3 UR4, UR4, 0x1, URZ", *MAIN[2:]]
    moved = summarize_loop(_loop_of(_body(late)), reference=_loop_of(_body(MAIN)))
    assert moved.r2ur == 1 and moved.uniform == 1, "the predicated UIADD3 counts: a predicate is not the opcode"
    assert moved.barrier_to_wgmma == 10
    assert 0 < moved.similarity < 1
    assert summarize_loop(_loop_of(_body(MAIN)), reference=_loop_of(_body(MAIN))).similarity == 1.0


def test_the_tool_matches_a_trial_kernel_with_a_wrapper_of_its_own(capsys):
    tool = load_tool("sass_loops")
    reference = _listing(_body(MAIN))
    trial = _listing(_body(MAIN[:1] + ["R2UR UR8, R24"] + MAIN[1:]), name=STREAM_K_KERNEL)
    rows = compare_listings(reference, trial)
    assert [row.kernel for row in rows] == [STREAM_K_KERNEL]
    assert (rows[0].reference.r2ur, rows[0].trial.r2ur) == (0, 1) and rows[0].trial.similarity < 1
    table = tool.table(rows)
    assert "| half d64 StreamKTail QRing wgs2 n128 s3 pingpong persistent causal |" in table
    assert "| 0 -> 1 |" in table and "| 3 -> 4 |" in table
    assert compare_listings(reference, trial, kernel_filter="halfLi128E") == []
    known = {"QRing", "Config"}
    assert match_key(STREAM_K_KERNEL, known) == match_key(KERNEL, known) != match_key(KERNEL, set())


def test_the_tool_wants_a_trial(tmp_path, capsys):
    tool = load_tool("sass_loops")
    listing = tmp_path / "default.sass"
    listing.write_text(_listing(_body(MAIN)))
    try:
        tool.main(["s17_interleaved_softmax", "--reference", str(listing)])
    except SystemExit as exit_:
        assert exit_.code == 2
    assert "give the trial" in capsys.readouterr().err
    assert tool.main(["s17_interleaved_softmax", "--reference", str(listing), "--listing", str(listing)]) == 0
    assert "| 9 -> 9 |" in capsys.readouterr().out
