"""tools/sass_kernel_match.py: two builds' kernels matched by their code, whatever their names."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import sass_kernel_match as match  # noqa: E402


def listing(*kernels: tuple[str, list[str]]) -> str:
    """A cuobjdump -sass listing of kernels (name, instructions), offsets and encodings included."""
    lines = ["", "\tcode for sm_90a", "\t.target\tsm_90a", ""]
    for name, body in kernels:
        lines.append(f"\t\tFunction : {name}")
        lines.append('\t.headerflags\t@"EF_CUDA_SM90"')
        for i, instruction in enumerate(body):
            lines.append(f"        /*{16 * i:04x}*/                   {instruction} ;    /* 0x00000a00ff017b{i:02x} */")
            lines.append(f"                                                           /* 0x000fe2000000{i:04x} */")
        lines.append("\t\t..........")
    return "\n".join(lines) + "\n"


LOOP = ["LDC R1, c[0x0][0x28]", "HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ", "EXIT"]
STORE = ["LDC R1, c[0x0][0x28]", "STG.E desc[UR4][R2.64], R0", "EXIT"]


def test_renamed_kernels_with_the_same_code_match(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    (before / "s1.sass.txt").write_text(listing(("_Z4loopI6ConfigEv", LOOP), ("_Z5storev", STORE)))
    # the names change (a template parameter more); the code does not; the order moves
    (after / "s1.sass.txt").write_text(listing(("_Z5storeI4BodyEv", STORE), ("_Z4loopI6Config4BodyEv", LOOP)))
    assert match.main([str(before), str(after)]) == 0


def test_a_changed_kernel_is_named_on_both_sides(tmp_path, capsys):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    (before / "s1.sass.txt").write_text(listing(("_Z4loopv", LOOP), ("_Z5storev", STORE)))
    changed = LOOP[:1] + ["NOP"] + LOOP[1:]
    (after / "s1.sass.txt").write_text(listing(("_Z4loopv", changed), ("_Z5storev", STORE)))
    assert match.main([str(before), str(after)]) == 1
    out = capsys.readouterr().out
    assert "s1: 1 of 2 kernels before" in out
    assert "only before: _Z4loopv" in out and "only after:  _Z4loopv" in out


def test_a_duplicate_kernel_counts_once_per_copy(tmp_path):
    before = match.kernels(listing(("_Z1av", LOOP), ("_Z1bv", LOOP)))
    after = match.kernels(listing(("_Z1cv", LOOP), ("_Z1dv", STORE)))
    matched, lonely_before, lonely_after = match.compare(before, after)
    # one of the two identical copies found its twin, which one is arbitrary
    assert matched == 1 and len(lonely_before) == 1 and lonely_before[0] in {"_Z1av", "_Z1bv"}
    assert lonely_after == ["_Z1dv"]
