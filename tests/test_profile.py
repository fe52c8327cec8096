"""The Nsight Compute step without a GPU: the command, the raw CSV page, the summary, the gates,
the skip paths and the metric keys.

tests/fixtures/ncu_raw_page.csv is hand-written in the format of `ncu --import R --csv --page raw`
(a header row of ID columns and metric names, a row of units, one row per kernel launch,
thousands separators in numbers, ==PROF== lines before the header); it was not captured on a
device. Its two launches (a main kernel and a small second one) check that a problem's kernels
are summed or time-weighted.
"""

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from stagelab.record import flatten

from stagelab.core import metrics

from stagelab.measure import ncu, profile
from stagelab.core.errors import ConfigError
from stagelab.core.registry_fields import NCU_GATE_KEYS, ResourceGates, parse_gates
from stagelab.core.resources import KernelResources
from stagelab.measure.steps import StageContext

FIXTURE = Path(__file__).parent / "fixtures" / "ncu_raw_page.csv"
FLOPS = 1e9


def fixture_rows():
    return ncu.parse_raw_csv(FIXTURE.read_text())


def test_raw_page_parsed_in_si_units():
    rows = fixture_rows()
    assert [r[ncu.KERNEL_COLUMN] for r in rows] == ["sdpa_s5_kernel", "sdpa_combine_kernel"]
    assert rows[0][ncu.DURATION] == pytest.approx(40e-6)         # 40,000 nsecond
    assert rows[0][ncu.DRAM_BYTES] == 3_145_728                  # thousands separators
    assert rows[0][ncu.SM_CLOCK_HZ] == pytest.approx(1.755e9)
    assert rows[0]["CC"] == "9.0"                                # identifying columns stay text


def test_scaled_units_and_missing_values():
    text = ('"ID","Kernel Name","dram__bytes.sum","gpu__time_duration.sum","lts__t_sector_hit_rate.pct",'
            '"sm__cycles_elapsed.avg.per_second"\n"","","Mbyte","usecond","%","GHz"\n"0","k","1.5","2","n/a","1.98"\n')
    [row] = ncu.parse_raw_csv(text)
    assert row[ncu.SM_CLOCK_HZ] == pytest.approx(1.98e9)
    assert row[ncu.DRAM_BYTES] == pytest.approx(1.5e6) and row[ncu.DURATION] == pytest.approx(2e-6)
    assert row[ncu.L2_HIT] != row[ncu.L2_HIT]  # nan
    assert ncu.parse_raw_csv("==ERROR== the application returned an error\n") == []


def test_summary_sums_and_weights_the_kernels_of_one_launch():
    p = profile.summarize("2x8x512x64", FLOPS, fixture_rows())
    assert p.duration_s == pytest.approx(50e-6)
    assert p.tensor_util_pct == pytest.approx(48.0)              # (60 x 40 us + 0 x 10 us) / 50 us
    assert p.tflops == pytest.approx(20.0)                       # 1e9 FLOP / 50 us
    assert p.dram_bytes == 4_194_304 and p.flop_per_byte == pytest.approx(FLOPS / 4_194_304)
    assert p.l2_hit_pct == pytest.approx(73.5) and p.occupancy_pct == pytest.approx(25.0)
    assert p.l2_bytes == 17_825_792 and p.l2_pct == pytest.approx(46.0)  # (55 x 40 us + 10 x 10 us) / 50 us
    assert p.registers == 168 and p.bank_conflicts == 1024
    assert list(p.stalls) == ["long_scoreboard", "wait", "barrier"]
    assert p.stalls["long_scoreboard"] == pytest.approx(1.36)
    assert p.dram_peak_bytes_per_s == pytest.approx(2048 * 1.593e9)


