"""s18's plan for three warpgroups taking turns at head_dim 64 (sched/mixed_tiles.cuh's
plan_three_turns, the host half of MixedTiles), compiled by nvcc for the CPU (tools/schedule_plan.cu): the list
WorkOrder deals names every tile once, and the plan takes three warpgroups where 192-row items
divide the rows and rounds well, and two where they leave ragged tiles or rounds."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
H100_SMS, H100_L2_MB = 132, 50
MIN_GAIN = 1.02  # kThreeTurnsMinGain in sdpa_persistent_split.cuh


@pytest.fixture(scope="module")
def turns_plan(tmp_path_factory):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    binary = tmp_path_factory.mktemp("turns_plan") / "turns_plan"
    subprocess.run([nvcc, "-std=c++17", "-O2", "-I", str(ROOT / "kernels" / "sdpa"), "-o", str(binary),
                    str(ROOT / "tools" / "schedule_plan.cu")], check=True)
    return binary


def plan(binary, batch_heads, seq_len, kv_mb, l2_mb=H100_L2_MB, sms=H100_SMS):
    out = subprocess.run([str(binary), "plan", str(batch_heads), str(seq_len), str(sms), str(kv_mb), str(l2_mb)],
                         check=True, capture_output=True, text=True).stdout.split()
    big, m_tiles, snake, three, two = map(int, out)
    return {"big": big, "m_tiles": m_tiles, "snake": bool(snake), "gain": two / three}


def test_every_dealt_list_names_each_tile_once(turns_plan):
    result = subprocess.run([str(turns_plan), "cover"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip() == "ok"


def test_bert_base_512_takes_three_warpgroups_in_rotated_rounds(turns_plan):
    """32 x 12 heads of 512 rows: 192 + 192 + 128, 1152 items on 132 blocks; K/V (48 MB) too large for
    the snake. Two warpgroups run 1536 items of 128 rows: 12 rounds on the busiest block."""
    bert = plan(turns_plan, 32 * 12, 512, kv_mb=48)
    assert (bert["big"], bert["m_tiles"], bert["snake"]) == (3, 3, False)
    assert bert["gain"] >= MIN_GAIN


def test_sdxl_self_attention_cuts_big_and_short_items_in_a_snake(turns_plan):
    """2 x 10 heads of 4096 rows (K/V 20 MB, in L2): whole 192-row items leave 440 items on 132 blocks,
    a fourth round for a third of them; big items then 128-row ones in a snake even the rounds."""
    sdxl = plan(turns_plan, 2 * 10, 4096, kv_mb=20)
    assert sdxl["snake"] and 0 < sdxl["big"] < sdxl["m_tiles"]
    assert sdxl["big"] * 192 + (sdxl["m_tiles"] - sdxl["big"]) * 128 >= 4096
    assert sdxl["gain"] >= MIN_GAIN
    no_l2 = plan(turns_plan, 2 * 10, 4096, kv_mb=20, l2_mb=0)  # no snake without the L2 to hold K/V
    assert not no_l2["snake"] and no_l2["gain"] < MIN_GAIN


@pytest.mark.parametrize("batch_heads, seq_len, kv_mb", [
    (64 * 12, 197, 9.2),   # ViT-B/16: 197 = 192 + 5 rows, the 5-row tile as dear as a full one
    (128 * 12, 128, 24),   # BERT-base 128: one item of 128 rows either way
    (2 * 8, 2048, 4),      # 176 items of 192 rows against 256 of 128: two rounds of heavier items
])
def test_ragged_tiles_or_rounds_keep_two_warpgroups(turns_plan, batch_heads, seq_len, kv_mb):
    assert plan(turns_plan, batch_heads, seq_len, kv_mb)["gain"] < MIN_GAIN
