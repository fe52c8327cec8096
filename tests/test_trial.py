"""`stagelab try` without a GPU: the trial specs and their errors, the verdict judge, the GPU path
with its measuring steps faked at their seams (the MLflow store is a real SQLite one), and one
real build of a softmax trial (slow)."""

import difflib
import json
from pathlib import Path

import pytest

from stagelab.core import metrics as m
from stagelab.record import tracking
from stagelab.core.build import BuildResult
from stagelab.measure.checks import CheckResult
from stagelab.cli import build_parser
from stagelab.cli.trial import route, specs_from_args
from stagelab.core.errors import BuildError, ConfigError
from stagelab.core.paths import repo_root
from stagelab.measure.results import CheckReport, ResourceReport, TimingReport
from stagelab.measure.timing import TimingStats
from stagelab.run.trial import Narrowing, load_session, run_trials, unchecked_distributions
from stagelab.judge.trial import TrialEvidence, judge_trial
from stagelab.core.trial_spec import TrialSpec, parse_define

STAGE = "sm1_warp_online"
SOURCE = Path("kernels/softmax/sm1_warp_online.cu")


def parsed(*argv):
    return build_parser().parse_args(route(list(argv)))


# -- specs and their errors -------------------------------------------------------------
def test_each_flag_is_one_trial_named_after_what_it_changes():
    args = parsed("try", STAGE, "--variant", "v1", "--define", "A=1", "B=2", "--define", "A=3",
                  "--patch", "x.diff", "KNOB=1", "--hypothesis", "why")
    specs = specs_from_args(args)
    assert [s.name for s in specs] == ["v1", "A=1,B=2", "A=3", "x+KNOB=1"]
    assert specs[1].defines == {"A": "1", "B": "2"} and specs[3].patch == Path("x.diff")
    assert args.hypothesis == "why" and args.func.__name__ == "_cmd_try"


def test_note_and_import_are_words_after_try():
    assert parsed("try", "note", "RUN", "it was the clock").func.__name__ == "_cmd_try_note"
    assert parsed("try", "import", "trials.yaml").file == "trials.yaml"
    assert route(["try", "s8_persistent_split", "--variant", "note"]) == ["try", "s8_persistent_split",
                                                                            "--variant", "note"]


@pytest.mark.parametrize("text", ["BLOCK_N", "=3", "BLOCK N=3", "1X=2", "A="])
def test_a_define_must_be_name_equals_value(text):
    with pytest.raises(ConfigError, match="bad define"):
        parse_define(text)


def test_a_patch_first_then_its_defines():
    with pytest.raises(ConfigError, match="patch file first"):
        specs_from_args(parsed("try", STAGE, "--patch", "A=1", "x.diff"))


def test_unknown_variant_duplicate_names_and_no_trial_are_refused_before_any_build():
    with pytest.raises(ConfigError, match="has no variant 'nope'"):
        load_session(STAGE, [TrialSpec.of(variant="nope")])
    with pytest.raises(ConfigError, match="distinct"):
        load_session(STAGE, [TrialSpec.of(defines={"A": "1"}), TrialSpec.of(defines={"A": "1"})])
    with pytest.raises(ConfigError, match="at least one trial"):
        load_session(STAGE, [])