def test_the_profile_names_the_tensor_opcode_and_reads_the_one_tensor_counter():
    assert profile.tensor_pipe([{"kernel": "a", "HGMMA": 12, "HMMA": 0}]) == "HGMMA"
    assert profile.tensor_pipe([{"kernel": "a", "QGMMA": 16}, {"kernel": "t"}]) == "QGMMA"
    assert profile.tensor_pipe([{"kernel": "a", "HGMMA": 0, "HMMA": 40}]) == "HMMA"
    assert profile.tensor_pipe([{"kernel": "a"}]) == "HMMA"
    assert ncu.TENSOR_PIPE in ncu.metric_set() and "gmma" not in ncu.TENSOR_PIPE


@pytest.mark.parametrize("unit, seconds", [("ns", 13792e-9), ("nsecond", 13792e-9), (" usecond", 13792e-6),
                                           ("ms", 13.792), ("s", 13792.0)])
def test_durations_in_every_spelling_of_their_unit(unit, seconds):
    # An H100's ncu wrote a 13.8 us kernel as 13792 in a unit the spelled-out names missed.
    text = f'"ID","Kernel Name","gpu__time_duration.sum","dram__bytes.sum"\n"","","{unit}","B"\n"0","k","13,792","2"\n'
    [row] = ncu.parse_raw_csv(text)
    assert row[ncu.DURATION] == pytest.approx(seconds) and row[ncu.DRAM_BYTES] == 2


def test_profile_command_profiles_only_the_stage_kernels():
    kernels = [KernelResources("k", "_ZN12_GLOBAL__N_114sdpa_s0_kernelI6__halfLi64EEEv11SdpaProblem", "sm_90a"),
               KernelResources("k", "_ZN12_GLOBAL__N_114sdpa_s0_kernelI6__halfLi128EEEv11SdpaProblem", "sm_90a")]
    regex = profile.kernel_regex(kernels)
    command = ncu.profile_command("/opt/ncu", "/tmp/r", regex, ncu.metric_set(), ["python3", "-m", "x"])
    assert regex == "^(sdpa_s0_kernel)$"  # whole base names (ncu leaves out namespaces and template arguments)
    assert command[command.index("--kernel-name") + 1] == "regex:^(sdpa_s0_kernel)$"
    assert command[command.index("--export") + 1] == "/tmp/r"
    assert command[command.index("--metrics") + 1].split(",") == ncu.metric_set()
    assert command[-3:] == ["python3", "-m", "x"]
    assert ncu.csv_command("/opt/ncu", "/tmp/r.ncu-rep")[1:] == ["--import", "/tmp/r.ncu-rep", "--csv", "--page", "raw",
                                                                 "--print-units", "base"]


def test_a_triton_instance_is_profiled_by_its_kernel_name_alone():
    """A Triton spec's instance is filed as kernel<name>; ncu sees the Triton function's own name."""
    kernels = [KernelResources("_kernel<fp16>", "_Z7_kernelI4fp16Ev", "sm_90a"),
               KernelResources("_kernel<bf16>", "_Z7_kernelI4bf16Ev", "sm_90a"),
               KernelResources("_prepass", "_prepass", "sm_90a")]
    assert profile.kernel_regex(kernels) == "^(_kernel|_prepass)$"


def test_registry_ncu_gates_in_the_seeds_form():
    gates = parse_gates("s", {"ncu": {"tensor_util_min": 0.5}}, ResourceGates())
    assert set(profile.GATE_FIELDS) == set(NCU_GATE_KEYS)  # every gate the registry takes is judged
    assert gates.ncu == (("tensor_util_min", 0.5),)
    with pytest.raises(ConfigError, match="unknown key"):
        parse_gates("s", {"ncu": {"tensor_min": 0.5}}, ResourceGates())
    with pytest.raises(ConfigError, match=r"fraction of peak"):
        parse_gates("s", {"ncu": {"tensor_util_min": 50}}, ResourceGates())


