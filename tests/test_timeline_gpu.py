"""GPU test of the launch timeline (tools/microbench/sdpa_timeline.cu, skipped without CUDA): the
stamped build of s8 runs a handful of launches of a small problem, writes one record per block and
launch with every phase of its path stamped in order, and tools/timeline_report.py reads it."""

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
from tool_module import load_tool

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
LAUNCHES = 4
# (1,2,512,64): the mission's short policy (the key split), 8 query tiles of 64 rows per head
SHAPE = ["1", "2", "512", "64"]
BLOCKS = 1 * 2 * 512 // 64
# the key split's consumer path, in the order one block meets it
KEY_SPLIT_PATH = ["entry", "prologue", "consumer_go", "q_landed", "k_landed", "first_tile", "mainloop",
                  "merge_ready", "folded", "stored"]


@pytest.fixture(scope="module")
def timeline_csv(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    out = tmp_path_factory.mktemp("timeline")
    binary = out / "sdpa_timeline"
    subprocess.run([nvcc, "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-DWS_TIMELINE=1",
                    '-DSTAGE_SOURCE="s8_persistent_split.cu"', "-I", str(ROOT / "kernels/sdpa"), "-o", str(binary),
                    str(ROOT / "tools/microbench/sdpa_timeline.cu")], check=True, capture_output=True, text=True)
    csv = out / "timeline.csv"
    with csv.open("w") as handle:
        subprocess.run([str(binary), *SHAPE, "0", str(LAUNCHES)], check=True, stdout=handle, timeout=120)
    return csv


def test_every_block_of_every_launch_has_a_record(timeline_csv):
    df = pd.read_csv(timeline_csv)
    assert sorted(df["launch"].unique()) == list(range(LAUNCHES))
    assert (df.groupby("launch")["block"].nunique() == BLOCKS).all()
    assert (df["ns_entry"] > 0).all()


def test_the_key_splits_phases_are_stamped_in_order(timeline_csv):
    df = pd.read_csv(timeline_csv)
    clocks = df[[f"clk_{phase}" for phase in KEY_SPLIT_PATH]]
    assert (clocks > 0).all().all(), "a phase of the key split's path was never stamped"
    assert (clocks.diff(axis=1).iloc[:, 1:] >= 0).all().all(), "phases out of order within a block"


def test_the_producer_decodes_issues_q_and_q_lands_in_order(timeline_csv):
    df = pd.read_csv(timeline_csv)
    producer = df[[f"clk_{phase}" for phase in ("prologue", "producer_go", "item_decoded", "q_issued", "q_landed")]]
    assert (producer > 0).all().all()
    assert (producer.diff(axis=1).iloc[:, 1:] >= 0).all().all(), "Q landed before its TMA was issued, or worse"


def test_the_report_reads_it(timeline_csv, tmp_path):
    report = load_tool("timeline_report")
    assert report.main([str(timeline_csv), "--markdown", str(tmp_path / "t.md")]) == 0
    assert "until Q landed" in (tmp_path / "t.md").read_text()
