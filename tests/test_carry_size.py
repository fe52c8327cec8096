"""The tree a device call carries stays under the device tool's cap with room for the largest folder
carried beside it, the wheelhouse or a FlashAttention-4 part (tools/carry_size.py): records and pages
grow every session, and a call over the cap is refused."""

import shutil
import subprocess
from pathlib import Path

import pytest
from tool_module import load_tool

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    return load_tool("carry_size")


def in_a_git_checkout() -> bool:
    return shutil.which("git") is not None and subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT, capture_output=True).returncode == 0


@pytest.mark.skipif(not in_a_git_checkout(), reason="the tracked files are git's to list")
def test_the_tree_leaves_room_for_the_wheelhouse_or_a_flash_attention_part(tool):
    carried, line = tool.report(ROOT, [])
    assert carried <= tool.CARRY_CAP_BYTES - tool.CARRIED_FOLDER_ALLOWANCE_BYTES, (
        line + ": compress the records (xz -9e) or move what no call needs out of the tree")


def test_a_carry_over_the_cap_is_named_with_its_largest_files(tool, tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "small.txt").write_text("x")  # untracked and not ignored: it travels too
    (tmp_path / ".gitignore").write_text("wheelhouse/\n")
    wheels = tmp_path / "wheelhouse"
    wheels.mkdir()
    with open(wheels / "big.whl", "wb") as big:
        big.truncate(tool.CARRY_CAP_BYTES)  # sparse: one byte over the cap with small.txt
    carried, line = tool.report(tmp_path, ["wheelhouse"])
    assert carried == tool.CARRY_CAP_BYTES + len("x") + len("wheelhouse/\n")
    assert "OVER the cap" in line and line.index("wheelhouse/big.whl 64.0 MiB") < line.index("small.txt")
    assert tool.report(tmp_path, [])[1].startswith("a device call carries 0.0 MiB of 64 MiB (the tree): fits")
