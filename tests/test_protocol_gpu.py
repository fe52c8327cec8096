"""Issue 46 on a GPU (skipped without CUDA): the protocol step on s6 at small ragged problems, in a
scratch checkout (tests/planted_sdpa.py). Without a plant every launch's record is clean; with the K
slot released before the wgmma reading it retires (k_release_early), which passes every check, the
step names rule release_before_retire and the stage is judged `incorrect` with reason `protocol`."""

import pytest
import torch
from planted_sdpa import make_sdpa_plant_checkout

from stagelab.judge.judge import judge
from stagelab.judge.outcome import PROTOCOL

pytestmark = pytest.mark.gpu
STAGE = "s6_tma_warpspec"
# Small and ragged: partial key tiles, causal and not, both head dims.
PARAMS = """description: the protocol step's GPU test
dtypes: [float16, bfloat16]
seeds: [0, 1]
shapes:
  - {shape: [1, 2, 333, 64], causal: [false, true]}
  - {shape: [1, 2, 200, 128], causal: [false, true]}
mission: {shape: [1, 2, 333, 64], causal: false}
timing: {dtype: float16}
steps: [protocol]
"""


@pytest.fixture(scope="module", autouse=True)
def needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


def stage_run(tmp_path, monkeypatch, plant):
    from stagelab.stage import StageRun

    root = make_sdpa_plant_checkout(tmp_path / (plant or "unplanted"), plant)
    params = root / "params" / "protocol-check.yaml"
    params.write_text(PARAMS)
    monkeypatch.setenv("STAGELAB_ROOT", str(root))
    run = StageRun(STAGE, params, track=False)
    run.build(with_parent=False)
    run.check()
    run.protocol()
    return run


def test_the_stage_without_a_plant_keeps_the_protocol(tmp_path, monkeypatch):
    run = stage_run(tmp_path, monkeypatch, None)
    report = run.results.protocol
    assert report.passed is True, report.failures()
    assert len(report.launches) == 8 and all(launch.report == "" for launch in report.launches)
    # judged without its parent (s5 is not built or timed here): the step changes nothing
    assert judge(run.results, gpu_available=True, has_parent=False, min_gain=0.0).outcome == "pass"


def test_an_early_k_release_is_caught_with_its_rule_named(tmp_path, monkeypatch):
    run = stage_run(tmp_path, monkeypatch, "k_release_early")
    report = run.results.protocol
    assert report.passed is False and "rule release_before_retire, ring K" in report.failures(), report.frame()
    # the plant passes every check (issue 46, on an H200): only the protocol build sees it
    assert run.results.checks.passed, "a check failed on the plant: " + run.results.checks.failures()
    outcome = judge(run.results, gpu_available=True, has_parent=False, min_gain=0.0)
    assert outcome.outcome == "incorrect", outcome
    assert outcome.reason.startswith(f"{PROTOCOL}: {STAGE}: rule release_before_retire"), outcome.reason
