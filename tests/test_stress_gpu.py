"""Issue 28 on a GPU (skipped without CUDA): the plant whose producer never issues a K tile is
judged a hang within 30 s, the stress step catches both ordering plants (tests/planted_sdpa.py), and the stage without
a plant passes it. tools/stress_gpu_check.py runs the same in one call and prints a table."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from planted_sdpa import make_sdpa_plant_checkout
from tool_module import load_tool

from stagelab.measure.watchdog import HANG_EXIT_CODE, HANG_VERDICT_S

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
STAGE = "s8_persistent_split"
# Rounds per perturbation: the tool's problems (two, one dtype) keep each round near a second.
ROUNDS = 3


@pytest.fixture(scope="module", autouse=True)
def needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


def test_a_k_tile_that_never_lands_is_judged_a_hang_within_30_s(tmp_path):
    root = make_sdpa_plant_checkout(tmp_path / "plant", "k_tile_never_issued")
    env = {**os.environ, "STAGELAB_ROOT": str(root), "PYTHONPATH": str(ROOT / "lib")}
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "stress_gpu_check.py"), "check", str(root),
                           "--stage", STAGE, "--params", str(root / "params" / "stress.yaml")],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == HANG_EXIT_CODE, proc.stdout[-2000:] + proc.stderr[-2000:]
    seconds = float(re.search(r"HANG verdict ([\d.]+) s after the checks began", proc.stdout)[1])
    assert seconds < HANG_VERDICT_S


def stress_of(tmp_path, plant, monkeypatch):
    from stagelab.measure.steps import StageContext
    from stagelab.measure.stress import stress_step

    root = make_sdpa_plant_checkout(tmp_path / (plant or "unplanted"), plant)
    params = root / "params" / "stress-check.yaml"
    params.write_text(load_tool("stress_gpu_check").STRESS_PARAMS.format(rounds=ROUNDS))
    monkeypatch.setenv("STAGELAB_ROOT", str(root))
    return stress_step(StageContext.load(STAGE, params))


@pytest.mark.parametrize("plant", ["k_release_early", "pv_no_final_wait"])
def test_stress_catches_an_ordering_plant(tmp_path, monkeypatch, plant):
    report = stress_of(tmp_path, plant, monkeypatch)
    assert report.passed is False, report.frame().to_string()


def test_the_stage_without_a_plant_passes_stress(tmp_path, monkeypatch):
    report = stress_of(tmp_path, None, monkeypatch)
    assert report.passed is True, report.failures()
