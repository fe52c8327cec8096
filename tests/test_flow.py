"""measure -> judge -> record on CPU: TimingStats rows in, speedups, evidence, an outcome and
metric keys out, and those keys read back by the results page (one schema on both sides)."""

import pytest

from stagelab.measure import gpu_clocks
from stagelab.core import metrics as m
from stagelab.record import tracking
from stagelab.measure.checks import CheckResult
from stagelab.families.sdpa import Shape
from stagelab.record.flatten import timing_metrics
from stagelab.judge.judge import evidence, judge
from stagelab.record.report import write_report
from stagelab.measure.results import PARENT_PREFIX, CheckReport, StageResults, TimingReport
from stagelab.measure.timing import summarize

MISSION = Shape(2, 8, 512, 64, False)
LONG = Shape(2, 8, 2048, 128, True)


def rows(contender, p50_by_shape, mode="cold"):
    """TimingStats of a contender whose every sample is its p50 (so the median is exact)."""
    return [summarize([p50] * 100, contender=contender, shape=shape, mode=mode) for shape, p50 in p50_by_shape.items()]


def report(stage_us, parent_us, flash_us=None, cudnn_us=None):
    stats = rows("s9_test", stage_us) + rows(PARENT_PREFIX + "s8_test", parent_us)
    if flash_us:
        stats += rows("sdpa_flash", flash_us)
    if cudnn_us:
        stats += rows("sdpa_cudnn", cudnn_us)
    return TimingReport(stats, "s9_test", "sdpa_", "cold", floor_us={"cold": 4.0})


def check_result(passed: bool) -> CheckResult:
    """One check's verdict at the mission problem (its numbers beside the point here)."""
    ratio = 0.5 if passed else 2.0
    return CheckResult(shape=MISSION.tag, causal=False, dtype="float16", seed=0, max_abs_err=ratio, lowprec_err=0.5,
                       atol=0.0, budget=1.0, err_budget_ratio=ratio, nonfinite=0, run_to_run_max_diff=0.0,
                       passed=passed, reason="ok" if passed else "error 2 over budget 1")


def test_summarize_percentiles_and_throughput():
    stats = summarize([10.0, 20.0, 30.0, 40.0], contender="x", shape=MISSION, mode="hot")
    assert stats.p50_us == 25.0 and stats.iqr_us == pytest.approx(15.0) and stats.shape == "2x8x512x64"
    assert stats.tflops == pytest.approx(MISSION.flops() / 25e-6 / 1e12)
    assert stats.gbps == pytest.approx(MISSION.bytes_moved(2) / 25e-6 / 1e9)


def test_speedups_are_contender_over_stage_per_problem():
    table = report({MISSION: 10.0, LONG: 100.0}, {MISSION: 12.0, LONG: 150.0},
                   flash_us={MISSION: 20.0, LONG: 80.0}, cudnn_us={MISSION: 15.0, LONG: 90.0}).speedups()
    by_shape = table.set_index("shape")
    assert by_shape.loc["2x8x512x64", "speedup_vs_parent"] == pytest.approx(1.2)
    assert by_shape.loc["2x8x512x64", "speedup_vs_flash"] == pytest.approx(2.0)
    assert by_shape.loc["2x8x2048x128_causal", "speedup_vs_flash"] == pytest.approx(0.8)
    # `best` is the fastest library contender per problem: cudnn at the mission, flash at the long one
    assert by_shape.loc["2x8x512x64", "speedup_vs_best"] == pytest.approx(1.5)
    assert by_shape.loc["2x8x2048x128_causal", "speedup_vs_best"] == pytest.approx(0.8)


def test_geomean_over_problems_drives_the_valid_negative():
    slower_then_faster = report({MISSION: 10.0, LONG: 100.0}, {MISSION: 9.0, LONG: 112.0})
    assert slower_then_faster.speedup_geomean(m.PARENT) == pytest.approx((0.9 * 1.12) ** 0.5)
    results = StageResults(built=object(), checks=CheckReport([]), timing=slower_then_faster)
    results.checks.results.append(check_result(passed=True))
    e = evidence(results, gpu_available=True, has_parent=True, min_gain=0.05)
    assert e.checks_passed is True and e.speedup_vs_parent == pytest.approx(1.004, abs=1e-3)
    outcome = judge(results, gpu_available=True, has_parent=True, min_gain=0.05)
    assert outcome.outcome == "valid_negative" and "+0.4%" in outcome.reason
    faster = StageResults(built=object(), checks=results.checks,
                          timing=report({MISSION: 10.0, LONG: 100.0}, {MISSION: 12.0, LONG: 120.0}))
    assert judge(faster, gpu_available=True, has_parent=True, min_gain=0.05).outcome == "pass"


