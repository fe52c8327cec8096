"""GPU test of the profile step (skipped without CUDA; ncu must be installed, or it says so and
skips): Nsight Compute on an mma.sync stage and a wgmma stage reads the fixed metric set, with
the tensor pipe the stage uses busy, at the mission problem and one long problem."""

import pytest

from stagelab.measure.launch import find_tool
from stagelab.measure.profile import PROFILED
from stagelab.stage import StageRun

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("stage_id, pipe", [("s3b_register_softmax", "HMMA"), ("s5_wgmma", "HGMMA")])
def test_profile_reads_the_metric_set(stage_id, pipe, tmp_path):
    if find_tool("ncu") is None:
        pytest.skip("ncu is not installed")
    run = StageRun(stage_id, "params/mission.yaml", track=False)  # the file that opts in to profiling
    run.build()
    run.resources()
    frame = run.profile(tmp_path)
    report = run.results.profile
    assert report.status == PROFILED, report.log[-4000:]
    assert report.tensor_pipe == pipe and len(report.problems) == 2 and len(report.reports) == 2
    mission = report.problems[0]
    assert 0 < mission.tensor_util_pct <= 100 and mission.dram_bytes > 0
    # a microsecond-scale kernel (units read right) at a rate no faster than the chip
    assert 1e-6 < mission.duration_s < 1e-2 and 0 < mission.tflops <= report.peak_tflops
    assert 0 < mission.occupancy_pct <= 100 and mission.registers > 0 and len(mission.stalls) == 3
    assert report.peak_tflops and report.peak_dram_gbps and not frame.empty