def s5_context(gpu: bool, ncu_gates=()) -> StageContext:
    ctx = StageContext.load("s5_wgmma", "params/acceptance.yaml")
    stage = replace(ctx.stage, gates=replace(ctx.stage.gates, ncu=ncu_gates))
    return replace(ctx, stage=stage, gpu_available=gpu)


def test_skipped_without_gpu_and_unavailable_without_ncu(tmp_path, monkeypatch):
    assert profile.profile_step(s5_context(False), None, None, tmp_path).status == profile.SKIPPED
    monkeypatch.setattr(profile, "find_tool", lambda name: None)
    report = profile.profile_step(s5_context(True), None, None, tmp_path)
    assert report.status == profile.UNAVAILABLE and report.gates_passed is None and not report.problems


def fake_ncu(calls):
    """Stands in for run_under_tool: `--export BASE` writes BASE.ncu-rep; `--import` prints the fixture."""
    def run(command, timeout_s, env):
        calls.append(command)
        if "--export" in command:
            Path(command[command.index("--export") + 1] + ncu.REPORT_SUFFIX).write_bytes(b"report")
            return 0, "==PROF== Disconnected from process 4242"
        return 0, FIXTURE.read_text()
    return run


@pytest.mark.parametrize("limit, passed", [(0.45, True), (0.5, False)])
def test_profile_step_with_a_stand_in_ncu(tmp_path, monkeypatch, limit, passed):
    monkeypatch.setattr(profile, "find_tool", lambda name: "/opt/ncu")
    monkeypatch.setattr(profile, "device_peaks", lambda problems, opcode: (800.0, 3262.464))
    ctx = s5_context(True, (("tensor_util_min", limit),))
    built = SimpleNamespace(stage=SimpleNamespace(resources=[
        KernelResources("k", "_ZN12_GLOBAL__N_114sdpa_s5_kernelI6__halfLi64EEEv11SdpaProblem", "sm_90a")]))
    resources = SimpleNamespace(instructions=[{"kernel": "k", "HGMMA": 8}])
    calls = []
    report = profile.profile_step(ctx, built, resources, tmp_path, run=fake_ncu(calls))
    assert report.status == profile.PROFILED and report.tensor_pipe == "HGMMA"
    assert [p.problem for p in report.problems] == ["2x8x512x64", "1x32x8192x128"]  # mission, longest long
    assert all(path.is_file() for path in report.reports) and len(report.reports) == 2
    profiled = [c for c in calls if "--export" in c]
    assert profiled[0][-2:] == ["--problem", "2x8x512x64"] and "stagelab.measure.launch" in profiled[0]
    assert report.gates_passed is passed                          # 48% tensor pipe against the limit
    keys = flatten.profile_metrics(report)
    assert keys[metrics.NCU_TENSOR_UTIL.key("2x8x512x64")] == pytest.approx(48.0)
    assert keys[metrics.NCU_DURATION_US.key("2x8x512x64")] == pytest.approx(50.0)
    assert keys[metrics.NCU_STALL.key("long_scoreboard", "1x32x8192x128")] == pytest.approx(1.36)
    assert keys[metrics.NCU_PEAK_DRAM_GBPS.key()] == pytest.approx(3262.464)


def test_failed_child_is_recorded_failed(tmp_path, monkeypatch):
    monkeypatch.setattr(profile, "find_tool", lambda name: "/opt/ncu")
    built = SimpleNamespace(stage=SimpleNamespace(resources=[]))
    report = profile.profile_step(s5_context(True), built, None, tmp_path,
                                  run=lambda command, timeout_s, env: (1, "==ERROR== Failed to find metric"))
    assert report.status == profile.FAILED and "Failed to find metric" in report.log and not report.problems


def profiled_report(tmp_path, monkeypatch) -> profile.ProfileReport:
    monkeypatch.setattr(profile, "find_tool", lambda name: "/opt/ncu")
    monkeypatch.setattr(profile, "device_peaks", lambda problems, opcode: (800.0, 3262.464))
    built = SimpleNamespace(stage=SimpleNamespace(resources=[]))
    resources = SimpleNamespace(instructions=[{"kernel": "k", "HGMMA": 8}])
    return profile.profile_step(s5_context(True), built, resources, tmp_path, run=fake_ncu([]))