def test_a_missing_patch_and_one_that_does_not_apply(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_session(STAGE, [TrialSpec.of(patch=tmp_path / "missing.diff")])
    stale = tmp_path / "stale.diff"
    stale.write_text(f"--- a/{SOURCE}\n+++ b/{SOURCE}\n@@ -1,2 +1,2 @@\n-no such line\n+another\n no such line either\n")
    with pytest.raises(ConfigError, match="does not apply"):
        load_session(STAGE, [TrialSpec.of(patch=stale)])


def comment_patch(tmp_path) -> Path:
    """A real patch of the stage's source: one comment line after its first line."""
    lines = (repo_root() / SOURCE).read_text().splitlines(keepends=True)
    patched = lines[:1] + ["// trial: a comment only\n"] + lines[1:]
    patch = tmp_path / "comment.diff"
    patch.write_text("".join(difflib.unified_diff(lines, patched, fromfile=f"a/{SOURCE}", tofile=f"b/{SOURCE}")))
    return patch


def test_a_patch_is_applied_to_a_copy_of_the_sources_and_removed_after(tmp_path):
    session = load_session(STAGE, [TrialSpec.of(patch=comment_patch(tmp_path), defines={"ROWS_PER_BLOCK": "2"})])
    trial = session.trials[0]
    assert trial.registry.directory != session.ctx.registry.directory
    assert "+// trial: a comment only" in trial.source_diff and trial.stage.defines["ROWS_PER_BLOCK"] == "2"
    assert "trial: a comment" in trial.stage.source.read_text()
    assert "trial: a comment" not in (repo_root() / SOURCE).read_text()
    session.cleanup()
    assert not trial.stage.source.exists()


def test_the_try_file_times_its_own_shapes_and_narrowing_checks_its_options():
    session = load_session(STAGE, [TrialSpec.of(defines={"ROWS_PER_BLOCK": "2"})])
    params = session.ctx.params
    assert params.name == "softmax-try" and params.timing.modes == ("throughput",)
    assert {p.tag for p in params.timed_shapes()} == {"4096x1024", "8192x4096", "4096x4096"}
    assert {p.tag for p in params.shapes} >= {"1x1", "333x77"}
    only = Narrowing(only=("4096x1024",), repetitions=200).apply(params)
    assert {p.tag for p in only.timed_shapes()} == {"4096x1024", "4096x4096"} and only.timing.repetitions == 200
    for bad, match in ((Narrowing(only=("9x9",)), "not in the timing list"),
                       (Narrowing(contenders=("nope",)), "unknown contender"), (Narrowing(repetitions=3), "at least")):
        with pytest.raises(ConfigError, match=match):
            bad.apply(params)


def test_cli_errors_are_one_line_and_exit_2(stagelab_cli):
    for argv, said in ((["--define", "ROWS_PER_BLOCK"], "bad define"), (["--variant", "nope"], "no variant")):
        done = stagelab_cli("try", STAGE, *argv)
        assert done.returncode == 2 and said in done.stderr, done.stderr


# -- the judge --------------------------------------------------------------------------
@pytest.mark.parametrize("evidence, verdict", [
    (TrialEvidence(built=False, build_error="nvcc failed"), "build_failed"),
    (TrialEvidence(built=True, gates_passed=False, gpu_available=True), "resource_fail"),
    (TrialEvidence(built=True, gates_passed=True), "no_gpu"),
    (TrialEvidence(built=True, gpu_available=True, crash="illegal address", checks_passed=None), "incorrect"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=False, speedup_vs_default=2.0), "incorrect"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True), "error"),
    (TrialEvidence(built=True, gpu_available=True, timing_error="not measured: context lost"), "error"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True, timing_asked=False), "checked"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True, speedup_vs_default=1.04, min_gain=0.05),
     "valid_negative"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True, speedup_vs_default=0.9), "valid_negative"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True, speedup_vs_default=1.06, min_gain=0.05),
     "faster"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True, speedup_vs_default=1.0), "valid_negative"),
    # a correct trial timed against a default that failed its own checks gets no speed verdict
    (TrialEvidence(built=True, gpu_available=True, checks_passed=True, speedup_vs_default=2.0, default_correct=False),
     "error"),
    (TrialEvidence(built=True, gpu_available=True, checks_passed=False, default_correct=False), "incorrect"),
])
def test_the_verdict_follows_the_evidence(evidence, verdict):
    assert judge_trial(evidence).verdict == verdict


def test_the_verdict_says_why():
    assert "nvcc failed" in judge_trial(TrialEvidence(built=False, build_error="nvcc failed")).reason
    assert "+6.0%" in judge_trial(TrialEvidence(built=True, gpu_available=True, checks_passed=True,
                                                speedup_vs_default=1.06, min_gain=0.05)).reason


def test_a_correct_verdict_names_the_distributions_the_file_left_out():
    evidence = dict(built=True, gpu_available=True, checks_passed=True, speedup_vs_default=0.94, min_gain=0.05)
    partial = judge_trial(TrialEvidence(**evidence, unchecked_distributions=("large", "positive")))
    assert partial.verdict == "valid_negative" and partial.reason.endswith("not checked on large, positive "
                                                                         "(left out by the parameter file)")
    assert "not checked" not in judge_trial(TrialEvidence(**evidence)).reason
    failed = judge_trial(TrialEvidence(built=True, gpu_available=True, checks_passed=False,
                                       unchecked_distributions=("positive",)))
    assert failed.verdict == "incorrect" and "not checked" not in failed.reason