def test_a_failed_check_beats_any_speed():
    results = StageResults(built=object(), checks=CheckReport([check_result(passed=False)]),
                           timing=report({MISSION: 1.0}, {MISSION: 100.0}))
    outcome = judge(results, gpu_available=True, has_parent=True, min_gain=0.05)
    assert outcome.outcome == "incorrect" and "normal: 1 of 1 checks" in outcome.reason


def test_timing_keys_come_from_the_schema():
    flat = timing_metrics(report({MISSION: 10.0}, {MISSION: 12.0}, flash_us={MISSION: 20.0}), MISSION.tag)
    assert flat[m.MISSION_P50_US.key()] == 10.0
    assert flat[m.P50_US.key(MISSION.tag)] == 10.0
    assert flat[m.speedup("flash").key(MISSION.tag)] == pytest.approx(2.0)
    assert flat[m.speedup_geomean(m.PARENT).key()] == pytest.approx(1.2)
    assert flat[m.TIMING_FLOOR_US.key("cold")] == 4.0
    hot = timing_metrics(TimingReport(rows("s9_test", {MISSION: 5.0}, mode="hot"), "s9_test", "sdpa_", "cold"),
                         MISSION.tag)
    assert m.P50_US.timed(MISSION.tag, "hot", "cold") in hot and m.MISSION_P50_US.key() not in hot


def test_clock_keys_only_where_the_clock_was_read():
    """A row that nvidia-smi sampled carries its clock and power into the stage's metrics; a row
    timed without it (nan) leaves no key rather than a nan metric."""
    sampled = summarize([10.0] * 100, contender="s9_test", shape=MISSION, mode="cold").with_clocks(
        gpu_clocks.summarize([gpu_clocks.parse_line("1500, 690.0, 0x4"), gpu_clocks.parse_line("1700, 650.0, 0x0")]))
    assert (sampled.sm_clock_mhz, sampled.min_sm_clock_mhz, sampled.power_w, sampled.power_capped_pct) == \
        (1600, 1500, 670, 50)
    unsampled = summarize([100.0] * 100, contender="s9_test", shape=LONG, mode="cold").with_clocks(None)
    flat = timing_metrics(TimingReport([sampled, unsampled], "s9_test", "sdpa_", "cold"), MISSION.tag)
    assert flat[m.SM_CLOCK_MHZ.key(MISSION.tag)] == 1600 and flat[m.POWER_CAPPED_PCT.key(MISSION.tag)] == 50
    assert not any(key.endswith(LONG.tag) for key in flat if key.split("/")[0] in {s.name for s in m.CLOCK_STATS})
    assert m.P50_US.key(LONG.tag) in flat


def test_written_keys_are_the_keys_the_report_reads(tmp_store, tmp_path):
    """Writer -> store -> page: a rename on either side breaks this test."""
    experiment_id = tracking.init_store("stagelab-sdpa")
    run_id = tracking.create_run(experiment_id, "s0_baseline", "acceptance")
    tracking.set_tags(run_id, {"outcome": "pass", "gpu": "Test GPU 2", "git_commit": "abc"})
    timed = report({MISSION: 10.0}, {MISSION: 12.0}, flash_us={MISSION: 20.0}, cudnn_us={MISSION: 30.0})
    tracking.log_metrics(run_id, timing_metrics(timed, MISSION.tag))
    tracking.end_run(run_id)
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    ladder = text.split("## acceptance")[1]
    header, _, row = [line for line in ladder.splitlines() if line.startswith("|")][:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["mission p50 (µs)"] == "10" and cells["vs parent (geomean)"] == "1.2"
    assert cells["vs flash @mission"] == "2" and cells["vs cudnn @mission"] == "3"