def test_recorded_profile_and_sanitize_reach_the_run_the_page_and_the_roofline(tmp_store, tmp_path, monkeypatch):
    """Recorder -> store -> results page column and roofline points: a rename on either side breaks this."""
    from stagelab.record import tracking
    from stagelab.judge.outcome import Outcome
    from stagelab.record.recorder import MlflowRecorder
    from stagelab.record.report import write_report
    from stagelab.record.tables import latest_runs, roofline_points
    from stagelab.measure.results import StageResults
    from stagelab.measure.sanitize import CLEAN, SANITIZER_TOOLS, SanitizeReport, SanitizerVerdict

    recorder = MlflowRecorder(s5_context(True))
    report = profiled_report(recorder.folder("profile"), monkeypatch)
    recorder.record_sanitize(SanitizeReport([SanitizerVerdict(t, CLEAN, 0, log="ok") for t in SANITIZER_TOOLS]))
    recorder.record_profile(report)
    tracking.set_tags(recorder.run_id, {metrics.TAG_GPU: "Test GPU"})
    recorder.finish(Outcome("pass", "test"), StageResults())
    run = tracking.client().get_run(recorder.run_id)
    assert run.data.tags[metrics.TAG_SANITIZE] == "clean" and run.data.tags[metrics.TAG_PROFILE] == "profiled"
    assert run.data.tags[f"{metrics.TAG_TOP_STALLS}/2x8x512x64"] == "long_scoreboard,wait,barrier"
    assert run.data.metrics[metrics.NCU_TENSOR_UTIL.key("2x8x512x64")] == pytest.approx(48.0)
    artifacts = {f.path for f in tracking.client().list_artifacts(recorder.run_id, "results/profile")}
    assert "results/profile/s5_wgmma_2x8x512x64.ncu-rep" in artifacts
    assert {f.path for f in tracking.client().list_artifacts(recorder.run_id, "results/sanitizer")} >= {
        "results/sanitizer/memcheck.log.txt", "results/sanitizer/racecheck.log.txt"}
    page = write_report(["acceptance"], out_dir=tmp_path / "page").read_text()
    assert "tensor pipe @mission (ncu %)" in page and "| clean " in page
    runs, _ = latest_runs("stagelab-sdpa", ["acceptance"], None)
    points, peaks = roofline_points(runs, "acceptance")
    assert sorted(points["problem"]) == ["1x32x8192x128", "2x8x512x64"] and peaks == (800.0, 3262.464)
    assert sorted(points["tflops"]) == pytest.approx(sorted(p.tflops for p in report.problems))
    import matplotlib

    matplotlib.use("Agg")
    from stagelab.record.plots import roofline_plot

    roofline_plot(points, *peaks, path=tmp_path / "roofline.png")
    assert (tmp_path / "roofline.png").stat().st_size > 0


def test_the_roofline_peak_is_the_stages_own_fp8_for_qgmma(monkeypatch):
    """An H100 (132 SMs) at ncu's 1.47 GHz: 793 dense fp16 TFLOP/s, twice that for an e4m3 stage."""
    import types

    import torch

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(major=9, minor=0, multi_processor_count=132))
    [problem] = [profile.summarize("2x8x512x64", FLOPS, fixture_rows())]
    problem.sm_clock_hz = 1.467e9
    fp16, dram = profile.device_peaks([problem], "HGMMA")
    fp8, _ = profile.device_peaks([problem], "QGMMA")
    assert fp16 == pytest.approx(132 * 1.467e9 * 4096 / 1e12) and fp8 == pytest.approx(2 * fp16)
    assert dram == pytest.approx(problem.dram_peak_bytes_per_s / 1e9)