@pytest.mark.parametrize("stage, params, left_out", [
    ("s19_int8", "params/mission.yaml", ("large", "positive", "peaky", "zero_head", "tiny", "outlier")),
    ("s19_int8", "params/try-int8.yaml", ()),  # every distribution since a trial passed it without `large`
    ("s19_int8", "params/acceptance.yaml", ()),
    # a 16-bit stage is not checked on outlier (8-bit stages only), so acceptance leaves nothing out
    ("s18_three_turns", "params/acceptance.yaml", ()),
])
def test_the_distributions_left_out_are_the_familys_for_the_stages_inputs(stage, params, left_out):
    from stagelab.core.context import StageContext

    assert unchecked_distributions(StageContext.load(stage, repo_root() / params)) == left_out


# -- the GPU path, faked at its seams ------------------------------------------------------
P50_US = {"default": 10.0, "trial:fast": 8.0, "trial:slow": 12.0, "softmax_torch": 20.0}


def fake_build(tmp_path, name: str) -> BuildResult:
    folder = tmp_path / name
    folder.mkdir()
    ops = "FFMA" if name == "default" else "FMUL"
    (folder / "sass.txt").write_text("\tcode for sm_90a\n\t\tFunction : _Z6kernelv\n"
                                     f"        /*0000*/                   {ops} R1, R2, R3 ;\n")
    return BuildResult(STAGE, name, "hash", folder, "ptxas log", [], cached=True, seconds=0.5, module=object())


def fake_measuring(monkeypatch, tmp_path, broken: str = ""):
    """Builds, checks and timing faked: `broken` fails its checks; p50 from P50_US."""
    import stagelab.measure.steps
    import stagelab.run.trial

    def build_session(session, jobs):
        for measured, name in [(session.default, "default"), *((t.measured, t.spec.name) for t in session.trials)]:
            if name == "bad":
                measured.build_error = BuildError("nvcc failed on sm1_warp_online.cu (exit 1)", "static_assert")
                continue
            measured.build = fake_build(tmp_path, name)
            measured.resources = ResourceReport([], [], [])

    def check_step(ctx, built):
        passed = built.stage.key != broken
        return CheckReport([CheckResult("1x1", False, "float16", 0, 0.0, 0.0, 0.0, 1.0, 0.0, 0, 0.0, passed, "ok")])

    def time_builds(ctx, builds, desc=None):
        labels = [*builds, "softmax_torch"]
        stats = [TimingStats(label, "4096x4096", False, "throughput", 100, P50_US[label], 0, 0, 0, 0, 1.0, 1.0,
                             sm_clock_mhz=1700.0) for label in labels]
        return TimingReport(stats, ctx.stage.id, "softmax_", "throughput", clocks={"after_timing_sm_clock_mhz": "1700"})

    monkeypatch.setattr(stagelab.run.trial, "build_session", build_session)
    monkeypatch.setattr(stagelab.measure.steps, "check_step", check_step)
    monkeypatch.setattr(stagelab.measure.steps, "shared_check_step",
                        lambda entries: {name: check_step(ctx, built) for name, (ctx, built) in entries.items()})
    monkeypatch.setattr(stagelab.measure.steps, "time_builds", time_builds)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("stagelab.record.provenance.gpu_info", lambda: {"gpu": "a faked GPU"})


def trial_runs() -> dict[str, object]:
    from stagelab.record.journal import trials_filter

    c = tracking.client()
    experiment = c.get_experiment_by_name("stagelab-softmax")
    return {r.data.tags[m.TAG_TRIAL_NAME]: r for r in c.search_runs([experiment.experiment_id], trials_filter(STAGE))}


def test_each_trial_is_checked_timed_judged_and_recorded(monkeypatch, tmp_path, tmp_store):
    fake_measuring(monkeypatch, tmp_path, broken="wrong")
    specs = [TrialSpec.of(defines={"ROWS_PER_BLOCK": v}, name=n) for v, n in
             (("1", "fast"), ("2", "slow"), ("8", "wrong"), ("16", "bad"))]
    session = run_trials(STAGE, specs, hypothesis="rows per block", min_gain=0.05)
    assert {t.spec.name: t.verdict.verdict for t in session.trials} == {
        "fast": "faster", "slow": "valid_negative", "wrong": "incorrect", "bad": "build_failed"}
    runs = trial_runs()
    fast = runs["fast"]
    assert fast.data.tags[m.TAG_KIND] == m.KIND_TRIAL and fast.data.tags[m.TAG_TRIAL_OF] == STAGE
    assert fast.data.tags[m.TAG_HYPOTHESIS] == "rows per block" and m.TAG_OUTCOME not in fast.data.tags
    assert fast.data.metrics[m.speedup_geomean("default").key()] == pytest.approx(10.0 / 8.0)
    assert fast.data.metrics[m.speedup_geomean("torch").key()] == pytest.approx(20.0 / 8.0)
    assert fast.data.metrics[m.of_default("p50_us/4096x4096")] == 10.0
    assert fast.data.metrics["sm_clock_mhz/4096x4096"] == 1700.0
    assert "4096x4096 8.00 vs 10.00 us at 1700/1700 MHz" in fast.data.tags[m.TAG_KEY_NUMBERS]
    assert "trial:slow" not in str(fast.data.metrics), "each run holds only its own trial beside the default"
    artifacts = {a.path for a in tracking.client().list_artifacts(fast.info.run_id, "trial")}
    assert {"trial/trial.json", "trial/sass_vs_default.md", "trial/timing.csv"} <= artifacts
    sass = Path(tracking.client().download_artifacts(fast.info.run_id, "trial/sass_vs_default.csv")).read_text()
    assert "FMUL,1,0,1" in sass and "FFMA,0,1,-1" in sass
    assert runs["bad"].info.status == "FAILED"
    log = Path(tracking.client().download_artifacts(runs["bad"].info.run_id, "trial/build.log")).read_text()
    assert "static_assert" in log
    assert json.loads(runs["slow"].data.tags[m.TAG_TRIAL_DEFINES]) == {"ROWS_PER_BLOCK": "2"}


def test_a_trial_whose_main_loop_changed_says_so(monkeypatch, tmp_path, tmp_store):
    # s17's stream-K trials lost 5-15% to a main loop ptxas had rebuilt: every trial run carries the comparison
    from test_sass_loops import MAIN, _body, _listing

    fake_measuring(monkeypatch, tmp_path)
    import stagelab.run.trial

    listings = {"default": _listing(_body(MAIN)), "fast": _listing(_body(MAIN[:1] + ["R2UR UR8, R24"] + MAIN[1:]))}

    def build_session(session, jobs):
        for measured, name in [(session.default, "default"), *((t.measured, t.spec.name) for t in session.trials)]:
            measured.build = fake_build(tmp_path, name)
            (measured.build.directory / "sass.txt").write_text(listings[name])
            measured.resources = ResourceReport([], [], [])

    monkeypatch.setattr(stagelab.run.trial, "build_session", build_session)
    lines = []
    run_trials(STAGE, [TrialSpec.of(defines={"ROWS_PER_BLOCK": "1"}, name="fast")], progress=lines.append)
    assert lines[0].startswith("[sass] fast: main loops changed (similarity >= 0.9"), "said before any launch"
    run = trial_runs()["fast"]
    assert 0 < run.data.metrics[m.MAIN_LOOP_SIMILARITY_MIN.key()] < 1
    assert run.data.metrics[m.MAIN_LOOP_R2UR_ADDED.key()] == 1
    assert "main loops changed (similarity >= 0.9" in run.data.tags[m.TAG_KEY_NUMBERS]
    assert "+1 R2UR)" in run.data.tags[m.TAG_KEY_NUMBERS]
    table = Path(tracking.client().download_artifacts(run.info.run_id, "trial/main_loops_vs_default.csv")).read_text()
    assert "r2ur_trial" in table.splitlines()[0]


def test_the_default_is_checked_and_a_wrong_default_gives_no_speed_verdict(monkeypatch, tmp_path, tmp_store):
    # s14's first trial timed s13's launches against an unchecked default: the default is checked now
    fake_measuring(monkeypatch, tmp_path, broken="default")
    lines = []
    session = run_trials(STAGE, [TrialSpec.of(defines={"ROWS_PER_BLOCK": "1"}, name="fast")], progress=lines.append)
    assert "[check] default: checks 0/1 FAILED" in lines and "[check] fast: checks 1/1 ok" in lines
    verdict = session.trials[0].verdict
    assert verdict.verdict == "error" and "the default it is measured against failed its checks" in verdict.reason
    run = trial_runs()["fast"]
    assert run.data.metrics[m.of_default(m.CHECKS_FAILED.key())] == 1
    assert "default checks 0/1" in run.data.tags[m.TAG_KEY_NUMBERS]
    artifacts = {a.path for a in tracking.client().list_artifacts(run.info.run_id, "trial")}
    assert "trial/correctness_of_default.csv" in artifacts


def test_a_conclusion_goes_on_a_trial_and_only_on_one(monkeypatch, tmp_path, tmp_store, stagelab_cli):
    from stagelab.core.paths import WORKSPACE_ENV, results_dir

    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))  # the kept conclusion goes there, not the repo's
    fake_measuring(monkeypatch, tmp_path)
    run_id = run_trials(STAGE, [TrialSpec.of(defines={"ROWS_PER_BLOCK": "1"}, name="fast")]).trials[0].run_id
    done = stagelab_cli("try", "note", run_id, "kept: the default from now on")
    assert done.returncode == 0, done.stderr
    assert tracking.client().get_run(run_id).data.tags[m.TAG_CONCLUSION] == "kept: the default from now on"
    assert "kept: the default from now on" in (results_dir("softmax") / "conclusions.yaml").read_text()
    other = tracking.client().create_run(tracking.init_store("stagelab-softmax")).info.run_id
    done = stagelab_cli("try", "note", other, "no")
    assert done.returncode == 2 and "is not a trial" in done.stderr


# -- a real build ------------------------------------------------------------------------
@pytest.mark.slow
def test_without_a_gpu_a_trial_is_built_resource_checked_and_recorded_as_no_gpu(tmp_store, nvcc_available):
    specs = [TrialSpec.of(defines={"ROWS_PER_BLOCK": "2"}), TrialSpec.of(defines={"ROWS_PER_BLOCK": "0"})]
    session = run_trials(STAGE, specs, hypothesis="two rows per block", jobs=2)
    verdicts = {t.spec.name: t.verdict.verdict for t in session.trials}
    assert verdicts == {"ROWS_PER_BLOCK=2": "no_gpu", "ROWS_PER_BLOCK=0": "build_failed"}
    runs = trial_runs()
    built = runs["ROWS_PER_BLOCK=2"]
    assert built.data.metrics[m.MAX_REGISTERS.key()] > 0 and built.data.metrics[m.of_default(m.MAX_REGISTERS.key())] > 0
    assert built.data.tags[m.TAG_VERDICT] == "no_gpu" and "skipped" in built.data.tags[m.TAG_VERDICT_REASON]
    assert not any(k.startswith(("p50_us", "checks_")) for k in built.data.metrics), "nothing measured is claimed"
    failed = runs["ROWS_PER_BLOCK=0"]
    log = Path(tracking.client().download_artifacts(failed.info.run_id, "trial/build.log")).read_text()
    assert "ROWS_PER_BLOCK" in log


@pytest.mark.gpu
@pytest.mark.slow
def test_on_a_gpu_a_trial_is_checked_timed_with_clocks_and_judged(tmp_store):
    session = run_trials(STAGE, [TrialSpec.of(defines={"ROWS_PER_BLOCK": "2"})], hypothesis="two rows per block")
    trial = session.trials[0]
    assert trial.verdict.verdict in ("faster", "valid_negative"), trial.verdict
    run = trial_runs()["ROWS_PER_BLOCK=2"]
    assert run.data.metrics[m.CHECKS_FAILED.key()] == 0 and run.data.metrics[m.CHECKS_TOTAL.key()] > 0
    assert run.data.metrics[m.speedup_geomean("default").key()] > 0
    assert any(k.startswith(m.of_default("p50_us/")) for k in run.data.metrics)
    assert run.data.tags[m.TAG_TRIAL_GPU] != "none" and "vs" in run.data.tags[m.TAG_KEY_NUMBERS]
